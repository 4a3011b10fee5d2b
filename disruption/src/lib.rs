//! # karpenter-disruption
//!
//! Pure disruption decisions of karpenter-rs: which nodes to remove or replace, and why the
//! others stay. Karpenter's methods run in its order each pass — Emptiness, Drift, multi-node
//! consolidation, single-node consolidation — with expiry and interruption handled
//! forcefully beside them; NodePool disruption budgets, PodDisruptionBudgets and
//! `karpenter.sh/do-not-disrupt` are honoured, and consolidation re-runs the scheduling
//! solver ([`karpenter_scheduling::solve`]) so no pod is left without a place. NodePools
//! with `consolidationPolicy: Balanced` take only the consolidation moves whose savings are
//! worth their disruption ([`balanced`]).
//!
//! Beyond Karpenter's methods, when they find nothing, *re-pack consolidation* replaces N
//! nodes with M new ones that the packing optimiser chooses for their pods (M may be more
//! than one, which Karpenter never launches), when the replacements — at the dearest
//! instance type each may launch as — cost at least
//! [`RepackOptions::price_improvement_threshold`] less than the nodes they replace. It takes
//! the nodes that waste the most first, within the same budgets, PodDisruptionBudgets,
//! `do-not-disrupt` and `consolidateAfter` rules, and waits until no pod of another command
//! still needs a place. [`DisruptionOptions::repack`] `None` turns it off.
//!
//! Entry points: [`compute_commands`] / [`compute_pass`] over a [`DisruptionInput`] at an
//! instant `now`, and [`validate()`] to re-check a command against fresh state after the
//! validation delay. [`eviction_order`] gives the termination order of a node's pods.
//!
//! No I/O, no clock, no randomness: time is an input and every iteration that affects the
//! output runs in a defined order, so the same input always gives the same commands.
//!
//! # Example
//!
//! Two nodes with nothing but DaemonSet pods: the one Karpenter manages (it has a
//! [`NodeInfo`]) is deleted, the other is explained.
//!
//! ```
//! use karpenter_disruption::{
//!     Decision, DisruptionInput, Hold, NodeInfo, PoolDisruption, Reason, compute_pass,
//! };
//! use karpenter_scheduling::{Node, NodePool};
//!
//! let now = 1_736_164_800_000; // milliseconds since the epoch: time is an input
//! let mut input = DisruptionInput::default();
//! // The pool as the solver sees it, and its disruption settings (default budget 10 %,
//! // consolidateAfter 0).
//! input.cluster.node_pools.push(NodePool {
//!     name: "default".into(),
//!     ..NodePool::default()
//! });
//! input
//!     .node_pools
//!     .insert("default".into(), PoolDisruption::default());
//! for name in ["ip-10-0-1-7", "ip-10-0-9-9"] {
//!     input.cluster.nodes.push(Node {
//!         name: name.into(),
//!         node_pool: Some("default".into()),
//!         price: 0.096,
//!         ..Node::default()
//!     });
//! }
//! // What the first node's NodeClaim says; the second has none: not Karpenter's.
//! input.nodes.insert(
//!     "ip-10-0-1-7".into(),
//!     NodeInfo {
//!         node_claim: "default-x7k2p".into(),
//!         initialized: true,
//!         initialized_at: Some(now - 3_600_000),
//!         ready: true,
//!         created_at: now - 3_700_000,
//!         ..NodeInfo::default()
//!     },
//! );
//!
//! let result = compute_pass(&input, now);
//! assert_eq!(result.commands.len(), 1);
//! let cmd = &result.commands[0];
//! assert_eq!((cmd.reason, cmd.decision), (Reason::EMPTY, Decision::Delete));
//! assert_eq!(cmd.candidates[0].node_claim, "default-x7k2p");
//! assert_eq!(result.explanations[0].node, "ip-10-0-9-9");
//! assert_eq!(result.explanations[0].holds, [Hold::NotManaged]);
//! ```
//!
//! `examples/disruption_pass.rs` (`cargo run -p karpenter-disruption --example
//! disruption_pass`) is a fuller program: nodes on the EC2 catalogue with their pods, a
//! NodePool whose requirements one node no longer meets and whose budget allows one
//! disruption at a time, a PodDisruptionBudget, and three passes with validation and
//! eviction order in between. `karpenter-testing` (feature `disruption`) builds such inputs
//! in a few lines for tests.
#![forbid(unsafe_code)]

pub mod balanced;
pub mod budget;
pub mod candidate;
pub mod command;
mod consolidation;
pub mod eviction;
pub mod hold_events;
pub mod input;
mod pass;
pub mod reason;
mod repack;
mod repair;
mod simulate;
pub mod static_pool;
pub mod validate;

pub use balanced::{ConsolidationMethod, PoolScore, PoolTotals, ScoreResult, ScoredMove};
pub use command::{
    CandidateRef, Command, Decision, Hold, MethodEvaluation, NodeExplanation, PassResult,
    PoolBudget, RepairRef,
};
pub use eviction::eviction_order;
pub use input::{
    DisruptionInput, DisruptionOptions, InterruptionKind, NodeInfo, PoolDisruption, RepackOptions,
    RepairNeed,
};
pub use pass::{compute_commands, compute_pass, compute_pass_cached, compute_pass_timed};
pub use reason::{Reason, UnknownReason};
pub use validate::{ValidationFailure, validate};
