//! Pure-Rust core of pi-condense. Nothing in this crate knows about Python:
//! it takes light views of messages and values and returns decisions.

pub mod chains;
pub(crate) mod collections;
pub mod index;
pub mod js;
pub mod json;
pub mod jsstr;
pub mod keys;
pub(crate) mod placeholders;
pub mod render;
pub mod view;

pub use js::num as jsnum;
