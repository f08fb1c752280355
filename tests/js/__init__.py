"""js tests."""
