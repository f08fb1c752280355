//! Phase 2: purge the arguments of errored tool calls after a cooldown (04 section 4).

use super::plan::{Item, Purge};
use super::{FastMap, Lazy, PurgeConfig, Throw};
use crate::view::{Block, Content, IdStr, JsId, JsIdOf, MsgView, Role};

/// What phase 2 saw of a list, for a render resumed over it plus new messages
/// ([`super::resume`]).
#[derive(Debug, Default, Clone)]
pub(crate) struct PurgeTrail {
    /// The assistants of the list (`current`).
    pub(crate) turns: usize,
    /// `erroredAtTurn` (the usual few ids).
    pub(crate) errored: Vec<(JsId, usize)>,
    /// Every toolCall block whose id is errored: its verdict depends on `current`.
    pub(crate) candidates: Vec<Candidate>,
}

/// A toolCall block of an errored id, and its verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Candidate {
    pub(crate) msg: usize,
    pub(crate) block: usize,
    pub(crate) error_turn: usize,
    /// `JSON.stringify(arguments).length`, once asked for.
    pub(crate) size: Option<usize>,
    /// Whether the arguments hold a string the purge shortens, once asked for.
    pub(crate) shrinks: Option<bool>,
    pub(crate) purged: bool,
}

impl Candidate {
    /// The verdict with `current` assistants: whether the block is purged. Of `lazy`, with
    /// block `at` (message, block) as it knows them, the size is asked (and remembered) only
    /// when the cooldown is over, and whether the purge changes the arguments at all (2.11.3
    /// keeps a block whose arguments hold no long string as it is) only when the size is
    /// large enough.
    pub(crate) fn judge<L: Lazy + ?Sized>(
        &mut self,
        cfg: &PurgeConfig,
        current: usize,
        lazy: &mut L,
        at: (usize, usize),
    ) -> Result<bool, Throw> {
        let age = current.saturating_sub(self.error_turn) as f64;
        if cfg.cooldown_turns.is_some_and(|c| age < c) {
            return Ok(false);
        }
        // `JSON.stringify(undefined).length` throws.
        let size = match self.size {
            Some(size) => size,
            None => lazy.args_len(at.0, at.1).ok_or(Throw)?,
        };
        self.size = Some(size);
        if cfg.min_arg_chars.is_some_and(|m| (size as f64) < m) {
            return Ok(false);
        }
        let shrinks = match self.shrinks {
            Some(shrinks) => shrinks,
            None => lazy.args_shrink(at.0, at.1),
        };
        self.shrinks = Some(shrinks);
        Ok(shrinks)
    }
}

/// A one-byte digest of an id, for [`Bloom`].
#[inline]
fn digest(id: &JsIdOf<&str>) -> u8 {
    match id {
        JsIdOf::Str(s) => {
            let b = s.as_bytes();
            let last = b.last().copied().unwrap_or(0);
            let before = b
                .len()
                .checked_sub(2)
                .and_then(|i| b.get(i))
                .copied()
                .unwrap_or(0);
            (b.len() as u8).wrapping_mul(31) ^ last ^ before.rotate_left(3)
        }
        _ => 0,
    }
}

/// A 256-bit filter over id digests: most ids of an assistant's calls are not errored
/// ones, and are ruled out without hashing them.
#[derive(Default)]
struct Bloom([u64; 4]);

impl Bloom {
    fn insert(&mut self, id: &JsIdOf<&str>) {
        let d = digest(id);
        if let Some(word) = self.0.get_mut(usize::from(d >> 6)) {
            *word |= 1 << (d & 63);
        }
    }

    fn may_contain(&self, id: &JsIdOf<&str>) -> bool {
        let d = digest(id);
        self.0
            .get(usize::from(d >> 6))
            .is_some_and(|word| word & (1 << (d & 63)) != 0)
    }
}

fn is_stub(slots: Option<&[Item]>, i: usize) -> bool {
    matches!(
        slots.and_then(|s| s.get(i)),
        Some(Item::Stub { .. } | Item::Superseded { .. })
    )
}

/// Phase 2 over the phase-1 output (`slots`, `None` = the input unchanged).
/// Returns the new slots, or `None` when no block is purged. (Tests: the render purges in
/// place.)
#[cfg(test)]
pub(crate) fn purge_errored_args<S: IdStr, L: Lazy + ?Sized>(
    msgs: &[MsgView<S>],
    slots: Option<&[Item]>,
    cfg: &PurgeConfig,
    lazy: &mut L,
) -> Result<Option<Vec<Item>>, Throw> {
    let mut out = slots.map(<[Item]>::to_vec);
    Ok(purge_in_place(msgs, &mut out, cfg, lazy)?
        .then_some(out)
        .flatten())
}

/// [`purge_errored_args`] updating the slots in place (`None` becomes `Some` when a block
/// is purged). Returns whether a block was purged.
#[cfg(test)]
pub(crate) fn purge_in_place<S: IdStr, L: Lazy + ?Sized>(
    msgs: &[MsgView<S>],
    slots: &mut Option<Vec<Item>>,
    cfg: &PurgeConfig,
    lazy: &mut L,
) -> Result<bool, Throw> {
    purge_traced(msgs, slots, cfg, lazy, None)
}

/// [`purge_in_place`], leaving in `trail` what a resumed render needs.
pub(crate) fn purge_traced<S: IdStr, L: Lazy + ?Sized>(
    msgs: &[MsgView<S>],
    slots: &mut Option<Vec<Item>>,
    cfg: &PurgeConfig,
    lazy: &mut L,
    mut trail: Option<&mut PurgeTrail>,
) -> Result<bool, Throw> {
    // Bare-id keyed; a later errored result with the same id overwrites.
    let mut errored_at: FastMap<JsIdOf<&str>, usize> = FastMap::default();
    let mut bloom = Bloom::default();
    let mut turn_count = 0usize;
    for (i, msg) in msgs.iter().enumerate() {
        match msg.role {
            Role::Assistant => turn_count += 1,
            // A phase-1 stub carries `isError: false`.
            Role::ToolResult if msg.is_error && !is_stub(slots.as_deref(), i) => {
                let id = msg.tool_call_id.borrowed();
                bloom.insert(&id);
                errored_at.insert(id, turn_count);
            }
            _ => {}
        }
    }
    if let Some(trail) = trail.as_deref_mut() {
        trail.turns = turn_count;
        trail.errored = errored_at
            .iter()
            .map(|(id, &turn)| (id.to_owned_id(), turn))
            .collect();
    }
    if errored_at.is_empty() {
        return Ok(false);
    }
    let current = turn_count;
    let mut changed = false;
    for (i, msg) in msgs.iter().enumerate() {
        if msg.role != Role::Assistant {
            continue;
        }
        let Content::Array(blocks) = &msg.content else {
            return Err(Throw);
        };
        let mut purged = Vec::new();
        for (b, block) in blocks.iter() {
            let id = match block {
                Block::Nullish => return Err(Throw),
                Block::ToolCall { id } => id,
                Block::Thinking | Block::Other => continue,
            };
            let id = id.borrowed();
            if !bloom.may_contain(&id) {
                continue;
            }
            let Some(&error_turn) = errored_at.get(&id) else {
                continue;
            };
            let mut candidate = Candidate {
                msg: i,
                block: b,
                error_turn,
                size: None,
                shrinks: None,
                purged: false,
            };
            candidate.purged = candidate.judge(cfg, current, lazy, (i, b))?;
            if let Some(trail) = trail.as_deref_mut() {
                trail.candidates.push(candidate);
            }
            if let (true, Some(size)) = (candidate.purged, candidate.size) {
                purged.push(Purge { block: b, size });
            }
        }
        if !purged.is_empty() {
            changed = true;
            let slots_out = slots.get_or_insert_with(|| (0..msgs.len()).map(Item::Keep).collect());
            if let Some(slot) = slots_out.get_mut(i) {
                *slot = Item::Assistant {
                    src: i,
                    purged,
                    strip_thinking: false,
                };
            }
        }
    }
    Ok(changed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::render::testing::{Lens, assistant, errored, ok, tc, tool_result, user};
    use crate::view::Ts;

    const DEFAULTS: PurgeConfig = PurgeConfig {
        cooldown_turns: Some(2.0),
        min_arg_chars: Some(500.0),
    };

    /// a1 calls e (errors), then `later` more assistant turns.
    fn session(later: usize) -> Vec<MsgView> {
        let mut msgs = vec![user(1.0), assistant(2.0, vec![tc("e")]), errored("e", 3.0)];
        for k in 0..later {
            let id = format!("ok{k}");
            msgs.push(assistant(10.0 + k as f64, vec![tc(&id)]));
            msgs.push(tool_result(&id, 20.0 + k as f64));
        }
        msgs
    }

    fn purge(msgs: &[MsgView], cfg: &PurgeConfig, lens: &mut Lens) -> Option<Vec<Item>> {
        ok(purge_errored_args(msgs, None, cfg, lens))
    }

    #[test]
    fn purges_after_the_cooldown() {
        let mut lens = Lens::default();
        lens.0.insert((1, 0), 612);
        assert!(purge(&session(1), &DEFAULTS, &mut lens).is_none());
        let items = purge(&session(2), &DEFAULTS, &mut lens).unwrap_or_default();
        assert_eq!(
            items[1],
            Item::Assistant {
                src: 1,
                purged: vec![Purge {
                    block: 0,
                    size: 612
                }],
                strip_thinking: false
            }
        );
        assert_eq!(items[0], Item::Keep(0));
    }

    #[test]
    fn small_arguments_are_kept() {
        let mut lens = Lens::default();
        lens.0.insert((1, 0), 499);
        assert!(purge(&session(5), &DEFAULTS, &mut lens).is_none());
        lens.0.insert((1, 0), 500);
        assert!(purge(&session(5), &DEFAULTS, &mut lens).is_some());
    }

    #[test]
    fn arguments_without_a_long_string_are_kept() {
        // 2.11.3 (#19): a block whose arguments the shrink leaves unchanged is not purged.
        let mut lens = Lens::default();
        lens.2.insert((1, 0));
        assert!(purge(&session(5), &DEFAULTS, &mut lens).is_none());
        lens.2.clear();
        assert!(purge(&session(5), &DEFAULTS, &mut lens).is_some());
    }

    #[test]
    fn no_errored_result_is_a_no_op() {
        let msgs = [
            user(1.0),
            assistant(2.0, vec![tc("a")]),
            tool_result("a", 3.0),
        ];
        assert!(purge(&msgs, &DEFAULTS, &mut Lens::default()).is_none());
    }

    #[test]
    fn stubbed_errored_result_is_no_longer_purged() {
        let msgs = session(4);
        let mut slots: Vec<Item> = (0..msgs.len()).map(Item::Keep).collect();
        slots[2] = Item::Stub {
            src: 2,
            text: Default::default(),
        };
        let out = ok(purge_errored_args(
            &msgs,
            Some(&slots),
            &DEFAULTS,
            &mut Lens::default(),
        ));
        assert!(out.is_none());
    }

    #[test]
    fn bare_id_keying_purges_every_call_with_the_id() {
        // An earlier, successful call reused the id `e` of the later errored one.
        let msgs = vec![
            user(1.0),
            assistant(2.0, vec![tc("e")]),
            tool_result("e", 3.0),
            assistant(4.0, vec![tc("e")]),
            errored("e", 5.0),
            assistant(6.0, vec![tc("x")]),
            tool_result("x", 7.0),
            assistant(8.0, vec![tc("y")]),
            tool_result("y", 9.0),
        ];
        let items = purge(&msgs, &DEFAULTS, &mut Lens::default()).unwrap_or_default();
        assert!(matches!(items[1], Item::Assistant { .. }));
        assert!(matches!(items[3], Item::Assistant { .. }));
        assert_eq!(items[5], Item::Keep(5));
    }

    #[test]
    fn later_errored_result_overwrites_the_turn() {
        // `e` errors at turn 1 and again at turn 3 (of 3): age 0 -> kept.
        let msgs = vec![
            assistant(2.0, vec![tc("e")]),
            errored("e", 3.0),
            assistant(4.0, vec![tc("x")]),
            tool_result("x", 5.0),
            assistant(6.0, vec![tc("e")]),
            errored("e", 7.0),
        ];
        assert!(purge(&msgs, &DEFAULTS, &mut Lens::default()).is_none());
    }

    #[test]
    fn missing_thresholds_purge_immediately() {
        let cfg = PurgeConfig {
            cooldown_turns: None,
            min_arg_chars: None,
        };
        let mut lens = Lens::default();
        lens.0.insert((1, 0), 2);
        assert!(purge(&session(0), &cfg, &mut lens).is_some());
    }

    #[test]
    fn only_tool_call_blocks_are_touched() {
        let msgs = vec![
            assistant(2.0, vec![Block::Thinking, Block::Other, tc("e")]),
            errored("e", 3.0),
            assistant(4.0, vec![]),
            assistant(5.0, vec![]),
        ];
        let items = purge(&msgs, &DEFAULTS, &mut Lens::default()).unwrap_or_default();
        assert_eq!(
            items[0],
            Item::Assistant {
                src: 0,
                purged: vec![Purge {
                    block: 2,
                    size: 1000
                }],
                strip_thinking: false
            }
        );
    }

    #[test]
    fn throws_like_the_reference() {
        let mut lens = Lens::default();
        // A candidate block without `arguments`.
        let msgs = session(3);
        lens.1.insert((1, 0));
        assert_eq!(
            purge_errored_args(&msgs, None, &DEFAULTS, &mut lens),
            Err(Throw)
        );
        lens.1.clear();
        // Any assistant with non-array content, once an errored result exists.
        let mut msgs = session(0);
        let mut odd: MsgView = MsgView::new(Role::Assistant, Ts::Num(50.0));
        odd.content = Content::Str;
        msgs.push(odd);
        assert_eq!(
            purge_errored_args(&msgs, None, &DEFAULTS, &mut lens),
            Err(Throw)
        );
        // A null block.
        let msgs = vec![assistant(1.0, vec![Block::Nullish]), errored("e", 2.0)];
        assert_eq!(
            purge_errored_args(&msgs, None, &DEFAULTS, &mut lens),
            Err(Throw)
        );
    }
}
