//! Logs what the reconciler does for static NodePools (`spec.replicas`, the
//! `StaticCapacity` gate), with the fields upstream's static controllers log.

use karpenter_cluster::reconciler::StaticChange;

/// Logs one static-pool decision: NodeClaims created or deleted to reach `desired` from
/// `current`, or the pool's `limits.nodes` holding it back.
pub fn report(node_pool: &str, current: i64, desired: i64, change: &StaticChange) {
    match change {
        StaticChange::Provision(claims) => tracing::info!(
            nodepool = node_pool,
            current,
            desired,
            provision_count = claims.len(),
            nodeclaims = ?claims,
            "provisioning nodeclaims to satisfy replica count"
        ),
        StaticChange::Deprovision(claims) => tracing::info!(
            nodepool = node_pool,
            current,
            desired,
            deprovision_count = claims.len(),
            nodeclaims = ?claims,
            "deprovisioning nodeclaims to satisfy replica count"
        ),
        StaticChange::LimitReached => tracing::info!(
            nodepool = node_pool,
            current,
            desired,
            "nodepool node limit reached"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::super::run::fresh_core;
    use super::super::testing::{ctx, mock_client, put, status};
    use karpenter_cloudprovider::v1::NodePool;
    use karpenter_cluster::Action;
    use karpenter_cluster::reconciler::ProviderFacts;
    use std::sync::Arc;

    fn pool() -> NodePool {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodePool",
            "metadata": {"name": "fixed", "uid": "u-fixed", "resourceVersion": "1"},
            "spec": {"replicas": 2, "template": {
                "metadata": {"labels": {"team": "batch"}},
                "spec": {
                    "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                    "requirements": [{"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]}]}}}
        }))
        .unwrap()
    }

    /// The NodeClaims one pass of the controller's reconciler creates for a static pool, with
    /// the StaticCapacity gate as given.
    async fn created(gate: bool) -> Vec<serde_json::Value> {
        let (client, api) = mock_client(|req| match req.method.as_str() {
            "POST" => (201, req.body.clone()),
            _ => status(500, "unexpected"),
        });
        let provider: Arc<dyn karpenter_cloudprovider::CloudProvider> =
            Arc::new(karpenter_cloudprovider_fake::FakeCloudProvider::default());
        let (mut ctx, mut w, _events) = ctx(client, provider, 60_000);
        ctx.settings.feature_gates.static_capacity = gate;
        put(&mut w.node_pools, pool());
        let (mut state, mut reconciler) = fresh_core(&ctx);
        karpenter_cluster::feed::Feed::default().sync(
            &mut state,
            &ctx.stores.api_objects().view(),
            &std::collections::BTreeMap::new(),
            0,
        );
        let drift = std::collections::BTreeMap::new();
        let facts = ProviderFacts {
            drift: &drift,
            version: 0,
            repair_policies: &[],
            seconds: &|| 0.0,
            solving: &|_| {},
        };
        for action in reconciler.tick(&state, &facts, ctx.now_ms()).actions {
            if matches!(action, Action::LaunchNodeClaim { .. }) {
                super::super::exec::execute(&ctx, &action).await.unwrap();
            }
        }
        api.requests()
            .into_iter()
            .filter(|r| r.method == "POST" && r.uri.contains("/nodeclaims"))
            .map(|r| r.body)
            .collect()
    }

    #[tokio::test]
    async fn the_gate_makes_the_controller_create_the_pools_node_claims() {
        assert!(created(false).await.is_empty());
        let claims = created(true).await;
        assert_eq!(claims.len(), 2, "{claims:#?}");
        for c in &claims {
            let name = c["metadata"]["name"].as_str().unwrap();
            assert!(name.starts_with("fixed-") && name.len() == "fixed-".len() + 5);
            assert_eq!(c["metadata"]["labels"]["karpenter.sh/nodepool"], "fixed");
            assert_eq!(c["metadata"]["labels"]["team"], "batch");
            assert_eq!(c["metadata"]["ownerReferences"][0]["uid"], "u-fixed");
            assert_eq!(
                c["metadata"]["finalizers"],
                serde_json::json!(["karpenter.sh/termination"])
            );
            let keys: Vec<&str> = c["spec"]["requirements"]
                .as_array()
                .unwrap()
                .iter()
                .map(|r| r["key"].as_str().unwrap())
                .collect();
            assert_eq!(
                keys,
                ["kubernetes.io/arch", "karpenter.sh/nodepool", "team"]
            );
            assert!(
                c["spec"]["resources"]["requests"]
                    .as_object()
                    .is_none_or(|m| m.is_empty())
            );
        }
    }

    #[tokio::test]
    async fn a_scale_down_deletes_the_claim_without_a_disruption_event() {
        let (client, api) = mock_client(|req| match req.method.as_str() {
            "DELETE" => (
                200,
                serde_json::json!({"kind": "Status", "status": "Success"}),
            ),
            _ => status(500, "unexpected"),
        });
        let provider: Arc<dyn karpenter_cloudprovider::CloudProvider> =
            Arc::new(karpenter_cloudprovider_fake::FakeCloudProvider::default());
        let (ctx, mut w, mut events) = ctx(client, provider, 60_000);
        put(
            &mut w.node_claims,
            karpenter_testing::api::node_claim("fixed-abcde"),
        );
        let delete = Action::DeleteNodeClaim {
            node_claim: "fixed-abcde".into(),
            cause: karpenter_cluster::DeletionCause::Overprovisioned,
        };
        super::super::exec::execute(&ctx, &delete).await.unwrap();
        assert!(
            api.requests()
                .iter()
                .any(|r| r.method == "DELETE" && r.uri.contains("/nodeclaims/fixed-abcde"))
        );
        assert!(events.try_recv().is_err(), "no DisruptionTerminating event");
        assert!(
            !ctx.metrics.encode().contains("reason=\"overprovisioned\""),
            "no disruption metric"
        );
    }
}
