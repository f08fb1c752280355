"""summarize tests."""
