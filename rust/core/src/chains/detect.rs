//! `detectChains(messages, isProtected)` (05 section 11.1): one pass over the messages.

use std::borrow::Borrow;

use super::view::{AssistantContent, ChainMsg, MsgBody, id_truthy, occ_key_id};
use crate::collections::FastSet;
use crate::js::Throw;
use crate::view::{JsId, Role};

/// A value collected by detection, with where its first occurrence lives (so the binding
/// can return the caller's own object).
#[derive(Debug, Clone, PartialEq)]
pub struct Sourced {
    /// The value (Set identity).
    pub value: JsId,
    /// Index of the message it was read from.
    pub msg: usize,
    /// Position of the `toolCall` block, for ids read from an assistant message.
    pub block: Option<usize>,
}

/// One detected chain (the reference's `ChainRange`).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ChainRange {
    /// Index of the opening user message (`startUserTimestamp` is its timestamp).
    pub start: usize,
    /// Index of the closing text-only assistant (`finalAssistantTimestamp` is its timestamp);
    /// `None` for an interrupted chain (`finalAssistantTimestamp: null`).
    pub end: Option<usize>,
    /// `middleToolCallIds`: ids of toolCall blocks (truthy id and name) and of toolResults
    /// (truthy id), first-seen order, deduplicated.
    pub middle_ids: Vec<Sourced>,
    /// `middleOccurrenceKeys`: `occKey(toolCallId, resultTimestampOf(timestamp))` of every
    /// middle toolResult with a truthy id, deduplicated. `msg` is the toolResult; `value` is a
    /// string key unless the result has no numeric timestamp (then the id itself).
    pub middle_keys: Vec<Sourced>,
    /// `protectedToolCallIds`: middle ids whose call (by name and `args.path`) or result (by
    /// name) is protected, first-seen order.
    pub protected_ids: Vec<Sourced>,
}

impl ChainRange {
    /// The keys the index lookups use: `middleOccurrenceKeys` when non-empty, else
    /// `middleToolCallIds`.
    pub fn lookup_keys(&self) -> &[Sourced] {
        if self.middle_keys.is_empty() {
            &self.middle_ids
        } else {
            &self.middle_keys
        }
    }

    /// Whether every middle id is protected (and there is one): compressing saves nothing.
    pub fn fully_protected(&self) -> bool {
        !self.middle_ids.is_empty()
            && self
                .middle_ids
                .iter()
                .all(|id| self.protected_ids.iter().any(|p| p.value == id.value))
    }
}

/// Up to this many values an [`OrderedSet`] is searched in order (a chain's few ids),
/// without hashing them.
const SMALL_SET: usize = 16;

/// An insertion-ordered set of sourced values.
#[derive(Default)]
struct OrderedSet {
    /// The values, once there are more than [`SMALL_SET`] of them (empty before).
    seen: FastSet<JsId>,
    items: Vec<Sourced>,
}

impl OrderedSet {
    fn add(&mut self, value: &JsId, msg: usize, block: Option<usize>) {
        if self.seen.is_empty() {
            if self.items.iter().any(|item| item.value == *value) {
                return;
            }
            if self.items.len() == SMALL_SET {
                self.seen = self.items.iter().map(|item| item.value.clone()).collect();
                self.seen.insert(value.clone());
            }
        } else if !self.seen.insert(value.clone()) {
            return;
        }
        self.items.push(Sourced {
            value: value.clone(),
            msg,
            block,
        });
    }
}

/// The chain being collected.
#[derive(Default)]
struct Open {
    start: usize,
    ids: OrderedSet,
    keys: OrderedSet,
    protected: OrderedSet,
}

impl Open {
    fn emit(self, end: Option<usize>) -> ChainRange {
        ChainRange {
            start: self.start,
            end,
            middle_ids: self.ids.items,
            middle_keys: self.keys.items,
            protected_ids: self.protected.items,
        }
    }
}

/// Detects the closed and interrupted chains of `msgs` (an open chain at the end is not
/// emitted). `Err` where the reference throws: a `null` message, or a `null` content element
/// of an assistant inside a chain.
pub fn detect_chains<M: Borrow<ChainMsg>>(msgs: &[M]) -> Result<Vec<ChainRange>, Throw> {
    detect_chains_from(msgs, 0)
}

/// [`detect_chains`] of `msgs` whose first `unchanged` messages are the ones an earlier
/// detection read, which found `previous`: its chains that start before the resume point
/// (shared as they are), then the chains detected from there. With `unchanged` 0 it is a
/// full detection. `C` is how the caller holds chains (`ChainRange` itself, or an `Arc`).
pub fn detect_chains_resumed<M, C>(
    msgs: &[M],
    previous: &[C],
    unchanged: usize,
) -> Result<Vec<C>, Throw>
where
    M: Borrow<ChainMsg>,
    C: Borrow<ChainRange> + Clone + From<ChainRange>,
{
    let from = resume_point(msgs, unchanged);
    let mut chains: Vec<C> = previous
        .iter()
        .take_while(|c| (*c).borrow().start < from)
        .cloned()
        .collect();
    chains.extend(detect_chains_from(msgs, from)?.into_iter().map(C::from));
    Ok(chains)
}

/// Where detection over `msgs` may resume when its first `unchanged` messages are the ones
/// an earlier detection read: the last non-synthetic user message before `unchanged` (0 when
/// there is none). Such a message ends whatever chain is open and opens a new one whatever
/// came before it, so the chains starting before it are exactly the earlier detection's
/// chains starting before it, and [`detect_chains_from`] that point finds the rest.
fn resume_point<M: Borrow<ChainMsg>>(msgs: &[M], unchanged: usize) -> usize {
    resume_point_by(|i| msgs.get(i).map(Borrow::borrow), unchanged)
}

/// [`resume_point`] over the messages `message(i)` gives (`None` past the end).
pub(crate) fn resume_point_by<'a>(
    message: impl Fn(usize) -> Option<&'a ChainMsg>,
    unchanged: usize,
) -> usize {
    (0..unchanged)
        .rev()
        .find(|&i| {
            message(i).is_some_and(|m| {
                m.role == Role::User && !matches!(m.body, MsgBody::User { synthetic: true })
            })
        })
        .unwrap_or(0)
}

/// [`detect_chains`] from message `from` on (indices stay those of `msgs`): the chains that
/// start at or after `from`, when `from` is 0 or a [`resume_point`]. The messages before
/// `from` are not read (their null checks are the earlier detection's).
fn detect_chains_from<M: Borrow<ChainMsg>>(
    msgs: &[M],
    from: usize,
) -> Result<Vec<ChainRange>, Throw> {
    detect_chains_of(
        msgs.iter()
            .enumerate()
            .skip(from)
            .map(|(i, m)| (i, m.borrow())),
    )
}

/// [`detect_chains_from`] over `(index, message)` pairs, the messages from the resume point
/// on in order.
pub(crate) fn detect_chains_of<'a>(
    msgs: impl Iterator<Item = (usize, &'a ChainMsg)>,
) -> Result<Vec<ChainRange>, Throw> {
    let mut ranges = Vec::new();
    let mut open: Option<Open> = None;
    for (i, msg) in msgs {
        if msg.body == MsgBody::Nullish {
            return Err(Throw);
        }
        if msg.role == Role::User {
            if matches!(msg.body, MsgBody::User { synthetic: true }) {
                continue;
            }
            if let Some(chain) = open.take() {
                ranges.push(chain.emit(None));
            }
            open = Some(Open {
                start: i,
                ..Open::default()
            });
            continue;
        }
        let Some(chain) = open.as_mut() else {
            if msg.role == Role::Custom && msg.body == MsgBody::Anchor {
                open = Some(Open {
                    start: i,
                    ..Open::default()
                });
            }
            continue;
        };
        match (&msg.role, &msg.body) {
            (Role::Assistant, MsgBody::Assistant(content)) => {
                if let AssistantContent::Array { has_nullish, .. } = content
                    && *has_nullish
                {
                    return Err(Throw);
                }
                if content.has_tool_calls() {
                    if let AssistantContent::Array { calls, .. } = content {
                        for call in calls.iter().filter(|c| c.listed) {
                            chain.ids.add(&call.id, i, Some(call.block));
                            if call.protected {
                                chain.protected.add(&call.id, i, Some(call.block));
                            }
                        }
                    }
                } else if let Some(done) = open.take() {
                    ranges.push(done.emit(Some(i)));
                }
            }
            (Role::Assistant, _) => {
                // An assistant whose content was not read: no tool calls, closes the chain.
                if let Some(done) = open.take() {
                    ranges.push(done.emit(Some(i)));
                }
            }
            (Role::ToolResult, MsgBody::ToolResult { id, protected }) if id_truthy(id) => {
                chain.ids.add(id, i, None);
                let key = occ_key_id(id, msg.timestamp.num());
                chain.keys.add(&key, i, None);
                if *protected {
                    chain.protected.add(id, i, None);
                }
            }
            _ => {}
        }
    }
    Ok(ranges)
}

#[cfg(test)]
mod tests {
    use super::super::view::testing::*;
    use super::*;
    use crate::view::Ts;

    fn ids(list: &[Sourced]) -> Vec<String> {
        list.iter().map(|s| s.value.to_js_string()).collect()
    }

    fn closed(msgs: &[ChainMsg]) -> Vec<ChainRange> {
        detect_chains(msgs).unwrap_or_default()
    }

    #[test]
    fn resumed_detection_keeps_the_chains_before_the_last_plain_user() {
        let msgs = vec![
            text(0.5),
            user(1.0),
            assistant(2.0, vec![call("a")]),
            result("a", 3.0),
            text(4.0),
            user(5.0),
            assistant(6.0, vec![call("b")]),
            synthetic(7.0),
            result("b", 8.0),
            text(9.0),
        ];
        // No user before position 1: nothing to keep, detection starts over.
        assert_eq!(resume_point(&msgs, 1), 0);
        assert_eq!(resume_point(&msgs, 5), 1);
        // The synthetic user at 7 is a pass-through: the resume point stays at 5.
        assert_eq!(resume_point(&msgs, 9), 5);
        assert_eq!(resume_point(&msgs, 99), 5);
        let full = closed(&msgs);
        for unchanged in 0..=msgs.len() {
            let resumed = detect_chains_resumed(&msgs, &full, unchanged).unwrap_or_default();
            assert_eq!(resumed, full, "unchanged = {unchanged}");
        }
    }

    #[test]
    fn an_anchor_custom_message_opens_a_chain_only_while_none_is_open() {
        // pi-condense 2.10.0 (#13): a non-pruner custom message opens a chain when idle; in
        // a chain it is passed over; a pruner one never opens one.
        let msgs = vec![
            custom(1.0, true),
            assistant(2.0, vec![call("a")]),
            custom(2.5, true),
            result("a", 3.0),
            text(4.0),
            custom(5.0, false),
            assistant(6.0, vec![call("b")]),
            result("b", 7.0),
            text(8.0),
        ];
        let chains = closed(&msgs);
        assert_eq!(chains.len(), 1);
        assert_eq!((chains[0].start, chains[0].end), (0, Some(4)));
        assert_eq!(ids(&chains[0].middle_ids), ["a"]);
    }

    #[test]
    fn ordered_set_keeps_first_insertions_across_the_small_size() {
        let mut set = OrderedSet::default();
        let mut expected = Vec::new();
        for round in 0..3 {
            for i in 0..(SMALL_SET + 9) {
                let value = JsId::Str(format!("id-{}", (i * 5) % (SMALL_SET + 5)));
                set.add(&value, round * 100 + i, None);
                if !expected.contains(&value) {
                    expected.push(value);
                }
            }
        }
        let got: Vec<JsId> = set.items.iter().map(|item| item.value.clone()).collect();
        assert_eq!(got, expected);
        assert_eq!(set.items.len(), SMALL_SET + 5);
        // Each value keeps the position of its first insertion (the first round).
        assert!(set.items.iter().all(|item| item.msg < 100));
    }

    #[test]
    fn empty_input_has_no_chains() {
        assert!(closed(&[]).is_empty());
    }

    #[test]
    fn one_closed_chain() {
        let msgs = [
            user(1.0),
            assistant(2.0, vec![call("a")]),
            result("a", 3.0),
            text(4.0),
        ];
        let chains = closed(&msgs);
        assert_eq!(chains.len(), 1);
        assert_eq!(chains[0].start, 0);
        assert_eq!(chains[0].end, Some(3));
        assert_eq!(ids(&chains[0].middle_ids), ["a"]);
        assert_eq!(ids(&chains[0].middle_keys), ["a@3"]);
        assert!(chains[0].protected_ids.is_empty());
    }

    #[test]
    fn multiple_chains_in_order_and_open_chain_dropped() {
        let msgs = [
            user(1.0),
            text(2.0),
            user(3.0),
            assistant(4.0, vec![call("b")]),
            result("b", 5.0),
            text(6.0),
            user(7.0),
            assistant(8.0, vec![call("c")]),
        ];
        let chains = closed(&msgs);
        assert_eq!(
            chains.iter().map(|c| (c.start, c.end)).collect::<Vec<_>>(),
            [(0, Some(1)), (2, Some(5))]
        );
    }

    #[test]
    fn synthetic_user_message_is_a_passthrough() {
        let msgs = [
            user(1.0),
            assistant(2.0, vec![call("a")]),
            synthetic(2.5),
            result("a", 3.0),
            text(4.0),
        ];
        let chains = closed(&msgs);
        assert_eq!(chains.len(), 1);
        assert_eq!(chains[0].start, 0);
    }

    #[test]
    fn interrupted_chain_keeps_what_it_collected() {
        let msgs = [
            user(1.0),
            assistant(2.0, vec![call("a")]),
            protected_result("a", 3.0),
            user(4.0),
            text(5.0),
        ];
        let chains = closed(&msgs);
        assert_eq!(chains.len(), 2);
        assert_eq!(chains[0].end, None);
        assert_eq!(ids(&chains[0].middle_ids), ["a"]);
        assert_eq!(ids(&chains[0].middle_keys), ["a@3"]);
        assert_eq!(ids(&chains[0].protected_ids), ["a"]);
        assert_eq!(chains[1].end, Some(4));
    }

    #[test]
    fn ids_from_calls_and_results_deduplicated() {
        let msgs = [
            user(1.0),
            assistant(2.0, vec![call("a"), call("b")]),
            result("b", 3.0),
            result("c", 4.0),
            result("a", 5.0),
            text(6.0),
        ];
        let chains = closed(&msgs);
        assert_eq!(ids(&chains[0].middle_ids), ["a", "b", "c"]);
        assert_eq!(ids(&chains[0].middle_keys), ["b@3", "c@4", "a@5"]);
    }

    #[test]
    fn unlisted_calls_still_mark_a_tool_turn() {
        let mut unnamed = call("x");
        unnamed.listed = false;
        let msgs = [user(1.0), assistant(2.0, vec![unnamed]), text(3.0)];
        let chains = closed(&msgs);
        assert_eq!(chains.len(), 1);
        assert_eq!(chains[0].end, Some(2));
        assert!(chains[0].middle_ids.is_empty());
    }

    #[test]
    fn protection_from_both_sides_without_leaking() {
        let msgs = [
            user(1.0),
            assistant(2.0, vec![protected_call("p"), call("q")]),
            result("p", 3.0),
            protected_result("r", 4.0),
            text(5.0),
            user(6.0),
            assistant(7.0, vec![call("s")]),
            result("s", 8.0),
            text(9.0),
        ];
        let chains = closed(&msgs);
        assert_eq!(ids(&chains[0].protected_ids), ["p", "r"]);
        assert!(chains[1].protected_ids.is_empty());
        assert!(!chains[0].fully_protected());
    }

    #[test]
    fn reused_ids_get_distinct_keys_and_calls_without_results_none() {
        let msgs = [
            user(1.0),
            assistant(2.0, vec![call("bash_1"), call("lost")]),
            result("bash_1", 3.0),
            text(4.0),
            user(5.0),
            assistant(6.0, vec![call("bash_1")]),
            result("bash_1", 7.0),
            text(8.0),
        ];
        let chains = closed(&msgs);
        assert_eq!(ids(&chains[0].middle_keys), ["bash_1@3"]);
        assert_eq!(ids(&chains[1].middle_keys), ["bash_1@7"]);
        assert_eq!(ids(&chains[0].middle_ids), ["bash_1", "lost"]);
    }

    #[test]
    fn result_without_numeric_timestamp_keys_by_bare_id() {
        let mut r = result("a", 0.0);
        r.timestamp = Ts::Absent;
        let msgs = [user(1.0), assistant(2.0, vec![call("a")]), r, text(4.0)];
        assert_eq!(ids(&closed(&msgs)[0].middle_keys), ["a"]);
    }

    #[test]
    fn falsy_result_ids_are_ignored() {
        let msgs = [user(1.0), result("", 2.0), text(3.0)];
        let chains = closed(&msgs);
        assert!(chains[0].middle_ids.is_empty());
        assert!(chains[0].middle_keys.is_empty());
    }

    #[test]
    fn messages_before_the_first_user_are_ignored() {
        let msgs = [text(0.5), result("z", 0.6), user(1.0), text(2.0)];
        let chains = closed(&msgs);
        assert_eq!(chains.len(), 1);
        assert!(chains[0].middle_ids.is_empty());
    }

    #[test]
    fn fully_protected_needs_every_middle_protected() {
        let msgs = [
            user(1.0),
            assistant(2.0, vec![protected_call("p")]),
            protected_result("p", 3.0),
            text(4.0),
        ];
        assert!(closed(&msgs)[0].fully_protected());
        let empty = ChainRange::default();
        assert!(!empty.fully_protected());
    }

    #[test]
    fn nullish_message_or_block_throws_like_the_reference() {
        let mut null = ChainMsg::new(Role::Other, Ts::Absent);
        null.body = MsgBody::Nullish;
        assert_eq!(detect_chains(&[null]), Err(Throw));
        let mut bad = assistant(2.0, vec![call("a")]);
        bad.body = MsgBody::Assistant(AssistantContent::Array {
            calls: vec![],
            has_nullish: true,
        });
        // Outside a chain the content is never read.
        assert!(detect_chains(&[bad.clone()]).is_ok());
        assert_eq!(detect_chains(&[user(1.0), bad]), Err(Throw));
    }

    #[test]
    fn lookup_keys_fall_back_to_ids() {
        let mut chain = ChainRange::default();
        chain.middle_ids.push(Sourced {
            value: JsId::str("a"),
            msg: 1,
            block: Some(0),
        });
        assert_eq!(ids(chain.lookup_keys()), ["a"]);
    }
}
