//! Fields the controller accepts but does not act on ([`IgnoredField`]): logged as warnings
//! and published as `IgnoredField` events on their object, once per object generation, so a
//! steady state does not repeat them every pass.

use super::Ctx;
use karpenter_cloudprovider::IgnoredField;
use karpenter_cloudprovider::ignored::{EVENT_REASON, ToldGenerations};
use kube::Resource;

/// Tells each object's ignored fields once per generation ([`ToldGenerations`]).
#[derive(Debug, Default)]
pub struct Told {
    told: ToldGenerations,
}

impl Told {
    /// Tells `fields` of `obj` unless they were told for its current generation.
    pub fn tell<K: Resource<DynamicType = ()>>(
        &mut self,
        ctx: &Ctx,
        obj: &K,
        fields: impl FnOnce() -> Vec<IgnoredField>,
    ) {
        let (kind, name) = (K::kind(&()), obj.meta().name.clone().unwrap_or_default());
        if !self.told.first_time(&kind, &name, obj.meta().generation) {
            return;
        }
        for field in fields() {
            tracing::warn!(kind = %kind, name = %name, field = %field.path, "{field}");
            ctx.events.warning(obj, EVENT_REASON, field.to_string());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controller::testing::{ctx, mock_client, status};
    use karpenter_cloudprovider::NodePool;

    #[tokio::test]
    async fn told_once_per_generation() {
        let (client, _api) = mock_client(|_| status(500, "unexpected"));
        let provider: std::sync::Arc<dyn karpenter_cloudprovider::CloudProvider> =
            std::sync::Arc::new(karpenter_cloudprovider_fake::FakeCloudProvider::default());
        let (ctx, _w, mut events) = ctx(client, provider, 0);
        let mut pool: NodePool = serde_json::from_value(serde_json::json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodePool",
            "metadata": {"name": "fixed", "generation": 1},
            "spec": {"replicas": 2, "template": {"spec": {
                "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                "requirements": []}}}
        }))
        .unwrap();
        let mut told = Told::default();
        told.tell(&ctx, &pool, || pool.ignored_fields(false));
        told.tell(&ctx, &pool, || pool.ignored_fields(false));
        let e = events.try_recv().expect("told once");
        assert_eq!(e.reason, EVENT_REASON);
        assert!(
            e.message.starts_with("spec.replicas is not acted on"),
            "{}",
            e.message
        );
        assert!(!e.normal, "a warning");
        assert!(
            events.try_recv().is_err(),
            "not again for the same generation"
        );
        pool.metadata.generation = Some(2);
        told.tell(&ctx, &pool, || pool.ignored_fields(false));
        assert!(events.try_recv().is_ok(), "told again for a new generation");
    }
}
