//! # karpenter-scheduling
//!
//! The pure core of karpenter-rs: the Kubernetes scheduling model (quantities, resources,
//! requirements, taints, selectors), a cluster [`Snapshot`], and
//! [`solve`], which decides which pending pods go on existing nodes and which NodeClaims to
//! launch for the rest, at the lowest price that satisfies every constraint.
//!
//! No I/O, no clock, no unseeded randomness: the same snapshot always gives the same plan.
//!
//! # Example
//!
//! A NodePool that may launch one instance type, four pending pods, and the plan: two new
//! NodeClaims.
//!
//! ```
//! use karpenter_scheduling::labels::{CAPACITY_TYPE, INSTANCE_TYPE, ZONE};
//! use karpenter_scheduling::{
//!     InstanceType, NodePool, Offering, Operator, Pod, Requirement, Requirements, Resources,
//!     Snapshot, SolveOptions, solve,
//! };
//! use std::sync::Arc;
//!
//! // An instance type: the labels its nodes carry (as requirements), capacity, offerings.
//! let mut labels = Requirements::new();
//! labels.add(Requirement::new(INSTANCE_TYPE, Operator::In, ["m5.large"])?);
//! labels.add(Requirement::new(ZONE, Operator::In, ["us-east-1a"])?);
//! labels.add(Requirement::new(CAPACITY_TYPE, Operator::In, ["on-demand"])?);
//! let m5_large = Arc::new(InstanceType {
//!     devices: Vec::new(),
//!     name: "m5.large".into(),
//!     requirements: labels,
//!     capacity: Resources::parse(&[("cpu", "2"), ("memory", "8Gi"), ("pods", "29")])?,
//!     overhead: Default::default(),
//!     offerings: vec![Offering {
//!         zone: "us-east-1a".into(),
//!         capacity_type: "on-demand".into(),
//!         price: 0.096,
//!         available: true,
//!         reservation: None,
//!     }],
//! });
//! let pool = NodePool {
//!     name: "default".into(),
//!     instance_types: vec![m5_large],
//!     ..NodePool::default()
//! };
//! let mut pending = Vec::new();
//! for i in 0..4 {
//!     pending.push(Pod {
//!         namespace: "default".into(),
//!         name: format!("web-{i}"),
//!         requests: Resources::parse(&[("cpu", "600m"), ("memory", "1Gi")])?,
//!         ..Pod::default()
//!     });
//! }
//! let snapshot = Snapshot {
//!     pending_pods: pending,
//!     node_pools: vec![pool],
//!     ..Snapshot::default()
//! };
//!
//! let plan = solve(&snapshot, &SolveOptions::default());
//! // 2.4 cores of pods on 2-core nodes: two NodeClaims, nothing left over.
//! assert!(plan.unschedulable.is_empty());
//! assert_eq!(plan.new_node_claims.len(), 2);
//! assert_eq!(plan.placed_pods(), 4);
//! assert_eq!(plan.new_node_claims[0].instance_type_options[0].name.as_ref(), "m5.large");
//! assert!((plan.total_price - 2.0 * 0.096).abs() < 1e-9);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! `examples/plan_pods.rs` (`cargo run -p karpenter-scheduling --example plan_pods`) is a
//! fuller program: several instance types, a NodePool with requirements and a cpu limit, a
//! DaemonSet, pods with a zone spread and hostname anti-affinity, and the whole plan printed —
//! each claim's options and price, why pods could not be placed, and the lower bound.
//! `karpenter-testing` has builders that make such inputs shorter in tests.
#![forbid(unsafe_code)]

pub mod devices;
#[doc(hidden)]
pub mod fuzzing;
pub mod hints;
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

pub use model::{InstanceType, Node, NodePool, Offering, Pod, PodKey, Reservation, Snapshot};
pub use plan::{BoundGap, GroupWork, NewNodeClaim, OptimizerStats, Plan};
pub use quantity::Quantity;
pub use requirements::{Operator, Requirement, Requirements};
pub use resources::Resources;
pub use solver::{
    OptimizerOptions, ReservedOfferingMode, SolveOptions, solve, solve_with_deadline,
};
