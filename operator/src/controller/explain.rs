//! Events that say why a node is not disrupted: `DisruptionBlocked` when something forbids
//! touching it (a `do-not-disrupt` annotation, a PodDisruptionBudget, the pool's budget) and
//! `Unconsolidatable` when consolidation looked and found nothing better — Karpenter's two
//! event reasons. Each node's event is sent again only when its message changes, so a
//! steady state does not flood the API with one event every disruption poll.

use super::Ctx;
use karpenter_disruption::NodeExplanation;
use karpenter_disruption::hold_events::HoldEvents;
use kube::runtime::reflector::ObjectRef;

/// Publishes the events [`HoldEvents`] says are new, on the Node and its NodeClaim.
#[derive(Debug, Default)]
pub struct Explainer {
    told: HoldEvents,
}

impl Explainer {
    /// Publishes the first tellable hold of every explained node whose message changed; a
    /// node no longer in the store is skipped (and its event counts as told).
    pub fn publish(&mut self, ctx: &Ctx, explanations: &[NodeExplanation]) {
        for event in self.told.changed(explanations) {
            let Some(node) = ctx.stores.nodes.get(&ObjectRef::new(event.node)) else {
                continue;
            };
            let (reason, message) = (event.reason, event.message);
            ctx.events.normal(node.as_ref(), reason, message.clone());
            let provider_id = karpenter_cluster::node_provider_id(&node);
            if let Some(c) = ctx.stores.node_claim_by_provider_id(provider_id) {
                ctx.events.normal(c.as_ref(), reason, message);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controller::testing::{ctx, mock_client, node, put, status};
    use karpenter_disruption::Hold;
    use karpenter_testing::api::node_claim;

    #[tokio::test]
    async fn an_unchanged_block_is_told_once() {
        let (client, _api) = mock_client(|_| status(500, "unexpected"));
        let provider: std::sync::Arc<dyn karpenter_cloudprovider::CloudProvider> =
            std::sync::Arc::new(karpenter_cloudprovider_fake::FakeCloudProvider::default());
        let (ctx, mut w, mut events) = ctx(client, provider, 0);
        put(&mut w.nodes, node("n1", "fake://us-east-1a/n1"));
        let mut c = node_claim("n1");
        c.status.get_or_insert_with(Default::default).provider_id = "fake://us-east-1a/n1".into();
        put(&mut w.node_claims, c);
        let blocked = vec![NodeExplanation {
            node: "n1".into(),
            holds: vec![Hold::NothingToDo, Hold::DoNotDisruptNode],
        }];
        let mut x = Explainer::default();
        x.publish(&ctx, &blocked);
        let mut kinds = Vec::new();
        while let Ok(e) = events.try_recv() {
            assert_eq!(e.reason, "DisruptionBlocked");
            kinds.push(e.regarding.kind.unwrap_or_default());
        }
        assert_eq!(kinds, ["Node", "NodeClaim"]);
        x.publish(&ctx, &blocked);
        assert!(events.try_recv().is_err(), "unchanged: no new event");
        x.publish(&ctx, &[]);
        x.publish(&ctx, &blocked);
        assert!(
            events.try_recv().is_ok(),
            "blocked again after a gap: told again"
        );
    }
}
