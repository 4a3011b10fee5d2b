//! # karpenter-scheduling
//!
//! The pure core of karpenter-rs: the Kubernetes scheduling model (quantities, resources,
//! requirements, taints, selectors), a cluster [`Snapshot`](model::Snapshot), and
//! [`solve`], which decides which pending pods go on existing nodes and which NodeClaims to
//! launch for the rest, at the lowest price that satisfies every constraint.
//!
//! No I/O, no clock, no unseeded randomness: the same snapshot always gives the same plan.
#![forbid(unsafe_code)]

#[cfg(feature = "k8s")]
pub mod k8s;
pub mod labels;
pub mod model;
pub mod pdb;
pub mod plan;
pub mod quantity;
pub mod requests;
pub mod requirements;
pub mod resources;
pub mod selector;
pub mod solver;
pub mod taints;

pub use model::{InstanceType, Node, NodePool, Offering, Pod, PodKey, Snapshot};
pub use plan::{BoundGap, NewNodeClaim, OptimizerStats, Plan};
pub use quantity::Quantity;
pub use requirements::{Operator, Requirement, Requirements};
pub use resources::Resources;
pub use solver::{OptimizerOptions, SolveOptions, solve, solve_with_deadline};
