//! What a disruption pass looks at: the cluster [`Snapshot`] the solver re-packs, each
//! NodePool's disruption settings, per-node NodeClaim facts, PodDisruptionBudgets and options.
//!
//! Everything is plain data taken at one instant; conversions from the `karpenter.sh/v1` API
//! types are provided where they are cheap ([`PoolDisruption::from_node_pool`],
//! [`NodeInfo::from_node_claim`]).

use karpenter_cloudprovider::hash::NODEPOOL_HASH_VERSION;
use karpenter_cloudprovider::v1::{
    Budget, ConditionType, ConsolidationPolicy, NodeClaim, NodePool, StatusConditions,
    labels as v1labels,
};
use karpenter_scheduling::model::{Millis, PodKey, Snapshot};
use karpenter_scheduling::pdb::PodDisruptionBudget;
use karpenter_scheduling::solver::SolveOptions;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

/// `karpenter.sh/do-not-repair` (Karpenter v1.15): `"true"` on a Node or NodeClaim keeps
/// node repair away from it, independently of `karpenter.sh/do-not-disrupt`.
pub const DO_NOT_REPAIR: &str = "karpenter.sh/do-not-repair";

/// Upstream's `commandValidationDelay`: how long a consolidation command waits before it is
/// re-checked against fresh state.
pub const DEFAULT_VALIDATION_DELAY_MS: Millis = 15_000;

/// Upstream's `MinInstanceTypesForSpotToSpotConsolidation`.
pub const MIN_SPOT_TO_SPOT_OPTIONS: usize = 15;

/// Upstream's multi-node consolidation batch cap.
pub const DEFAULT_MAX_MULTI_NODE_BATCH: usize = 100;

/// Default number of scheduling simulations one pass may run (the deterministic stand-in for
/// upstream's 1- and 3-minute consolidation timeouts).
pub const DEFAULT_MAX_SIMULATIONS: usize = 64;

/// Default [`RepackOptions::price_improvement_threshold`]: a re-pack must cut the price of the
/// nodes it replaces by at least a tenth (see `docs/operator.md`, "Re-pack consolidation").
pub const DEFAULT_PRICE_IMPROVEMENT_THRESHOLD: f64 = 0.1;

/// Default [`RepackOptions::max_nodes`]: as many as upstream's multi-node batch.
pub const DEFAULT_REPACK_MAX_NODES: usize = 100;

/// Default [`RepackOptions::max_simulations`].
pub const DEFAULT_REPACK_SIMULATIONS: usize = 12;

/// Default [`RepackOptions::min_node_age`]: ten minutes. A node launched minutes ago, often
/// a replacement whose pods the scheduler has just spread differently from the plan, is left
/// to settle before re-packing may evict its pods again (see `docs/operator.md`, "Re-pack
/// consolidation").
pub const DEFAULT_REPACK_MIN_NODE_AGE_MS: Millis = 600_000;

/// The largest [`RepackOptions::min_node_age`] accepted: one day.
pub const MAX_REPACK_MIN_NODE_AGE_MS: Millis = 86_400_000;

/// Default [`RepackOptions::min_score`]: off. Scored as `Balanced` scores, a re-pack of
/// nodes as full as the pool's average scores about its saving's share of their price, so
/// any bar above the threshold mostly turns re-packing off (see `docs/operator.md`,
/// "Re-pack consolidation", for what each value gave over a simulated day).
pub const DEFAULT_REPACK_MIN_SCORE: f64 = 0.0;

/// The largest [`RepackOptions::min_score`] accepted.
pub const MAX_REPACK_MIN_SCORE: f64 = 100.0;

/// One NodePool's disruption settings, reduced to what decisions need.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PoolDisruption {
    /// `spec.disruption.consolidationPolicy`.
    pub consolidation_policy: ConsolidationPolicy,
    /// `spec.disruption.consolidateAfter` in milliseconds; `None` is `Never` (consolidation
    /// and emptiness disabled).
    pub consolidate_after: Option<Millis>,
    /// `spec.disruption.budgets`, as written (invalid entries fail closed: they allow 0).
    pub budgets: Vec<Budget>,
    /// The pool's current template hash (`karpenter.sh/nodepool-hash`), for static drift.
    pub template_hash: Option<String>,
    /// The hash algorithm version (`karpenter.sh/nodepool-hash-version`).
    pub hash_version: Option<String>,
    /// `spec.replicas` is set: static pools are never consolidated; their drifted nodes are
    /// replaced one for one (see [`crate::static_pool`]).
    pub is_static: bool,
    /// A static pool's replicas, node limit and NodeClaim counts; `None` for a dynamic pool
    /// (and for a static one whose caller gives none: its drifted nodes then stay).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub static_capacity: Option<crate::static_pool::StaticPool>,
}

impl Default for PoolDisruption {
    fn default() -> Self {
        Self {
            consolidation_policy: ConsolidationPolicy::WhenEmptyOrUnderutilized,
            consolidate_after: Some(0),
            budgets: karpenter_cloudprovider::v1::default_budgets(),
            template_hash: None,
            hash_version: None,
            is_static: false,
            static_capacity: None,
        }
    }
}

impl PoolDisruption {
    /// The disruption settings of `pool`, with its template hash computed as the hash
    /// controller would write it (so a pool whose annotation is stale still compares right).
    pub fn from_node_pool(pool: &NodePool) -> Self {
        let d = &pool.spec.disruption;
        Self {
            consolidation_policy: d.consolidation_policy,
            consolidate_after: d.consolidate_after.duration().map(|x| x.millis()),
            budgets: d.budgets.clone(),
            template_hash: Some(pool.hash()),
            hash_version: Some(NODEPOOL_HASH_VERSION.to_owned()),
            is_static: pool.is_static(),
            static_capacity: crate::static_pool::StaticPool::of(pool),
        }
    }
}

/// An interruption notice for a node's instance: the kind the interruption parser gives
/// (upstream's interruption controller); one that
/// [`triggers_replacement`](InterruptionKind::triggers_replacement) makes the node an
/// `Interrupted` candidate.
pub use karpenter_aws_interruption::InterruptionKind;

/// Facts about one Karpenter-managed node (its NodeClaim) that the snapshot does not carry.
/// A node of the snapshot without a `NodeInfo` is not managed by Karpenter and is never a
/// candidate.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeInfo {
    /// The NodeClaim's name.
    pub node_claim: String,
    /// The NodeClaim's `Initialized` condition is true.
    pub initialized: bool,
    /// When it became initialized (the fallback start of `consolidateAfter`).
    pub initialized_at: Option<Millis>,
    /// The Node's `Ready` condition is true (a not-ready node counts against budgets).
    pub ready: bool,
    /// The NodeClaim or Node has a deletion timestamp.
    pub deleting: bool,
    /// The provisioner recently nominated the node for a pending pod.
    pub nominated: bool,
    /// The NodeClaim's creation time.
    pub created_at: Millis,
    /// `status.lastPodEventTime`.
    pub last_pod_event_at: Option<Millis>,
    /// Drift the cloud provider reports (`CloudProvider::is_drifted`), as its reason.
    pub provider_drift: Option<String>,
    /// The NodeClaim's `karpenter.sh/nodepool-hash` annotation.
    pub template_hash: Option<String>,
    /// The NodeClaim's `karpenter.sh/nodepool-hash-version` annotation.
    pub hash_version: Option<String>,
    /// `spec.expireAfter` in milliseconds; `None` is `Never`.
    pub expire_after: Option<Millis>,
    /// `spec.terminationGracePeriod` in milliseconds: when set, drift may proceed despite
    /// blocking PDBs and `do-not-disrupt` pods (upstream's eventual disruption class).
    pub termination_grace_period: Option<Millis>,
    /// An interruption notice for the instance.
    pub interruption: Option<InterruptionKind>,
    /// The `InstanceTerminating` condition is true: the node no longer counts in the pool's
    /// node total for budgets.
    pub instance_terminating: bool,
    /// Node repair as a disruption method (Karpenter v1.15, `NodeRepair` without the legacy
    /// controller): the repair the node's conditions call for at the pass's `now`, once a
    /// provider policy's toleration has passed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repair: Option<RepairNeed>,
    /// One of the node's conditions is covered by the provider's repair policies, whatever
    /// its toleration: the node counts as unhealthy for repair's circuit breaker.
    #[serde(default)]
    pub unhealthy: bool,
    /// `karpenter.sh/do-not-repair: "true"` on the Node or its NodeClaim: repair leaves it.
    #[serde(default)]
    pub do_not_repair: bool,
    /// CapacityBuffer virtual pods the provisioner's last plan placed on the node (upstream's
    /// `BufferPodCount`): its spare capacity is a buffer's, so it is not empty.
    #[serde(default)]
    pub buffer_pods: usize,
}

/// Why and how a node is to be repaired (upstream's resolved `RepairResult`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RepairNeed {
    /// The unhealthy condition type behind the decision (`Ready`, `KernelReady` …).
    pub condition: String,
    /// Its reason.
    #[serde(default)]
    pub reason: String,
    /// Repair order, higher first: the dense rank of the policy's priority plus the time
    /// since it became eligible in units of 30 minutes (upstream's aging).
    pub score: f64,
    /// The shortest drain bound among the eligible policies; `None` keeps the NodeClaim's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub termination_grace_period: Option<Millis>,
}

impl NodeInfo {
    /// What is left of the node's `consolidateAfter` window under `pool`'s settings at
    /// `now`: the window starts at the NodeClaim's last pod event, or at its initialization
    /// when it has had none (its creation when it has neither). `None` when `consolidateAfter`
    /// is `Never`; `Some(0)` once the window has passed, and always for `0s`.
    ///
    /// The one definition of the window: it holds back a node from being consolidated
    /// ([`crate::Hold::ConsolidateAfter`]) and, since Karpenter v1.14, from receiving the pods
    /// a consolidation moves ([`NodeInfo::under_consolidate_after`]).
    pub fn consolidate_after_remaining(
        &self,
        pool: &PoolDisruption,
        now: Millis,
    ) -> Option<Millis> {
        let after = pool.consolidate_after?;
        if after == 0 {
            return Some(0);
        }
        let since = self
            .last_pod_event_at
            .or(self.initialized_at)
            .unwrap_or(self.created_at);
        let elapsed = now - since;
        Some(if elapsed < after { after - elapsed } else { 0 })
    }

    /// Whether, at `now`, the node is still inside its pool's `consolidateAfter` window as
    /// Karpenter v1.14 counts it for consolidation destinations: the NodeClaim is initialized
    /// and [`NodeInfo::consolidate_after_remaining`] is above zero. `Never` and `0s` never
    /// protect a node.
    pub fn under_consolidate_after(&self, pool: &PoolDisruption, now: Millis) -> bool {
        self.initialized
            && self
                .consolidate_after_remaining(pool, now)
                .is_some_and(|left| left > 0)
    }

    /// The facts a NodeClaim carries. `provider_drift`, `nominated`, `ready` and
    /// `interruption` come from elsewhere (the provider, cluster state, the Node, the
    /// interruption queue); they are taken from the claim's conditions where it records them
    /// (`Drifted` for drift; a claim that is `Ready` counts as a ready node).
    pub fn from_node_claim(claim: &NodeClaim) -> Self {
        let initialized = claim.is(ConditionType::Initialized);
        let initialized_at = claim
            .get_condition(ConditionType::Initialized)
            .filter(|_| initialized)
            .map(|c| c.last_transition_time.0.as_millisecond());
        let provider_drift = claim
            .get_condition(ConditionType::Drifted)
            .filter(|_| claim.is(ConditionType::Drifted))
            .map(|c| {
                if c.reason.is_empty() {
                    "Drifted".to_owned()
                } else {
                    c.reason.clone()
                }
            });
        Self {
            node_claim: claim.name().to_owned(),
            initialized,
            initialized_at,
            ready: claim.is_true(karpenter_cloudprovider::v1::CONDITION_READY),
            deleting: claim.is_deleting(),
            nominated: false,
            created_at: claim
                .metadata
                .creation_timestamp
                .as_ref()
                .map_or(0, |t| t.0.as_millisecond()),
            last_pod_event_at: claim
                .status
                .as_ref()
                .and_then(|s| s.last_pod_event_time.as_ref())
                .map(|t| t.0.as_millisecond()),
            provider_drift,
            template_hash: claim
                .annotation(v1labels::NODEPOOL_HASH_ANNOTATION)
                .map(str::to_owned),
            hash_version: claim
                .annotation(v1labels::NODEPOOL_HASH_VERSION_ANNOTATION)
                .map(str::to_owned),
            expire_after: claim.spec.expire_after.duration().map(|d| d.millis()),
            termination_grace_period: claim
                .spec
                .termination_grace_period
                .as_ref()
                .map(|d| d.millis()),
            interruption: None,
            instance_terminating: claim.is(ConditionType::InstanceTerminating),
            repair: None,
            unhealthy: false,
            do_not_repair: claim.annotation(DO_NOT_REPAIR).is_some_and(|v| v == "true"),
            buffer_pods: 0,
        }
    }
}

/// Re-pack consolidation, karpenter-rs's own method beyond Karpenter's: replace several
/// nodes with fewer or cheaper ones that the packing optimiser chooses, when that cuts their
/// price by at least the threshold. It runs when Karpenter's methods find nothing, in a
/// cluster where no other command's pods still need a place (see the crate documentation).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct RepackOptions {
    /// The least share of the replaced nodes' hourly price a re-pack must save, in
    /// `[0, 1)`: the replacements, at the dearest instance type each may launch as, cost at
    /// most `(1 - threshold)` times the nodes they replace. Checked by
    /// [`RepackOptions::valid_threshold`].
    pub price_improvement_threshold: f64,
    /// The most nodes one re-pack replaces (its budget and PDBs may allow fewer).
    pub max_nodes: usize,
    /// Scheduling simulations one pass may spend on re-packing, beside
    /// [`DisruptionOptions::max_simulations`].
    pub max_simulations: usize,
    /// How long after its NodeClaim's creation a node is left out of re-packing, in
    /// milliseconds (Karpenter's own methods still consider it). Checked by
    /// [`RepackOptions::valid_min_node_age`]; `0` re-packs nodes of any age.
    pub min_node_age: Millis,
    /// The least score a re-pack must reach in every NodePool it touches, scored as the
    /// `Balanced` policy scores a move but whatever the pool's policy: the share of the
    /// pool's hourly price it saves over the share of the pool's disruption cost (1 per node
    /// plus its pods' eviction costs) it causes. Checked by
    /// [`RepackOptions::valid_min_score`]; `0` takes every re-pack that saves the threshold.
    pub min_score: f64,
}

impl Default for RepackOptions {
    fn default() -> Self {
        Self {
            price_improvement_threshold: DEFAULT_PRICE_IMPROVEMENT_THRESHOLD,
            max_nodes: DEFAULT_REPACK_MAX_NODES,
            max_simulations: DEFAULT_REPACK_SIMULATIONS,
            min_node_age: DEFAULT_REPACK_MIN_NODE_AGE_MS,
            min_score: DEFAULT_REPACK_MIN_SCORE,
        }
    }
}

impl RepackOptions {
    /// What [`RepackOptions::valid_threshold`] accepts, for error messages.
    pub const THRESHOLD_RANGE: &'static str = "a fraction in [0, 1)";

    /// Whether `threshold` is a usable price-improvement threshold: a number in `[0, 1)`
    /// (1 or more would ask a re-pack to save more than the nodes cost).
    pub fn valid_threshold(threshold: f64) -> bool {
        (0.0..1.0).contains(&threshold)
    }

    /// What [`RepackOptions::valid_min_node_age`] accepts, for error messages.
    pub const MIN_NODE_AGE_RANGE: &'static str = "a duration from 0s to 24h";

    /// Whether `ms` is a usable [`RepackOptions::min_node_age`]: from zero to a day.
    pub fn valid_min_node_age(ms: Millis) -> bool {
        (0..=MAX_REPACK_MIN_NODE_AGE_MS).contains(&ms)
    }

    /// What [`RepackOptions::valid_min_score`] accepts, for error messages.
    pub const MIN_SCORE_RANGE: &'static str = "a number from 0 to 100";

    /// Whether `score` is a usable [`RepackOptions::min_score`]: from 0 to
    /// [`MAX_REPACK_MIN_SCORE`].
    pub fn valid_min_score(score: f64) -> bool {
        (0.0..=MAX_REPACK_MIN_SCORE).contains(&score)
    }

    /// Whether a node whose NodeClaim was created at `created_at` is old enough at `now` to
    /// be re-packed.
    pub fn old_enough(&self, created_at: Millis, now: Millis) -> bool {
        now.saturating_sub(created_at) >= self.min_node_age
    }
}

/// Options of a pass.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DisruptionOptions {
    /// The `SpotToSpotConsolidation` feature gate.
    pub spot_to_spot_consolidation: bool,
    /// Delay between proposing a consolidation and validating it (upstream: 15 s).
    pub validation_delay_ms: Millis,
    /// How many scheduling simulations (solver runs) one pass may spend; the deterministic
    /// replacement for upstream's wall-clock timeouts. Once spent, further candidates are
    /// explained as not evaluated.
    pub max_simulations: usize,
    /// Largest multi-node consolidation batch (upstream: 100).
    pub max_multi_node_batch: usize,
    /// After upstream's binary search over prefixes of the candidate list, also try to fold
    /// each later candidate into the move, keeping it when savings grow. `false` gives
    /// exactly Karpenter's multi-node search (used by `--compare` and the benchmark).
    pub extend_multi_node: bool,
    /// Re-pack consolidation, tried when Karpenter's methods find nothing; `None` turns it
    /// off (Karpenter's methods only, as `--compare` runs the Karpenter-equivalent).
    #[serde(default = "default_repack")]
    pub repack: Option<RepackOptions>,
    /// Options handed to the solver.
    pub solve: SolveOptions,
    /// Node repair runs as the pass's first method (Karpenter v1.15: the `NodeRepair` gate
    /// without `--legacy-node-repair`); the nodes to repair are those with
    /// [`NodeInfo::repair`].
    #[serde(default)]
    pub node_repair: bool,
}

fn default_repack() -> Option<RepackOptions> {
    Some(RepackOptions::default())
}

impl Default for DisruptionOptions {
    fn default() -> Self {
        Self {
            spot_to_spot_consolidation: false,
            validation_delay_ms: DEFAULT_VALIDATION_DELAY_MS,
            max_simulations: DEFAULT_MAX_SIMULATIONS,
            max_multi_node_batch: DEFAULT_MAX_MULTI_NODE_BATCH,
            extend_multi_node: true,
            repack: default_repack(),
            solve: SolveOptions::default(),
            node_repair: false,
        }
    }
}

/// Everything one disruption pass decides from.
///
/// `cluster` is the solver's snapshot: nodes with their bound pods (DaemonSet pods
/// included), pending pods, and NodePools with their instance types. `node_pools` and
/// `nodes` add what the solver does not need; both are keyed by name (NodePool name, Node
/// name as in `cluster.nodes`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DisruptionInput {
    /// The cluster as the solver sees it.
    pub cluster: Snapshot,
    /// Disruption settings per NodePool name. A node whose pool is missing here is not a
    /// candidate.
    pub node_pools: BTreeMap<String, PoolDisruption>,
    /// NodeClaim facts per node name; absent means not managed by Karpenter.
    pub nodes: BTreeMap<String, NodeInfo>,
    /// PodDisruptionBudgets.
    pub pdbs: Vec<PodDisruptionBudget>,
    /// Pods whose `Ready` condition is false (for `unhealthyPodEvictionPolicy: AlwaysAllow`).
    pub unhealthy_pods: BTreeSet<PodKey>,
    /// Nodes an earlier command is already disrupting (the orchestration queue).
    pub disrupting: BTreeSet<String>,
    /// Options.
    pub options: DisruptionOptions,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The kind's serialized names stay readable: the parser's spellings, and the ones this
    /// crate's own kind had before it became the parser's.
    #[test]
    fn interruption_kinds_read_old_and_new_spellings() {
        let read = |s: &str| serde_json::from_value::<InterruptionKind>(serde_json::json!(s));
        for (old, new) in [
            ("ScheduledMaintenance", InterruptionKind::ScheduledChange),
            ("InstanceStopping", InterruptionKind::InstanceStopped),
            ("InstanceTerminating", InterruptionKind::InstanceTerminated),
            ("SpotInterruption", InterruptionKind::SpotInterruption),
            (
                "RebalanceRecommendation",
                InterruptionKind::RebalanceRecommendation,
            ),
        ] {
            assert_eq!(read(old).unwrap(), new, "{old}");
            assert_eq!(
                read(serde_json::to_value(new).unwrap().as_str().unwrap()).unwrap(),
                new
            );
        }
        assert!(read("Spot").is_err());
    }

    #[test]
    fn pool_settings_from_the_api_object() {
        let pool: NodePool = serde_json::from_value(serde_json::json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodePool",
            "metadata": {"name": "p"},
            "spec": {
                "template": {"spec": {"requirements": [], "nodeClassRef":
                    {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}}},
                "disruption": {"consolidateAfter": "30s", "consolidationPolicy": "WhenEmpty",
                    "budgets": [{"nodes": "5"}]}
            }
        }))
        .unwrap();
        let s = PoolDisruption::from_node_pool(&pool);
        assert_eq!(s.consolidate_after, Some(30_000));
        assert_eq!(s.consolidation_policy, ConsolidationPolicy::WhenEmpty);
        assert_eq!(s.budgets[0].nodes, "5");
        assert_eq!(s.template_hash, Some(pool.hash()));
        assert_eq!(s.hash_version.as_deref(), Some(NODEPOOL_HASH_VERSION));
        assert!(!s.is_static);

        let mut never = pool.clone();
        never.spec.disruption.consolidate_after =
            karpenter_cloudprovider::NillableDuration::never();
        assert_eq!(
            PoolDisruption::from_node_pool(&never).consolidate_after,
            None
        );
    }

    #[test]
    fn the_consolidate_after_window_for_candidates_and_destinations() {
        let info = NodeInfo {
            initialized: true,
            initialized_at: Some(1_000),
            created_at: 0,
            ..NodeInfo::default()
        };
        let pool = |after| PoolDisruption {
            consolidate_after: after,
            ..PoolDisruption::default()
        };
        // From initialization when no pod event yet, then from the last pod event.
        assert_eq!(
            info.consolidate_after_remaining(&pool(Some(60_000)), 31_000),
            Some(30_000)
        );
        assert!(info.under_consolidate_after(&pool(Some(60_000)), 31_000));
        let busy = NodeInfo {
            last_pod_event_at: Some(50_000),
            ..info.clone()
        };
        assert_eq!(
            busy.consolidate_after_remaining(&pool(Some(60_000)), 70_000),
            Some(40_000)
        );
        assert!(!info.under_consolidate_after(&pool(Some(60_000)), 61_000));
        // `Never` and `0s` never protect; nor does a node not yet initialized.
        assert_eq!(info.consolidate_after_remaining(&pool(None), 2_000), None);
        assert!(!info.under_consolidate_after(&pool(None), 2_000));
        assert_eq!(
            info.consolidate_after_remaining(&pool(Some(0)), 1_000),
            Some(0)
        );
        assert!(!info.under_consolidate_after(&pool(Some(0)), 1_000));
        let new = NodeInfo {
            initialized: false,
            initialized_at: None,
            ..info
        };
        assert!(!new.under_consolidate_after(&pool(Some(60_000)), 1_000));
    }

    #[test]
    fn node_info_from_the_api_object() {
        let claim: NodeClaim = serde_json::from_value(serde_json::json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
            "metadata": {"name": "c", "creationTimestamp": "2024-01-01T00:00:00Z",
                "annotations": {"karpenter.sh/nodepool-hash": "123",
                    "karpenter.sh/nodepool-hash-version": "v3"}},
            "spec": {"requirements": [], "expireAfter": "1h", "terminationGracePeriod": "10m",
                "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}},
            "status": {"conditions": [
                {"type": "Initialized", "status": "True", "lastTransitionTime": "2024-01-01T00:05:00Z", "reason": "", "message": ""},
                {"type": "Drifted", "status": "True", "lastTransitionTime": "2024-01-01T01:00:00Z", "reason": "AMIDrift", "message": ""}
            ], "lastPodEventTime": "2024-01-01T00:10:00Z"}
        }))
        .unwrap();
        let info = NodeInfo::from_node_claim(&claim);
        let t0 = 1_704_067_200_000;
        assert_eq!(info.node_claim, "c");
        assert!(info.initialized);
        assert_eq!(info.initialized_at, Some(t0 + 300_000));
        assert_eq!(info.created_at, t0);
        assert_eq!(info.last_pod_event_at, Some(t0 + 600_000));
        assert_eq!(info.provider_drift.as_deref(), Some("AMIDrift"));
        assert_eq!(info.template_hash.as_deref(), Some("123"));
        assert_eq!(info.hash_version.as_deref(), Some("v3"));
        assert_eq!(info.expire_after, Some(3_600_000));
        assert_eq!(info.termination_grace_period, Some(600_000));
        assert!(!info.deleting);
    }
}
