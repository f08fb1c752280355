"""pipeline tests."""
