//! Interruption notices on their way from the provider's queue to the index.
//!
//! The provider's queue poller runs beside the passes; what it delivers waits here until a
//! pass hands it to the index (`ClusterState::record_interruption`), where disruption's
//! forceful path deletes the NodeClaim in the same pass's tick. Notices are kept until
//! their NodeClaim is gone from the watch cache, so an index rebuilt from scratch (a new
//! leader term, a failed tick) still sees them: the queue's message is deleted once
//! delivered, and would not come again.

use karpenter_cluster::ClusterState;
use karpenter_cluster::interruption::Notice;
use karpenter_disruption::InterruptionKind;
use karpenter_scheduling::model::Millis;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};
use tokio::sync::Notify;

/// Notices by NodeClaim name, shared by the queue poller and the passes. Only the `aws`
/// provider has an interruption queue: built without it, nothing delivers.
#[derive(Clone)]
#[cfg_attr(not(feature = "aws"), allow(dead_code))]
pub struct InterruptionInbox {
    notices: Arc<Mutex<BTreeMap<String, Notice>>>,
    wake: Arc<Notify>,
}

impl InterruptionInbox {
    /// An empty inbox that wakes the controller loop through `wake` on every new notice.
    pub fn new(wake: Arc<Notify>) -> Self {
        Self {
            notices: Arc::default(),
            wake,
        }
    }

    /// Keeps a notice of `kind` for NodeClaim `node_claim`, received at `at`, for the next
    /// pass (a repeat keeps the first, unless the new one replaces the node and the first
    /// did not), and wakes the loop.
    #[cfg_attr(not(feature = "aws"), allow(dead_code))]
    pub fn deliver(&self, node_claim: &str, kind: InterruptionKind, at: Millis) {
        let notice = Notice {
            kind,
            received_at: at,
        };
        let mut notices = self.notices.lock().unwrap_or_else(PoisonError::into_inner);
        match notices.get(node_claim) {
            Some(old) if !old.superseded_by(&notice) => return,
            _ => notices.insert(node_claim.to_owned(), notice),
        };
        drop(notices);
        self.wake.notify_one();
    }

    /// Hands every notice to `state`, after forgetting those whose NodeClaim `exists` no
    /// longer finds. Returns how many notices the index did not hold yet.
    pub fn feed(&self, state: &mut ClusterState, exists: impl Fn(&str) -> bool) -> usize {
        let mut notices = self.notices.lock().unwrap_or_else(PoisonError::into_inner);
        notices.retain(|claim, _| exists(claim));
        notices
            .iter()
            .filter(|(claim, n)| state.record_interruption(claim, n.kind, n.received_at))
            .count()
    }

    /// The notices waiting or held, by NodeClaim name.
    #[cfg(test)]
    pub fn notices(&self) -> BTreeMap<String, Notice> {
        self.notices
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controller::exec;
    use crate::controller::testing::{ctx, mock_client, node, put, status};
    use karpenter_cloudprovider::v1::labels as v1labels;
    use karpenter_cluster::{Action, DeletionCause, Object};
    use karpenter_testing::api::node_claim;

    /// Disruption's deletion of an interrupted claim is announced as upstream's
    /// interruption controller announces its own: a log line, `TerminatingOnInterruption`
    /// warnings on the claim and its Node, the disrupted count under the message kind.
    #[tokio::test]
    async fn an_interruption_deletion_is_announced_as_upstreams() {
        let provider_id = "aws:///us-east-1a/i-0123456789abcdef0";
        let mut claim = node_claim("spot-a");
        claim
            .status
            .get_or_insert_with(Default::default)
            .provider_id = provider_id.into();
        let labels = claim.metadata.labels.get_or_insert_with(Default::default);
        labels.insert(v1labels::CAPACITY_TYPE.into(), "spot".into());
        let body = serde_json::to_value(&claim).unwrap();
        let (client, api) = mock_client(move |req| match req.method.as_str() {
            "DELETE" => (200, body.clone()),
            _ => status(500, "unexpected"),
        });
        let provider: Arc<dyn karpenter_cloudprovider::CloudProvider> =
            Arc::new(karpenter_cloudprovider_fake::FakeCloudProvider::default());
        let (ctx, mut w, mut events) = ctx(client, provider, 60_000);
        put(&mut w.node_claims, claim);
        put(&mut w.nodes, node("ip-10-0-0-1", provider_id));
        let delete = Action::DeleteNodeClaim {
            node_claim: "spot-a".into(),
            cause: DeletionCause::Interruption(InterruptionKind::SpotInterruption),
        };
        exec::execute(&ctx, &delete).await.unwrap();
        let deletes = api.requests();
        let deletes = deletes
            .iter()
            .filter(|r| r.method == "DELETE" && r.uri.contains("/nodeclaims/spot-a"));
        assert_eq!(deletes.count(), 1);
        let mut reasons = Vec::new();
        while let Ok(e) = events.try_recv() {
            reasons.push((e.regarding.kind.unwrap_or_default(), e.reason));
        }
        reasons.sort();
        let terminating = "TerminatingOnInterruption".to_owned();
        assert_eq!(
            reasons,
            [
                ("Node".to_owned(), terminating.clone()),
                ("NodeClaim".to_owned(), terminating)
            ]
        );
        let text = ctx.metrics.encode();
        assert!(
            text.contains(r#"karpenter_nodeclaims_disrupted_total{reason="spot_interrupted",nodepool="default",capacity_type="spot",consolidation_policy="",termination_mode="graceful"} 1"#),
            "{text}"
        );
    }

    #[test]
    fn notices_reach_the_index_and_go_with_their_claim() {
        let inbox = InterruptionInbox::new(Arc::new(Notify::new()));
        let mut state = ClusterState::new();
        let claim = node_claim("c1");
        state.apply(Object::NodeClaim(Box::new(claim)));
        inbox.deliver("c1", InterruptionKind::RebalanceRecommendation, 1);
        inbox.deliver("c1", InterruptionKind::SpotInterruption, 2);
        inbox.deliver("c1", InterruptionKind::InstanceStopped, 3);
        inbox.deliver("c2", InterruptionKind::SpotInterruption, 4);
        assert_eq!(inbox.feed(&mut state, |_| true), 1);
        let held = state.interruptions().get("c1").copied();
        assert_eq!(
            held,
            Some(Notice {
                kind: InterruptionKind::SpotInterruption,
                received_at: 2
            })
        );
        // Fed again: nothing new for the index; c2 waits for its claim.
        assert_eq!(inbox.feed(&mut state, |_| true), 0);
        assert!(inbox.notices().contains_key("c2"));
        assert_eq!(inbox.feed(&mut state, |c| c == "c1"), 0);
        assert_eq!(inbox.notices().keys().collect::<Vec<_>>(), ["c1"]);
    }
}
