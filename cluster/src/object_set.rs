//! Owned copies of what a controller's stores hold, for the [`feed`](crate::feed): the
//! borrowed [`ApiObjects`] and [`Changes`] views need something to borrow from, and a
//! caller that reads its stores once per pass keeps the copies here for the pass.

use crate::ObjectKey;
use crate::feed::{ApiObjects, Changes};
use k8s_openapi::api::apps::v1::{DaemonSet, ReplicaSet, StatefulSet};
use k8s_openapi::api::core::v1::{Namespace, Node, Pod, ReplicationController, Service};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::resource::v1::{DeviceClass, ResourceClaim, ResourceClaimTemplate};
use karpenter_cloudprovider::{NodeClaim, NodePool};
use std::sync::Arc;

/// One copy of every store the index is fed from. The feed relies on `node_claims` being in
/// name order (see [`ApiObjects::node_claims`]); whoever fills it keeps that order.
#[derive(Debug, Clone, Default)]
pub struct ObjectSet {
    /// NodePools.
    pub node_pools: Vec<Arc<NodePool>>,
    /// NodeClaims, in name order.
    pub node_claims: Vec<Arc<NodeClaim>>,
    /// Nodes.
    pub nodes: Vec<Arc<Node>>,
    /// Pods in every namespace.
    pub pods: Vec<Arc<Pod>>,
    /// DaemonSets.
    pub daemon_sets: Vec<Arc<DaemonSet>>,
    /// PodDisruptionBudgets.
    pub pdbs: Vec<Arc<PodDisruptionBudget>>,
    /// Namespaces.
    pub namespaces: Vec<Arc<Namespace>>,
    /// Services (selectors for default spread constraints).
    pub services: Vec<Arc<Service>>,
    /// ReplicaSets (selectors for default spread constraints).
    pub replica_sets: Vec<Arc<ReplicaSet>>,
    /// StatefulSets (selectors for default spread constraints).
    pub stateful_sets: Vec<Arc<StatefulSet>>,
    /// ReplicationControllers (selectors for default spread constraints).
    pub replication_controllers: Vec<Arc<ReplicationController>>,
    /// ResourceClaims (for `--ignore-dra-requests=false`).
    pub resource_claims: Vec<Arc<ResourceClaim>>,
    /// ResourceClaimTemplates (likewise).
    pub resource_claim_templates: Vec<Arc<ResourceClaimTemplate>>,
    /// DeviceClasses (likewise).
    pub device_classes: Vec<Arc<DeviceClass>>,
}

impl ObjectSet {
    /// The set as the feed reads it.
    pub fn view(&self) -> ApiObjects<'_> {
        ApiObjects {
            node_pools: &self.node_pools,
            node_claims: &self.node_claims,
            nodes: &self.nodes,
            pods: &self.pods,
            daemon_sets: &self.daemon_sets,
            pdbs: &self.pdbs,
            namespaces: &self.namespaces,
            services: &self.services,
            replica_sets: &self.replica_sets,
            stateful_sets: &self.stateful_sets,
            replication_controllers: &self.replication_controllers,
            resource_claims: &self.resource_claims,
            resource_claim_templates: &self.resource_claim_templates,
            device_classes: &self.device_classes,
        }
    }
}

/// Changed objects still present, and the keys of those gone, for
/// [`Feed::sync_changes`](crate::feed::Feed::sync_changes). It dereferences to the present
/// objects, so a caller fills it kind by kind.
#[derive(Debug, Clone, Default)]
pub struct ChangeSet {
    /// The changed objects the stores still hold.
    pub present: ObjectSet,
    /// The changed objects no store holds any more.
    pub deleted: Vec<ObjectKey>,
}

impl std::ops::Deref for ChangeSet {
    type Target = ObjectSet;
    fn deref(&self) -> &ObjectSet {
        &self.present
    }
}

impl std::ops::DerefMut for ChangeSet {
    fn deref_mut(&mut self) -> &mut ObjectSet {
        &mut self.present
    }
}

impl ChangeSet {
    /// The change set as the feed reads it.
    pub fn view(&self) -> Changes<'_> {
        Changes {
            present: self.present.view(),
            deleted: &self.deleted,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn views_borrow_every_kind_and_the_deletions() {
        let mut changes = ChangeSet::default();
        changes
            .node_pools
            .push(Arc::new(NodePool::new("default", Default::default())));
        changes.pods.push(Arc::new(Pod::default()));
        changes.deleted.push(ObjectKey::Node("gone".into()));
        let view = changes.view();
        assert_eq!(view.present.node_pools.len(), 1);
        assert_eq!(view.present.pods.len(), 1);
        assert!(view.present.nodes.is_empty() && view.present.node_claims.is_empty());
        assert_eq!(view.deleted, [ObjectKey::Node("gone".into())]);
        let all = changes.present.view();
        assert_eq!(all.node_pools[0].name(), "default");
    }
}
