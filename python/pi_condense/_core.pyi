# Type stubs for the native module pi_condense._core (built from rust/py).

__version__: str

# --- json (rust/py/src/json.rs) ---

# --- keys (rust/py/src/keys.rs) ---
