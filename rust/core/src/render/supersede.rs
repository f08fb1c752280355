//! Phase 1b: protected-path supersession (pi-condense 2.10.3).
//!
//! Of the reads of one protected path (a toolCall that `isProtected(name, args)` and whose
//! `args.path` is a string), only the newest stays verbatim; each earlier one may become a
//! one-line stub. The rule has two halves:
//!
//! - which results are *candidates* ([`Scan`]): a forward pass that pairs each toolResult with
//!   the toolCall block of the same id in the assistant message that opened it (any message
//!   that is neither an assistant with array content nor a toolResult closes every open
//!   call; a result finds its block at most once), groups the protected pairs by
//!   `normalizePath(args.path)` (backslashes as slashes) and lists all of each group but the
//!   last, by message position;
//! - which candidates are *stubbed* ([`SupersedeState`]): those whose occurrence key was
//!   activated. A render activates the candidates at or after the state's floor (all of them
//!   when the floor is 0) and then clears the floor; an activated key stays activated until
//!   the state is reset. The floor is lowered where the pruner rewrites the context anyway
//!   (a flush, a chain compression) and set to 0 where the prompt cache is cold (session
//!   start, leaf move, compaction, model or thinking-level change), so a supersession is
//!   never the only change in the middle of a cached prefix.
//!
//! The stub replaces the result's `content` with one text block and sets `isError: false`,
//! keeping its other members ([`super::plan::Item::Superseded`]; a result phase 1 stubbed
//! keeps the stub's shape with the new text).

use crate::collections::{FastMap, FastSet};
use crate::js::format_number;
use crate::jsstr::JsStr;
use crate::view::JsId;

use super::plan::Text;

/// One message as the scan sees it.
#[derive(Debug, Clone, PartialEq)]
pub enum SupMsg {
    /// An assistant whose `content` is an array: its toolCall blocks in order, each with
    /// its id and, when `isProtected(block.name, args)` and `args.path` is a string, that
    /// path (`args = block.input ?? block.args ?? block.arguments ?? {}`, [`crate::view::call_args_path`]).
    /// A reader may leave out a block without such a path unless an earlier block of the
    /// message has its id (only the last block of an id counts).
    Assistant(Vec<(JsId, Option<JsStr>)>),
    /// A toolResult: its `toolCallId` and its `timestamp` when that is a number.
    ToolResult {
        /// `toolCallId`
        id: JsId,
        /// `timestamp`, when `typeof timestamp === "number"`
        ts: Option<f64>,
    },
    /// Anything else (an assistant without array content included): closes the open calls.
    Other,
    /// A message that changes nothing: a toolResult read while no call is open (a reader
    /// may pass one without reading it, see [`Scan::has_open`]).
    Skip,
}

/// An earlier read of a protected path.
#[derive(Debug, Clone, PartialEq)]
pub struct Candidate {
    /// position of the toolResult in the list
    pub index: usize,
    /// the id of the call (`block.id`)
    pub id: JsId,
    /// the result's timestamp, when a number
    pub ts: Option<f64>,
    /// `normalizePath(args.path)`
    pub path: JsStr,
}

impl Candidate {
    /// `occKey(id, ts)`: `String(id) + "@" + String(ts)`, or the id itself without a
    /// timestamp.
    pub fn key(&self) -> JsId {
        match self.ts {
            None => self.id.clone(),
            Some(ts) => {
                let mut key = self.id.to_js_string();
                key.push('@');
                key.push_str(&format_number(ts));
                JsId::Str(key)
            }
        }
    }
}

/// `path` with every `\` replaced by `/` (`normalizePath`: no other resolution).
pub fn normalize_path(path: &JsStr) -> JsStr {
    if !path.wtf8().contains(&b'\\') {
        return path.clone();
    }
    let bytes: Vec<u8> = path
        .wtf8()
        .iter()
        .map(|&b| if b == b'\\' { b'/' } else { b })
        .collect();
    JsStr::from_wtf8(&bytes)
}

/// The candidates of a message list, read one message at a time (`findSuperseded`).
#[derive(Debug, Default, Clone)]
pub struct Scan {
    /// calls opened by the latest assistant and not yet answered: id -> protected path
    open: FastMap<JsId, Option<JsStr>>,
    /// the protected reads by path, in list order
    by_path: FastMap<Vec<u8>, Vec<Candidate>>,
    /// messages read so far
    read: usize,
}

impl Scan {
    /// A scan that has read nothing.
    pub fn new() -> Self {
        Scan::default()
    }

    /// Number of messages read.
    pub fn len(&self) -> usize {
        self.read
    }

    /// Whether nothing has been read.
    pub fn is_empty(&self) -> bool {
        self.read == 0
    }

    /// Whether a call is open: a toolResult read now could pair with it (otherwise it may be
    /// pushed as [`SupMsg::Skip`]).
    pub fn has_open(&self) -> bool {
        !self.open.is_empty()
    }

    /// Reads the next message.
    pub fn push(&mut self, msg: SupMsg) {
        let index = self.read;
        self.read += 1;
        match msg {
            SupMsg::Assistant(calls) => {
                self.open.clear();
                // `Map.set`: a later block of the same id replaces an earlier one.
                for (id, path) in calls {
                    self.open.insert(id, path);
                }
            }
            SupMsg::ToolResult { id, ts } => {
                let Some(path) = self.open.remove(&id) else {
                    return;
                };
                let Some(path) = path else {
                    return;
                };
                let path = normalize_path(&path);
                self.by_path
                    .entry(path.wtf8().to_vec())
                    .or_default()
                    .push(Candidate {
                        index,
                        id,
                        ts,
                        path,
                    });
            }
            SupMsg::Other => self.open.clear(),
            SupMsg::Skip => {}
        }
    }

    /// Every protected read but the newest of its path, by position.
    pub fn candidates(&self) -> Vec<&Candidate> {
        let mut out: Vec<&Candidate> = self
            .by_path
            .values()
            .flat_map(|reads| &reads[..reads.len().saturating_sub(1)])
            .collect();
        out.sort_by_key(|c| c.index);
        out
    }
}

/// Which candidates are stubbed: the floor and the activated occurrence keys.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct SupersedeState {
    /// the earliest result timestamp a rewrite since the last render touched (`None`: no
    /// rewrite; `Some(0.0)`: a cold cache, everything may change)
    pub floor: Option<f64>,
    /// occurrence keys of the stubbed candidates
    pub activated: FastSet<JsId>,
}

impl SupersedeState {
    /// A state with no floor and nothing activated (`createSupersedeState`).
    pub fn new() -> Self {
        SupersedeState::default()
    }

    /// `lowerFloor`: the floor becomes `t` or stays lower; `None` changes nothing.
    pub fn lower_floor(&mut self, t: Option<f64>) {
        let Some(t) = t else { return };
        self.floor = Some(match self.floor {
            None => t,
            // `Math.min` (NaN wins)
            Some(f) if f.is_nan() || t.is_nan() => f64::NAN,
            Some(f) => f.min(t),
        });
    }

    /// The prompt cache is cold: every candidate of the next render is activated.
    pub fn cold(&mut self) {
        self.floor = Some(0.0);
    }

    /// A session (re)start or a leaf move: nothing activated, cold cache.
    pub fn reset(&mut self) {
        self.activated.clear();
        self.cold();
    }

    /// The candidates of a render that are stubbed (in order), after activating those at or
    /// after the floor, which this clears (`applySupersede`).
    pub fn apply<'c>(&mut self, candidates: &[&'c Candidate]) -> Vec<&'c Candidate> {
        if let Some(floor) = self.floor.take() {
            for c in candidates {
                if floor == 0.0 || c.ts.is_some_and(|ts| ts >= floor) {
                    self.activated.insert(c.key());
                }
            }
        }
        candidates
            .iter()
            .copied()
            .filter(|c| !self.activated.is_empty() && self.activated.contains(&c.key()))
            .collect()
    }
}

/// The stub text of a superseded read of `path` (`supersededStub`).
pub fn superseded_text(path: &JsStr) -> Text {
    let mut text = Text::default();
    text.lit("[Superseded: ");
    text.push_js(path);
    text.lit(
        " was read again later in this conversation - see the newer read. Re-read the file if \
         this earlier content is needed.]",
    );
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(s: &str) -> JsId {
        JsId::str(s)
    }

    fn read(calls: &[(&str, Option<&str>)]) -> SupMsg {
        SupMsg::Assistant(
            calls
                .iter()
                .map(|(i, p)| (id(i), p.map(|p| JsStr::new(p.to_owned()))))
                .collect(),
        )
    }

    fn result(i: &str, ts: f64) -> SupMsg {
        SupMsg::ToolResult {
            id: id(i),
            ts: Some(ts),
        }
    }

    fn scan(msgs: Vec<SupMsg>) -> Scan {
        let mut scan = Scan::new();
        for m in msgs {
            scan.push(m);
        }
        scan
    }

    fn indices(scan: &Scan) -> Vec<usize> {
        scan.candidates().iter().map(|c| c.index).collect()
    }

    const SKILL: &str = ".pi/skills/a/SKILL.md";

    #[test]
    fn every_read_of_a_path_but_the_newest_is_a_candidate() {
        let s = scan(vec![
            SupMsg::Other,
            read(&[("a", Some(SKILL)), ("b", Some("x.md"))]),
            result("a", 10.0),
            result("b", 11.0),
            read(&[("c", Some(SKILL))]),
            result("c", 20.0),
            read(&[("d", Some(SKILL)), ("e", None)]),
            result("d", 30.0),
            result("e", 31.0),
        ]);
        assert_eq!(indices(&s), vec![2, 5]);
        let c = s.candidates();
        assert_eq!(c[0].key(), id("a@10"));
        assert_eq!(c[0].path.as_str(), SKILL);
    }

    #[test]
    fn backslashes_are_the_same_path() {
        let s = scan(vec![
            read(&[("a", Some(".pi\\skills\\a\\SKILL.md"))]),
            result("a", 1.0),
            read(&[("b", Some(SKILL))]),
            result("b", 2.0),
        ]);
        let c = s.candidates();
        assert_eq!(c.len(), 1);
        assert_eq!(
            c[0].path.as_str(),
            SKILL,
            "the stub names the normalized path"
        );
    }

    #[test]
    fn a_result_pairs_only_with_an_open_call_once() {
        let s = scan(vec![
            read(&[("a", Some(SKILL))]),
            SupMsg::Other, // a user message between call and result closes the call
            result("a", 1.0),
            read(&[("b", Some(SKILL))]),
            result("b", 2.0),
            result("b", 3.0), // answered already
            read(&[("c", Some(SKILL))]),
            result("c", 4.0),
        ]);
        assert_eq!(indices(&s), vec![4]);
    }

    #[test]
    fn a_later_block_of_the_same_id_wins() {
        let s = scan(vec![
            read(&[("a", Some(SKILL)), ("a", None)]),
            result("a", 1.0),
            read(&[("b", Some(SKILL))]),
            result("b", 2.0),
        ]);
        assert!(indices(&s).is_empty());
    }

    #[test]
    fn a_reader_may_leave_out_what_cannot_make_a_candidate() {
        // Unprotected blocks without a colliding id, and results while nothing is open.
        let full = scan(vec![
            read(&[("x", None), ("a", Some(SKILL))]),
            result("x", 1.0),
            result("a", 2.0),
            result("a", 3.0),
            read(&[("b", Some(SKILL))]),
            result("b", 4.0),
        ]);
        let mut reduced = Scan::new();
        reduced.push(read(&[("a", Some(SKILL))]));
        assert!(reduced.has_open());
        reduced.push(result("x", 1.0));
        reduced.push(result("a", 2.0));
        assert!(!reduced.has_open());
        reduced.push(SupMsg::Skip);
        reduced.push(read(&[("b", Some(SKILL))]));
        reduced.push(result("b", 4.0));
        assert_eq!(indices(&full), vec![2]);
        assert_eq!(indices(&reduced), indices(&full));
    }

    #[test]
    fn keys_without_a_timestamp_are_the_bare_id() {
        let c = Candidate {
            index: 0,
            id: id("x"),
            ts: None,
            path: JsStr::new("p".into()),
        };
        assert_eq!(c.key(), id("x"));
        let c = Candidate { ts: Some(1.5), ..c };
        assert_eq!(c.key(), id("x@1.5"));
    }

    fn cands(s: &Scan) -> Vec<&Candidate> {
        s.candidates()
    }

    #[test]
    fn the_floor_activates_candidates_at_or_after_it_once() {
        let s = scan(vec![
            read(&[("a", Some(SKILL))]),
            result("a", 10.0),
            read(&[("b", Some(SKILL))]),
            result("b", 20.0),
            read(&[("c", Some(SKILL))]),
            result("c", 30.0),
        ]);
        let mut state = SupersedeState::new();
        // No floor: nothing is stubbed, and nothing is activated.
        assert!(state.apply(&cands(&s)).is_empty());
        state.lower_floor(Some(25.0));
        state.lower_floor(Some(20.0));
        state.lower_floor(None);
        assert_eq!(state.floor, Some(20.0));
        let on: Vec<usize> = state.apply(&cands(&s)).iter().map(|c| c.index).collect();
        assert_eq!(on, vec![3], "only the read at or after the floor");
        assert_eq!(state.floor, None, "a render clears the floor");
        // It stays stubbed in later renders without a floor.
        assert_eq!(state.apply(&cands(&s)).len(), 1);
        // A cold cache activates everything.
        state.cold();
        assert_eq!(state.apply(&cands(&s)).len(), 2);
        // A reset forgets what was activated.
        state.reset();
        state.floor = None;
        assert!(state.apply(&cands(&s)).is_empty());
    }

    #[test]
    fn a_floor_spent_on_a_render_without_candidates_is_gone() {
        let early = scan(vec![read(&[("a", Some(SKILL))]), result("a", 10.0)]);
        let mut state = SupersedeState::new();
        state.cold();
        assert!(state.apply(&cands(&early)).is_empty());
        assert_eq!(state.floor, None);
        let late = scan(vec![
            read(&[("a", Some(SKILL))]),
            result("a", 10.0),
            read(&[("b", Some(SKILL))]),
            result("b", 20.0),
        ]);
        assert!(
            state.apply(&cands(&late)).is_empty(),
            "the re-read alone does not activate the earlier read"
        );
    }

    #[test]
    fn a_result_without_a_timestamp_is_activated_only_by_a_cold_cache() {
        let s = scan(vec![
            read(&[("a", Some(SKILL))]),
            SupMsg::ToolResult {
                id: id("a"),
                ts: None,
            },
            read(&[("b", Some(SKILL))]),
            result("b", 20.0),
        ]);
        let mut state = SupersedeState::new();
        state.lower_floor(Some(1.0));
        assert!(state.apply(&cands(&s)).is_empty());
        state.cold();
        assert_eq!(state.apply(&cands(&s)).len(), 1);
    }

    #[test]
    fn stub_text_is_the_reference_text() {
        let text = superseded_text(&JsStr::new("a/b.md".into()));
        assert_eq!(
            text.as_literal(),
            Some(
                "[Superseded: a/b.md was read again later in this conversation - see the newer \
                 read. Re-read the file if this earlier content is needed.]"
            )
        );
    }
}
