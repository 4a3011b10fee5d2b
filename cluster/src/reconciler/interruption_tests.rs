//! Interruption notices in the index, deleted by disruption's forceful path in the tick.

use super::tests::{LIVE, add_node, index, reconciler, tick};
use super::*;
use crate::{DeletionCause, Object};
use karpenter_cloudprovider::v1::NodePool;
use karpenter_disruption::{InterruptionKind, Reason};

/// The default pool with a budget that allows no voluntary disruption at all.
fn frozen_pool() -> NodePool {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "karpenter.sh/v1", "kind": "NodePool",
        "metadata": {"name": "default"},
        "spec": {
            "disruption": {"budgets": [{"nodes": "0"}]},
            "template": {"spec": {
                "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                "requirements": []}}}
    }))
    .unwrap()
}

fn deletions(t: &Tick) -> Vec<(&str, DeletionCause)> {
    t.actions
        .iter()
        .filter_map(|a| match a {
            Action::DeleteNodeClaim { node_claim, cause } => Some((node_claim.as_str(), *cause)),
            _ => None,
        })
        .collect()
}

#[test]
fn a_notice_deletes_its_claim_at_the_next_tick_whatever_the_budget() {
    let mut s = index(&[], true);
    s.apply(Object::NodePool(Box::new(frozen_pool())));
    for name in ["spot", "rebalanced", "quiet"] {
        add_node(&mut s, name, &LIVE);
        let mut record = s.nodes()[name].clone();
        record.node.node_pool = Some("default".into());
        s.apply(Object::Node(Box::new(record)));
    }
    let mut r = reconciler();
    assert!(deletions(&tick(&mut r, &s, 0, 0)).is_empty());

    assert!(s.record_interruption("spot", InterruptionKind::SpotInterruption, 3_000));
    assert!(s.record_interruption(
        "rebalanced",
        InterruptionKind::RebalanceRecommendation,
        3_000
    ));
    assert!(!s.record_interruption("gone", InterruptionKind::SpotInterruption, 3_000));
    // Between two polls: the notice is acted on at once, not at the next poll.
    let t = tick(&mut r, &s, 0, 3_000);
    assert_eq!(
        deletions(&t),
        [(
            "spot",
            DeletionCause::Interruption(InterruptionKind::SpotInterruption)
        )]
    );
    let decided: Vec<_> = t
        .events
        .iter()
        .filter_map(|e| match e {
            Event::DisruptionDecided(c) => Some((c.reason, c.forceful, c.node_names())),
            _ => None,
        })
        .collect();
    assert_eq!(decided, [(Reason::Interrupted, true, vec!["spot"])]);
    // A repeat of the same notice changes nothing.
    assert!(!s.record_interruption("spot", InterruptionKind::SpotInterruption, 4_000));

    // The notice goes with its claim.
    assert!(s.delete(&crate::ObjectKey::NodeClaim("spot".into())));
    assert_eq!(s.interruptions().keys().collect::<Vec<_>>(), ["rebalanced"]);
}

/// A deletion that did not happen (the claim is not seen deleting) is decided again at
/// the next poll, though nothing else changed.
#[test]
fn an_interrupted_claim_not_yet_deleting_is_decided_again_at_the_next_poll() {
    let mut s = index(&[], true);
    add_node(&mut s, "spot", &LIVE);
    let mut r = reconciler();
    tick(&mut r, &s, 0, 0);
    s.record_interruption("spot", InterruptionKind::SpotInterruption, 1_000);
    assert_eq!(deletions(&tick(&mut r, &s, 0, 1_000)).len(), 1);
    assert!(
        deletions(&tick(&mut r, &s, 0, 5_000)).is_empty(),
        "between polls"
    );
    assert_eq!(deletions(&tick(&mut r, &s, 0, 11_000)).len(), 1);
}
