//! # karpenter-disruption
//!
//! Pure disruption decisions of karpenter-rs: which nodes to remove or replace, and why the
//! others stay. Karpenter's methods run in its order each pass — Emptiness, Drift, multi-node
//! consolidation, single-node consolidation — with expiry and interruption handled
//! forcefully beside them; NodePool disruption budgets, PodDisruptionBudgets and
//! `karpenter.sh/do-not-disrupt` are honoured, and consolidation re-runs the scheduling
//! solver ([`karpenter_scheduling::solve`]) so no pod is left without a place.
//!
//! Entry points: [`compute_commands`] / [`compute_pass`] over a [`DisruptionInput`] at an
//! instant `now`, and [`validate`] to re-check a command against fresh state after the
//! validation delay. [`eviction_order`] gives the termination order of a node's pods.
//!
//! No I/O, no clock, no randomness: time is an input and every iteration that affects the
//! output runs in a defined order, so the same input always gives the same commands.
#![forbid(unsafe_code)]

pub mod budget;
pub mod candidate;
pub mod command;
mod consolidation;
pub mod eviction;
pub mod input;
mod pass;
mod simulate;
pub mod validate;

pub use command::{CandidateRef, Command, Decision, Hold, NodeExplanation, PassResult, Reason};
pub use eviction::eviction_order;
pub use input::{DisruptionInput, DisruptionOptions, InterruptionKind, NodeInfo, PoolDisruption};
pub use pass::{compute_commands, compute_pass};
pub use validate::{ValidationFailure, validate};
