"""config tests."""
