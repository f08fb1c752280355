"""hooks tests."""
