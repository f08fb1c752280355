//! Pure-Rust core of pi-condense. Nothing in this crate knows about Python:
//! it takes light views of messages and values and returns decisions.
//!
//! Layers (a module imports only from the layers below it; `tests/test_core_layering.py`
//! holds it):
//!
//! - base vocabulary: [`jsstr`] (JS strings), [`js`] (numbers, persisted fields, `Throw`),
//!   [`json`], [`keys`], [`view`] (message views), and the crate-private `collections` and
//!   `placeholders`;
//! - [`index`] (the pruner index) on the base;
//! - [`render`] (phases 0-4) on the index;
//! - [`chains`] (chain decisions) on the views, reading the render only for its range
//!   resolver.
//!
//! The public surface is what the binding (`rust/py`) reads: each module re-exports its
//! entry points and types, and keeps the few submodules the binding names by path
//! (`render::grace`, `render::size`, `index::reconstruct`, `chains::view`, `json::escape`,
//! `json::write`, `keys::protected`). Phase internals, index tables and helpers are
//! `pub(crate)`.

pub mod chains;
pub(crate) mod collections;
pub mod index;
pub mod js;
pub mod json;
pub mod jsstr;
pub mod keys;
pub(crate) mod placeholders;
pub mod render;
pub mod sha256;
pub mod view;
