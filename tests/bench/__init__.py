"""bench tests."""
