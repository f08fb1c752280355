"""architecture tests."""
