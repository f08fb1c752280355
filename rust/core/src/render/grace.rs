//! Phase 0: the recovery grace window (04 section 3.1).
//!
//! `context_tree_query` outputs of the last `recoveryGraceTurns` user-turn
//! groups stay verbatim, so a model that just recovered an output can read it.

use std::collections::HashSet;

use crate::keys::occ_key;
use crate::view::{IdStr, JsIdOf, MsgView, Role};

/// Whether the window is on: `recoveryGraceTurns > 0` (zero, negative and NaN disable it).
pub(crate) fn enabled(grace_turns: f64) -> bool {
    grace_turns.partial_cmp(&0.0) == Some(std::cmp::Ordering::Greater)
}

/// Occurrence keys of the recovery outputs still in grace.
pub fn in_grace_keys<S: IdStr>(msgs: &[MsgView<S>], grace_turns: f64) -> HashSet<String> {
    in_grace_keys_with(msgs, grace_turns, |_, msg| msg.is_recovery)
}

/// [`in_grace_keys`] with `is_recovery(i, msg)` telling whether toolResult `i` is a
/// recovery output (asked only for those inside the window).
pub(crate) fn in_grace_keys_with<S: IdStr>(
    msgs: &[MsgView<S>],
    grace_turns: f64,
    is_recovery: impl FnMut(usize, &MsgView<S>) -> bool,
) -> HashSet<String> {
    in_grace_keys_traced(msgs, grace_turns, is_recovery, None)
}

/// [`in_grace_keys_with`], also noting in `window` the age (user messages after it) and key
/// of every recovery output inside the window: a render resumed over more messages
/// ([`super::resume`]) must know which of them could leave it.
pub(crate) fn in_grace_keys_traced<S: IdStr>(
    msgs: &[MsgView<S>],
    grace_turns: f64,
    mut is_recovery: impl FnMut(usize, &MsgView<S>) -> bool,
    mut window: Option<&mut Vec<(usize, String)>>,
) -> HashSet<String> {
    let mut keys = HashSet::new();
    // `!(turns > 0)`: zero, negative and NaN all disable the window.
    if !enabled(grace_turns) {
        return keys;
    }
    // The window is the tail of the list: walk back to the user message that makes the
    // age exceed the window (only the tail is read; the outputs are then visited in order).
    let (mut start, mut now_utg) = (0, 0usize);
    for (i, msg) in msgs.iter().enumerate().rev() {
        if msg.role == Role::User {
            if (now_utg + 1) as f64 > grace_turns {
                start = i + 1;
                break;
            }
            now_utg += 1;
        }
    }
    let mut seen = 0usize;
    for (i, msg) in msgs.iter().enumerate().skip(start) {
        match msg.role {
            Role::User => seen += 1,
            Role::ToolResult => {
                // `seen <= now_utg`, so the age is never negative.
                let age = now_utg - seen;
                if (age as f64) > grace_turns {
                    continue;
                }
                if let JsIdOf::Str(id) = &msg.tool_call_id
                    && is_recovery(i, msg)
                {
                    let key = occ_key(id.as_ref(), msg.timestamp.num()).into_owned();
                    if let Some(window) = window.as_deref_mut() {
                        window.push((age, key.clone()));
                    }
                    keys.insert(key);
                }
            }
            _ => {}
        }
    }
    keys
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::render::testing::{assistant, tc, tool_result, user};
    use crate::view::{JsId, Ts};

    fn recovery(id: &str, ts: f64) -> MsgView {
        let mut m = tool_result(id, ts);
        m.is_recovery = true;
        m
    }

    /// user, recovery, then `later` more user turns.
    fn session(later: usize) -> Vec<MsgView> {
        let mut msgs = vec![
            user(1.0),
            assistant(2.0, vec![tc("q1")]),
            recovery("q1", 3.0),
        ];
        for k in 0..later {
            msgs.push(user(10.0 + k as f64));
        }
        msgs
    }

    #[test]
    fn in_grace_at_age_zero_and_exactly_k() {
        assert!(in_grace_keys(&session(0), 3.0).contains("q1@3"));
        assert!(in_grace_keys(&session(3), 3.0).contains("q1@3"));
    }

    #[test]
    fn excluded_past_k() {
        assert!(in_grace_keys(&session(4), 3.0).is_empty());
    }

    #[test]
    fn zero_negative_and_nan_disable_the_window() {
        assert!(in_grace_keys(&session(0), 0.0).is_empty());
        assert!(in_grace_keys(&session(0), -1.0).is_empty());
        assert!(in_grace_keys(&session(0), f64::NAN).is_empty());
    }

    #[test]
    fn non_recovery_outputs_are_ignored() {
        let msgs = vec![
            user(1.0),
            assistant(2.0, vec![tc("b")]),
            tool_result("b", 3.0),
        ];
        assert!(in_grace_keys(&msgs, 3.0).is_empty());
    }

    #[test]
    fn only_user_role_counts_as_a_turn() {
        let mut msgs = session(0);
        for k in 0..5 {
            msgs.push(MsgView::new(Role::Custom, Ts::Num(20.0 + k as f64)));
            msgs.push(MsgView::new(Role::Other, Ts::Num(30.0 + k as f64)));
        }
        assert!(in_grace_keys(&msgs, 1.0).contains("q1@3"));
    }

    #[test]
    fn keyed_by_occurrence_or_bare_id() {
        let mut msgs = session(0);
        let mut bare = recovery("q2", 0.0);
        bare.timestamp = Ts::Absent;
        msgs.push(bare);
        let mut odd = recovery("q3", 0.0);
        odd.timestamp = Ts::Other;
        msgs.push(odd);
        let keys = in_grace_keys(&msgs, 1.0);
        assert!(keys.contains("q1@3"));
        assert!(keys.contains("q2"));
        assert!(keys.contains("q3"));
        assert!(!keys.contains("q1"));
    }

    #[test]
    fn the_window_counts_user_turns_from_the_end() {
        // Recovery outputs after 0..=5 later user turns: ages 5 down to 0.
        let mut msgs = Vec::new();
        for k in 0..6 {
            msgs.push(user(f64::from(k) * 10.0));
            msgs.push(recovery(&format!("q{k}"), f64::from(k) * 10.0 + 1.0));
        }
        for (turns, expected) in [(0.5, 1), (1.0, 2), (2.5, 3), (5.0, 6), (f64::INFINITY, 6)] {
            let keys = in_grace_keys(&msgs, turns);
            assert_eq!(keys.len(), expected, "{turns}");
            assert!(keys.contains("q5@51"));
        }
    }

    #[test]
    fn non_string_ids_are_skipped() {
        let mut m = recovery("x", 3.0);
        m.tool_call_id = JsId::num(7.0);
        assert!(in_grace_keys(&[user(1.0), m], 3.0).is_empty());
    }
}
