"""report tests."""
