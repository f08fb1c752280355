//! Extract: the message views the decision reads, through a prefetching pipeline (see
//! `super` for what is read and why no Python code runs meanwhile), and with them what phase
//! 1b's scan reads of each message (`Reader::scan`: the dicts are walked once for both).

use std::borrow::Cow;
use std::cell::RefCell;
use std::ptr::addr_of_mut;

use pi_condense_core::render::view::synthetic_block_id;
use pi_condense_core::render::{
    Block, Blocks, Content, CowId, JsIdOf, MsgView, Needs, Role, SummaryRef, SummaryRefs, Ts,
};
use pyo3::ffi;
use pyo3::prelude::*;

use crate::cpython::{prefetch, prefetch_body, str_utf8 as borrowed_utf8};
use crate::jsread::{
    self, K, Keys, Obj, is_absent, is_dict, is_list, is_str, js_string, list_item, list_items,
    present, str_is, str_text, type_is,
};
use crate::size_memo::{self, SizeMemo};
use crate::supersede::{Calls, Recorder, Scanned};

/// How many messages ahead each level of the read pipeline works (see
/// [`Reader::read_all`]): the message object, its hash table, its role, the values the
/// role needs, a content list's item array, its blocks, their tables.
const AHEAD_OBJECT: usize = 16;
const AHEAD_TABLE: usize = 13;
const AHEAD_ROLE: usize = 10;
const AHEAD_FIELDS: usize = 8;
const AHEAD_ITEMS: usize = 6;
const AHEAD_BLOCKS: usize = 4;
const AHEAD_BLOCK_TABLES: usize = 2;

/// Content blocks per message the pipeline requests ahead.
const PREFETCH_BLOCKS: usize = 4;

/// The members of a message the reader may read: role, toolCallId, isError, timestamp,
/// content, customType, details.
const MEMBERS: usize = 7;
const MEMBER_FIELDS: [K; MEMBERS] = [
    K::Role,
    K::ToolCallId,
    K::IsError,
    K::Timestamp,
    K::Content,
    K::CustomType,
    K::Details,
];
const M_ROLE: u32 = 1;
const M_TOOL_CALL_ID: u32 = 1 << 1;
const M_IS_ERROR: u32 = 1 << 2;
const M_TIMESTAMP: u32 = 1 << 3;
const M_CONTENT: u32 = 1 << 4;
const M_CUSTOM_TYPE: u32 = 1 << 5;
const M_DETAILS: u32 = 1 << 6;

/// The members of a content block the reader may read: type, id (the view), name, input,
/// args, arguments (phase 1b's scan, of toolCall blocks).
const BLOCK_FIELDS: [K; 6] = [K::Kind, K::Id, K::Name, K::Input, K::Args, K::Arguments];
const B_VIEW: u32 = 0b11;
const B_SCAN: u32 = 0b11_1100;

/// Reads message views.
pub(super) struct Reader<'k, 'py> {
    pub(super) py: Python<'py>,
    pub(super) keys: &'k Keys<'py>,
    pub(super) needs: Needs,
    /// Every str object a view read so far borrows its text from, in reading order (a
    /// size memo keeps a view only while it holds each of them: `size_memo::keep_view`).
    pub(super) borrowed: RefCell<Vec<Obj>>,
    /// Phase 1b's scan, recorded while the messages are read (`None`: not this render's).
    pub(super) scan: Option<&'k Recorder<'k>>,
}

// # Safety (every `unsafe fn` of the reader below)
// Object arguments must be live objects and the GIL held. A returned view or id borrows text
// from the str objects it was read from (logged in `borrowed`): the caller keeps those objects
// alive, and runs no Python code, while it holds the view (the `extract` contract).
impl Reader<'_, '_> {
    /// [`js_id`], the str it borrows from (if any) logged in `borrowed`.
    #[inline]
    unsafe fn js_id<'a>(&self, value: Option<Obj>) -> PyResult<CowId<'a>> {
        // SAFETY: `# Safety` above: kept alive by the call's owned root (borrow rule, lib.rs).
        unsafe {
            let id = jsread::js_id(self.py, value, false)?;
            if let (JsIdOf::Str(Cow::Borrowed(_)), Some(obj)) = (&id, value) {
                self.borrowed.borrow_mut().push(obj);
            }
            Ok(id)
        }
    }

    /// A content block; a toolCall block is also read for phase 1b's scan into `calls`.
    unsafe fn block_of<'a>(
        &self,
        item: Obj,
        calls: Option<&mut Calls>,
    ) -> PyResult<Block<Cow<'a, str>>> {
        // SAFETY: `# Safety` above: kept alive by the call's owned root (borrow rule, lib.rs).
        unsafe {
            if item.is(ffi::Py_None()) || is_absent(item) {
                return Ok(Block::Nullish);
            }
            if !is_dict(item) {
                return Ok(Block::Other);
            }
            let mut fields = [None; 6];
            let mut pos = 0;
            self.keys
                .scan(item, &mut pos, &BLOCK_FIELDS, &mut fields, B_VIEW);
            let [kind, id, ..] = fields;
            let Some(kind) = present(kind).filter(|k| is_str(*k)) else {
                return Ok(Block::Other);
            };
            let kind = borrowed_utf8(kind).unwrap_or_default();
            Ok(if jsread::text_is(kind, "toolCall") {
                let id = self.js_id(present(id))?;
                if let (Some(calls), Some(scan)) = (calls, self.scan) {
                    // The rest of the same walk of the block.
                    self.keys
                        .scan(item, &mut pos, &BLOCK_FIELDS, &mut fields, B_SCAN);
                    let [_, _, name, input, args, arguments] = fields;
                    let owned = || Ok(id.to_owned_id());
                    calls.block(
                        self.py,
                        self.keys,
                        scan.matcher,
                        [name, input, args, arguments],
                        owned,
                    );
                }
                Block::ToolCall { id }
            } else if jsread::text_is(kind, "thinking") {
                Block::Thinking
            } else {
                Block::Other
            })
        }
    }

    /// A message's content; the toolCall blocks of an array also read into `calls`.
    unsafe fn content_of<'a>(
        &self,
        value: Option<Obj>,
        mut calls: Option<&mut Calls>,
    ) -> PyResult<Content<Cow<'a, str>>> {
        // SAFETY: `# Safety` above: kept alive by the call's owned root (borrow rule, lib.rs).
        unsafe {
            let Some(value) = value else {
                return Ok(Content::Nullish);
            };
            if value.is(ffi::Py_None()) {
                return Ok(Content::Nullish);
            }
            if is_list(value) {
                let mut blocks = Blocks::default();
                for item in list_items(value) {
                    blocks.push(self.block_of(item, calls.as_deref_mut())?);
                }
                return Ok(Content::Array(blocks));
            }
            if is_str(value) {
                return Ok(Content::Str);
            }
            Ok(Content::Other)
        }
    }

    /// `msg.content?.[0]?.text` matched against the synthetic chain marker.
    unsafe fn synthetic_id_of(&self, content: Option<Obj>) -> PyResult<Option<Box<str>>> {
        // SAFETY: `# Safety` above: kept alive by the call's owned root (borrow rule, lib.rs).
        unsafe {
            let py = self.py;
            let Some(list) = content.filter(|c| is_list(*c)) else {
                return Ok(None);
            };
            let Some(first) = list_item(list, 0).filter(|f| is_dict(*f)) else {
                return Ok(None);
            };
            let Some(text) = self.keys.get(first, K::Text).filter(|t| is_str(*t)) else {
                return Ok(None);
            };
            // Only the prefix is looked at: no copy unless it is the marker.
            let text = str_text(py, text, false);
            Ok(synthetic_block_id(&text).map(Box::from))
        }
    }

    /// `msg.details?.toolCallRefs ?? []` of a summary message.
    unsafe fn summary_refs_of<'a>(
        &self,
        details: Option<Obj>,
    ) -> PyResult<SummaryRefs<Cow<'a, str>>> {
        // SAFETY: `# Safety` above: kept alive by the call's owned root (borrow rule, lib.rs).
        unsafe {
            let py = self.py;
            let Some(details) = details.filter(|d| is_dict(*d)) else {
                // Missing, null, or a primitive / array without a `toolCallRefs` property.
                return Ok(SummaryRefs::List(Vec::new()));
            };
            let refs = match self.keys.get(details, K::ToolCallRefs) {
                None => return Ok(SummaryRefs::List(Vec::new())),
                Some(r) if r.is(ffi::Py_None()) => return Ok(SummaryRefs::List(Vec::new())),
                Some(r) => r,
            };
            if !is_list(refs) {
                return Ok(SummaryRefs::NotArray);
            }
            let mut out = Vec::new();
            for item in list_items(refs) {
                if item.is(ffi::Py_None()) || is_absent(item) {
                    out.push(SummaryRef::Nullish);
                    continue;
                }
                if !is_dict(item) {
                    // A primitive's `toolCallId` / `resultTimestamp` are undefined.
                    out.push(SummaryRef::Ref {
                        tool_call_id: JsIdOf::Undefined,
                        result_timestamp: None,
                    });
                    continue;
                }
                let result_timestamp = match self.keys.get(item, K::ResultTimestamp) {
                    None => None,
                    Some(ts) => {
                        Some(js_string(Some(&Borrowed::from_ptr(py, ts.as_ptr())))?.into_string())
                    }
                };
                out.push(SummaryRef::Ref {
                    tool_call_id: self.js_id(self.keys.get(item, K::ToolCallId))?,
                    result_timestamp,
                });
            }
            Ok(SummaryRefs::List(out))
        }
    }

    /// Reads message `msg`, at `index` in the list, into `view` (a fresh [`MsgView::new`]
    /// of role `Other`).
    unsafe fn read_into<'a>(
        &self,
        index: usize,
        msg: Obj,
        view: &mut MsgView<Cow<'a, str>>,
    ) -> PyResult<()> {
        // SAFETY: `# Safety` above: kept alive by the call's owned root (borrow rule, lib.rs).
        unsafe {
            let mut fetched = Fetched::default();
            self.fetch_role(msg, &mut fetched)?;
            self.fetch_fields(msg, &mut fetched)?;
            self.decode(index, &fetched, view)
        }
    }

    /// Stage 1: the members render may read (one walk of the dict), the `role` value
    /// prefetched.
    #[inline]
    unsafe fn fetch_role(&self, msg: Obj, fetched: &mut Fetched) -> PyResult<()> {
        // SAFETY: `# Safety` above: kept alive by the call's owned root (borrow rule, lib.rs).
        unsafe {
            fetched.dict = is_dict(msg);
            if fetched.dict {
                // Up to the role (usually the first key); the rest once the role is known.
                self.keys.scan(
                    msg,
                    &mut fetched.pos,
                    &MEMBER_FIELDS,
                    &mut fetched.members,
                    M_ROLE,
                );
                fetched.role = fetched.members[0];
                if let Some(role) = fetched.role {
                    prefetch(role.as_ptr());
                }
            }
            Ok(())
        }
    }

    /// Stage 2: the role, and the values it needs (prefetched).
    #[inline]
    unsafe fn fetch_fields(&self, msg: Obj, fetched: &mut Fetched) -> PyResult<()> {
        // SAFETY: `# Safety` above: kept alive by the call's owned root (borrow rule, lib.rs).
        unsafe {
            if !fetched.dict {
                return Ok(());
            }
            let needs = &self.needs;
            fetched.kind = jsread::role(fetched.role);
            let wanted = match fetched.kind {
                Role::ToolResult => {
                    M_TOOL_CALL_ID
                        | if needs.is_error { M_IS_ERROR } else { 0 }
                        | if needs.result_timestamps || needs.chain {
                            M_TIMESTAMP
                        } else {
                            0
                        }
                }
                Role::Assistant => M_CONTENT | if needs.chain { M_TIMESTAMP } else { 0 },
                Role::User if needs.chain => M_CONTENT | M_TIMESTAMP,
                Role::Custom if needs.chain => M_CUSTOM_TYPE | M_DETAILS | M_TIMESTAMP,
                _ => 0,
            };
            if wanted != 0 {
                self.keys.scan(
                    msg,
                    &mut fetched.pos,
                    &MEMBER_FIELDS,
                    &mut fetched.members,
                    wanted,
                );
            }
            let [
                _,
                tool_call_id,
                is_error,
                timestamp,
                content,
                custom_type,
                details,
            ] = fetched.members;
            let fetch = |value: Option<Obj>| -> Option<Obj> {
                if let Some(value) = value {
                    prefetch(value.as_ptr());
                }
                value
            };
            match fetched.kind {
                Role::ToolResult => {
                    fetched.a = fetch(tool_call_id);
                    if needs.is_error {
                        fetched.b = fetch(is_error);
                    }
                    if needs.result_timestamps || needs.chain {
                        fetched.ts = fetch(timestamp);
                    }
                }
                Role::Assistant => {
                    fetched.a = fetch(content);
                    if needs.chain {
                        fetched.ts = fetch(timestamp);
                    }
                }
                Role::User => {
                    if needs.chain {
                        fetched.a = fetch(content);
                        fetched.ts = fetch(timestamp);
                    }
                }
                Role::Custom => {
                    if needs.chain {
                        fetched.a = fetch(custom_type);
                        fetched.b = fetch(details);
                        fetched.ts = fetch(timestamp);
                    }
                }
                Role::Other => {}
            }
            Ok(())
        }
    }

    /// Stage 3 (assistants): the item array of the content list.
    #[inline]
    unsafe fn fetch_items(&self, fetched: &Fetched) {
        // SAFETY: `# Safety` above: kept alive by the call's owned root (borrow rule, lib.rs).
        unsafe {
            if fetched.kind == Role::Assistant
                && let Some(content) = fetched.a
            {
                prefetch_body(content);
            }
        }
    }

    /// Stage 4 (assistants): the first content blocks (`body`: their hash tables too).
    #[inline]
    unsafe fn fetch_blocks(&self, fetched: &Fetched, body: bool) {
        // SAFETY: `# Safety` above: kept alive by the call's owned root (borrow rule, lib.rs).
        unsafe {
            if fetched.kind != Role::Assistant {
                return;
            }
            let Some(content) = fetched
                .a
                .filter(|c| type_is(*c, addr_of_mut!(ffi::PyList_Type)))
            else {
                return;
            };
            for block in list_items(content).take(PREFETCH_BLOCKS) {
                if body {
                    prefetch_body(block);
                } else {
                    prefetch(block.as_ptr());
                }
            }
        }
    }

    /// Last stage: the view (and phase 1b's record of the message, at `index` in the list).
    unsafe fn decode<'a>(
        &self,
        index: usize,
        fetched: &Fetched,
        view: &mut MsgView<Cow<'a, str>>,
    ) -> PyResult<()> {
        // SAFETY: `# Safety` above: kept alive by the call's owned root (borrow rule, lib.rs).
        unsafe {
            let py = self.py;
            let needs = &self.needs;
            if !fetched.dict {
                if let Some(scan) = self.scan {
                    scan.record(index, Scanned::Other);
                }
                return Ok(());
            }
            view.role = fetched.kind;
            let a = present(fetched.a);
            let b = present(fetched.b);
            let ts = present(fetched.ts);
            if let Some(scan) = self.scan {
                match fetched.kind {
                    Role::Assistant => {}
                    Role::ToolResult => scan.record(index, Scanned::Result),
                    _ => scan.record(index, Scanned::Other),
                }
            }
            match fetched.kind {
                Role::ToolResult => {
                    view.tool_call_id = self.js_id(a)?;
                    if needs.is_error {
                        view.is_error = b == Some(Obj::from_ptr(ffi::Py_True()));
                    }
                    if needs.result_timestamps || needs.chain {
                        view.timestamp = jsread::timestamp(py, ts)?;
                    }
                }
                Role::Assistant => {
                    match self.scan {
                        None => view.content = self.content_of(a, None)?,
                        Some(scan) => {
                            let mut calls = Calls::default();
                            view.content = self.content_of(a, Some(&mut calls))?;
                            let scanned = match view.content {
                                Content::Array(_) => calls.scanned(),
                                _ => Scanned::Other,
                            };
                            scan.record(index, scanned);
                        }
                    }
                    if needs.chain {
                        view.timestamp = jsread::timestamp(py, ts)?;
                    }
                }
                Role::User => {
                    if needs.chain {
                        view.timestamp = jsread::timestamp(py, ts)?;
                        view.synthetic_block_id = self.synthetic_id_of(a)?;
                    }
                }
                Role::Custom if needs.chain => {
                    if str_is(a, "context-prune-summary") {
                        view.summary = Some(Box::new(self.summary_refs_of(b)?));
                    }
                    // A chain's range may start at an anchor (2.10.0).
                    view.anchor = jsread::anchor_custom_type(py, a)?;
                    if view.anchor {
                        view.timestamp = jsread::timestamp(py, ts)?;
                    }
                }
                Role::Custom => {}
                Role::Other => {}
            }
            Ok(())
        }
    }

    /// Reads the views of `items`, in a software pipeline: while message i is decoded,
    /// the memory of the next ones is requested, a few messages ahead per level of
    /// indirection (object, hash table, values, content list, blocks), so that the loads
    /// overlap instead of stalling one after another. With a `scan`, `items` is the whole
    /// list (the record is by position).
    pub(super) unsafe fn read_all<'a>(
        &self,
        items: &[Obj],
    ) -> PyResult<Vec<MsgView<Cow<'a, str>>>> {
        // SAFETY: `# Safety` above: kept alive by the call's owned root (borrow rule, lib.rs).
        unsafe {
            let n = items.len();
            let mut fetched = vec![Fetched::default(); n];
            let mut views = Vec::with_capacity(n);
            for i in 0..n {
                if let Some(&msg) = items.get(i + AHEAD_OBJECT) {
                    prefetch(msg.as_ptr());
                }
                if let Some(&msg) = items.get(i + AHEAD_TABLE) {
                    prefetch_body(msg);
                }
                if let (Some(&msg), Some(f)) =
                    (items.get(i + AHEAD_ROLE), fetched.get_mut(i + AHEAD_ROLE))
                {
                    self.fetch_role(msg, f)?;
                }
                if i == 0 {
                    // The first messages missed the stages above.
                    for j in 0..AHEAD_ROLE.min(n) {
                        if let (Some(&msg), Some(f)) = (items.get(j), fetched.get_mut(j)) {
                            self.fetch_role(msg, f)?;
                        }
                    }
                    for j in 0..AHEAD_FIELDS.min(n) {
                        if let (Some(&msg), Some(f)) = (items.get(j), fetched.get_mut(j)) {
                            self.fetch_fields(msg, f)?;
                        }
                    }
                }
                if let (Some(&msg), Some(f)) = (
                    items.get(i + AHEAD_FIELDS),
                    fetched.get_mut(i + AHEAD_FIELDS),
                ) {
                    self.fetch_fields(msg, f)?;
                }
                if let Some(f) = fetched.get(i + AHEAD_ITEMS) {
                    self.fetch_items(f);
                }
                if let Some(f) = fetched.get(i + AHEAD_BLOCKS) {
                    self.fetch_blocks(f, false);
                }
                if let Some(f) = fetched.get(i + AHEAD_BLOCK_TABLES) {
                    self.fetch_blocks(f, true);
                }
                views.push(MsgView::new(Role::Other, Ts::Absent));
                if let (Some(view), Some(f)) = (views.last_mut(), fetched.get(i)) {
                    self.decode(i, f, view)?;
                }
            }
            Ok(views)
        }
    }
}

/// What the pipeline read of one message (borrowed values, `ABSENT` not filtered yet).
#[derive(Clone, Copy)]
struct Fetched {
    dict: bool,
    role: Option<Obj>,
    /// role, toolCallId, isError, timestamp, content, customType, details (raw, as far
    /// as the dict was walked: up to `pos`).
    members: [Option<Obj>; MEMBERS],
    pos: ffi::Py_ssize_t,
    kind: Role,
    /// toolCallId / content / customType
    a: Option<Obj>,
    /// isError / details
    b: Option<Obj>,
    ts: Option<Obj>,
}

impl Default for Fetched {
    fn default() -> Self {
        Fetched {
            dict: false,
            role: None,
            members: [None; MEMBERS],
            pos: 0,
            kind: Role::Other,
            a: None,
            b: None,
            ts: None,
        }
    }
}

/// The message views of a render (strings borrowed from the messages).
pub(super) type Views<'a> = Vec<MsgView<Cow<'a, str>>>;

/// What [`extract`] read: the views, the lengths when they were measured on the way, and
/// how many leading views the size memo's prefix lent (given back with
/// `SizeMemo::settle`).
pub(super) struct Extracted<'a> {
    pub(super) views: Views<'a>,
    pub(super) lens: Option<Vec<usize>>,
    pub(super) lent: usize,
}

/// The views of `list`'s messages, and their lengths when they were measured on the way.
///
/// When the state can stub or compress, a change is likely and every message will be
/// measured: each is then read right after it is measured, while its objects are in the CPU
/// caches. Otherwise (or when measuring fails: the error is raised only if the render changes
/// something) the views are read on their own, and a render that changes nothing never
/// measures.
///
/// # Safety
/// `list` must be a live list and the GIL held; the views borrow strings from its messages:
/// the caller keeps the list alive and runs no Python code while it holds them.
pub(super) unsafe fn extract<'a>(
    py: Python<'_>,
    list: Obj,
    reader: &Reader<'_, '_>,
    memo: Option<&mut SizeMemo>,
) -> PyResult<Extracted<'a>> {
    let speculate = reader.needs.result_timestamps || reader.needs.chain;
    if speculate {
        let mut read_error = false;
        // SAFETY: the caller's contract; reading views runs no Python code.
        let measured = unsafe {
            size_memo::measure_and_read(
                py,
                list,
                memo,
                Some(reader.needs),
                &reader.borrowed,
                |i, msg| {
                    let mut view = MsgView::new(Role::Other, Ts::Absent);
                    let read = reader.read_into(i, msg, &mut view);
                    read_error = read.is_err();
                    read.map(|()| view)
                },
            )
        };
        match measured {
            Ok(measured) => {
                return Ok(Extracted {
                    views: measured.views,
                    lens: Some(measured.lens),
                    lent: measured.lent,
                });
            }
            Err(err) if read_error => return Err(err),
            Err(_) => {
                // Read again below, from the start.
                if let Some(scan) = reader.scan {
                    scan.restart();
                }
            }
        }
    }
    // SAFETY: `# Safety` above: kept alive by the call's owned root (borrow rule, lib.rs).
    let views = unsafe {
        let items: Vec<Obj> = list_items(list).collect();
        reader.read_all(&items)?
    };
    Ok(Extracted {
        views,
        lens: None,
        lent: 0,
    })
}
