//! Static NodePools through the reconciler: the StaticCapacity gate, scale up and down,
//! `limits.nodes`, the choice of claims to remove, and static pools taking no pending pods.

use super::static_pools::STATIC_OBSERVE_MS;
use super::*;
use crate::provisioner::time;
use crate::{Kubelet, NodeRecord, Object, PodRecord};
use karpenter_cloudprovider::v1::{
    ConditionType, NodeClaim, NodeClaimStatus, NodePool, StatusConditions,
};
use karpenter_scheduling::labels::{DO_NOT_DISRUPT, INSTANCE_TYPE};
use karpenter_scheduling::model::OwnerRef;
use karpenter_testing::instance_types::on_demand_catalogue;
use karpenter_testing::nodes::node;
use karpenter_testing::pods::{bound, pod};

const GI: i64 = 1 << 30;

fn static_pool(replicas: i64, node_limit: Option<&str>) -> NodePool {
    let mut spec = serde_json::json!({
        "replicas": replicas,
        "template": {
            "metadata": {"labels": {"team": "batch"}},
            "spec": {
                "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                "requirements": [{"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]}]}}
    });
    if let Some(n) = node_limit {
        spec["limits"] = serde_json::json!({ "nodes": n });
    }
    serde_json::from_value(serde_json::json!({
        "apiVersion": "karpenter.sh/v1", "kind": "NodePool",
        "metadata": {"name": "fixed", "uid": "pool-uid"},
        "spec": spec
    }))
    .unwrap()
}

fn index(pool: NodePool) -> ClusterState {
    let mut s = ClusterState::new();
    s.set_instance_types("fixed", on_demand_catalogue("zone-a"));
    s.apply(Object::NodePool(Box::new(pool)));
    s
}

fn reconciler(gate: bool) -> Reconciler {
    Reconciler::new(
        ReconcilerSettings {
            static_capacity: gate,
            ..ReconcilerSettings::default()
        },
        NameGenerator::default(),
    )
}

fn tick(r: &mut Reconciler, s: &ClusterState, now: Millis) -> Tick {
    tick_drifted(r, s, &BTreeMap::new(), now)
}

/// A tick with the provider reporting `drift` (NodeClaim name to reason).
fn tick_drifted(
    r: &mut Reconciler,
    s: &ClusterState,
    drift: &BTreeMap<String, String>,
    now: Millis,
) -> Tick {
    let facts = ProviderFacts {
        drift,
        version: 0,
        repair_policies: &[],
        seconds: &|| 0.0,
        solving: &|_| {},
    };
    r.tick(s, &facts, now)
}

fn launched(t: &Tick) -> Vec<NodeClaim> {
    t.actions
        .iter()
        .filter_map(|a| match a {
            Action::LaunchNodeClaim { claim, .. } => Some(NodeClaim::clone(claim)),
            _ => None,
        })
        .collect()
}

fn deleted(t: &Tick) -> Vec<String> {
    t.actions
        .iter()
        .filter_map(|a| match a {
            Action::DeleteNodeClaim { node_claim, cause } => {
                assert_eq!(*cause, crate::DeletionCause::Overprovisioned);
                Some(node_claim.clone())
            }
            _ => None,
        })
        .collect()
}

/// A claim of the static pool; `launched` gives it a provider ID.
fn static_claim(name: &str, launched: bool) -> NodeClaim {
    let mut c: NodeClaim = serde_json::from_value(serde_json::json!({
        "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
        "metadata": {"name": name, "labels": {"karpenter.sh/nodepool": "fixed"}},
        "spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                 "requirements": []}
    }))
    .unwrap();
    if launched {
        c.status = Some(NodeClaimStatus {
            provider_id: format!("fake://zone-a/{name}"),
            ..NodeClaimStatus::default()
        });
    }
    c
}

/// A launched, initialized claim of the static pool with its joined, ready node.
fn add_node(s: &mut ClusterState, name: &str) {
    let mut claim = static_claim(name, true);
    for t in [
        ConditionType::Launched,
        ConditionType::Registered,
        ConditionType::Initialized,
    ] {
        claim.set_true(t.as_str(), time(0));
    }
    s.apply(Object::NodeClaim(Box::new(claim)));
    let mut n = node(name, "zone-a", 4, 16);
    n.node_pool = Some("fixed".into());
    s.apply(Object::Node(Box::new(NodeRecord {
        node: n,
        node_claim: Some(name.into()),
        startup_taints: Vec::new(),
        deleting: false,
        kubelet: Kubelet::ready(),
    })));
}

fn add_pod(s: &mut ClusterState, p: karpenter_scheduling::model::Pod) {
    s.apply(Object::Pod(Box::new(PodRecord {
        pod: p,
        ready_at: Some(0),
        deleting_at: None,
        unschedulable: false,
    })));
}

fn static_events(t: &Tick) -> Vec<(i64, i64, StaticChange)> {
    t.events
        .iter()
        .filter_map(|e| match e {
            Event::StaticCapacity {
                current,
                desired,
                change,
                ..
            } => Some((*current, *desired, change.clone())),
            _ => None,
        })
        .collect()
}

#[test]
fn with_the_gate_off_a_static_pool_gets_no_node_claims() {
    let s = index(static_pool(3, None));
    let mut r = reconciler(false);
    for now in [0, 1_000, 60_000, 600_000] {
        let t = tick(&mut r, &s, now);
        assert!(launched(&t).is_empty(), "at {now}: {:?}", t.actions);
        assert!(static_events(&t).is_empty());
    }
}

#[test]
fn a_static_pool_gets_replicas_node_claims_from_its_template_once() {
    let mut s = index(static_pool(3, None));
    let mut r = reconciler(true);
    let first = tick(&mut r, &s, 0);
    let claims = launched(&first);
    assert_eq!(claims.len(), 3, "{:?}", first.actions);
    assert_eq!(
        static_events(&first),
        [(
            0,
            3,
            StaticChange::Provision(claims.iter().map(|c| c.name().to_owned()).collect())
        )]
    );
    for c in &claims {
        assert!(c.name().starts_with("fixed-"));
        let labels = c.metadata.labels.as_ref().unwrap();
        assert_eq!(labels["karpenter.sh/nodepool"], "fixed");
        assert_eq!(labels["team"], "batch");
        // The template's requirements and labels, no instance-type list, no requests: the
        // provider picks the cheapest offering.
        let keys: Vec<&str> = c.spec.requirements.iter().map(|r| r.key.as_str()).collect();
        assert_eq!(
            keys,
            ["kubernetes.io/arch", "karpenter.sh/nodepool", "team"]
        );
        assert!(!keys.contains(&INSTANCE_TYPE));
        assert!(c.spec.resources.requests.is_empty());
        let owner = &c.metadata.owner_references.as_ref().unwrap()[0];
        assert_eq!(
            (owner.kind.as_str(), owner.name.as_str()),
            ("NodePool", "fixed")
        );
    }
    // Until the index shows them, they count as created.
    assert!(launched(&tick(&mut r, &s, 1_000)).is_empty());
    for c in &claims {
        s.apply(Object::NodeClaim(Box::new(c.clone())));
    }
    let steady = tick(&mut r, &s, 2_000);
    assert!(launched(&steady).is_empty() && deleted(&steady).is_empty());
    assert!(static_events(&steady).is_empty());
}

#[test]
fn a_creation_the_index_never_shows_is_decided_again() {
    let s = index(static_pool(2, None));
    let mut r = reconciler(true);
    let first = tick(&mut r, &s, 0);
    assert_eq!(launched(&first).len(), 2);
    assert_eq!(
        first.next_wakeup.map(|w| w <= STATIC_OBSERVE_MS),
        Some(true)
    );
    assert!(launched(&tick(&mut r, &s, STATIC_OBSERVE_MS - 1)).is_empty());
    let again = launched(&tick(&mut r, &s, STATIC_OBSERVE_MS));
    assert_eq!(again.len(), 2);
    // New names: a restarted create does not collide with one that may yet appear.
    assert!(
        again
            .iter()
            .all(|c| !launched(&first).iter().any(|f| f.name() == c.name()))
    );
}

#[test]
fn limits_nodes_caps_the_claims_of_a_static_pool() {
    let mut s = index(static_pool(5, Some("3")));
    let mut r = reconciler(true);
    let first = tick(&mut r, &s, 0);
    assert_eq!(launched(&first).len(), 3);
    for c in launched(&first) {
        s.apply(Object::NodeClaim(Box::new(c)));
    }
    let capped = tick(&mut r, &s, 1_000);
    assert!(launched(&capped).is_empty());
    assert_eq!(static_events(&capped), [(3, 5, StaticChange::LimitReached)]);
    // Reported again only after a while.
    assert!(static_events(&tick(&mut r, &s, 2_000)).is_empty());
    assert_eq!(
        static_events(&tick(&mut r, &s, 1_000 + STATIC_OBSERVE_MS)),
        [(3, 5, StaticChange::LimitReached)]
    );
}

#[test]
fn a_deleting_claim_is_replaced_only_within_the_node_limit() {
    // Three nodes, one of them deleting (expired, say): replicas 3 wants a new one at once,
    // but limits.nodes 3 counts the deleting claim until it is gone.
    for (limit, expected) in [(None, 1), (Some("3"), 0), (Some("4"), 1)] {
        let mut s = index(static_pool(3, limit));
        for n in ["a", "b", "c"] {
            add_node(&mut s, n);
        }
        let mut gone = static_claim("c", true);
        gone.metadata.deletion_timestamp = Some(time(0));
        s.apply(Object::NodeClaim(Box::new(gone)));
        let mut r = reconciler(true);
        let t = tick(&mut r, &s, 0);
        assert_eq!(launched(&t).len(), expected, "limit {limit:?}");
        assert!(deleted(&t).is_empty());
    }
}

#[test]
fn scale_down_removes_unlaunched_then_empty_then_the_cheapest_to_disrupt() {
    let mut s = index(static_pool(5, None));
    for n in ["busy", "empty", "guarded", "light"] {
        add_node(&mut s, n);
    }
    s.apply(Object::NodeClaim(Box::new(static_claim("pending", false))));
    // `empty` runs only a DaemonSet pod; `light` one pod; `busy` three; `guarded` one pod
    // that must not be disrupted.
    let mut ds = bound(pod("agent", 100, GI), "empty");
    ds.owner = Some(OwnerRef {
        kind: "DaemonSet".into(),
        name: "agent".into(),
        uid: "ds".into(),
    });
    add_pod(&mut s, ds);
    add_pod(&mut s, bound(pod("l0", 100, GI), "light"));
    for i in 0..3 {
        add_pod(&mut s, bound(pod(&format!("b{i}"), 100, GI), "busy"));
    }
    let mut guarded = bound(pod("g0", 100, GI), "guarded");
    guarded
        .annotations
        .insert(DO_NOT_DISRUPT.into(), "true".into());
    add_pod(&mut s, guarded);

    let mut r = reconciler(true);
    assert!(static_events(&tick(&mut r, &s, 0)).is_empty(), "5 of 5");
    let mut pool = static_pool(1, None);
    s.apply(Object::NodePool(Box::new(pool.clone())));
    let t = tick(&mut r, &s, 1_000);
    assert_eq!(deleted(&t), ["pending", "empty", "light", "busy"]);
    assert!(launched(&t).is_empty());
    assert_eq!(
        static_events(&t),
        [(
            5,
            1,
            StaticChange::Deprovision(vec![
                "pending".into(),
                "empty".into(),
                "light".into(),
                "busy".into()
            ])
        )]
    );
    // Asked once: not again while the deletions reach the index.
    assert!(deleted(&tick(&mut r, &s, 2_000)).is_empty());
    // Scaling to zero takes the protected node too, last.
    pool.spec.replicas = Some(0);
    s.apply(Object::NodePool(Box::new(pool)));
    assert_eq!(deleted(&tick(&mut r, &s, 3_000)), ["guarded"]);
}

#[test]
fn a_static_pool_takes_no_pending_pods() {
    let mut s = index(static_pool(0, None));
    s.apply(Object::Pod(Box::new(PodRecord {
        pod: pod("web", 1_000, GI),
        ready_at: None,
        deleting_at: None,
        unschedulable: true,
    })));
    let mut r = reconciler(true);
    tick(&mut r, &s, 0);
    let t = tick(&mut r, &s, 1_000);
    assert!(launched(&t).is_empty(), "{:?}", t.actions);
    assert!(
        t.events
            .iter()
            .any(|e| matches!(e, Event::FailedScheduling { .. })),
        "{:?}",
        t.events
    );
}

#[test]
fn a_static_pool_being_deleted_is_left_alone() {
    let mut pool = static_pool(2, None);
    pool.metadata.deletion_timestamp = Some(time(0));
    let s = index(pool);
    assert!(s.node_pools().contains_key("fixed"), "the index keeps it");
    let mut r = reconciler(true);
    assert!(launched(&tick(&mut r, &s, 0)).is_empty());
}

#[test]
fn a_drifted_static_node_is_replaced_from_the_template_before_it_goes() {
    let mut s = index(static_pool(2, None));
    add_node(&mut s, "a");
    add_node(&mut s, "b");
    let drift = BTreeMap::from([("a".to_owned(), "AMIDrift".to_owned())]);
    let mut r = reconciler(true);
    let decided = tick_drifted(&mut r, &s, &drift, 0);
    assert!(launched(&decided).is_empty());
    let command = decided
        .events
        .iter()
        .find_map(|e| match e {
            Event::DisruptionDecided(c) => Some(c.clone()),
            _ => None,
        })
        .expect("a static drift command");
    assert_eq!(command.reason, karpenter_disruption::Reason::DRIFTED);
    assert_eq!(command.node_names(), ["a"]);

    // Drift needs no validation delay: the node is tainted and its replacement launched,
    // built from the template like the pool's other claims.
    let started = tick_drifted(&mut r, &s, &drift, 1_000);
    let [replacement] = launched(&started).try_into().expect("one replacement");
    assert!(
        replacement
            .spec
            .requirements
            .iter()
            .all(|q| q.key != INSTANCE_TYPE),
        "{replacement:?}"
    );
    assert!(
        started
            .actions
            .iter()
            .any(|a| matches!(a, Action::TaintDisrupted { node } if node == "a"))
    );
    // Neither the replacement nor the node it replaces makes the pool look short or over its
    // replicas.
    assert!(static_events(&started).is_empty());
    s.apply(Object::NodeClaim(Box::new(replacement.clone())));
    let t = tick_drifted(&mut r, &s, &drift, 2_000);
    assert!(
        launched(&t).is_empty() && static_events(&t).is_empty(),
        "{t:?}"
    );

    // Once the replacement initializes, the drifted claim is deleted.
    let mut ready = replacement;
    ready.set_true(ConditionType::Initialized.as_str(), time(2_500));
    s.apply(Object::NodeClaim(Box::new(ready)));
    let done = tick_drifted(&mut r, &s, &drift, 3_000);
    assert!(done.actions.iter().any(|a| matches!(
        a,
        Action::DeleteNodeClaim { node_claim, cause } if node_claim == "a" && cause.as_str() == "Drifted"
    )), "{:?}", done.actions);
    assert!(static_events(&done).is_empty());
}

#[test]
fn an_invalid_static_pool_gets_no_node_claims() {
    // `weight` is not allowed on a static pool: the pool is not Ready, as upstream's
    // validation controller would mark it.
    let mut pool = static_pool(2, None);
    pool.spec.weight = Some(10);
    assert!(pool.validate().is_err());
    let s = index(pool);
    assert!(s.node_pools().contains_key("fixed"), "the index keeps it");
    let mut r = reconciler(true);
    assert!(launched(&tick(&mut r, &s, 0)).is_empty());
}

#[test]
fn claims_scaled_away_before_the_index_shows_them_are_removed_once_it_does() {
    let mut s = index(static_pool(3, None));
    let mut r = reconciler(true);
    let claims = launched(&tick(&mut r, &s, 0));
    assert_eq!(claims.len(), 3);
    s.apply(Object::NodePool(Box::new(static_pool(1, None))));
    let early = tick(&mut r, &s, 500);
    assert!(deleted(&early).is_empty() && static_events(&early).is_empty());
    for c in &claims {
        s.apply(Object::NodeClaim(Box::new(c.clone())));
    }
    assert_eq!(deleted(&tick(&mut r, &s, 1_000)).len(), 2);
}

#[test]
fn a_static_pools_claims_are_never_marked_consolidatable() {
    let mut s = index(static_pool(1, None));
    add_node(&mut s, "a");
    let mut r = reconciler(true);
    for now in [0, 60_000, 3_600_000] {
        let t = tick(&mut r, &s, now);
        let marked = t.actions.iter().any(|a| match a {
            Action::SetClaimConditions { changes, .. } => changes
                .iter()
                .any(|c| c.type_ == ConditionType::Consolidatable && c.to.is_some()),
            _ => false,
        });
        assert!(!marked, "at {now}: {:?}", t.actions);
    }
}
