"""reliability tests."""
