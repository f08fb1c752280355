//! `pi_condense._core`, the binding of `pi_condense_core`: it converts Python values to the
//! core's views and back, and the core decides. What else it holds, and why it is here:
//!
//! - **Readers and conversions**: reading Python values as JavaScript would ([`jsread`]),
//!   `str` conversions with lone surrogates kept (`pystr`), and the core's reader traits
//!   implemented over Python objects (`index::read` for `index::entries::EntryReader`).
//! - **Caches keyed on Python objects**: what one render leaves to the next
//!   (`render::cache::RenderCache`: the size memo, reused outputs, result keys, the
//!   continuation a frozen render resumes from), the chain scan's views lent to the next
//!   scan, and per-walk key-length caches. They are keyed on object identity, which only
//!   the binding can see.
//! - **Walks over Python objects**: `JSON.stringify` and its length without building the
//!   text (`json`), the render's extract and apply (`render`), the session loader (`load`).
//! - **The GIL and GC discipline** that makes borrowed reads sound (below), and the few
//!   CPython layout reads, verified at import ([`cpython`]).
//!
//! No rule that decides what the model sees lives here: those are in `pi_condense_core`
//! (`docs/architecture-binding.md` maps the modules).
//!
//! # The borrow rule
//!
//! Reads borrow: a view holds borrowed objects (`cpython::Obj`) and `&str`s pointing into
//! the caller's objects without owning them. That is sound because every native call that
//! borrows keeps three promises for as long as any borrow lives, so nothing it points into
//! can be freed or changed:
//!
//! 1. **An owned root.** Every borrowed pointer is reached from an object the call owns a
//!    strong reference to for the whole call: `render` reads a snapshot of the caller's list
//!    (a new list holding a reference to each message, taken before anything is read), the
//!    other calls the argument objects the caller's frame holds. An object reached from the
//!    root is owned by its container (a dict its members, a list its items, a str its
//!    characters), and no container can change, by promise 2.
//! 2. **No Python code runs.** The cyclic collector is paused for the whole call
//!    (`cpython::GcPaused`: a collection runs finalizers, which could free or change
//!    anything, or let another thread take the GIL); nothing read raises and clears an
//!    exception (building one allocates); lone surrogates are found from a str's code units
//!    and ints beyond the double range from their digits; values of any type, subclasses
//!    included, are read through the base type's C data, never through their own methods
//!    (`__eq__`, `__hash__`, `__float__`, `__index__`, `__iter__`, `__len__`, `__getitem__`):
//!    dict members are found by walking the table, not by a hash lookup, and copies are made
//!    under exact keys ([`jsread`], `render::apply`).
//! 3. **The GIL is held** throughout (`gil_used = true`).
//!
//! A call that must run Python code (the chain scan's protection predicate, `list_prefix`'s
//! `==`) holds owned references (`Bound`) to what it reads instead of borrowed ones.

#![warn(unsafe_op_in_unsafe_fn, clippy::undocumented_unsafe_blocks)]

use pyo3::prelude::*;

mod chains;
#[doc(hidden)]
pub mod cpython;
mod deep_eq;
mod index;
mod json;
#[doc(hidden)]
pub mod jsread;
mod keys;
mod lists;
mod load;
mod protect;
mod pystr;
mod render;
mod size_memo;
mod stamp;
mod supersede;

// The module relies on the GIL (borrowed views, the size memo): it declares so, and a
// free-threaded interpreter keeps the GIL on while it is imported.
#[pymodule(gil_used = true)]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    cpython::init(m.py());
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    jsread::register(m)?;
    json::register(m)?;
    keys::register(m)?;
    load::register(m)?;
    index::register(m)?;
    render::register(m)?;
    chains::register(m)?;
    lists::register(m)?;
    supersede::register(m)?;
    Ok(())
}
