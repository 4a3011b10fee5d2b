//! Karpenter's Prometheus metrics: every family the karpenter-rs controller exports, under
//! Karpenter's metric names, types, label names and buckets, so existing dashboards and alerts
//! keep working. The cloud-provider families come from the
//! [`Metered`](cloudprovider::Metered) decorator and are registered in the same registry.
//!
//! The crate holds the definitions and the recording of what the index and the shared
//! reconciler report ([`pods::PodMetrics`], [`Metrics::observe`]); when to observe is the
//! operator's business. An embedder can register [`Metrics`] and serve [`Metrics::encode`].

#![forbid(unsafe_code)]

pub mod aws;
pub mod cloudprovider;
pub mod conditions;
pub mod dashboards;
mod dry_run;
pub mod index;
pub mod kube_client;
pub mod limits;
mod nodepool;
pub mod pods;
pub mod process;
mod reconciler;
pub mod runtime;
mod scheduling;
pub mod solve_progress;
pub mod summary;
pub mod sync;
pub mod termination;
pub mod workqueue;

use cloudprovider::CloudProviderMetrics;
use karpenter_scheduling::model::PodKey;
use karpenter_scheduling::resources::Resources;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;
use std::collections::BTreeMap;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex, PoisonError};

/// A gauge holding an `f64`.
pub type FloatGauge = Gauge<f64, AtomicU64>;

type HistogramFamily<L> = Family<L, Histogram, fn() -> Histogram>;

/// Karpenter's `DurationBuckets` (controller-runtime's thresholds extended to 10 minutes).
const DURATION_BUCKETS: [f64; 45] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7, 0.8, 0.9,
    1.0, 1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 15.0, 20.0,
    25.0, 30.0, 40.0, 50.0, 60.0, 120.0, 150.0, 300.0, 450.0, 600.0,
];

fn duration_histogram() -> Histogram {
    Histogram::new(DURATION_BUCKETS)
}

fn nodeclaim_termination_histogram() -> Histogram {
    // 1 s … 2048 s, doubling.
    Histogram::new(exponential_buckets(1.0, 2.0, 12))
}

fn node_lifetime_histogram() -> Histogram {
    // 15 minutes to 30 days, as upstream.
    const MIN: f64 = 60.0;
    const HOUR: f64 = 3_600.0;
    const DAY: f64 = 86_400.0;
    Histogram::new([
        15.0 * MIN,
        30.0 * MIN,
        45.0 * MIN,
        HOUR,
        2.0 * HOUR,
        4.0 * HOUR,
        6.0 * HOUR,
        8.0 * HOUR,
        10.0 * HOUR,
        12.0 * HOUR,
        16.0 * HOUR,
        20.0 * HOUR,
        DAY,
        2.0 * DAY,
        3.0 * DAY,
        5.0 * DAY,
        10.0 * DAY,
        15.0 * DAY,
        20.0 * DAY,
        25.0 * DAY,
        30.0 * DAY,
    ])
}

fn consolidation_score_histogram() -> Histogram {
    // Upstream's buckets for balanced consolidation scores (the threshold at k = 2 is 0.5).
    Histogram::new([0.1, 0.25, 0.33, 0.5, 1.0, 2.0, 5.0, 10.0])
}

/// `{decision, nodepool, policy}` of the balanced consolidation metrics.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct ConsolidationLabels {
    /// `approved` or `rejected`.
    pub decision: String,
    /// NodePool name.
    pub nodepool: String,
    /// The pool's consolidation policy.
    pub policy: String,
}

/// `{nodepool}`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct NodePoolLabels {
    /// NodePool name.
    pub nodepool: String,
}

/// `{reason, nodepool, min_values_relaxed}` of `karpenter_nodeclaims_created_total`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct CreatedLabels {
    /// `provisioning` or the disruption reason that asked for a replacement.
    pub reason: String,
    /// NodePool name.
    pub nodepool: String,
    /// `true` when minValues was relaxed.
    pub min_values_relaxed: String,
}

/// `{nodepool, capacity_type, zone}`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct TerminatedLabels {
    /// NodePool name.
    pub nodepool: String,
    /// `spot`, `on-demand`, `reserved`.
    pub capacity_type: String,
    /// The claim's zone.
    pub zone: String,
}

/// `{nodepool, zone}` of the node counters.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct NodePoolZoneLabels {
    /// NodePool name.
    pub nodepool: String,
    /// The node's zone.
    pub zone: String,
}

/// `{name}` of client-go's leader-election gauge: the Lease's name.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct LeaseLabels {
    /// The leader-election Lease.
    pub name: String,
}

/// `{version, goversion, goarch, commit}` of `karpenter_build_info`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct BuildLabels {
    /// The release version.
    pub version: String,
    /// Upstream's Go version; here the Rust toolchain (`rust`), as no Go is involved.
    pub goversion: String,
    /// The architecture in Go's names (`amd64`, `arm64`).
    pub goarch: String,
    /// The commit, when the build set `KARPENTER_COMMIT`.
    pub commit: String,
}

/// Label sets built at run time: the node families carry one label per well-known node
/// label, as upstream's do.
pub type DynamicLabels = Vec<(String, String)>;

/// `{reason, nodepool, capacity_type, consolidation_policy, termination_mode}` of
/// `karpenter_nodeclaims_disrupted_total` and `karpenter_pods_disruption_initiated_total`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct DisruptedLabels {
    /// `empty`, `underutilized`, `drifted`, `unhealthy`, `expired`, `garbage_collected` …
    pub reason: String,
    /// NodePool name.
    pub nodepool: String,
    /// Capacity type.
    pub capacity_type: String,
    /// The pool's consolidation policy in snake case (`when_empty_or_underutilized`,
    /// `when_empty`, `balanced`) for a consolidation (`empty`, `underutilized`); empty
    /// otherwise, as upstream reports it.
    pub consolidation_policy: String,
    /// How the NodeClaim terminates ([`termination_mode`]).
    pub termination_mode: String,
}

/// Upstream's `termination_mode` of a NodeClaim: `graceful` without a
/// `terminationGracePeriod` (PodDisruptionBudgets and `do-not-disrupt` are honoured),
/// `forceful` with a zero one, `eventual` with a positive one.
pub fn termination_mode(claim: &karpenter_cloudprovider::NodeClaim) -> &'static str {
    match &claim.spec.termination_grace_period {
        None => "graceful",
        Some(d) if d.millis() <= 0 => "forceful",
        Some(_) => "eventual",
    }
}

impl DisruptedLabels {
    /// The labels for disrupting `claim` for `reason`: its NodePool and capacity-type labels
    /// (empty when absent), its termination mode, and no consolidation policy.
    pub fn for_claim(
        reason: impl Into<String>,
        claim: &karpenter_cloudprovider::NodeClaim,
    ) -> Self {
        Self {
            reason: reason.into(),
            nodepool: claim.node_pool().unwrap_or_default().to_owned(),
            capacity_type: claim
                .label(karpenter_cloudprovider::v1::labels::CAPACITY_TYPE)
                .unwrap_or_default()
                .to_owned(),
            consolidation_policy: String::new(),
            termination_mode: termination_mode(claim).to_owned(),
        }
    }

    /// The same labels for a consolidation of a pool whose policy is `policy`.
    pub fn consolidating(
        mut self,
        policy: karpenter_cloudprovider::v1::ConsolidationPolicy,
    ) -> Self {
        self.consolidation_policy = termination::snake_case(policy.as_str());
        self
    }
}

/// `{namespace, name, node, nodepool, phase}` of `karpenter_pods_state`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct PodStateLabels {
    /// Pod name.
    pub name: String,
    /// Pod namespace.
    pub namespace: String,
    /// The first owner as a self link (`/apis/apps/v1/namespaces/ns/replicasets/web-1`),
    /// empty without an owner.
    pub owner: String,
    /// Node name, empty while pending.
    pub node: String,
    /// `true` once bound to a node.
    pub scheduled: String,
    /// NodePool of the node, empty if unmanaged.
    pub nodepool: String,
    /// The node's zone.
    pub zone: String,
    /// The node's architecture.
    pub arch: String,
    /// The node's capacity type.
    pub capacity_type: String,
    /// The node's instance type.
    pub instance_type: String,
    /// The pod's `status.phase`.
    pub phase: String,
    /// `true` while the pod's Ready condition is true.
    pub ready: String,
    /// `true` when the node belongs to a NodePool.
    pub managed: String,
}

/// `{nodepool, reason}` of the NodePool budget gauges.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct BudgetLabels {
    /// NodePool name.
    pub nodepool: String,
    /// The budget reason as the API spells it (`Empty`, `Drifted`, `Underutilized`).
    pub reason: String,
}

/// `{condition, nodepool, capacity_type, image_id, termination_mode}` of
/// `karpenter_nodeclaims_unhealthy_disrupted_total`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct UnhealthyLabels {
    /// The unhealthy node condition, snake case (`ready`, `memory_pressure`).
    pub condition: String,
    /// NodePool name.
    pub nodepool: String,
    /// Capacity type.
    pub capacity_type: String,
    /// The NodeClaim's image.
    pub image_id: String,
    /// How the repaired NodeClaim terminates ([`termination_mode`]).
    pub termination_mode: String,
}

/// `{name, namespace}` of the per-pod waiting gauges.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct PodLabels {
    /// Pod name.
    pub name: String,
    /// Pod namespace.
    pub namespace: String,
}

impl PodLabels {
    /// The labels of the pod `key`.
    pub fn of(key: &karpenter_scheduling::model::PodKey) -> Self {
        Self {
            name: key.name.clone(),
            namespace: key.namespace.clone(),
        }
    }
}

/// `{dynamic_resources}` of the pod binding histograms (Karpenter v1.15).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct DraLabels {
    /// `true` when the pod has dynamic resource allocation requirements (resource claims of
    /// the pod or of a container), `false` otherwise.
    pub dynamic_resources: String,
}

/// `{name, namespace, dynamic_resources}` of the unbound-time gauges (Karpenter v1.15).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct PodDraLabels {
    /// Pod name.
    pub name: String,
    /// Pod namespace.
    pub namespace: String,
    /// As [`DraLabels::dynamic_resources`].
    pub dynamic_resources: String,
}

impl PodDraLabels {
    /// The labels of the pod `key`, with or without DRA requirements.
    pub fn of(key: &karpenter_scheduling::model::PodKey, dra: bool) -> Self {
        Self {
            name: key.name.clone(),
            namespace: key.namespace.clone(),
            dynamic_resources: dra.to_string(),
        }
    }
}

/// `{controller}`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct ControllerLabels {
    /// `provisioner` or `disruption`.
    pub controller: String,
}

/// `{controller, zone}` of `karpenter_scheduler_pending_pods_by_effective_zone_count`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct ControllerZoneLabels {
    /// `provisioner`.
    pub controller: String,
    /// A zone, `flexible` or `none`.
    pub zone: String,
}

/// `{decision, reason, consolidation_type}`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct DecisionLabels {
    /// `delete` or `replace`.
    pub decision: String,
    /// Disruption reason.
    pub reason: String,
    /// `empty`, `single`, `multi` or empty.
    pub consolidation_type: String,
}

/// `{action, reason, nodepool}` of `karpenter_dry_run_decisions_total`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct DryRunLabels {
    /// `create` (a NodeClaim for pending pods), `delete` or `replace` (a disruption).
    pub action: String,
    /// `provisioning`, or the disruption reason (`empty`, `underutilized`, `drifted` …).
    pub reason: String,
    /// NodePool name (of the new claim, or of the first disrupted node).
    pub nodepool: String,
}

/// `{reason, consolidation_type}` of
/// `karpenter_voluntary_disruption_decision_evaluation_duration_seconds`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct EvaluationLabels {
    /// The method's disruption reason, lower case (`empty`, `drifted`, `underutilized`).
    pub reason: String,
    /// `empty`, `multi`, `single`, or empty for drift.
    pub consolidation_type: String,
}

/// `{consolidation_type}`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct ConsolidationTypeLabels {
    /// `empty`, `single` or `multi`.
    pub consolidation_type: String,
}

/// `{reason}`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct ReasonLabels {
    /// Disruption reason.
    pub reason: String,
}

/// `{nodepool, resource_type}`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct ResourceLabels {
    /// NodePool name.
    pub nodepool: String,
    /// `cpu`, `memory`, `pods`, `nodes` …
    pub resource_type: String,
}

/// `{nodepool, decision, reason, consolidation_type}`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct NodePoolDecisionLabels {
    /// NodePool of a candidate.
    pub nodepool: String,
    /// `delete` or `replace`.
    pub decision: String,
    /// Disruption reason, lower case.
    pub reason: String,
    /// Consolidation type (empty: not reported by this build).
    pub consolidation_type: String,
}

/// `{instance_type}` of the instance-type gauges.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct InstanceTypeLabels {
    /// The instance type's name.
    pub instance_type: String,
}

/// `{instance_type, capacity_type, zone}` of the offering gauges.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct OfferingLabels {
    /// The instance type's name.
    pub instance_type: String,
    /// `spot`, `on-demand`, `reserved`.
    pub capacity_type: String,
    /// The offering's zone.
    pub zone: String,
}

/// `{resource_type}`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct ResourceTypeLabels {
    /// `cpu`, `memory` …
    pub resource_type: String,
}

/// `{code}` of `karpenter_pods_eviction_requests_total`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct CodeLabels {
    /// HTTP status code of the eviction request.
    pub code: String,
}

/// `{message_type}` of `karpenter_interruption_received_messages_total`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct MessageTypeLabels {
    /// `spot_interrupted`, `rebalance_recommendation`, `scheduled_change`,
    /// `instance_stopped`, `instance_terminated`.
    pub message_type: String,
}

fn build_labels() -> BuildLabels {
    let goarch = match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        other => other,
    };
    BuildLabels {
        version: env!("CARGO_PKG_VERSION").into(),
        goversion: "rust".into(),
        goarch: goarch.into(),
        commit: option_env!("KARPENTER_COMMIT").unwrap_or_default().into(),
    }
}

/// Every family the controller records, registered once in [`Metrics::registry`].
#[derive(Clone)]
pub struct Metrics {
    /// The registry `/metrics` encodes.
    pub registry: Arc<Mutex<Registry>>,
    /// Cloud-provider families, for [`Metered`](cloudprovider::Metered).
    pub cloudprovider: CloudProviderMetrics,
    /// The `aws` provider's families ([`aws`]).
    pub aws: aws::AwsProviderMetrics,
    /// `karpenter_nodeclaims_created_total`.
    pub nodeclaims_created: Family<CreatedLabels, Counter>,
    /// `karpenter_nodeclaims_terminated_total`.
    pub nodeclaims_terminated: Family<TerminatedLabels, Counter>,
    /// `karpenter_nodeclaims_disrupted_total`.
    pub nodeclaims_disrupted: Family<DisruptedLabels, Counter>,
    /// `karpenter_pods_disruption_initiated_total`: the reschedulable pods of the NodeClaims
    /// counted in `nodeclaims_disrupted` (not DaemonSet or mirror pods), with the same labels.
    pub pods_disruption_initiated: Family<DisruptedLabels, Counter>,
    /// `karpenter_nodeclaims_unhealthy_disrupted_total`: NodeClaims deleted by node repair.
    pub nodeclaims_unhealthy_disrupted: Family<UnhealthyLabels, Counter>,
    /// `karpenter_nodes_drained_total`: NodeClaims whose `Drained` condition became true.
    pub nodes_drained: Family<NodePoolLabels, Counter>,
    /// `karpenter_nodes_termination_duration_seconds` (summary, label `nodepool`): a managed
    /// Node's deletion timestamp to its removal.
    pub nodes_termination_duration: summary::Summary,
    /// `karpenter_pods_drained_total`: pods evicted, by the node's disruption reason.
    pub pods_drained: Family<ReasonLabels, Counter>,
    /// `karpenter_nodes_created_total`.
    pub nodes_created: Family<NodePoolZoneLabels, Counter>,
    /// `karpenter_nodes_terminated_total`.
    pub nodes_terminated: Family<NodePoolZoneLabels, Counter>,
    /// `karpenter_nodes_lifetime_duration_seconds`: creation to deletion of a node.
    pub nodes_lifetime_duration: HistogramFamily<NodePoolLabels>,
    /// `karpenter_nodes_allocatable`, by node and resource type.
    pub nodes_allocatable: Family<DynamicLabels, FloatGauge>,
    /// `karpenter_nodes_total_pod_requests` (DaemonSet pods included).
    pub nodes_total_pod_requests: Family<DynamicLabels, FloatGauge>,
    /// `karpenter_nodes_total_daemon_requests`.
    pub nodes_total_daemon_requests: Family<DynamicLabels, FloatGauge>,
    /// `karpenter_nodes_total_pod_limits` (DaemonSet pods included).
    pub nodes_total_pod_limits: Family<DynamicLabels, FloatGauge>,
    /// `karpenter_nodes_total_daemon_limits`.
    pub nodes_total_daemon_limits: Family<DynamicLabels, FloatGauge>,
    /// Each pod's limits, kept by [`pods::PodMetrics`] from the pod objects for the limit
    /// gauges [`index::IndexMetrics`] sets.
    pod_limits: Arc<Mutex<BTreeMap<PodKey, Resources>>>,
    /// `karpenter_nodes_system_overhead`: capacity minus allocatable.
    pub nodes_system_overhead: Family<DynamicLabels, FloatGauge>,
    /// `karpenter_nodes_current_lifetime_seconds`.
    pub nodes_current_lifetime: Family<DynamicLabels, FloatGauge>,
    /// `karpenter_cloudprovider_instance_type_cpu_cores`.
    pub instance_type_cpu_cores: Family<InstanceTypeLabels, FloatGauge>,
    /// `karpenter_cloudprovider_instance_type_memory_bytes`.
    pub instance_type_memory_bytes: Family<InstanceTypeLabels, FloatGauge>,
    /// `karpenter_cloudprovider_instance_type_offering_available` (1 or 0).
    pub offering_available: Family<OfferingLabels, FloatGauge>,
    /// `karpenter_cloudprovider_instance_type_offering_price_estimate`, $/h.
    pub offering_price_estimate: Family<OfferingLabels, FloatGauge>,
    /// `karpenter_scheduler_unschedulable_pods_count`: pods the latest plan could not place.
    pub scheduler_unschedulable_pods: Family<ControllerLabels, Gauge>,
    /// `karpenter_scheduler_pending_pods_by_effective_zone_count`: the latest provisioning
    /// simulation's pending pods by effective zone.
    pub scheduler_pending_by_zone: Family<ControllerZoneLabels, Gauge>,
    /// `karpenter_scheduler_ignored_pods_count`: pods the provisioner ignores.
    pub scheduler_ignored_pods: Gauge,
    /// `karpenter_build_info` (1).
    pub build_info: Family<BuildLabels, Gauge>,
    /// `karpenter_nodeclaims_termination_duration_seconds`.
    pub nodeclaims_termination_duration: HistogramFamily<NodePoolLabels>,
    /// `karpenter_nodeclaims_instance_termination_duration_seconds`: termination begun
    /// (`InstanceTerminating`) to the provider reporting the instance gone.
    pub nodeclaims_instance_termination_duration: HistogramFamily<NodePoolLabels>,
    /// `karpenter_pods_state` (1 for every pod the controller sees).
    pub pods_state: Family<PodStateLabels, Gauge>,
    /// `karpenter_pods_startup_duration_seconds` (summary, no labels): creation to Running.
    pub pods_startup_duration: summary::Summary,
    /// `karpenter_pods_bound_duration_seconds`: creation to bound.
    pub pods_bound_duration: Family<DraLabels, Histogram, fn() -> Histogram>,
    /// `karpenter_pods_scheduling_decision_duration_seconds`: a pod's ack to the first plan
    /// deciding about it.
    pub pods_scheduling_decision_duration: Histogram,
    /// `karpenter_pods_provisioning_bound_duration_seconds`: first placed to bound.
    pub pods_provisioning_bound_duration: Family<DraLabels, Histogram, fn() -> Histogram>,
    /// `karpenter_pods_provisioning_startup_duration_seconds`: first placed to Ready.
    pub pods_provisioning_startup_duration: Histogram,
    /// `karpenter_pods_provisioning_unbound_time_seconds`: time since first placed, while
    /// unbound.
    pub pods_provisioning_unbound_time: Family<PodDraLabels, FloatGauge>,
    /// `karpenter_pods_provisioning_unstarted_time_seconds`: time since first placed, while
    /// not started.
    pub pods_provisioning_unstarted_time: Family<PodLabels, FloatGauge>,
    /// `karpenter_pods_provisioning_scheduling_undecided_time_seconds`: time since the ack,
    /// until a plan decides.
    pub pods_scheduling_undecided_time: Family<PodLabels, FloatGauge>,
    /// Acks and decisions per pod ([`scheduling`]).
    pod_scheduling: Arc<Mutex<scheduling::PodScheduling>>,
    /// `karpenter_pods_unbound_time_seconds`: age of each pending pod not scheduled yet.
    pub pods_unbound_time: Family<PodDraLabels, FloatGauge>,
    /// `karpenter_pods_unstarted_time_seconds`: age of each pod seen pending and not ready
    /// yet.
    pub pods_unstarted_time: Family<PodLabels, FloatGauge>,
    /// `karpenter_scheduler_scheduling_duration_seconds`.
    pub scheduling_duration: HistogramFamily<ControllerLabels>,
    /// `karpenter_scheduler_queue_depth`: the pods queued in the latest provisioning
    /// simulation, set by [`Metrics::solve_tracker`].
    pub scheduler_queue_depth: Family<solve_progress::SchedulingLabels, Gauge>,
    /// The provisioning simulation in progress ([`solve_progress`]).
    solves: solve_progress::SolveTracker,
    /// `karpenter_voluntary_disruption_decisions_total`.
    pub disruption_decisions: Family<DecisionLabels, Counter>,
    /// `karpenter_voluntary_disruption_decisions_by_nodepool_total`: a decision counted once
    /// per NodePool among its candidates.
    pub disruption_decisions_by_nodepool: Family<NodePoolDecisionLabels, Counter>,
    /// `karpenter_voluntary_disruption_failed_validations_total`: candidates of consolidation
    /// commands that failed validation.
    pub disruption_failed_validations: Family<ConsolidationTypeLabels, Counter>,
    /// `karpenter_voluntary_disruption_consolidation_timeouts_total`: consolidation methods
    /// stopped by the pass's simulation budget.
    pub disruption_consolidation_timeouts: Family<ConsolidationTypeLabels, Counter>,
    /// `karpenter_voluntary_disruption_queue_failures_total`: queued commands abandoned.
    pub disruption_queue_failures: Family<DecisionLabels, Counter>,
    /// `karpenter_voluntary_disruption_eligible_nodes`.
    pub disruption_eligible_nodes: Family<ReasonLabels, Gauge>,
    /// `karpenter_voluntary_disruption_decision_evaluation_duration_seconds`: each disruption
    /// method's run, by its reason and consolidation type.
    pub disruption_evaluation_duration: HistogramFamily<EvaluationLabels>,
    /// `karpenter_consolidation_moves_total`.
    pub consolidation_moves: Family<ConsolidationLabels, Counter>,
    /// `karpenter_consolidation_score`.
    pub consolidation_score: HistogramFamily<ConsolidationLabels>,
    /// `client_go_request_total` ([`kube_client`]).
    client_requests: Family<kube_client::RequestLabels, Counter>,
    /// `client_go_request_duration_seconds` ([`kube_client`]).
    client_request_duration: HistogramFamily<kube_client::LatencyLabels>,
    /// `karpenter_nodepools_usage`.
    pub nodepools_usage: Family<ResourceLabels, FloatGauge>,
    /// `karpenter_nodepools_limit`.
    pub nodepools_limit: Family<ResourceLabels, FloatGauge>,
    /// `karpenter_nodepools_cost_total`: the hourly price of each NodePool's NodeClaims.
    pub nodepools_cost: Family<NodePoolLabels, FloatGauge>,
    /// `karpenter_nodepools_cost_tracker_errors_total`.
    pub nodepools_cost_tracker_errors: Family<NodePoolLabels, Counter>,
    /// `karpenter_nodepools_allowed_disruptions`, set by every disruption pass.
    pub nodepools_allowed_disruptions: Family<BudgetLabels, Gauge>,
    /// `karpenter_nodepools_nodes_consuming_budgets`, set by every disruption pass.
    pub nodepools_nodes_consuming_budgets: Family<BudgetLabels, Gauge>,
    /// `karpenter_cluster_utilization_percent`.
    pub cluster_utilization: Family<ResourceTypeLabels, FloatGauge>,
    /// `karpenter_cluster_state_node_count`.
    pub cluster_state_node_count: Gauge,
    /// `karpenter_cluster_state_synced` (1 once every watch has listed); set through
    /// [`Metrics::set_synced`].
    pub cluster_state_synced: Gauge,
    /// `karpenter_cluster_state_unsynced_time_seconds`.
    cluster_state_unsynced_time: sync::UnsyncedTime,
    /// `karpenter_pods_eviction_requests_total`.
    pub eviction_requests: Family<CodeLabels, Counter>,
    /// `leader_election_master_status` (1 on the replica that holds the Lease).
    pub leader: Family<LeaseLabels, Gauge>,
    /// `karpenter_interruption_received_messages_total` (aws).
    pub interruption_received: Family<MessageTypeLabels, Counter>,
    /// `karpenter_interruption_deleted_messages_total` (aws).
    pub interruption_deleted: Counter,
    /// `karpenter_interruption_message_queue_duration_seconds` (aws): event time to handling.
    pub interruption_queue_duration: Histogram,
    /// `karpenter_dry_run_decisions_total` (karpenter-rs, `--dry-run`): decisions that would
    /// have been carried out, each counted once however many passes repeat it.
    pub dry_run_decisions: Family<DryRunLabels, Counter>,
    /// `karpenter_dry_run_provisioning_price_dollars_per_hour` (`--dry-run`): the price of the
    /// NodeClaims the latest plan would create for the pods pending now.
    pub dry_run_provisioning_price: Family<NodePoolLabels, FloatGauge>,
    /// `karpenter_dry_run_disruption_savings_dollars_per_hour` (`--dry-run`): what the
    /// latest disruption pass's commands would save.
    pub dry_run_disruption_savings: Family<ReasonLabels, FloatGauge>,
    /// operatorpkg's status-condition and termination families ([`conditions`]).
    status: conditions::StatusFamilies,
    /// controller-runtime's controller and work-queue families ([`runtime`]).
    pub runtime: runtime::RuntimeMetrics,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// A fresh registry with every family registered once.
    pub fn new() -> Self {
        let mut r = Registry::default();
        let cloudprovider = CloudProviderMetrics::register(&mut r);
        let aws = aws::AwsProviderMetrics::register(&mut r);
        let status = conditions::StatusFamilies::register(&mut r);
        let runtime = runtime::RuntimeMetrics::register(&mut r);
        let scheduler_queue_depth = Family::default();
        let m = Self {
            solves: solve_progress::SolveTracker::new(Family::clone(&scheduler_queue_depth)),
            scheduler_queue_depth,
            status,
            runtime,
            registry: Arc::new(Mutex::new(Registry::default())),
            cloudprovider,
            aws,
            nodeclaims_created: Family::default(),
            nodeclaims_terminated: Family::default(),
            nodeclaims_disrupted: Family::default(),
            pods_disruption_initiated: Family::default(),
            nodeclaims_unhealthy_disrupted: Family::default(),
            nodes_drained: Family::default(),
            nodes_termination_duration: summary::Summary::new(
                "karpenter_nodes_termination_duration_seconds",
                "The time taken between a node's deletion request and the removal of its finalizer",
                &["nodepool"],
            ),
            pods_drained: Family::default(),
            nodes_created: Family::default(),
            nodes_terminated: Family::default(),
            nodes_lifetime_duration: Family::new_with_constructor(node_lifetime_histogram),
            nodes_allocatable: Family::default(),
            nodes_total_pod_requests: Family::default(),
            nodes_total_daemon_requests: Family::default(),
            nodes_total_pod_limits: Family::default(),
            nodes_total_daemon_limits: Family::default(),
            pod_limits: Arc::default(),
            nodes_system_overhead: Family::default(),
            nodes_current_lifetime: Family::default(),
            instance_type_cpu_cores: Family::default(),
            instance_type_memory_bytes: Family::default(),
            offering_available: Family::default(),
            offering_price_estimate: Family::default(),
            scheduler_unschedulable_pods: Family::default(),
            scheduler_pending_by_zone: Family::default(),
            scheduler_ignored_pods: Gauge::default(),
            build_info: Family::default(),
            nodeclaims_termination_duration: Family::new_with_constructor(
                nodeclaim_termination_histogram,
            ),
            nodeclaims_instance_termination_duration: Family::new_with_constructor(|| {
                // 1 s … 1024 s, doubling, as upstream.
                Histogram::new(exponential_buckets(1.0, 2.0, 11))
            }),
            pods_state: Family::default(),
            pods_startup_duration: summary::Summary::new(
                "karpenter_pods_startup_duration_seconds",
                "The time from pod creation until the pod is running.",
                &[],
            ),
            pods_bound_duration: Family::new_with_constructor(duration_histogram),
            pods_scheduling_decision_duration: duration_histogram(),
            pods_provisioning_bound_duration: Family::new_with_constructor(duration_histogram),
            pods_provisioning_startup_duration: duration_histogram(),
            pods_provisioning_unbound_time: Family::default(),
            pods_provisioning_unstarted_time: Family::default(),
            pods_scheduling_undecided_time: Family::default(),
            pod_scheduling: Arc::default(),
            pods_unbound_time: Family::default(),
            pods_unstarted_time: Family::default(),
            scheduling_duration: Family::new_with_constructor(duration_histogram),
            disruption_decisions: Family::default(),
            disruption_decisions_by_nodepool: Family::default(),
            disruption_eligible_nodes: Family::default(),
            disruption_failed_validations: Family::default(),
            disruption_queue_failures: Family::default(),
            disruption_consolidation_timeouts: Family::default(),
            disruption_evaluation_duration: Family::new_with_constructor(duration_histogram),
            consolidation_moves: Family::default(),
            consolidation_score: Family::new_with_constructor(consolidation_score_histogram),
            client_requests: Family::default(),
            client_request_duration: Family::new_with_constructor(|| {
                // 1 ms … about 2.2 s, by half again: operatorpkg's buckets.
                Histogram::new(exponential_buckets(0.001, 1.5, 20))
            }),
            nodepools_usage: Family::default(),
            nodepools_limit: Family::default(),
            nodepools_cost: Family::default(),
            nodepools_cost_tracker_errors: Family::default(),
            nodepools_allowed_disruptions: Family::default(),
            nodepools_nodes_consuming_budgets: Family::default(),
            cluster_utilization: Family::default(),
            cluster_state_node_count: Gauge::default(),
            cluster_state_synced: Gauge::default(),
            cluster_state_unsynced_time: sync::UnsyncedTime::starting_now(),
            eviction_requests: Family::default(),
            leader: Family::default(),
            interruption_received: Family::default(),
            interruption_deleted: Counter::default(),
            interruption_queue_duration: duration_histogram(),
            dry_run_decisions: Family::default(),
            dry_run_provisioning_price: Family::default(),
            dry_run_disruption_savings: Family::default(),
        };
        // prometheus-client appends `_total` to counters when encoding, so counters are
        // registered without it.
        r.register(
            "karpenter_nodeclaims_created",
            "Number of nodeclaims created in total by Karpenter. Labeled by reason the nodeclaim was created and the owning nodepool.",
            m.nodeclaims_created.clone(),
        );
        r.register(
            "karpenter_nodeclaims_terminated",
            "Number of nodeclaims terminated in total by Karpenter. Labeled by the owning nodepool.",
            m.nodeclaims_terminated.clone(),
        );
        r.register(
            "karpenter_nodeclaims_disrupted",
            "Number of nodeclaims disrupted in total by Karpenter. Labeled by reason the nodeclaim was disrupted, the owning nodepool, the capacity type, the consolidation policy, and the termination mode.",
            m.nodeclaims_disrupted.clone(),
        );
        r.register(
            "karpenter_pods_disruption_initiated",
            "Number of pod disruptions initiated in total by Karpenter, incremented by the reschedulable pod count whenever the underlying nodeclaim is disrupted. Labeled by reason the nodeclaim was disrupted, the owning nodepool, the capacity type, the consolidation policy, and the termination mode. Pods owned by DaemonSets and mirror pods are excluded.",
            m.pods_disruption_initiated.clone(),
        );
        r.register(
            "karpenter_nodeclaims_unhealthy_disrupted",
            "Number of unhealthy nodeclaims disrupted in total by node repair. Labeled by the condition the node was disrupted on, the owning nodepool, the capacity type, the image ID, and the termination mode.",
            m.nodeclaims_unhealthy_disrupted.clone(),
        );
        r.register(
            "karpenter_nodes_drained",
            "The total number of nodes drained by Karpenter",
            m.nodes_drained.clone(),
        );
        r.register(
            "karpenter_pods_drained",
            "The total number of pods drained during node termination by Karpenter, labeled by reason",
            m.pods_drained.clone(),
        );
        r.register(
            "karpenter_nodes_created",
            "Number of nodes created in total by Karpenter. Labeled by owning nodepool.",
            m.nodes_created.clone(),
        );
        r.register(
            "karpenter_nodes_terminated",
            "Number of nodes terminated in total by Karpenter. Labeled by owning nodepool.",
            m.nodes_terminated.clone(),
        );
        r.register(
            "karpenter_nodeclaims_termination_duration_seconds",
            "Duration of NodeClaim termination in seconds.",
            m.nodeclaims_termination_duration.clone(),
        );
        r.register(
            "karpenter_nodeclaims_instance_termination_duration_seconds",
            "Duration of CloudProvider Instance termination in seconds.",
            m.nodeclaims_instance_termination_duration.clone(),
        );
        r.register(
            "karpenter_pods_state",
            "Pod state is the current state of pods. This metric can be used several ways as it is labeled by the pod name, namespace, owner, node, nodepool name, zone, architecture, capacity type, instance type and pod phase.",
            m.pods_state.clone(),
        );
        r.register(
            "karpenter_pods_bound_duration_seconds",
            "The time from pod creation until the pod is bound.",
            m.pods_bound_duration.clone(),
        );
        r.register(
            "karpenter_pods_scheduling_decision_duration_seconds",
            "The time it takes for Karpenter to first try to schedule a pod after it's been seen.",
            m.pods_scheduling_decision_duration.clone(),
        );
        r.register(
            "karpenter_pods_provisioning_bound_duration_seconds",
            "The time from when Karpenter first thinks the pod can schedule until it binds. Note: this calculated from a point in memory, not by the pod creation timestamp.",
            m.pods_provisioning_bound_duration.clone(),
        );
        r.register(
            "karpenter_pods_provisioning_startup_duration_seconds",
            "The time from when Karpenter first thinks the pod can schedule until the pod is running. Note: this calculated from a point in memory, not by the pod creation timestamp.",
            m.pods_provisioning_startup_duration.clone(),
        );
        r.register(
            "karpenter_pods_provisioning_unbound_time_seconds",
            "The time from when Karpenter first thinks the pod can schedule until it binds. Note: this calculated from a point in memory, not by the pod creation timestamp.",
            m.pods_provisioning_unbound_time.clone(),
        );
        r.register(
            "karpenter_pods_provisioning_unstarted_time_seconds",
            "The time from when Karpenter first thinks the pod can schedule until the pod is running. Note: this calculated from a point in memory, not by the pod creation timestamp.",
            m.pods_provisioning_unstarted_time.clone(),
        );
        r.register(
            "karpenter_pods_provisioning_scheduling_undecided_time_seconds",
            "The time from when Karpenter has seen a pod without making a scheduling decision for the pod. Note: this calculated from a point in memory, not by the pod creation timestamp.",
            m.pods_scheduling_undecided_time.clone(),
        );
        r.register(
            "karpenter_pods_unbound_time_seconds",
            "The time from pod creation until the pod is bound.",
            m.pods_unbound_time.clone(),
        );
        r.register(
            "karpenter_pods_unstarted_time_seconds",
            "The time from pod creation until the pod is running.",
            m.pods_unstarted_time.clone(),
        );
        r.register(
            "karpenter_scheduler_scheduling_duration_seconds",
            "Duration of scheduling simulations used for deprovisioning and provisioning in seconds.",
            m.scheduling_duration.clone(),
        );
        r.register(
            "karpenter_scheduler_queue_depth",
            "The number of pods currently waiting to be scheduled.",
            m.scheduler_queue_depth.clone(),
        );
        r.register(
            "karpenter_scheduler_unfinished_work_seconds",
            "How many seconds of work has been done that is in progress and hasn't been observed by scheduling_duration_seconds.",
            solve_progress::UnfinishedWork(m.solves.clone()),
        );
        r.register(
            "karpenter_voluntary_disruption_decisions",
            "Number of disruption decisions performed. Labeled by disruption decision, reason, and consolidation type.",
            m.disruption_decisions.clone(),
        );
        r.register(
            "karpenter_voluntary_disruption_decisions_by_nodepool",
            "Number of disruption decisions performed, per NodePool. Labeled by nodepool, disruption decision, reason, and consolidation type.",
            m.disruption_decisions_by_nodepool.clone(),
        );
        r.register(
            "karpenter_voluntary_disruption_failed_validations",
            "Number of candidates that were selected for disruption but failed validation. Labeled by consolidation type.",
            m.disruption_failed_validations.clone(),
        );
        r.register(
            "karpenter_voluntary_disruption_consolidation_timeouts",
            "Number of times the Consolidation algorithm has reached a timeout. Labeled by consolidation type.",
            m.disruption_consolidation_timeouts.clone(),
        );
        r.register(
            "karpenter_voluntary_disruption_queue_failures",
            "The number of times that an enqueued disruption decision failed. Labeled by disruption method.",
            m.disruption_queue_failures.clone(),
        );
        r.register(
            "karpenter_voluntary_disruption_eligible_nodes",
            "Number of nodes eligible for disruption by Karpenter. Labeled by disruption reason.",
            m.disruption_eligible_nodes.clone(),
        );
        r.register(
            "karpenter_voluntary_disruption_decision_evaluation_duration_seconds",
            "Duration of the disruption decision evaluation process in seconds. Labeled by method and consolidation type.",
            m.disruption_evaluation_duration.clone(),
        );
        r.register(
            "karpenter_consolidation_moves",
            "Number of balanced consolidation moves. Labeled by decision, NodePool, and policy.",
            m.consolidation_moves.clone(),
        );
        r.register(
            "karpenter_consolidation_score",
            "Score of balanced consolidation moves. Labeled by decision, NodePool, and policy.",
            m.consolidation_score.clone(),
        );
        r.register(
            "client_go_request",
            "Number of HTTP requests, partitioned by status code and method.",
            m.client_requests.clone(),
        );
        r.register(
            "client_go_request_duration_seconds",
            "Request latency in seconds. Broken down by verb, group, version, kind, and subresource.",
            m.client_request_duration.clone(),
        );
        r.register(
            "karpenter_nodepools_usage",
            "The amount of resources that have been provisioned for a nodepool. Labeled by nodepool name and resource type.",
            m.nodepools_usage.clone(),
        );
        r.register(
            "karpenter_nodepools_limit",
            "Limits specified on the nodepool that restrict the quantity of resources provisioned. Labeled by nodepool name and resource type.",
            m.nodepools_limit.clone(),
        );
        r.register(
            "karpenter_nodepools_cost_total",
            "Total cost of the nodepool from Karpenter's perspective. Units are determined by the cloud provider. Not an authoritative source for billing. Includes modifications due to NodeOverlays",
            m.nodepools_cost.clone(),
        );
        r.register(
            "karpenter_nodepools_cost_tracker_errors",
            "Number of errors encountered during cost tracking operations. Labeled by nodepool and nodeclaim.",
            m.nodepools_cost_tracker_errors.clone(),
        );
        r.register(
            "karpenter_nodepools_allowed_disruptions",
            "The number of nodes for a given NodePool that can be concurrently disrupting at a point in time. Labeled by NodePool. Note that allowed disruptions can change very rapidly, as new nodes may be created and others may be deleted at any point.",
            m.nodepools_allowed_disruptions.clone(),
        );
        r.register(
            "karpenter_nodepools_nodes_consuming_budgets",
            "The number of nodes consuming the budget of a nodepool at a point in time. Labeled by NodePool.",
            m.nodepools_nodes_consuming_budgets.clone(),
        );
        r.register(
            "karpenter_cluster_utilization_percent",
            "Utilization of allocatable resources by pod requests on Karpenter nodes.",
            m.cluster_utilization.clone(),
        );
        r.register(
            "karpenter_cluster_state_node_count",
            "Current count of nodes in cluster state.",
            m.cluster_state_node_count.clone(),
        );
        r.register(
            "karpenter_cluster_state_synced",
            "Returns 1 if cluster state is synced and 0 otherwise.",
            m.cluster_state_synced.clone(),
        );
        r.register(
            "karpenter_cluster_state_unsynced_time_seconds",
            "The time for which cluster state is not synced",
            m.cluster_state_unsynced_time.clone(),
        );
        r.register(
            "karpenter_pods_eviction_requests",
            "The number of requests to evict pods. Labeled by the HTTP status code.",
            m.eviction_requests.clone(),
        );
        r.register(
            "leader_election_master_status",
            "1 when this replica holds the leader-election Lease, 0 when it is a standby. Labeled by the Lease name.",
            m.leader.clone(),
        );
        r.register(
            "karpenter_nodes_lifetime_duration_seconds",
            "The lifetime duration of the nodes since creation.",
            m.nodes_lifetime_duration.clone(),
        );
        r.register(
            "karpenter_nodes_allocatable",
            "Node allocatable are the resources allocatable by nodes.",
            m.nodes_allocatable.clone(),
        );
        r.register(
            "karpenter_nodes_total_pod_requests",
            "Node total pod requests are the resources requested by pods bound to nodes, including the DaemonSet pods.",
            m.nodes_total_pod_requests.clone(),
        );
        r.register(
            "karpenter_nodes_total_daemon_requests",
            "Node total daemon requests are the resource requested by DaemonSet pods bound to nodes.",
            m.nodes_total_daemon_requests.clone(),
        );
        r.register(
            "karpenter_nodes_total_pod_limits",
            "Node total pod limits are the resources specified by pod limits, including the DaemonSet pods.",
            m.nodes_total_pod_limits.clone(),
        );
        r.register(
            "karpenter_nodes_total_daemon_limits",
            "Node total daemon limits are the resources specified by DaemonSet pod limits.",
            m.nodes_total_daemon_limits.clone(),
        );
        r.register(
            "karpenter_nodes_system_overhead",
            "Node system daemon overhead are the resources reserved for system overhead, the difference between the node's capacity and allocatable values.",
            m.nodes_system_overhead.clone(),
        );
        r.register(
            "karpenter_nodes_current_lifetime_seconds",
            "Node age in seconds.",
            m.nodes_current_lifetime.clone(),
        );
        r.register(
            "karpenter_cloudprovider_instance_type_cpu_cores",
            "VCPUs cores for a given instance type.",
            m.instance_type_cpu_cores.clone(),
        );
        r.register(
            "karpenter_cloudprovider_instance_type_memory_bytes",
            "Memory, in bytes, for a given instance type.",
            m.instance_type_memory_bytes.clone(),
        );
        r.register(
            "karpenter_cloudprovider_instance_type_offering_available",
            "Instance type offering availability, based on instance type, capacity type, and zone.",
            m.offering_available.clone(),
        );
        r.register(
            "karpenter_cloudprovider_instance_type_offering_price_estimate",
            "Instance type offering estimated hourly price used when making informed decisions on node cost calculation, based on instance type, capacity type, and zone.",
            m.offering_price_estimate.clone(),
        );
        r.register(
            "karpenter_scheduler_unschedulable_pods_count",
            "The number of unschedulable pods in the latest provisioning simulation.",
            m.scheduler_unschedulable_pods.clone(),
        );
        r.register(
            "karpenter_scheduler_pending_pods_by_effective_zone_count",
            "Pending pods dimensioned by effective zone constraint, or the intersection of pod-level zone signals, volume topology (PVC zones), and topology constraints. Values: specific zone name (e.g., 'us-west-2a'), 'flexible' (multiple zones), or 'none' (no valid intersection).",
            m.scheduler_pending_by_zone.clone(),
        );
        r.register(
            "karpenter_scheduler_ignored_pods_count",
            "Number of pods ignored during scheduling by Karpenter",
            m.scheduler_ignored_pods.clone(),
        );
        r.register(
            "karpenter_build_info",
            "A metric with a constant '1' value labeled by version from which karpenter was built.",
            m.build_info.clone(),
        );
        r.register(
            "karpenter_interruption_received_messages",
            "Count of messages received from the SQS queue. Broken down by message type and whether the message was actionable.",
            m.interruption_received.clone(),
        );
        r.register(
            "karpenter_interruption_deleted_messages",
            "Count of messages deleted from the SQS queue.",
            m.interruption_deleted.clone(),
        );
        r.register(
            "karpenter_interruption_message_queue_duration_seconds",
            "Amount of time an interruption message is on the queue before it is processed by karpenter.",
            m.interruption_queue_duration.clone(),
        );
        r.register(
            "karpenter_dry_run_decisions",
            "karpenter-rs shadow mode: provisioning and disruption decisions that would have been carried out, counted once each. Labeled by action, reason and nodepool.",
            m.dry_run_decisions.clone(),
        );
        r.register(
            "karpenter_dry_run_provisioning_price_dollars_per_hour",
            "karpenter-rs shadow mode: hourly price of the nodeclaims the latest plan would create for the pods pending now. Labeled by nodepool.",
            m.dry_run_provisioning_price.clone(),
        );
        r.register(
            "karpenter_dry_run_disruption_savings_dollars_per_hour",
            "karpenter-rs shadow mode: hourly savings of the latest disruption pass's commands. Labeled by disruption reason.",
            m.dry_run_disruption_savings.clone(),
        );
        *m.registry.lock().unwrap_or_else(PoisonError::into_inner) = r;
        m.build_info.get_or_create(&build_labels()).set(1);
        m
    }

    /// Sets `karpenter_scheduler_ignored_pods_count` to the pending pods the provisioner
    /// cannot plan ([`karpenter_cluster::feed::Synced::ignored_pods`]).
    pub fn set_ignored_pods(&self, pods: usize) {
        (self.scheduler_ignored_pods).set(i64::try_from(pods).unwrap_or(i64::MAX));
    }

    /// The handle the thread running provisioning simulations reports their progress to.
    pub fn solve_tracker(&self) -> solve_progress::SolveTracker {
        self.solves.clone()
    }

    /// Sets `leader_election_master_status` for the Lease `lease`.
    pub fn set_leader(&self, lease: &str, leading: bool) {
        self.leader
            .get_or_create(&LeaseLabels { name: lease.into() })
            .set(i64::from(leading));
    }

    /// The OpenMetrics text exposition of every family, then the summaries ([`summary`]) and
    /// the process's own families ([`process`], read from `/proc` now).
    pub fn encode(&self) -> String {
        let mut out = String::new();
        let registry = self.registry.lock().unwrap_or_else(PoisonError::into_inner);
        // Writing into a String cannot fail; an encoder error would mean a bug in a label
        // set, which is reported in the body rather than by a panic.
        if let Err(e) = prometheus_client::encoding::text::encode(&mut out, &registry) {
            out.push_str(&format!("# encoding error: {e}\n"));
        }
        // The summaries go before the closing `# EOF`, which must stay the last line.
        let eof = out.rfind("# EOF\n").unwrap_or(out.len());
        let tail = out.split_off(eof);
        let now = std::time::Instant::now();
        self.pods_startup_duration.encode_at(&mut out, now);
        self.nodes_termination_duration.encode_at(&mut out, now);
        if let Some(stats) = process::read() {
            process::encode(&mut out, &stats);
        }
        out.push_str(&tail);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The exposition lines of `m` that start with `prefix`.
    pub(crate) fn lines(m: &Metrics, prefix: &str) -> Vec<String> {
        m.encode()
            .lines()
            .filter(|l| l.starts_with(prefix))
            .map(str::to_owned)
            .collect()
    }

    #[tokio::test]
    async fn cloudprovider_calls_are_recorded_in_the_same_registry() {
        use super::cloudprovider::Metered;
        use karpenter_cloudprovider::CloudProvider;
        let m = Metrics::new();
        let p = Metered::with_metrics(
            std::sync::Arc::new(karpenter_cloudprovider_fake::FakeCloudProvider::default()),
            m.cloudprovider.clone(),
        )
        .for_controller("nodeclaim.lifecycle");
        p.list().await.unwrap();
        assert!(p.get("fake://nowhere/i-0").await.is_err());
        let text = m.encode();
        assert!(text.contains("karpenter_cloudprovider_duration_seconds_count{controller=\"nodeclaim.lifecycle\",method=\"List\",provider=\"fake\"} 1"), "{text}");
        assert!(text.contains("karpenter_cloudprovider_errors_total{controller=\"nodeclaim.lifecycle\",method=\"Get\",provider=\"fake\",error=\"NodeClaimNotFoundError\",nodepool=\"\"} 1"), "{text}");
    }

    #[test]
    fn ignored_pods_are_a_gauge_without_labels() {
        let m = Metrics::new();
        m.set_ignored_pods(3);
        assert_eq!(
            lines(&m, "karpenter_scheduler_ignored_pods_count"),
            ["karpenter_scheduler_ignored_pods_count 3"]
        );
        m.set_ignored_pods(0);
        assert_eq!(
            lines(&m, "karpenter_scheduler_ignored_pods_count"),
            ["karpenter_scheduler_ignored_pods_count 0"]
        );
    }

    #[test]
    fn exposes_karpenter_names() {
        let m = Metrics::new();
        m.nodeclaims_created
            .get_or_create(&CreatedLabels {
                reason: "provisioning".into(),
                nodepool: "default".into(),
                min_values_relaxed: "false".into(),
            })
            .inc();
        m.nodepools_usage
            .get_or_create(&ResourceLabels {
                nodepool: "default".into(),
                resource_type: "cpu".into(),
            })
            .set(2.5);
        m.scheduling_duration
            .get_or_create(&ControllerLabels {
                controller: "provisioner".into(),
            })
            .observe(0.2);
        let text = m.encode();
        for name in [
            "karpenter_nodeclaims_created_total{reason=\"provisioning\",nodepool=\"default\",min_values_relaxed=\"false\"} 1",
            "karpenter_nodepools_usage{nodepool=\"default\",resource_type=\"cpu\"} 2.5",
            "karpenter_scheduler_scheduling_duration_seconds_count{controller=\"provisioner\"} 1",
            "# TYPE karpenter_cluster_state_synced gauge",
        ] {
            assert!(text.contains(name), "missing {name:?} in\n{text}");
        }
    }
}
