//! Feeding the index from API objects incrementally, as a controller's watches see them.
//!
//! [`Feed::sync`] brings a [`ClusterState`] in line with the objects a controller's
//! reflector stores hold: it converts and applies only the objects whose resource version
//! (or, for a Node, whose NodeClaim or pricing instance types) changed since the last sync,
//! and deletes what is gone. A sync over an unchanged cluster leaves the index, and its
//! generation, untouched, so the reconciler skips work that cannot decide differently.

use crate::api_objects::{
    in_flight_record, node_record, offering_price, pdb_record, pod_key, pod_record,
};
use crate::{ClusterState, Object, ObjectKey};
use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{Namespace, Node, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use karpenter_cloudprovider::v1::ConditionType;
use karpenter_cloudprovider::{NodeClaim, NodePool};
use karpenter_scheduling::k8s::daemonset_from_k8s;
use karpenter_scheduling::model::InstanceType;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// What the controller's watches hold, one slice per kind.
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
}

/// What one [`Feed::sync`] did.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Synced {
    /// Objects applied or deleted.
    pub changes: usize,
    /// Objects the scheduling model cannot represent, and why. They stay out of the index
    /// (the provisioner reports pods it cannot see as unschedulable itself) and are tried
    /// again when they change.
    pub skipped: Vec<(ObjectKey, String)>,
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

/// The incremental feed: what each indexed object was last built from.
#[derive(Debug, Default)]
pub struct Feed {
    seen: BTreeMap<ObjectKey, Fingerprint>,
    types_version: Option<u64>,
}

/// One sync in progress: the fingerprints visited so far and what changed.
struct Pass<'f> {
    seen: &'f BTreeMap<ObjectKey, Fingerprint>,
    visited: BTreeMap<ObjectKey, Fingerprint>,
    synced: Synced,
}

impl Pass<'_> {
    /// Applies the object built by `build` under `key` unless `print` says it is unchanged.
    fn put<E: std::fmt::Display>(
        &mut self,
        state: &mut ClusterState,
        key: ObjectKey,
        print: Fingerprint,
        build: impl FnOnce() -> Result<Option<Object>, E>,
    ) {
        if print.is_some() && self.seen.get(&key) == Some(&print) {
            self.visited.insert(key, print);
            return;
        }
        match build() {
            Ok(Some(object)) => {
                state.apply(object);
                self.synced.changes += 1;
                self.visited.insert(key, print);
            }
            Ok(None) => {}
            Err(e) => self.synced.skipped.push((key, e.to_string())),
        }
    }
}

impl Feed {
    /// Brings `state` in line with `objects`. `instance_types` are the provider's offerings
    /// per pool; `types_version` changes whenever they do (every node is re-priced then).
    pub fn sync(
        &mut self,
        state: &mut ClusterState,
        objects: &ApiObjects<'_>,
        instance_types: &BTreeMap<String, Vec<Arc<InstanceType>>>,
        types_version: u64,
    ) -> Synced {
        if self.types_version != Some(types_version) {
            for (pool, types) in instance_types {
                state.set_instance_types(pool, types.clone());
            }
            self.types_version = Some(types_version);
        }
        let types = types_version.to_string();
        let mut pass = Pass {
            seen: &self.seen,
            visited: BTreeMap::new(),
            synced: Synced::default(),
        };
        let by_provider: BTreeMap<&str, &NodeClaim> = objects
            .node_claims
            .iter()
            .filter(|c| !c.provider_id().is_empty())
            .map(|c| (c.provider_id(), c.as_ref()))
            .collect();
        for pool in objects.node_pools {
            let print = fingerprint(&[pool.metadata.resource_version.as_deref()]);
            pass.put(
                state,
                ObjectKey::NodePool(pool.name().to_owned()),
                print,
                || {
                    Ok::<_, std::convert::Infallible>(Some(Object::NodePool(Box::new(
                        NodePool::clone(pool),
                    ))))
                },
            );
        }
        let mut with_node: BTreeSet<&str> = BTreeSet::new();
        for node in objects.nodes {
            let claim = by_provider.get(crate::node_provider_id(node)).copied();
            if let Some(c) = claim {
                with_node.insert(c.name());
            }
            let print = fingerprint(&[
                Some("node"),
                node.metadata.resource_version.as_deref(),
                Some(claim.map_or("-", |c| {
                    c.metadata.resource_version.as_deref().unwrap_or("")
                })),
                Some(&types),
            ]);
            let key = ObjectKey::Node(node.metadata.name.clone().unwrap_or_default());
            pass.put(state, key, print, || {
                let mut record = node_record(node, claim)?;
                record.node.price = offering_price(&record.node, instance_types);
                Ok::<_, karpenter_scheduling::k8s::ConversionError>(Some(Object::Node(Box::new(
                    record,
                ))))
            });
        }
        for claim in objects.node_claims {
            let rv = claim.metadata.resource_version.as_deref();
            pass.put(
                state,
                ObjectKey::NodeClaim(claim.name().to_owned()),
                fingerprint(&[rv]),
                || {
                    Ok::<_, std::convert::Infallible>(Some(Object::NodeClaim(Box::new(
                        NodeClaim::clone(claim),
                    ))))
                },
            );
            if !with_node.contains(claim.name()) && !claim.is(ConditionType::Registered) {
                let print = fingerprint(&[Some("in-flight"), rv, Some(&types)]);
                pass.put(
                    state,
                    ObjectKey::Node(claim.name().to_owned()),
                    print,
                    || {
                        let mut record = in_flight_record(claim);
                        record.node.price = offering_price(&record.node, instance_types);
                        Ok::<_, std::convert::Infallible>(Some(Object::Node(Box::new(record))))
                    },
                );
            }
        }
        for pod in objects.pods {
            let print = fingerprint(&[pod.metadata.resource_version.as_deref()]);
            pass.put(state, ObjectKey::Pod(pod_key(pod)), print, || {
                Ok::<_, karpenter_scheduling::k8s::ConversionError>(
                    pod_record(pod)?.map(|r| Object::Pod(Box::new(r))),
                )
            });
        }
        for ds in objects.daemon_sets {
            let (namespace, name) = namespaced(&ds.metadata);
            let print = fingerprint(&[ds.metadata.resource_version.as_deref()]);
            pass.put(state, ObjectKey::DaemonSet(namespace, name), print, || {
                Ok::<_, karpenter_scheduling::k8s::ConversionError>(Some(Object::DaemonSet(
                    Box::new(daemonset_from_k8s(ds)?),
                )))
            });
        }
        for pdb in objects.pdbs {
            let (namespace, name) = namespaced(&pdb.metadata);
            let print = fingerprint(&[pdb.metadata.resource_version.as_deref()]);
            pass.put(state, ObjectKey::Pdb(namespace, name), print, || {
                Ok::<_, karpenter_scheduling::k8s::ConversionError>(Some(Object::Pdb(Box::new(
                    pdb_record(pdb)?,
                ))))
            });
        }
        for ns in objects.namespaces {
            let Some(name) = ns.metadata.name.clone() else {
                continue;
            };
            let print = fingerprint(&[ns.metadata.resource_version.as_deref()]);
            pass.put(state, ObjectKey::Namespace(name.clone()), print, || {
                Ok::<_, std::convert::Infallible>(Some(Object::Namespace(
                    name,
                    ns.metadata.labels.clone().unwrap_or_default(),
                )))
            });
        }
        let Pass {
            visited,
            mut synced,
            ..
        } = pass;
        for key in self.seen.keys() {
            if !visited.contains_key(key) && state.delete(key) {
                synced.changes += 1;
            }
        }
        self.seen = visited;
        synced
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
    }
}
