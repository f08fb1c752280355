"""render tests."""
