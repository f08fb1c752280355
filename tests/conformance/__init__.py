"""conformance tests."""
