//! The controller's view of the cluster: one reflector store per kind it reads, fed by watch
//! streams. Stores are read-only snapshots for the reconcilers; every write goes to the API
//! server and comes back through the watch, so a restarted replica rebuilds exactly this
//! view from the objects themselves.

use super::retry_log::{self, Routine as _};
use futures::StreamExt;
use k8s_openapi::api::apps::v1::{DaemonSet, ReplicaSet, StatefulSet};
use k8s_openapi::api::core::v1::{Namespace, Node, Pod, ReplicationController, Service};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::resource::v1::{DeviceClass, ResourceClaim, ResourceClaimTemplate};
use k8s_openapi::api::storage::v1::VolumeAttachment;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use karpenter_cloudprovider::{NodeClaim, NodePool};
use karpenter_cluster::ObjectKey;
use karpenter_cluster::default_spread::SourceKind;
use karpenter_cluster::dra::DraKind;
use karpenter_cluster::failure_streaks::FailureStreaks;
use karpenter_cluster::feed::Lookup;
use karpenter_cluster::object_set::{ChangeSet, ObjectSet};
use karpenter_metrics::workqueue::WorkQueue;
use karpenter_scheduling::model::PodKey;
use kube::runtime::reflector::{self, ObjectRef, Store, store::Writer};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, Resource};
use serde::de::DeserializeOwned;
use std::collections::BTreeSet;
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
    /// The selectors default spread constraints are deduced from: watched only with a
    /// scheduler configuration (`--scheduler-config`), empty otherwise.
    pub selector_sources: Option<SelectorStores>,
    /// ResourceClaims, ResourceClaimTemplates and DeviceClasses: watched only with
    /// `--ignore-dra-requests=false`.
    pub dra: Option<DraStores>,
    /// The indexed objects the watches reported changed since the index was last fed, and
    /// whether a watch (re)listed (then deletions while it was away are invisible).
    pub dirty: WorkQueue<ObjectKey>,
}

/// The stores of the objects whose selectors default spread constraints are deduced from
/// (the kube-scheduler's `DefaultSelector` reads the same four kinds). Their pod templates
/// are dropped as they arrive: only `spec.selector` is read.
#[derive(Clone)]
pub struct SelectorStores {
    /// Services.
    pub services: Store<Service>,
    /// ReplicaSets.
    pub replica_sets: Store<ReplicaSet>,
    /// StatefulSets.
    pub stateful_sets: Store<StatefulSet>,
    /// ReplicationControllers.
    pub replication_controllers: Store<ReplicationController>,
}

/// Writer halves of [`SelectorStores`].
pub struct SelectorWriters {
    services: Writer<Service>,
    replica_sets: Writer<ReplicaSet>,
    stateful_sets: Writer<StatefulSet>,
    replication_controllers: Writer<ReplicationController>,
}

impl SelectorStores {
    fn new() -> (Self, SelectorWriters) {
        let (services, services_w) = reflector::store();
        let (replica_sets, rs_w) = reflector::store();
        let (stateful_sets, ss_w) = reflector::store();
        let (replication_controllers, rc_w) = reflector::store();
        (
            Self {
                services,
                replica_sets,
                stateful_sets,
                replication_controllers,
            },
            SelectorWriters {
                services: services_w,
                replica_sets: rs_w,
                stateful_sets: ss_w,
                replication_controllers: rc_w,
            },
        )
    }

    async fn wait_until_ready(&self) -> Result<(), reflector::store::WriterDropped> {
        self.services.wait_until_ready().await?;
        self.replica_sets.wait_until_ready().await?;
        self.stateful_sets.wait_until_ready().await?;
        self.replication_controllers.wait_until_ready().await
    }

    fn fill(&self, out: &mut ObjectSet) {
        out.services = self.services.state();
        out.replica_sets = self.replica_sets.state();
        out.stateful_sets = self.stateful_sets.state();
        out.replication_controllers = self.replication_controllers.state();
    }
}

/// The stores of the DRA objects pods' claims are resolved against.
#[derive(Clone)]
pub struct DraStores {
    /// ResourceClaims.
    pub claims: Store<ResourceClaim>,
    /// ResourceClaimTemplates.
    pub templates: Store<ResourceClaimTemplate>,
    /// DeviceClasses.
    pub classes: Store<DeviceClass>,
}

/// Writer halves of [`DraStores`].
pub struct DraWriters {
    claims: Writer<ResourceClaim>,
    templates: Writer<ResourceClaimTemplate>,
    classes: Writer<DeviceClass>,
}

impl DraStores {
    fn new() -> (Self, DraWriters) {
        let (claims, claims_w) = reflector::store();
        let (templates, templates_w) = reflector::store();
        let (classes, classes_w) = reflector::store();
        (
            Self {
                claims,
                templates,
                classes,
            },
            DraWriters {
                claims: claims_w,
                templates: templates_w,
                classes: classes_w,
            },
        )
    }

    async fn wait_until_ready(&self) -> Result<(), reflector::store::WriterDropped> {
        self.claims.wait_until_ready().await?;
        self.templates.wait_until_ready().await?;
        self.classes.wait_until_ready().await
    }

    fn fill(&self, out: &mut ObjectSet) {
        out.resource_claims = self.claims.state();
        out.resource_claim_templates = self.templates.state();
        out.device_classes = self.classes.state();
    }
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
    /// The selector sources' writers, when they are watched.
    pub selector_sources: Option<SelectorWriters>,
    /// The DRA objects' writers, when they are watched.
    pub dra: Option<DraWriters>,
    /// Shared with [`Stores::dirty`].
    pub dirty: WorkQueue<ObjectKey>,
}

/// Empty stores and their writers, recording changes in `dirty`; `selector_sources` adds
/// the stores default spread constraints need, `dra` those of DRA objects.
pub fn stores(dirty: WorkQueue<ObjectKey>, selector_sources: bool, dra: bool) -> (Stores, Writers) {
    let (sources, sources_w) = selector_sources.then(SelectorStores::new).unzip();
    let (dra, dra_w) = dra.then(DraStores::new).unzip();
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
            selector_sources: sources,
            dra,
            dirty: dirty.clone(),
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
            selector_sources: sources_w,
            dra: dra_w,
            dirty,
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
        if let Some(sources) = &self.selector_sources {
            sources.wait_until_ready().await?;
        }
        if let Some(dra) = &self.dra {
            dra.wait_until_ready().await?;
        }
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

impl Stores {
    /// The objects behind `keys` as the stores hold them now; keys no store holds any more
    /// are deletions.
    pub fn changes(&self, keys: &BTreeSet<ObjectKey>) -> ChangeSet {
        let mut out = ChangeSet::default();
        fn found<K: Resource<DynamicType = ()> + Clone>(
            store: &Store<K>,
            name: &str,
            namespace: Option<&str>,
        ) -> Option<Arc<K>> {
            let r = ObjectRef::new(name);
            store.get(&match namespace {
                Some(ns) => r.within(ns),
                None => r,
            })
        }
        for key in keys {
            let present = match key {
                ObjectKey::NodePool(n) => {
                    found(&self.node_pools, n, None).map(|o| out.node_pools.push(o))
                }
                ObjectKey::NodeClaim(n) => {
                    found(&self.node_claims, n, None).map(|o| out.node_claims.push(o))
                }
                ObjectKey::Node(n) => found(&self.nodes, n, None).map(|o| out.nodes.push(o)),
                ObjectKey::Pod(k) => {
                    found(&self.pods, &k.name, Some(&k.namespace)).map(|o| out.pods.push(o))
                }
                ObjectKey::DaemonSet(ns, n) => {
                    found(&self.daemon_sets, n, Some(ns)).map(|o| out.daemon_sets.push(o))
                }
                ObjectKey::Pdb(ns, n) => found(&self.pdbs, n, Some(ns)).map(|o| out.pdbs.push(o)),
                ObjectKey::Namespace(n) => {
                    found(&self.namespaces, n, None).map(|o| out.namespaces.push(o))
                }
                ObjectKey::SelectorSource(kind, ns, n) => {
                    self.selector_sources.as_ref().and_then(|s| {
                        let ns = Some(ns.as_str());
                        match kind {
                            SourceKind::Service => {
                                found(&s.services, n, ns).map(|o| out.services.push(o))
                            }
                            SourceKind::ReplicaSet => {
                                found(&s.replica_sets, n, ns).map(|o| out.replica_sets.push(o))
                            }
                            SourceKind::StatefulSet => {
                                found(&s.stateful_sets, n, ns).map(|o| out.stateful_sets.push(o))
                            }
                            SourceKind::ReplicationController => {
                                found(&s.replication_controllers, n, ns)
                                    .map(|o| out.replication_controllers.push(o))
                            }
                            // Only the simulator and `plan` index Deployments.
                            SourceKind::Deployment => None,
                        }
                    })
                }
                ObjectKey::Dra(kind, ns, n) => self.dra.as_ref().and_then(|s| match kind {
                    DraKind::ResourceClaim => {
                        found(&s.claims, n, Some(ns)).map(|o| out.resource_claims.push(o))
                    }
                    DraKind::ResourceClaimTemplate => found(&s.templates, n, Some(ns))
                        .map(|o| out.resource_claim_templates.push(o)),
                    DraKind::DeviceClass => {
                        found(&s.classes, n, None).map(|o| out.device_classes.push(o))
                    }
                    // Pods' claims come with their pods (`ObjectKey::Pod`).
                    DraKind::PodClaims => None,
                }),
            };
            if present.is_none() {
                out.deleted.push(key.clone());
            }
        }
        out
    }
}

impl Lookup for Stores {
    fn node(&self, name: &str) -> Option<Arc<Node>> {
        self.nodes.get(&ObjectRef::new(name))
    }
    fn node_claim(&self, name: &str) -> Option<Arc<NodeClaim>> {
        self.node_claims.get(&ObjectRef::new(name))
    }
}

impl Stores {
    /// What the stores hold now (NodeClaims in name order).
    pub fn api_objects(&self) -> ObjectSet {
        let mut out = ObjectSet {
            node_pools: self.node_pools.state(),
            node_claims: self.node_claims_sorted(),
            nodes: self.nodes.state(),
            pods: self.pods.state(),
            daemon_sets: self.daemon_sets.state(),
            pdbs: self.pdbs.state(),
            namespaces: self.namespaces.state(),
            ..ObjectSet::default()
        };
        if let Some(sources) = &self.selector_sources {
            sources.fill(&mut out);
        }
        if let Some(dra) = &self.dra {
            dra.fill(&mut out);
        }
        out
    }
}

/// Spawns one watch task per store. `changed` is notified after every event, so loops that
/// wait on it react to changes without polling; indexed kinds record what changed in
/// [`Stores::dirty`].
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
        selector_sources,
        dra,
        dirty,
    } = writers;
    let c = || client.clone();
    let d = || Some(dirty.clone());
    let mut tasks = Vec::new();
    if let Some(w) = selector_sources {
        tasks.extend([
            spawn_one(
                Api::<Service>::all(c()),
                w.services,
                changed.clone(),
                d(),
                |s| key(SourceKind::Service, &s.metadata),
            ),
            spawn_one(
                Api::<ReplicationController>::all(c()),
                w.replication_controllers,
                changed.clone(),
                d(),
                |rc| key(SourceKind::ReplicationController, &rc.metadata),
            ),
            spawn_stripped(
                Api::<ReplicaSet>::all(c()),
                w.replica_sets,
                changed.clone(),
                d(),
                |rs| key(SourceKind::ReplicaSet, &rs.metadata),
                |rs| rs.spec.template = None,
            ),
            spawn_stripped(
                Api::<StatefulSet>::all(c()),
                w.stateful_sets,
                changed.clone(),
                d(),
                |ss| key(SourceKind::StatefulSet, &ss.metadata),
                |ss| {
                    ss.spec.template = Default::default();
                    ss.spec.volume_claim_templates = None;
                },
            ),
        ]);
    }
    if let Some(w) = dra {
        tasks.extend([
            spawn_one(
                Api::<ResourceClaim>::all(c()),
                w.claims,
                changed.clone(),
                d(),
                |o| dra_key(DraKind::ResourceClaim, &o.metadata),
            ),
            spawn_one(
                Api::<ResourceClaimTemplate>::all(c()),
                w.templates,
                changed.clone(),
                d(),
                |o| dra_key(DraKind::ResourceClaimTemplate, &o.metadata),
            ),
            spawn_one(
                Api::<DeviceClass>::all(c()),
                w.classes,
                changed.clone(),
                d(),
                |o| dra_key(DraKind::DeviceClass, &o.metadata),
            ),
        ]);
    }
    tasks.extend([
        spawn_one(Api::<Pod>::all(c()), pods, changed.clone(), d(), |p| {
            ObjectKey::Pod(PodKey::new(namespace(&p.metadata), name(&p.metadata)))
        }),
        spawn_one(Api::<Node>::all(c()), nodes, changed.clone(), d(), |n| {
            ObjectKey::Node(name(&n.metadata))
        }),
        spawn_one(
            Api::<NodeClaim>::all(c()),
            node_claims,
            changed.clone(),
            d(),
            |c| ObjectKey::NodeClaim(name(&c.metadata)),
        ),
        spawn_one(
            Api::<NodePool>::all(c()),
            node_pools,
            changed.clone(),
            d(),
            |p| ObjectKey::NodePool(name(&p.metadata)),
        ),
        spawn_one(
            Api::<PodDisruptionBudget>::all(c()),
            pdbs,
            changed.clone(),
            d(),
            |p| ObjectKey::Pdb(namespace(&p.metadata), name(&p.metadata)),
        ),
        spawn_one(
            Api::<DaemonSet>::all(c()),
            daemon_sets,
            changed.clone(),
            d(),
            |ds| ObjectKey::DaemonSet(namespace(&ds.metadata), name(&ds.metadata)),
        ),
        spawn_one(
            Api::<VolumeAttachment>::all(c()),
            volume_attachments,
            changed.clone(),
            None,
            |v| ObjectKey::Node(name(&v.metadata)),
        ),
        spawn_one(Api::<Namespace>::all(c()), namespaces, changed, d(), |n| {
            ObjectKey::Namespace(name(&n.metadata))
        }),
    ]);
    tasks
}

/// Spawns one watch feeding `writer`, notifying `changed` on every event and, with `dirty`,
/// recording each changed object's key (`key_of`) and every completed (re)list.
pub(crate) fn spawn_one<K>(
    api: Api<K>,
    writer: Writer<K>,
    changed: Arc<Notify>,
    dirty: Option<WorkQueue<ObjectKey>>,
    key_of: fn(&K) -> ObjectKey,
) -> tokio::task::JoinHandle<()>
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    K::DynamicType: Default + Eq + Hash + Clone + Send + Sync,
{
    spawn_stripped(api, writer, changed, dirty, key_of, |_| {})
}

/// [`spawn_one`], with `strip` applied to each object before it is stored (to drop what is
/// never read, such as a workload's pod template).
pub(crate) fn spawn_stripped<K>(
    api: Api<K>,
    writer: Writer<K>,
    changed: Arc<Notify>,
    dirty: Option<WorkQueue<ObjectKey>>,
    key_of: fn(&K) -> ObjectKey,
    strip: fn(&mut K),
) -> tokio::task::JoinHandle<()>
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    K::DynamicType: Default + Eq + Hash + Clone + Send + Sync,
{
    tokio::spawn(async move {
        let stream = watcher(api, watcher::Config::default())
            .default_backoff()
            .modify(strip)
            .reflect(writer);
        futures::pin_mut!(stream);
        let kind = K::kind(&Default::default()).into_owned();
        let mut failures = FailureStreaks::default();
        while let Some(event) = stream.next().await {
            if event.is_ok() && !failures.is_empty() {
                failures.succeeded(&());
            }
            match (&event, &dirty) {
                // The watcher retries with backoff, and answers 410 Gone with a fresh list:
                // only a watch failing for a minute is worth a warning.
                (Err(e), _) => {
                    let now = tokio::time::Instant::now().into_std();
                    let report = failures.failed(&(), e.is_routine(), now);
                    retry_log::log(report, &kind, "watch error; retrying", e);
                }
                (Ok(watcher::Event::Apply(o) | watcher::Event::Delete(o)), Some(d)) => {
                    d.add(key_of(o));
                }
                (Ok(watcher::Event::InitDone), Some(d)) => d.relist(),
                _ => {}
            }
            changed.notify_waiters();
        }
    })
}

fn key(kind: SourceKind, m: &ObjectMeta) -> ObjectKey {
    ObjectKey::SelectorSource(kind, namespace(m), name(m))
}

fn dra_key(kind: DraKind, m: &ObjectMeta) -> ObjectKey {
    ObjectKey::Dra(kind, namespace(m), name(m))
}

fn name(m: &ObjectMeta) -> String {
    m.name.clone().unwrap_or_default()
}

fn namespace(m: &ObjectMeta) -> String {
    m.namespace.clone().unwrap_or_default()
}
