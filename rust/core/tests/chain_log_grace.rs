//! `ChainLog::grace_views` feeds the render's grace window only the messages it reads: the
//! keys in grace are those of the whole list.

use std::collections::HashSet;

use pi_condense_core::chains::view::{AssistantContent, ChainMsg, MsgBody};
use pi_condense_core::chains::{ChainLog, Read};
use pi_condense_core::render::grace::in_grace_keys;
use pi_condense_core::view::{JsId, MsgView, Role, Ts};

struct Gen(u64);

impl Gen {
    fn below(&mut self, n: usize) -> usize {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (self.0 >> 33) as usize % n.max(1)
    }
}

/// A message, whether it is a recovery output, and its render view.
fn message(rng: &mut Gen, n: usize) -> (ChainMsg, bool, MsgView) {
    let ts = match rng.below(6) {
        0 => Ts::Absent,
        1 => Ts::Other,
        _ => Ts::Num(n as f64),
    };
    let id = match rng.below(5) {
        0 => JsId::num(3.0),
        1 => JsId::Null,
        k => JsId::str(["a", "b", "c"][k - 2]),
    };
    let (role, body) = match rng.below(5) {
        0 | 1 => (Role::User, MsgBody::User { synthetic: false }),
        2 => (
            Role::Assistant,
            MsgBody::Assistant(AssistantContent::NotArray),
        ),
        3 => (
            Role::ToolResult,
            MsgBody::ToolResult {
                id: id.clone(),
                protected: false,
            },
        ),
        _ => (Role::Custom, MsgBody::None),
    };
    let recovery = role == Role::ToolResult && rng.below(2) == 0;
    let mut msg = ChainMsg::new(role, ts);
    msg.body = body;
    let mut view = MsgView::new(role, ts);
    if recovery {
        view.is_recovery = true;
        view.tool_call_id = id;
    }
    (msg, recovery, view)
}

#[test]
fn grace_views_key_what_the_whole_list_keys() {
    let mut rng = Gen(7);
    for round in 0..400 {
        let n = rng.below(if round % 8 == 0 { 300 } else { 40 });
        let msgs: Vec<(ChainMsg, bool, MsgView)> = (0..n).map(|i| message(&mut rng, i)).collect();
        let fresh = msgs
            .iter()
            .enumerate()
            .map(|(i, (msg, recovery, _))| {
                let read = Read {
                    msg: msg.clone(),
                    recovery: *recovery,
                    item: (),
                };
                (i + 1, read)
            })
            .collect();
        let log = ChainLog::grown(None, 0, fresh).unwrap_or_default();
        let views: Vec<MsgView> = msgs.iter().map(|(_, _, v)| v.clone()).collect();
        for turns in [
            0.0,
            0.5,
            1.0,
            2.0,
            2.5,
            7.0,
            1e9,
            f64::INFINITY,
            -1.0,
            f64::NAN,
        ] {
            for len in [n, n.saturating_sub(1), n / 2, 0] {
                let expected = in_grace_keys(&views[..len], turns);
                let got: HashSet<String> = in_grace_keys(&log.grace_views(len, turns), turns);
                assert_eq!(got, expected, "round {round}, turns {turns}, len {len}");
            }
        }
    }
}
