//! The breadth-first length walk: values measured in the order they were queued, so that
//! the objects the walk reads next are known (and requested from memory) well ahead.

use pyo3::prelude::*;

use super::{
    Kind, Measurer, check_depth, float_number, int_number, kind, seq_item, seq_len, unsupported,
};
use crate::cpython::{DictMembers, list_items, prefetch, prefetch_body};

use crate::cpython::Obj;

/// An object queued by the walk: the value, the element of the measured list it belongs
/// to, and how many containers are around it.
#[derive(Clone, Copy)]
pub(super) struct Queued {
    obj: Obj,
    owner: u32,
    depth: u32,
}

/// A first-in first-out queue of [`Queued`] objects: a vector read from `head` on, whose
/// read part is dropped from time to time ([`Fifo::compact`]) rather than wrapped around
/// (no index masking on every push, pop and look-ahead).
#[derive(Default)]
pub(super) struct Fifo {
    items: Vec<Queued>,
    head: usize,
}

/// The read part of the queue is dropped once it is this long.
const COMPACT_AT: usize = 1024;

impl Fifo {
    fn clear(&mut self) {
        self.items.clear();
        self.head = 0;
    }

    #[inline(always)]
    fn len(&self) -> usize {
        self.items.len() - self.head
    }

    #[inline(always)]
    fn push(&mut self, item: Queued) {
        self.items.push(item);
    }

    #[inline(always)]
    fn pop(&mut self) -> Option<Queued> {
        let item = self.items.get(self.head).copied();
        self.head += usize::from(item.is_some());
        item
    }

    /// The item `i` places behind the head.
    #[inline(always)]
    fn get(&self, i: usize) -> Option<Queued> {
        self.items.get(self.head + i).copied()
    }

    /// Drops the items already read, if there are many (called between pops).
    #[inline(always)]
    fn compact(&mut self) {
        if self.head >= COMPACT_AT {
            self.items.drain(..self.head);
            self.head = 0;
        }
    }
}

/// Roots are queued while fewer than this many objects are.
const REFILL: usize = 48;
/// How far behind the head an object's header is prefetched.
const AHEAD_HEADER: usize = 24;
/// How far behind the head what an object points to is prefetched.
const AHEAD_BODY: usize = 12;
/// Containers met while more than this many objects are queued are measured depth-first
/// (bounds the queue on self-referencing values, which the depth limit then stops).
const QUEUE_CAP: usize = 1 << 16;

impl Measurer {
    /// Measures `items` breadth-first, adding each one's length to `lens[i]` and calling
    /// `then(i, item)` once item `i` (and every one before it) is measured. Stops at the
    /// first item whose measuring fails (not raised: the caller measures it again in text
    /// order, for the error `stringify` raises) and returns how many leading items were
    /// measured and handed to `then`; an error of `then` is returned as such.
    ///
    /// # Safety
    /// Every item must be a live object and the GIL held; no Python code runs.
    pub(super) unsafe fn fifo_each_then(
        &mut self,
        py: Python<'_>,
        items: &[Obj],
        lens: &mut [usize],
        then: &mut dyn FnMut(usize, Obj) -> PyResult<()>,
    ) -> PyResult<usize> {
        let n = items.len().min(lens.len()).min(u32::MAX as usize);
        let mut queue = std::mem::take(&mut self.fifo);
        queue.clear();
        let mut pending = std::mem::take(&mut self.pending);
        pending.clear();
        pending.resize(n, 0);
        let (mut next, mut done) = (0usize, 0usize);
        let result = loop {
            queue.compact();
            while queue.len() < REFILL && next < n {
                if let (Some(&obj), Some(p)) = (items.get(next), pending.get_mut(next)) {
                    queue.push(Queued {
                        obj,
                        owner: next as u32,
                        depth: 0,
                    });
                    *p = 1;
                }
                next += 1;
            }
            let Some(item) = queue.pop() else {
                break Ok(done);
            };
            if let Some(ahead) = queue.get(AHEAD_HEADER) {
                prefetch(ahead.obj.as_ptr());
            }
            if let Some(ahead) = queue.get(AHEAD_BODY) {
                // SAFETY: queued objects are live (held by the containers being walked).
                unsafe {
                    prefetch_body(ahead.obj);
                    self.prefetch_number(ahead.obj.as_ptr());
                }
            }
            // SAFETY: the caller's contract; the object is held by its container.
            let Ok((len, queued)) = (unsafe { self.visit(py, item, &mut queue) }) else {
                break Ok(done);
            };
            let owner = item.owner as usize;
            if let Some(l) = lens.get_mut(owner) {
                *l += len;
            }
            if let Some(p) = pending.get_mut(owner) {
                *p = *p + queued - 1;
            }
            while done < next && pending.get(done) == Some(&0) {
                if let Some(&obj) = items.get(done)
                    && let Err(err) = then(done, obj)
                {
                    self.fifo = queue;
                    self.pending = pending;
                    return Err(err);
                }
                done += 1;
            }
        };
        self.fifo = queue;
        self.pending = pending;
        result
    }

    /// Measures one queued object: its length without its members' (queued), and how many
    /// members were queued.
    ///
    /// # Safety
    /// `item.obj` must be a live object and the GIL held.
    #[inline(always)]
    unsafe fn visit(
        &mut self,
        py: Python<'_>,
        item: Queued,
        queue: &mut Fifo,
    ) -> PyResult<(usize, u32)> {
        let Queued { obj, owner, depth } = item;
        // SAFETY: `# Safety` above: kept alive by the call's owned root (borrow rule, lib.rs).
        unsafe {
            Ok(match kind(obj.as_ptr()) {
                Kind::Str => (self.str_len(py, obj.as_ptr())?, 0),
                Kind::Null | Kind::True => (4, 0),
                Kind::False => (5, 0),
                Kind::Int => {
                    let number = int_number(py, obj.as_ptr())?;
                    (self.number_len(&number), 0)
                }
                Kind::Float => {
                    let number = float_number(py, obj.as_ptr())?;
                    (self.number_len(&number), 0)
                }
                Kind::Other => return Err(unsupported(py, obj.as_ptr())),
                kind @ (Kind::Dict | Kind::List | Kind::Tuple) => {
                    check_depth(depth as usize)?;
                    if queue.len() > QUEUE_CAP {
                        return Ok((self.len_at(py, obj.as_ptr(), depth)?, 0));
                    }
                    let inner = depth + 1;
                    let mut count = 0usize;
                    let mut extra = 0usize;
                    let mut push = |value: Obj| {
                        queue.push(Queued {
                            obj: value,
                            owner,
                            depth: inner,
                        });
                    };
                    match kind {
                        Kind::Dict => {
                            DictMembers::new(obj, 0).try_each(|key, value| {
                                extra += self.key_len(py, key.as_ptr())?;
                                push(value);
                                count += 1;
                                Ok::<(), PyErr>(())
                            })?;
                        }
                        _ => {
                            let is_list = matches!(kind, Kind::List);
                            match list_items(obj).filter(|_| is_list) {
                                Some(items) => {
                                    for &value in items {
                                        push(value);
                                    }
                                    count = items.len();
                                }
                                None => {
                                    let len = seq_len(obj.as_ptr(), is_list);
                                    if len < 0 {
                                        return Err(PyErr::fetch(py));
                                    }
                                    for i in 0..len {
                                        let value = seq_item(obj.as_ptr(), is_list, i);
                                        if value.is_null() {
                                            return Err(PyErr::fetch(py));
                                        }
                                        push(Obj::from_ptr(value));
                                    }
                                    count = usize::try_from(len).unwrap_or(0);
                                }
                            }
                        }
                    }
                    (
                        2 + count.saturating_sub(1) + extra,
                        u32::try_from(count).unwrap_or(u32::MAX),
                    )
                }
            })
        }
    }
}
