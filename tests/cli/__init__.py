"""cli tests."""
