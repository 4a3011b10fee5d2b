//! Feeding the shared [`ClusterState`] index from API objects.
//!
//! The conversions here are the operator's half of the "one code path" rule: the simulator
//! builds the index from its timeline, the controller from its watch stores, and both then
//! call the same `cluster::*` decision functions. They are pure (no I/O) so tests can build
//! an index from plain objects.

use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use karpenter_cloudprovider::v1::{ConditionType, labels as v1labels};
use karpenter_cloudprovider::{NodeClaim, NodePool};
use karpenter_cluster::{ClusterState, NodeRecord, Object, ObjectKey, PdbRecord, PodRecord};
use karpenter_scheduling::k8s::{daemonset_from_k8s, node_from_k8s, pdb_from_k8s, pod_from_k8s};
use karpenter_scheduling::model::{self, InstanceType, Millis, NodeState, PodKey};
use karpenter_scheduling::{Quantity, Resources};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use super::state::Stores;

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
pub fn pod_record(
    pod: &Pod,
) -> Result<Option<PodRecord>, karpenter_scheduling::k8s::ConversionError> {
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

fn startup_taints_of(claim: Option<&NodeClaim>) -> Vec<karpenter_scheduling::taints::Taint> {
    claim
        .map(|c| c.spec.startup_taints.iter().map(|t| t.to_model()).collect())
        .unwrap_or_default()
}

/// A Node as the index keeps it. `claim` is the NodeClaim whose provider ID it carries.
///
/// # Errors
/// The scheduling model's conversion error.
pub fn node_record(
    node: &Node,
    claim: Option<&NodeClaim>,
) -> Result<NodeRecord, karpenter_scheduling::k8s::ConversionError> {
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
    })
}

fn quantities(
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
        },
        node_claim: Some(claim.name().to_owned()),
        startup_taints: Vec::new(),
        deleting: claim.is_deleting(),
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

/// What an indexed object was built from: its kind of source and the resource versions
/// (and the instance-type version, for prices) of every API object that went into it.
/// `None` when an input has no resource version: then it is rebuilt every time.
type Fingerprint = Option<String>;

fn fingerprint(parts: &[Option<&str>]) -> Fingerprint {
    let mut out = String::new();
    for p in parts {
        out.push_str(p.filter(|v| !v.is_empty())?);
        out.push('/');
    }
    Some(out)
}

/// Feeds the index from the watch stores incrementally: each pass converts and applies only
/// the objects whose resource version (or whose joined NodeClaim, or the instance types
/// pricing it) changed since the last pass, and deletes what is gone. A pass over an
/// unchanged cluster leaves the index, and its generation, untouched, so the reconciler
/// skips work that cannot decide differently. Objects the scheduling model cannot
/// represent are skipped and logged at debug level (the provisioner reports unschedulable
/// pods itself).
#[derive(Debug, Default)]
pub struct Feed {
    seen: BTreeMap<ObjectKey, Fingerprint>,
    types_version: Option<u64>,
}

impl Feed {
    /// Brings `state` in line with `stores`. `instance_types` are the provider's offerings
    /// per pool, `types_version` changes whenever they do. Returns how many objects were
    /// applied or deleted.
    pub fn sync(
        &mut self,
        state: &mut ClusterState,
        stores: &Stores,
        instance_types: &BTreeMap<String, Vec<Arc<InstanceType>>>,
        types_version: u64,
    ) -> usize {
        let types_changed = self.types_version != Some(types_version);
        if types_changed {
            for (pool, types) in instance_types {
                state.set_instance_types(pool, types.clone());
            }
            self.types_version = Some(types_version);
        }
        let types = types_version.to_string();
        let mut visited: BTreeMap<ObjectKey, Fingerprint> = BTreeMap::new();
        let mut changes = 0;
        let mut put = |state: &mut ClusterState,
                       key: ObjectKey,
                       print: Fingerprint,
                       build: &mut dyn FnMut() -> Option<Object>| {
            if print.is_some() && self.seen.get(&key) == Some(&print) {
                visited.insert(key, print);
                return;
            }
            if let Some(object) = build() {
                state.apply(object);
                changes += 1;
                visited.insert(key, print);
            }
        };

        let claims = stores.node_claims_sorted();
        let by_provider: BTreeMap<&str, &NodeClaim> = claims
            .iter()
            .filter(|c| !c.provider_id().is_empty())
            .map(|c| (c.provider_id(), c.as_ref()))
            .collect();
        for pool in stores.node_pools.state() {
            let print = fingerprint(&[pool.metadata.resource_version.as_deref()]);
            put(
                state,
                ObjectKey::NodePool(pool.name().to_owned()),
                print,
                &mut || Some(Object::NodePool(Box::new(NodePool::clone(&pool)))),
            );
        }
        let mut with_node: BTreeSet<String> = BTreeSet::new();
        for node in stores.nodes.state() {
            let claim = by_provider
                .get(karpenter_cluster::node_provider_id(&node))
                .copied();
            if let Some(c) = claim {
                with_node.insert(c.name().to_owned());
            }
            let name = node.metadata.name.clone().unwrap_or_default();
            let print = fingerprint(&[
                Some("node"),
                node.metadata.resource_version.as_deref(),
                Some(claim.map_or("-", |c| {
                    c.metadata.resource_version.as_deref().unwrap_or("")
                })),
                Some(&types),
            ]);
            put(
                state,
                ObjectKey::Node(name),
                print,
                &mut || match node_record(&node, claim) {
                    Ok(mut record) => {
                        record.node.price = offering_price(&record.node, instance_types);
                        Some(Object::Node(Box::new(record)))
                    }
                    Err(e) => {
                        tracing::debug!(error = %e, "skipping node");
                        None
                    }
                },
            );
        }
        for claim in &claims {
            let rv = claim.metadata.resource_version.as_deref();
            put(
                state,
                ObjectKey::NodeClaim(claim.name().to_owned()),
                fingerprint(&[rv]),
                &mut || Some(Object::NodeClaim(Box::new(NodeClaim::clone(claim)))),
            );
            if !with_node.contains(claim.name()) && !claim.is(ConditionType::Registered) {
                let print = fingerprint(&[Some("in-flight"), rv, Some(&types)]);
                put(
                    state,
                    ObjectKey::Node(claim.name().to_owned()),
                    print,
                    &mut || {
                        let mut record = in_flight_record(claim);
                        record.node.price = offering_price(&record.node, instance_types);
                        Some(Object::Node(Box::new(record)))
                    },
                );
            }
        }
        for pod in stores.pods.state() {
            let key = ObjectKey::Pod(pod_key(&pod));
            let print = fingerprint(&[pod.metadata.resource_version.as_deref()]);
            put(state, key, print, &mut || match pod_record(&pod) {
                Ok(Some(record)) => Some(Object::Pod(Box::new(record))),
                Ok(None) => None,
                Err(e) => {
                    tracing::debug!(error = %e, "skipping pod");
                    None
                }
            });
        }
        for ds in stores.daemon_sets.state() {
            let key = ObjectKey::DaemonSet(
                ds.metadata.namespace.clone().unwrap_or_default(),
                ds.metadata.name.clone().unwrap_or_default(),
            );
            let print = fingerprint(&[ds.metadata.resource_version.as_deref()]);
            put(state, key, print, &mut || match daemonset_from_k8s(&ds) {
                Ok(d) => Some(Object::DaemonSet(Box::new(d))),
                Err(e) => {
                    tracing::debug!(error = %e, "skipping daemonset");
                    None
                }
            });
        }
        for pdb in stores.pdbs.state() {
            let key = ObjectKey::Pdb(
                pdb.metadata.namespace.clone().unwrap_or_default(),
                pdb.metadata.name.clone().unwrap_or_default(),
            );
            let print = fingerprint(&[pdb.metadata.resource_version.as_deref()]);
            put(state, key, print, &mut || {
                pdb_record(&pdb).map(|r| Object::Pdb(Box::new(r)))
            });
        }
        for ns in stores.namespaces.state() {
            let Some(name) = ns.metadata.name.clone() else {
                continue;
            };
            let print = fingerprint(&[ns.metadata.resource_version.as_deref()]);
            put(
                state,
                ObjectKey::Namespace(name.clone()),
                print,
                &mut || {
                    Some(Object::Namespace(
                        name.clone(),
                        ns.metadata.labels.clone().unwrap_or_default(),
                    ))
                },
            );
        }
        for key in self.seen.keys() {
            if !visited.contains_key(key) && state.delete(key) {
                changes += 1;
            }
        }
        self.seen = visited;
        changes
    }
}

/// A PDB as the index keeps it (`None` when the model rejects it).
pub fn pdb_record(pdb: &PodDisruptionBudget) -> Option<PdbRecord> {
    match pdb_from_k8s(pdb) {
        Ok(budget) => Some(PdbRecord {
            budget,
            min_available: pdb.spec.as_ref().and_then(|s| s.min_available.clone()),
            max_unavailable: pdb.spec.as_ref().and_then(|s| s.max_unavailable.clone()),
        }),
        Err(e) => {
            tracing::debug!(error = %e, "skipping PodDisruptionBudget");
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn api_pod(name: &str, rv: Option<&str>, node: Option<&str>) -> Pod {
        let mut pod: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": name, "namespace": "default", "uid": name},
            "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]},
            "status": {"conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]}
        }))
        .unwrap();
        pod.metadata.resource_version = rv.map(str::to_owned);
        if let (Some(n), Some(spec)) = (node, pod.spec.as_mut()) {
            spec.node_name = Some(n.to_owned());
            pod.status = None;
        }
        pod
    }

    #[test]
    fn feed_applies_only_what_changed_and_deletes_what_is_gone() {
        use crate::controller::testing::put;
        use kube::runtime::watcher::Event;
        let (stores, mut writers) = crate::controller::state::stores();
        let types = BTreeMap::new();
        let mut state = ClusterState::new();
        let mut feed = Feed::default();
        put(&mut writers.pods, api_pod("a", Some("1"), None));
        put(&mut writers.pods, api_pod("b", Some("1"), None));
        assert_eq!(feed.sync(&mut state, &stores, &types, 0), 2);
        assert!(state.provisionable_pods().count() == 2);
        let generation = state.generation();
        assert_eq!(feed.sync(&mut state, &stores, &types, 0), 0);
        assert_eq!(state.generation(), generation, "nothing changed");

        put(&mut writers.pods, api_pod("a", Some("2"), Some("n1")));
        assert_eq!(feed.sync(&mut state, &stores, &types, 0), 1);
        assert_eq!(state.pods_on("n1").count(), 1);
        assert_eq!(state.provisionable_pods().count(), 1);

        writers
            .pods
            .apply_watcher_event(&Event::Delete(api_pod("b", Some("1"), None)));
        assert_eq!(feed.sync(&mut state, &stores, &types, 0), 1);
        assert!(state.pods().keys().all(|k| k.name != "b"));

        // Without a resource version nothing can be compared: applied every time.
        put(&mut writers.pods, api_pod("c", None, None));
        assert_eq!(feed.sync(&mut state, &stores, &types, 0), 1);
        assert_eq!(feed.sync(&mut state, &stores, &types, 0), 1);
    }
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
        }
    }

    #[test]
    fn a_node_is_priced_by_its_type_zone_and_capacity_type() {
        let offering = |zone: &str, ct: &str, price: f64| Offering {
            zone: zone.into(),
            capacity_type: ct.into(),
            price,
            available: false,
        };
        let it = InstanceType {
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
