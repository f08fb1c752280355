//! Render (spec 04): the `context`-event rewrite of the message list, phases 0-4.
//!
//! The binding extracts a light [`view::MsgView`] per message, the phases here
//! decide, and the result is a [`plan::RenderPlan`]: for each output slot either
//! "keep input message i" or a description of a new message. The binding builds
//! the new messages and reuses every untouched input object.
//!
//! | phase | module | spec |
//! |---|---|---|
//! | 0 grace set | [`grace`] | 04 section 3.1 |
//! | 1 stub-replace | `stub_replace` | 04 section 3.2 |
//! | 1b supersession | [`supersede`] | pi-condense 2.10.3 |
//! | 2 error purge | `error_purge` | 04 section 4 |
//! | 3 chain-range prune | `chain`, `placeholders` | 04 section 5 |
//! | 4 orphan sweep | `orphan_sweep` | 04 section 6 |
//!
//! Inputs on which the reference throws (04 section 6.1) end the render with
//! [`plan::RenderPlan::threw`] set: the caller keeps its list, and only the
//! diagnostics reported before the throw survive.

pub(crate) mod chain;
pub(crate) mod error_purge;
pub mod grace;
pub(crate) mod ids;
pub(crate) mod orphan_sweep;
pub(crate) mod plan;
pub mod resume;
pub mod size;
pub(crate) mod state;
pub(crate) mod stub_replace;
pub mod supersede;

#[cfg(test)]
pub(crate) mod testing;

pub use crate::view;
pub use crate::view::{
    Block, Blocks, Content, CowId, IdStr, JsId, JsIdOf, MsgView, Role, SummaryRef, SummaryRefs, Ts,
};
pub use ids::ResultKeys;
pub use plan::{Diagnostic, DiagnosticKind, Item, Piece, Purge, RenderPlan, Text};
pub use resume::{Fallback, Resume, TailPlan, resume_render};
pub use state::RenderState;

use std::collections::HashSet;

use crate::index::Record;
use crate::js::JsField;
use crate::keys::{ProtectedMatcher, ToolRule};

pub use crate::collections::{FastMap, FastSet};

pub use crate::js::Throw;

/// Phase 2 settings, present iff `purgeErrors.enabled` is truthy.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PurgeConfig {
    /// `cooldownTurns` as a JS number; `None` when a comparison with it is
    /// always false (absent, `NaN`, non-numeric).
    pub cooldown_turns: Option<f64>,
    /// `minArgChars`, same convention.
    pub min_arg_chars: Option<f64>,
}

/// Phase 3 settings, present iff `chainCompression.enabled` is truthy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChainConfig {
    /// `stripFinalAssistantThinking` is truthy.
    pub strip_final_assistant_thinking: bool,
}

/// The protection predicate of the render-time re-check (05 section 2.2).
pub trait Protection {
    /// `isProtected(record.toolName, record.args, cfg)`, given `args.path` when it is a string.
    fn is_protected(&self, tool_name: &JsField, path: Option<&str>) -> bool;

    /// The key its verdicts are remembered under in a record's
    /// [`crate::keys::VerdictMemo`]: nonzero only when the verdict is a pure function of the
    /// name and path that never changes.
    fn memo_key(&self) -> u64 {
        0
    }
}

/// [`Protection::is_protected`] of a record, remembered in the record for that rule.
pub(crate) fn record_is_protected(rule: &dyn Protection, rec: &Record) -> bool {
    let key = rule.memo_key();
    if let Some(verdict) = rec.protection.get(key) {
        return verdict;
    }
    let verdict = rule.is_protected(&rec.tool_name, rec.args_path.as_deref());
    rec.protection.set(key, verdict);
    verdict
}

impl Protection for ProtectedMatcher {
    fn memo_key(&self) -> u64 {
        ProtectedMatcher::memo_key(self)
    }

    fn is_protected(&self, tool_name: &JsField, path: Option<&str>) -> bool {
        match self.rule() {
            ToolRule::Names => ProtectedMatcher::is_protected(self, tool_name.as_str(), path),
            // `raw.includes(toolName)` converts the name with `String()`.
            ToolRule::Substring(_) => {
                let name: Vec<u16> = match tool_name {
                    JsField::Str(s) => s.to_utf16(),
                    other => other.js_string().encode_utf16().collect(),
                };
                self.is_protected_tool_utf16(&name) || path.is_some_and(|p| self.matches_path(p))
            }
        }
    }
}

/// What render reads from the config (04 section 1).
#[derive(Clone, Copy, Default)]
pub struct RenderConfig<'a> {
    /// `recoveryGraceTurns` (grace is off unless `> 0`).
    pub recovery_grace_turns: f64,
    /// Phase 2, when enabled.
    pub purge: Option<PurgeConfig>,
    /// Phase 3, when enabled.
    pub chain: Option<ChainConfig>,
    /// The protection config for the render-time re-check, when one is passed.
    pub protection: Option<&'a dyn Protection>,
    /// The spill stub names only the ref, not the sidecar path (ours, for hosts without a
    /// file-reading tool; `false` is the reference's stub).
    pub spill_stub_ref_only: bool,
    /// Phase 1b: the superseded toolResults (ascending index) and their stub texts
    /// ([`supersede`]).
    pub superseded: &'a [(usize, Text)],
}

/// Values render computes only when a decision needs them.
pub trait Lazy {
    /// `JSON.stringify(block.arguments).length` (UTF-16) for block `block` of
    /// input message `msg`; `None` when the block has no `arguments` (the
    /// reference throws reading `.length` of `undefined`).
    fn args_len(&mut self, msg: usize, block: usize) -> Option<usize>;

    /// Whether the `arguments` of that block hold a string longer than 200 UTF-16 units, at
    /// any depth: 2.11.3's purge replaces only those strings (each with
    /// `<purged-errored-args size="N"/>`) and keeps a block without one as it is. Asked only
    /// after [`Lazy::args_len`] answered for the block.
    fn args_shrink(&mut self, _msg: usize, _block: usize) -> bool {
        true
    }

    /// `msg.toolName === "context_tree_query"` for toolResult `msg`, when the views
    /// leave it out (`None`: [`MsgView::is_recovery`] holds it).
    fn is_recovery(&mut self, _msg: usize) -> Option<bool> {
        None
    }

    /// Whether extracting the text of toolResult `msg` throws, when the views leave it
    /// out (`None`: [`MsgView::text_throws`] holds it).
    fn text_throws(&mut self, _msg: usize) -> Option<bool> {
        None
    }
}

/// A [`Lazy`] that has nothing beyond the views (tests).
#[cfg(test)]
pub(crate) struct ViewsOnly;

#[cfg(test)]
impl Lazy for ViewsOnly {
    fn args_len(&mut self, _msg: usize, _block: usize) -> Option<usize> {
        None
    }
}

/// Which message fields the enabled phases read, for a binding that extracts views
/// lazily (with [`Lazy::is_recovery`] and [`Lazy::text_throws`] answering for the
/// views). A field not needed may be left at its [`MsgView::new`] value; the role of
/// every message, the `toolCallId` of every toolResult and the `content` of every
/// assistant (phase 4 always runs) are always needed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Needs {
    /// `timestamp` of every toolResult (occurrence keys of phase 1 and the grace window).
    pub result_timestamps: bool,
    /// `is_error` of every toolResult (phase 2).
    pub is_error: bool,
    /// Phase 3: the `timestamp` of every user and assistant message, `synthetic_block_id`
    /// of users, `summary` of custom messages, and the `timestamp` of toolResults.
    pub chain: bool,
}

impl Needs {
    /// The fields a render with `cfg` against `state` reads.
    pub fn of<St: RenderState + ?Sized>(state: &St, cfg: &RenderConfig<'_>) -> Needs {
        let chain = cfg.chain.is_some() && state.chain_count() > 0;
        Needs {
            result_timestamps: state.may_stub() || chain,
            is_error: cfg.purge.is_some(),
            chain,
        }
    }
}

/// Runs phases 0-4 over `msgs` (the views of the caller's list, in order).
pub fn render<S, St, L>(
    msgs: &[MsgView<S>],
    state: &St,
    cfg: &RenderConfig<'_>,
    lazy: &mut L,
) -> RenderPlan
where
    S: IdStr,
    St: RenderState + ?Sized,
    L: Lazy + ?Sized,
{
    render_with_keys(msgs, state, cfg, lazy, &mut ResultKeys::default())
}

/// [`render`], starting from `keys` (the tool results' lookup keys of a previous render
/// whose list began with the same messages: [`ResultKeys::reusable`]) and leaving this
/// render's keys there (empty when it threw before phase 1 was done).
pub fn render_with_keys<S, St, L>(
    msgs: &[MsgView<S>],
    state: &St,
    cfg: &RenderConfig<'_>,
    lazy: &mut L,
    keys: &mut ResultKeys,
) -> RenderPlan
where
    S: IdStr,
    St: RenderState + ?Sized,
    L: Lazy + ?Sized,
{
    render_traced(msgs, state, cfg, lazy, keys, None)
}

/// [`render_with_keys`], also leaving what the next render of the same messages plus new
/// ones needs to decide only what changed ([`resume_render`]); `None` when it threw.
/// `revision`: the state's index revision ([`crate::index::Index::revision`]).
pub fn render_resumable<S, St, L>(
    msgs: &[MsgView<S>],
    state: &St,
    cfg: &RenderConfig<'_>,
    lazy: &mut L,
    keys: &mut ResultKeys,
    revision: usize,
) -> (RenderPlan, Option<Resume>)
where
    S: IdStr,
    St: RenderState + ?Sized,
    L: Lazy + ?Sized,
{
    let mut traces = resume::Traces::default();
    let plan = render_traced(msgs, state, cfg, lazy, keys, Some(&mut traces));
    if plan.threw {
        return (plan, None);
    }
    let resume = Resume::of(
        msgs,
        state,
        cfg,
        lazy,
        revision,
        plan.items.as_deref(),
        traces,
    );
    (plan, Some(resume))
}

fn render_traced<S, St, L>(
    msgs: &[MsgView<S>],
    state: &St,
    cfg: &RenderConfig<'_>,
    lazy: &mut L,
    keys: &mut ResultKeys,
    traces: Option<&mut resume::Traces>,
) -> RenderPlan
where
    S: IdStr,
    St: RenderState + ?Sized,
    L: Lazy + ?Sized,
{
    let mut diagnostics = Vec::new();
    match run(msgs, state, cfg, lazy, &mut diagnostics, keys, traces) {
        Ok(items) => RenderPlan {
            items,
            diagnostics: plan::dedup(diagnostics),
            threw: false,
        },
        Err(Throw) => RenderPlan {
            items: None,
            diagnostics: plan::dedup(diagnostics),
            threw: true,
        },
    }
}

fn run<S, St, L>(
    msgs: &[MsgView<S>],
    state: &St,
    cfg: &RenderConfig<'_>,
    lazy: &mut L,
    diagnostics: &mut Vec<Diagnostic>,
    keys: &mut ResultKeys,
    mut traces: Option<&mut resume::Traces>,
) -> Result<Option<Vec<Item>>, Throw>
where
    S: IdStr,
    St: RenderState + ?Sized,
    L: Lazy + ?Sized,
{
    // The grace window only holds back stubs.
    let in_grace = if state.may_stub() {
        grace::in_grace_keys_traced(
            msgs,
            cfg.recovery_grace_turns,
            |i, msg| lazy.is_recovery(i).unwrap_or(msg.is_recovery),
            traces.as_deref_mut().map(|t| &mut t.grace),
        )
    } else {
        HashSet::new()
    };
    // Phases 1 and 2 map the list one to one: `slots[i]` is what stands at i.
    let mut phase1 = stub_replace::Phase1::with_keys(std::mem::take(keys));
    phase1.spill_ref_only = cfg.spill_stub_ref_only;
    let mut current: Option<Vec<Item>> =
        stub_replace::stub_replace_deferred(msgs, state, cfg.protection, &in_grace, &mut phase1);
    supersede_phase(msgs.len(), &mut current, cfg.superseded, &mut phase1);
    if let Some(purge) = &cfg.purge {
        let trail = traces
            .as_deref_mut()
            .map(|t| t.purge.insert(error_purge::PurgeTrail::default()));
        error_purge::purge_traced(msgs, &mut current, purge, lazy, trail)?;
    }
    if let Some(chain) = &cfg.chain
        && state.chain_count() > 0
    {
        let entries = state.chain_entries();
        let inputs = chain::ChainInputs {
            msgs,
            entries: &entries,
            state,
            strip_final_thinking: chain.strip_final_assistant_thinking,
            lazy: &mut *lazy,
            phase1: Some(&phase1),
        };
        let mut outcomes = Vec::new();
        let applied = chain::apply(inputs, &mut current, &mut outcomes, chain::Scope::default());
        let reports = chain::reports(&entries, |k| outcomes.get(k));
        diagnostics.extend(reports.iter().cloned());
        applied?;
        if let Some(traces) = traces.as_deref_mut() {
            traces.chain = Some(outcomes);
            traces.chain_reports = plan::dedup(reports);
        }
    }
    let swept = diagnostics.len();
    orphan_sweep::sweep_traced(
        msgs,
        &mut current,
        diagnostics,
        traces.as_deref_mut().map(|t| &mut t.sweep),
    )?;
    if let Some(traces) = traces {
        traces.orphan = diagnostics.get(swept).cloned();
    }
    // The stubs still standing get their texts.
    if let Some(items) = &mut current {
        phase1.finish(items);
    }
    *keys = phase1.keys;
    Ok(current)
}

/// Phase 1b: each superseded result becomes its stub; one that phase 1 stubbed keeps the
/// stub's shape (`{...stub, content, isError: false}` changes only its text).
fn supersede_phase(
    len: usize,
    current: &mut Option<Vec<Item>>,
    superseded: &[(usize, Text)],
    phase1: &mut stub_replace::Phase1<'_>,
) {
    for (i, text) in superseded {
        if *i >= len {
            continue;
        }
        let slots = current.get_or_insert_with(|| (0..len).map(Item::Keep).collect());
        let Some(slot) = slots.get_mut(*i) else {
            continue;
        };
        *slot = if matches!(slot, Item::Stub { .. }) {
            phase1.forget(*i);
            Item::Stub {
                src: *i,
                text: text.clone(),
            }
        } else {
            Item::Superseded {
                src: *i,
                text: text.clone(),
            }
        };
    }
}

#[cfg(test)]
mod tests {
    use super::testing::{
        Chain, Lens, TestState, assistant, errored, ok, rec, reused_id_turns, summary, tc,
        tool_result, user,
    };
    use super::*;
    use crate::index::Index;
    use crate::view::JsId;

    const CHAIN_ON: ChainConfig = ChainConfig {
        strip_final_assistant_thinking: true,
    };

    fn cfg(chain: Option<ChainConfig>, purge: Option<PurgeConfig>) -> RenderConfig<'static> {
        RenderConfig {
            recovery_grace_turns: 3.0,
            purge,
            chain,
            protection: None,
            spill_stub_ref_only: false,
            superseded: &[],
        }
    }

    /// Worked example (04 section 8): user 100, assistant 200 (tc1), result 300, final 400.
    fn example() -> (Vec<MsgView>, TestState) {
        let msgs = vec![
            user(100.0),
            assistant(200.0, vec![tc("tc1")]),
            tool_result("tc1", 300.0),
            assistant(400.0, vec![Block::Thinking, Block::Other]),
        ];
        let state = TestState::default()
            .record("tc1@300", rec("bash"))
            .short_ref_of("tc1@300", "t1")
            .body(&["tc1@300"], "S")
            .chain(
                Chain::new("b1", 100.0, 400.0, 9000.0)
                    .dropped(&["tc1"])
                    .keys(&["tc1@300"])
                    .refs(&["t1"]),
            );
        (msgs, state)
    }

    #[test]
    fn a_render_from_reused_keys_is_the_fresh_render() {
        // A history of calls, every other result summarized; then the same history with
        // more calls appended, rendered from the first render's keys.
        let mut msgs = vec![user(100.0)];
        let mut state = TestState::default();
        for k in 0..8_u32 {
            let id = format!("c{k}");
            let ts = 205.0 + f64::from(k) * 10.0;
            msgs.push(assistant(ts - 5.0, vec![tc(&id)]));
            msgs.push(tool_result(&id, ts));
            if k % 2 == 0 {
                let key = format!("{id}@{ts}");
                state = state
                    .record(&key, rec("bash"))
                    .short_ref_of(&key, &format!("t{k}"));
            }
        }
        let cfg = cfg(Some(CHAIN_ON), None);
        let fresh = |msgs: &[MsgView]| {
            let mut keys = ResultKeys::default();
            let plan = render_with_keys(msgs, &state, &cfg, &mut Lens::default(), &mut keys);
            (plan, keys)
        };
        let (first, first_keys) = fresh(&msgs[..9]);
        assert_eq!(
            first,
            render(&msgs[..9], &state, &cfg, &mut Lens::default())
        );
        assert!(first.items.is_some());
        for prefix in [0, 1, 4, 9] {
            let mut keys = first_keys.clone().reusable(prefix);
            let again = render_with_keys(&msgs, &state, &cfg, &mut Lens::default(), &mut keys);
            let (expected, expected_keys) = fresh(&msgs);
            assert_eq!(again, expected, "prefix {prefix}");
            assert_eq!(keys, expected_keys, "prefix {prefix}");
        }
        // Keys of a render that did not key every result are not reused.
        assert_eq!(ResultKeys::default().reusable(3), ResultKeys::default());
    }

    #[test]
    fn worked_example_phase_one_alone() {
        let (msgs, state) = example();
        let plan = render(&msgs, &state, &cfg(None, None), &mut Lens::default());
        let items = plan.items.unwrap_or_default();
        assert_eq!(items.len(), 4);
        assert_eq!(
            items[2],
            Item::Stub {
                src: 2,
                text: Text(vec![Piece::Lit(
                    "[Summarized in pruner summary, ref `t1`. Use context_tree_query to retrieve full output.]"
                        .into()
                )])
            }
        );
    }

    #[test]
    fn worked_example_full_pipeline() {
        let (msgs, state) = example();
        let plan = render(
            &msgs,
            &state,
            &cfg(Some(CHAIN_ON), None),
            &mut Lens::default(),
        );
        assert!(!plan.threw);
        assert!(plan.diagnostics.is_empty());
        let items = plan.items.unwrap_or_default();
        assert_eq!(items.len(), 3);
        assert_eq!(items[0], Item::Keep(0));
        assert!(matches!(&items[1], Item::Synthetic { text, .. }
            if text.as_literal() == Some("<compressed-chain id=\"b1\" tools=\"t1\">\nS\n</compressed-chain>")));
        assert_eq!(
            items[2],
            Item::Assistant {
                src: 3,
                purged: vec![],
                strip_thinking: true
            }
        );
    }

    #[test]
    fn nothing_to_do_returns_no_items() {
        let msgs = vec![
            user(1.0),
            assistant(2.0, vec![tc("a")]),
            tool_result("a", 3.0),
        ];
        let plan = render(
            &msgs,
            &TestState::default(),
            &cfg(
                Some(CHAIN_ON),
                Some(PurgeConfig {
                    cooldown_turns: Some(2.0),
                    min_arg_chars: Some(500.0),
                }),
            ),
            &mut Lens::default(),
        );
        assert_eq!(plan.items, None);
        assert!(!plan.threw);
    }

    #[test]
    fn chain_phase_is_skipped_when_disabled() {
        let (msgs, mut state) = example();
        state.records.clear();
        let plan = render(&msgs, &state, &cfg(None, None), &mut Lens::default());
        assert_eq!(plan.items, None);
        assert!(plan.diagnostics.is_empty());
    }

    #[test]
    fn error_purge_runs_on_the_phase_one_output() {
        let msgs = vec![
            assistant(100.0, vec![tc("tc-err")]),
            errored("tc-err", 110.0),
            assistant(200.0, vec![tc("tc2")]),
            tool_result("tc2", 210.0),
            assistant(300.0, vec![tc("tc3")]),
            tool_result("tc3", 310.0),
        ];
        let purge = Some(PurgeConfig {
            cooldown_turns: Some(2.0),
            min_arg_chars: Some(100.0),
        });
        let mut lens = Lens::default();
        lens.0.insert((0, 0), 216);
        let plan = render(&msgs, &TestState::default(), &cfg(None, purge), &mut lens);
        assert_eq!(
            plan.items.unwrap_or_default()[0],
            Item::Assistant {
                src: 0,
                purged: vec![Purge {
                    block: 0,
                    size: 216
                }],
                strip_thinking: false
            }
        );
        // Once the errored result is summarized (stubbed), the args render in full.
        let state = TestState::default().record("tc-err@110", rec("write"));
        let plan = render(&msgs, &state, &cfg(None, purge), &mut lens);
        let items = plan.items.unwrap_or_default();
        assert_eq!(items[0], Item::Keep(0));
        assert!(matches!(items[1], Item::Stub { .. }));
    }

    #[test]
    fn superseded_reads_are_stubbed_between_phase_one_and_the_purge() {
        // An errored read (0-1), a summarized one (2-3), a plain one (4-5), all superseded.
        let msgs = vec![
            assistant(100.0, vec![tc("r1")]),
            errored("r1", 110.0),
            assistant(200.0, vec![tc("r2")]),
            tool_result("r2", 210.0),
            assistant(300.0, vec![tc("r3")]),
            tool_result("r3", 310.0),
            assistant(400.0, vec![tc("r4")]),
            tool_result("r4", 410.0),
        ];
        let state = TestState::default()
            .record("r2@210", rec("read"))
            .short_ref_of("r2@210", "t1");
        let purge = Some(PurgeConfig {
            cooldown_turns: Some(2.0),
            min_arg_chars: Some(100.0),
        });
        let text = supersede::superseded_text(&crate::jsstr::JsStr::new("a.md".into()));
        let superseded = [(1, text.clone()), (3, text.clone()), (5, text.clone())];
        let mut cfg = cfg(None, purge);
        cfg.superseded = &superseded;
        let mut lens = Lens::default();
        lens.0.insert((0, 0), 216);
        let items = render(&msgs, &state, &cfg, &mut lens)
            .items
            .unwrap_or_default();
        // The errored read is no longer errored: its call keeps its arguments.
        assert_eq!(items[0], Item::Keep(0));
        assert_eq!(
            items[1],
            Item::Superseded {
                src: 1,
                text: text.clone()
            }
        );
        // The summarized read keeps the stub's shape, with the supersession's text.
        assert_eq!(
            items[3],
            Item::Stub {
                src: 3,
                text: text.clone()
            }
        );
        assert_eq!(items[5], Item::Superseded { src: 5, text });
        assert_eq!(items[7], Item::Keep(7));
        // Without supersession the errored call is purged and r2 gets its summary stub.
        cfg.superseded = &[];
        let items = render(&msgs, &state, &cfg, &mut lens)
            .items
            .unwrap_or_default();
        assert!(matches!(items[0], Item::Assistant { .. }));
        assert!(matches!(&items[3], Item::Stub { text, .. }
            if text.as_literal().is_some_and(|t| t.contains("`t1`"))));
    }

    #[test]
    fn purge_and_strip_compose_on_the_final_assistant() {
        let msgs = vec![
            user(100.0),
            assistant(200.0, vec![tc("a")]),
            tool_result("a", 210.0),
            assistant(300.0, vec![Block::Thinking, tc("e")]),
            errored("e", 310.0),
            assistant(400.0, vec![Block::Thinking]),
            user(500.0),
            assistant(600.0, vec![]),
            assistant(700.0, vec![]),
        ];
        let state = TestState::default().chain(Chain::new("b1", 100.0, 300.0, 9.0).dropped(&["a"]));
        let purge = Some(PurgeConfig {
            cooldown_turns: Some(2.0),
            min_arg_chars: Some(1.0),
        });
        let plan = render(
            &msgs,
            &state,
            &cfg(Some(CHAIN_ON), purge),
            &mut Lens::default(),
        );
        let items = plan.items.unwrap_or_default();
        assert!(items.contains(&Item::Assistant {
            src: 3,
            purged: vec![Purge {
                block: 1,
                size: 1000
            }],
            strip_thinking: true
        }));
    }

    #[test]
    fn orphan_sweep_cleans_up_after_chain_drops_and_keeps_the_live_reuse() {
        // id-collision shape: a compressed chain and a live turn reusing bash_23.
        let mut msgs = reused_id_turns("bash_23", &[100.0, 200.0]);
        msgs.push(summary(230.0, &[("bash_23", Some(120.0))]));
        let state = TestState::default()
            .record("bash_23@120", rec("bash"))
            .short_ref_of("bash_23@120", "t1")
            .body(&["bash_23@120"], "FIRST")
            .chain(
                Chain::new("b1", 100.0, 130.0, 1.0)
                    .dropped(&["bash_23"])
                    .keys(&["bash_23@120"])
                    .refs(&["t1"]),
            );
        let plan = render(
            &msgs,
            &state,
            &cfg(Some(CHAIN_ON), None),
            &mut Lens::default(),
        );
        let items = plan.items.unwrap_or_default();
        let srcs: Vec<Option<usize>> = items.iter().map(Item::src).collect();
        assert_eq!(srcs, [Some(0), None, Some(3), Some(4), Some(5), Some(6)]);
        assert_eq!(items[5], Item::Keep(6));
        assert!(plan.diagnostics.is_empty());
    }

    #[test]
    fn a_throw_discards_the_render_but_keeps_earlier_diagnostics() {
        let mut msgs = vec![
            user(1.0),
            assistant(2.0, vec![tc("a")]),
            tool_result("a", 3.0),
        ];
        let mut odd: MsgView = MsgView::new(Role::Assistant, Ts::Num(4.0));
        odd.content = Content::Nullish;
        msgs.push(odd);
        let state = TestState::default().chain(Chain::new("b9", 50.0, 60.0, 1.0));
        let plan = render(
            &msgs,
            &state,
            &cfg(Some(CHAIN_ON), None),
            &mut Lens::default(),
        );
        assert!(plan.threw);
        assert_eq!(plan.items, None);
        assert_eq!(plan.diagnostics.len(), 1);
        assert_eq!(plan.diagnostics[0].dedup_key, "b9");
    }

    #[test]
    fn orphan_sweep_zero_fire_over_representative_lists() {
        let (msgs, state) = example();
        for chain in [None, Some(CHAIN_ON)] {
            let plan = render(&msgs, &state, &cfg(chain, None), &mut Lens::default());
            assert!(
                plan.diagnostics
                    .iter()
                    .all(|d| d.kind != DiagnosticKind::OrphanSweep)
            );
        }
    }

    #[test]
    fn worked_example_against_the_real_index() {
        use crate::index::{ChainEntry, Record, ShortRef};
        use crate::js::JsField;
        let mut index = Index::new();
        let mut record = Record::new("tc1", JsField::Number(300.0));
        record.tool_name = JsField::str("bash");
        index.index_record(record);
        index.register_refs(&[ShortRef::new("t1", "tc1", Some(300.0))]);
        index.register_summary_body(vec!["tc1@300".into()], "S");
        index.register_chain(ChainEntry {
            block_id: JsField::str("b1"),
            start_user_timestamp: 100.0,
            final_assistant_timestamp: JsField::Number(400.0),
            dropped_tool_call_ids: Some(vec![JsField::str("tc1")]),
            dropped_occurrence_keys: Some(vec![JsField::str("tc1@300")]),
            tool_refs: Some(vec![JsField::str("t1")]),
            compressed_at: JsField::Number(9000.0),
            ..ChainEntry::default()
        });
        let (msgs, _) = example();
        let plan = render(
            &msgs,
            &index,
            &cfg(Some(CHAIN_ON), None),
            &mut Lens::default(),
        );
        let items = plan.items.unwrap_or_default();
        assert_eq!(items.len(), 3);
        assert!(matches!(&items[1], Item::Synthetic { text, .. }
            if text.as_literal() == Some("<compressed-chain id=\"b1\" tools=\"t1\">\nS\n</compressed-chain>")));
        let plan = render(&msgs, &index, &cfg(None, None), &mut Lens::default());
        assert!(
            matches!(&plan.items.unwrap_or_default()[2], Item::Stub { text, .. }
            if text.as_literal().is_some_and(|t| t.contains("ref `t1`")))
        );
    }

    /// A list exercising every phase: stubs inside a compressed range (one of them a
    /// protected output, whose stub text moves into the synthetic message), a legacy bare
    /// stub, per-batch summaries covering dropped results by key and by bare id, a spilled
    /// stub that stays, an errored call purged after its cooldown, an orphan, and an entry
    /// that does not resolve.
    fn pipeline_case() -> (Vec<MsgView>, TestState, Index) {
        use crate::index::{ChainEntry, Record, ShortRef};
        use crate::render::testing::spilled;
        let mut bare = tool_result("b", 0.0);
        bare.timestamp = Ts::Absent;
        let mut numbered = tool_result("", 230.0);
        numbered.tool_call_id = JsId::num(7.0);
        let msgs = vec![
            user(100.0),
            assistant(200.0, vec![tc("a"), tc("p")]),
            tool_result("a", 210.0),
            tool_result("p", 220.0),
            numbered,
            assistant(300.0, vec![tc("b")]),
            bare,
            assistant(400.0, vec![Block::Thinking]),
            summary(450.0, &[("a", Some(210.0))]),
            summary(460.0, &[("b", None)]),
            summary(465.0, &[("x", Some(1.0)), ("7", Some(230.0))]),
            summary(470.0, &[("c", Some(610.0))]),
            user(500.0),
            assistant(600.0, vec![tc("c")]),
            tool_result("c", 610.0),
            assistant(700.0, vec![tc("e")]),
            errored("e", 710.0),
            assistant(800.0, vec![tc("f")]),
            tool_result("f", 810.0),
            assistant(900.0, vec![tc("g")]),
            tool_result("g", 910.0),
            tool_result("zz", 920.0),
        ];
        let spill = || spilled("fetch", "/s/c.txt", Some(70000.0), Some("HEAD"));
        let range = |entry: Chain| {
            entry
                .dropped(&["a", "p", "b"])
                .keys(&["a@210", "p@220"])
                .refs(&["t1", "t2"])
                .protect(&["p"])
                .range_summary("R {b9}")
        };
        let test_state = TestState::default()
            .record("a@210", rec("bash"))
            .record("p@220", rec("read"))
            .record("c@610", spill())
            .legacy("b", rec("bash"))
            .short_ref_of("a@210", "t1")
            .short_ref_of("p@220", "t2")
            .body(&["x@1"], "BODY")
            .chain(range(Chain::new("b1", 100.0, 400.0, 9.0)))
            .chain(Chain::new("b9", 999.0, 1999.0, 9.0).keys(&["x@1"]));
        let mut index = Index::new();
        for (id, ts, record) in [
            ("a", Some(210.0), rec("bash")),
            ("p", Some(220.0), rec("read")),
            ("c", Some(610.0), spill()),
            ("b", None, rec("bash")),
        ] {
            let mut r = Record::new(id, ts.map_or(JsField::Absent, JsField::Number));
            r.tool_name = record.tool_name;
            r.spill_path = record.spill_path;
            r.spill_bytes = record.spill_bytes;
            r.result_preview = record.result_preview;
            index.index_record(r);
        }
        index.register_refs(&[
            ShortRef::new("t1", "a", Some(210.0)),
            ShortRef::new("t2", "p", Some(220.0)),
        ]);
        index.push_summary_body(vec!["x@1".into()], "BODY");
        for chain in &test_state.chains {
            index.register_chain(ChainEntry {
                slot: 0,
                ..chain.clone()
            });
        }
        (msgs, test_state, index)
    }

    /// The phases run one by one through their public entry points, texts built eagerly.
    fn phase_by_phase<St: RenderState>(
        msgs: &[MsgView],
        state: &St,
        purge: &PurgeConfig,
        lens: &mut Lens,
    ) -> (Option<Vec<Item>>, Vec<Diagnostic>) {
        let s1 = stub_replace::stub_replace(msgs, state, None, &grace::in_grace_keys(msgs, 3.0));
        let s2 = ok(error_purge::purge_errored_args(
            msgs,
            s1.as_deref(),
            purge,
            lens,
        ))
        .or(s1);
        let mut diags = Vec::new();
        let entries = state.chain_entries();
        let s3 = ok(chain::apply_chain_compressions(
            msgs,
            s2.as_deref(),
            &entries,
            state,
            true,
            &mut diags,
        ))
        .or(s2);
        let s4 = ok(orphan_sweep::sweep(msgs, s3.as_deref(), &mut diags)).or(s3);
        (s4, plan::dedup(diags))
    }

    #[test]
    fn the_pipeline_matches_the_phases_run_one_by_one() {
        let (msgs, test_state, index) = pipeline_case();
        let purge = PurgeConfig {
            cooldown_turns: Some(2.0),
            min_arg_chars: Some(10.0),
        };
        let expected = phase_by_phase(&msgs, &test_state, &purge, &mut Lens::default());
        let items = expected.0.clone().unwrap_or_default();
        // The case covers what it means to.
        let srcs: Vec<Option<usize>> = items.iter().map(Item::src).collect();
        assert_eq!(
            srcs,
            [0, 99, 7, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20].map(|i| (i != 99).then_some(i))
        );
        assert!(matches!(&items[1], Item::Synthetic { text, .. } if text.0.len() > 1));
        assert!(matches!(&items[6], Item::Stub { text, .. }
            if matches!(text.0.first(), Some(Piece::Lit(t)) if t.starts_with("[Oversized"))));
        assert!(matches!(&items[7], Item::Assistant { purged, .. } if purged.len() == 1));
        let kinds: Vec<DiagnosticKind> = expected.1.iter().map(|d| d.kind).collect();
        assert_eq!(
            kinds,
            [
                DiagnosticKind::UnresolvedRange,
                DiagnosticKind::RangeIdMismatch,
                DiagnosticKind::OrphanSweep
            ]
        );
        let config = cfg(Some(CHAIN_ON), Some(purge));
        for plan in [
            render(&msgs, &test_state, &config, &mut Lens::default()),
            render(&msgs, &index, &config, &mut Lens::default()),
        ] {
            assert!(!plan.threw);
            assert_eq!((plan.items, plan.diagnostics), expected);
        }
        // Against the index, the phases one by one agree too.
        assert_eq!(
            phase_by_phase(&msgs, &index, &purge, &mut Lens::default()),
            expected
        );
    }

    #[test]
    fn an_index_grown_between_renders_renders_like_one_built_at_once() {
        use crate::index::{ChainEntry, Record, ShortRef};
        let (msgs, _, whole) = pipeline_case();
        let config = cfg(Some(CHAIN_ON), None);
        // The same mutations, one at a time, rendering after each.
        let mut grown = Index::new();
        let mut renders = Vec::new();
        let mut render_now =
            |ix: &Index| renders.push(render(&msgs, ix, &config, &mut Lens::default()));
        render_now(&grown);
        for (id, ts) in [
            ("a", Some(210.0)),
            ("p", Some(220.0)),
            ("c", Some(610.0)),
            ("b", None),
        ] {
            grown.index_record(Record::new(id, ts.map_or(JsField::Absent, JsField::Number)));
            render_now(&grown);
        }
        grown.register_refs(&[ShortRef::new("t1", "a", Some(210.0))]);
        render_now(&grown);
        grown.register_refs(&[ShortRef::new("t2", "p", Some(220.0))]);
        grown.push_summary_body(vec!["x@1".into()], "BODY");
        render_now(&grown);
        for chain in whole.chain_entries().into_iter().rev() {
            grown.register_chain(ChainEntry {
                slot: 0,
                ..chain.clone()
            });
            render_now(&grown);
        }
        assert_eq!(renders.len(), 9);
        // Records carry no tool names here: compare with a whole index built the same way.
        let mut rebuilt = Index::new();
        for (id, ts) in [
            ("a", Some(210.0)),
            ("p", Some(220.0)),
            ("c", Some(610.0)),
            ("b", None),
        ] {
            rebuilt.index_record(Record::new(id, ts.map_or(JsField::Absent, JsField::Number)));
        }
        rebuilt.register_refs(&[
            ShortRef::new("t1", "a", Some(210.0)),
            ShortRef::new("t2", "p", Some(220.0)),
        ]);
        rebuilt.push_summary_body(vec!["x@1".into()], "BODY");
        for chain in whole.chain_entries().into_iter().rev() {
            rebuilt.register_chain(ChainEntry {
                slot: 0,
                ..chain.clone()
            });
        }
        let last = render(&msgs, &grown, &config, &mut Lens::default());
        assert_eq!(last, render(&msgs, &rebuilt, &config, &mut Lens::default()));
        assert!(last.items.is_some_and(|items| {
            items
                .iter()
                .any(|item| matches!(item, Item::Synthetic { .. }))
        }));
        // Each intermediate state renders like a fresh index of the same content: the
        // state right after the records (stubs, no chains yet) for one.
        let mut records_only = Index::new();
        for (id, ts) in [
            ("a", Some(210.0)),
            ("p", Some(220.0)),
            ("c", Some(610.0)),
            ("b", None),
        ] {
            records_only.index_record(Record::new(id, ts.map_or(JsField::Absent, JsField::Number)));
        }
        assert_eq!(
            renders[4],
            render(&msgs, &records_only, &config, &mut Lens::default())
        );
    }
}
