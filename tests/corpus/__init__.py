"""corpus tests."""
