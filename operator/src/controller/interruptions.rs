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
    use karpenter_cluster::Object;
    use karpenter_testing::api::node_claim;

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
