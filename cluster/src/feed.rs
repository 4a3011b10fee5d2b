//! Feeding the index from API objects incrementally, as a controller's watches see them.
//!
//! Two paths bring a [`ClusterState`] in line with what a controller's reflector stores
//! hold:
//! - [`Feed::sync`] reads every object: it converts and applies only those whose resource
//!   version (or, for a Node, whose NodeClaim or pricing instance types) changed since they
//!   were last applied, and deletes what is gone. It is the path after start-up, a watch
//!   re-list (deletions during a disconnection are seen only this way) or an instance-type
//!   change (every node is re-priced).
//! - [`Feed::sync_changes`] reads only what the watches reported changed since the last
//!   sync, plus the objects a change joins to (a NodeClaim's Node and back), so a pass costs
//!   what changed, not the cluster's size.
//!
//! Either way, a sync over an unchanged cluster leaves the index, and its generation,
//! untouched, so the reconciler skips work that cannot decide differently.

use crate::api_objects::{
    in_flight_record, is_provisionable, node_record, offering_price, pdb_record, pod_key,
    pod_record, replication_controller_selector, service_selector, workload_selector,
};
use crate::default_spread::SelectorSource;
use crate::dra::{DraKind, DraObject, instance_devices, pod_claims};
use crate::{ClusterState, Object, ObjectKey};
use k8s_openapi::api::apps::v1::{DaemonSet, ReplicaSet, StatefulSet};
use k8s_openapi::api::core::v1::{Namespace, Node, Pod, ReplicationController, Service};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::resource::v1::{DeviceClass, ResourceClaim, ResourceClaimTemplate};
use karpenter_cloudprovider::v1::ConditionType;
use karpenter_cloudprovider::{NodeClaim, NodePool};
use karpenter_scheduling::k8s::{ConversionError, daemonset_from_k8s};
use karpenter_scheduling::model::InstanceType;
use karpenter_scheduling::model::PodKey;
use std::collections::{BTreeMap, BTreeSet};
use std::convert::Infallible;
use std::sync::Arc;

/// What the controller's watches hold, one slice per kind (for [`Feed::sync`]), or the
/// changed objects still present (for [`Feed::sync_changes`]).
#[derive(Debug, Clone, Copy, Default)]
pub struct ApiObjects<'a> {
    /// NodePools.
    pub node_pools: &'a [Arc<NodePool>],
    /// NodeClaims, in name order (in-flight claims are indexed as nodes in this order).
    pub node_claims: &'a [Arc<NodeClaim>],
    /// Nodes.
    pub nodes: &'a [Arc<Node>],
    /// Pods in every namespace.
    pub pods: &'a [Arc<Pod>],
    /// DaemonSets.
    pub daemon_sets: &'a [Arc<DaemonSet>],
    /// PodDisruptionBudgets.
    pub pdbs: &'a [Arc<PodDisruptionBudget>],
    /// Namespaces.
    pub namespaces: &'a [Arc<Namespace>],
    /// Services (their selectors, for default spread constraints).
    pub services: &'a [Arc<Service>],
    /// ReplicaSets (their selectors, for default spread constraints).
    pub replica_sets: &'a [Arc<ReplicaSet>],
    /// StatefulSets (their selectors, for default spread constraints).
    pub stateful_sets: &'a [Arc<StatefulSet>],
    /// ReplicationControllers (their selectors, for default spread constraints).
    pub replication_controllers: &'a [Arc<ReplicationController>],
    /// ResourceClaims (indexed only when the index simulates DRA requests).
    pub resource_claims: &'a [Arc<ResourceClaim>],
    /// ResourceClaimTemplates (likewise).
    pub resource_claim_templates: &'a [Arc<ResourceClaimTemplate>],
    /// DeviceClasses (likewise).
    pub device_classes: &'a [Arc<DeviceClass>],
}

/// What changed since the last sync, as the watches reported it.
#[derive(Debug, Clone, Copy, Default)]
pub struct Changes<'a> {
    /// Changed objects that still exist, as the stores hold them now.
    pub present: ApiObjects<'a>,
    /// Objects that no longer exist, by key.
    pub deleted: &'a [ObjectKey],
}

/// The store lookups [`Feed::sync_changes`] needs to re-join a changed NodeClaim with its
/// Node and back.
pub trait Lookup {
    /// The Node named `name`.
    fn node(&self, name: &str) -> Option<Arc<Node>>;
    /// The NodeClaim named `name`.
    fn node_claim(&self, name: &str) -> Option<Arc<NodeClaim>>;
}

/// What one sync did.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Synced {
    /// Objects applied or deleted.
    pub changes: usize,
    /// Their keys, in the order they were applied or deleted (a key may repeat).
    pub touched: Vec<ObjectKey>,
    /// Objects the scheduling model cannot represent, and why. They stay out of the index
    /// (the provisioner reports pods it cannot see as unschedulable itself) and are tried
    /// again when they change.
    pub skipped: Vec<(ObjectKey, String)>,
    /// After the sync: the pods Karpenter would provision for (pending and unschedulable)
    /// that the model cannot represent, so the provisioner never plans them. Upstream's
    /// provisioner likewise ignores the pending pods its validation rejects
    /// (`karpenter_scheduler_ignored_pods_count`).
    pub ignored_pods: usize,
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

fn namespaced(
    meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
) -> (String, String) {
    (
        meta.namespace.clone().unwrap_or_default(),
        meta.name.clone().unwrap_or_default(),
    )
}

fn rv(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> Fingerprint {
    fingerprint(&[meta.resource_version.as_deref()])
}

/// The feed: what each indexed object was last built from, and the joins between
/// NodeClaims and Nodes (by provider ID) that the incremental path follows.
#[derive(Debug, Default)]
pub struct Feed {
    seen: BTreeMap<ObjectKey, Fingerprint>,
    types_version: Option<u64>,
    /// NodeClaim name by provider ID, and the reverse.
    claim_by_pid: BTreeMap<String, String>,
    pid_of_claim: BTreeMap<String, String>,
    /// Node name by provider ID, and the reverse.
    node_by_pid: BTreeMap<String, String>,
    pid_of_node: BTreeMap<String, String>,
    /// NodeClaims indexed as in-flight nodes (no Node yet).
    in_flight: BTreeSet<String>,
    /// Provisionable pods left out of the index because they could not be converted.
    ignored_pods: BTreeSet<PodKey>,
}

/// One sync in progress.
struct Pass<'t> {
    /// Keys applied or confirmed unchanged, for the full path's sweep of what is gone.
    visited: Option<BTreeSet<ObjectKey>>,
    synced: Synced,
    types: String,
    instance_types: &'t BTreeMap<String, Vec<Arc<InstanceType>>>,
}

impl Feed {
    /// Whether only [`Feed::sync`] can bring the index up to date: nothing was synced yet,
    /// or the instance types changed (every node is re-priced).
    pub fn needs_full_sync(&self, types_version: u64) -> bool {
        self.types_version != Some(types_version)
    }

    /// Brings `state` in line with every object in `objects`. `instance_types` are the
    /// provider's offerings per pool; `types_version` changes whenever they do.
    pub fn sync(
        &mut self,
        state: &mut ClusterState,
        objects: &ApiObjects<'_>,
        instance_types: &BTreeMap<String, Vec<Arc<InstanceType>>>,
        types_version: u64,
    ) -> Synced {
        self.set_types(state, instance_types, types_version);
        let mut pass = Pass {
            visited: Some(BTreeSet::new()),
            synced: Synced::default(),
            types: types_version.to_string(),
            instance_types,
        };
        self.claim_by_pid.clear();
        self.pid_of_claim.clear();
        self.node_by_pid.clear();
        self.pid_of_node.clear();
        self.in_flight.clear();
        // Every pod is seen again: the ones still unreadable are found again.
        self.ignored_pods.clear();
        for claim in objects.node_claims {
            self.join_claim(claim);
        }
        for node in objects.nodes {
            self.join_node(node);
        }
        let claims: BTreeMap<&str, &NodeClaim> = objects
            .node_claims
            .iter()
            .map(|c| (c.name(), c.as_ref()))
            .collect();
        self.put_others(state, objects, &mut pass);
        for node in objects.nodes {
            let claim = self
                .claim_of_node(node)
                .and_then(|c| claims.get(c.as_str()).copied());
            self.put_node(state, node, claim, &mut pass);
        }
        for claim in objects.node_claims {
            self.put_claim(state, claim, &mut pass);
            if !self.has_node(claim) {
                self.put_in_flight(state, claim, &mut pass);
            }
        }
        let visited = pass.visited.take().unwrap_or_default();
        let gone: Vec<ObjectKey> = self
            .seen
            .keys()
            .filter(|k| !visited.contains(*k))
            .cloned()
            .collect();
        for key in gone {
            self.remove(state, &key, &mut pass);
        }
        pass.synced.ignored_pods = self.ignored_pods.len();
        pass.synced
    }

    /// Applies only what `changes` reports, re-joining changed NodeClaims and Nodes through
    /// `lookup`. Call [`Feed::sync`] instead while [`Feed::needs_full_sync`] says so.
    pub fn sync_changes(
        &mut self,
        state: &mut ClusterState,
        changes: &Changes<'_>,
        lookup: &dyn Lookup,
        instance_types: &BTreeMap<String, Vec<Arc<InstanceType>>>,
    ) -> Synced {
        let mut pass = Pass {
            visited: None,
            synced: Synced::default(),
            types: self.types_version.unwrap_or_default().to_string(),
            instance_types,
        };
        self.put_others(state, &changes.present, &mut pass);
        for key in changes.deleted {
            match key {
                ObjectKey::NodeClaim(name) => self.claim_deleted(state, name, lookup, &mut pass),
                ObjectKey::Node(name) => self.node_deleted(state, name, lookup, &mut pass),
                other => self.remove(state, other, &mut pass),
            }
        }
        for claim in changes.present.node_claims {
            if let Some(old) = self.join_claim(claim) {
                // Its provider ID changed: the Node it named loses its claim.
                self.refresh_node_of_pid(state, &old, lookup, &mut pass);
            }
            self.put_claim(state, claim, &mut pass);
            self.refresh_claim(state, claim, lookup, &mut pass);
        }
        for node in changes.present.nodes {
            self.join_node(node);
            let claim = self.claim_of_node(node).and_then(|c| lookup.node_claim(&c));
            self.put_node(state, node, claim.as_deref(), &mut pass);
            if let Some(c) = claim {
                self.refresh_claim(state, &c, lookup, &mut pass);
            }
        }
        pass.synced.ignored_pods = self.ignored_pods.len();
        pass.synced
    }

    fn set_types(
        &mut self,
        state: &mut ClusterState,
        instance_types: &BTreeMap<String, Vec<Arc<InstanceType>>>,
        types_version: u64,
    ) {
        if self.types_version != Some(types_version) {
            for (pool, types) in instance_types {
                state.set_instance_types(pool, types.clone());
            }
            self.types_version = Some(types_version);
        }
    }

    /// Records `claim`'s provider ID; returns the one it had before if that differs.
    fn join_claim(&mut self, claim: &NodeClaim) -> Option<String> {
        let name = claim.name().to_owned();
        let pid = claim.provider_id().to_owned();
        let old = if pid.is_empty() {
            self.pid_of_claim.remove(&name)
        } else {
            self.claim_by_pid.insert(pid.clone(), name.clone());
            self.pid_of_claim.insert(name, pid.clone())
        };
        let old = old.filter(|o| *o != pid)?;
        if self
            .claim_by_pid
            .get(&old)
            .is_some_and(|c| c == claim.name())
        {
            self.claim_by_pid.remove(&old);
        }
        Some(old)
    }

    fn join_node(&mut self, node: &Node) {
        let name = node.metadata.name.clone().unwrap_or_default();
        let pid = crate::node_provider_id(node).to_owned();
        if let Some(old) = self.pid_of_node.remove(&name)
            && self.node_by_pid.get(&old) == Some(&name)
        {
            self.node_by_pid.remove(&old);
        }
        if !pid.is_empty() {
            self.node_by_pid.insert(pid.clone(), name.clone());
            self.pid_of_node.insert(name, pid);
        }
    }

    fn claim_of_node(&self, node: &Node) -> Option<String> {
        self.claim_by_pid
            .get(crate::node_provider_id(node))
            .cloned()
    }

    fn has_node(&self, claim: &NodeClaim) -> bool {
        !claim.provider_id().is_empty() && self.node_by_pid.contains_key(claim.provider_id())
    }

    /// NodePools, pods, DaemonSets, PDBs, namespaces and selector sources: each stands alone.
    fn put_others(&mut self, state: &mut ClusterState, objects: &ApiObjects<'_>, pass: &mut Pass) {
        for pool in objects.node_pools {
            let key = ObjectKey::NodePool(pool.name().to_owned());
            self.put(state, key, rv(&pool.metadata), pass, || {
                Ok::<_, Infallible>(Some(Object::NodePool(Box::new(NodePool::clone(pool)))))
            });
        }
        for pod in objects.pods {
            let key = pod_key(pod);
            let mut unreadable = None;
            self.put(
                state,
                ObjectKey::Pod(key.clone()),
                rv(&pod.metadata),
                pass,
                || {
                    let record = pod_record(pod);
                    unreadable = Some(record.is_err());
                    Ok::<_, ConversionError>(record?.map(|r| Object::Pod(Box::new(r))))
                },
            );
            // Unchanged since it was last read (`None`): it was readable then.
            if unreadable == Some(true) && is_provisionable(pod) {
                self.ignored_pods.insert(key.clone());
            } else {
                self.ignored_pods.remove(&key);
            }
            if state.dra().is_enabled() {
                let key = ObjectKey::Dra(DraKind::PodClaims, key.namespace, key.name);
                self.put(state, key, rv(&pod.metadata), pass, || {
                    Ok::<_, Infallible>(
                        pod_claims(pod).map(|p| Object::Dra(Box::new(DraObject::PodClaims(p)))),
                    )
                });
            }
        }
        if state.dra().is_enabled() {
            self.put_dra(state, objects, pass);
        }
        for ds in objects.daemon_sets {
            let (namespace, name) = namespaced(&ds.metadata);
            let key = ObjectKey::DaemonSet(namespace, name);
            self.put(state, key, rv(&ds.metadata), pass, || {
                Ok::<_, ConversionError>(Some(Object::DaemonSet(Box::new(daemonset_from_k8s(ds)?))))
            });
        }
        for pdb in objects.pdbs {
            let (namespace, name) = namespaced(&pdb.metadata);
            let key = ObjectKey::Pdb(namespace, name);
            self.put(state, key, rv(&pdb.metadata), pass, || {
                Ok::<_, ConversionError>(Some(Object::Pdb(Box::new(pdb_record(pdb)?))))
            });
        }
        for ns in objects.namespaces {
            let Some(name) = ns.metadata.name.clone() else {
                continue;
            };
            let key = ObjectKey::Namespace(name.clone());
            self.put(state, key, rv(&ns.metadata), pass, || {
                Ok::<_, Infallible>(Some(Object::Namespace(
                    name,
                    ns.metadata.labels.clone().unwrap_or_default(),
                )))
            });
        }
        use crate::default_spread::SourceKind as K;
        let sources = (objects.services.iter())
            .map(|s| (K::Service, &s.metadata, Ok(Some(service_selector(s)))))
            .chain(objects.replication_controllers.iter().map(|rc| {
                let source = Ok(Some(replication_controller_selector(rc)));
                (K::ReplicationController, &rc.metadata, source)
            }))
            .chain(
                (objects.replica_sets.iter())
                    .map(|rs| (K::ReplicaSet, &rs.metadata, workload_selector(rs.as_ref()))),
            )
            .chain(
                (objects.stateful_sets.iter())
                    .map(|ss| (K::StatefulSet, &ss.metadata, workload_selector(ss.as_ref()))),
            );
        for (kind, meta, source) in sources {
            let source: Result<Option<SelectorSource>, ConversionError> = source;
            let (namespace, name) = namespaced(meta);
            let key = ObjectKey::SelectorSource(kind, namespace, name);
            self.put(state, key, rv(meta), pass, || {
                source.map(|s| s.map(|s| Object::SelectorSource(Box::new(s))))
            });
        }
    }

    /// ResourceClaims, ResourceClaimTemplates and DeviceClasses.
    fn put_dra(&mut self, state: &mut ClusterState, objects: &ApiObjects<'_>, pass: &mut Pass) {
        let all = (objects.resource_claims.iter())
            .map(|o| {
                (
                    &o.metadata,
                    DraObject::ResourceClaim(ResourceClaim::clone(o)),
                )
            })
            .chain(objects.resource_claim_templates.iter().map(|o| {
                let object = DraObject::ResourceClaimTemplate(ResourceClaimTemplate::clone(o));
                (&o.metadata, object)
            }))
            .chain(
                (objects.device_classes.iter())
                    .map(|o| (&o.metadata, DraObject::DeviceClass(DeviceClass::clone(o)))),
            );
        for (meta, object) in all {
            let (kind, namespace, name) = object.key();
            let key = ObjectKey::Dra(kind, namespace, name);
            self.put(state, key, rv(meta), pass, || {
                Ok::<_, Infallible>(Some(Object::Dra(Box::new(object))))
            });
        }
    }

    fn put_claim(&mut self, state: &mut ClusterState, claim: &NodeClaim, pass: &mut Pass) {
        let key = ObjectKey::NodeClaim(claim.name().to_owned());
        self.put(state, key, rv(&claim.metadata), pass, || {
            Ok::<_, Infallible>(Some(Object::NodeClaim(Box::new(claim.clone()))))
        });
    }

    fn put_node(
        &mut self,
        state: &mut ClusterState,
        node: &Node,
        claim: Option<&NodeClaim>,
        pass: &mut Pass,
    ) {
        let print = fingerprint(&[
            Some("node"),
            node.metadata.resource_version.as_deref(),
            Some(claim.map_or("-", |c| {
                c.metadata.resource_version.as_deref().unwrap_or("")
            })),
            Some(&pass.types),
        ]);
        let key = ObjectKey::Node(node.metadata.name.clone().unwrap_or_default());
        let instance_types = pass.instance_types;
        let dra = state.dra().is_enabled();
        self.put(state, key, print, pass, || {
            let mut record = node_record(node, claim)?;
            record.node.price = offering_price(&record.node, instance_types);
            if dra {
                record.node.devices = instance_devices(&record.node, instance_types);
            }
            Ok::<_, ConversionError>(Some(Object::Node(Box::new(record))))
        });
    }

    /// An in-flight NodeClaim (no Node yet, not registered) as a node the provisioner can
    /// place pods on.
    fn put_in_flight(&mut self, state: &mut ClusterState, claim: &NodeClaim, pass: &mut Pass) {
        if claim.is(ConditionType::Registered) {
            return;
        }
        let print = fingerprint(&[
            Some("in-flight"),
            claim.metadata.resource_version.as_deref(),
            Some(&pass.types),
        ]);
        let instance_types = pass.instance_types;
        self.in_flight.insert(claim.name().to_owned());
        let key = ObjectKey::Node(claim.name().to_owned());
        let dra = state.dra().is_enabled();
        self.put(state, key, print, pass, || {
            let mut record = in_flight_record(claim);
            record.node.price = offering_price(&record.node, instance_types);
            if dra {
                record.node.devices = instance_devices(&record.node, instance_types);
            }
            Ok::<_, Infallible>(Some(Object::Node(Box::new(record))))
        });
    }

    /// Re-joins a changed NodeClaim with its Node, or indexes it in flight.
    fn refresh_claim(
        &mut self,
        state: &mut ClusterState,
        claim: &NodeClaim,
        lookup: &dyn Lookup,
        pass: &mut Pass,
    ) {
        let node = self
            .node_by_pid
            .get(claim.provider_id())
            .filter(|_| !claim.provider_id().is_empty())
            .and_then(|n| lookup.node(n));
        let name = claim.name().to_owned();
        match node {
            Some(node) => {
                let node_name = node.metadata.name.as_deref().unwrap_or_default();
                if node_name != name && self.in_flight.contains(&name) {
                    self.remove(state, &ObjectKey::Node(name.clone()), pass);
                }
                self.in_flight.remove(&name);
                self.put_node(state, &node, Some(claim), pass);
            }
            None if claim.is(ConditionType::Registered) => {
                if self.in_flight.remove(&name) {
                    self.remove(state, &ObjectKey::Node(name), pass);
                }
            }
            None => self.put_in_flight(state, claim, pass),
        }
    }

    /// Re-converts the Node with provider ID `pid`, if any, with whatever claim it now has.
    fn refresh_node_of_pid(
        &mut self,
        state: &mut ClusterState,
        pid: &str,
        lookup: &dyn Lookup,
        pass: &mut Pass,
    ) {
        let Some(node) = self.node_by_pid.get(pid).and_then(|n| lookup.node(n)) else {
            return;
        };
        let claim = self
            .claim_of_node(&node)
            .and_then(|c| lookup.node_claim(&c));
        self.put_node(state, &node, claim.as_deref(), pass);
    }

    fn claim_deleted(
        &mut self,
        state: &mut ClusterState,
        name: &str,
        lookup: &dyn Lookup,
        pass: &mut Pass,
    ) {
        self.remove(state, &ObjectKey::NodeClaim(name.to_owned()), pass);
        if self.in_flight.remove(name) {
            self.remove(state, &ObjectKey::Node(name.to_owned()), pass);
        }
        if let Some(pid) = self.pid_of_claim.remove(name) {
            if self.claim_by_pid.get(&pid).is_some_and(|c| c == name) {
                self.claim_by_pid.remove(&pid);
            }
            self.refresh_node_of_pid(state, &pid, lookup, pass);
        }
    }

    fn node_deleted(
        &mut self,
        state: &mut ClusterState,
        name: &str,
        lookup: &dyn Lookup,
        pass: &mut Pass,
    ) {
        self.remove(state, &ObjectKey::Node(name.to_owned()), pass);
        let Some(pid) = self.pid_of_node.remove(name) else {
            return;
        };
        if self.node_by_pid.get(&pid).is_some_and(|n| n == name) {
            self.node_by_pid.remove(&pid);
        }
        // Its claim, if not registered yet, is in flight again.
        if let Some(claim) = self
            .claim_by_pid
            .get(&pid)
            .and_then(|c| lookup.node_claim(c))
        {
            self.refresh_claim(state, &claim, lookup, pass);
        }
    }

    /// Applies the object built by `build` under `key` unless `print` says it is unchanged.
    /// An object the model leaves out (a finished pod) or cannot represent is removed.
    fn put<E: std::fmt::Display>(
        &mut self,
        state: &mut ClusterState,
        key: ObjectKey,
        print: Fingerprint,
        pass: &mut Pass,
        build: impl FnOnce() -> Result<Option<Object>, E>,
    ) {
        if print.is_some() && self.seen.get(&key) == Some(&print) {
            if let Some(v) = pass.visited.as_mut() {
                v.insert(key);
            }
            return;
        }
        match build() {
            Ok(Some(object)) => {
                state.apply(object);
                pass.synced.changes += 1;
                pass.synced.touched.push(key.clone());
                if let Some(v) = pass.visited.as_mut() {
                    v.insert(key.clone());
                }
                self.seen.insert(key, print);
            }
            Ok(None) => self.remove(state, &key, pass),
            Err(e) => {
                self.remove(state, &key, pass);
                pass.synced.skipped.push((key, e.to_string()));
            }
        }
    }

    fn remove(&mut self, state: &mut ClusterState, key: &ObjectKey, pass: &mut Pass) {
        self.seen.remove(key);
        if let ObjectKey::Pod(pod) = key {
            self.ignored_pods.remove(pod);
            // The index forgets the pod's claims with it.
            self.seen.remove(&ObjectKey::Dra(
                DraKind::PodClaims,
                pod.namespace.clone(),
                pod.name.clone(),
            ));
        }
        if state.delete(key) {
            pass.synced.changes += 1;
            pass.synced.touched.push(key.clone());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use karpenter_cloudprovider::v1::StatusConditions;

    #[test]
    fn services_and_controllers_feed_the_default_selectors() {
        let service: Arc<Service> = Arc::new(
            serde_json::from_value(serde_json::json!({
                "metadata": {"name": "web", "namespace": "shop", "resourceVersion": "1"},
                "spec": {"selector": {"app": "web"}}
            }))
            .unwrap(),
        );
        let rs: Arc<ReplicaSet> = Arc::new(
            serde_json::from_value(serde_json::json!({
                "metadata": {"name": "web-1", "namespace": "shop", "resourceVersion": "2"},
                "spec": {"selector": {"matchExpressions": [
                    {"key": "tier", "operator": "In", "values": ["fe"]}]}}
            }))
            .unwrap(),
        );
        let pod = karpenter_scheduling::model::Pod {
            namespace: "shop".into(),
            name: "web-1-a".into(),
            labels: [
                ("app".to_owned(), "web".to_owned()),
                ("tier".to_owned(), "fe".to_owned()),
            ]
            .into(),
            owner: Some(karpenter_scheduling::model::OwnerRef {
                kind: "ReplicaSet".into(),
                name: "web-1".into(),
                uid: "u".into(),
            }),
            ..Default::default()
        };
        let mut state = ClusterState::new();
        let mut feed = Feed::default();
        let services = [service];
        let replica_sets = [rs];
        let objects = ApiObjects {
            services: &services,
            replica_sets: &replica_sets,
            ..ApiObjects::default()
        };
        let synced = feed.sync(&mut state, &objects, &BTreeMap::new(), 0);
        assert_eq!(synced.changes, 2);
        let selector = state.default_spread().default_selector(&pod).unwrap();
        assert_eq!(selector.match_labels["app"], "web");
        assert_eq!(selector.match_expressions[0].key, "tier");
        // Unchanged: nothing re-applied. Gone: forgotten.
        assert_eq!(
            feed.sync(&mut state, &objects, &BTreeMap::new(), 0).changes,
            0
        );
        let objects = ApiObjects {
            replica_sets: &replica_sets,
            ..ApiObjects::default()
        };
        assert_eq!(
            feed.sync(&mut state, &objects, &BTreeMap::new(), 0).changes,
            1
        );
        let selector = state.default_spread().default_selector(&pod).unwrap();
        assert!(selector.match_labels.is_empty());
    }

    fn api_pod(name: &str, rv: Option<&str>, node: Option<&str>) -> Arc<Pod> {
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
        Arc::new(pod)
    }

    fn sync(feed: &mut Feed, state: &mut ClusterState, pods: &[Arc<Pod>]) -> usize {
        let objects = ApiObjects {
            pods,
            ..ApiObjects::default()
        };
        feed.sync(state, &objects, &BTreeMap::new(), 0).changes
    }

    #[test]
    fn feed_applies_only_what_changed_and_deletes_what_is_gone() {
        let mut state = ClusterState::new();
        let mut feed = Feed::default();
        let (a, b) = (api_pod("a", Some("1"), None), api_pod("b", Some("1"), None));
        assert_eq!(sync(&mut feed, &mut state, &[a.clone(), b.clone()]), 2);
        assert_eq!(state.provisionable_pods().count(), 2);
        let generation = state.generation();
        assert_eq!(sync(&mut feed, &mut state, &[a, b.clone()]), 0);
        assert_eq!(state.generation(), generation, "nothing changed");

        let a = api_pod("a", Some("2"), Some("n1"));
        assert_eq!(sync(&mut feed, &mut state, &[a.clone(), b]), 1);
        assert_eq!(state.pods_on("n1").count(), 1);
        assert_eq!(state.provisionable_pods().count(), 1);

        assert_eq!(sync(&mut feed, &mut state, std::slice::from_ref(&a)), 1);
        assert!(state.pods().keys().all(|k| k.name != "b"));

        // Without a resource version nothing can be compared: applied every time.
        let c = api_pod("c", None, None);
        assert_eq!(sync(&mut feed, &mut state, &[a.clone(), c.clone()]), 1);
        assert_eq!(sync(&mut feed, &mut state, &[a, c]), 1);
    }

    #[test]
    fn an_object_the_model_rejects_is_reported_and_left_out() {
        let mut bad = Pod::clone(&api_pod("bad", Some("1"), None));
        if let Some(spec) = bad.spec.as_mut() {
            spec.containers[0].resources.as_mut().unwrap().requests = Some(BTreeMap::from([(
                "cpu".to_owned(),
                k8s_openapi::apimachinery::pkg::api::resource::Quantity("lots".into()),
            )]));
        }
        let mut state = ClusterState::new();
        let mut feed = Feed::default();
        let objects = ApiObjects {
            pods: &[Arc::new(bad)],
            ..ApiObjects::default()
        };
        let synced = feed.sync(&mut state, &objects, &BTreeMap::new(), 0);
        assert_eq!(synced.changes, 0);
        assert!(
            matches!(&synced.skipped[..], [(ObjectKey::Pod(k), why)] if k.name == "bad" && why.contains("cpu")),
            "{synced:?}"
        );
        assert!(state.pods().is_empty());
        assert_eq!(synced.ignored_pods, 1, "pending and unschedulable: ignored");
    }

    #[test]
    fn ignored_pods_are_the_provisionable_ones_the_model_rejects_while_they_last() {
        let broken = |name: &str, node: Option<&str>| {
            let mut pod = Pod::clone(&api_pod(name, Some("1"), node));
            let spec = pod.spec.as_mut().unwrap();
            spec.containers[0].resources.as_mut().unwrap().requests = Some(BTreeMap::from([(
                "cpu".to_owned(),
                k8s_openapi::apimachinery::pkg::api::resource::Quantity("lots".into()),
            )]));
            Arc::new(pod)
        };
        let ignored = |feed: &mut Feed, state: &mut ClusterState, pods: &[Arc<Pod>]| {
            let objects = ApiObjects {
                pods,
                ..ApiObjects::default()
            };
            feed.sync(state, &objects, &BTreeMap::new(), 0).ignored_pods
        };
        let mut state = ClusterState::new();
        let mut feed = Feed::default();
        let bad = broken("bad", None);
        let bound = broken("bound", Some("n1"));
        assert_eq!(
            ignored(&mut feed, &mut state, &[bad.clone(), bound.clone()]),
            1,
            "a bound pod is not the provisioner's"
        );
        let mut fixed = Pod::clone(&api_pod("bad", Some("2"), None));
        fixed.metadata.uid = bad.metadata.uid.clone();
        assert_eq!(
            ignored(&mut feed, &mut state, &[Arc::new(fixed), bound.clone()]),
            0,
            "fixed: planned again"
        );
        assert_eq!(ignored(&mut feed, &mut state, &[bad, bound.clone()]), 1);
        assert_eq!(ignored(&mut feed, &mut state, &[bound]), 0, "deleted");
    }

    /// A cluster as the watches' stores hold it.
    #[derive(Default)]
    struct World {
        claims: BTreeMap<String, Arc<NodeClaim>>,
        nodes: BTreeMap<String, Arc<Node>>,
        pods: BTreeMap<String, Arc<Pod>>,
        rv: u64,
    }

    impl Lookup for World {
        fn node(&self, name: &str) -> Option<Arc<Node>> {
            self.nodes.get(name).cloned()
        }
        fn node_claim(&self, name: &str) -> Option<Arc<NodeClaim>> {
            self.claims.get(name).cloned()
        }
    }

    impl World {
        fn next_rv(&mut self) -> Option<String> {
            self.rv += 1;
            Some(self.rv.to_string())
        }
        fn claim(&mut self, name: &str, pid: &str, registered: bool) {
            let mut c = karpenter_testing::api::node_claim(name);
            c.metadata.resource_version = self.next_rv();
            if !pid.is_empty() {
                c.status.get_or_insert_with(Default::default).provider_id = pid.into();
                c.set_true("Launched", crate::provisioner::time(0));
            }
            if registered {
                c.set_true("Registered", crate::provisioner::time(0));
            }
            self.claims.insert(name.into(), Arc::new(c));
        }
        fn add_node(&mut self, name: &str, pid: &str) {
            let mut n =
                karpenter_testing::api::ready(karpenter_testing::api::registering_node(name, pid));
            n.metadata.resource_version = self.next_rv();
            self.nodes.insert(name.into(), Arc::new(n));
        }
        fn pod(&mut self, name: &str, node: Option<&str>) {
            let mut p = Pod::clone(&api_pod(name, None, node));
            p.metadata.resource_version = self.next_rv();
            self.pods.insert(name.into(), Arc::new(p));
        }
    }

    /// A full sync of everything in `world` by `feed` into `state`.
    fn sync_all(feed: &mut Feed, state: &mut ClusterState, world: &World) {
        let (claims, nodes, pods) = (
            world.claims.values().cloned().collect::<Vec<_>>(),
            world.nodes.values().cloned().collect::<Vec<_>>(),
            world.pods.values().cloned().collect::<Vec<_>>(),
        );
        let objects = ApiObjects {
            node_claims: &claims,
            nodes: &nodes,
            pods: &pods,
            ..ApiObjects::default()
        };
        feed.sync(state, &objects, &BTreeMap::new(), 0);
    }

    /// The index a full sync of `world` builds from nothing.
    fn fresh(world: &World) -> ClusterState {
        let mut state = ClusterState::new();
        sync_all(&mut Feed::default(), &mut state, world);
        state
    }

    fn same(a: &ClusterState, b: &ClusterState, step: &str) {
        assert_eq!(a.nodes(), b.nodes(), "nodes after {step}");
        assert_eq!(a.pods(), b.pods(), "pods after {step}");
        assert_eq!(
            a.node_claims().keys().collect::<Vec<_>>(),
            b.node_claims().keys().collect::<Vec<_>>(),
            "claims after {step}"
        );
        assert_eq!(
            a.maturing_claims()
                .map(|(c, n)| (c.name().to_owned(), n.map(|n| n.node.name.clone())))
                .collect::<Vec<_>>(),
            b.maturing_claims()
                .map(|(c, n)| (c.name().to_owned(), n.map(|n| n.node.name.clone())))
                .collect::<Vec<_>>(),
            "joins after {step}"
        );
    }

    #[test]
    fn applying_only_the_changes_builds_the_index_a_full_sync_would() {
        let mut world = World::default();
        world.claim("a", "fake://z/a", false);
        world.claim("b", "", false);
        world.add_node("ip-a", "fake://z/a");
        world.pod("p1", None);
        world.pod("p2", Some("ip-a"));
        let mut feed = Feed::default();
        let mut state = ClusterState::new();
        sync_all(&mut feed, &mut state, &world);
        assert!(!feed.needs_full_sync(0));
        same(&state, &fresh(&world), "the first sync");

        // Each step changes the world and reports what it touched, as watch events would.
        type Step = fn(&mut World) -> (Vec<&'static str>, Vec<&'static str>, Vec<ObjectKey>);
        let steps: Vec<(&str, Step)> = vec![
            ("b launches", |w| {
                w.claim("b", "fake://z/b", false);
                (vec!["b"], vec![], vec![])
            }),
            ("b's node joins", |w| {
                w.add_node("ip-b", "fake://z/b");
                (vec![], vec!["ip-b"], vec![])
            }),
            ("a registers", |w| {
                w.claim("a", "fake://z/a", true);
                (vec!["a"], vec![], vec![])
            }),
            ("b's node is deleted before b registered", |w| {
                w.nodes.remove("ip-b");
                (vec![], vec![], vec![ObjectKey::Node("ip-b".into())])
            }),
            ("a's node is deleted", |w| {
                w.nodes.remove("ip-a");
                (vec![], vec![], vec![ObjectKey::Node("ip-a".into())])
            }),
            ("b is deleted", |w| {
                w.claims.remove("b");
                (vec![], vec![], vec![ObjectKey::NodeClaim("b".into())])
            }),
            ("a node joins for a, named as the claim", |w| {
                w.add_node("a", "fake://z/a");
                (vec![], vec!["a"], vec![])
            }),
            ("a is deleted, its node stays", |w| {
                w.claims.remove("a");
                (vec![], vec![], vec![ObjectKey::NodeClaim("a".into())])
            }),
        ];
        for (name, step) in steps {
            let (claims, nodes, deleted) = step(&mut world);
            world.pod("p1", Some("a"));
            let claims: Vec<_> = claims.iter().map(|c| world.claims[*c].clone()).collect();
            let nodes: Vec<_> = nodes.iter().map(|n| world.nodes[*n].clone()).collect();
            let pods = vec![world.pods["p1"].clone()];
            let changes = Changes {
                present: ApiObjects {
                    node_claims: &claims,
                    nodes: &nodes,
                    pods: &pods,
                    ..ApiObjects::default()
                },
                deleted: &deleted,
            };
            feed.sync_changes(&mut state, &changes, &world, &BTreeMap::new());
            same(&state, &fresh(&world), name);
        }
        let unchanged = state.generation();
        let none = Changes::default();
        assert_eq!(
            feed.sync_changes(&mut state, &none, &world, &BTreeMap::new())
                .changes,
            0
        );
        assert_eq!(state.generation(), unchanged);
    }
}
