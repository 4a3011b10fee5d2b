//! # karpenter-cluster
//!
//! Cluster state and the controller logic shared by `karpenter simulate` and
//! `karpenter controller`, plus the decoding of Kubernetes manifests into the solver's inputs.
//! Sans-IO: no API client, no async runtime, no file or network access and no clock; time is
//! an argument (`now`) and text is handed in by the caller.
//!
//! # Contract
//!
//! [`ClusterState`] is a synchronous index of the objects Karpenter decides from: NodePools,
//! NodeClaims, Nodes, Pods, DaemonSets, PodDisruptionBudgets, namespace labels and (for
//! default spread constraints) the selectors of Services and workload controllers. It is fed
//! through [`ClusterState::apply`] / [`ClusterState::delete`] / [`ClusterState::reset`] —
//! and, with the CapacityBuffer gate, the resolved CapacityBuffers
//! ([`ClusterState::set_capacity_buffers`]) —
//! by watch streams in the operator, by the scenario timeline in the simulator — and read
//! through [`ClusterState::snapshot`] (the solver's input) and
//! [`ClusterState::disruption_input`] (the disruption crate's input). It never talks to an
//! API server or a cloud and never reads a clock.
//!
//! The controller modules ([`provisioner`], [`registration`], [`orchestration`],
//! [`termination`]) are functions of the index and an instant `now`: they return
//! [`Action`]s and never mutate anything themselves. The simulator applies each action to
//! the index (and to the fake cloud provider); the real controller applies the same actions
//! to the API server and the real provider, and the index catches up through its watches.
//! Every decision comes from `karpenter_scheduling::solve` and `karpenter_disruption`; the
//! modules here only batch, sequence and carry out.
//!
//! [`manifests`] parses manifest text (YAML or JSON, many documents, `kind: List`) into
//! [`manifests::Document`]s, and [`inputs`] turns documents into the solver's inputs; reading
//! the files is the caller's job.
#![forbid(unsafe_code)]

pub mod api_objects;
pub mod api_pacing;
pub mod capacity_buffer;
mod change_log;
pub mod concurrency;
pub mod default_spread;
pub mod deletion;
pub mod dra;
pub mod failure_streaks;
pub mod feature_gates;
pub mod feed;
#[doc(hidden)]
pub mod fuzzing;
pub mod garbage;
pub mod inputs;
pub mod interruption;
pub mod launch_failure;
pub mod lease;
pub mod manifests;
pub mod node_class;
pub mod nodepool_status;
pub mod object_set;
pub mod orchestration;
pub mod overlay_annotations;
pub mod plan_snapshot;
pub mod pod_transitions;
pub mod provisioner;
pub mod reconciler;
pub mod registration;
pub mod registration_health;
pub mod repair;
pub mod repair_policy;
pub mod scheduler_config;
pub mod shadow;
pub mod static_capacity;
pub mod termination;
pub mod upstream_settings;

pub use deletion::{DeletionCause, LifecycleTimeout};

use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use karpenter_cloudprovider::v1::{ConditionType, NodeClaim, NodePool};
use karpenter_disruption::{DisruptionInput, DisruptionOptions, NodeInfo, PoolDisruption};
use karpenter_scheduling::Resources;
use karpenter_scheduling::model::{
    self, DaemonSet, InstanceType, Labels, Millis, NodeState, Pod, PodKey, Snapshot,
};
use karpenter_scheduling::pdb::PodDisruptionBudget;
use karpenter_scheduling::plan::NewNodeClaim;
use karpenter_scheduling::taints::{Taint, TaintEffect};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// A Node's `spec.providerID`, empty when unset.
pub fn node_provider_id(node: &k8s_openapi::api::core::v1::Node) -> &str {
    node.spec
        .as_ref()
        .and_then(|s| s.provider_id.as_deref())
        .unwrap_or_default()
}

/// The node a change from `old` to `new` is a pod event on, if it is one (see
/// [`ClusterState::pod_events_after`]).
fn pod_event<'a>(old: Option<&PodRecord>, new: &'a PodRecord) -> Option<&'a str> {
    let node = new.pod.node_name.as_deref()?;
    if new.pod.is_daemon() {
        return None;
    }
    let bound = old.is_none_or(|o| o.pod.node_name.as_deref() != Some(node));
    let is_terminating = |r: &PodRecord| r.deleting_at.is_some() || r.pod.terminating;
    let terminating = is_terminating(new) && old.is_none_or(|o| !is_terminating(o));
    (bound || terminating).then_some(node)
}

/// Whether the index lists `record` among the provisionable pods: pending (unbound, not a
/// DaemonSet pod, not terminating) and marked unschedulable by the kube-scheduler.
fn is_provisionable(record: &PodRecord) -> bool {
    record.unschedulable
        && record.pod.node_name.is_none()
        && !record.pod.is_daemon()
        && !record.pod.terminating
}

/// Karpenter's `karpenter.sh/disrupted:NoSchedule` taint, in the scheduler's model.
pub fn disrupted_taint() -> Taint {
    Taint::new(
        karpenter_cloudprovider::v1::labels::DISRUPTED_TAINT_KEY,
        "",
        TaintEffect::NoSchedule,
    )
}

/// A Node as the index keeps it.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeRecord {
    /// The node in the solver's model. `taints` are the taints it has now, startup taints
    /// excluded (see `startup_taints`); `state` is recomputed by [`ClusterState::snapshot`].
    pub node: model::Node,
    /// The NodeClaim it belongs to, when Karpenter manages it.
    pub node_claim: Option<String>,
    /// Startup taints still on the node (removed when it initializes).
    pub startup_taints: Vec<Taint>,
    /// The Node has a deletion timestamp (its NodeClaim is terminating).
    pub deleting: bool,
    /// What the node's kubelet and agents have reported, as NodeClaim lifecycle reads it.
    pub kubelet: Kubelet,
}

/// Whether a NodeClaim's instance has joined the cluster as a Node, and whether the Node is
/// ready to be initialized. Lifecycle decides Registered and Initialized from this alone
/// ([`registration::next_step`]); the controller derives it from the Node object, the
/// simulator's world model from its boot timings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kubelet {
    /// No Node yet: the record stands for an in-flight NodeClaim.
    NotJoined,
    /// A Node with the claim's provider ID exists.
    Joined {
        /// Why it cannot be initialized yet (not Ready, a startup or ephemeral taint still
        /// on it, a resource not reported); `None` once it can.
        waiting_for: Option<String>,
        /// Its conditions, which node repair matches against the provider's policies.
        conditions: Vec<NodeCondition>,
    },
}

impl Kubelet {
    /// A joined Node that can be initialized, with no conditions recorded.
    pub fn ready() -> Self {
        Self::Joined {
            waiting_for: None,
            conditions: Vec::new(),
        }
    }

    /// Whether the Node joined and can be initialized.
    pub fn initializable(&self) -> bool {
        matches!(
            self,
            Self::Joined {
                waiting_for: None,
                ..
            }
        )
    }

    /// Its conditions (none before it joined).
    pub fn conditions(&self) -> &[NodeCondition] {
        match self {
            Self::NotJoined => &[],
            Self::Joined { conditions, .. } => conditions,
        }
    }
}

/// A Node condition as the index keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeCondition {
    /// `type`, e.g. `Ready`.
    pub type_: String,
    /// `True`, `False` or `Unknown`.
    pub status: String,
    /// `reason` (node repair policies may match it).
    pub reason: String,
    /// `lastTransitionTime`, 0 when unset.
    pub since: Millis,
}

impl NodeRecord {
    /// Whether the node carries `karpenter.sh/disrupted:NoSchedule`.
    pub fn is_disrupted(&self) -> bool {
        let t = disrupted_taint();
        self.node
            .taints
            .iter()
            .any(|x| x.key == t.key && x.effect == t.effect)
    }
}

/// A Pod as the index keeps it.
#[derive(Debug, Clone, PartialEq)]
pub struct PodRecord {
    /// The pod in the solver's model (`node_name` set once bound).
    pub pod: Pod,
    /// When its containers became (or become) Ready; `None` while pending.
    pub ready_at: Option<Millis>,
    /// For a terminating pod, its `deletionTimestamp`: when its grace period ends and the
    /// kubelet should have removed it. `None` when not terminating, or when the pod is
    /// removed the moment it is deleted (the simulator's pods).
    pub deleting_at: Option<Millis>,
    /// The kube-scheduler tried and failed to place it (`PodScheduled=False`, reason
    /// `Unschedulable`): only such pods start Karpenter's provisioning, as upstream.
    pub unschedulable: bool,
}

/// Upstream's `IsStuckTerminating` margin: a terminating pod still present this long after
/// its grace period ended no longer holds up its node's termination.
pub const STUCK_TERMINATING_MS: Millis = 60_000;

impl PodRecord {
    /// Whether the pod is bound and Ready at `now`.
    pub fn is_ready(&self, now: Millis) -> bool {
        self.pod.node_name.is_some() && self.ready_at.is_some_and(|t| t <= now)
    }

    /// Upstream's `IsWaitingEviction`: the pod still holds its node's termination at `now`,
    /// because it has not been evicted yet, or it is terminating within its grace period
    /// (plus [`STUCK_TERMINATING_MS`]). Mirror pods and pods tolerating
    /// `karpenter.sh/disrupted:NoSchedule` (upstream's `IsDrainable`) never hold it.
    pub fn is_waiting_eviction(&self, now: Millis) -> bool {
        let disrupted = disrupted_taint();
        if self.pod.owner.as_ref().is_some_and(|o| o.kind == "Node")
            || self.pod.tolerations.iter().any(|t| t.tolerates(&disrupted))
        {
            return false;
        }
        if !self.pod.terminating {
            return true;
        }
        self.deleting_at
            .is_some_and(|t| now < t + STUCK_TERMINATING_MS)
    }
}

/// A PodDisruptionBudget: its selector and policy, plus the spec fields that decide how many
/// evictions it allows (the index computes the status the disruption controller would see).
#[derive(Debug, Clone, PartialEq)]
pub struct PdbRecord {
    /// Selector, policy and blocking flags (`disruptions_allowed` is recomputed).
    pub budget: PodDisruptionBudget,
    /// `spec.minAvailable`.
    pub min_available: Option<IntOrString>,
    /// `spec.maxUnavailable`.
    pub max_unavailable: Option<IntOrString>,
}

/// An object the index holds.
#[derive(Debug, Clone)]
pub enum Object {
    /// A NodePool (`karpenter.sh/v1`).
    NodePool(Box<NodePool>),
    /// A NodeClaim (`karpenter.sh/v1`).
    NodeClaim(Box<NodeClaim>),
    /// A Node.
    Node(Box<NodeRecord>),
    /// A Pod.
    Pod(Box<PodRecord>),
    /// A DaemonSet.
    DaemonSet(Box<DaemonSet>),
    /// A PodDisruptionBudget.
    Pdb(Box<PdbRecord>),
    /// A Namespace and its labels.
    Namespace(String, Labels),
    /// The selector of a Service or workload controller, for default spread constraints.
    SelectorSource(Box<default_spread::SelectorSource>),
    /// A ResourceClaim, ResourceClaimTemplate, DeviceClass or pod's claim references
    /// (indexed only with `--ignore-dra-requests=false`).
    Dra(Box<dra::DraObject>),
}

/// The key of an object in the index.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum ObjectKey {
    /// NodePool by name.
    NodePool(String),
    /// NodeClaim by name.
    NodeClaim(String),
    /// Node by name.
    Node(String),
    /// Pod by namespace and name.
    Pod(PodKey),
    /// DaemonSet by namespace and name.
    DaemonSet(String, String),
    /// PodDisruptionBudget by namespace and name.
    Pdb(String, String),
    /// Namespace by name.
    Namespace(String),
    /// A Service's or workload controller's selector by kind, namespace and name.
    SelectorSource(default_spread::SourceKind, String, String),
    /// A DRA object by kind, namespace (empty for a DeviceClass) and name.
    Dra(dra::DraKind, String, String),
}

/// Which nodes and pools a snapshot contains.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// What the kube-scheduler sees: Ready and Deleting nodes (nothing can bind to a node
    /// that has not initialized), no NodePools — so `solve` can only place pods on existing
    /// nodes, with the scheduler's fit checks.
    Scheduler,
    /// What Karpenter's provisioner sees: every node and in-flight NodeClaim, and every
    /// NodePool with its instance types and usage.
    Provisioner,
}

/// The synchronous cluster-state index. Iteration is in key order everywhere, so every
/// snapshot of the same state is identical.
#[derive(Debug, Clone, Default)]
pub struct ClusterState {
    node_pools: BTreeMap<String, NodePool>,
    node_claims: BTreeMap<String, NodeClaim>,
    nodes: BTreeMap<String, NodeRecord>,
    pods: BTreeMap<PodKey, PodRecord>,
    /// Pods by the node they are bound to, so a node's pods are found without a scan.
    pods_by_node: BTreeMap<String, BTreeSet<PodKey>>,
    /// Pods [`provisionable_pods`](Self::provisionable_pods) returns, kept as they change so
    /// a reconcile costs what changed, not the cluster's size.
    provisionable: BTreeSet<PodKey>,
    /// Nodes with a deletion timestamp.
    deleting_nodes: BTreeSet<String>,
    /// How many times a NodeClaim was seen becoming `Initialized`.
    initializations: u64,
    /// NodeClaims lifecycle still has work for: not deleting, and not yet initialized or
    /// without the termination finalizer.
    maturing: BTreeSet<String>,
    /// The joined Node of each NodeClaim, by claim name.
    joined: BTreeMap<String, String>,
    /// NodeClaims with a deletion timestamp.
    deleting_claims: BTreeSet<String>,
    daemon_sets: BTreeMap<(String, String), DaemonSet>,
    pdbs: BTreeMap<(String, String), PdbRecord>,
    namespaces: BTreeMap<String, Labels>,
    instance_types: BTreeMap<String, Vec<Arc<InstanceType>>>,
    /// The latest pod event on each node (a non-DaemonSet pod bound to it, starting to
    /// terminate on it, or leaving it).
    pod_events: change_log::ChangeLog,
    /// The latest change of each NodeClaim (applied or deleted), so that a consumer can
    /// visit only the claims that changed.
    claim_changes: change_log::ChangeLog,
    /// The generation of the latest NodePool change.
    pools_changed_at: u64,
    /// The provider's NodeClasses; `None` for a provider without NodeClass kinds.
    node_classes: Option<node_class::NodeClasses>,
    /// Resolved CapacityBuffers (only with the CapacityBuffer gate: drivers set none
    /// otherwise).
    capacity_buffers: BTreeMap<capacity_buffer::BufferKey, capacity_buffer::ResolvedBuffer>,
    /// The generation of the latest change to the CapacityBuffers.
    buffers_changed_at: u64,
    /// Default spread constraints (`--scheduler-config`) and the selectors they use.
    default_spread: default_spread::DefaultSpread,
    /// Interruption notices by NodeClaim name (only of NodeClaims in the index).
    interruptions: BTreeMap<String, interruption::Notice>,
    /// The generation of the latest notice recorded.
    interruptions_changed_at: u64,
    /// DRA objects and pods' claims, for `--ignore-dra-requests=false`.
    dra: dra::Dra,
    generation: u64,
}

impl ClusterState {
    /// An empty index.
    pub fn new() -> Self {
        Self::default()
    }

    /// Creates or replaces an object (by its key). Bumps [`generation`](Self::generation).
    pub fn apply(&mut self, object: Object) {
        self.generation += 1;
        match object {
            Object::NodePool(p) => {
                self.pools_changed_at = self.generation;
                self.node_pools.insert(p.name().to_owned(), *p);
            }
            Object::NodeClaim(c) => {
                self.note_claim_change(c.name().to_owned());
                let initialized = c.is(ConditionType::Initialized);
                if c.is_deleting() {
                    self.deleting_claims.insert(c.name().to_owned());
                } else {
                    self.deleting_claims.remove(c.name());
                }
                if !c.is_deleting()
                    && (!initialized || !registration::has_termination_finalizer(&c))
                {
                    self.maturing.insert(c.name().to_owned());
                } else {
                    self.maturing.remove(c.name());
                }
                let was = self
                    .node_claims
                    .insert(c.name().to_owned(), *c)
                    .is_some_and(|old| old.is(ConditionType::Initialized));
                if initialized && !was {
                    self.initializations += 1;
                }
            }
            Object::Node(n) => {
                if n.deleting {
                    self.deleting_nodes.insert(n.node.name.clone());
                } else {
                    self.deleting_nodes.remove(&n.node.name);
                }
                if let Some(old) = self.nodes.remove(&n.node.name) {
                    self.unindex_node(&old);
                }
                if let (Kubelet::Joined { .. }, Some(claim)) = (&n.kubelet, &n.node_claim) {
                    self.joined.insert(claim.clone(), n.node.name.clone());
                }
                self.nodes.insert(n.node.name.clone(), *n);
            }
            Object::Pod(p) => {
                self.namespaces.entry(p.pod.namespace.clone()).or_default();
                let key = p.pod.key();
                if let Some(node) = pod_event(self.pods.get(&key), &p) {
                    self.note_pod_event(node.to_owned());
                }
                if is_provisionable(&p) {
                    self.provisionable.insert(key.clone());
                } else {
                    self.provisionable.remove(&key);
                }
                if let Some(node) = &p.pod.node_name {
                    self.pods_by_node
                        .entry(node.clone())
                        .or_default()
                        .insert(key.clone());
                }
                if let Some(old) = self.pods.insert(key.clone(), *p) {
                    self.unindex_pod(&old, &key);
                }
            }
            Object::DaemonSet(d) => {
                self.daemon_sets
                    .insert((d.namespace.clone(), d.name.clone()), *d);
            }
            Object::Pdb(p) => {
                self.pdbs
                    .insert((p.budget.namespace.clone(), p.budget.name.clone()), *p);
            }
            Object::Namespace(name, labels) => {
                self.namespaces.insert(name, labels);
            }
            Object::SelectorSource(source) => self.default_spread.insert(*source),
            Object::Dra(object) => self.dra.insert(*object),
        }
    }

    /// Removes an object; returns whether it existed. Bumps the generation when it did.
    pub fn delete(&mut self, key: &ObjectKey) -> bool {
        let mut departed: Option<String> = None;
        let mut changed_claim: Option<String> = None;
        let mut changed_pool = false;
        let existed = match key {
            ObjectKey::NodePool(n) => {
                let existed = self.node_pools.remove(n).is_some();
                // Noted after the generation moves on, below.
                changed_pool = existed;
                existed
            }
            ObjectKey::NodeClaim(n) => {
                changed_claim = Some(n.clone());
                self.maturing.remove(n);
                self.deleting_claims.remove(n);
                self.interruptions.remove(n);
                self.node_claims.remove(n).is_some()
            }
            ObjectKey::Node(n) => {
                self.deleting_nodes.remove(n);
                match self.nodes.remove(n) {
                    Some(old) => {
                        self.unindex_node(&old);
                        true
                    }
                    None => false,
                }
            }
            ObjectKey::Pod(k) => match self.pods.remove(k) {
                Some(old) => {
                    if !old.pod.is_daemon() {
                        departed.clone_from(&old.pod.node_name);
                    }
                    self.provisionable.remove(k);
                    self.unindex_pod(&old, k);
                    self.dra
                        .remove(dra::DraKind::PodClaims, &k.namespace, &k.name);
                    true
                }
                None => false,
            },
            ObjectKey::DaemonSet(ns, n) => {
                self.daemon_sets.remove(&(ns.clone(), n.clone())).is_some()
            }
            ObjectKey::Pdb(ns, n) => self.pdbs.remove(&(ns.clone(), n.clone())).is_some(),
            ObjectKey::Namespace(n) => self.namespaces.remove(n).is_some(),
            ObjectKey::SelectorSource(kind, ns, n) => self.default_spread.remove(*kind, ns, n),
            ObjectKey::Dra(kind, ns, n) => self.dra.remove(*kind, ns, n),
        };
        if existed {
            self.generation += 1;
        }
        if let Some(node) = departed {
            self.note_pod_event(node);
        }
        if let Some(claim) = changed_claim.filter(|_| existed) {
            self.note_claim_change(claim);
        }
        if changed_pool {
            self.pools_changed_at = self.generation;
        }
        existed
    }

    /// Forgets `old` as its claim's joined Node.
    fn unindex_node(&mut self, old: &NodeRecord) {
        if let Some(claim) = &old.node_claim
            && self.joined.get(claim) == Some(&old.node.name)
        {
            self.joined.remove(claim);
        }
    }

    fn note_claim_change(&mut self, claim: String) {
        self.claim_changes.note(claim, self.generation);
    }

    /// NodeClaims applied or deleted after generation `after` (each once, however often it
    /// changed), for consumers that keep per-claim state in step with the index.
    pub fn claims_changed_after(&self, after: u64) -> impl Iterator<Item = &str> + '_ {
        self.claim_changes.after(after).map(|(_, claim)| claim)
    }

    /// Whether a NodePool was applied or deleted after generation `after`.
    pub fn pools_changed_after(&self, after: u64) -> bool {
        self.pools_changed_at > after
    }

    fn note_pod_event(&mut self, node: String) {
        self.pod_events.note(node, self.generation);
    }

    /// Nodes with a pod event after generation `after`, with the generation of each one's
    /// latest: a non-DaemonSet pod was bound to the node (or first seen bound to it), began
    /// terminating on it, or left it (deleted, or finished and dropped from the index). Like
    /// upstream's pod-events controller, this is what moves a NodeClaim's
    /// `lastPodEventTime`, from which `consolidateAfter` counts.
    pub fn pod_events_after(&self, after: u64) -> impl Iterator<Item = (u64, &str)> + '_ {
        self.pod_events.after(after)
    }

    /// Drops `key` from the node index of `old`'s node, unless the pod is still bound there.
    fn unindex_pod(&mut self, old: &PodRecord, key: &PodKey) {
        let Some(node) = &old.pod.node_name else {
            return;
        };
        if self.pods.get(key).and_then(|p| p.pod.node_name.as_ref()) == Some(node) {
            return;
        }
        if let Some(keys) = self.pods_by_node.get_mut(node) {
            keys.remove(key);
            if keys.is_empty() {
                self.pods_by_node.remove(node);
            }
        }
    }

    /// Forgets every object (a watch stream re-listing starts from here); the scheduler
    /// configuration stays.
    pub fn reset(&mut self) {
        let generation = self.generation + 1;
        let mut default_spread = std::mem::take(&mut self.default_spread);
        default_spread.clear_sources();
        let mut dra = std::mem::take(&mut self.dra);
        dra.clear_objects();
        *self = Self::default();
        self.default_spread = default_spread;
        self.dra = dra;
        self.generation = generation;
    }

    /// Replaces the CapacityBuffers with `buffers` (resolved by the caller, see
    /// [`capacity_buffer::resolve`]); bumps the generation and returns true only when
    /// something changed, so a caller may set them on every pass.
    pub fn set_capacity_buffers(
        &mut self,
        buffers: impl IntoIterator<Item = capacity_buffer::ResolvedBuffer>,
    ) -> bool {
        let buffers: BTreeMap<_, _> = buffers.into_iter().map(|b| (b.key.clone(), b)).collect();
        if buffers == self.capacity_buffers {
            return false;
        }
        self.capacity_buffers = buffers;
        self.generation += 1;
        self.buffers_changed_at = self.generation;
        true
    }

    /// The CapacityBuffers, by namespace and name.
    pub fn capacity_buffers(
        &self,
    ) -> &BTreeMap<capacity_buffer::BufferKey, capacity_buffer::ResolvedBuffer> {
        &self.capacity_buffers
    }

    /// Every CapacityBuffer's virtual pods, by buffer then index. They are never in
    /// [`pods`](Self::pods) nor in the kube-scheduler's snapshot; the provisioner's snapshot
    /// lists them with the pending pods.
    pub fn virtual_pods(&self) -> impl Iterator<Item = &Pod> {
        self.capacity_buffers.values().flat_map(|b| b.pods.iter())
    }

    /// Records an interruption notice for NodeClaim `node_claim`, received at
    /// `received_at`. Returns whether the index changed (then the generation moves on): a
    /// notice for a NodeClaim the index does not hold is ignored (the driver hands it again
    /// once the claim is seen), and a repeat keeps the first notice unless the new one
    /// replaces the node and the first did not ([`interruption::Notice::superseded_by`]).
    /// The next disruption pass deletes the NodeClaim of a notice that replaces the node.
    pub fn record_interruption(
        &mut self,
        node_claim: &str,
        kind: karpenter_disruption::InterruptionKind,
        received_at: Millis,
    ) -> bool {
        if !self.node_claims.contains_key(node_claim) {
            return false;
        }
        let notice = interruption::Notice { kind, received_at };
        if self
            .interruptions
            .get(node_claim)
            .is_some_and(|old| !old.superseded_by(&notice))
        {
            return false;
        }
        self.interruptions.insert(node_claim.to_owned(), notice);
        self.generation += 1;
        self.interruptions_changed_at = self.generation;
        true
    }

    /// The interruption notices, by NodeClaim name; a notice goes with its NodeClaim.
    pub fn interruptions(&self) -> &BTreeMap<String, interruption::Notice> {
        &self.interruptions
    }

    /// Whether an interruption notice was recorded after generation `after`.
    pub fn interruptions_changed_after(&self, after: u64) -> bool {
        self.interruptions_changed_at > after
    }

    /// Whether the CapacityBuffers changed after generation `after`.
    pub fn buffers_changed_after(&self, after: u64) -> bool {
        self.buffers_changed_at > after
    }

    /// Sets the scheduler configuration (`--scheduler-config`) whose default spread
    /// constraints [`snapshot`](Self::snapshot) gives pods that declare none; `None` for
    /// none. Bumps the generation.
    pub fn set_scheduler_config(&mut self, config: Option<&scheduler_config::SchedulerConfig>) {
        self.generation += 1;
        self.default_spread.configure(config);
    }

    /// The default spread constraints and the selectors they are deduced from.
    pub fn default_spread(&self) -> &default_spread::DefaultSpread {
        &self.default_spread
    }

    /// Simulates pods' ResourceClaims (`--ignore-dra-requests=false`) or not (the default):
    /// only then are DRA objects kept, pods given their [`device_claims`](Pod::device_claims)
    /// in snapshots, and nodes their instance type's devices. Set it before feeding objects.
    /// Bumps the generation.
    pub fn set_dra_enabled(&mut self, enabled: bool) {
        self.generation += 1;
        self.dra.set_enabled(enabled);
    }

    /// The DRA objects and pods' claim references.
    pub fn dra(&self) -> &dra::Dra {
        &self.dra
    }

    /// Sets the instance types the provider offers `node_pool` (refreshed by the caller
    /// before provisioning, so learnt unavailability shows up).
    pub fn set_instance_types(&mut self, node_pool: &str, types: Vec<Arc<InstanceType>>) {
        self.instance_types.insert(node_pool.to_owned(), types);
    }

    /// The instance types the provider last offered `node_pool` (none when it offered none).
    pub fn instance_types_of(&self, node_pool: &str) -> &[Arc<InstanceType>] {
        self.instance_types
            .get(node_pool)
            .map_or(&[][..], Vec::as_slice)
    }

    /// A counter bumped by every change; equal generations mean identical state.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// NodePools by name.
    pub fn node_pools(&self) -> &BTreeMap<String, NodePool> {
        &self.node_pools
    }

    /// NodeClaims by name.
    pub fn node_claims(&self) -> &BTreeMap<String, NodeClaim> {
        &self.node_claims
    }

    /// Nodes by name.
    pub fn nodes(&self) -> &BTreeMap<String, NodeRecord> {
        &self.nodes
    }

    /// Pods by key.
    pub fn pods(&self) -> &BTreeMap<PodKey, PodRecord> {
        &self.pods
    }

    /// DaemonSets.
    pub fn daemon_sets(&self) -> impl Iterator<Item = &DaemonSet> {
        self.daemon_sets.values()
    }

    /// Karpenter's `karpenter_cluster_utilization_percent`: per resource, the requests of the
    /// pods bound to Karpenter-managed nodes (nodes with a NodeClaim) over those nodes'
    /// allocatable, in percent. Resources no managed node has allocatable of are absent. A
    /// scan of every node and its pods.
    pub fn utilization_percent(&self) -> BTreeMap<String, f64> {
        let mut requested: BTreeMap<String, f64> = BTreeMap::new();
        let mut allocatable: BTreeMap<String, f64> = BTreeMap::new();
        for (name, record) in &self.nodes {
            if record.node_claim.is_none() {
                continue;
            }
            for (k, q) in record.node.allocatable.to_quantities() {
                *allocatable.entry(k).or_default() += q.nanos() as f64 / 1e9;
            }
            for p in self.pods_on(name) {
                for (k, q) in p.pod.requests.to_quantities() {
                    *requested.entry(k).or_default() += q.nanos() as f64 / 1e9;
                }
            }
        }
        allocatable
            .into_iter()
            .filter(|(_, total)| *total > 0.0)
            .map(|(resource, total)| {
                let used = requested.get(&resource).copied().unwrap_or(0.0);
                (resource, 100.0 * used / total)
            })
            .collect()
    }

    /// Pods bound to `node`, in key order.
    pub fn pods_on<'a>(&'a self, node: &'a str) -> impl Iterator<Item = &'a PodRecord> + 'a {
        self.pods_by_node
            .get(node)
            .into_iter()
            .flatten()
            .filter_map(|k| self.pods.get(k))
    }

    /// Pods that must move because their node is being deleted: reschedulable pods
    /// (not DaemonSet or mirror pods; terminating only if a StatefulSet brings them back)
    /// bound to a node with a deletion timestamp, unbound as the solver sees them. Like
    /// upstream's provisioner, the caller plans them with the pending pods, so their new
    /// capacity launches while the old node is still draining.
    pub fn displaced_pods(&self) -> Vec<Pod> {
        let mut pods: Vec<Pod> = self
            .displaced()
            .map(|p| {
                let mut pod = p.pod.clone();
                pod.node_name = None;
                pod
            })
            .collect();
        self.default_spread.apply(&mut pods);
        self.dra.apply(&mut pods);
        pods
    }

    /// How many pods [`displaced_pods`](Self::displaced_pods) returns, without copying them.
    pub fn displaced_pod_count(&self) -> usize {
        self.displaced().count()
    }

    fn displaced(&self) -> impl Iterator<Item = &PodRecord> {
        self.deleting_nodes()
            .flat_map(|(name, _)| self.pods_on(name))
            .filter(|p| karpenter_disruption::candidate::is_reschedulable(&p.pod))
    }

    /// Pods waiting for a node (DaemonSet pods excluded), in key order.
    pub fn pending_pods(&self) -> impl Iterator<Item = &PodRecord> {
        self.pods
            .values()
            .filter(|p| p.pod.node_name.is_none() && !p.pod.is_daemon() && !p.pod.terminating)
    }

    /// Pending pods the kube-scheduler marked unschedulable: what the provisioner plans, in
    /// key order. Costs what it returns, not a scan of every pod.
    pub fn provisionable_pods(&self) -> impl Iterator<Item = &PodRecord> {
        self.provisionable.iter().filter_map(|k| self.pods.get(k))
    }

    /// Nodes with a deletion timestamp, by name; costs what it returns.
    pub fn deleting_nodes(&self) -> impl Iterator<Item = (&String, &NodeRecord)> {
        self.deleting_nodes
            .iter()
            .filter_map(|n| self.nodes.get_key_value(n))
    }

    /// NodeClaims lifecycle still has work for (not deleting; not initialized or without
    /// the termination finalizer), in name order, each with its joined Node if any. Costs
    /// what it returns.
    pub fn maturing_claims(&self) -> impl Iterator<Item = (&NodeClaim, Option<&NodeRecord>)> {
        self.maturing.iter().filter_map(|name| {
            let claim = self.node_claims.get(name)?;
            Some((claim, self.joined_node(name)))
        })
    }

    /// The Node that joined for NodeClaim `claim` (not an in-flight record), found through
    /// the index's claim-to-node map rather than a scan.
    pub fn joined_node(&self, claim: &str) -> Option<&NodeRecord> {
        self.joined.get(claim).and_then(|n| self.nodes.get(n))
    }

    /// NodeClaims being deleted, in name order, each with its Node: the joined one, or the
    /// in-flight record standing for it. Costs what it returns.
    pub fn deleting_claims(&self) -> impl Iterator<Item = (&NodeClaim, Option<&NodeRecord>)> {
        self.deleting_claims.iter().filter_map(|name| {
            let claim = self.node_claims.get(name)?;
            let node = self.joined_node(name).or_else(|| {
                self.nodes
                    .get(name)
                    .filter(|r| r.node_claim.as_ref() == Some(name))
            });
            Some((claim, node))
        })
    }

    /// A counter bumped whenever a NodeClaim becomes `Initialized`: a new node the
    /// kube-scheduler can place pending pods on.
    pub fn initializations(&self) -> u64 {
        self.initializations
    }

    /// The node's lifecycle state as the solver sees it: `Deleting` when it is terminating
    /// or tainted `karpenter.sh/disrupted`, `InFlight` while its NodeClaim has not
    /// initialized, `Ready` otherwise.
    pub fn node_state(&self, record: &NodeRecord) -> NodeState {
        if record.deleting || record.is_disrupted() {
            return NodeState::Deleting;
        }
        let initialized = record.node_claim.as_ref().is_none_or(|c| {
            self.node_claims
                .get(c)
                .is_some_and(|c| c.is(ConditionType::Initialized))
        });
        if initialized {
            NodeState::Ready
        } else {
            NodeState::InFlight
        }
    }

    /// Capacity of each NodePool's nodes and in-flight claims (what counts against limits).
    pub fn node_pool_usage(&self) -> BTreeMap<String, Resources> {
        let mut usage: BTreeMap<String, Resources> = BTreeMap::new();
        for record in self.nodes.values() {
            if let Some(pool) = &record.node.node_pool {
                usage
                    .entry(pool.clone())
                    .or_default()
                    .add_assign(&record.node.capacity);
            }
        }
        usage
    }

    /// The solver's view at `now`. Pending pods are every unbound non-daemon pod (and, for
    /// the provisioner, the CapacityBuffers' virtual pods after them); bound pods are those on
    /// the included nodes. With a scheduler configuration, pods that declare no spread
    /// constraint carry the default ones (see [`default_spread`]): pending pods as the
    /// kube-scheduler and the provisioner plan them, bound pods as a disruption simulation
    /// moves them.
    pub fn snapshot(&self, now: Millis, scope: Scope) -> Snapshot {
        let mut nodes = Vec::new();
        for record in self.nodes.values() {
            let state = self.node_state(record);
            if scope == Scope::Scheduler && state == NodeState::InFlight {
                continue;
            }
            let mut node = record.node.clone();
            node.state = state;
            nodes.push(node);
        }
        let included: BTreeSet<&str> = nodes.iter().map(|n| n.name.as_str()).collect();
        let mut bound_pods: Vec<Pod> = self
            .pods
            .values()
            .filter(|p| {
                p.pod
                    .node_name
                    .as_deref()
                    .is_some_and(|n| included.contains(n))
            })
            .map(|p| p.pod.clone())
            .collect();
        let node_pools = match scope {
            Scope::Scheduler => Vec::new(),
            Scope::Provisioner => self.model_pools(),
        };
        let mut pending_pods: Vec<Pod> = self.pending_pods().map(|p| p.pod.clone()).collect();
        self.default_spread
            .apply(pending_pods.iter_mut().chain(bound_pods.iter_mut()));
        self.dra
            .apply(pending_pods.iter_mut().chain(bound_pods.iter_mut()));
        if scope == Scope::Provisioner {
            pending_pods.extend(self.virtual_pods().cloned());
        }
        Snapshot {
            pending_pods,
            bound_pods,
            nodes,
            node_pools,
            daemon_sets: self.daemon_sets.values().cloned().collect(),
            namespaces: self.namespaces.clone(),
            now,
        }
    }

    /// NodePools in the solver's model, with instance types and usage. A pool that cannot be
    /// converted was rejected when it was applied, so it is skipped here. Static pools
    /// (`replicas`) take no pods from the scheduler, and neither do pools whose NodeClass is
    /// not ready, as in Karpenter.
    fn model_pools(&self) -> Vec<model::NodePool> {
        let usage = self.node_pool_usage();
        self.node_pools
            .values()
            .filter(|p| !p.is_static())
            .filter(|p| self.node_class_readiness(p).usable())
            .filter_map(|p| {
                let types = self
                    .instance_types
                    .get(p.name())
                    .cloned()
                    .unwrap_or_default();
                p.to_model(types, usage.get(p.name()).cloned().unwrap_or_default())
                    .ok()
            })
            .collect()
    }

    /// PodDisruptionBudgets with `disruptions_allowed` computed as the disruption controller
    /// of kube-controller-manager would: healthy (bound and Ready) covered pods minus the
    /// desired healthy count, where the expected count is the number of covered pods and
    /// percentages round up.
    pub fn pdb_budgets(&self, now: Millis) -> Vec<PodDisruptionBudget> {
        self.pdbs
            .values()
            .map(|record| {
                let covered: Vec<&PodRecord> = self
                    .pods
                    .values()
                    .filter(|p| !p.pod.terminating && record.budget.matches(&p.pod))
                    .collect();
                let expected = covered.len() as i64;
                let healthy = covered.iter().filter(|p| p.is_ready(now)).count() as i64;
                let scaled = |v: &IntOrString| match v {
                    IntOrString::Int(n) => i64::from(*n),
                    IntOrString::String(s) => {
                        let pct: i64 = s.trim_end_matches('%').parse().unwrap_or(0);
                        (expected * pct + 99) / 100
                    }
                };
                let desired_healthy = match (&record.min_available, &record.max_unavailable) {
                    (Some(min), _) => scaled(min),
                    (None, Some(max)) => (expected - scaled(max)).max(0),
                    (None, None) => 0,
                };
                let allowed = (healthy - desired_healthy).max(0);
                PodDisruptionBudget {
                    disruptions_allowed: i32::try_from(allowed).unwrap_or(i32::MAX),
                    ..record.budget.clone()
                }
            })
            .collect()
    }

    /// The disruption crate's input at `now`. `disrupting` lists nodes an orchestration
    /// command already holds; `provider_drift` maps NodeClaim names to the drift reason the
    /// cloud provider reports; `nominated` lists nodes the provisioner just nominated pods to.
    pub fn disruption_input(
        &self,
        now: Millis,
        options: &DisruptionOptions,
        disrupting: &BTreeSet<String>,
        provider_drift: &BTreeMap<String, String>,
        nominated: &BTreeSet<String>,
    ) -> DisruptionInput {
        let cluster = self.snapshot(now, Scope::Provisioner);
        // Static pools' claims as upstream counts them, for static drift: the claims of the
        // nodes commands hold are pending disruption.
        let held: BTreeSet<String> = disrupting
            .iter()
            .filter_map(|n| self.nodes.get(n)?.node_claim.clone())
            .collect();
        let mut counts = static_capacity::static_claim_counts(self, &held, &BTreeSet::new());
        let node_pools = self
            .node_pools
            .iter()
            .map(|(name, pool)| {
                let mut settings = PoolDisruption::from_node_pool(pool);
                if let Some(sp) = settings.static_capacity.as_mut() {
                    sp.claims = counts.remove(name).unwrap_or_default();
                }
                (name.clone(), settings)
            })
            .collect();
        let mut nodes = BTreeMap::new();
        for (name, record) in &self.nodes {
            let Some(claim) = record
                .node_claim
                .as_ref()
                .and_then(|c| self.node_claims.get(c))
            else {
                continue;
            };
            let mut info = NodeInfo::from_node_claim(claim);
            info.ready = claim.is(ConditionType::Initialized);
            info.deleting |= record.deleting;
            info.nominated = nominated.contains(name);
            info.provider_drift = provider_drift.get(claim.name()).cloned();
            info.interruption = self.interruptions.get(claim.name()).map(|n| n.kind);
            nodes.insert(name.clone(), info);
        }
        let unhealthy_pods = self
            .pods
            .values()
            .filter(|p| p.pod.node_name.is_some() && !p.is_ready(now))
            .map(|p| p.pod.key())
            .collect();
        DisruptionInput {
            cluster,
            node_pools,
            nodes,
            pdbs: self.pdb_budgets(now),
            unhealthy_pods,
            disrupting: disrupting.clone(),
            options: options.clone(),
        }
    }
}

/// Something a controller decided; the simulator applies it to the index and the fake
/// provider, the operator to the API server and the real provider.
#[derive(Debug, Clone)]
pub enum Action {
    /// Create a NodeClaim from a plan's new claim and launch it through the provider.
    LaunchNodeClaim {
        /// The NodeClaim to create (name, labels, annotations, requirements, resources).
        claim: Box<NodeClaim>,
        /// What the solver planned for it (options, pods, price).
        plan: Box<NewNodeClaim>,
    },
    /// Add the `karpenter.sh/termination` finalizer to a NodeClaim that lacks it.
    AddTerminationFinalizer {
        /// NodeClaim name.
        node_claim: String,
    },
    /// Ask the provider for the instance of a created NodeClaim that has not launched (a
    /// launch that failed transiently, or one a predecessor left unfinished).
    LaunchInstance {
        /// NodeClaim name.
        node_claim: String,
    },
    /// The launched instance's Node joined: sync the claim's labels, taints and finalizer
    /// onto it and set `Registered`.
    RegisterNode {
        /// NodeClaim name.
        node_claim: String,
        /// The Node.
        node: String,
    },
    /// Startup taints are gone and the node is ready: label it and set `Initialized`.
    InitializeNode {
        /// NodeClaim name.
        node_claim: String,
        /// The Node.
        node: String,
    },
    /// Replace an unhealthy node (node repair): its NodeClaim's drain is bounded (the
    /// termination timestamp set `drain_bound` from now; `Some(0)` drains at once) and it is
    /// deleted.
    RepairNodeClaim {
        /// NodeClaim name.
        node_claim: String,
        /// The Node.
        node: String,
        /// The condition type that made it unhealthy.
        condition: String,
        /// How long the drain may take; `None` keeps the NodeClaim's own
        /// `terminationGracePeriod`.
        drain_bound: Option<Millis>,
        /// Decided by the legacy repair controller (`LEGACY_NODE_REPAIR`), whose metrics
        /// report the NodeClaim's own termination mode, as upstream's do.
        legacy: bool,
    },
    /// Add `karpenter.sh/disrupted:NoSchedule` to a node.
    TaintDisrupted {
        /// Node name.
        node: String,
    },
    /// Remove `karpenter.sh/disrupted:NoSchedule` (a disruption command was abandoned).
    UntaintDisrupted {
        /// Node name.
        node: String,
    },
    /// Delete the Node of a NodeClaim being deleted (its finalizer holds it until the drain
    /// and the instance's termination are done).
    DeleteNode {
        /// Node name.
        node: String,
    },
    /// Delete a NodeClaim: its Node is tainted and drained by termination.
    DeleteNodeClaim {
        /// NodeClaim name.
        node_claim: String,
        /// Why: decides whether it is announced as a disruption, and its spelling is the
        /// reason in logs, events and metrics.
        cause: DeletionCause,
    },
    /// Evict a pod through the Eviction API (its PDB allowed it).
    EvictPod {
        /// The pod.
        pod: PodKey,
        /// The node it is drained from.
        node: String,
    },
    /// Delete a pod regardless of PDBs (the NodeClaim's terminationGracePeriod ran out).
    DeletePod {
        /// The pod.
        pod: PodKey,
        /// The node it is drained from.
        node: String,
    },
    /// The node is drained: terminate the instance, remove the Node and the NodeClaim.
    TerminateInstance {
        /// NodeClaim name.
        node_claim: String,
        /// The claim's Node as the index knows it, whose finalizer this removes (`None`:
        /// the claim has no Node in the index).
        node: Option<String>,
    },
    /// Write these conditions on the NodeClaim
    /// ([`reconciler::conditions::apply`]).
    SetClaimConditions {
        /// NodeClaim name.
        node_claim: String,
        /// What to set or remove.
        changes: Vec<reconciler::conditions::ConditionChange>,
    },
    /// A pod event happened on the claim's node: set its `status.lastPodEventTime` to `at`
    /// (upstream's pod-events controller; `consolidateAfter` counts from it).
    StampPodEvent {
        /// NodeClaim name.
        node_claim: String,
        /// The reconciler's `now`.
        at: Millis,
    },
}

impl Action {
    /// Whether this is a NodeClaim lifecycle step (finalizer, launch, register, initialize).
    pub fn is_lifecycle(&self) -> bool {
        matches!(
            self,
            Self::AddTerminationFinalizer { .. }
                | Self::LaunchInstance { .. }
                | Self::RegisterNode { .. }
                | Self::InitializeNode { .. }
        )
    }

    /// The object the action is about: the one whose watch key brings the result back.
    pub fn object(&self) -> ObjectKey {
        match self {
            Self::LaunchNodeClaim { claim, .. } => ObjectKey::NodeClaim(claim.name().to_owned()),
            Self::AddTerminationFinalizer { node_claim }
            | Self::LaunchInstance { node_claim }
            | Self::RegisterNode { node_claim, .. }
            | Self::InitializeNode { node_claim, .. }
            | Self::RepairNodeClaim { node_claim, .. }
            | Self::DeleteNodeClaim { node_claim, .. }
            | Self::TerminateInstance { node_claim, .. }
            | Self::SetClaimConditions { node_claim, .. }
            | Self::StampPodEvent { node_claim, .. } => ObjectKey::NodeClaim(node_claim.clone()),
            Self::TaintDisrupted { node }
            | Self::UntaintDisrupted { node }
            | Self::DeleteNode { node } => ObjectKey::Node(node.clone()),
            Self::EvictPod { pod, .. } | Self::DeletePod { pod, .. } => ObjectKey::Pod(pod.clone()),
        }
    }
}

#[cfg(test)]
mod tests;
