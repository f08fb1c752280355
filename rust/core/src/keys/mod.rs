//! Identity of tool-call occurrences and of tool-result content:
//! occurrence keys (`id@timestamp`), the dedup content hash, and the
//! protected-tool / protected-path predicate.
//!
//! Every function has a `&str` form (the fast path) and a UTF-16 form for
//! strings that hold lone surrogates, which JavaScript allows and Rust `str`
//! cannot represent.

pub(crate) mod content_hash;
pub(crate) mod occurrence;
pub mod protected;

pub use content_hash::{
    hash_tool_result, hash_tool_result_utf16, is_js_whitespace, normalize_result_text,
    normalize_result_text_utf16,
};
pub use occurrence::{
    OCC_KEY_SEPARATOR, ParsedOccKey, bare_tool_call_id, format_occ_key, occ_key, parse_occ_key,
    split_occ_key_units,
};
pub use protected::{Glob, ProtectedMatcher, ToolRule, VerdictMemo};
