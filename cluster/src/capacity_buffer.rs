//! CapacityBuffers (`autoscaling.x-k8s.io/v1beta1`, the `CapacityBuffer` feature gate) as
//! Karpenter v1.15 keeps them: spare capacity for a pod shape, held by *virtual pods* that
//! the provisioner plans with the pending pods on every pass and that never exist in the
//! API server.
//!
//! - [`resolve`]: a buffer's pod shape (from its `podTemplateRef` or `scalableRef`), its
//!   number of chunks (`replicas`, `percentage` and `limits`, combined as upstream's
//!   `computeReplicas`) and its virtual pods, or why it is not ready for provisioning.
//!   The caller looks the reference up ([`lookup`] over [`Referents`] for API objects).
//! - The index holds the resolved buffers ([`crate::ClusterState::set_capacity_buffers`]) and
//!   the provisioner's snapshot lists their virtual pods with the pending pods; disruption's
//!   simulations see them too, so consolidation keeps room for them.
//! - [`placements`]: where a plan put each buffer's virtual pods (existing capacity, new
//!   NodeClaims, nowhere) and which nodes hold them; [`desired_status`] turns that into the
//!   buffer's `ReadyForProvisioning` and `Provisioning` conditions.
//!
//! Pure: no API access, no clock (time is an argument).

use k8s_openapi::api::apps::v1 as apps;
use k8s_openapi::api::core::v1 as core;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use karpenter_cloudprovider::CapacityBuffer;
use karpenter_cloudprovider::autoscaling::v1beta1::{
    ACTIVE_PROVISIONING_STRATEGY, BUFFER_NAME_ANNOTATION, BUFFER_NAMESPACE_ANNOTATION,
    CONDITION_PROVISIONING, CONDITION_READY_FOR_PROVISIONING, CapacityBufferStatus,
    FAKE_POD_ANNOTATION, LocalObjectRef, set_condition,
};
use karpenter_cloudprovider::v1::ConditionStatus;
use karpenter_scheduling::k8s::{pod_from_pod_template, pods_from_workload};
use karpenter_scheduling::model::{Labels, Millis, Pod, PodKey};
use karpenter_scheduling::plan::Plan;
use karpenter_scheduling::resources::{CPU, Resources};
use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

/// `ReadyForProvisioning` reason: the template is resolved and the chunks counted.
pub const REASON_RESOLVED: &str = "Resolved";
/// `ReadyForProvisioning` reason: the `scalableRef` names no object.
pub const REASON_SCALABLE_REF_NOT_FOUND: &str = "ScalableRefNotFound";
/// `ReadyForProvisioning` reason: the `podTemplateRef` names no PodTemplate.
pub const REASON_POD_TEMPLATE_NOT_FOUND: &str = "PodTemplateNotFound";
/// `ReadyForProvisioning` reason: anything else (no reference, an unsupported kind or group,
/// a template the scheduler cannot read).
pub const REASON_RESOLUTION_FAILED: &str = "ResolutionFailed";
/// `Provisioning` reason: every virtual pod fits on existing (or launching) capacity.
pub const REASON_FITS_EXISTING_CAPACITY: &str = "FitsExistingCapacity";
/// `Provisioning` reason: some virtual pods need new NodeClaims, or fit nowhere.
pub const REASON_REQUIRES_NEW_CAPACITY: &str = "RequiresNewCapacity";
/// `Provisioning` reason: the buffer is not ready for provisioning.
pub const REASON_NOT_READY_FOR_PROVISIONING: &str = "NotReadyForProvisioning";
/// `Provisioning` reason: the buffer keeps zero chunks.
pub const REASON_BUFFER_EMPTY: &str = "BufferEmpty";
/// Upstream's `VirtualPodPriority`: the lowest priority, stamped on every virtual pod.
pub const VIRTUAL_POD_PRIORITY: i32 = i32::MIN;

/// A CapacityBuffer's namespace and name.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct BufferKey {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
}

impl BufferKey {
    /// The key of `buffer`.
    pub fn of(buffer: &CapacityBuffer) -> Self {
        Self {
            namespace: buffer.namespace().to_owned(),
            name: buffer.name().to_owned(),
        }
    }
}

impl fmt::Display for BufferKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// What a buffer's spec refers to (in the buffer's namespace).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reference<'a> {
    /// `podTemplateRef`: a PodTemplate.
    PodTemplate {
        /// Its name.
        name: &'a str,
    },
    /// `scalableRef`: a workload with a scale subresource.
    Scalable {
        /// `apiGroup` (empty reads as `apps`).
        group: &'a str,
        /// `kind`.
        kind: &'a str,
        /// `name`.
        name: &'a str,
    },
}

/// The pod shape a reference resolved to.
#[derive(Debug, Clone, PartialEq)]
pub struct Template {
    /// One chunk as the scheduler sees a pod: requests (sidecars and overhead counted),
    /// selectors, affinity, tolerations, spread constraints, and the template's labels.
    pub pod: Pod,
    /// For a `scalableRef`: the workload's `spec.replicas` (1 when unset, as upstream).
    pub scalable_replicas: Option<i32>,
    /// For a `podTemplateRef`: the PodTemplate's name and `metadata.generation`.
    pub pod_template: Option<(String, i64)>,
}

/// How looking a reference up went.
#[derive(Debug, Clone, PartialEq)]
pub enum Lookup {
    /// The object exists and its template could be read.
    Found(Box<Template>),
    /// No such object; the message says which (`podtemplates "web" not found`).
    NotFound(String),
    /// The reference cannot be resolved (an unsupported kind or group, a template the
    /// scheduler cannot represent); the message says why.
    Failed(String),
}

/// Where a buffer stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BufferState {
    /// The shape is resolved and the chunks counted (`ReadyForProvisioning=True`).
    Ready {
        /// How many chunks (virtual pods) it keeps.
        replicas: i32,
        /// The PodTemplate and its generation, for a `podTemplateRef`.
        pod_template: Option<(String, i64)>,
    },
    /// It is not (`ReadyForProvisioning=False`).
    NotReady {
        /// The condition's reason.
        reason: &'static str,
        /// The condition's message.
        message: String,
    },
}

/// A CapacityBuffer as the index keeps it.
#[derive(Debug, Clone, PartialEq)]
pub struct ResolvedBuffer {
    /// Namespace and name.
    pub key: BufferKey,
    /// `spec.provisioningStrategy`; every strategy is kept as the active one, as Karpenter
    /// v1.15 does ([`ResolvedBuffer::unknown_strategy`] says when that is not what was
    /// asked for).
    pub strategy: Option<String>,
    /// Resolved or not, and why.
    pub state: BufferState,
    /// Its virtual pods: `replicas` copies of the template's pod when ready, none otherwise.
    pub pods: Vec<Pod>,
}

impl ResolvedBuffer {
    /// The chunks it keeps (0 unless ready).
    pub fn replicas(&self) -> i32 {
        match self.state {
            BufferState::Ready { replicas, .. } => replicas,
            BufferState::NotReady { .. } => 0,
        }
    }

    /// What the buffer adds to a one-off plan (`karpenter plan`), or why it adds nothing.
    pub fn plan_note(&self) -> String {
        match &self.state {
            BufferState::Ready { replicas, .. } => format!(
                "CapacityBuffer {} planned as {replicas} virtual pod(s) (as the controller does with the CapacityBuffer feature gate on)",
                self.key
            ),
            BufferState::NotReady { reason, message } => format!(
                "CapacityBuffer {} is not ready for provisioning ({reason}): {message}",
                self.key
            ),
        }
    }

    /// A provisioning strategy other than `buffer.x-k8s.io/active-capacity`, which Karpenter
    /// keeps as the active one all the same.
    pub fn unknown_strategy(&self) -> Option<&str> {
        self.strategy
            .as_deref()
            .filter(|s| *s != ACTIVE_PROVISIONING_STRATEGY)
    }
}

/// The objects a buffer may reference, found by namespace and name (the controller's watch
/// stores, or the documents of a plan).
pub trait Referents {
    /// The PodTemplate `namespace/name`.
    fn pod_template(&self, namespace: &str, name: &str) -> Option<Arc<core::PodTemplate>>;
    /// The Deployment `namespace/name`.
    fn deployment(&self, namespace: &str, name: &str) -> Option<Arc<apps::Deployment>>;
    /// The StatefulSet `namespace/name`.
    fn stateful_set(&self, namespace: &str, name: &str) -> Option<Arc<apps::StatefulSet>>;
    /// The ReplicaSet `namespace/name`.
    fn replica_set(&self, namespace: &str, name: &str) -> Option<Arc<apps::ReplicaSet>>;
}

/// Referents held in maps keyed by namespace and name, for callers that read objects once.
#[derive(Debug, Clone, Default)]
pub struct ReferentMaps {
    /// PodTemplates.
    pub pod_templates: BTreeMap<(String, String), Arc<core::PodTemplate>>,
    /// Deployments.
    pub deployments: BTreeMap<(String, String), Arc<apps::Deployment>>,
    /// StatefulSets.
    pub stateful_sets: BTreeMap<(String, String), Arc<apps::StatefulSet>>,
    /// ReplicaSets.
    pub replica_sets: BTreeMap<(String, String), Arc<apps::ReplicaSet>>,
}

/// `metadata`'s namespace (`default` when unset) and name.
pub fn namespaced_key(
    meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
) -> (String, String) {
    (
        meta.namespace
            .clone()
            .filter(|n| !n.is_empty())
            .unwrap_or_else(|| "default".into()),
        meta.name.clone().unwrap_or_default(),
    )
}

impl ReferentMaps {
    /// Keeps `object` if it is a kind a buffer may reference; whether it was.
    pub fn insert_value(&mut self, kind: &str, value: &serde_json::Value) -> Result<bool, String> {
        fn put<T: serde::de::DeserializeOwned>(
            map: &mut BTreeMap<(String, String), Arc<T>>,
            value: &serde_json::Value,
            meta: impl Fn(&T) -> &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
        ) -> Result<bool, String> {
            let object: T = serde_json::from_value(value.clone()).map_err(|e| e.to_string())?;
            map.insert(namespaced_key(meta(&object)), Arc::new(object));
            Ok(true)
        }
        match kind {
            "PodTemplate" => put(&mut self.pod_templates, value, |o: &core::PodTemplate| {
                &o.metadata
            }),
            "Deployment" => put(&mut self.deployments, value, |o: &apps::Deployment| {
                &o.metadata
            }),
            "StatefulSet" => put(&mut self.stateful_sets, value, |o: &apps::StatefulSet| {
                &o.metadata
            }),
            "ReplicaSet" => put(&mut self.replica_sets, value, |o: &apps::ReplicaSet| {
                &o.metadata
            }),
            _ => Ok(false),
        }
    }
}

impl Referents for ReferentMaps {
    fn pod_template(&self, namespace: &str, name: &str) -> Option<Arc<core::PodTemplate>> {
        self.pod_templates
            .get(&(namespace.to_owned(), name.to_owned()))
            .cloned()
    }
    fn deployment(&self, namespace: &str, name: &str) -> Option<Arc<apps::Deployment>> {
        self.deployments
            .get(&(namespace.to_owned(), name.to_owned()))
            .cloned()
    }
    fn stateful_set(&self, namespace: &str, name: &str) -> Option<Arc<apps::StatefulSet>> {
        self.stateful_sets
            .get(&(namespace.to_owned(), name.to_owned()))
            .cloned()
    }
    fn replica_set(&self, namespace: &str, name: &str) -> Option<Arc<apps::ReplicaSet>> {
        self.replica_sets
            .get(&(namespace.to_owned(), name.to_owned()))
            .cloned()
    }
}

/// The pod of a workload's template (from its one-replica expansion) and the workload's
/// `spec.replicas` (1 when unset, as upstream reads it).
fn workload_template(
    pods: Result<Vec<Pod>, karpenter_scheduling::k8s::ConversionError>,
    replicas: Option<i32>,
) -> Lookup {
    match pods {
        Ok(mut pods) if !pods.is_empty() => {
            let mut pod = pods.swap_remove(0);
            pod.owner = None;
            Lookup::Found(Box::new(Template {
                pod,
                scalable_replicas: Some(replicas.unwrap_or(1)),
                pod_template: None,
            }))
        }
        Ok(_) => Lookup::Failed("the workload's template yields no pod".into()),
        Err(e) => Lookup::Failed(e.to_string()),
    }
}

/// Looks `reference` up among `referents` in `namespace`, as upstream's
/// `ResolveCapacityBuffer`: a PodTemplate by name, or a Deployment, StatefulSet or
/// ReplicaSet of group `apps` (an empty group reads as `apps`).
pub fn lookup(referents: &dyn Referents, namespace: &str, reference: &Reference<'_>) -> Lookup {
    match *reference {
        Reference::PodTemplate { name } => match referents.pod_template(namespace, name) {
            None => Lookup::NotFound(format!("podtemplates {name:?} not found")),
            Some(pt) => match pod_from_pod_template(&pt) {
                Ok(pod) => Lookup::Found(Box::new(Template {
                    pod,
                    scalable_replicas: None,
                    pod_template: Some((name.to_owned(), pt.metadata.generation.unwrap_or(0))),
                })),
                Err(e) => Lookup::Failed(e.to_string()),
            },
        },
        Reference::Scalable { group, kind, name } => {
            let group = if group.is_empty() { "apps" } else { group };
            if group != "apps" {
                return Lookup::Failed(format!("unsupported scalableRef API group {group:?}"));
            }
            let not_found =
                |plural: &str| Lookup::NotFound(format!("{plural}.apps {name:?} not found"));
            match kind {
                "Deployment" => match referents.deployment(namespace, name) {
                    None => not_found("deployments"),
                    Some(w) => {
                        let mut one = apps::Deployment::clone(&w);
                        one.spec.replicas = Some(1);
                        let replicas = w.spec.replicas;
                        workload_template(pods_from_workload(&one), replicas)
                    }
                },
                "StatefulSet" => match referents.stateful_set(namespace, name) {
                    None => not_found("statefulsets"),
                    Some(w) => {
                        let mut one = apps::StatefulSet::clone(&w);
                        one.spec.replicas = Some(1);
                        one.spec.ordinals = None;
                        let replicas = w.spec.replicas;
                        workload_template(pods_from_workload(&one), replicas)
                    }
                },
                "ReplicaSet" => match referents.replica_set(namespace, name) {
                    None => not_found("replicasets"),
                    Some(w) => {
                        let mut one = apps::ReplicaSet::clone(&w);
                        one.spec.replicas = Some(1);
                        let replicas = w.spec.replicas;
                        workload_template(pods_from_workload(&one), replicas)
                    }
                },
                other => Lookup::Failed(format!("unsupported kind {other:?}")),
            }
        }
    }
}

/// The reference `buffer`'s spec makes (`podTemplateRef` first), if any.
pub fn reference_of(buffer: &CapacityBuffer) -> Option<Reference<'_>> {
    let spec = &buffer.spec;
    if let Some(r) = &spec.pod_template_ref {
        return Some(Reference::PodTemplate { name: &r.name });
    }
    spec.scalable_ref.as_ref().map(|r| Reference::Scalable {
        group: &r.api_group,
        kind: &r.kind,
        name: &r.name,
    })
}

/// Upstream's `calculatePercentageReplicas`: `percentage` % of `scalable` replicas, rounded
/// up, and at least 1 when both are positive.
pub fn percentage_replicas(scalable: i32, percentage: i32) -> i32 {
    let exact = i64::from(scalable) * i64::from(percentage);
    let up = if exact > 0 {
        (exact + 99) / 100
    } else {
        exact / 100
    };
    let n = i32::try_from(up).unwrap_or(i32::MAX);
    if n < 1 && percentage > 0 && scalable > 0 {
        1
    } else {
        n
    }
}

/// Upstream's `calculateLimitReplicas`: how many chunks of `requests` fit within `limits`,
/// the least over every resource both name (`floor(limit / request)`, in thousandths);
/// `None` when they share no requested resource (the limits then constrain nothing). A
/// limit that is not a quantity was refused by validation and constrains nothing here.
pub fn limit_replicas(
    limits: &BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>,
    requests: &Resources,
) -> Option<i32> {
    let mut fewest: Option<i64> = None;
    for (name, limit) in limits {
        let request = requests.get(name);
        if request <= 0 {
            continue;
        }
        let Ok(limit) = karpenter_scheduling::Quantity::parse(&limit.0) else {
            continue;
        };
        // The model keeps cpu in millicores and everything else in whole units.
        let request_milli = if name == CPU {
            i128::from(request)
        } else {
            i128::from(request) * 1000
        };
        let n = i128::from(limit.milli_value()).div_euclid(request_milli);
        let n = i64::try_from(n.clamp(i128::from(i64::MIN), i128::from(i64::MAX))).unwrap_or(0);
        fewest = Some(fewest.map_or(n, |f| f.min(n)));
    }
    fewest.map(|n| i32::try_from(n.clamp(0, i64::from(i32::MAX))).unwrap_or(i32::MAX))
}

/// Upstream's `computeReplicas` (Cluster Autoscaler's semantics): the larger of `replicas`
/// and the percentage of the `scalableRef`'s replicas, capped by what fits `limits`; with
/// neither, what fits `limits`; with nothing, 0.
pub fn compute_replicas(buffer: &CapacityBuffer, template: &Template) -> i32 {
    let spec = &buffer.spec;
    let mut candidates = Vec::new();
    if template.pod_template.is_none()
        && let (Some(pct), Some(scalable)) = (spec.percentage, template.scalable_replicas)
        && scalable > 0
    {
        candidates.push(percentage_replicas(scalable, pct));
    }
    if let Some(r) = spec.replicas {
        candidates.push(r);
    }
    let desired = candidates.iter().copied().max();
    let limited = spec
        .limits
        .as_ref()
        .and_then(|l| limit_replicas(l, &template.pod.requests));
    match (desired, limited) {
        (Some(d), Some(l)) => d.min(l),
        (None, Some(l)) => l,
        (Some(d), None) => d,
        (None, None) => 0,
    }
}

/// Whether `pod` is a CapacityBuffer's virtual pod.
pub fn is_virtual(pod: &Pod) -> bool {
    pod.annotations
        .get(FAKE_POD_ANNOTATION)
        .is_some_and(|v| v == "true")
}

/// The buffer a virtual pod belongs to.
pub fn buffer_of(pod: &Pod) -> Option<BufferKey> {
    if !is_virtual(pod) {
        return None;
    }
    let namespace = pod.annotations.get(BUFFER_NAMESPACE_ANNOTATION)?;
    let name = pod.annotations.get(BUFFER_NAME_ANNOTATION)?;
    Some(BufferKey {
        namespace: namespace.clone(),
        name: name.clone(),
    })
}

/// Upstream's `BuildVirtualPods`: `replicas` copies of `template`, named
/// `capacity-buffer-<buffer>-<i>` (from 1) in the buffer's namespace, with deterministic UIDs
/// (`<buffer uid>-<i>`), the template's labels (so spread and affinity see them), the fake-pod
/// and buffer annotations, the lowest priority, and no node, owner or volumes.
pub fn virtual_pods(
    key: &BufferKey,
    uid: &str,
    created_at: Millis,
    template: &Pod,
    replicas: i32,
) -> Vec<Pod> {
    let annotations: Labels = [
        (FAKE_POD_ANNOTATION, "true"),
        (BUFFER_NAME_ANNOTATION, key.name.as_str()),
        (BUFFER_NAMESPACE_ANNOTATION, key.namespace.as_str()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect();
    (1..=replicas.max(0))
        .map(|i| Pod {
            namespace: key.namespace.clone(),
            name: format!("capacity-buffer-{}-{i}", key.name),
            uid: format!("{uid}-{i}"),
            annotations: annotations.clone(),
            owner: None,
            node_name: None,
            volume_requirements: Vec::new(),
            priority: VIRTUAL_POD_PRIORITY,
            created_at,
            started_at: None,
            terminating: false,
            moved_by_consolidation: false,
            ..template.clone()
        })
        .collect()
}

/// Resolves `buffer`: finds its template through `find` (called at most once, with the
/// buffer's namespace and reference), counts its chunks and builds its virtual pods, or says
/// why it is not ready for provisioning, with upstream's reasons.
pub fn resolve(
    buffer: &CapacityBuffer,
    find: impl FnOnce(&str, &Reference<'_>) -> Lookup,
) -> ResolvedBuffer {
    let key = BufferKey::of(buffer);
    let not_ready =
        |reason: &'static str, message: String| BufferState::NotReady { reason, message };
    let (state, pods) = match reference_of(buffer) {
        None => (
            not_ready(
                REASON_RESOLUTION_FAILED,
                "Neither podTemplateRef nor scalableRef is set".into(),
            ),
            Vec::new(),
        ),
        Some(reference) => {
            let not_found = match reference {
                Reference::PodTemplate { .. } => REASON_POD_TEMPLATE_NOT_FOUND,
                Reference::Scalable { .. } => REASON_SCALABLE_REF_NOT_FOUND,
            };
            match find(buffer.namespace(), &reference) {
                Lookup::NotFound(message) => (not_ready(not_found, message), Vec::new()),
                Lookup::Failed(message) => {
                    (not_ready(REASON_RESOLUTION_FAILED, message), Vec::new())
                }
                Lookup::Found(template) => {
                    let replicas = compute_replicas(buffer, &template);
                    let created = buffer
                        .metadata
                        .creation_timestamp
                        .as_ref()
                        .map_or(0, |t| t.0.as_millisecond());
                    let uid = buffer.metadata.uid.as_deref().unwrap_or(&key.name);
                    let pods = virtual_pods(&key, uid, created, &template.pod, replicas);
                    (
                        BufferState::Ready {
                            replicas,
                            pod_template: template.pod_template.clone(),
                        },
                        pods,
                    )
                }
            }
        }
    };
    ResolvedBuffer {
        key,
        strategy: buffer.spec.provisioning_strategy.clone(),
        state,
        pods,
    }
}

/// Where one provisioning plan put a buffer's virtual pods.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Placement {
    /// On existing nodes (in-flight NodeClaims included).
    pub existing: usize,
    /// On new NodeClaims.
    pub new_claims: usize,
    /// Nowhere (a NodePool limit, no compatible instance type …).
    pub failed: usize,
    /// Why the first of those could not be placed.
    pub failure: Option<String>,
}

impl Placement {
    /// Whether every one of `desired` virtual pods fits on existing capacity.
    pub fn fits(&self, desired: usize) -> bool {
        self.new_claims == 0 && self.failed == 0 && self.existing == desired && desired > 0
    }
}

impl Placement {
    /// One line for logs: where the virtual pods of `buffer` (keeping `replicas` chunks)
    /// went.
    pub fn describe(&self, buffer: &BufferKey, replicas: i32) -> String {
        let mut line = format!(
            "capacitybuffer {buffer}: {} of {replicas} virtual pod(s) fit existing capacity",
            self.existing
        );
        if self.new_claims > 0 {
            line.push_str(&format!(", {} need new nodeclaims", self.new_claims));
        }
        if self.failed > 0 {
            line.push_str(&format!(", {} fit nowhere", self.failed));
            if let Some(why) = &self.failure {
                line.push_str(&format!(" ({why})"));
            }
        }
        line
    }
}

/// What a plan did with the virtual pods.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Placements {
    /// Per buffer.
    pub buffers: BTreeMap<BufferKey, Placement>,
    /// How many virtual pods each existing node (or in-flight NodeClaim) holds: emptiness
    /// leaves such nodes alone.
    pub nodes: BTreeMap<String, usize>,
}

/// Classifies the virtual pods of `plan` by buffer (upstream's `classifyBufferPods` and
/// `bufferPodCountsFromResults`); `pods` finds a planned pod's annotations by key.
pub fn placements<'a>(plan: &Plan, pod: impl Fn(&PodKey) -> Option<&'a Pod>) -> Placements {
    let mut out = Placements::default();
    let buffer = |k: &PodKey| pod(k).and_then(buffer_of);
    for e in &plan.existing {
        for k in &e.pods {
            if let Some(b) = buffer(k) {
                out.buffers.entry(b).or_default().existing += 1;
                *out.nodes.entry(e.node.clone()).or_default() += 1;
            }
        }
    }
    for c in &plan.new_node_claims {
        for k in &c.pods {
            if let Some(b) = buffer(k) {
                out.buffers.entry(b).or_default().new_claims += 1;
            }
        }
    }
    for u in &plan.unschedulable {
        if let Some(b) = buffer(&u.pod) {
            let p = out.buffers.entry(b).or_default();
            p.failed += 1;
            p.failure.get_or_insert_with(|| u.reason.clone());
        }
    }
    out
}

/// `plan` without virtual pods: what the plan means for real pods (events, metrics, logs).
/// NodeClaims launched only for buffers stay, with no pods.
pub fn without_virtual_pods(plan: &mut Plan, is_virtual_key: impl Fn(&PodKey) -> bool) {
    for e in &mut plan.existing {
        e.pods.retain(|k| !is_virtual_key(k));
    }
    plan.existing.retain(|e| !e.pods.is_empty());
    for c in &mut plan.new_node_claims {
        c.pods.retain(|k| !is_virtual_key(k));
    }
    plan.unschedulable.retain(|u| !is_virtual_key(&u.pod));
}

/// The `Provisioning` condition a buffer should carry, as upstream's
/// `computeProvisioningCondition`: `None` leaves it as it is (a ready buffer no plan has
/// placed yet).
pub fn provisioning_condition(
    resolved: &ResolvedBuffer,
    placement: Option<&Placement>,
) -> Option<(ConditionStatus, &'static str, String)> {
    let BufferState::Ready { replicas, .. } = resolved.state else {
        return Some((
            ConditionStatus::False,
            REASON_NOT_READY_FOR_PROVISIONING,
            "Buffer is not ReadyForProvisioning".into(),
        ));
    };
    if replicas == 0 {
        return Some((
            ConditionStatus::False,
            REASON_BUFFER_EMPTY,
            "Buffer has zero desired replicas".into(),
        ));
    }
    let p = placement?;
    let desired = usize::try_from(replicas).unwrap_or(0);
    if p.new_claims > 0 || p.failed > 0 {
        let mut message = format!(
            "{}/{desired} virtual pods required new capacity, {} failed",
            p.new_claims, p.failed
        );
        if let Some(why) = &p.failure {
            message.push_str(&format!(": {why}"));
        }
        return Some((
            ConditionStatus::False,
            REASON_REQUIRES_NEW_CAPACITY,
            message,
        ));
    }
    p.fits(desired).then(|| {
        (
            ConditionStatus::True,
            REASON_FITS_EXISTING_CAPACITY,
            format!("All {desired} virtual pods fit on existing capacity"),
        )
    })
}

/// The status `buffer` should have: its resolution (`ReadyForProvisioning`, `replicas`,
/// the PodTemplate and its generation, the strategy) and, from the last plan's `placement`,
/// `Provisioning`. Conditions keep their `lastTransitionTime` while their status holds; `now`
/// stamps a transition. Compare with the current status to decide whether to write.
pub fn desired_status(
    buffer: &CapacityBuffer,
    resolved: &ResolvedBuffer,
    placement: Option<&Placement>,
    now: &Time,
) -> CapacityBufferStatus {
    let mut status = buffer.status.clone().unwrap_or_default();
    let generation = buffer.metadata.generation;
    status.provisioning_strategy = buffer.spec.provisioning_strategy.clone();
    match &resolved.state {
        BufferState::Ready {
            replicas,
            pod_template,
        } => {
            match pod_template {
                Some((name, template_generation)) => {
                    status.pod_template_ref = Some(LocalObjectRef { name: name.clone() });
                    status.pod_template_generation = Some(*template_generation);
                }
                None => {
                    status.pod_template_ref = None;
                    status.pod_template_generation = None;
                }
            }
            status.replicas = Some(*replicas);
            set_condition(
                &mut status.conditions,
                CONDITION_READY_FOR_PROVISIONING,
                ConditionStatus::True,
                REASON_RESOLVED,
                "Pod template resolved successfully",
                generation,
                now,
            );
        }
        BufferState::NotReady { reason, message } => {
            set_condition(
                &mut status.conditions,
                CONDITION_READY_FOR_PROVISIONING,
                ConditionStatus::False,
                reason,
                message,
                generation,
                now,
            );
        }
    }
    if let Some((s, reason, message)) = provisioning_condition(resolved, placement) {
        set_condition(
            &mut status.conditions,
            CONDITION_PROVISIONING,
            s,
            reason,
            &message,
            generation,
            now,
        );
    }
    status
}

#[cfg(test)]
mod tests;
