//! `extractChainRecords(messages, chain, isIndexed)` (05 section 11.4): the tool calls of an
//! uncovered chain that the deterministic backfill indexes.
//!
//! The span is resolved exactly as render phase 3 resolves it
//! ([`crate::render::chain::range::resolve_range`]): a unique user message at the start
//! timestamp, a unique assistant at the final timestamp, start before end; otherwise nothing
//! is extracted.

use std::borrow::Borrow;
use std::collections::{HashMap, HashSet};

use super::view::{AssistantContent, ChainMsg, MsgBody, occ_key_id};
use crate::index::ChainEntry;
use crate::js::{JsField, Throw};
use crate::render::chain::range::resolve_range;
use crate::view::{JsId, MsgView, Role};

/// One record to backfill: the toolResult and the `toolCall` block it answers (the last
/// block with that id before it inside the span).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Extracted {
    /// Index of the toolResult message.
    pub result: usize,
    /// Index of the assistant message holding the call.
    pub call_msg: usize,
    /// Position of the `toolCall` block in that message's `content`.
    pub call_block: usize,
}

/// The role + timestamp views range resolution reads (tests: the binding builds its own).
#[cfg(test)]
pub(crate) fn range_views(msgs: &[ChainMsg]) -> Vec<MsgView> {
    msgs.iter()
        .map(|m| {
            let mut view = MsgView::new(m.role, m.timestamp);
            view.anchor = matches!(m.body, MsgBody::Anchor);
            view
        })
        .collect()
}

/// Walks the resolved span of the chain `start_ts -> final_ts` and returns, in message order,
/// every toolResult that answers a call opened inside the span, is not protected (by id),
/// has a numeric timestamp, and whose occurrence key `is_indexed` rejects. `views` are
/// the role + timestamp views of `msgs`. An unresolvable span yields nothing. `Err` where the reference
/// throws (a `null` content element of an assistant inside the span).
pub fn extract_chain_records<M: Borrow<ChainMsg>>(
    msgs: &[M],
    views: &[MsgView],
    start_ts: f64,
    final_ts: f64,
    protected: &HashSet<JsId>,
    is_indexed: impl Fn(&JsId) -> bool,
) -> Result<Vec<Extracted>, Throw> {
    let entry = ChainEntry {
        start_user_timestamp: start_ts,
        final_assistant_timestamp: JsField::Number(final_ts),
        ..ChainEntry::default()
    };
    let Some(range) = resolve_range(&entry, views) else {
        return Ok(Vec::new());
    };
    extract_span(
        (range.start + 1..range.end).map_while(|i| msgs.get(i).map(|m| (i, m.borrow()))),
        protected,
        is_indexed,
    )
}

/// The records of a resolved span: `span` gives the messages strictly between its start
/// user and its final assistant, with their indices, in order.
pub(crate) fn extract_span<'a>(
    span: impl Iterator<Item = (usize, &'a ChainMsg)>,
    protected: &HashSet<JsId>,
    is_indexed: impl Fn(&JsId) -> bool,
) -> Result<Vec<Extracted>, Throw> {
    let mut open: HashMap<&JsId, (usize, usize)> = HashMap::new();
    let mut out = Vec::new();
    for (i, msg) in span {
        match (&msg.role, &msg.body) {
            (_, MsgBody::Nullish) => return Err(Throw),
            (
                Role::Assistant,
                MsgBody::Assistant(AssistantContent::Array { calls, has_nullish }),
            ) => {
                if *has_nullish {
                    return Err(Throw);
                }
                for call in calls {
                    open.insert(&call.id, (i, call.block));
                }
            }
            (Role::ToolResult, MsgBody::ToolResult { id, .. }) => {
                let Some(&(call_msg, call_block)) = open.get(id) else {
                    continue;
                };
                if protected.contains(id) {
                    continue;
                }
                let Some(ts) = msg.timestamp.num() else {
                    continue;
                };
                if is_indexed(&occ_key_id(id, Some(ts))) {
                    continue;
                }
                out.push(Extracted {
                    result: i,
                    call_msg,
                    call_block,
                });
            }
            _ => {}
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::super::view::CallView;
    use super::super::view::testing::*;
    use super::*;
    use crate::view::Ts;

    fn run(
        msgs: &[ChainMsg],
        start: f64,
        end: f64,
        protected: &[&str],
        indexed: &[&str],
    ) -> Vec<Extracted> {
        let protected: HashSet<JsId> = protected.iter().map(|s| JsId::str(s)).collect();
        let views = range_views(msgs);
        extract_chain_records(
            msgs,
            &views,
            start,
            end,
            &protected,
            |k| matches!(k, JsId::Str(s) if indexed.contains(&s.as_str())),
        )
        .unwrap_or_default()
    }

    fn span() -> Vec<ChainMsg> {
        vec![
            user(1.0),
            assistant(2.0, vec![call("a"), call("b")]),
            result("a", 3.0),
            result("b", 4.0),
            assistant(5.0, vec![call("c")]),
            result("c", 6.0),
            text(7.0),
        ]
    }

    #[test]
    fn every_answered_call_in_order() {
        let got = run(&span(), 1.0, 7.0, &[], &[]);
        assert_eq!(
            got,
            [
                Extracted {
                    result: 2,
                    call_msg: 1,
                    call_block: 0
                },
                Extracted {
                    result: 3,
                    call_msg: 1,
                    call_block: 1
                },
                Extracted {
                    result: 5,
                    call_msg: 4,
                    call_block: 0
                },
            ]
        );
    }

    #[test]
    fn protected_and_indexed_keys_excluded() {
        let got = run(&span(), 1.0, 7.0, &["a"], &["c@6"]);
        assert_eq!(got.iter().map(|e| e.result).collect::<Vec<_>>(), [3]);
    }

    #[test]
    fn results_without_a_call_or_numeric_timestamp_skipped() {
        let mut msgs = span();
        msgs[3].timestamp = Ts::Other;
        msgs.insert(4, result("stray", 4.5));
        let got = run(&msgs, 1.0, 7.0, &[], &[]);
        assert_eq!(got.iter().map(|e| e.result).collect::<Vec<_>>(), [2, 6]);
    }

    #[test]
    fn later_block_with_the_same_id_wins() {
        let msgs = vec![
            user(1.0),
            assistant(2.0, vec![call("a")]),
            assistant(3.0, vec![call("x"), call("a")]),
            result("a", 4.0),
            text(5.0),
        ];
        let got = run(&msgs, 1.0, 5.0, &[], &[]);
        assert_eq!(
            got,
            [Extracted {
                result: 3,
                call_msg: 2,
                call_block: 1
            }]
        );
    }

    #[test]
    fn unlisted_calls_still_open() {
        let mut unnamed: CallView = call("a");
        unnamed.listed = false;
        let msgs = vec![
            user(1.0),
            assistant(2.0, vec![unnamed]),
            result("a", 3.0),
            text(4.0),
        ];
        assert_eq!(run(&msgs, 1.0, 4.0, &[], &[]).len(), 1);
    }

    #[test]
    fn unresolvable_span_extracts_nothing() {
        // Wrong final timestamp.
        assert!(run(&span(), 1.0, 99.0, &[], &[]).is_empty());
        // Duplicate start timestamp.
        let mut msgs = span();
        msgs.push(user(1.0));
        assert!(run(&msgs, 1.0, 7.0, &[], &[]).is_empty());
        // A toolResult sharing the final timestamp does not count as the end.
        let msgs = vec![user(1.0), assistant(2.0, vec![call("a")]), result("a", 3.0)];
        assert!(run(&msgs, 1.0, 3.0, &[], &[]).is_empty());
    }

    #[test]
    fn nullish_content_inside_the_span_throws() {
        let mut msgs = span();
        msgs[4].body = MsgBody::Assistant(AssistantContent::Array {
            calls: vec![],
            has_nullish: true,
        });
        let views = range_views(&msgs);
        assert_eq!(
            extract_chain_records(&msgs, &views, 1.0, 7.0, &HashSet::new(), |_| false),
            Err(Throw)
        );
    }
}
