//! API objects as the index keeps them: the controller's half of the "one code path" rule.
//! The simulator builds the index from its timeline, the controller converts what its
//! watches hold with these functions (through [`crate::feed::Feed`]), and both then call the
//! same decision code.

use crate::default_spread::{SelectorSource, SourceKind};
use crate::registration::not_initialized_reason;
use crate::{Kubelet, NodeCondition, NodeRecord, PdbRecord, PodRecord};
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use karpenter_cloudprovider::NodeClaim;
use karpenter_cloudprovider::v1::labels as v1labels;
use karpenter_scheduling::k8s::{ConversionError, node_from_k8s, pdb_from_k8s, pod_from_k8s};
use karpenter_scheduling::model::{self, InstanceType, Millis, NodeState, PodKey};
use karpenter_scheduling::{Quantity, Resources};
use std::collections::BTreeMap;
use std::sync::Arc;

/// The pod's Ready time: the `Ready=True` condition's transition time, if Ready.
pub fn pod_ready_at(pod: &Pod) -> Option<Millis> {
    pod.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "Ready" && c.status == "True")
        .map(|c| {
            c.last_transition_time
                .as_ref()
                .map_or(0, |t| t.0.as_millisecond())
        })
}

/// Whether the pod has finished (Succeeded or Failed): it holds no resources any more.
pub fn is_terminal(pod: &Pod) -> bool {
    matches!(
        pod.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Succeeded" | "Failed")
    )
}

/// Whether Karpenter should provision for `pod`: not bound, not being deleted, not
/// finished, marked `PodScheduled=False` with reason `Unschedulable` by the kube-scheduler,
/// not owned by a DaemonSet (its controller places it) and not a static (mirror) pod.
pub fn is_provisionable(pod: &Pod) -> bool {
    let spec = pod.spec.as_ref();
    if spec
        .and_then(|s| s.node_name.as_deref())
        .is_some_and(|n| !n.is_empty())
    {
        return false;
    }
    if pod.metadata.deletion_timestamp.is_some() || is_terminal(pod) {
        return false;
    }
    if pod
        .metadata
        .annotations
        .as_ref()
        .is_some_and(|a| a.contains_key("kubernetes.io/config.mirror"))
    {
        return false;
    }
    if pod
        .metadata
        .owner_references
        .as_ref()
        .is_some_and(|o| o.iter().any(|r| r.kind == "DaemonSet"))
    {
        return false;
    }
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .into_iter()
        .flatten()
        .any(|c| {
            c.type_ == "PodScheduled"
                && c.status == "False"
                && c.reason.as_deref() == Some("Unschedulable")
        })
}

/// The pod's key in the index.
pub fn pod_key(pod: &Pod) -> PodKey {
    PodKey::new(
        pod.metadata.namespace.clone().unwrap_or_default(),
        pod.metadata.name.clone().unwrap_or_default(),
    )
}

/// A pod as the index keeps it, or `None` for pods that take no capacity (terminal pods).
///
/// # Errors
/// The scheduling model's conversion error (names the pod and field).
pub fn pod_record(pod: &Pod) -> Result<Option<PodRecord>, ConversionError> {
    if is_terminal(pod) {
        return Ok(None);
    }
    Ok(Some(PodRecord {
        pod: pod_from_k8s(pod)?,
        ready_at: pod_ready_at(pod),
        deleting_at: pod
            .metadata
            .deletion_timestamp
            .as_ref()
            .map(|t| t.0.as_millisecond()),
        unschedulable: is_provisionable(pod),
    }))
}

/// A Service's selector, for default spread constraints (`spec.selector`, equality only;
/// `None` without one: such a Service selects no pod).
pub fn service_selector(service: &k8s_openapi::api::core::v1::Service) -> SelectorSource {
    let selector = service.spec.as_ref().and_then(|s| s.selector.as_ref());
    equality_source(SourceKind::Service, &service.metadata, selector)
}

/// A ReplicationController's selector (`spec.selector`, equality only).
pub fn replication_controller_selector(
    rc: &k8s_openapi::api::core::v1::ReplicationController,
) -> SelectorSource {
    let selector = rc.spec.as_ref().and_then(|s| s.selector.as_ref());
    equality_source(SourceKind::ReplicationController, &rc.metadata, selector)
}

fn equality_source(
    kind: SourceKind,
    meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    selector: Option<&BTreeMap<String, String>>,
) -> SelectorSource {
    SelectorSource {
        kind,
        namespace: namespace_or_default(meta),
        name: meta.name.clone().unwrap_or_default(),
        selector: selector.map(|m| karpenter_scheduling::selector::LabelSelector {
            match_labels: m.clone(),
            match_expressions: Vec::new(),
        }),
    }
}

/// A Deployment's, ReplicaSet's or StatefulSet's selector (`spec.selector`).
///
/// # Errors
/// The scheduling model's conversion error for an operator it does not know.
pub fn workload_selector<'a>(
    workload: impl Into<karpenter_scheduling::k8s::Workload<'a>>,
) -> Result<Option<SelectorSource>, ConversionError> {
    use karpenter_scheduling::k8s::Workload;
    let workload: Workload<'a> = workload.into();
    let (kind, meta) = match workload {
        Workload::Deployment(w) => (SourceKind::Deployment, &w.metadata),
        Workload::ReplicaSet(w) => (SourceKind::ReplicaSet, &w.metadata),
        Workload::StatefulSet(w) => (SourceKind::StatefulSet, &w.metadata),
        Workload::Job(_) => return Ok(None),
    };
    Ok(Some(SelectorSource {
        kind,
        namespace: namespace_or_default(meta),
        name: meta.name.clone().unwrap_or_default(),
        selector: workload.selector()?,
    }))
}

/// A manifest may leave the namespace out: the object, and the pods it selects, are then in
/// `default`.
fn namespace_or_default(
    meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
) -> String {
    meta.namespace
        .clone()
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| "default".into())
}

fn startup_taints_of(claim: Option<&NodeClaim>) -> Vec<karpenter_scheduling::taints::Taint> {
    claim
        .map(|c| c.spec.startup_taints.iter().map(|t| t.to_model()).collect())
        .unwrap_or_default()
}

/// A Node as the index keeps it. `claim` is the NodeClaim whose provider ID it carries.
///
/// # Errors
/// The scheduling model's conversion error.
pub fn node_record(node: &Node, claim: Option<&NodeClaim>) -> Result<NodeRecord, ConversionError> {
    let startup = startup_taints_of(claim);
    let converted = node_from_k8s(node, &startup)?;
    let remaining: Vec<_> = node
        .spec
        .as_ref()
        .and_then(|s| s.taints.as_ref())
        .into_iter()
        .flatten()
        .filter(|t| {
            startup
                .iter()
                .any(|s| s.key == t.key && s.effect.as_str() == t.effect)
        })
        .filter_map(|t| startup.iter().find(|s| s.key == t.key).cloned())
        .collect();
    Ok(NodeRecord {
        node: converted,
        node_claim: claim.map(|c| c.name().to_owned()),
        startup_taints: remaining,
        deleting: node.metadata.deletion_timestamp.is_some(),
        kubelet: Kubelet::Joined {
            waiting_for: claim.and_then(|c| not_initialized_reason(c, node)),
            conditions: node
                .status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .into_iter()
                .flatten()
                .map(|c| NodeCondition {
                    type_: c.type_.clone(),
                    status: c.status.clone(),
                    reason: c.reason.clone().unwrap_or_default(),
                    since: c
                        .last_transition_time
                        .as_ref()
                        .map_or(0, |t| t.0.as_millisecond()),
                })
                .collect(),
        },
    })
}

/// A `ResourceList` in scheduler units; entries that do not parse are left out.
pub fn quantities(
    q: &BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>,
) -> Resources {
    let parsed: Vec<(String, Quantity)> = q
        .iter()
        .filter_map(|(k, v)| Quantity::parse(&v.0).ok().map(|q| (k.clone(), q)))
        .collect();
    Resources::from_quantities(parsed.iter().map(|(k, q)| (k.as_str(), q))).unwrap_or_default()
}

/// An in-flight NodeClaim that has no Node yet, as a node the provisioner can place pods on
/// (so the next batch does not launch a second node for the same pods): its labels and
/// single-valued requirements, and its launched allocatable — or, before launch, the
/// requests it was created for.
pub fn in_flight_record(claim: &NodeClaim) -> NodeRecord {
    let mut labels: BTreeMap<String, String> = BTreeMap::new();
    for r in &claim.spec.requirements {
        if r.operator == karpenter_cloudprovider::v1::NodeSelectorOperator::In
            && r.values.len() == 1
        {
            labels.insert(r.key.clone(), r.values[0].clone());
        }
    }
    labels.extend(claim.metadata.labels.clone().unwrap_or_default());
    labels.insert(v1labels::HOSTNAME.to_owned(), claim.name().to_owned());
    let status = claim.status.clone().unwrap_or_default();
    let allocatable = if status.allocatable.is_empty() {
        quantities(&claim.spec.resources.requests)
    } else {
        quantities(&status.allocatable)
    };
    let capacity = if status.capacity.is_empty() {
        allocatable.clone()
    } else {
        quantities(&status.capacity)
    };
    NodeRecord {
        node: model::Node {
            name: claim.name().to_owned(),
            node_pool: claim.node_pool().map(str::to_owned),
            labels,
            annotations: claim.metadata.annotations.clone().unwrap_or_default(),
            taints: claim.spec.taints.iter().map(|t| t.to_model()).collect(),
            allocatable,
            capacity,
            state: NodeState::InFlight,
            price: 0.0,
            created_at: claim
                .metadata
                .creation_timestamp
                .as_ref()
                .map_or(0, |t| t.0.as_millisecond()),
            // Set only inside a consolidation simulation, from the claim's window.
            under_consolidate_after: false,
            // In-flight claims have no ResourceSlices; devices are not tracked here yet.
            devices: Vec::new(),
        },
        node_claim: Some(claim.name().to_owned()),
        startup_taints: Vec::new(),
        deleting: claim.is_deleting(),
        kubelet: Kubelet::NotJoined,
    }
}

/// The hourly price of the offering `node` runs on, from its pool's instance types: the
/// cheapest offering of its instance type in its zone and capacity type (available or not:
/// the node already has it). 0 when the node's labels or pool do not name one, which
/// disruption reports as an unknown price.
pub fn offering_price(
    node: &model::Node,
    instance_types: &BTreeMap<String, Vec<Arc<InstanceType>>>,
) -> f64 {
    let (Some(pool), Some(name), Some(zone), Some(capacity_type)) = (
        node.node_pool.as_deref(),
        node.instance_type(),
        node.zone(),
        node.capacity_type(),
    ) else {
        return 0.0;
    };
    instance_types
        .get(pool)
        .into_iter()
        .flatten()
        .find(|it| it.name == name)
        .and_then(|it| it.offering_price(Some(zone), capacity_type))
        .unwrap_or(0.0)
}

/// A PDB as the index keeps it.
///
/// # Errors
/// The scheduling model's conversion error (an invalid selector, for one).
pub fn pdb_record(pdb: &PodDisruptionBudget) -> Result<PdbRecord, ConversionError> {
    Ok(PdbRecord {
        budget: pdb_from_k8s(pdb)?,
        min_available: pdb.spec.as_ref().and_then(|s| s.min_available.clone()),
        max_unavailable: pdb.spec.as_ref().and_then(|s| s.max_unavailable.clone()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use karpenter_scheduling::model::Offering;

    fn node(labels: &[(&str, &str)]) -> model::Node {
        model::Node {
            name: "n".into(),
            node_pool: Some("default".into()),
            labels: labels
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
            annotations: BTreeMap::new(),
            taints: Vec::new(),
            allocatable: Resources::default(),
            capacity: Resources::default(),
            state: NodeState::Ready,
            price: 0.0,
            created_at: 0,
            under_consolidate_after: false,
            devices: Vec::new(),
        }
    }

    #[test]
    fn a_node_is_priced_by_its_type_zone_and_capacity_type() {
        let offering = |zone: &str, ct: &str, price: f64| Offering {
            zone: zone.into(),
            capacity_type: ct.into(),
            price,
            available: false,
            reservation: None,
        };
        let it = InstanceType {
            devices: Vec::new(),
            name: "m5.large".into(),
            requirements: Default::default(),
            capacity: Resources::default(),
            overhead: Default::default(),
            offerings: vec![
                offering("us-east-1a", "on-demand", 0.096),
                offering("us-east-1a", "spot", 0.04),
                offering("us-east-1b", "spot", 0.03),
            ],
        };
        let types = BTreeMap::from([("default".to_owned(), vec![Arc::new(it)])]);
        let labels = [
            (karpenter_scheduling::labels::INSTANCE_TYPE, "m5.large"),
            (karpenter_scheduling::labels::ZONE, "us-east-1a"),
            (karpenter_scheduling::labels::CAPACITY_TYPE, "spot"),
        ];
        assert_eq!(offering_price(&node(&labels), &types), 0.04);
        assert_eq!(offering_price(&node(&labels[..2]), &types), 0.0);
        let mut other_pool = node(&labels);
        other_pool.node_pool = Some("other".into());
        assert_eq!(offering_price(&other_pool, &types), 0.0);
    }
}
