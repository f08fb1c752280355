"""session tests."""
