//! Whether a tool call is protected (`isProtected(name, args, cfg)`), read from Python values
//! by the compiled rule alone: used by the chain scan and by supersession.

use pi_condense_core::keys::{ProtectedMatcher, ToolRule};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyString};

use crate::jsread::{K, Keys, js_string, text};

/// `isProtected(name, args, cfg)` by the compiled rule alone (no predicate): the tool name,
/// then `args.path` against the globs.
pub(crate) fn matcher_protects(
    matcher: &ProtectedMatcher,
    keys: &Keys<'_>,
    name: Option<&Bound<'_, PyAny>>,
    args: Option<&Bound<'_, PyAny>>,
) -> PyResult<bool> {
    let path = args_path(keys, args)?.map(|p| text(&p));
    let path = path.as_deref();
    match matcher.rule() {
        ToolRule::Substring(_) => substring_protects(matcher, name, path),
        ToolRule::Names => match name.and_then(|n| n.downcast::<PyString>().ok()) {
            Some(name) => Ok(matcher.is_protected(Some(&text(name)), path)),
            None => Ok(matcher.is_protected(None, path)),
        },
    }
}

/// `isProtected(name, args)` under a string `protectedTools` (reference mode): `String(name)`
/// by substring, then `path` (`args.path` when it is a string) against the globs.
pub(crate) fn substring_protects(
    matcher: &ProtectedMatcher,
    name: Option<&Bound<'_, PyAny>>,
    path: Option<&str>,
) -> PyResult<bool> {
    // `raw.includes(toolName)` converts the name with `String()`.
    let name = js_string(name)?.to_utf16();
    Ok(matcher.is_protected_tool_utf16(&name) || matcher.is_protected(None, path))
}

/// `(args ?? ...)?.path` when it is a string.
fn args_path<'py>(
    keys: &Keys<'py>,
    args: Option<&Bound<'py, PyAny>>,
) -> PyResult<Option<Bound<'py, PyString>>> {
    let Some(args) = args.and_then(|a| a.downcast::<PyDict>().ok()) else {
        return Ok(None);
    };
    Ok(keys
        .get_bound(args.as_any(), K::Path)
        .and_then(|p| p.downcast_into::<PyString>().ok()))
}
