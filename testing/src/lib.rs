//! # karpenter-testing
//!
//! Builders and proptest strategies for tests of karpenter-rs and of tools built on it: the
//! scheduling model (pods, nodes, NodePools, instance types, snapshots), disruption inputs and
//! Kubernetes API objects. Every builder is a plain function of its arguments (no clock, no
//! randomness, no I/O), documents what it guarantees about the object it returns, and panics
//! only on a fixture that cannot be built, which is a defect of the test rather than of the
//! code under test.
//!
//! ```
//! use karpenter_testing::*;
//! use karpenter_scheduling::labels::ZONE;
//!
//! // Three pods on the small catalogue, one pinned to a zone.
//! let mut pinned = pod("b", 500, 512 * MI);
//! pinned.node_selector.insert(ZONE.into(), ZONES[1].into());
//! let s = snapshot(vec![pod("a", 1500, GI), pinned], vec![pool("default")]);
//! let plan = solve_default(&s);
//! assert!(plan.unschedulable.is_empty());
//! assert_eq!(reason(&plan, "a"), None);
//! ```
//!
//! - [`resources`], [`requirements`]: amounts and node selector requirements.
//! - [`instance_types`]: [`InstanceTypeBuilder`] and the small catalogues ([`catalogue`],
//!   [`on_demand_catalogue`], [`spot_catalogue`]); [`benchmark`]: the synthetic types of
//!   Karpenter's scheduling benchmark.
//! - [`pods`], [`nodes`], [`pools`], [`snapshots`]: the solver's inputs; [`plans`]: solving
//!   and reading the plan.
//! - [`strategies`]: proptest strategies for pods, scheduling problems and instance types;
//!   [`oracle`]: the optimum of tiny problems by exhaustive search.
//! - [`fuzz`]: replaying the fuzz targets' committed corpora through their entry functions.
//! - `disruption` (feature `disruption`): a `DisruptionInput` built node by node and a node
//!   strategy.
//! - `api` (feature `api`): NodeClaims and Nodes as the API server returns them.
//!
//! The crate depends on `karpenter-scheduling`, so a crate's own `#[cfg(test)]` unit tests
//! cannot share model types with it; integration tests (`tests/`) and other crates can.
#![forbid(unsafe_code)]

#[cfg(feature = "api")]
pub mod api;
pub mod benchmark;
#[cfg(feature = "disruption")]
pub mod disruption;
pub mod fuzz;
pub mod instance_types;
pub mod nodes;
pub mod oracle;
pub mod plans;
pub mod pods;
pub mod pools;
pub mod requirements;
pub mod resources;
pub mod snapshots;
pub mod strategies;

pub use benchmark::benchmark_instance_types;
pub use instance_types::{
    GENERAL_PURPOSE, InstanceTypeBuilder, SPOT_FRACTION, ZONES, catalogue, on_demand_catalogue,
    on_demand_types, spot_catalogue,
};
pub use nodes::node;
pub use oracle::{brute_force, brute_force_apart, min_price};
pub use plans::{claims_of, pinned, reason, solve_default, solve_greedy};
pub use pods::{
    affinity_terms, bound, daemon, labeled, pod, selector, spread, taint, term, toleration,
};
pub use pools::pool;
pub use requirements::{nsr, reqs};
pub use resources::{GI, MI, res};
pub use snapshots::{snapshot, synthetic_snapshot};
