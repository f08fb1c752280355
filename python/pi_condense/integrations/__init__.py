"""One-object hooks that plug pi-condense into agent loops and frameworks (optional extras)."""
