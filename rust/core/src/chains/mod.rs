//! Chain compression decisions (spec 05 sections 9, 11, 12).
//!
//! A *chain* is the span `user message -> (assistant with tool calls, toolResults)* ->
//! text-only assistant`. Old closed chains are collapsed into one synthetic message at render
//! time (render phase 3); this module decides which chains get a `context-prune-chain` entry
//! and builds the zero-LLM body of chains no per-batch summary covers.
//!
//! | step | module | spec |
//! |---|---|---|
//! | detection (`detectChains`) | `detect` | 05 section 11.1 |
//! | the scan of a growing list, shared with its next scan | `log` | - |
//! | eligibility (`selectEligible`: window, registry, grace) | `eligible` | 05 section 11.2 |
//! | extraction for the deterministic backfill (`extractChainRecords`) | `extract` | 05 section 11.4 |
//! | deterministic body (`buildDeterministicBody`) | `body`, `collate`, `iso` | 05 section 12 |
//!
//! The binding reads each message into a [`ChainMsg`] (only the fields detection and
//! extraction look at); results point back at message / block positions so the binding can
//! return the caller's own id objects. Orchestration (fusion LLM call, backfill persistence,
//! entry writing) is the Python layer's job.

pub(crate) mod body;
pub(crate) mod collate;
pub(crate) mod detect;
pub(crate) mod eligible;
pub(crate) mod extract;
pub(crate) mod iso;
pub mod log;
pub mod view;

pub use body::{BodyError, BodyRecord, deterministic_body};
pub use collate::locale_compare;
pub use detect::{ChainRange, Sourced, detect_chains, detect_chains_resumed};
pub use eligible::{Eligibility, select_eligible};
pub use extract::{Extracted, extract_chain_records};
pub use log::{ChainLog, Read};
pub use view::{AssistantContent, CallView, ChainMsg, MsgBody};
