//! The controller's view of the cluster: one reflector store per kind it reads, fed by watch
//! streams. Stores are read-only snapshots for the reconcilers; every write goes to the API
//! server and comes back through the watch, so a restarted replica rebuilds exactly this
//! view from the objects themselves.

use futures::StreamExt;
use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{Namespace, Node, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::storage::v1::VolumeAttachment;
use karpenter_cloudprovider::{NodeClaim, NodePool};
use karpenter_cluster::feed::ApiObjects;
use kube::runtime::reflector::{self, Store, store::Writer};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, Resource};
use serde::de::DeserializeOwned;
use std::fmt::Debug;
use std::hash::Hash;
use std::sync::Arc;
use tokio::sync::Notify;

/// Reader halves of every store.
#[derive(Clone)]
pub struct Stores {
    /// Pods in every namespace.
    pub pods: Store<Pod>,
    /// Nodes.
    pub nodes: Store<Node>,
    /// `karpenter.sh/v1` NodeClaims.
    pub node_claims: Store<NodeClaim>,
    /// `karpenter.sh/v1` NodePools.
    pub node_pools: Store<NodePool>,
    /// PodDisruptionBudgets.
    pub pdbs: Store<PodDisruptionBudget>,
    /// DaemonSets.
    pub daemon_sets: Store<DaemonSet>,
    /// VolumeAttachments (termination waits for them).
    pub volume_attachments: Store<VolumeAttachment>,
    /// Namespaces (labels for namespace selectors).
    pub namespaces: Store<Namespace>,
}

/// Writer halves, used by the watch tasks (and by tests to inject objects).
pub struct Writers {
    /// Pods.
    pub pods: Writer<Pod>,
    /// Nodes.
    pub nodes: Writer<Node>,
    /// NodeClaims.
    pub node_claims: Writer<NodeClaim>,
    /// NodePools.
    pub node_pools: Writer<NodePool>,
    /// PDBs.
    pub pdbs: Writer<PodDisruptionBudget>,
    /// DaemonSets.
    pub daemon_sets: Writer<DaemonSet>,
    /// VolumeAttachments.
    pub volume_attachments: Writer<VolumeAttachment>,
    /// Namespaces.
    pub namespaces: Writer<Namespace>,
}

/// Empty stores and their writers.
pub fn stores() -> (Stores, Writers) {
    let (pods, pods_w) = reflector::store();
    let (nodes, nodes_w) = reflector::store();
    let (node_claims, node_claims_w) = reflector::store();
    let (node_pools, node_pools_w) = reflector::store();
    let (pdbs, pdbs_w) = reflector::store();
    let (daemon_sets, daemon_sets_w) = reflector::store();
    let (volume_attachments, va_w) = reflector::store();
    let (namespaces, ns_w) = reflector::store();
    (
        Stores {
            pods,
            nodes,
            node_claims,
            node_pools,
            pdbs,
            daemon_sets,
            volume_attachments,
            namespaces,
        },
        Writers {
            pods: pods_w,
            nodes: nodes_w,
            node_claims: node_claims_w,
            node_pools: node_pools_w,
            pdbs: pdbs_w,
            daemon_sets: daemon_sets_w,
            volume_attachments: va_w,
            namespaces: ns_w,
        },
    )
}

impl Stores {
    /// Waits until every store has listed once.
    ///
    /// # Errors
    /// A writer was dropped (its watch task ended).
    pub async fn wait_until_ready(&self) -> Result<(), reflector::store::WriterDropped> {
        self.pods.wait_until_ready().await?;
        self.nodes.wait_until_ready().await?;
        self.node_claims.wait_until_ready().await?;
        self.node_pools.wait_until_ready().await?;
        self.pdbs.wait_until_ready().await?;
        self.daemon_sets.wait_until_ready().await?;
        self.volume_attachments.wait_until_ready().await?;
        self.namespaces.wait_until_ready().await
    }

    /// The node with `spec.providerID == provider_id`.
    pub fn node_by_provider_id(&self, provider_id: &str) -> Option<Arc<Node>> {
        if provider_id.is_empty() {
            return None;
        }
        self.nodes
            .state()
            .into_iter()
            .find(|n| karpenter_cluster::node_provider_id(n) == provider_id)
    }

    /// The NodeClaim with `status.providerID == provider_id`.
    pub fn node_claim_by_provider_id(&self, provider_id: &str) -> Option<Arc<NodeClaim>> {
        if provider_id.is_empty() {
            return None;
        }
        self.node_claims
            .state()
            .into_iter()
            .find(|c| c.provider_id() == provider_id)
    }

    /// Pods bound to `node`.
    pub fn pods_on(&self, node: &str) -> Vec<Arc<Pod>> {
        let mut pods: Vec<_> = self
            .pods
            .state()
            .into_iter()
            .filter(|p| p.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some(node))
            .collect();
        pods.sort_by(|a, b| {
            (&a.metadata.namespace, &a.metadata.name)
                .cmp(&(&b.metadata.namespace, &b.metadata.name))
        });
        pods
    }

    /// NodeClaims sorted by name (so passes are deterministic).
    pub fn node_claims_sorted(&self) -> Vec<Arc<NodeClaim>> {
        let mut v = self.node_claims.state();
        v.sort_by(|a, b| a.name().cmp(b.name()));
        v
    }
}

/// One copy of every store the index is fed from, for [`karpenter_cluster::feed::Feed`].
pub struct Snapshot {
    node_pools: Vec<Arc<NodePool>>,
    node_claims: Vec<Arc<NodeClaim>>,
    nodes: Vec<Arc<Node>>,
    pods: Vec<Arc<Pod>>,
    daemon_sets: Vec<Arc<DaemonSet>>,
    pdbs: Vec<Arc<PodDisruptionBudget>>,
    namespaces: Vec<Arc<Namespace>>,
}

impl Snapshot {
    /// The snapshot as the feed reads it.
    pub fn view(&self) -> ApiObjects<'_> {
        ApiObjects {
            node_pools: &self.node_pools,
            node_claims: &self.node_claims,
            nodes: &self.nodes,
            pods: &self.pods,
            daemon_sets: &self.daemon_sets,
            pdbs: &self.pdbs,
            namespaces: &self.namespaces,
        }
    }
}

impl Stores {
    /// What the stores hold now (NodeClaims in name order).
    pub fn api_objects(&self) -> Snapshot {
        Snapshot {
            node_pools: self.node_pools.state(),
            node_claims: self.node_claims_sorted(),
            nodes: self.nodes.state(),
            pods: self.pods.state(),
            daemon_sets: self.daemon_sets.state(),
            pdbs: self.pdbs.state(),
            namespaces: self.namespaces.state(),
        }
    }
}

/// Spawns one watch task per store. `changed` is notified after every event, so loops that
/// wait on it react to changes without polling.
pub fn spawn_watchers(
    client: &Client,
    writers: Writers,
    changed: Arc<Notify>,
) -> Vec<tokio::task::JoinHandle<()>> {
    let Writers {
        pods,
        nodes,
        node_claims,
        node_pools,
        pdbs,
        daemon_sets,
        volume_attachments,
        namespaces,
    } = writers;
    vec![
        spawn_one(Api::<Pod>::all(client.clone()), pods, changed.clone()),
        spawn_one(Api::<Node>::all(client.clone()), nodes, changed.clone()),
        spawn_one(
            Api::<NodeClaim>::all(client.clone()),
            node_claims,
            changed.clone(),
        ),
        spawn_one(
            Api::<NodePool>::all(client.clone()),
            node_pools,
            changed.clone(),
        ),
        spawn_one(
            Api::<PodDisruptionBudget>::all(client.clone()),
            pdbs,
            changed.clone(),
        ),
        spawn_one(
            Api::<DaemonSet>::all(client.clone()),
            daemon_sets,
            changed.clone(),
        ),
        spawn_one(
            Api::<VolumeAttachment>::all(client.clone()),
            volume_attachments,
            changed.clone(),
        ),
        spawn_one(Api::<Namespace>::all(client.clone()), namespaces, changed),
    ]
}

/// Spawns one watch feeding `writer`, notifying `changed` on every event.
pub(crate) fn spawn_one<K>(
    api: Api<K>,
    writer: Writer<K>,
    changed: Arc<Notify>,
) -> tokio::task::JoinHandle<()>
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    K::DynamicType: Default + Eq + Hash + Clone + Send + Sync,
{
    tokio::spawn(async move {
        let stream = watcher(api, watcher::Config::default())
            .default_backoff()
            .reflect(writer)
            .touched_objects();
        futures::pin_mut!(stream);
        while let Some(event) = stream.next().await {
            if let Err(e) = event {
                tracing::warn!(kind = %K::kind(&Default::default()), error = %e, "watch error");
            }
            changed.notify_waiters();
        }
    })
}
