//! NodeOverlays on a cluster (the NodeOverlay feature gate): a watch of `karpenter.sh/v1alpha1`
//! NodeOverlays, their evaluation against the provider's instance types of every NodePool
//! ([`karpenter_cloudprovider::overlay`]) each time instance types are refreshed, and their
//! `ValidationSucceeded`/`Ready` conditions written back. Overlays or NodePools that changed
//! (by generation) make the controller refresh instance types at once rather than at the
//! next TTL.

use super::state::spawn_one;
use super::{Ctx, ReconcileError};
use karpenter_cloudprovider::overlay::{Evaluation, Published};
use karpenter_cloudprovider::{NodeOverlay, NodePool};
use karpenter_cluster::overlay_annotations::OverlayState;
use karpenter_cluster::{Action, ObjectKey};
use karpenter_scheduling::model::InstanceType;
use kube::runtime::reflector::{self, Store};
use kube::{Api, Client};
use std::collections::BTreeMap;
use std::sync::Arc;
use tokio::sync::Notify;

/// The NodeOverlay store and what the last evaluation saw.
pub struct Overlays {
    store: Store<NodeOverlay>,
    state: OverlayState,
    published: Published,
}

/// Starts the NodeOverlay watch; the task goes with the controller's other watches.
pub fn spawn(client: &Client, changed: Arc<Notify>) -> (Overlays, tokio::task::JoinHandle<()>) {
    let (store, writer) = reflector::store();
    // Overlays are not indexed (no dirty keys): the key function is never called.
    let task = spawn_one(
        Api::<NodeOverlay>::all(client.clone()),
        writer,
        changed,
        None,
        |o| ObjectKey::NodePool(o.name().to_owned()),
    );
    (Overlays::new(store), task)
}

/// With the NodeOverlay gate off, says at start-up which NodeOverlays the cluster holds that
/// will change nothing (nothing when there are none or their CRD is not installed).
pub async fn warn_if_ignored(client: &Client) {
    let api: Api<NodeOverlay> = Api::all(client.clone());
    match api.list(&kube::api::ListParams::default()).await {
        Ok(list) if !list.items.is_empty() => {
            let names: Vec<&str> = list.items.iter().map(NodeOverlay::name).collect();
            tracing::warn!(
                nodeoverlays = ?names,
                "NodeOverlays are ignored: the NodeOverlay feature gate is off"
            );
        }
        Ok(_) | Err(kube::Error::Api(_)) => {}
        Err(e) => tracing::debug!(error = %e, "listing nodeoverlays failed"),
    }
}

impl Overlays {
    /// Overlays read from `store`.
    pub fn new(store: Store<NodeOverlay>) -> Self {
        Self {
            store,
            state: OverlayState::default(),
            published: Published::default(),
        }
    }

    /// Where each evaluation is published for the cloud provider's launches.
    pub fn published(&self) -> Published {
        self.published.clone()
    }

    /// Waits until the watch has listed once.
    ///
    /// # Errors
    /// The watch task ended before listing.
    pub async fn wait_until_ready(&self) -> Result<(), reflector::store::WriterDropped> {
        self.store.wait_until_ready().await
    }

    /// Whether an overlay or a NodePool changed since the last evaluation.
    pub fn stale(&self, pools: &[Arc<NodePool>]) -> bool {
        self.state.stale(&self.store.state(), pools)
    }

    /// `raw` with the overlays applied, and the evaluation.
    pub fn apply(
        &mut self,
        pools: &[Arc<NodePool>],
        raw: BTreeMap<String, Vec<Arc<InstanceType>>>,
    ) -> (BTreeMap<String, Vec<Arc<InstanceType>>>, Evaluation) {
        let (types, evaluation) = self.state.apply(self.store.state(), pools, raw);
        self.published.publish(evaluation.clone());
        (types, evaluation)
    }

    /// Annotates the launches among `actions` whose options were overlaid.
    pub fn annotate(&self, actions: &mut [Action]) {
        self.state.annotate(actions);
    }

    /// Writes each overlay's verdict as its status conditions, patching only those that
    /// changed. A failed write is retried by forgetting the evaluation, so the next pass
    /// evaluates and writes again.
    ///
    /// # Errors
    /// The first API failure.
    pub async fn write_status(
        &mut self,
        ctx: &Ctx,
        evaluation: &Evaluation,
    ) -> Result<(), ReconcileError> {
        let result = write_status(ctx, &self.store.state(), evaluation).await;
        if result.is_err() {
            self.state.forget();
        }
        result
    }
}

async fn write_status(
    ctx: &Ctx,
    overlays: &[Arc<NodeOverlay>],
    evaluation: &Evaluation,
) -> Result<(), ReconcileError> {
    let api: Api<NodeOverlay> = Api::all(ctx.client.clone());
    for overlay in overlays {
        let Some(verdict) = evaluation.verdicts().get(overlay.name()) else {
            continue;
        };
        let mut updated = NodeOverlay::clone(overlay);
        if !verdict.set_condition(&mut updated, ctx.now_time()) {
            continue;
        }
        if let Some(why) = verdict.not_applied(overlay.name()) {
            tracing::warn!(nodeoverlay = overlay.name(), "{why}");
        }
        ctx.limiter.acquire().await;
        let patch = serde_json::json!({"status": updated.status});
        super::api::merge_patch_status(&api, overlay.name(), &patch)
            .await
            .map_err(ReconcileError::api(
                "updating NodeOverlay status",
                overlay.name(),
            ))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controller::testing::{ctx, mock_client, put};
    use karpenter_cloudprovider::v1::NodeSelectorOperator;
    use karpenter_cloudprovider::v1alpha1::{NodeOverlaySpec, NodeSelectorRequirement};
    use karpenter_testing::instance_types::InstanceTypeBuilder;

    fn overlay(name: &str, adjustment: &str) -> NodeOverlay {
        let mut o = NodeOverlay::new(
            name,
            NodeOverlaySpec {
                requirements: vec![NodeSelectorRequirement::new(
                    "node.kubernetes.io/instance-type",
                    NodeSelectorOperator::In,
                    ["m5.large"],
                )],
                weight: Some(1),
                price_adjustment: Some(adjustment.into()),
                ..NodeOverlaySpec::default()
            },
        );
        o.metadata.generation = Some(1);
        o.metadata.resource_version = Some("1".into());
        o
    }

    fn pool() -> Arc<NodePool> {
        let mut p = NodePool::new("default", Default::default());
        p.metadata.generation = Some(1);
        Arc::new(p)
    }

    #[tokio::test]
    async fn overlays_change_prices_and_conflicts_are_written_to_status() {
        let (client, api) = mock_client(|s| {
            let object = serde_json::json!({
                "apiVersion": "karpenter.sh/v1alpha1", "kind": "NodeOverlay",
                "metadata": {"name": "patched"}, "spec": {"requirements": []},
                "status": s.body["status"],
            });
            (200, object)
        });
        let provider: Arc<dyn karpenter_cloudprovider::CloudProvider> =
            Arc::new(karpenter_cloudprovider_fake::FakeCloudProvider::default());
        let (ctx, _w, _events) = ctx(client, provider, 1_000);
        let (store, mut writer) = reflector::store();
        put(&mut writer, overlay("a", "+1"));
        put(&mut writer, overlay("b", "+2"));
        let mut overlays = Overlays::new(store);
        let pools = vec![pool()];
        assert!(overlays.stale(&pools));
        let raw = BTreeMap::from([(
            "default".to_owned(),
            vec![
                InstanceTypeBuilder::new("m5.large", 2, 8)
                    .on_demand(0.1)
                    .build(),
            ],
        )]);
        let (types, evaluation) = overlays.apply(&pools, raw);
        assert!(!overlays.stale(&pools));
        assert!(
            (types["default"][0].offerings[0].price - 2.1).abs() < 1e-9,
            "b wins"
        );
        overlays.write_status(&ctx, &evaluation).await.unwrap();
        let seen = api.requests();
        assert_eq!(seen.len(), 2, "{seen:?}");
        let a = seen
            .iter()
            .find(|s| s.uri.contains("/nodeoverlays/a/status"))
            .expect("a's status patched");
        assert_eq!(a.method, "PATCH");
        let conditions = a.body["status"]["conditions"].as_array().unwrap();
        let vs = conditions
            .iter()
            .find(|c| c["type"] == "ValidationSucceeded")
            .unwrap();
        assert_eq!(vs["status"], "False");
        assert_eq!(vs["reason"], "Conflict");
        let b = seen
            .iter()
            .find(|s| s.uri.contains("/nodeoverlays/b/status"))
            .unwrap();
        assert!(
            b.body["status"]["conditions"]
                .as_array()
                .unwrap()
                .iter()
                .any(|c| c["type"] == "Ready" && c["status"] == "True")
        );

        // A new generation of an overlay makes the evaluation stale again.
        let mut a2 = overlay("a", "+3");
        a2.metadata.generation = Some(2);
        put(&mut writer, a2);
        assert!(overlays.stale(&pools));
    }

    /// The controller's pass evaluates the overlays when they are new and writes their
    /// status, and does not again while nothing changed.
    #[tokio::test]
    async fn a_controller_pass_evaluates_overlays_once_per_change() {
        let (client, api) = mock_client(|s| {
            if s.uri.contains("/nodeoverlays/") {
                let object = serde_json::json!({
                    "apiVersion": "karpenter.sh/v1alpha1", "kind": "NodeOverlay",
                    "metadata": {"name": "patched"}, "spec": {"requirements": []},
                });
                (200, object)
            } else if s.uri.contains("/nodepools/") {
                (200, serde_json::to_value(pool().as_ref()).unwrap())
            } else {
                (
                    200,
                    serde_json::json!({"apiVersion": "v1", "kind": "List", "metadata": {}, "items": []}),
                )
            }
        });
        let provider: Arc<dyn karpenter_cloudprovider::CloudProvider> =
            Arc::new(karpenter_cloudprovider_fake::FakeCloudProvider::default());
        let (ctx, mut w, _events) = ctx(client, provider, 1_000);
        put(&mut w.node_pools, NodePool::clone(&pool()));
        let (store, mut writer) = reflector::store();
        put(&mut writer, overlay("a", "+1"));
        let mut controller =
            super::super::run::Controller::new(ctx).with_overlays(Some(Overlays::new(store)));
        let status_patches = || {
            api.requests()
                .iter()
                .filter(|r| r.uri.contains("/nodeoverlays/a/status"))
                .count()
        };
        controller.pass().await;
        assert_eq!(status_patches(), 1);
        controller.pass().await;
        assert_eq!(status_patches(), 1, "nothing changed: not evaluated again");
        // A conflicting overlay makes the next pass evaluate again and report the conflict.
        put(&mut writer, overlay("b", "+2"));
        controller.pass().await;
        let a = api
            .requests()
            .into_iter()
            .rfind(|r| r.uri.contains("/nodeoverlays/a/status"))
            .unwrap();
        assert!(
            a.body.to_string().contains("\"reason\":\"Conflict\""),
            "{}",
            a.body
        );
    }
}
