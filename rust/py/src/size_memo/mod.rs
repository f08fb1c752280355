//! `pi_condense._core.SizeMemo`: message sizes remembered from one render to the next.
//!
//! A render that changes something reports `JSON.stringify(list).length` of its whole
//! input. Measuring means touching every object of every message, and a host renders
//! nearly the same list before every model call: the previous messages (the very same
//! objects) plus a few new ones. The memo keeps, per message object, its measured length
//! and a *trail*: every object of the message's tree in walk order (dicts, their keys,
//! lists, leaves), each held by a strong reference. The trail is recorded by the very walk
//! that measures the message ([`Trail`]), so remembering costs little on top of measuring.
//!
//! A later render reuses the length when the message is still made of the very same
//! objects: each container of the trail is walked again through the C API (size, key
//! order and the identity of every key and item compared with the trail); leaves are
//! compared by address only, without being read. No private field (such as a dict's
//! version tag) is consulted. This is exact, not a heuristic: the references the trail holds keep every recorded object alive, so no other
//! object can take one of their addresses, and the only leaves admitted (exact `str`,
//! `int`, `float`, `bool`, `None`) are immutable. Equal trails therefore mean equal JSON
//! text. A message holding anything else (a subclass, a tuple, `ABSENT`, a non-str key) or
//! nested deeper than [`MAX_DEPTH`] is not remembered: it is measured on every render.
//!
//! Entries a render does not look at are released at its end ([`SizeMemo::sweep`]), so the
//! memo holds (references to) the messages of the latest measured list only.
//!
//! Recording a trail costs a reference per object, and is wasted on a host that hands over
//! fresh objects on every call (a clone of its history, an adapter's conversion): nothing
//! recorded is ever found again. So a message is remembered only from its second render on.
//! A render that finds nothing remembered keeps a few of its messages as *anchors*
//! ([`ANCHORS`], by strong reference, so identity is exact); the next render records trails
//! only if one of those very objects is in its list (the host keeps its messages), and
//! otherwise measures without recording, as without a memo. The memo then never makes the
//! fresh-objects path slower than no memo, and holds at most the anchors of such a host.

mod prefix;
mod trail;

use std::borrow::Cow;
use std::cell::{Cell, RefCell};

use pi_condense_core::render::{FastMap, MsgView, Needs};
use pyo3::ffi;
use pyo3::prelude::*;

use crate::cpython::{prefetch, prefetch_body};
use crate::json::Measurer;
use trail::{Recorded, Trail, len_each_recorded_then, len_recorded, release, same_tree};
use trail::{TAG_DICT, TAG_LEAF, TAG_LIST, TAG_MASK};

use crate::cpython::Obj;

/// Messages of a render kept as anchors (module docs): evenly spread, the last one too.
const ANCHORS: usize = 8;

struct Entry {
    len: usize,
    trail: Box<[usize]>,
    /// The render that last used this entry.
    seen: Cell<u64>,
    /// The message's view, when one was read (it borrows from the trail's objects).
    view: Option<KeptView>,
}

/// Lengths of message objects, valid while their trees are unchanged (module docs).
#[derive(Default)]
pub(crate) struct SizeMemo {
    /// Boxed: the table stays small (scanned for every message), and an entry's address
    /// is known, to prefetch it, before it is read.
    entries: FastMap<usize, Box<Entry>>,
    generation: u64,
    pub(crate) hits: u64,
    pub(crate) misses: u64,
    /// Owned references to a few messages of the latest render that found nothing
    /// remembered (module docs).
    anchors: Vec<usize>,
    /// Anchors replaced during a render: released at its end or at the start of the next
    /// one, when no view borrows (releasing a message may run its values' `__del__`).
    pub(crate) retired: Vec<usize>,
    /// The caller promises that no message it handed over before has changed in place
    /// (set per render): a remembered object is then reused without walking its trail
    /// again. A broken promise gives a stale length or view, never a dangling one: the
    /// trail still holds every object a kept view borrows from.
    pub(crate) frozen: bool,
    /// The leading messages of the latest frozen render, out of `entries` (`prefix`).
    prefix: prefix::Prefix,
}

impl SizeMemo {
    /// Starts a render: entries used from now on are kept by the next [`SizeMemo::sweep`].
    fn begin(&mut self) {
        self.generation += 1;
    }

    /// Remembers `len` as the length of `msg`, with the trail the measurement recorded
    /// (and the references it owns).
    ///
    /// # Safety
    /// The GIL must be held.
    unsafe fn remember(&mut self, msg: Obj, len: usize, trail: Recorded, view: Option<KeptView>) {
        // SAFETY: `# Safety` above: kept alive by the call's owned root (borrow rule, lib.rs).
        unsafe {
            let entry = Entry {
                len,
                trail,
                seen: Cell::new(self.generation),
                view,
            };
            if let Some(mut old) = self.entries.insert(msg.addr(), Box::new(entry)) {
                // The view borrows from the trail's objects: dropped before they are released.
                let trail = std::mem::take(&mut old.trail);
                drop(old);
                release(&trail);
            }
        }
    }

    /// Releases the entries the current render did not use.
    ///
    /// # Safety
    /// The GIL must be held. Releasing may free objects (of plain JSON types only: no
    /// Python code runs).
    unsafe fn sweep(&mut self) {
        // SAFETY: `# Safety` above: kept alive by the call's owned root (borrow rule, lib.rs).
        unsafe {
            let generation = self.generation;
            let mut stale = Vec::new();
            self.entries.retain(|_, entry| {
                let keep = entry.seen.get() == generation;
                if !keep {
                    stale.push(std::mem::take(&mut entry.trail));
                }
                keep
            });
            for trail in stale {
                release(&trail);
            }
        }
    }

    /// Releases the anchors retired by the previous render.
    ///
    /// # Safety
    /// The GIL must be held, and nothing may borrow from Python objects: releasing a
    /// message can run Python code (a `__del__` of one of its values).
    pub(crate) unsafe fn release_retired(&mut self) {
        for address in std::mem::take(&mut self.retired) {
            // SAFETY: the GIL is held, the memo owns this reference, and no view borrows
            // (the caller's contract), so Python code run by a deallocation is harmless.
            unsafe { ffi::Py_DecRef((Obj::from_addr(address)).as_ptr()) };
        }
    }

    /// Whether one of the anchors is in `items` (the host kept its objects).
    fn anchored(&self, items: &[Obj]) -> bool {
        !self.anchors.is_empty()
            && items
                .iter()
                .any(|&item| self.anchors.contains(&item.addr()))
    }

    /// Makes a few of `items` the anchors; the previous ones are retired (still held until
    /// no view borrows, so no deallocation runs now).
    ///
    /// # Safety
    /// The GIL must be held and `items` live.
    unsafe fn anchor(&mut self, items: &[Obj]) {
        let mut anchors = Vec::with_capacity(ANCHORS + 1);
        let n = items.len();
        if n > 0 {
            for k in 0..ANCHORS {
                anchors.push(k * n / ANCHORS);
            }
            anchors.push(n - 1);
            anchors.dedup();
        }
        let anchors: Vec<usize> = anchors
            .into_iter()
            .filter_map(|i| items.get(i))
            .map(|&item| {
                // SAFETY: `item` is live and the GIL held; the memo now owns this reference.
                unsafe { ffi::Py_IncRef(item.as_ptr()) };
                item.addr()
            })
            .collect();
        self.retire_anchors();
        self.anchors = anchors;
    }

    /// Releases every entry.
    ///
    /// # Safety
    /// The GIL must be held (as [`SizeMemo::sweep`]).
    unsafe fn sweep_all(&mut self) {
        // SAFETY: the GIL is held (the caller's contract).
        unsafe { self.release_prefix() };
        if self.entries.is_empty() {
            return;
        }
        let stale: Vec<Recorded> = std::mem::take(&mut self.entries)
            .into_values()
            .map(|entry| entry.trail)
            .collect();
        for trail in stale {
            // SAFETY: the GIL is held; the trail owns its references, to objects of plain
            // JSON types only (no Python code runs when they are freed).
            unsafe { release(&trail) };
        }
    }

    /// Retires the anchors (released once no view borrows: [`SizeMemo::release_retired`]).
    fn retire_anchors(&mut self) {
        let old = std::mem::take(&mut self.anchors);
        self.retired.extend(old);
    }

    /// Number of messages remembered.
    pub(crate) fn len(&self) -> usize {
        self.entries.len() + self.prefix.len()
    }

    /// How many of them the frozen prefix holds.
    pub(crate) fn prefix_len(&self) -> usize {
        self.prefix.len()
    }

    /// Forgets every message (releases the references, and those retired).
    pub(crate) fn clear(&mut self) {
        if self.entries.is_empty()
            && self.prefix.is_empty()
            && self.anchors.is_empty()
            && self.retired.is_empty()
        {
            return;
        }
        self.retire_anchors();
        Python::with_gil(|_| {
            // SAFETY: the GIL is held and the memo owns these references; no view borrows
            // outside a render, and `clear` never runs inside one.
            unsafe {
                self.release_retired();
                self.sweep_all();
            }
        });
    }
}

impl Drop for SizeMemo {
    fn drop(&mut self) {
        self.clear();
    }
}

/// How many messages ahead of the check the containers of a remembered message are
/// prefetched (headers; their tables half as far ahead, once the headers have arrived).
const AHEAD: usize = 4;

/// Prefetches the headers of the containers of a trail.
fn prefetch_headers(trail: &[usize]) {
    for &word in trail {
        let tag = word & TAG_MASK;
        if tag == TAG_DICT || tag == TAG_LIST {
            prefetch((word & !TAG_MASK) as *const u8);
        }
    }
}

/// Prefetches what the check reads next from the containers of a trail: dict tables and
/// list item arrays.
///
/// # Safety
/// The trail's objects must be alive (the memo holds them) and the GIL held.
unsafe fn prefetch_tables(trail: &[usize]) {
    // SAFETY: `# Safety` above: kept alive by the call's owned root (borrow rule, lib.rs).
    unsafe {
        for &word in trail {
            let tag = word & TAG_MASK;
            if tag == TAG_LIST || tag == TAG_DICT {
                prefetch_body(Obj::from_addr(word & !TAG_MASK));
            }
        }
    }
}

/// The items of a list (borrowed: the list holds them).
///
/// # Safety
/// `list` must be a live list and the GIL held.
unsafe fn items_of(py: Python<'_>, list: Obj) -> PyResult<Vec<Obj>> {
    // SAFETY: `# Safety` above: kept alive by the call's owned root (borrow rule, lib.rs).
    unsafe {
        let count =
            usize::try_from(ffi::PyList_Size(list.as_ptr())).map_err(|_| PyErr::fetch(py))?;
        let mut items = Vec::with_capacity(count);
        for i in 0..count {
            let item =
                ffi::PyList_GetItem(list.as_ptr(), ffi::Py_ssize_t::try_from(i).unwrap_or(-1));
            if item.is_null() {
                return Err(PyErr::fetch(py));
            }
            items.push(Obj::from_ptr(item));
        }
        Ok(items)
    }
}

/// A message measured (or read) now: its position, object, length, trail (`None`: a
/// remembered one whose view is refreshed) and the span of its view's borrowed objects.
type Fresh = (usize, Obj, usize, Option<Recorded>, (usize, usize));

/// A message view as render reads it, its strings borrowed from the message's objects.
pub(crate) type View<'a> = MsgView<Cow<'a, str>>;

/// A view kept by an entry, with the fields it was read for. Made only by [`keep_view`].
struct KeptView {
    needs: Needs,
    /// Borrows from objects of the entry's trail (checked by [`keep_view`]); the entry
    /// drops it before it releases the trail.
    view: View<'static>,
}

/// Whether every object of `borrowed` is a leaf of `trail` (the trail holds a reference
/// to it).
fn all_in_trail(borrowed: &[Obj], trail: &[usize]) -> bool {
    borrowed.iter().all(|&obj| {
        let address = obj.addr();
        address & TAG_MASK == 0 && trail.contains(&(address | TAG_LEAF))
    })
}

/// `view` (read with `needs`, its strings borrowed from the str objects `borrowed`) kept
/// for an entry whose trail is `trail`; `None` unless the trail holds every one of those
/// objects. The memo hands a kept view out only after checking the whole trail again
/// ([`same_tree`]), so the strings it borrows are exactly objects the memo both holds and
/// checks: what the reader reads is recorded by the reader, not assumed here.
fn keep_view(view: &View<'_>, needs: Needs, borrowed: &[Obj], trail: &[usize]) -> Option<KeptView> {
    if !all_in_trail(borrowed, trail) {
        return None;
    }
    // SAFETY: every string the view borrows is the text of an object of `borrowed`
    // (the reader logs each one), each held by a strong reference of the trail, which
    // the entry releases only after dropping the view; str objects are immutable.
    let view = unsafe { std::mem::transmute::<View<'_>, View<'static>>(view.clone()) };
    Some(KeptView { needs, view })
}

/// The length of every message of `list` and its view (`read(i, message)`), reusing what
/// `memo` remembers of the messages that are still made of the very same objects, and
/// remembering the others. Views are remembered and reused only when `needs` (the fields
/// `read` reads) is given. Without a memo this is [`Measurer::len_each_then`] with `read`
/// called right after each message is measured (while its objects are in the CPU caches).
///
/// Remembered messages are checked in a pipeline: the containers of the messages a few
/// places ahead are prefetched, so that the cache misses of the check overlap. A first
/// render (nothing remembered) measures the whole list in the measurer's own pipeline.
///
/// For a frozen render the leading messages that are the memo's prefix (`prefix`) are not
/// looked up: their lengths are copied and their views lent (`Measured::lent` of them; the
/// caller gives them back with [`SizeMemo::settle`]).
///
/// # Safety
/// `list` must be a live list and the GIL held; `read` must not run Python code and must
/// only borrow strings from the message it is given.
pub(crate) unsafe fn measure_and_read<'a>(
    py: Python<'_>,
    list: Obj,
    memo: Option<&mut SizeMemo>,
    needs: Option<Needs>,
    borrowed: &RefCell<Vec<Obj>>,
    mut read: impl FnMut(usize, Obj) -> PyResult<View<'a>>,
) -> PyResult<Measured<'a>> {
    // SAFETY: `# Safety` above: kept alive by the call's owned root (borrow rule, lib.rs).
    unsafe {
        let count =
            usize::try_from(ffi::PyList_Size(list.as_ptr())).map_err(|_| PyErr::fetch(py))?;
        // One view per message: allocated at once (a view is large; growing the vector
        // would copy them all again and again).
        let mut views = Vec::with_capacity(count);
        // Where the objects each read view borrows from end in `borrowed` (by list position).
        let mut spans: Vec<(usize, usize)> = Vec::new();
        let Some(memo) = memo else {
            let lens = Measurer::new(py).len_each_then(py, list.as_ptr(), |i, item| {
                views.push(read(i, item)?);
                Ok(())
            })?;
            return Ok(Measured::new(lens, views, 0));
        };
        // Nothing borrows yet (the views are read below): the previous anchors can go.
        memo.release_retired();
        memo.begin();
        let items = items_of(py, list)?;
        let matched = memo.match_prefix(&items, needs);
        let remembered_any = matched > 0
            || (!memo.entries.is_empty()
                && items
                    .iter()
                    .any(|&item| memo.entries.contains_key(&item.addr())));
        if !remembered_any {
            // Nothing of this list is remembered: the entries (if any) are stale.
            memo.sweep_all();
            if !memo.anchored(&items) {
                memo.anchor(&items);
                // Objects never seen before: measured without recording (module docs).
                let lens = Measurer::new(py).len_each_then(py, list.as_ptr(), |i, item| {
                    views.push(read(i, item)?);
                    Ok(())
                })?;
                memo.misses += lens.len() as u64;
                return Ok(Measured::new(lens, views, 0));
            }
            let (lens, trails) =
                len_each_recorded_then(&mut Measurer::new(py), py, list, |i, item| {
                    let start = borrowed.borrow().len();
                    views.push(read(i, item)?);
                    spans.push((start, borrowed.borrow().len()));
                    Ok(())
                })?;
            // Remembered now (a render that failed keeps the anchors for the next one).
            memo.retire_anchors();
            memo.misses += lens.len() as u64;
            let log = borrowed.borrow();
            for (i, ((&item, len), trail)) in items.iter().zip(&lens).zip(trails).enumerate() {
                match (trail, views.get(i)) {
                    (Some(trail), Some(view)) => {
                        let kept = needs.and_then(|needs| {
                            let span = spans.get(i).and_then(|&(a, b)| log.get(a..b))?;
                            keep_view(view, needs, span, &trail)
                        });
                        memo.remember(item, *len, trail, kept);
                    }
                    (Some(trail), None) => release(&trail),
                    (None, _) => {}
                }
            }
            return Ok(Measured::new(lens, views, 0));
        }
        // The entries know this host's objects now: the anchors are not needed.
        memo.retire_anchors();
        let count = items.len();
        let frozen = memo.frozen;
        let generation = memo.generation;
        let before = memo.entries.len();
        let (mut lens, lent) = memo.lend_prefix(matched);
        views = lent;
        lens.reserve(count.saturating_sub(matched));
        views.reserve(count.saturating_sub(matched));
        // Messages measured now (`trail: None` - a remembered one whose view is refreshed),
        // with where the objects their views borrow from are in `borrowed`.
        let mut fresh: Vec<Fresh> = Vec::new();
        let (mut hits, mut misses) = (0, 0);
        // Remembered entries seen by this render (a message may be listed twice).
        let mut distinct = 0;
        {
            let tail = items.get(matched..).unwrap_or_default();
            let found: Vec<Option<&Entry>> = tail
                .iter()
                .map(|&item| memo.entries.get(&item.addr()).map(|entry| &**entry))
                .collect();
            let mut measurer = Measurer::new(py);
            let mut trail_buffer = Trail::default();
            let mut failed = None;
            for (j, &item) in tail.iter().enumerate() {
                let i = matched + j;
                if let Some(Some(ahead)) = found.get(j + 2 * AHEAD) {
                    let entry: *const Entry = *ahead;
                    prefetch(entry.cast::<u8>());
                }
                if !frozen {
                    if let Some(Some(ahead)) = found.get(j + AHEAD) {
                        prefetch_headers(&ahead.trail);
                    }
                    if let Some(Some(ahead)) = found.get(j + AHEAD / 2) {
                        prefetch_tables(&ahead.trail);
                    }
                }
                let remembered = found.get(j).copied().flatten().filter(|entry| {
                    let mut pos = 0;
                    frozen || (same_tree(item, &entry.trail, &mut pos) && pos == entry.trail.len())
                });
                match remembered {
                    Some(entry) => {
                        if entry.seen.replace(generation) != generation {
                            distinct += 1;
                        }
                        hits += 1;
                        lens.push(entry.len);
                        match entry.view.as_ref().filter(|kept| Some(kept.needs) == needs) {
                            Some(kept) => views.push(kept.view.clone()),
                            None => {
                                let start = borrowed.borrow().len();
                                match read(i, item) {
                                    Ok(view) => views.push(view),
                                    Err(err) => {
                                        failed = Some(err);
                                        break;
                                    }
                                }
                                if needs.is_some() {
                                    let span = (start, borrowed.borrow().len());
                                    fresh.push((i, item, entry.len, None, span));
                                }
                            }
                        }
                    }
                    None => {
                        misses += 1;
                        let (len, trail) =
                            match len_recorded(&mut measurer, py, item, &mut trail_buffer) {
                                Ok(measured) => measured,
                                Err(err) => {
                                    failed = Some(err);
                                    break;
                                }
                            };
                        lens.push(len);
                        let start = borrowed.borrow().len();
                        match read(i, item) {
                            Ok(view) => views.push(view),
                            Err(err) => {
                                if let Some(trail) = trail {
                                    release(&trail);
                                }
                                failed = Some(err);
                                break;
                            }
                        }
                        if trail.is_some() {
                            fresh.push((i, item, len, trail, (start, borrowed.borrow().len())));
                        }
                    }
                }
            }
            if let Some(err) = failed {
                // The references of the trails recorded so far go back.
                for (_, _, _, trail, _) in fresh {
                    if let Some(trail) = trail {
                        release(&trail);
                    }
                }
                return Err(err);
            }
        }

        memo.hits += hits;
        memo.misses += misses;
        let log = borrowed.borrow();
        for (i, item, len, trail, (start, end)) in fresh {
            let view = views.get(i).zip(needs).zip(log.get(start..end));
            match trail {
                Some(trail) => {
                    let kept =
                        view.and_then(|((view, needs), span)| keep_view(view, needs, span, &trail));
                    memo.remember(item, len, trail, kept);
                }
                None => {
                    if let Some(entry) = memo.entries.get_mut(&item.addr()) {
                        entry.view = view.and_then(|((view, needs), span)| {
                            keep_view(view, needs, span, &entry.trail)
                        });
                    }
                }
            }
        }
        // Nothing to release when every remembered entry was seen (the usual case: the same
        // history again, plus new messages).
        if distinct < before {
            memo.sweep();
        }
        Ok(Measured::new(lens, views, matched))
    }
}

/// What [`measure_and_read`] gives: the length and view of every message, the first
/// `lent` views lent by the memo's prefix (to be given back: [`SizeMemo::settle`]).
pub(crate) struct Measured<'a> {
    pub(crate) lens: Vec<usize>,
    pub(crate) views: Vec<View<'a>>,
    pub(crate) lent: usize,
}

impl<'a> Measured<'a> {
    fn new(lens: Vec<usize>, views: Vec<View<'a>>, lent: usize) -> Self {
        Measured { lens, views, lent }
    }
}
