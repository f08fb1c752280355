//! The frozen prefix: the leading messages of the latest frozen render, in list order.
//!
//! A host that makes the frozen promise renders the same history again and again, with new
//! messages appended. Looking each message up in the memo's table, touching its entry and
//! cloning its view costs work per message on every call. The prefix keeps the entries of
//! the leading messages out of the table, in list order, with their lengths and views in
//! contiguous vectors. The next frozen render compares its leading items with the prefix's
//! addresses (one comparison each), takes the lengths as they are and *lends* the views to
//! the decision (the vector is moved, not cloned); only the messages after the first
//! difference are looked up, measured and read. After the decision the views come back
//! ([`SizeMemo::settle`]) and the prefix grows by the messages whose entries hold a view
//! read for the same needs.
//!
//! Soundness: view `i` borrows only strings of objects that the trail of `entries[i]`
//! holds (each one was kept by `keep_view` for that entry, or read from it while it was
//! lent), and the prefix drops or moves a view back into its entry before it releases or
//! moves the entry. A render that fails after borrowing never gives the views back: the
//! prefix then knows it is `lent` and goes back to the table without them.

use pi_condense_core::render::Needs;

use super::{Entry, KeptView, SizeMemo, View, release};

use crate::cpython::Obj;

#[derive(Default)]
pub(super) struct Prefix {
    /// The message objects (addresses), in list order.
    addrs: Vec<usize>,
    /// Their entries (no view inside: the views are in `views`).
    #[allow(clippy::vec_box)] // boxed as in the table: moved between the two without copying
    entries: Vec<Box<Entry>>,
    lens: Vec<usize>,
    /// View `i` borrows from objects held by `entries[i].trail` (module docs); empty while
    /// lent.
    views: Vec<View<'static>>,
    /// The fields the views were read for.
    needs: Option<Needs>,
    /// The views are out with a render ([`SizeMemo::lend_prefix`]).
    lent: bool,
}

impl Prefix {
    pub(super) fn len(&self) -> usize {
        self.addrs.len()
    }

    pub(super) fn is_empty(&self) -> bool {
        self.addrs.is_empty()
    }
}

impl SizeMemo {
    /// How many leading `items` are the prefix's messages, for a frozen render reading
    /// views for `needs`; the rest of the prefix (all of it when the render is not frozen
    /// or reads other fields) goes back to the table first.
    pub(super) fn match_prefix(&mut self, items: &[Obj], needs: Option<Needs>) -> usize {
        if self.prefix.lent {
            // The render that borrowed the views failed: they are gone.
            self.dissolve_prefix_from(0);
        }
        if !self.frozen || needs.is_none() || self.prefix.needs != needs {
            self.dissolve_prefix_from(0);
            return 0;
        }
        let matched = self
            .prefix
            .addrs
            .iter()
            .zip(items)
            .take_while(|&(&addr, &item)| addr == item.addr())
            .count();
        self.dissolve_prefix_from(matched);
        matched
    }

    /// Puts the prefix's entries from `from` on back into the table, each with its view
    /// (none if the views are lent out and so lost).
    pub(super) fn dissolve_prefix_from(&mut self, from: usize) {
        let prefix = &mut self.prefix;
        if from >= prefix.len() {
            return;
        }
        let needs = prefix.needs;
        let mut views = if prefix.lent {
            Vec::new()
        } else {
            prefix.views.split_off(from.min(prefix.views.len()))
        }
        .into_iter();
        let addrs = prefix.addrs.split_off(from);
        let entries = prefix.entries.split_off(from);
        prefix.lens.truncate(from);
        for (addr, mut entry) in addrs.into_iter().zip(entries) {
            let view = views.next();
            entry.view = view
                .zip(needs)
                .map(|(view, needs)| KeptView { needs, view });
            entry.seen.set(self.generation.wrapping_sub(1));
            if let Some(mut old) = self.entries.insert(addr, entry) {
                // The same object listed twice: its later entry replaces the earlier one
                // (both describe it). The view of the replaced one borrows from its own
                // trail: dropped before the trail is released.
                let trail = std::mem::take(&mut old.trail);
                drop(old);
                // SAFETY: the memo owns the references of the replaced trail; the objects
                // are of plain JSON types only (no Python code runs when they are freed),
                // and no lent view borrows from this entry (its view was in the prefix).
                unsafe { release(&trail) };
            }
        }
        if prefix.is_empty() {
            prefix.lent = false;
            prefix.views.clear();
        }
    }

    /// The prefix's first `matched` lengths and views, lent to the render (the views come
    /// back through [`SizeMemo::settle`]).
    pub(super) fn lend_prefix<'a>(&mut self, matched: usize) -> (Vec<usize>, Vec<View<'a>>) {
        let prefix = &mut self.prefix;
        debug_assert_eq!(matched, prefix.len());
        if matched == 0 {
            return (Vec::new(), Vec::new());
        }
        prefix.lent = true;
        self.hits += matched as u64;
        (prefix.lens.clone(), std::mem::take(&mut prefix.views))
    }

    /// Gives back the views of a render that borrowed `lent` of them and extends the prefix
    /// by the messages of `items` after them whose entries hold a view read for the same
    /// needs (the frozen renders' steady state: the history, then the new messages).
    ///
    /// # Safety
    /// `views` must be that render's views of `items` (in order), the first `lent` of them
    /// the very views [`SizeMemo::lend_prefix`] lent, unchanged; the GIL must be held.
    pub(crate) unsafe fn settle<'a>(
        &mut self,
        items: &[Obj],
        mut views: Vec<View<'a>>,
        lent: usize,
        needs: Option<Needs>,
    ) {
        let unexpected = !self.frozen
            || needs.is_none()
            || views.len() != items.len()
            || lent != self.prefix.len()
            || (lent > 0 && !self.prefix.lent);
        if unexpected {
            // Not the render the prefix lent to: nothing of `views` is kept. They go before
            // any trail is released (they may borrow from one).
            drop(views);
            self.dissolve_prefix_from(0);
            return;
        }
        let mut kept = lent;
        for (slot, &item) in views.iter_mut().zip(items).skip(lent) {
            let addr = item.addr();
            let Some(mut entry) = self.entries.remove(&addr) else {
                break;
            };
            match entry.view.take() {
                Some(view) if Some(view.needs) == needs => {
                    // The entry's own view (it borrows from the entry's trail) replaces the
                    // render's reading of the same objects.
                    *slot = view.view;
                    self.prefix.addrs.push(addr);
                    self.prefix.lens.push(entry.len);
                    self.prefix.entries.push(entry);
                    kept += 1;
                }
                other => {
                    entry.view = other;
                    self.entries.insert(addr, entry);
                    break;
                }
            }
        }
        views.truncate(kept);
        // SAFETY: views `..lent` are the ones the prefix lent (the caller's contract), each
        // borrowing only from the trail of the prefix entry at its position; views
        // `lent..kept` were just moved out of the entries now at their positions (kept by
        // `keep_view`: they borrow only from those trails). Those trails hold a strong
        // reference to every str the views borrow, and the prefix drops each view before it
        // releases or moves its entry (module docs), so `'static` is never outlived.
        let views = unsafe { std::mem::transmute::<Vec<View<'a>>, Vec<View<'static>>>(views) };
        self.prefix.views = views;
        self.prefix.needs = needs;
        self.prefix.lent = false;
    }

    /// Releases the prefix's entries (their views dropped first).
    ///
    /// # Safety
    /// The GIL must be held (the objects are of plain JSON types only: no Python code runs
    /// when they are freed).
    pub(super) unsafe fn release_prefix(&mut self) {
        let prefix = std::mem::take(&mut self.prefix);
        drop(prefix.views);
        for entry in prefix.entries {
            let mut entry = entry;
            let trail = std::mem::take(&mut entry.trail);
            drop(entry);
            // SAFETY: the GIL is held (the caller's contract) and the memo owns the trail's
            // references; the entry's view (if any) is gone.
            unsafe { release(&trail) };
        }
    }
}
