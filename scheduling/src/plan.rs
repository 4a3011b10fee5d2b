//! The solver's output: what to place where, what to launch, and why anything is left over.

use crate::model::PodKey;
use crate::requirements::Requirements;
use crate::resources::Resources;
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// Pods placed on one existing node or in-flight NodeClaim.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodePlacement {
    /// The node (or NodeClaim) name.
    pub node: String,
    /// The pods, in placement order.
    pub pods: Vec<PodKey>,
}

/// One instance type a new NodeClaim may launch as.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
///
/// The strings are shared with every other option of the same plan that names the same
/// instance type, zone or capacity type.
pub struct InstanceTypeOption {
    /// Instance type name.
    pub name: Arc<str>,
    /// Price per hour of its cheapest available offering compatible with the claim.
    pub price: f64,
    /// Zone of that offering.
    pub zone: Arc<str>,
    /// Capacity type of that offering.
    pub capacity_type: Arc<str>,
}

/// A NodeClaim to create.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NewNodeClaim {
    /// The NodePool it comes from.
    pub node_pool: String,
    /// Requirements: the pool's, narrowed by its pods (and topology decisions such as zone).
    pub requirements: Requirements,
    /// Instance types that fit every pod plus DaemonSet overhead, cheapest first (ties by
    /// name). Shared: claims with the same pool and requirements get the same list, and a
    /// plan on a large catalogue has hundreds of claims with about a thousand options each.
    /// Narrow a claim's own copy with [`Arc::make_mut`].
    pub instance_type_options: Arc<Vec<InstanceTypeOption>>,
    /// The pods meant for it.
    pub pods: Vec<PodKey>,
    /// Requests of its pods plus the DaemonSet pods that would run on it.
    pub requests: Resources,
    /// The DaemonSet part of `requests`.
    pub daemon_overhead: Resources,
    /// Price per hour of the cheapest option.
    pub price: f64,
}

/// A pod the plan cannot place.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UnschedulablePod {
    /// The pod.
    pub pod: PodKey,
    /// Why, in terms a person can act on (which NodePool rejected it and why).
    pub reason: String,
    /// Only reserved capacity already promised to other claims of this plan stood in its
    /// way: the decision is deferred to a later round (upstream's `ReservedOfferingError`),
    /// by when the provider reports the reservation used up and the pod falls back. Upstream
    /// neither counts such a pod as unschedulable nor publishes a FailedScheduling event.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub deferred: bool,
}

/// The result of [`crate::solve`].
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Plan {
    /// Placements on existing nodes and in-flight claims, by node name.
    pub existing: Vec<NodePlacement>,
    /// NodeClaims to create.
    pub new_node_claims: Vec<NewNodeClaim>,
    /// Pods that cannot be placed.
    pub unschedulable: Vec<UnschedulablePod>,
    /// Sum of the new claims' prices per hour.
    pub total_price: f64,
    /// A lower bound on the price of any plan that places the same pods on new capacity, when
    /// the optimiser computed one. It models resources, DaemonSet overhead, node selectors,
    /// volume zones and tolerations, not per-node constraints: see [`Plan::bound_gap`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lower_bound: Option<f64>,
    /// Price per hour of the greedy (Karpenter-equivalent) plan for the same pods, when the
    /// optimiser ran; `total_price` is never above it. When a NodePool limit kept pods out
    /// of Karpenter's pass only because each claim counted its largest option, and the
    /// plan places them, this is the greedy pass that placed them (counting each claim at
    /// what it is priced at, or ignoring the limit for the optimiser to meet it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub greedy_price: Option<f64>,
    /// What the optimiser did, when it ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub optimizer: Option<OptimizerStats>,
    /// The pending (not started) pods of the snapshot, counted by effective zone before any
    /// was placed: the one zone their zone requirement, volumes and zone topology leave
    /// them, `flexible` or `none` (upstream's
    /// `karpenter_scheduler_pending_pods_by_effective_zone_count`). Not part of the plan's
    /// JSON: it describes the input, for metrics.
    #[serde(skip)]
    pub pending_by_effective_zone: std::collections::BTreeMap<String, usize>,
}

/// What the packing optimiser did to a plan.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OptimizerStats {
    /// Groups of interchangeable new-claim pods (same NodePool, same claim requirements, no
    /// per-node topology, no host ports) it considered.
    pub groups: usize,
    /// Groups it re-packed more cheaply than the greedy pass.
    pub groups_improved: usize,
    /// Groups whose packing an exact search proved optimal.
    pub groups_proven_optimal: usize,
    /// Pods now on claims the optimiser chose.
    pub pods_repacked: usize,
    /// Pods on new claims that it left where the greedy put them (not interchangeable),
    /// counting owners of hostname-keyed constraints it may re-pack jointly
    /// (`OptimizerOptions::repack_owners`), whose constraints the bound leaves out too.
    pub pods_fixed: usize,
    /// Of `pods_fixed`, those whose only per-node constraint is a required hostname
    /// anti-affinity among themselves (one pod per node), which [`Plan::lower_bound`]
    /// models: every plan has a node for each.
    #[serde(default)]
    pub pods_fixed_apart: usize,
    /// Deterministic work units spent.
    pub work: u64,
    /// Whether the work budget (or the caller's deadline) ran out before it finished.
    pub budget_exhausted: bool,
    /// What each group was allowed and spent, in the order they were re-packed; not part
    /// of the plan's JSON.
    #[serde(skip)]
    pub group_work: Vec<GroupWork>,
}

/// The work one group of [`OptimizerStats`] was allowed and spent.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GroupWork {
    /// Pods the group may move.
    pub pods: usize,
    /// Work units it was given: its pods' share of what is left, and never more than their
    /// share of the whole, so work one group leaves over does not go to the next.
    pub allowed: u64,
    /// Work units it spent.
    pub spent: u64,
}

/// How the plan's price compares with its lower bound.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum BoundGap {
    /// `(price − bound) / bound`: the bound models every constraint of the pods on new
    /// capacity that decides how they may be packed (resources, where each pod may run,
    /// and a node each for pods kept apart by hostname anti-affinity among themselves).
    Relative(f64),
    /// The bound treats `pods` pods as free to share any node, although per-node
    /// constraints it does not model (hostname spread, anti-affinity that also keeps other
    /// pods away, host ports, topology on a label the claim does not pin) decide where
    /// they go; a gap would overstate what any plan could save, so none is given.
    Loose {
        /// Pods placed under constraints the bound leaves out.
        pods: usize,
    },
}

impl Plan {
    /// The gap to [`Plan::lower_bound`], or `None` when there is no bound.
    ///
    /// # Examples
    ///
    /// Interchangeable pods get a relative gap, and so do pods that must each have a node of
    /// their own (required hostname anti-affinity among themselves): the bound counts a
    /// node for each. A hostname spread, which the bound leaves out, makes it loose.
    ///
    /// ```
    /// use karpenter_scheduling::labels::HOSTNAME;
    /// use karpenter_scheduling::model::WhenUnsatisfiable;
    /// use karpenter_scheduling::plan::BoundGap;
    /// use karpenter_scheduling::{SolveOptions, solve};
    /// use karpenter_testing::{GI, labeled, pod, pool, snapshot, spread, term};
    ///
    /// let pods = (0..6).map(|i| pod(&format!("web-{i}"), 700, GI)).collect();
    /// let plan = solve(&snapshot(pods, vec![pool("default")]), &SolveOptions::default());
    /// let bound = plan.lower_bound.unwrap();
    /// let Some(BoundGap::Relative(gap)) = plan.bound_gap() else {
    ///     panic!("expected a relative gap")
    /// };
    /// assert!(bound <= plan.total_price + 1e-9);
    /// assert!((gap - (plan.total_price - bound) / bound).abs() < 1e-9);
    ///
    /// let apart = |i: usize| {
    ///     let mut p = labeled(pod(&format!("db-{i}"), 700, GI), &[("app", "db")]);
    ///     p.affinity.pod_anti_affinity.required = vec![term(HOSTNAME, &[("app", "db")])];
    ///     p
    /// };
    /// let plan = solve(
    ///     &snapshot((0..3).map(apart).collect(), vec![pool("default")]),
    ///     &SolveOptions::default(),
    /// );
    /// // Three nodes of the cheapest type a pod fits on: the bound proves it optimal.
    /// assert_eq!(plan.new_node_claims.len(), 3);
    /// let Some(BoundGap::Relative(gap)) = plan.bound_gap() else {
    ///     panic!("expected a relative gap")
    /// };
    /// assert!(gap < 1e-6, "{gap}");
    ///
    /// let spread_out = |i: usize| {
    ///     let mut p = labeled(pod(&format!("api-{i}"), 700, GI), &[("app", "api")]);
    ///     p.topology_spread_constraints = vec![spread(
    ///         HOSTNAME,
    ///         1,
    ///         &[("app", "api")],
    ///         WhenUnsatisfiable::DoNotSchedule,
    ///     )];
    ///     p
    /// };
    /// let plan = solve(
    ///     &snapshot((0..3).map(spread_out).collect(), vec![pool("default")]),
    ///     &SolveOptions::default(),
    /// );
    /// assert_eq!(plan.bound_gap(), Some(BoundGap::Loose { pods: 3 }));
    /// ```
    pub fn bound_gap(&self) -> Option<BoundGap> {
        let bound = self.lower_bound?;
        let pinned = self
            .optimizer
            .as_ref()
            .map_or(0, |o| o.pods_fixed.saturating_sub(o.pods_fixed_apart));
        Some(if pinned > 0 {
            BoundGap::Loose { pods: pinned }
        } else if bound > 0.0 {
            BoundGap::Relative((self.total_price - bound) / bound)
        } else {
            BoundGap::Relative(0.0)
        })
    }

    /// Number of pods the plan places (on existing or new capacity).
    pub fn placed_pods(&self) -> usize {
        self.existing.iter().map(|p| p.pods.len()).sum::<usize>()
            + self
                .new_node_claims
                .iter()
                .map(|c| c.pods.len())
                .sum::<usize>()
    }
}
