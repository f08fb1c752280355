//! The tool results' lookup keys, written once per render.
//!
//! Phase 1 writes the key of every tool result (reading its id from the message); phase 3
//! needs the same keys for the results it drops, and their ids. Each read of an id from a
//! message is a likely cache miss (the ids sit in the caller's objects, scattered over the
//! heap, and every pass over the views evicts them again), so phase 1 keeps its keys here,
//! back to back in list order, and phase 3 reads them (or the messages, when phase 3 runs
//! on its own).
//!
//! A caller that renders the same leading messages again (a host's history, with new
//! messages appended) hands the previous render's keys back ([`ResultKeys::reusable`]):
//! phase 1 then writes only the keys of the messages after that prefix.

use crate::js::push_number;
use crate::view::{IdStr, JsIdOf, MsgView, Ts};

/// The keys phase 1 looked the tool results up by (the occurrence key `id@ts`, or the bare
/// string id without a numeric timestamp), back to back in one buffer. A string id is the
/// start of its key, so the key also holds the id.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct ResultKeys {
    text: String,
    /// `(message index, start, end)` of each key in `text`, by ascending message index.
    spans: Vec<(usize, usize, usize)>,
    /// Every tool result of the list was keyed (phase 1 ran over all of them).
    complete: bool,
    /// The tool results among the first `prefix` messages are keyed already (given back
    /// by [`ResultKeys::reusable`]).
    prefix: usize,
}

impl ResultKeys {
    /// The keys of a render's first `n` messages, for a render whose list starts with the
    /// very same `n` messages (the same views: ids and timestamps). Empty unless phase 1
    /// keyed every tool result of that render.
    pub fn reusable(mut self, n: usize) -> ResultKeys {
        if !self.complete {
            return ResultKeys::default();
        }
        let kept = self.spans.partition_point(|&(at, _, _)| at < n);
        self.spans.truncate(kept);
        let end = self.spans.last().map_or(0, |&(_, _, end)| end);
        self.text.truncate(end);
        self.complete = false;
        self.prefix = n;
        self
    }

    /// Room for the keys of `messages` more messages, allocated at once rather than by a
    /// growing copy (about half of a history's messages are tool results; a key is an id of
    /// some 30 characters, `@` and a 13-digit timestamp).
    pub(crate) fn reserve_for(&mut self, messages: usize) {
        let results = messages / 2 + 1;
        self.text.reserve(results.saturating_mul(48));
        self.spans.reserve(results);
    }

    /// How many leading messages are keyed already (see [`ResultKeys::reusable`]).
    pub(crate) fn prefix(&self) -> usize {
        self.prefix
    }

    /// The key of tool result `i` among the reused prefix's (asked in ascending order, as
    /// [`ResultKeys::span_of`]).
    pub(crate) fn reused(&self, i: usize, cursor: &mut usize) -> Option<&str> {
        let (start, end) = self.span_of(i, cursor)?;
        self.text.get(start..end)
    }

    /// Appends the key of tool result `i` and returns it (`None`: no key, the id is not a
    /// string and the timestamp not a number).
    pub(crate) fn push<S: IdStr>(&mut self, i: usize, msg: &MsgView<S>) -> Option<&str> {
        let start = self.text.len();
        if !push_result_key(&mut self.text, msg) {
            return None;
        }
        self.spans.push((i, start, self.text.len()));
        self.text.get(start..)
    }

    /// Marks every tool result of the list keyed.
    pub(crate) fn set_complete(&mut self) {
        self.complete = true;
        self.prefix = 0;
    }

    /// The keys, when every tool result was keyed.
    pub(crate) fn complete(&self) -> Option<&Self> {
        self.complete.then_some(self)
    }

    /// The buffer the spans of [`ResultKeys::span_of`] index.
    pub(crate) fn text(&self) -> &str {
        &self.text
    }

    /// Moves `cursor` (see [`ResultKeys::span_of`]) back for asking from message `i` on, if
    /// it is past it (asking in ascending order, it never is).
    pub(crate) fn rewind(&self, i: usize, cursor: &mut usize) {
        let past = cursor
            .checked_sub(1)
            .and_then(|before| self.spans.get(before))
            .is_some_and(|&(at, _, _)| at >= i);
        if past {
            *cursor = self.spans.partition_point(|&(at, _, _)| at < i);
        }
    }

    /// The span (in [`ResultKeys::text`]) of the key of message `i`. Messages are asked in
    /// ascending order; `cursor` carries the position from one question to the next.
    pub(crate) fn span_of(&self, i: usize, cursor: &mut usize) -> Option<(usize, usize)> {
        while self.spans.get(*cursor).is_some_and(|&(at, _, _)| at < i) {
            *cursor += 1;
        }
        match self.spans.get(*cursor) {
            Some(&(at, start, end)) if at == i => Some((start, end)),
            _ => None,
        }
    }
}

/// Appends the lookup key of tool result `msg` to `out`: the occurrence key `id@ts` with a
/// numeric timestamp, else the bare string id; `false` (nothing appended) when the id is
/// not a string and the timestamp not a number.
pub(crate) fn push_result_key<S: IdStr>(out: &mut String, msg: &MsgView<S>) -> bool {
    match (msg.timestamp, &msg.tool_call_id) {
        (Ts::Num(ts), id) => {
            out.push_str(&id.js_str());
            out.push('@');
            push_number(out, ts);
        }
        (_, JsIdOf::Str(id)) => out.push_str(id.as_ref()),
        _ => return false,
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::render::testing::{tool_result, user};
    use crate::view::{JsId, Role};

    #[test]
    fn result_keys_hold_keys_and_ids() {
        let mut keys = ResultKeys::default();
        let mut bare = tool_result("b", 0.0);
        bare.timestamp = Ts::Absent;
        let mut numbered = tool_result("x", 5.0);
        numbered.tool_call_id = JsId::num(7.0);
        let mut nothing = tool_result("y", 0.0);
        nothing.tool_call_id = JsId::Null;
        nothing.timestamp = Ts::Other;
        let msgs = [tool_result("a", 12.0), user(1.0), bare, numbered, nothing];
        // Phase 1 keys the tool results only.
        let pushed: Vec<Option<String>> = msgs
            .iter()
            .enumerate()
            .filter(|(_, m)| m.role == Role::ToolResult)
            .map(|(i, m)| keys.push(i, m).map(str::to_owned))
            .collect();
        assert_eq!(
            pushed,
            [
                Some("a@12".into()),
                Some("b".into()),
                Some("7@5".into()),
                None
            ]
        );
        assert!(keys.complete().is_none());
        keys.set_complete();
        let keys = keys.complete().unwrap_or_else(|| unreachable!());
        let mut cursor = 0;
        let span = |i, cursor: &mut usize| {
            keys.span_of(i, cursor)
                .and_then(|(s, e)| keys.text().get(s..e))
        };
        assert_eq!(span(0, &mut cursor), Some("a@12"));
        assert_eq!(span(2, &mut cursor), Some("b"));
        assert_eq!(span(4, &mut cursor), None);
        // Asked out of order: not found, until rewound.
        assert_eq!(span(3, &mut cursor), None);
        keys.rewind(3, &mut cursor);
        assert_eq!(span(3, &mut cursor), Some("7@5"));
        keys.rewind(0, &mut cursor);
        assert_eq!(span(0, &mut cursor), Some("a@12"));
        // Rewinding to a later message leaves the cursor where it is.
        keys.rewind(4, &mut cursor);
        assert_eq!(cursor, 0);
    }
}
