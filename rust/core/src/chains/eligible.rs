//! `selectEligible(chains, K, alreadyCompressed, inGrace)` (05 section 11.2).

use std::borrow::Borrow;
use std::collections::HashSet;

use super::detect::ChainRange;
use super::view::ChainMsg;
use crate::js::Throw;
use crate::keys::{bare_tool_call_id, parse_occ_key};
use crate::view::JsId;

/// What [`select_eligible`] decided, as positions in the detected chain list.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Eligibility {
    /// Chains to compress now, oldest first.
    pub eligible: Vec<usize>,
    /// Closed chains whose start is already in the registry (reported as skipped).
    pub already_compressed: Vec<usize>,
    /// Candidates past the window that a recovery output still in grace defers.
    pub deferred: Vec<usize>,
    /// Number of candidates (closed, uncompressed, non-empty middle).
    pub candidates: usize,
}

/// `candidates.slice(0, Math.max(0, n - K))` as a count: `K` is a JS number (NaN selects
/// nothing; a negative or -Infinity window selects every candidate; a fractional result is
/// truncated).
pub(crate) fn take_count(candidates: usize, window: f64) -> usize {
    let end = candidates as f64 - window;
    if end.is_nan() || end <= 0.0 {
        return 0;
    }
    if end >= candidates as f64 {
        return candidates;
    }
    // 0 < end < candidates, so the truncated value fits.
    end.trunc() as usize
}

/// `chainMatchesGrace`: some lookup key is in the grace set, or some grace entry without a
/// timestamp is the bare id of a lookup key. `Err` where the reference throws (a non-string
/// key reaching `bareToolCallId`).
fn matches_grace(chain: &ChainRange, in_grace: &HashSet<String>) -> Result<bool, Throw> {
    if in_grace.is_empty() {
        return Ok(false);
    }
    let keys = chain.lookup_keys();
    if keys
        .iter()
        .any(|k| matches!(&k.value, JsId::Str(s) if in_grace.contains(s)))
    {
        return Ok(true);
    }
    let bare_grace: HashSet<&str> = in_grace
        .iter()
        .filter(|g| parse_occ_key(g).result_timestamp.is_none())
        .map(String::as_str)
        .collect();
    if bare_grace.is_empty() {
        return Ok(false);
    }
    for key in keys {
        let JsId::Str(key) = &key.value else {
            return Err(Throw);
        };
        if bare_grace.contains(bare_tool_call_id(key)) {
            return Ok(true);
        }
    }
    Ok(false)
}

/// Where a detected chain stands for eligibility.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Standing {
    /// Interrupted, or closed by an assistant stamped `null`: never selected.
    Open,
    /// Closed, with its start in the registry.
    Compressed,
    /// Closed and not compressed, but nothing in its middle: never selected.
    Empty,
    /// Closed, not compressed, with a middle: counts against the window.
    Candidate,
}

/// How `chain` stands, `message(i)` giving the detection list's messages and
/// `is_compressed` telling whether a start timestamp is registered.
pub(crate) fn standing<'a>(
    chain: &ChainRange,
    message: impl Fn(usize) -> Option<&'a ChainMsg>,
    is_compressed: impl Fn(f64) -> bool,
) -> Standing {
    let Some(end) = chain.end else {
        return Standing::Open;
    };
    if message(end).is_some_and(|m| m.timestamp_null) {
        // `finalAssistantTimestamp === null`: reads as not closed.
        return Standing::Open;
    }
    let compressed = message(chain.start)
        .and_then(|m| m.timestamp.num())
        .is_some_and(is_compressed);
    if compressed {
        Standing::Compressed
    } else if chain.middle_ids.is_empty() {
        Standing::Empty
    } else {
        Standing::Candidate
    }
}

/// The window and the grace check over `candidates` (positions of the candidate chains, in
/// order; `chain(i)` gives chain `i`): fills `eligible`, `deferred` and `candidates` of `out`.
pub(crate) fn pick<'a>(
    candidates: &[usize],
    chain: impl Fn(usize) -> Option<&'a ChainRange>,
    window: f64,
    in_grace: &HashSet<String>,
    out: &mut Eligibility,
) -> Result<(), Throw> {
    out.candidates = candidates.len();
    let take = take_count(candidates.len(), window);
    for &i in candidates.iter().take(take) {
        let Some(found) = chain(i) else {
            continue;
        };
        if matches_grace(found, in_grace)? {
            out.deferred.push(i);
        } else {
            out.eligible.push(i);
        }
    }
    Ok(())
}

/// Picks the chains to compress: closed, start not in the registry (`is_compressed` of the
/// start timestamp; only numbers can be registered), non-empty middle; the oldest
/// `max(0, candidates - window)` of those; minus the chains holding a recovery output still in
/// grace (the window boundary is computed first, so a deferred chain lets no other in).
pub fn select_eligible<C: Borrow<ChainRange>, M: Borrow<ChainMsg>>(
    chains: &[C],
    msgs: &[M],
    window: f64,
    is_compressed: impl Fn(f64) -> bool,
    in_grace: &HashSet<String>,
) -> Result<Eligibility, Throw> {
    let mut out = Eligibility::default();
    let mut candidates = Vec::new();
    for (i, chain) in chains.iter().enumerate() {
        match standing(
            chain.borrow(),
            |m| msgs.get(m).map(Borrow::borrow),
            &is_compressed,
        ) {
            Standing::Compressed => out.already_compressed.push(i),
            Standing::Candidate => candidates.push(i),
            Standing::Open | Standing::Empty => {}
        }
    }
    pick(
        &candidates,
        |i| chains.get(i).map(Borrow::borrow),
        window,
        in_grace,
        &mut out,
    )?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::super::detect::{Sourced, detect_chains};
    use super::super::view::testing::*;
    use super::*;

    /// `n` closed chains, chain k (1-based) starting at 100k with middle id `c<k>`.
    fn session(n: usize) -> Vec<ChainMsg> {
        let mut msgs = Vec::new();
        for k in 1..=n {
            let base = 100.0 * k as f64;
            let id = format!("c{k}");
            msgs.push(user(base));
            msgs.push(assistant(base + 1.0, vec![call(&id)]));
            msgs.push(result(&id, base + 2.0));
            msgs.push(text(base + 3.0));
        }
        msgs
    }

    fn select(msgs: &[ChainMsg], window: f64, compressed: &[f64], grace: &[&str]) -> Vec<f64> {
        let chains = detect_chains(msgs).unwrap_or_default();
        let grace: HashSet<String> = grace.iter().map(|s| (*s).to_owned()).collect();
        let out = select_eligible(&chains, msgs, window, |t| compressed.contains(&t), &grace)
            .unwrap_or_default();
        out.eligible
            .iter()
            .filter_map(|&i| msgs[chains[i].start].timestamp.num())
            .collect()
    }

    #[test]
    fn window_counts() {
        assert_eq!(take_count(5, 3.0), 2);
        assert_eq!(take_count(3, 3.0), 0);
        assert_eq!(take_count(2, 3.0), 0);
        assert_eq!(take_count(5, 0.0), 5);
        assert_eq!(take_count(5, f64::NAN), 0);
        assert_eq!(take_count(5, -2.0), 5);
        assert_eq!(take_count(5, 2.5), 2);
        assert_eq!(take_count(5, f64::INFINITY), 0);
        assert_eq!(take_count(5, f64::NEG_INFINITY), 5);
    }

    #[test]
    fn empty_and_up_to_k_select_nothing() {
        assert!(select(&[], 3.0, &[], &[]).is_empty());
        assert!(select(&session(2), 3.0, &[], &[]).is_empty());
        assert!(select(&session(3), 3.0, &[], &[]).is_empty());
    }

    #[test]
    fn k_plus_one_takes_the_oldest_and_k_plus_three_three_oldest() {
        assert_eq!(select(&session(4), 3.0, &[], &[]), [100.0]);
        assert_eq!(select(&session(6), 3.0, &[], &[]), [100.0, 200.0, 300.0]);
    }

    #[test]
    fn k_zero_takes_all_and_nan_none() {
        assert_eq!(select(&session(3), 0.0, &[], &[]), [100.0, 200.0, 300.0]);
        assert!(select(&session(3), f64::NAN, &[], &[]).is_empty());
    }

    #[test]
    fn open_chain_never_counts() {
        let mut msgs = session(4);
        msgs.push(user(900.0));
        msgs.push(assistant(901.0, vec![call("open")]));
        assert_eq!(select(&msgs, 3.0, &[], &[]), [100.0]);
    }

    #[test]
    fn interrupted_chain_never_counts() {
        let mut msgs = vec![user(50.0), assistant(51.0, vec![call("i")])];
        msgs.extend(session(4));
        assert_eq!(select(&msgs, 3.0, &[], &[]), [100.0]);
    }

    #[test]
    fn already_compressed_excluded_and_not_counted() {
        let msgs = session(5);
        assert_eq!(select(&msgs, 3.0, &[100.0], &[]), [200.0]);
        let chains = detect_chains(&msgs).unwrap_or_default();
        let out = select_eligible(&chains, &msgs, 3.0, |t| t == 100.0, &HashSet::new())
            .unwrap_or_default();
        assert_eq!(out.already_compressed, [0]);
        assert_eq!(out.candidates, 4);
    }

    #[test]
    fn empty_middle_chains_never_selected() {
        let msgs = [user(1.0), text(2.0), user(3.0), text(4.0)];
        assert!(select(&msgs, 0.0, &[], &[]).is_empty());
    }

    #[test]
    fn null_final_timestamp_reads_as_open() {
        let mut msgs = session(1);
        msgs[3].timestamp_null = true;
        assert!(select(&msgs, 0.0, &[], &[]).is_empty());
    }

    #[test]
    fn grace_defers_without_shrinking_the_window() {
        // Five chains, K = 2: [1, 2, 3] are past the window. A graced id in chain 4 changes
        // nothing; a graced id in chain 2 defers only chain 2.
        let msgs = session(5);
        assert_eq!(select(&msgs, 2.0, &[], &["c4@402"]), [100.0, 200.0, 300.0]);
        assert_eq!(select(&msgs, 2.0, &[], &["c2@202"]), [100.0, 300.0]);
    }

    #[test]
    fn grace_is_occurrence_keyed_with_a_bare_fallback() {
        let msgs = session(2);
        // A different occurrence of the same id does not defer.
        assert_eq!(select(&msgs, 0.0, &[], &["c1@999"]), [100.0, 200.0]);
        // A grace entry without a timestamp matches the bare id.
        assert_eq!(select(&msgs, 0.0, &[], &["c1"]), [200.0]);
    }

    #[test]
    fn grace_falls_back_to_ids_for_chains_without_keys() {
        let chain = ChainRange {
            middle_ids: vec![Sourced {
                value: JsId::str("x"),
                msg: 0,
                block: None,
            }],
            ..ChainRange::default()
        };
        let grace: HashSet<String> = ["x".to_owned()].into_iter().collect();
        assert_eq!(matches_grace(&chain, &grace), Ok(true));
        let odd = ChainRange {
            middle_ids: vec![Sourced {
                value: JsId::num(4.0),
                msg: 0,
                block: None,
            }],
            ..ChainRange::default()
        };
        assert_eq!(matches_grace(&odd, &grace), Err(Throw));
        let timed: HashSet<String> = ["y@1".to_owned()].into_iter().collect();
        assert_eq!(matches_grace(&odd, &timed), Ok(false));
    }
}
