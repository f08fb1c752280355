use super::*;
use crate::index::Change;
use crate::keys::ProtectedMatcher;
use crate::render::testing::{
    Chain, Lens, TestState, assistant, custom, rec, spilled, summary, synthetic_user, tc,
    tool_result, user,
};
use crate::render::{
    ChainConfig, Protection, PurgeConfig, RenderPlan, ResultKeys, render_resumable,
    render_with_keys,
};
use crate::view::{Block, Content, JsId, MsgView, Role, Ts};

/// A small deterministic generator (xorshift64*), so that a failure replays.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }

    fn chance(&mut self, percent: usize) -> bool {
        self.below(100) < percent
    }
}

/// A random history of turns: users, assistants calling tools (ids sometimes reused),
/// results (some errored, missing, duplicated or recovery outputs), per-batch summaries,
/// odd timestamps; and a state that summarizes some results and compresses some turns.
fn history(rng: &mut Rng) -> (Vec<MsgView>, TestState) {
    let mut msgs = Vec::new();
    let mut state = TestState::default();
    let mut ts = 1000.0;
    let mut next_id = 0usize;
    let turns = 3 + rng.below(14);
    let mut starts = Vec::new();
    for _ in 0..turns {
        ts += 10.0;
        // A user message, sometimes at an earlier user's timestamp (ranges fail to resolve).
        let user_ts = if !starts.is_empty() && rng.chance(4) {
            starts[rng.below(starts.len())]
        } else {
            ts
        };
        msgs.push(user(user_ts));
        starts.push(user_ts);
        let start = user_ts;
        let mut calls_in_turn: Vec<String> = Vec::new();
        let steps = 1 + rng.below(4);
        for _ in 0..steps {
            ts += 10.0;
            let k = rng.below(4);
            let mut blocks = Vec::new();
            if rng.chance(30) {
                blocks.push(Block::Thinking);
            }
            let mut ids = Vec::new();
            for _ in 0..k {
                let id = if next_id > 0 && rng.chance(8) {
                    format!("c{}", rng.below(next_id))
                } else {
                    next_id += 1;
                    format!("c{next_id}")
                };
                blocks.push(tc(&id));
                ids.push(id);
            }
            if rng.chance(20) {
                blocks.push(Block::Other);
            }
            let mut a = assistant(ts, blocks);
            if rng.chance(2) {
                a.timestamp = Ts::Absent;
            }
            msgs.push(a);
            for id in &ids {
                if rng.chance(6) {
                    continue; // a missing result
                }
                ts += 1.0;
                let mut r = tool_result(id, ts);
                r.is_error = rng.chance(15);
                r.is_recovery = rng.chance(6);
                if rng.chance(6) {
                    // A legacy result: no timestamp, a record under its bare id.
                    r.timestamp = Ts::Absent;
                    state = state.legacy(id, rec("bash"));
                }
                msgs.push(r);
                let key = format!("{id}@{}", crate::js::format_number(ts));
                if rng.chance(55) {
                    let record = if rng.chance(10) {
                        spilled("bash", "/s/x.txt", Some(9.0), Some("HEAD"))
                    } else {
                        rec(if rng.chance(10) { "keep" } else { "bash" })
                    };
                    state = state.record(&key, record);
                    if rng.chance(80) {
                        state = state.short_ref_of(&key, &format!("t{}", rng.below(50)));
                    }
                }
                if rng.chance(5) {
                    msgs.push(tool_result(id, ts)); // a duplicate (swept)
                }
                calls_in_turn.push(key);
            }
            if rng.chance(4) {
                msgs.push(tool_result("stray", ts + 0.5)); // an orphan
            }
        }
        ts += 10.0;
        let final_ts = ts;
        let mut last = assistant(final_ts, vec![Block::Thinking, Block::Other]);
        if rng.chance(3) {
            last.content = Content::Str;
        }
        msgs.push(last);
        if rng.chance(20) {
            // A per-batch summary naming results before it, or calls not made yet.
            let mut refs: Vec<(String, Option<f64>)> = Vec::new();
            for _ in 0..1 + rng.below(3) {
                if !calls_in_turn.is_empty() && rng.chance(50) {
                    let key = &calls_in_turn[rng.below(calls_in_turn.len())];
                    let (id, at) = key.split_once('@').unwrap_or((key, "0"));
                    refs.push((id.to_owned(), at.parse().ok()));
                } else {
                    refs.push((format!("c{}", 1 + rng.below(next_id + 12)), None));
                }
            }
            let refs: Vec<(&str, Option<f64>)> =
                refs.iter().map(|(id, at)| (id.as_str(), *at)).collect();
            msgs.push(summary(ts + 1.0, &refs));
        }
        if rng.chance(4) {
            msgs.push(custom(ts + 2.0));
        }
        if rng.chance(8) {
            // An earlier result again (same key), maybe as a recovery output.
            let results: Vec<usize> = (0..msgs.len())
                .filter(|&i| msgs[i].role == Role::ToolResult)
                .collect();
            if !results.is_empty() {
                let mut again = msgs[results[rng.below(results.len())]].clone();
                again.is_recovery = rng.chance(50);
                msgs.push(again);
            }
        }
        if rng.chance(3) {
            msgs.push(synthetic_user(ts + 3.0, "b9"));
        }
        if rng.chance(40) && !calls_in_turn.is_empty() {
            let keys: Vec<&str> = calls_in_turn.iter().map(String::as_str).collect();
            let ids: Vec<String> = keys
                .iter()
                .map(|k| k.split('@').next().unwrap_or_default().to_owned())
                .collect();
            let ids: Vec<&str> = ids.iter().map(String::as_str).collect();
            let block = format!("b{}", state.chains.len() + 1);
            let mut chain = Chain::new(&block, start, final_ts, ts + 5.0)
                .dropped(&ids)
                .keys(&keys)
                .refs(&["t1"]);
            if rng.chance(30) {
                chain = chain.protect(&ids[..1]);
            }
            state = state.chain(chain).body(&keys, "BODY");
        }
    }
    (msgs, state)
}

fn config(rng: &mut Rng) -> RenderConfig<'static> {
    let opt = |rng: &mut Rng, x: f64| if rng.chance(15) { None } else { Some(x) };
    RenderConfig {
        recovery_grace_turns: [0.0, 1.0, 2.0, 3.0][rng.below(4)],
        purge: rng.chance(80).then(|| {
            let cooldown = rng.below(4) as f64;
            let min = [0.0, 500.0, 2000.0][rng.below(3)];
            PurgeConfig {
                cooldown_turns: opt(rng, cooldown),
                min_arg_chars: opt(rng, min),
            }
        }),
        chain: rng.chance(80).then(|| ChainConfig {
            strip_final_assistant_thinking: rng.chance(50),
        }),
        protection: rng.chance(50).then_some(keep_rule() as &dyn Protection),
        spill_stub_ref_only: rng.chance(50),
        superseded: &[],
    }
}

/// Protects the tool `keep`.
fn keep_rule() -> &'static ProtectedMatcher {
    static RULE: std::sync::OnceLock<ProtectedMatcher> = std::sync::OnceLock::new();
    RULE.get_or_init(|| ProtectedMatcher::new(&["keep".to_owned()], &[] as &[String]))
}

fn lens(rng: &mut Rng, msgs: &[MsgView]) -> Lens {
    let mut lens = Lens::default();
    for (i, msg) in msgs.iter().enumerate() {
        if let Content::Array(blocks) = &msg.content {
            for (b, _) in blocks.iter() {
                if rng.chance(2) {
                    lens.1.insert((i, b));
                } else {
                    lens.0.insert((i, b), rng.below(3000));
                }
            }
        }
    }
    lens
}

fn full(
    msgs: &[MsgView],
    state: &TestState,
    cfg: &RenderConfig<'_>,
    lens: &mut Lens,
) -> RenderPlan {
    render_with_keys(msgs, state, cfg, lens, &mut ResultKeys::default())
}

#[derive(Default)]
struct Counts {
    resumed: usize,
    restarted: usize,
    fell_back: usize,
    /// Resumed or restarted renders with superseded results.
    superseding: usize,
}

/// A random change of the state, logged as the index would log it.
fn change_state(
    rng: &mut Rng,
    msgs: &[MsgView],
    state: TestState,
    changes: &mut Vec<Change>,
) -> TestState {
    let results: Vec<usize> = (0..msgs.len())
        .filter(|&i| msgs[i].role == Role::ToolResult)
        .collect();
    let pick = |rng: &mut Rng| results.get(rng.below(results.len().max(1))).copied();
    let key_of = |i: usize| {
        let mut key = String::new();
        crate::render::ids::push_result_key(&mut key, &msgs[i]).then_some(key)
    };
    match rng.below(5) {
        // A result summarized now (a flush), sometimes with its short ref.
        0 | 1 => {
            let Some(key) = pick(rng).and_then(key_of) else {
                return state;
            };
            let id = key.split('@').next().unwrap_or_default().to_owned();
            changes.push(Change::Record {
                key: key.clone(),
                id,
            });
            let mut state = state.record(&key, rec("bash"));
            if rng.chance(70) {
                changes.push(Change::Key(key.clone()));
                state = state.short_ref_of(&key, &format!("t{}", 100 + rng.below(50)));
            }
            state
        }
        // A short ref for a key.
        2 => {
            let Some(key) = pick(rng).and_then(key_of) else {
                return state;
            };
            changes.push(Change::Key(key.clone()));
            state.short_ref_of(&key, &format!("t{}", 200 + rng.below(50)))
        }
        // A body for some keys.
        3 => {
            let keys: Vec<String> = (0..1 + rng.below(3))
                .filter_map(|_| pick(rng).and_then(key_of))
                .collect();
            if keys.is_empty() {
                return state;
            }
            changes.push(Change::Body(keys.clone()));
            let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
            state.body(&keys, "NEW BODY {b1}")
        }
        // A chain compressed: a user and a later assistant of the list.
        _ => {
            let users: Vec<usize> = (0..msgs.len())
                .filter(|&i| msgs[i].role == Role::User)
                .collect();
            let Some(&start) = users.get(rng.below(users.len().max(1))) else {
                return state;
            };
            let finals: Vec<usize> = (start..msgs.len())
                .filter(|&i| msgs[i].role == Role::Assistant)
                .collect();
            let Some(&end) = finals.get(rng.below(finals.len().max(1))) else {
                return state;
            };
            let (Ts::Num(s), Ts::Num(e)) = (msgs[start].timestamp, msgs[end].timestamp) else {
                return state;
            };
            let ids: Vec<String> = msgs[start..end]
                .iter()
                .filter(|m| m.role == Role::ToolResult)
                .filter_map(|m| m.tool_call_id.as_str().map(str::to_owned))
                .collect();
            let ids: Vec<&str> = ids.iter().map(String::as_str).collect();
            let block = format!("b{}", 50 + state.chains.len());
            let mut chain = Chain::new(&block, s, e, 99_000.0)
                .dropped(&ids)
                .refs(&["t9"]);
            if rng.chance(50) {
                chain = chain.range_summary(&format!("range {block}"));
            }
            changes.push(Change::Chain(state.chains.len()));
            state.chain(chain)
        }
    }
}

/// Renders `msgs` growing by random steps, with random index changes in between, resuming
/// where it can, and checks every resumed render against a full render of the same list.
/// Phase 1b's superseded results of a history as renders see them: activated results stay
/// superseded; now and then a floor activates some from a point on, new results are
/// sometimes activated already (their key was), and a reset forgets all.
struct Supersession {
    rng: Rng,
    on: bool,
    active: std::collections::BTreeSet<usize>,
}

impl Supersession {
    fn new(seed: u64) -> Self {
        let mut rng = Rng((seed ^ 0x5DEE_CE66_D1CE_4E5B) | 1);
        let on = rng.chance(50);
        Supersession {
            rng,
            on,
            active: std::collections::BTreeSet::new(),
        }
    }

    /// The superseded results of a render of `msgs` whose first `at` messages the previous
    /// render covered.
    fn render(&mut self, msgs: &[MsgView], at: usize) -> Vec<(usize, Text)> {
        if !self.on {
            return Vec::new();
        }
        let rng = &mut self.rng;
        let results =
            |from: usize| (from..msgs.len()).filter(|&i| msgs[i].role == Role::ToolResult);
        if rng.chance(3) {
            self.active.clear();
        }
        if rng.chance(15) {
            let floor = rng.below(msgs.len());
            for i in results(floor) {
                if rng.chance(60) {
                    self.active.insert(i);
                }
            }
        }
        for i in results(at) {
            if rng.chance(15) {
                self.active.insert(i);
            }
        }
        let text = crate::render::supersede::superseded_text(&crate::jsstr::JsStr::new(
            "skills/a.md".to_owned(),
        ));
        self.active
            .range(..msgs.len())
            .map(|&i| (i, text.clone()))
            .collect()
    }
}

fn check_history(seed: u64, counts: &mut Counts) {
    let mut rng = Rng(seed | 1);
    let (msgs, mut state) = history(&mut rng);
    let cfg_base = config(&mut rng);
    let mut supersession = Supersession::new(seed);
    let superseded = supersession.render(&msgs, 0);
    let mut cfg = RenderConfig {
        superseded: &superseded,
        ..cfg_base
    };
    let mut lens = lens(&mut rng, &msgs);
    let mut changes: Vec<Change> = Vec::new();
    let mut at = 1 + rng.below(msgs.len() / 2 + 1);
    let full = |msgs: &[MsgView],
                cfg: &RenderConfig<'_>,
                state: &TestState,
                lens: &mut Lens,
                revision: usize| {
        let (plan, resume) =
            render_resumable(msgs, state, cfg, lens, &mut ResultKeys::default(), revision);
        (plan, resume)
    };
    let (plan, mut resume) = full(&msgs[..at], &cfg, &state, &mut lens, 0);
    let mut output = plan.items;
    let mark = |resume: &mut Option<Resume>, output: &Option<Vec<Item>>| {
        if let Some(r) = resume.as_mut() {
            let points = r.unmarked();
            let end = output.as_ref().map(Vec::len);
            let last = points.len().saturating_sub(1);
            let marks: Vec<[usize; 3]> = points
                .iter()
                .enumerate()
                .map(|(k, &(len, outputs))| {
                    // The end's count is the output's length (or the input's, unchanged).
                    let outputs = if k == last {
                        end.unwrap_or(len)
                    } else {
                        outputs
                    };
                    [outputs, 0, 0]
                })
                .collect();
            r.mark(&marks);
        }
    };
    mark(&mut resume, &output);
    while at < msgs.len() {
        if rng.chance(30) {
            state = change_state(&mut rng, &msgs[..at], state, &mut changes);
        }
        let revision = changes.len();
        let next = (at + 1 + rng.below(4)).min(msgs.len());
        let superseded = supersession.render(&msgs[..next], at);
        cfg = RenderConfig {
            superseded: &superseded,
            ..cfg_base
        };
        let expected = render_with_keys(
            &msgs[..next],
            &state,
            &cfg,
            &mut lens,
            &mut ResultKeys::default(),
        );
        let resumed = resume.take().and_then(|r| {
            let since = changes.get(r.revision()..)?;
            let from = r.restart_point(&state, &cfg, since)?;
            Some(resume_render(
                r,
                from,
                &msgs[from..next],
                &state,
                &cfg,
                &mut lens,
                revision,
            ))
        });
        match resumed {
            Some(Ok((again, tail))) => {
                if tail.from < at {
                    counts.restarted += 1;
                } else {
                    counts.resumed += 1;
                }
                if !cfg.superseded.is_empty() {
                    counts.superseding += 1;
                }
                assert!(!expected.threw, "seed {seed}: resumed a render that throws");
                let items = match (output.take(), tail.items) {
                    (Some(mut old), Some(new)) => {
                        old.truncate(tail.marks[0]);
                        old.extend(new);
                        Some(old)
                    }
                    (None, None) => None,
                    (old, new) => panic!("seed {seed}: changed {old:?} / tail {new:?}"),
                };
                assert_eq!(items, expected.items, "seed {seed}: items at {at}..{next}");
                assert_eq!(
                    tail.diagnostics, expected.diagnostics,
                    "seed {seed}: diagnostics"
                );
                assert_eq!(again.len(), next);
                output = items;
                resume = Some(again);
            }
            Some(Err(_)) | None => {
                counts.fell_back += 1;
                let (plan, again) = full(&msgs[..next], &cfg, &state, &mut lens, revision);
                assert_eq!(
                    plan, expected,
                    "seed {seed}: the resumable render is the render"
                );
                output = plan.items;
                resume = again;
            }
        }
        mark(&mut resume, &output);
        at = next;
    }
}

#[test]
fn a_resumed_render_is_the_full_render() {
    let mut counts = Counts::default();
    for seed in 1..=3000_u64 {
        check_history(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15), &mut counts);
    }
    // The histories exercise every path.
    let Counts {
        resumed,
        restarted,
        fell_back,
        superseding,
    } = counts;
    assert!(superseding > 5000, "{superseding}");
    assert!(resumed > 20_000, "{resumed} / {restarted} / {fell_back}");
    assert!(restarted > 1000, "{resumed} / {restarted} / {fell_back}");
    assert!(fell_back > 1000, "{resumed} / {restarted} / {fell_back}");
}

const PURGE: PurgeConfig = PurgeConfig {
    cooldown_turns: Some(2.0),
    min_arg_chars: Some(100.0),
};

fn cfg_all() -> RenderConfig<'static> {
    RenderConfig {
        recovery_grace_turns: 3.0,
        purge: Some(PURGE),
        chain: Some(ChainConfig {
            strip_final_assistant_thinking: true,
        }),
        protection: None,
        spill_stub_ref_only: false,
        superseded: &[],
    }
}

/// user 100, a call of `c1` and its result, a final assistant; c1@300 summarized, the turn
/// compressed.
fn base() -> (Vec<MsgView>, TestState) {
    let msgs = vec![
        user(100.0),
        assistant(200.0, vec![tc("c1")]),
        tool_result("c1", 300.0),
        assistant(400.0, vec![Block::Thinking]),
    ];
    let state = TestState::default()
        .record("c1@300", rec("bash"))
        .short_ref_of("c1@300", "t1")
        .chain(
            Chain::new("b1", 100.0, 400.0, 900.0)
                .dropped(&["c1"])
                .keys(&["c1@300"]),
        );
    (msgs, state)
}

fn resume_of(msgs: &[MsgView], state: &TestState, cfg: &RenderConfig<'_>) -> Resume {
    let (plan, resume) = render_resumable(
        msgs,
        state,
        cfg,
        &mut Lens::default(),
        &mut ResultKeys::default(),
        0,
    );
    assert!(!plan.threw);
    resume.unwrap_or_else(|| unreachable!())
}

fn resumed(
    msgs: &[MsgView],
    at: usize,
    state: &TestState,
    cfg: &RenderConfig<'_>,
) -> Result<TailPlan, Fallback> {
    let resume = resume_of(&msgs[..at], state, cfg);
    resume_render(resume, at, &msgs[at..], state, cfg, &mut Lens::default(), 0)
        .map(|(_, plan)| plan)
}

#[test]
fn a_new_turn_is_decided_alone() {
    let (mut msgs, state) = base();
    let state = state
        .record("c2@520", rec("bash"))
        .short_ref_of("c2@520", "t2");
    msgs.extend([
        user(500.0),
        assistant(510.0, vec![tc("c2")]),
        tool_result("c2", 520.0),
    ]);
    let plan = resumed(&msgs, 4, &state, &cfg_all());
    let items = plan.map(|p| p.items);
    assert!(
        matches!(
            items.as_ref().map(|i| i.as_deref()),
            Ok(Some([
                Item::Keep(4),
                Item::Keep(5),
                Item::Stub { src: 6, .. }
            ]))
        ),
        "{items:?}"
    );
}

#[test]
fn each_global_change_falls_back() {
    let (msgs, state) = base();
    let cfg = cfg_all();
    let with = |extra: Vec<MsgView>| {
        let mut all = msgs.clone();
        all.extend(extra);
        resumed(&all, 4, &state, &cfg).err()
    };
    // A user at the range's start timestamp: the range no longer resolves.
    assert_eq!(with(vec![user(100.0)]), Some(Fallback::Range));
    // An assistant at its final timestamp.
    assert_eq!(with(vec![assistant(400.0, vec![])]), Some(Fallback::Range));
    // A chain message.
    assert_eq!(
        with(vec![synthetic_user(401.0, "b1")]),
        Some(Fallback::Range)
    );
    // A per-batch summary while a range drops calls.
    assert_eq!(
        with(vec![summary(450.0, &[("c1", Some(300.0))])]),
        Some(Fallback::Summary)
    );
    // An assistant whose content phase 4 cannot read.
    let mut odd = assistant(450.0, vec![]);
    odd.content = Content::Nullish;
    assert_eq!(with(vec![odd]), Some(Fallback::Throws));
    // An errored result naming a call of the old messages (bare-id keyed).
    let mut err = tool_result("c1", 460.0);
    err.is_error = true;
    assert_eq!(
        with(vec![assistant(450.0, vec![]), err]),
        Some(Fallback::Errored)
    );
    // Nothing else: a plain new turn resumes.
    assert_eq!(with(vec![user(500.0), assistant(510.0, vec![])]), None);
}

#[test]
fn a_cooldown_ending_falls_back_and_a_recovery_in_grace_too() {
    let cfg = cfg_all();
    let mut err = tool_result("e", 210.0);
    err.is_error = true;
    let mut msgs = vec![user(100.0), assistant(200.0, vec![tc("e")]), err];
    let state = TestState::default();
    // Two more assistants end the cooldown of 2: the old call is purged now.
    msgs.extend([assistant(300.0, vec![]), assistant(310.0, vec![])]);
    assert_eq!(
        resumed(&msgs, 3, &state, &cfg).err(),
        Some(Fallback::Cooldown)
    );
    assert_eq!(
        resumed(&msgs, 4, &state, &cfg).err(),
        Some(Fallback::Cooldown)
    );
    // A recovery output in the window.
    let mut rec_out = tool_result("q", 520.0);
    rec_out.is_recovery = true;
    let msgs = vec![
        user(100.0),
        user(500.0),
        assistant(510.0, vec![tc("q")]),
        rec_out,
    ];
    let state = TestState::default().record("q@520", rec("context_tree_query"));
    assert_eq!(resumed(&msgs, 2, &state, &cfg).err(), None);
    // ... unless an earlier result has its key.
    let mut again = msgs.clone();
    again.insert(1, tool_result("q", 520.0));
    assert_eq!(
        resumed(&again, 3, &state, &cfg).err(),
        Some(Fallback::Grace)
    );
    // ... leaving it after three more user turns.
    let mut more = msgs.clone();
    more.extend([user(600.0), user(700.0), user(800.0)]);
    assert_eq!(resumed(&more, 4, &state, &cfg).err(), None);
    more.push(user(900.0));
    assert_eq!(resumed(&more, 4, &state, &cfg).err(), Some(Fallback::Grace));
}

#[test]
fn new_orphans_are_swept_and_reported_with_the_old_ones() {
    let (mut msgs, state) = base();
    msgs.push(tool_result("x", 410.0)); // an orphan in the old messages
    msgs.extend([assistant(500.0, vec![tc("y")]), tool_result("z", 510.0)]);
    let plan = resumed(&msgs, 5, &state, &cfg_all());
    let expected = full(&msgs, &state, &cfg_all(), &mut Lens::default());
    let plan = plan.unwrap_or_else(|f| panic!("{f:?}"));
    assert_eq!(plan.items.as_deref(), Some(&[Item::Keep(5)][..]));
    assert_eq!(plan.diagnostics, expected.diagnostics);
    assert!(
        plan.diagnostics[0].detail.starts_with("swept 2 orphan"),
        "{:?}",
        plan.diagnostics
    );
}

#[test]
fn an_unchanged_render_resumes_unchanged_until_the_first_change() {
    let cfg = RenderConfig::default();
    let msgs = vec![
        user(1.0),
        assistant(2.0, vec![tc("a")]),
        tool_result("a", 3.0),
    ];
    let state = TestState::default();
    let mut more = msgs.clone();
    more.push(user(4.0));
    assert_eq!(resumed(&more, 3, &state, &cfg).map(|p| p.items), Ok(None));
    more.push(tool_result("b", 5.0));
    assert_eq!(
        resumed(&more, 3, &state, &cfg).err(),
        Some(Fallback::FirstChange)
    );
    let _ = JsId::str("unused");
}

#[test]
fn a_record_that_ends_a_pure_legacy_id_restarts_before_its_results() {
    // `L` has a legacy record (stubbed by its bare id); a later occurrence of `L` with a
    // timestamp gets a record: `L` is no longer pure legacy, and the first result is kept.
    let mut legacy = tool_result("L", 0.0);
    legacy.timestamp = Ts::Absent;
    let msgs = vec![
        user(100.0),
        assistant(110.0, vec![tc("L")]),
        legacy,
        assistant(130.0, vec![]),
        user(200.0),
        assistant(210.0, vec![tc("L")]),
        tool_result("L", 220.0),
        assistant(230.0, vec![]),
        user(300.0),
    ];
    let cfg = RenderConfig::default();
    let state = TestState::default().legacy("L", rec("bash"));
    // Checkpoints at 4 (the first turn) and 8.
    let resume = resume_of(&msgs[..4], &state, &cfg);
    let (resume, _) = resume_render(
        resume,
        4,
        &msgs[4..8],
        &state,
        &cfg,
        &mut Lens::default(),
        0,
    )
    .unwrap_or_else(|f| panic!("{f:?}"));
    let state = state.record("L@220", rec("bash"));
    let changes = [Change::Record {
        key: "L@220".into(),
        id: "L".into(),
    }];
    // The new key's own result is at 6, but the bare id's first result is at 2.
    assert_eq!(resume.restart_point(&state, &cfg, &changes), None);
    let only_key = [Change::Key("L@220".into())];
    assert_eq!(resume.restart_point(&state, &cfg, &only_key), Some(4));
}
