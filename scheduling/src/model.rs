//! The solver's input: pods, nodes, node pools with their instance types, DaemonSets and
//! namespaces, gathered in a [`Snapshot`].
//!
//! These are plain data. Converting from Kubernetes objects (the `k8s` feature) or from
//! Karpenter's API types (`karpenter-cloudprovider`) happens outside; everything here is
//! already validated and in scheduler units.

use crate::quantity::Quantity;
use crate::requirements::{NodeSelectorRequirement, Requirements};
use crate::resources::Resources;
use crate::selector::LabelSelector;
use crate::taints::{Taint, Toleration};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

/// Labels or annotations.
pub type Labels = BTreeMap<String, String>;

/// Milliseconds since the Unix epoch. The core never reads a clock: time is an input.
pub type Millis = i64;

/// Identifies a pod: namespace and name.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct PodKey {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
}

impl PodKey {
    /// A key.
    pub fn new(namespace: impl Into<String>, name: impl Into<String>) -> Self {
        Self {
            namespace: namespace.into(),
            name: name.into(),
        }
    }
}

impl fmt::Display for PodKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// The controller that owns a pod.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OwnerRef {
    /// Kind (`ReplicaSet`, `DaemonSet`, `Job`, `StatefulSet` …).
    pub kind: String,
    /// Name.
    pub name: String,
    /// UID.
    #[serde(default)]
    pub uid: String,
}

/// `nodeAffinity`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeAffinity {
    /// `requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms`: OR of terms.
    /// Empty means no requirement.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub required: Vec<NodeSelectorTerm>,
    /// `preferredDuringSchedulingIgnoredDuringExecution`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub preferred: Vec<PreferredSchedulingTerm>,
}

/// One node selector term: AND of its expressions.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeSelectorTerm {
    /// `matchExpressions` on node labels.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub match_expressions: Vec<NodeSelectorRequirement>,
    /// `matchFields` (only `metadata.name` exists in Kubernetes).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub match_fields: Vec<NodeSelectorRequirement>,
}

/// A weighted node selector term.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PreferredSchedulingTerm {
    /// 1–100.
    pub weight: i32,
    /// The term.
    pub preference: NodeSelectorTerm,
}

/// A pod (anti-)affinity term.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PodAffinityTerm {
    /// Which pods; `None` (nil) matches no pod.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label_selector: Option<LabelSelector>,
    /// Namespaces to look in; with no namespaces and no selector, the pod's own namespace.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub namespaces: Vec<String>,
    /// Namespaces by label; an empty selector means all namespaces.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace_selector: Option<LabelSelector>,
    /// The topology domain key (`kubernetes.io/hostname`, `topology.kubernetes.io/zone` …).
    pub topology_key: String,
    /// Keys whose values on the incoming pod are added to the selector as `In`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub match_label_keys: Vec<String>,
    /// Keys whose values on the incoming pod are added to the selector as `NotIn`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mismatch_label_keys: Vec<String>,
}

/// A weighted pod (anti-)affinity term.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WeightedPodAffinityTerm {
    /// 1–100.
    pub weight: i32,
    /// The term.
    pub term: PodAffinityTerm,
}

/// `podAffinity` or `podAntiAffinity`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PodAffinity {
    /// Required terms (AND).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub required: Vec<PodAffinityTerm>,
    /// Preferred terms.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub preferred: Vec<WeightedPodAffinityTerm>,
}

/// `affinity`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Affinity {
    /// Node affinity.
    #[serde(default)]
    pub node_affinity: NodeAffinity,
    /// Pod affinity.
    #[serde(default)]
    pub pod_affinity: PodAffinity,
    /// Pod anti-affinity.
    #[serde(default)]
    pub pod_anti_affinity: PodAffinity,
}

/// What to do when a spread constraint cannot be satisfied.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
pub enum WhenUnsatisfiable {
    /// Hard constraint.
    #[default]
    DoNotSchedule,
    /// Preference, relaxed when it cannot be met.
    ScheduleAnyway,
}

/// `nodeAffinityPolicy` / `nodeTaintsPolicy` of a spread constraint.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum InclusionPolicy {
    /// Only nodes that pass the pod's node affinity (or tolerate its taints) count.
    Honor,
    /// All nodes count.
    Ignore,
}

/// A topology spread constraint.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TopologySpreadConstraint {
    /// Largest allowed difference between a domain's count and the global minimum.
    pub max_skew: i32,
    /// Node label that defines the domains.
    pub topology_key: String,
    /// Hard or soft.
    #[serde(default)]
    pub when_unsatisfiable: WhenUnsatisfiable,
    /// Which pods count; `None` counts none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label_selector: Option<LabelSelector>,
    /// Minimum number of eligible domains (DoNotSchedule only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_domains: Option<i32>,
    /// Default Honor.
    #[serde(default = "honor")]
    pub node_affinity_policy: InclusionPolicy,
    /// Default Ignore.
    #[serde(default = "ignore")]
    pub node_taints_policy: InclusionPolicy,
    /// Keys whose values on the incoming pod are ANDed into the selector.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub match_label_keys: Vec<String>,
}

fn honor() -> InclusionPolicy {
    InclusionPolicy::Honor
}
fn ignore() -> InclusionPolicy {
    InclusionPolicy::Ignore
}

/// A host port a container binds.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HostPort {
    /// Port number.
    pub port: i32,
    /// `TCP` (default), `UDP` or `SCTP`.
    pub protocol: String,
    /// Host IP; empty or `0.0.0.0` conflicts with every IP.
    #[serde(default)]
    pub host_ip: String,
}

/// A pod as the solver sees it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Pod {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// UID.
    #[serde(default)]
    pub uid: String,
    /// Labels.
    #[serde(default)]
    pub labels: Labels,
    /// Annotations (`karpenter.sh/do-not-disrupt`, `controller.kubernetes.io/pod-deletion-cost`).
    #[serde(default)]
    pub annotations: Labels,
    /// Controlling owner.
    #[serde(default)]
    pub owner: Option<OwnerRef>,
    /// Effective requests (see [`crate::requests::pod_requests`]).
    #[serde(default)]
    pub requests: Resources,
    /// `nodeSelector`.
    #[serde(default)]
    pub node_selector: Labels,
    /// `affinity`.
    #[serde(default)]
    pub affinity: Affinity,
    /// `tolerations`.
    #[serde(default)]
    pub tolerations: Vec<Toleration>,
    /// `topologySpreadConstraints`.
    #[serde(default)]
    pub topology_spread_constraints: Vec<TopologySpreadConstraint>,
    /// Host ports of all containers.
    #[serde(default)]
    pub host_ports: Vec<HostPort>,
    /// Zone (or other) requirements from the pod's bound volumes or storage classes; ANDed with
    /// every node affinity term, as Karpenter's volume topology does.
    #[serde(default)]
    pub volume_requirements: Vec<NodeSelectorRequirement>,
    /// Priority (from its PriorityClass).
    #[serde(default)]
    pub priority: i32,
    /// The node it is bound to, if any.
    #[serde(default)]
    pub node_name: Option<String>,
    /// Creation time.
    #[serde(default)]
    pub created_at: Millis,
    /// Start time (when it began running), for `do-not-disrupt` durations.
    #[serde(default)]
    pub started_at: Option<Millis>,
    /// Whether the pod is terminating (has a deletion timestamp).
    #[serde(default)]
    pub terminating: bool,
    /// A pending copy of a bound pod that a consolidation simulation moves off the node being
    /// consolidated. Nodes [`Node::under_consolidate_after`] refuse it (Karpenter v1.14);
    /// pods that were pending anyway, and pods of nodes already being deleted, are not
    /// marked. Only the disruption crate's simulation sets it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub moved_by_consolidation: bool,
    /// The ResourceClaims whose devices it needs; empty unless DRA requests are simulated
    /// (`--ignore-dra-requests=false`). A node takes the pod only when its devices serve these
    /// and the claims of the node's other pods at once.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub device_claims: Vec<crate::devices::DeviceClaim>,
}

impl Pod {
    /// The pod's key.
    pub fn key(&self) -> PodKey {
        PodKey::new(self.namespace.clone(), self.name.clone())
    }

    /// Whether a DaemonSet owns the pod.
    pub fn is_daemon(&self) -> bool {
        self.owner.as_ref().is_some_and(|o| o.kind == "DaemonSet")
    }
}

/// Lifecycle of a node or NodeClaim as far as scheduling cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
pub enum NodeState {
    /// Registered and initialized: pods can bind now.
    #[default]
    Ready,
    /// A NodeClaim launched or registering: pods may be nominated to it.
    InFlight,
    /// Being deleted: nothing new goes there.
    Deleting,
}

/// An existing node or an in-flight NodeClaim.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Node {
    /// Node name (or NodeClaim name while in flight).
    pub name: String,
    /// Owning NodePool, if Karpenter manages it.
    #[serde(default)]
    pub node_pool: Option<String>,
    /// Labels, including well-known ones (zone, instance type, capacity type, hostname). For an
    /// in-flight claim, the labels it will have.
    #[serde(default)]
    pub labels: Labels,
    /// Annotations.
    #[serde(default)]
    pub annotations: Labels,
    /// Taints it will have once initialized; startup and ephemeral taints (not-ready,
    /// unreachable, `karpenter.sh/unregistered`) are left out by the caller.
    #[serde(default)]
    pub taints: Vec<Taint>,
    /// Allocatable.
    #[serde(default)]
    pub allocatable: Resources,
    /// Capacity.
    #[serde(default)]
    pub capacity: Resources,
    /// Lifecycle state.
    #[serde(default)]
    pub state: NodeState,
    /// Price per hour of the offering it runs on (0 when unknown).
    #[serde(default)]
    pub price: f64,
    /// Creation time.
    #[serde(default)]
    pub created_at: Millis,
    /// Its NodePool's `consolidateAfter` window is still running (Karpenter v1.14): it takes
    /// no pod [`Pod::moved_by_consolidation`], so consolidation does not pile moved pods onto
    /// a node that just changed. Every other pod may still go there. Only the disruption
    /// crate's consolidation simulation sets it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub under_consolidate_after: bool,
    /// The DRA devices it publishes (its ResourceSlices), or for an in-flight NodeClaim the
    /// devices its instance type will publish. Only pods with
    /// [`Pod::device_claims`] look at them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub devices: Vec<crate::devices::Device>,
}

impl Node {
    /// The instance type label, if present.
    pub fn instance_type(&self) -> Option<&str> {
        self.labels
            .get(crate::labels::INSTANCE_TYPE)
            .map(String::as_str)
    }

    /// The zone label, if present.
    pub fn zone(&self) -> Option<&str> {
        self.labels.get(crate::labels::ZONE).map(String::as_str)
    }

    /// The capacity type label, if present.
    pub fn capacity_type(&self) -> Option<&str> {
        self.labels
            .get(crate::labels::CAPACITY_TYPE)
            .map(String::as_str)
    }
}

/// Where and how an instance type can be bought.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Offering {
    /// Zone.
    pub zone: String,
    /// `spot`, `on-demand` or `reserved`.
    pub capacity_type: String,
    /// Price per hour.
    pub price: f64,
    /// False while the cloud reports no capacity (e.g. after an insufficient-capacity error).
    pub available: bool,
    /// For a `reserved` offering: the capacity reservation it launches into and how many
    /// instances it can still take. `None` for spot and on-demand offerings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reservation: Option<Reservation>,
}

impl Offering {
    /// The reservation id when this is a reserved offering with a reservation.
    pub fn reservation_id(&self) -> Option<&str> {
        self.reservation.as_ref().map(|r| r.id.as_str())
    }
}

/// A capacity reservation behind a `reserved` [`Offering`] (Karpenter's reservation id
/// requirement and `ReservationCapacity`).
///
/// Several offerings (of several NodePools) may name the same reservation: the solver counts
/// one pool of capacity per `id`, the smallest `capacity` any of them reports.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Reservation {
    /// The reservation's id (EC2: `cr-0123456789abcdef0`).
    pub id: String,
    /// The node label that carries the id on a node launched into it, and the requirement
    /// key a NodeClaim holding it gets (AWS: `karpenter.k8s.aws/capacity-reservation-id`).
    pub id_label: String,
    /// Instances it can still launch, as the provider last counted them (launched instances
    /// already subtracted).
    pub capacity: u32,
    /// Further labels a node launched into it carries (AWS: `capacity-reservation-type`,
    /// `capacity-reservation-interruptible`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: Labels,
}

/// What the node's system takes off its capacity.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Overhead {
    /// kube-reserved.
    #[serde(default)]
    pub kube_reserved: Resources,
    /// system-reserved.
    #[serde(default)]
    pub system_reserved: Resources,
    /// Hard eviction thresholds.
    #[serde(default)]
    pub eviction_threshold: Resources,
}

impl Overhead {
    /// The sum of all three.
    pub fn total(&self) -> Resources {
        let mut total = self.kube_reserved.clone();
        total.add_assign(&self.system_reserved);
        total.add_assign(&self.eviction_threshold);
        total
    }
}

/// An instance type a NodePool can launch.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InstanceType {
    /// Name (`m5.large`).
    pub name: String,
    /// Its labels as requirements: arch, os, instance-type, zone In [offering zones],
    /// capacity-type In [offering types] and provider labels.
    pub requirements: Requirements,
    /// Capacity.
    pub capacity: Resources,
    /// Overhead.
    #[serde(default)]
    pub overhead: Overhead,
    /// Offerings.
    pub offerings: Vec<Offering>,
    /// The DRA devices its nodes publish once their drivers run (Karpenter's
    /// `DynamicResources` ResourceSlice templates).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub devices: Vec<crate::devices::Device>,
}

impl InstanceType {
    /// Capacity minus overhead, never negative.
    pub fn allocatable(&self) -> Resources {
        let mut a = self.capacity.clone();
        a.sub_assign(&self.overhead.total());
        clamp_non_negative(&mut a);
        a
    }

    /// The price of the cheapest offering of `capacity_type` in `zone` (any zone when
    /// `None`), available or not: what a node already running on it costs.
    pub fn offering_price(&self, zone: Option<&str>, capacity_type: &str) -> Option<f64> {
        self.offerings
            .iter()
            .filter(|o| o.capacity_type == capacity_type && zone.is_none_or(|z| z == o.zone))
            .map(|o| o.price)
            .min_by(f64::total_cmp)
    }
}

fn clamp_non_negative(r: &mut Resources) {
    r.cpu_millis = r.cpu_millis.max(0);
    r.memory = r.memory.max(0);
    r.ephemeral_storage = r.ephemeral_storage.max(0);
    r.pods = r.pods.max(0);
    r.extended.retain(|(_, v)| *v > 0);
}

/// A NodePool as the solver sees it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodePool {
    /// Name.
    pub name: String,
    /// Weight (higher is tried first; ties by name).
    #[serde(default)]
    pub weight: i32,
    /// Template labels.
    #[serde(default)]
    pub labels: Labels,
    /// Template annotations.
    #[serde(default)]
    pub annotations: Labels,
    /// Taints.
    #[serde(default)]
    pub taints: Vec<Taint>,
    /// Startup taints (removed by something else once the node is up; ignored for scheduling).
    #[serde(default)]
    pub startup_taints: Vec<Taint>,
    /// Template requirements.
    #[serde(default)]
    pub requirements: Requirements,
    /// `spec.limits`: resource name to limit; an absent resource is unlimited.
    #[serde(default)]
    pub limits: BTreeMap<String, Quantity>,
    /// Capacity already used by this pool's nodes and in-flight claims (counts against limits).
    #[serde(default)]
    pub usage: Resources,
    /// The instance types it may launch, already filtered by the provider.
    #[serde(default)]
    pub instance_types: Vec<Arc<InstanceType>>,
}

/// A DaemonSet: its pod template stands for the pod it would run on each matching node.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DaemonSet {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// The pod it would create.
    pub pod: Pod,
}

/// Everything `solve` needs, taken at one instant.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Snapshot {
    /// Pods waiting for a node.
    #[serde(default)]
    pub pending_pods: Vec<Pod>,
    /// Pods bound to nodes (including DaemonSet pods), `node_name` set. A pod whose node is
    /// not among `nodes` is ignored, as if its node had gone with it.
    #[serde(default)]
    pub bound_pods: Vec<Pod>,
    /// Existing nodes and in-flight NodeClaims.
    #[serde(default)]
    pub nodes: Vec<Node>,
    /// NodePools with their instance types.
    #[serde(default)]
    pub node_pools: Vec<NodePool>,
    /// DaemonSets.
    #[serde(default)]
    pub daemon_sets: Vec<DaemonSet>,
    /// Namespace labels, for namespace selectors.
    #[serde(default)]
    pub namespaces: BTreeMap<String, Labels>,
    /// The instant the snapshot describes.
    #[serde(default)]
    pub now: Millis,
}
