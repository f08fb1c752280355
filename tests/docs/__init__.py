"""docs tests."""
