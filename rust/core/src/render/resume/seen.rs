//! Where things first appear in the messages a resume covers: the question "does an index
//! change, or a new message, touch one of the messages before position `p`?" answered by a
//! lookup. Built from the messages alone (what they hold does not depend on the state), and
//! only ever extended: the messages a resume covers are the very same objects on every call.
//!
//! Strings are kept as 64-bit hashes. A collision can only make a question answer "yes"
//! where the true answer is "no" (an earlier restart, or a fallback to a full render), never
//! the other way round.

use std::hash::BuildHasher;

use super::super::chain::range::strict_key;
use super::super::ids::push_result_key;
use crate::collections::FastMap;
use crate::render::chain::drop::{RefCheck, ref_checks};
use crate::view::{IdStr, JsIdOf, MsgView, Role, SummaryRefs, Ts};

/// A dropped result's lookup key (`k:` + key) or a dropped call's or result's string id
/// (`i:` + id), as the per-batch summary check reads them (04 section 5.5).
pub(super) fn dropped_key(key: &str) -> Box<str> {
    format!("k:{key}").into_boxed_str()
}

pub(super) fn dropped_id(id: &str) -> Box<str> {
    format!("i:{id}").into_boxed_str()
}

/// A hash of a string of one kind (the kind byte keeps kinds apart).
pub(crate) fn tagged(hasher: &foldhash::fast::RandomState, kind: u8, text: &str) -> u64 {
    hasher.hash_one((kind, text))
}

/// The kinds of strings hashed.
pub(crate) const KEY: u8 = b'k';
pub(crate) const ID: u8 = b'i';
pub(crate) const BODY_KEY: u8 = b'b';

/// What a per-batch summary's refs are checked by (04 section 5.5; see
/// [`dropped_key`]): `k:id@resultTimestamp` for a ref with a result timestamp,
/// `i:` + the bare id for one without; `None` where that check throws (not an array, a
/// nullish ref, or a non-string id without a result timestamp).
pub(crate) fn summary_refs<S: AsRef<str>>(refs: &SummaryRefs<S>) -> Option<Vec<Box<str>>> {
    ref_checks(refs)
        .ok()?
        .map(|check| match check.ok()? {
            RefCheck::Key(key) => Some(dropped_key(&key)),
            RefCheck::Id(id) => Some(dropped_id(id)),
        })
        .collect()
}

/// First positions, by what the messages hold (module docs).
#[derive(Debug, Clone, Default)]
pub(crate) struct Seen {
    /// The messages read so far: `[0, covered)`.
    pub(crate) covered: usize,
    /// toolResults by lookup key (`KEY`) and by string id (`ID`).
    pub(crate) results: FastMap<u64, usize>,
    /// Assistants by the ids of their toolCall blocks (any id type).
    pub(crate) calls: FastMap<u64, usize>,
    /// The positions of the user messages, ascending.
    pub(crate) users_at: Vec<usize>,
    /// Users and assistants by timestamp (strict key): every position, in order.
    pub(crate) users: FastMap<u64, Vec<usize>>,
    pub(crate) assistants: FastMap<u64, Vec<usize>>,
    /// Assistants without a `timestamp` key.
    pub(crate) absent_assistants: Vec<usize>,
    /// Per-batch summaries by (the hashes of) what their refs are checked by.
    pub(crate) summary_refs: FastMap<u64, usize>,
    /// The first summary whose check throws.
    pub(crate) bad_summary: Option<usize>,
    /// The first user holding a synthetic chain message.
    pub(crate) synthetic: Option<usize>,
    /// The first assistant whose content phase 2 cannot map.
    pub(crate) purge_throws: Option<usize>,
}

fn first(map: &mut FastMap<u64, usize>, key: u64, at: usize) {
    map.entry(key).or_insert(at);
}

impl Seen {
    /// Reads the messages of `msgs` (message `offset + j` at `msgs[j]`) not read yet.
    pub(crate) fn extend<S: IdStr>(
        &mut self,
        hasher: &foldhash::fast::RandomState,
        msgs: &[MsgView<S>],
        offset: usize,
    ) {
        let mut key = String::new();
        for (j, msg) in msgs.iter().enumerate() {
            let at = offset + j;
            if at < self.covered {
                continue;
            }
            match msg.role {
                Role::ToolResult => {
                    key.clear();
                    if push_result_key(&mut key, msg) {
                        first(&mut self.results, tagged(hasher, KEY, &key), at);
                    }
                    if let JsIdOf::Str(id) = &msg.tool_call_id {
                        first(&mut self.results, tagged(hasher, ID, id.as_ref()), at);
                    }
                }
                Role::Assistant => {
                    match msg.checked_blocks() {
                        Ok(blocks) => {
                            for id in blocks.call_ids() {
                                first(&mut self.calls, hasher.hash_one(id.borrowed()), at);
                            }
                        }
                        Err(_) => {
                            self.purge_throws.get_or_insert(at);
                        }
                    }
                    match msg.timestamp {
                        Ts::Num(x) => {
                            if let Some(k) = strict_key(x) {
                                self.assistants.entry(k).or_default().push(at);
                            }
                        }
                        Ts::Absent => self.absent_assistants.push(at),
                        Ts::Other => {}
                    }
                }
                Role::User => {
                    self.users_at.push(at);
                    if msg.synthetic_block_id.is_some() {
                        self.synthetic.get_or_insert(at);
                    }
                    if let Some(k) = msg.timestamp.num().and_then(strict_key) {
                        self.users.entry(k).or_default().push(at);
                    }
                }
                Role::Custom if msg.anchor => {
                    if let Some(k) = msg.timestamp.num().and_then(strict_key) {
                        self.users.entry(k).or_default().push(at);
                    }
                }
                Role::Custom | Role::Other => {}
            }
            if let Some(refs) = &msg.summary {
                match summary_refs(refs) {
                    Some(refs) => {
                        for r in refs {
                            first(&mut self.summary_refs, hasher.hash_one(&*r), at);
                        }
                    }
                    None => {
                        self.bad_summary.get_or_insert(at);
                    }
                }
            }
        }
        self.covered = self.covered.max(offset + msgs.len());
    }

    /// Whether message `at` is a user message.
    pub(crate) fn is_user(&self, at: usize) -> bool {
        self.users_at.binary_search(&at).is_ok()
    }

    /// Whether a user at timestamp `key` stands before `before`.
    pub(crate) fn user_before(&self, key: u64, before: usize) -> bool {
        self.users
            .get(&key)
            .and_then(|at| at.first())
            .is_some_and(|&at| at < before)
    }

    /// Whether an assistant at timestamp `ts` stands before `before`.
    pub(crate) fn assistant_before(&self, ts: Ts, before: usize) -> bool {
        let positions = match ts {
            Ts::Num(x) => strict_key(x).and_then(|k| self.assistants.get(&k)),
            Ts::Absent => Some(&self.absent_assistants),
            Ts::Other => None,
        };
        positions
            .and_then(|at| at.first())
            .is_some_and(|&at| at < before)
    }

    /// The first position of anything hashed to `h` in `map` (`usize::MAX`: none).
    pub(crate) fn at(map: &FastMap<u64, usize>, h: u64) -> usize {
        map.get(&h).copied().unwrap_or(usize::MAX)
    }
}
