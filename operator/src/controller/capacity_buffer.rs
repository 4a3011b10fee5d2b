//! CapacityBuffers on a cluster (the `CapacityBuffer` feature gate): watches of
//! `autoscaling.x-k8s.io/v1beta1` CapacityBuffers and of what they may reference
//! (PodTemplates, Deployments, StatefulSets, ReplicaSets), the buffers resolved into the index
//! on every pass (so a template or workload change is seen at once, where upstream requeues
//! every 30 s), and their status written back: `replicas`, the PodTemplate and its generation,
//! `ReadyForProvisioning` from the resolution and `Provisioning` from where the reconciler's
//! last plan put the buffer's virtual pods.

use super::Ctx;
use super::state::spawn_one;
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::core::v1::PodTemplate;
use karpenter_cloudprovider::CapacityBuffer;
use karpenter_cloudprovider::ignored::ToldGenerations;
use karpenter_cluster::capacity_buffer::{
    BufferKey, Placement, Referents, ResolvedBuffer, desired_status, lookup, resolve,
};
use karpenter_cluster::{ClusterState, ObjectKey};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::{Api, Client};
use std::collections::BTreeMap;
use std::sync::Arc;
use tokio::sync::Notify;

/// The stores a buffer is resolved from.
#[derive(Clone)]
pub struct Buffers {
    buffers: Store<CapacityBuffer>,
    pod_templates: Store<PodTemplate>,
    deployments: Store<Deployment>,
    stateful_sets: Store<StatefulSet>,
    replica_sets: Store<ReplicaSet>,
}

/// What the controller remembers of each buffer between passes: the generation whose
/// unknown provisioning strategy was told, and the resourceVersion its status was last
/// written over (until the watch brings the write back, the store still shows the old one).
#[derive(Debug, Default)]
pub struct Told {
    strategy: BTreeMap<BufferKey, Option<i64>>,
    written: BTreeMap<BufferKey, Option<String>>,
}

fn get<K>(store: &Store<K>, namespace: &str, name: &str) -> Option<Arc<K>>
where
    K: kube::Resource<DynamicType = ()> + Clone,
{
    store.get(&ObjectRef::new(name).within(namespace))
}

impl Referents for Buffers {
    fn pod_template(&self, namespace: &str, name: &str) -> Option<Arc<PodTemplate>> {
        get(&self.pod_templates, namespace, name)
    }
    fn deployment(&self, namespace: &str, name: &str) -> Option<Arc<Deployment>> {
        get(&self.deployments, namespace, name)
    }
    fn stateful_set(&self, namespace: &str, name: &str) -> Option<Arc<StatefulSet>> {
        get(&self.stateful_sets, namespace, name)
    }
    fn replica_set(&self, namespace: &str, name: &str) -> Option<Arc<ReplicaSet>> {
        get(&self.replica_sets, namespace, name)
    }
}

/// The key function of a watch that records no dirty keys (never called).
fn unindexed<K>(_: &K) -> ObjectKey {
    ObjectKey::Namespace(String::new())
}

/// Starts the watches; their tasks go with the controller's other watches.
pub fn spawn(client: &Client, changed: Arc<Notify>) -> (Buffers, Vec<tokio::task::JoinHandle<()>>) {
    let (buffers, b) = reflector::store();
    let (pod_templates, pt) = reflector::store();
    let (deployments, d) = reflector::store();
    let (stateful_sets, s) = reflector::store();
    let (replica_sets, r) = reflector::store();
    let c = || client.clone();
    let n = || changed.clone();
    let tasks = vec![
        spawn_one(Api::<CapacityBuffer>::all(c()), b, n(), None, unindexed),
        spawn_one(Api::<PodTemplate>::all(c()), pt, n(), None, unindexed),
        spawn_one(Api::<Deployment>::all(c()), d, n(), None, unindexed),
        spawn_one(Api::<StatefulSet>::all(c()), s, n(), None, unindexed),
        spawn_one(Api::<ReplicaSet>::all(c()), r, n(), None, unindexed),
    ];
    (
        Buffers {
            buffers,
            pod_templates,
            deployments,
            stateful_sets,
            replica_sets,
        },
        tasks,
    )
}

/// Why the controller cannot keep buffers with the gate on.
#[derive(Debug, thiserror::Error)]
pub enum NotServed {
    /// The API server does not serve the CRD's version.
    #[error(
        "the CapacityBuffer feature gate is on but the API server does not serve \
         capacitybuffers.autoscaling.x-k8s.io/v1beta1 ({0}); install the CRD (`karpenter crds`, \
         or the chart's crds/) or turn the gate off"
    )]
    Missing(String),
    /// The controller may not list buffers.
    #[error(
        "the CapacityBuffer feature gate is on but listing capacitybuffers is forbidden ({0}); \
         grant get, list and watch on capacitybuffers.autoscaling.x-k8s.io (the chart's \
         ClusterRole does)"
    )]
    Forbidden(String),
}

/// With the gate on, checks once before the watches start that buffers can be listed, so a
/// missing CRD or RBAC rule stops the controller with a clear error instead of a watch that
/// retries forever while the caches never sync. A transient failure is left to the watch.
///
/// # Errors
/// The CRD is not served (404) or listing it is forbidden (403).
pub async fn check_served(client: &Client) -> Result<(), NotServed> {
    let api: Api<CapacityBuffer> = Api::all(client.clone());
    match api.list(&kube::api::ListParams::default().limit(1)).await {
        Err(kube::Error::Api(e)) if e.code == 404 => Err(NotServed::Missing(e.message)),
        Err(kube::Error::Api(e)) if e.code == 403 => Err(NotServed::Forbidden(e.message)),
        Ok(_) | Err(_) => Ok(()),
    }
}

/// The reason of the Warning event a CapacityBuffer gets while the gate is off.
pub const IGNORED_REASON: &str = "FeatureGateDisabled";

/// What a CapacityBuffer is told while the CapacityBuffer gate is off.
pub const IGNORED_MESSAGE: &str = "CapacityBuffer is ignored: the CapacityBuffer feature gate is \
    off (its default, as in Karpenter), so it keeps no capacity; enable it with \
    FEATURE_GATES=CapacityBuffer=true (the chart's settings.featureGates.capacityBuffer)";

/// With the CapacityBuffer gate off, the cluster's CapacityBuffers, each told as ignored once
/// per generation (a WARN line and a `FeatureGateDisabled` Warning event on the buffer), so a
/// buffer created after start-up is reported as loudly as one that was there before.
pub struct IgnoredBuffers {
    buffers: Store<CapacityBuffer>,
    told: ToldGenerations,
}

/// With the gate off: lists the buffers once (naming them at start-up) and, when the CRD is
/// served and readable, watches them for [`IgnoredBuffers::tell`]. `None` when the API answers
/// that it has no CapacityBuffers to show (CRD not installed, or no RBAC to read them).
pub async fn watch_ignored(
    client: &Client,
    changed: Arc<Notify>,
) -> Option<(IgnoredBuffers, tokio::task::JoinHandle<()>)> {
    let api: Api<CapacityBuffer> = Api::all(client.clone());
    match api.list(&kube::api::ListParams::default()).await {
        Ok(list) if !list.items.is_empty() => {
            let names: Vec<String> = list
                .items
                .iter()
                .map(|b| BufferKey::of(b).to_string())
                .collect();
            tracing::warn!(
                capacitybuffers = ?names,
                "CapacityBuffers are ignored: the CapacityBuffer feature gate is off"
            );
        }
        Ok(_) => {}
        Err(kube::Error::Api(e)) => {
            tracing::debug!(error = %e, "capacitybuffers not listed; not watched");
            return None;
        }
        // A transient failure: the watch retries with backoff.
        Err(e) => tracing::debug!(error = %e, "listing capacitybuffers failed"),
    }
    let (buffers, writer) = reflector::store();
    let task = spawn_one(api, writer, changed, None, unindexed);
    Some((
        IgnoredBuffers {
            buffers,
            told: ToldGenerations::default(),
        },
        task,
    ))
}

impl IgnoredBuffers {
    /// Tells every buffer not yet told at its current generation that it is ignored.
    pub fn tell(&mut self, ctx: &Ctx) {
        let mut buffers = self.buffers.state();
        buffers.sort_by_key(|b| BufferKey::of(b));
        for b in buffers {
            let key = BufferKey::of(&b).to_string();
            if self
                .told
                .first_time("CapacityBuffer", &key, b.metadata.generation)
            {
                tracing::warn!(capacitybuffer = %key, "{IGNORED_MESSAGE}");
                ctx.events
                    .warning(b.as_ref(), IGNORED_REASON, IGNORED_MESSAGE.to_owned());
            }
        }
    }
}

impl Buffers {
    /// Waits until every watch has listed once.
    ///
    /// # Errors
    /// A watch task ended before listing.
    pub async fn wait_until_ready(&self) -> Result<(), reflector::store::WriterDropped> {
        self.buffers.wait_until_ready().await?;
        self.pod_templates.wait_until_ready().await?;
        self.deployments.wait_until_ready().await?;
        self.stateful_sets.wait_until_ready().await?;
        self.replica_sets.wait_until_ready().await
    }

    /// Every buffer, resolved against the stores as they are now, in key order.
    pub fn resolve(&self) -> Vec<(Arc<CapacityBuffer>, ResolvedBuffer)> {
        let mut out: Vec<_> = self
            .buffers
            .state()
            .into_iter()
            .map(|b| {
                let r = resolve(&b, |ns, reference| lookup(self, ns, reference));
                (b, r)
            })
            .collect();
        out.sort_by(|a, b| a.1.key.cmp(&b.1.key));
        out
    }

    /// Resolves every buffer into `state`; the buffers and their resolutions, for
    /// [`Self::write_status`].
    pub fn feed(
        &self,
        ctx: &Ctx,
        told: &mut Told,
        state: &mut ClusterState,
    ) -> Vec<(Arc<CapacityBuffer>, ResolvedBuffer)> {
        let resolved = self.resolve();
        for (buffer, r) in &resolved {
            let Some(strategy) = r.unknown_strategy() else {
                continue;
            };
            let generation = buffer.metadata.generation;
            if told.strategy.insert(r.key.clone(), generation) == Some(generation) {
                continue;
            }
            let message = format!(
                "provisioningStrategy {strategy:?} is kept as buffer.x-k8s.io/active-capacity, as Karpenter v1.15 does"
            );
            tracing::warn!(capacitybuffer = %r.key, "{message}");
            ctx.events
                .warning(buffer.as_ref(), "UnknownProvisioningStrategy", message);
        }
        let present = |k: &BufferKey| resolved.iter().any(|(_, r)| r.key == *k);
        told.strategy.retain(|k, _| present(k));
        told.written.retain(|k, _| present(k));
        state.set_capacity_buffers(resolved.iter().map(|(_, r)| r.clone()));
        resolved
    }
}

/// Writes each buffer's status where it differs from what it should be, given `placements`
/// (the reconciler's last plan). A buffer deleted meanwhile is skipped; a conflict or any
/// other failure is retried at the next pass, which recomputes the status from fresh objects.
///
/// # Errors
/// The first failed write (after trying every buffer).
pub async fn write_status(
    ctx: &Ctx,
    told: &mut Told,
    resolved: &[(Arc<CapacityBuffer>, ResolvedBuffer)],
    placements: &BTreeMap<BufferKey, Placement>,
) -> Result<(), super::ReconcileError> {
    let mut first_error = None;
    for (buffer, r) in resolved {
        let status = desired_status(buffer, r, placements.get(&r.key), &ctx.now_time());
        let version = &buffer.metadata.resource_version;
        if buffer.status.as_ref() == Some(&status) || told.written.get(&r.key) == Some(version) {
            continue;
        }
        let api: Api<CapacityBuffer> = Api::namespaced(ctx.client.clone(), &r.key.namespace);
        // Guarded by the resourceVersion read, as upstream's optimistic-lock patch: a status
        // computed from a stale buffer is refused rather than written over a newer one.
        let patch = serde_json::json!({
            "metadata": {"resourceVersion": buffer.metadata.resource_version},
            "status": status,
        });
        ctx.limiter.acquire().await;
        let result = super::api::merge_patch_status(&api, &r.key.name, &patch).await;
        match super::ReconcileError::unless_gone(
            result,
            "updating CapacityBuffer status",
            &r.key.to_string(),
        ) {
            Ok(()) => {
                told.written.insert(r.key.clone(), version.clone());
            }
            Err(e) => {
                first_error.get_or_insert(e);
            }
        }
    }
    first_error.map_or(Ok(()), Err)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controller::testing::{ctx, mock_client, put, status};
    use karpenter_cloudprovider::autoscaling::v1beta1::CapacityBufferStatus;

    fn buffer(status: serde_json::Value) -> CapacityBuffer {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "autoscaling.x-k8s.io/v1beta1", "kind": "CapacityBuffer",
            "metadata": {"name": "headroom", "namespace": "team", "generation": 2,
                         "resourceVersion": "7"},
            "spec": {"podTemplateRef": {"name": "chunk"}, "replicas": 2,
                     "provisioningStrategy": "example.com/other"},
            "status": status,
        }))
        .unwrap()
    }

    fn stores() -> (
        Buffers,
        reflector::store::Writer<CapacityBuffer>,
        reflector::store::Writer<PodTemplate>,
    ) {
        let (buffers, bw) = reflector::store();
        let (pod_templates, pw) = reflector::store();
        let b = Buffers {
            buffers,
            pod_templates,
            deployments: reflector::store().0,
            stateful_sets: reflector::store().0,
            replica_sets: reflector::store().0,
        };
        (b, bw, pw)
    }

    #[tokio::test]
    async fn with_the_gate_on_a_missing_crd_or_rbac_rule_is_an_error() {
        for (code, want) in [(404, "install the CRD"), (403, "grant get, list and watch")] {
            let (client, _api) = mock_client(move |_| status(code, "not here"));
            let e = check_served(&client).await.expect_err("an error");
            assert!(e.to_string().contains(want), "{code}: {e}");
        }
        let (client, _api) = mock_client(|_| status(500, "flaky"));
        assert!(check_served(&client).await.is_ok(), "left to the watch");
        let (client, _api) = mock_client(|_| {
            (
                200,
                serde_json::json!({"apiVersion": "autoscaling.x-k8s.io/v1beta1",
                    "kind": "CapacityBufferList", "metadata": {}, "items": []}),
            )
        });
        assert!(check_served(&client).await.is_ok());
    }

    #[tokio::test]
    async fn with_the_gate_off_each_buffer_is_told_once_per_generation() {
        let (client, api) = mock_client(|_| status(500, "unexpected"));
        let provider: Arc<dyn karpenter_cloudprovider::CloudProvider> =
            Arc::new(karpenter_cloudprovider_fake::FakeCloudProvider::default());
        let (ctx, _w, mut events) = ctx(client, provider, 0);
        let (store, mut writer) = reflector::store();
        let mut ignored = IgnoredBuffers {
            buffers: store,
            told: ToldGenerations::default(),
        };
        ignored.tell(&ctx);
        assert!(events.try_recv().is_err(), "no buffers, nothing told");
        let mut b = buffer(serde_json::Value::Null);
        put(&mut writer, b.clone());
        ignored.tell(&ctx);
        let e = events.try_recv().expect("the buffer is told");
        assert_eq!(e.reason, IGNORED_REASON);
        assert!(!e.normal);
        assert!(e.message.contains("CapacityBuffer feature gate is off"));
        ignored.tell(&ctx);
        assert!(events.try_recv().is_err(), "told once per generation");
        b.metadata.generation = Some(3);
        put(&mut writer, b);
        ignored.tell(&ctx);
        assert!(events.try_recv().is_ok(), "a new generation is told again");
        assert!(api.requests().is_empty(), "nothing is written");
    }

    #[tokio::test]
    async fn status_is_written_once_per_change_guarded_by_the_resource_version() {
        let (client, api) = mock_client(|s| {
            if s.method == "PATCH" {
                let mut b = serde_json::to_value(buffer(serde_json::Value::Null)).unwrap();
                b["status"] = s.body["status"].clone();
                (200, b)
            } else {
                status(500, "unexpected")
            }
        });
        let provider: Arc<dyn karpenter_cloudprovider::CloudProvider> =
            Arc::new(karpenter_cloudprovider_fake::FakeCloudProvider::default());
        let (ctx, _w, mut events) = ctx(client, provider, 1_000_000);
        let (buffers, mut bw, mut pw) = stores();
        put(&mut bw, buffer(serde_json::Value::Null));
        put(
            &mut pw,
            serde_json::from_value(serde_json::json!({
                "apiVersion": "v1", "kind": "PodTemplate",
                "metadata": {"name": "chunk", "namespace": "team", "generation": 5},
                "template": {"spec": {"containers": [{"name": "c",
                    "resources": {"requests": {"cpu": "1"}}}]}}
            }))
            .unwrap(),
        );
        let mut told = Told::default();
        let mut state = ClusterState::new();
        let resolved = buffers.feed(&ctx, &mut told, &mut state);
        assert_eq!(state.virtual_pods().count(), 2);
        // The unknown strategy is told once per generation.
        let e = events.try_recv().expect("a warning");
        assert_eq!(e.reason, "UnknownProvisioningStrategy");
        buffers.feed(&ctx, &mut told, &mut state);
        assert!(events.try_recv().is_err());

        let key = resolved[0].1.key.clone();
        let placed = BTreeMap::from([(
            key,
            Placement {
                existing: 2,
                ..Placement::default()
            },
        )]);
        write_status(&ctx, &mut told, &resolved, &placed)
            .await
            .unwrap();
        // The watch has not brought the write back yet: nothing is written again.
        write_status(&ctx, &mut told, &resolved, &placed)
            .await
            .unwrap();
        let seen = api.requests();
        assert_eq!(seen.len(), 1, "{seen:#?}");
        assert_eq!(
            seen[0].uri,
            "/apis/autoscaling.x-k8s.io/v1beta1/namespaces/team/capacitybuffers/headroom/status?"
        );
        let body = &seen[0].body;
        assert_eq!(body["metadata"]["resourceVersion"], "7");
        assert_eq!(body["status"]["replicas"], 2);
        assert_eq!(body["status"]["podTemplateRef"]["name"], "chunk");
        assert_eq!(body["status"]["podTemplateGeneration"], 5);
        assert_eq!(body["status"]["provisioningStrategy"], "example.com/other");
        let conditions: Vec<(&str, &str, &str)> = body["status"]["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| {
                (
                    c["type"].as_str().unwrap(),
                    c["status"].as_str().unwrap(),
                    c["reason"].as_str().unwrap(),
                )
            })
            .collect();
        assert_eq!(
            conditions,
            [
                ("ReadyForProvisioning", "True", "Resolved"),
                ("Provisioning", "True", "FitsExistingCapacity")
            ]
        );
        // Once the store holds what was written, there is nothing to write.
        let written: CapacityBufferStatus = serde_json::from_value(body["status"].clone()).unwrap();
        let mut current = buffer(serde_json::to_value(&written).unwrap());
        current.metadata.resource_version = Some("8".into());
        put(&mut bw, current);
        let resolved = buffers.feed(&ctx, &mut told, &mut state);
        write_status(&ctx, &mut told, &resolved, &placed)
            .await
            .unwrap();
        assert_eq!(api.requests().len(), 1);
    }
}
