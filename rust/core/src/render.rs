//! Render phases 1-4 over light message views (in progress).
