//! `pi_condense._core.RenderOptions` (the render configuration, compiled once per `Config`)
//! and `RenderOutcome` (what a render returns).

use pi_condense_core::keys::{ProtectedMatcher, ToolRule};
use pi_condense_core::render::{
    ChainConfig, Diagnostic, Protection, PurgeConfig, RenderConfig,
};
use pyo3::prelude::*;
use pyo3::types::{PyList, PyString, PyTuple};

use crate::jsread::text;
use crate::pystr::{js_str_of, key_to_py, str_of_js};

/// What render reads from the config: the grace window, phases 2 and 3, and the protection
/// rule (tool names or, in reference mode, a `protectedTools` string matched by substring;
/// path globs), compiled once.
#[pyclass(name = "RenderOptions", module = "pi_condense._core", frozen)]
pub(crate) struct PyRenderOptions {
    recovery_grace_turns: f64,
    purge: Option<PurgeConfig>,
    chain: Option<ChainConfig>,
    pub(crate) matcher: ProtectedMatcher,
    spill_stub_ref_only: bool,
    /// Names these options (`crate::stamp`): a resumed render checks it.
    pub(crate) stamp: u64,
}

impl PyRenderOptions {
    /// The core render configuration (borrowing the compiled matcher).
    pub(crate) fn config(&self) -> RenderConfig<'_> {
        RenderConfig {
            recovery_grace_turns: self.recovery_grace_turns,
            purge: self.purge,
            chain: self.chain,
            protection: Some(&self.matcher as &dyn Protection),
            spill_stub_ref_only: self.spill_stub_ref_only,
            superseded: &[],
        }
    }
}

#[pymethods]
impl PyRenderOptions {
    /// `protected_tools_substring`: the reference mode's string `protectedTools` (then
    /// `protected_tools` must be empty): a tool is protected when the string includes
    /// `String(toolName)`, on UTF-16 code units.
    #[new]
    #[pyo3(signature = (
        *,
        recovery_grace_turns = 0.0,
        purge_errors = false,
        cooldown_turns = None,
        min_arg_chars = None,
        chain_compression = false,
        strip_final_assistant_thinking = false,
        protected_tools = Vec::new(),
        protected_paths = Vec::new(),
        protected_tools_substring = None,
        spill_stub_ref_only = false,
    ))]
    #[allow(clippy::too_many_arguments)]
    fn py_new(
        recovery_grace_turns: f64,
        purge_errors: bool,
        cooldown_turns: Option<f64>,
        min_arg_chars: Option<f64>,
        chain_compression: bool,
        strip_final_assistant_thinking: bool,
        protected_tools: Vec<Bound<'_, PyString>>,
        protected_paths: Vec<Bound<'_, PyString>>,
        protected_tools_substring: Option<Bound<'_, PyString>>,
        spill_stub_ref_only: bool,
    ) -> PyResult<Self> {
        let paths: Vec<String> = protected_paths.iter().map(text).collect();
        let matcher = match protected_tools_substring {
            Some(raw) => {
                if !protected_tools.is_empty() {
                    return Err(pyo3::exceptions::PyValueError::new_err(
                        "protected_tools and protected_tools_substring are exclusive",
                    ));
                }
                let globs: Vec<Vec<u16>> =
                    paths.iter().map(|p| p.encode_utf16().collect()).collect();
                ProtectedMatcher::substring(js_str_of(&raw)?.to_utf16(), &globs)
            }
            None => {
                let tools: Vec<String> = protected_tools.iter().map(text).collect();
                ProtectedMatcher::new(&tools, &paths)
            }
        };
        Ok(PyRenderOptions {
            recovery_grace_turns,
            purge: purge_errors.then_some(PurgeConfig {
                cooldown_turns,
                min_arg_chars,
            }),
            chain: chain_compression.then_some(ChainConfig {
                strip_final_assistant_thinking,
            }),
            matcher,
            spill_stub_ref_only,
            stamp: crate::stamp::fresh(),
        })
    }

    /// Whether `protectedTools` protects a tool of this name.
    fn is_protected_tool(&self, name: &Bound<'_, PyString>) -> PyResult<bool> {
        Ok(self
            .matcher
            .is_protected_tool_utf16(&js_str_of(name)?.to_utf16()))
    }

    fn __repr__(&self) -> String {
        let rule = match self.matcher.rule() {
            ToolRule::Names => "names",
            ToolRule::Substring(_) => "substring",
        };
        format!(
            "RenderOptions(recovery_grace_turns={}, purge={}, chain={}, tool_rule={rule})",
            self.recovery_grace_turns,
            self.purge.is_some(),
            self.chain.is_some(),
        )
    }
}

/// What `_core.render` returns: `messages` (the input list itself when nothing changed),
/// `pruned`, `before_chars` / `after_chars` (0 when nothing changed), `diagnostics` as
/// `(kind, dedup_key, detail)` in report order, and `threw`.
#[pyclass(name = "RenderOutcome", module = "pi_condense._core", frozen, get_all)]
pub(crate) struct PyRenderOutcome {
    pub(crate) messages: Py<PyList>,
    pub(crate) pruned: bool,
    pub(crate) before_chars: usize,
    pub(crate) after_chars: usize,
    pub(crate) diagnostics: Py<PyTuple>,
    pub(crate) threw: bool,
}

impl PyRenderOutcome {
    pub(crate) fn new(
        py: Python<'_>,
        messages: Bound<'_, PyList>,
        pruned: bool,
        before_chars: usize,
        after_chars: usize,
        diagnostics: Vec<Diagnostic>,
        threw: bool,
    ) -> PyResult<Self> {
        let rows = diagnostics
            .into_iter()
            .map(|d| {
                let row = [
                    PyString::new(py, d.kind.as_str()),
                    key_to_py(py, &d.dedup_key)?,
                    str_of_js(py, &d.detail)?,
                ];
                PyTuple::new(py, row)
            })
            .collect::<PyResult<Vec<_>>>()?;
        Ok(PyRenderOutcome {
            messages: messages.unbind(),
            pruned,
            before_chars,
            after_chars,
            diagnostics: PyTuple::new(py, rows)?.unbind(),
            threw,
        })
    }
}

#[pymethods]
impl PyRenderOutcome {
    fn __repr__(&self) -> String {
        format!(
            "RenderOutcome(pruned={}, before_chars={}, after_chars={}, threw={})",
            self.pruned, self.before_chars, self.after_chars, self.threw
        )
    }
}
