//! The reconciler's pacing, on hand-built indexes.

use super::*;
use crate::provisioner::time;
use crate::{Kubelet, NodeRecord, Object, PodRecord, disrupted_taint};
use karpenter_cloudprovider::v1::{
    ConditionStatus, ConditionType, NodeClaim, NodePool, StatusConditions,
};
use karpenter_testing::instance_types::on_demand_catalogue;
use karpenter_testing::nodes::node;
use karpenter_testing::pods::pod;

pub(super) const GI: i64 = 1 << 30;

/// A claim launched, registered and initialized.
pub(super) const LIVE: [ConditionType; 3] = [
    ConditionType::Launched,
    ConditionType::Registered,
    ConditionType::Initialized,
];

pub(super) fn pool() -> NodePool {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "karpenter.sh/v1", "kind": "NodePool",
        "metadata": {"name": "default"},
        "spec": {"template": {"spec": {
            "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
            "requirements": []}}}
    }))
    .unwrap()
}

fn claim(name: &str, conditions: &[ConditionType]) -> NodeClaim {
    let mut c: NodeClaim = serde_json::from_value(serde_json::json!({
        "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
        "metadata": {"name": name, "labels": {"karpenter.sh/nodepool": "default"}},
        "spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                 "requirements": []}
    }))
    .unwrap();
    for t in conditions {
        c.set_true(t.as_str(), time(0));
    }
    c
}

/// A NodePool over a small on-demand catalogue, and one pending pod per name, marked
/// unschedulable when `marked`.
pub(super) fn index(pending: &[&str], marked: bool) -> ClusterState {
    let mut s = ClusterState::new();
    s.apply(Object::NodePool(Box::new(pool())));
    s.set_instance_types("default", on_demand_catalogue("zone-a"));
    for name in pending {
        add_pod(&mut s, name, 1_000, marked);
    }
    s
}

pub(super) fn add_pod(s: &mut ClusterState, name: &str, cpu_millis: i64, marked: bool) {
    s.apply(Object::Pod(Box::new(PodRecord {
        pod: pod(name, cpu_millis, GI),
        ready_at: None,
        deleting_at: None,
        unschedulable: marked,
    })));
}

/// A managed node `name` of a NodeClaim of the same name with the given conditions.
pub(super) fn add_node(s: &mut ClusterState, name: &str, conditions: &[ConditionType]) {
    s.apply(Object::NodeClaim(Box::new(claim(name, conditions))));
    s.apply(Object::Node(Box::new(NodeRecord {
        node: node(name, "zone-a", 4, 16),
        node_claim: Some(name.into()),
        startup_taints: Vec::new(),
        deleting: false,
        kubelet: Kubelet::ready(),
    })));
}

/// A managed node `name` of pool `default` (its NodeClaim has `conditions` and the
/// termination finalizer) whose kubelet reports `Ready=ready` for `reason` since 0.
fn add_reporting_node(
    s: &mut ClusterState,
    name: &str,
    conditions: &[ConditionType],
    ready: &str,
    reason: &str,
) {
    let mut c = claim(name, conditions);
    c.metadata.finalizers = Some(vec!["karpenter.sh/termination".into()]);
    s.apply(Object::NodeClaim(Box::new(c)));
    let mut n = node(name, "zone-a", 4, 16);
    n.node_pool = Some("default".into());
    s.apply(Object::Node(Box::new(NodeRecord {
        node: n,
        node_claim: Some(name.into()),
        startup_taints: Vec::new(),
        deleting: false,
        kubelet: Kubelet::Joined {
            waiting_for: None,
            conditions: vec![crate::NodeCondition {
                type_: "Ready".into(),
                status: ready.into(),
                reason: reason.into(),
                since: 0,
            }],
        },
    })));
}

pub(super) fn reconciler() -> Reconciler {
    Reconciler::new(ReconcilerSettings::default(), NameGenerator::default())
}

pub(super) fn tick(r: &mut Reconciler, s: &ClusterState, version: u64, now: Millis) -> Tick {
    tick_solving(r, s, version, now, &|_| {})
}

/// [`tick`], telling `solving` of the simulations it runs.
fn tick_solving(
    r: &mut Reconciler,
    s: &ClusterState,
    version: u64,
    now: Millis,
    solving: &dyn Fn(SolveProgress),
) -> Tick {
    let drift = BTreeMap::new();
    let facts = ProviderFacts {
        drift: &drift,
        version,
        repair_policies: &[],
        seconds: &|| 0.0,
        solving,
    };
    r.tick(s, &facts, now)
}

pub(super) fn launches(t: &Tick) -> usize {
    t.actions
        .iter()
        .filter(|a| matches!(a, Action::LaunchNodeClaim { .. }))
        .count()
}

pub(super) fn planned(t: &Tick) -> bool {
    t.events.iter().any(|e| matches!(e, Event::Planned { .. }))
}

#[test]
fn a_batch_closes_after_the_idle_window_and_launches_its_claims() {
    let s = index(&["a", "b"], true);
    let mut r = reconciler();
    let first = tick(&mut r, &s, 0, 0);
    assert_eq!(launches(&first), 0);
    assert_eq!(first.next_wakeup, Some(1_000));
    let due = tick(&mut r, &s, 0, 1_000);
    assert!(planned(&due));
    assert_eq!(launches(&due), 1, "{:?}", due.actions);
    // The same pods are not planned again until the re-plan period has passed; then they
    // open one new batch.
    assert!(!planned(&tick(&mut r, &s, 0, 2_000)));
    let resolve = 1_000 + RESOLVE_PERIOD_MS;
    let opened = tick(&mut r, &s, 0, resolve);
    assert!(!planned(&opened));
    assert_eq!(opened.next_wakeup, Some(resolve + 1_000));
    assert!(planned(&tick(&mut r, &s, 0, resolve + 1_000)));
}

#[test]
fn pods_the_scheduler_has_not_marked_unschedulable_are_not_planned() {
    let s = index(&["a"], false);
    let mut r = reconciler();
    for now in [0, 1_000, 11_000, 60_000] {
        assert!(!planned(&tick(&mut r, &s, 0, now)), "planned at {now}");
    }
}

#[test]
fn a_new_pending_pod_extends_the_batch_up_to_its_maximum() {
    let mut s = index(&["p0"], true);
    let mut r = reconciler();
    // One new pod every 900 ms keeps the idle window from closing; the batch closes at
    // the 10 s maximum.
    for i in 0..=12 {
        let now = i * 900;
        let t = tick(&mut r, &s, 0, now);
        assert_eq!(planned(&t), now >= 10_000, "at {now}");
        if planned(&t) {
            return;
        }
        add_pod(&mut s, &format!("p{}", i + 1), 100, true);
    }
    panic!("the batch never closed");
}

#[test]
fn a_node_the_plan_uses_is_nominated_once_and_spared_for_the_window() {
    let mut s = index(&["a"], true);
    add_node(&mut s, "inflight", &[ConditionType::Launched]);
    let mut r = reconciler();
    tick(&mut r, &s, 0, 0);
    let t = tick(&mut r, &s, 0, 1_000);
    assert_eq!(launches(&t), 0, "the pod fits the in-flight node");
    let nominated: Vec<_> = t
        .events
        .iter()
        .filter_map(|e| match e {
            Event::Nominated { pod, node } => Some((pod.name.clone(), node.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(nominated, vec![("a".to_owned(), "inflight".to_owned())]);
    let window = r.settings().nomination_window();
    assert_eq!(window, 20_000);
    assert!(r.nominated_nodes(1_000 + window - 1).contains("inflight"));
    assert!(r.nominated_nodes(1_000 + window).is_empty());
    // Planned again, the same nomination is not reported again.
    r.replan(2_000);
    let again = tick(&mut r, &s, 0, 3_000);
    assert!(planned(&again));
    assert!(
        !again
            .events
            .iter()
            .any(|e| matches!(e, Event::Nominated { .. }))
    );
}

#[test]
fn a_pod_that_fits_nowhere_is_reported_once_per_reason() {
    let mut s = index(&[], true);
    add_pod(&mut s, "huge", 1_000_000, true);
    let mut r = reconciler();
    tick(&mut r, &s, 0, 0);
    let failed = |t: &Tick| {
        t.events
            .iter()
            .filter(|e| matches!(e, Event::FailedScheduling { .. }))
            .count()
    };
    assert_eq!(failed(&tick(&mut r, &s, 0, 1_000)), 1);
    assert!(r.unschedulable().keys().any(|k| k.name == "huge"));
    r.replan(2_000);
    let again = tick(&mut r, &s, 0, 3_000);
    assert!(planned(&again));
    assert_eq!(failed(&again), 0);
}

#[test]
fn a_pod_waiting_for_a_reservation_promised_elsewhere_is_not_a_failure() {
    use karpenter_scheduling::labels::{
        AWS_CAPACITY_RESERVATION_ID, CAPACITY_TYPE, CAPACITY_TYPE_RESERVED,
    };
    use karpenter_scheduling::model::{InstanceType, Offering, Reservation};
    use karpenter_scheduling::requirements::{Operator, Requirement};
    // One reserved m-size slot, and a pool that only takes reserved capacity: of two pods
    // that cannot share a node, the second waits for a later round.
    let mut reserved_pool = pool();
    reserved_pool.spec.template.spec.requirements = serde_json::from_value(serde_json::json!([{
        "key": "karpenter.sh/capacity-type", "operator": "In", "values": ["reserved"]
    }]))
    .unwrap();
    let mut s = ClusterState::new();
    s.apply(Object::NodePool(Box::new(reserved_pool)));
    let types = on_demand_catalogue("zone-a")
        .into_iter()
        .map(|t| {
            let mut t = InstanceType::clone(&t);
            let price = t.offerings[0].price / 10_000_000.0;
            t.offerings.push(Offering {
                zone: "zone-a".into(),
                capacity_type: CAPACITY_TYPE_RESERVED.into(),
                price,
                available: true,
                reservation: Some(Reservation {
                    id: format!("cr-{}", t.name),
                    id_label: AWS_CAPACITY_RESERVATION_ID.into(),
                    capacity: 1,
                    labels: Default::default(),
                }),
            });
            t.requirements.remove(CAPACITY_TYPE);
            let types = ["on-demand", "reserved"];
            t.requirements
                .add(Requirement::new(CAPACITY_TYPE, Operator::In, types).unwrap());
            std::sync::Arc::new(t)
        })
        .filter(|t| t.name == "small")
        .collect();
    s.set_instance_types("default", types);
    add_pod(&mut s, "a", 1_500, true);
    add_pod(&mut s, "b", 1_500, true);
    let mut r = reconciler();
    tick(&mut r, &s, 0, 0);
    let t = tick(&mut r, &s, 0, 2_000);
    assert!(planned(&t));
    assert_eq!(launches(&t), 1, "one claim holds the one reservation");
    assert!(
        !t.events
            .iter()
            .any(|e| matches!(e, Event::FailedScheduling { .. })),
        "{:?}",
        t.events
    );
    let Some(Event::Planned { plan, .. }) =
        t.events.iter().find(|e| matches!(e, Event::Planned { .. }))
    else {
        unreachable!()
    };
    assert!(
        plan.unschedulable.iter().all(|u| u.deferred),
        "{:?}",
        plan.unschedulable
    );
    assert_eq!(plan.unschedulable.len(), 1);
}

#[test]
fn a_node_initializing_replans_the_pods_left_pending() {
    let mut s = index(&["a"], true);
    let mut r = reconciler();
    tick(&mut r, &s, 0, 0);
    assert!(planned(&tick(&mut r, &s, 0, 1_000)));
    assert!(!planned(&tick(&mut r, &s, 0, 2_000)));
    add_node(&mut s, "fresh", &LIVE);
    let opened = tick(&mut r, &s, 0, 3_000);
    assert!(!planned(&opened));
    assert_eq!(opened.next_wakeup, Some(4_000));
    assert!(planned(&tick(&mut r, &s, 0, 4_000)));
}

#[test]
fn a_disrupted_taint_no_command_holds_is_removed_on_the_second_poll() {
    let mut s = index(&[], true);
    add_node(&mut s, "orphan", &LIVE);
    let mut record = s.nodes()["orphan"].clone();
    record.node.taints.push(disrupted_taint());
    s.apply(Object::Node(Box::new(record)));
    let mut r = reconciler();
    let untaints = |t: &Tick| {
        t.actions
            .iter()
            .filter(|a| matches!(a, Action::UntaintDisrupted { node } if node == "orphan"))
            .count()
    };
    assert_eq!(untaints(&tick(&mut r, &s, 0, 0)), 0);
    assert_eq!(untaints(&tick(&mut r, &s, 0, 5_000)), 0, "between polls");
    assert_eq!(untaints(&tick(&mut r, &s, 0, 10_000)), 1);
}

#[test]
fn an_unchanged_cluster_is_evaluated_again_only_when_something_changes() {
    let mut s = index(&[], true);
    add_node(&mut s, "n", &LIVE);
    let mut r = reconciler();
    let passed = |t: &Tick| {
        t.events
            .iter()
            .any(|e| matches!(e, Event::DisruptionPass { .. }))
    };
    assert!(passed(&tick(&mut r, &s, 0, 0)));
    assert!(!passed(&tick(&mut r, &s, 0, 10_000)), "nothing changed");
    assert!(
        passed(&tick(&mut r, &s, 1, 20_000)),
        "the provider's facts changed"
    );
    add_pod(&mut s, "x", 100, false);
    assert!(passed(&tick(&mut r, &s, 1, 30_000)), "the index changed");
}

#[test]
fn observe_only_decides_but_starts_nothing() {
    // A pending pod too big for the existing nodes (provisioning), an empty initialized node
    // (Empty), a disrupted-tainted node no command holds (an orphan), and a claim not yet
    // launched (lifecycle).
    let mut s = index(&[], true);
    // The orphan counts against the budget: allow both.
    let mut p = pool();
    p.spec.disruption.budgets =
        serde_json::from_value(serde_json::json!([{"nodes": "100%"}])).unwrap();
    s.apply(Object::NodePool(Box::new(p)));
    add_pod(&mut s, "big", 8_000, true);
    let ready = [
        ConditionType::Launched,
        ConditionType::Registered,
        ConditionType::Initialized,
    ];
    add_node(&mut s, "empty", &ready);
    add_node(&mut s, "orphan", &ready);
    let mut record = s.nodes()["orphan"].clone();
    record.node.taints.push(disrupted_taint());
    s.apply(Object::Node(Box::new(record)));
    s.apply(Object::NodeClaim(Box::new(claim("unlaunched", &[]))));
    let run = |observe_only: bool| {
        let settings = ReconcilerSettings {
            observe_only,
            ..ReconcilerSettings::default()
        };
        let mut r = Reconciler::new(settings, NameGenerator::default());
        let mut actions = Vec::new();
        let mut decided = 0;
        for now in [0, 2_000, 10_000, 12_000, 20_000] {
            let t = tick(&mut r, &s, 0, now);
            decided += t
                .events
                .iter()
                .filter(|e| matches!(e, Event::DisruptionDecided(_)))
                .count();
            actions.extend(t.actions);
        }
        let kinds: BTreeSet<&'static str> = actions
            .iter()
            .map(|a| match a {
                Action::LaunchNodeClaim { .. } => "create",
                Action::TaintDisrupted { .. } => "taint",
                Action::UntaintDisrupted { .. } => "untaint",
                a if a.is_lifecycle() => "lifecycle",
                _ => "other",
            })
            .collect();
        (decided, kinds)
    };
    let (decided, acting) = run(false);
    assert!(decided > 0, "the empty node is decided");
    assert!(
        acting.contains("taint") && acting.contains("lifecycle") && acting.contains("untaint"),
        "{acting:?}"
    );
    let (decided, observing) = run(true);
    assert!(decided > 0, "still decided in shadow mode");
    assert_eq!(
        observing,
        BTreeSet::from(["create"]),
        "only the provisioning decision, for the caller to report"
    );
}

fn lifecycle_actions(t: &Tick) -> Vec<&Action> {
    t.actions
        .iter()
        .filter(|a| a.is_lifecycle() || matches!(a, Action::DeleteNodeClaim { .. }))
        .collect()
}

/// The joined Node `node` of claim `c`, initializable or not.
fn joined(s: &mut ClusterState, c: &str, node_name: &str, waiting_for: Option<&str>) {
    s.apply(Object::Node(Box::new(NodeRecord {
        node: node(node_name, "zone-a", 4, 16),
        node_claim: Some(c.into()),
        startup_taints: Vec::new(),
        deleting: false,
        kubelet: Kubelet::Joined {
            waiting_for: waiting_for.map(str::to_owned),
            conditions: Vec::new(),
        },
    })));
}

#[test]
fn lifecycle_takes_each_claim_one_observed_step_at_a_time() {
    use crate::registration::REGISTRATION_TIMEOUT_MS;
    let mut s = ClusterState::new();
    // No disruption poll in the way of the wakeup asserted below.
    let settings = ReconcilerSettings {
        disruption_interval: 10 * REGISTRATION_TIMEOUT_MS,
        ..ReconcilerSettings::default()
    };
    let mut r = Reconciler::new(settings, NameGenerator::default());
    let mut c = claim("c", &[]);
    s.apply(Object::NodeClaim(Box::new(c.clone())));
    let t = tick(&mut r, &s, 0, 0);
    assert!(
        matches!(&lifecycle_actions(&t)[..], [Action::AddTerminationFinalizer { node_claim }] if node_claim == "c")
    );

    c.metadata.finalizers = Some(vec!["karpenter.sh/termination".into()]);
    s.apply(Object::NodeClaim(Box::new(c.clone())));
    let t = tick(&mut r, &s, 0, 0);
    assert!(matches!(
        &lifecycle_actions(&t)[..],
        [Action::LaunchInstance { .. }]
    ));

    // Launched, no Node: wait, and wake when the registration window ends.
    c.set_true(ConditionType::Launched.as_str(), time(1_000));
    s.apply(Object::NodeClaim(Box::new(c.clone())));
    let t = tick(&mut r, &s, 0, 2_000);
    assert!(lifecycle_actions(&t).is_empty());
    assert_eq!(t.next_wakeup, Some(1_000 + REGISTRATION_TIMEOUT_MS));

    // Its Node joined under another name: register that Node; not Ready yet, so no more.
    joined(&mut s, "c", "ip-10-0-0-1", Some("node is not Ready"));
    let t = tick(&mut r, &s, 0, 3_000);
    assert!(
        matches!(&lifecycle_actions(&t)[..], [Action::RegisterNode { node_claim, node }] if node_claim == "c" && node == "ip-10-0-0-1")
    );
    c.set_true(ConditionType::Registered.as_str(), time(3_000));
    s.apply(Object::NodeClaim(Box::new(c.clone())));
    assert!(lifecycle_actions(&tick(&mut r, &s, 0, 4_000)).is_empty());

    joined(&mut s, "c", "ip-10-0-0-1", None);
    let t = tick(&mut r, &s, 0, 5_000);
    assert!(
        matches!(&lifecycle_actions(&t)[..], [Action::InitializeNode { node, .. }] if node == "ip-10-0-0-1")
    );
    c.set_true(ConditionType::Initialized.as_str(), time(5_000));
    s.apply(Object::NodeClaim(Box::new(c)));
    assert!(lifecycle_actions(&tick(&mut r, &s, 0, 6_000)).is_empty());
    assert_eq!(
        s.maturing_claims().count(),
        0,
        "an initialized claim is done"
    );
}

#[test]
fn a_claim_whose_node_never_joins_is_given_up_with_upstreams_reason() {
    use crate::registration::REGISTRATION_TIMEOUT_MS;
    let mut s = ClusterState::new();
    let mut r = reconciler();
    let mut c = claim("c", &[ConditionType::Launched]);
    c.metadata.finalizers = Some(vec!["karpenter.sh/termination".into()]);
    s.apply(Object::NodeClaim(Box::new(c)));
    assert!(lifecycle_actions(&tick(&mut r, &s, 0, REGISTRATION_TIMEOUT_MS - 1)).is_empty());
    let t = tick(&mut r, &s, 0, REGISTRATION_TIMEOUT_MS);
    assert!(
        matches!(&lifecycle_actions(&t)[..], [Action::DeleteNodeClaim { cause, .. }] if cause.as_str() == "registration_timeout")
    );
    // The terminator takes the deletion up within a second, not at the next unrelated timer.
    assert!(
        t.next_wakeup
            .is_some_and(|w| w <= REGISTRATION_TIMEOUT_MS + termination::RECONCILE_INTERVAL_MS),
        "{:?}",
        t.next_wakeup
    );
    assert!(t.events.iter().any(|e| matches!(
        e,
        Event::LifecycleTimeout {
            reason: "RegistrationTimeout",
            ..
        }
    )));
}

#[test]
fn registration_timeouts_and_registrations_move_the_pools_registration_health() {
    use crate::registration::REGISTRATION_TIMEOUT_MS;
    use karpenter_cloudprovider::v1::ConditionStatus;
    let mut s = ClusterState::new();
    let mut p = pool();
    p.metadata.uid = Some("pool-uid".into());
    p.metadata.generation = Some(1);
    s.apply(Object::NodePool(Box::new(p.clone())));
    let mut r = reconciler();
    let owned = |name: &str, owner: &str| {
        let mut c = claim(name, &[ConditionType::Launched]);
        c.metadata.finalizers = Some(vec!["karpenter.sh/termination".into()]);
        c.metadata.owner_references = Some(vec![
            k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference {
                api_version: "karpenter.sh/v1".into(),
                kind: "NodePool".into(),
                name: "default".into(),
                uid: owner.into(),
                ..Default::default()
            },
        ]);
        c
    };
    // The verdict is kept by pool UID.
    let probe = p.clone();
    let verdict = |r: &Reconciler| r.registration_health().verdict(&probe).map(|v| v.0);
    // A claim of an older pool of the same name does not count.
    s.apply(Object::NodeClaim(Box::new(owned("old", "other-uid"))));
    s.apply(Object::NodeClaim(Box::new(owned("a", "pool-uid"))));
    tick(&mut r, &s, 0, 0);
    assert_eq!(verdict(&r), Some(ConditionStatus::Unknown));
    // Both time out; the timeout decision repeats until the deletion shows, but each claim
    // counts once: [F] is one failure in four, not yet unhealthy.
    tick(&mut r, &s, 0, REGISTRATION_TIMEOUT_MS);
    tick(&mut r, &s, 0, REGISTRATION_TIMEOUT_MS + 1_000);
    assert_eq!(verdict(&r), Some(ConditionStatus::Unknown));
    s.apply(Object::NodeClaim(Box::new(owned("b", "pool-uid"))));
    tick(&mut r, &s, 0, REGISTRATION_TIMEOUT_MS + 2_000);
    assert_eq!(verdict(&r), Some(ConditionStatus::False));
    let v = r.registration_health().verdict(&probe).unwrap();
    assert_eq!(v.1, "RegistrationFailed");

    // Three registrations: [F, F, T, T] is still unhealthy, [F, T, T, T] is not.
    for (i, name) in ["c", "d", "e"].into_iter().enumerate() {
        s.apply(Object::NodeClaim(Box::new(owned(name, "pool-uid"))));
        joined(&mut s, name, &format!("node-{name}"), None);
        tick(&mut r, &s, 0, REGISTRATION_TIMEOUT_MS + 3_000);
        let want = if i < 2 {
            ConditionStatus::False
        } else {
            ConditionStatus::True
        };
        assert_eq!(verdict(&r), Some(want), "after {name}");
    }

    // A new generation of the pool starts over.
    p.metadata.generation = Some(2);
    s.apply(Object::NodePool(Box::new(p.clone())));
    tick(&mut r, &s, 0, REGISTRATION_TIMEOUT_MS + 4_000);
    assert_eq!(verdict(&r), Some(ConditionStatus::Unknown));
}

#[test]
fn a_blocked_repair_is_reported_once_per_interval_and_a_due_one_repairs() {
    use karpenter_cloudprovider::RepairPolicy;
    use karpenter_cloudprovider::v1::ConditionStatus;
    const MIN: Millis = 60_000;
    let policies = [RepairPolicy::replace(
        "Ready",
        ConditionStatus::False,
        std::time::Duration::from_secs(30 * 60),
    )];
    let mut s = ClusterState::new();
    for name in ["a", "b", "c"] {
        let ready = if name == "c" { "True" } else { "False" };
        add_reporting_node(&mut s, name, &[], ready, "");
    }
    let mut r = reconciler();
    let at = |r: &mut Reconciler, s: &ClusterState, now: Millis| {
        let drift = BTreeMap::new();
        let facts = ProviderFacts {
            drift: &drift,
            version: 0,
            repair_policies: &policies,
            seconds: &|| 0.0,
            solving: &|_| {},
        };
        r.tick(s, &facts, now)
    };
    let blocked = |t: &Tick| {
        t.events
            .iter()
            .filter(|e| matches!(e, Event::RepairBlocked { .. }))
            .count()
    };
    let repairs = |t: &Tick| {
        t.actions
            .iter()
            .filter(|a| matches!(a, Action::RepairNodeClaim { .. }))
            .count()
    };
    // Before the toleration ends: nothing, and a wakeup when it does.
    let t = at(&mut r, &s, 29 * MIN);
    assert_eq!((blocked(&t), repairs(&t)), (0, 0));
    assert!(t.next_wakeup.is_some_and(|w| w <= 30 * MIN));
    // 2 of 3 unhealthy (more than ceil(20 % of 3) = 1): both blocked, told once.
    let t = at(&mut r, &s, 30 * MIN);
    assert_eq!((blocked(&t), repairs(&t)), (2, 0));
    assert_eq!(blocked(&at(&mut r, &s, 31 * MIN)), 0);
    assert_eq!(
        blocked(&at(&mut r, &s, 35 * MIN)),
        2,
        "told again after 5 minutes"
    );
    // One recovers: the other is repaired.
    let mut b = s.nodes()["b"].clone();
    b.kubelet = Kubelet::ready();
    s.apply(Object::Node(Box::new(b)));
    let t = at(&mut r, &s, 36 * MIN);
    assert!(
        matches!(&t.actions.iter().filter(|a| matches!(a, Action::RepairNodeClaim { .. })).collect::<Vec<_>>()[..], [Action::RepairNodeClaim { node_claim, .. }] if node_claim == "a")
    );
    // Without policies (the gate off) nothing is decided.
    let mut off = reconciler();
    let t = tick(&mut off, &s, 0, 60 * MIN);
    assert_eq!((blocked(&t), repairs(&t)), (0, 0));
}

fn stamps(t: &Tick) -> Vec<(String, Millis)> {
    t.actions
        .iter()
        .filter_map(|a| match a {
            Action::StampPodEvent { node_claim, at } => Some((node_claim.clone(), *at)),
            _ => None,
        })
        .collect()
}

pub(super) fn bind(s: &mut ClusterState, name: &str, node: &str) {
    let mut p = pod(name, 100, GI);
    p.node_name = Some(node.into());
    s.apply(Object::Pod(Box::new(PodRecord {
        pod: p,
        ready_at: None,
        deleting_at: None,
        unschedulable: false,
    })));
}

#[test]
fn pod_events_stamp_the_nodeclaim_at_most_once_per_dedupe_window() {
    let mut s = index(&[], false);
    add_node(&mut s, "n1", &[ConditionType::Initialized]);
    let mut r = reconciler();
    assert!(
        stamps(&tick(&mut r, &s, 0, 1_000)).is_empty(),
        "no pods, no events"
    );
    bind(&mut s, "web-1", "n1");
    assert!(r.has_pod_events(&s));
    assert_eq!(stamps(&tick(&mut r, &s, 0, 2_000)), [("n1".into(), 2_000)]);
    assert!(!r.has_pod_events(&s), "an event is stamped once");
    // The watch brings the stamp back; a second pod within 10 s is not stamped again.
    let mut c = s.node_claims()["n1"].clone();
    c.status
        .get_or_insert_with(Default::default)
        .last_pod_event_time = Some(time(2_000));
    s.apply(Object::NodeClaim(Box::new(c)));
    bind(&mut s, "web-2", "n1");
    assert!(
        stamps(&tick(&mut r, &s, 0, 5_000)).is_empty(),
        "deduplicated"
    );
    s.delete(&crate::ObjectKey::Pod(pod("web-1", 100, GI).key()));
    assert_eq!(
        stamps(&tick(&mut r, &s, 0, 12_000)),
        [("n1".into(), 12_000)],
        "a pod leaving the node is an event too"
    );
}

#[test]
fn only_arrivals_departures_and_terminations_of_workload_pods_are_pod_events() {
    let mut s = index(&[], false);
    add_node(&mut s, "n1", &[ConditionType::Initialized]);
    let seen = s.generation();
    let events = |s: &ClusterState| s.pod_events_after(seen).count();
    add_pod(&mut s, "pending", 100, true);
    assert_eq!(events(&s), 0, "an unbound pod is no event");
    let mut daemon = pod("agent", 100, GI);
    daemon.node_name = Some("n1".into());
    daemon.owner = Some(karpenter_scheduling::model::OwnerRef {
        kind: "DaemonSet".into(),
        name: "agent".into(),
        uid: String::new(),
    });
    s.apply(Object::Pod(Box::new(PodRecord {
        pod: daemon,
        ready_at: None,
        deleting_at: None,
        unschedulable: false,
    })));
    assert_eq!(events(&s), 0, "DaemonSet pods are not counted");
    bind(&mut s, "web", "n1");
    let bound = s.generation();
    assert_eq!(events(&s), 1);
    bind(&mut s, "web", "n1");
    assert_eq!(
        s.pod_events_after(bound).count(),
        0,
        "an update that keeps the pod bound is no event"
    );
    let mut terminating = s.pods()[&pod("web", 100, GI).key()].clone();
    terminating.deleting_at = Some(30_000);
    s.apply(Object::Pod(Box::new(terminating)));
    assert_eq!(
        s.pod_events_after(bound).count(),
        1,
        "terminating is an event"
    );
    assert_eq!(events(&s), 1, "one entry per node, the latest");
}

#[test]
fn deleting_claims_and_shadow_mode_are_not_stamped() {
    let mut s = index(&[], false);
    add_node(&mut s, "n1", &[ConditionType::Initialized]);
    bind(&mut s, "web", "n1");
    let settings = ReconcilerSettings {
        observe_only: true,
        ..ReconcilerSettings::default()
    };
    let mut shadow = Reconciler::new(settings, NameGenerator::default());
    assert!(stamps(&tick(&mut shadow, &s, 0, 1_000)).is_empty());
    let mut c = s.node_claims()["n1"].clone();
    c.metadata.deletion_timestamp = Some(time(500));
    s.apply(Object::NodeClaim(Box::new(c)));
    assert!(stamps(&tick(&mut reconciler(), &s, 0, 1_000)).is_empty());
}

#[test]
fn a_pod_leaving_a_node_restarts_consolidate_after_in_the_same_tick() {
    let mut s = index(&[], false);
    let mut p = pool();
    p.spec.disruption.consolidate_after = serde_json::from_value(serde_json::json!("1m")).unwrap();
    s.apply(Object::NodePool(Box::new(p)));
    add_node(&mut s, "n1", &LIVE);
    bind(&mut s, "web", "n1");
    let mut r = reconciler();
    let decided = |t: &Tick| {
        t.events
            .iter()
            .filter(|e| matches!(e, Event::DisruptionDecided(_)))
            .count()
    };
    assert_eq!(decided(&tick(&mut r, &s, 0, 600_000)), 0, "not empty");
    // The last pod leaves ten minutes after the node initialized: it is empty, but its
    // window starts again now, though the claim still carries no lastPodEventTime.
    s.delete(&crate::ObjectKey::Pod(pod("web", 100, GI).key()));
    let t = tick(&mut r, &s, 0, 610_000);
    assert_eq!(stamps(&t), [("n1".into(), 610_000)]);
    assert_eq!(decided(&t), 0, "consolidateAfter counts from the stamp");
}

fn condition_changes(t: &Tick, claim: &str) -> Vec<conditions::ConditionChange> {
    t.actions
        .iter()
        .filter_map(|a| match a {
            Action::SetClaimConditions {
                node_claim,
                changes,
            } if node_claim == claim => Some(changes.clone()),
            _ => None,
        })
        .flatten()
        .collect()
}

/// Applies the tick's condition changes to the index, as the watch would bring them back.
fn write_back(s: &mut ClusterState, t: &Tick, now: Millis) {
    for a in &t.actions {
        if let Action::SetClaimConditions {
            node_claim,
            changes,
        } = a
        {
            let mut c = s.node_claims()[node_claim].clone();
            conditions::apply(&mut c, changes, time(now));
            s.apply(Object::NodeClaim(Box::new(c)));
        }
    }
}

#[test]
fn consolidatable_follows_consolidate_after_and_is_written_once() {
    let mut s = index(&[], false);
    let mut p = pool();
    p.spec.disruption.consolidate_after = serde_json::from_value(serde_json::json!("1m")).unwrap();
    s.apply(Object::NodePool(Box::new(p)));
    add_node(&mut s, "n1", &[ConditionType::Launched]);
    let mut r = reconciler();
    // The empty node is also disrupted (DisruptionReason): only Consolidatable matters here.
    let only_consolidatable = |t: &Tick| {
        let mut c = condition_changes(t, "n1");
        c.retain(|c| c.type_ == ConditionType::Consolidatable);
        c
    };
    let t = tick(&mut r, &s, 0, 1_000);
    assert!(
        only_consolidatable(&t).is_empty(),
        "not initialized: no Consolidatable, nothing to remove"
    );
    let mut c = s.node_claims()["n1"].clone();
    c.set_true(ConditionType::Initialized.as_str(), time(10_000));
    s.apply(Object::NodeClaim(Box::new(c)));
    let t = tick(&mut r, &s, 0, 20_000);
    assert!(only_consolidatable(&t).is_empty(), "inside the window");
    assert!(
        t.next_wakeup.is_some_and(|w| w <= 70_000),
        "wakes when it ends"
    );
    let t = tick(&mut r, &s, 0, 70_000);
    let changes = only_consolidatable(&t);
    assert_eq!(changes.len(), 1, "{changes:?}");
    assert_eq!(changes[0].type_, ConditionType::Consolidatable);
    assert!(matches!(
        &changes[0].to,
        Some((ConditionStatus::True, _, _))
    ));
    assert!(
        only_consolidatable(&tick(&mut r, &s, 0, 71_000)).is_empty(),
        "not sent again while the write is on its way"
    );
    write_back(&mut s, &t, 70_000);
    let again = only_consolidatable(&tick(&mut r, &s, 0, 90_000));
    assert!(again.is_empty(), "{again:?}");
    // A pod arrives: the window starts again and the condition goes.
    bind(&mut s, "web", "n1");
    let t = tick(&mut r, &s, 0, 100_000);
    write_back(&mut s, &t, 100_000);
    let mut c = s.node_claims()["n1"].clone();
    c.status
        .get_or_insert_with(Default::default)
        .last_pod_event_time = Some(time(100_000));
    s.apply(Object::NodeClaim(Box::new(c)));
    let t = tick(&mut r, &s, 0, 101_000);
    assert_eq!(
        only_consolidatable(&t),
        [conditions::ConditionChange {
            type_: ConditionType::Consolidatable,
            to: None
        }]
    );
}

#[test]
fn draining_claims_report_drained_once_their_node_is_empty() {
    let mut s = index(&[], false);
    add_node(&mut s, "n1", &[ConditionType::Initialized]);
    bind(&mut s, "web", "n1");
    let mut c = s.node_claims()["n1"].clone();
    c.metadata.deletion_timestamp = Some(time(1_000));
    s.apply(Object::NodeClaim(Box::new(c)));
    let mut n = s.nodes()["n1"].clone();
    n.deleting = true;
    s.apply(Object::Node(Box::new(n)));
    let mut r = reconciler();
    let drained = |t: &Tick| {
        condition_changes(t, "n1")
            .into_iter()
            .find(|c| c.type_ == ConditionType::Drained)
            .and_then(|c| c.to)
            .map(|(status, reason, _)| (status, reason))
    };
    let t = tick(&mut r, &s, 0, 2_000);
    assert_eq!(
        drained(&t),
        Some((ConditionStatus::Unknown, "Draining".into()))
    );
    write_back(&mut s, &t, 2_000);
    s.delete(&crate::ObjectKey::Pod(pod("web", 100, GI).key()));
    assert_eq!(
        drained(&tick(&mut r, &s, 0, 3_000)),
        Some((ConditionStatus::True, "Drained".into()))
    );
}

#[test]
fn a_started_command_marks_its_claims_with_the_disruption_reason() {
    let mut s = index(&[], false);
    add_node(&mut s, "n1", &LIVE);
    let mut r = reconciler();
    let reason = |t: &Tick| {
        condition_changes(t, "n1")
            .into_iter()
            .find(|c| c.type_ == ConditionType::DisruptionReason)
            .and_then(|c| c.to)
            .map(|(_, reason, _)| reason)
    };
    assert_eq!(reason(&tick(&mut r, &s, 0, 1_000)), None, "validating");
    assert_eq!(
        reason(&tick(&mut r, &s, 0, 20_000)),
        Some("Empty".to_owned()),
        "validated and started"
    );
}

#[test]
fn a_tick_visits_only_the_claims_that_changed() {
    let mut s = index(&[], false);
    for n in ["n1", "n2", "n3"] {
        add_node(&mut s, n, &LIVE);
    }
    let mut r = reconciler();
    let first = tick(&mut r, &s, 0, 1_000);
    assert_eq!(
        first
            .actions
            .iter()
            .filter(|a| matches!(a, Action::SetClaimConditions { .. }))
            .count(),
        3,
        "the first visit covers every claim (each becomes Consolidatable)"
    );
    // The writes are lost: nothing changes in the index. They are not asked for again
    // within the resend interval, and are once it has passed.
    assert!(condition_changes(&tick(&mut r, &s, 0, 2_000), "n1").is_empty());
    assert!(!condition_changes(&tick(&mut r, &s, 0, 7_000), "n1").is_empty());
    // A claim that changes is visited; the others are not.
    let t = tick(&mut r, &s, 0, 8_000);
    write_back(&mut s, &t, 8_000);
    write_back(&mut s, &first, 8_000);
    assert!(
        tick(&mut r, &s, 0, 9_000)
            .actions
            .iter()
            .all(|a| !matches!(a, Action::SetClaimConditions { .. }))
    );
    let mut c = s.node_claims()["n2"].clone();
    c.clear_condition(ConditionType::Consolidatable.as_str());
    s.apply(Object::NodeClaim(Box::new(c)));
    let t = tick(&mut r, &s, 0, 10_000);
    let touched: Vec<&str> = t
        .actions
        .iter()
        .filter_map(|a| match a {
            Action::SetClaimConditions { node_claim, .. } => Some(node_claim.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(touched, ["n2"]);
}

#[test]
fn a_plan_reports_its_simulation_start_and_end_while_the_tick_runs() {
    use std::cell::RefCell;
    let s = index(&["a", "b"], true);
    let mut r = reconciler();
    let heard = RefCell::new(Vec::new());
    let solving = |p| heard.borrow_mut().push(p);
    assert!(!planned(&tick_solving(&mut r, &s, 0, 0, &solving)));
    assert!(heard.borrow().is_empty(), "no batch closed: no simulation");
    assert!(planned(&tick_solving(&mut r, &s, 0, 1_000, &solving)));
    assert_eq!(
        *heard.borrow(),
        [
            SolveProgress::Started { pods: 2 },
            SolveProgress::Finished { unplaced: 0 }
        ]
    );
}

#[test]
fn a_claim_whose_instance_is_shutting_down_is_asked_again_in_5_s() {
    use karpenter_cloudprovider::v1::StatusConditions;
    let mut s = ClusterState::new();
    let mut c = karpenter_testing::api::node_claim("gone-soon");
    c.status.get_or_insert_with(Default::default).provider_id = "fake://a/gone-soon".into();
    c.metadata.deletion_timestamp = Some(time(0));
    c.metadata.finalizers = Some(vec![
        karpenter_cloudprovider::v1::labels::TERMINATION_FINALIZER.to_owned(),
    ]);
    c.set_true(ConditionType::InstanceTerminating.as_str(), time(0));
    s.apply(Object::NodeClaim(Box::new(c)));
    let mut r = reconciler();
    let t = tick(&mut r, &s, 0, 1_000);
    assert!(
        t.actions.iter().any(
            |a| matches!(a, Action::TerminateInstance { node_claim, .. } if node_claim == "gone-soon")
        ),
        "{:?}",
        t.actions
    );
    assert_eq!(t.next_wakeup, Some(1_000 + termination::INSTANCE_POLL_MS));
}

/// 100 two-core types `t000`…`t099`, dearer with the index, two of each family `f00`…`f49`;
/// the first 60 offered on demand only, the rest as spot too (at the same price).
fn family_catalogue() -> Vec<std::sync::Arc<karpenter_scheduling::InstanceType>> {
    use karpenter_scheduling::labels::AWS_INSTANCE_FAMILY;
    use karpenter_scheduling::{Operator, Requirement};
    (0..100)
        .map(|i| {
            let price = 0.05 + 0.001 * f64::from(i);
            let mut b = karpenter_testing::instance_types::InstanceTypeBuilder::new(
                &format!("t{i:03}"),
                2,
                4,
            )
            .zones(&["zone-a"])
            .on_demand(price);
            if i >= 60 {
                b = b.spot(price);
            }
            let mut it = karpenter_scheduling::InstanceType::clone(&b.build());
            it.requirements.add(
                Requirement::new(
                    AWS_INSTANCE_FAMILY,
                    Operator::In,
                    [format!("f{:02}", i / 2)],
                )
                .unwrap(),
            );
            std::sync::Arc::new(it)
        })
        .collect()
}

/// One pending pod over [`family_catalogue`], for a pool with `requirements` (JSON).
fn family_index(requirements: serde_json::Value) -> ClusterState {
    let pool: NodePool = serde_json::from_value(serde_json::json!({
        "apiVersion": "karpenter.sh/v1", "kind": "NodePool",
        "metadata": {"name": "default"},
        "spec": {"template": {"spec": {
            "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
            "requirements": requirements}}}
    }))
    .unwrap();
    let mut s = ClusterState::new();
    s.apply(Object::NodePool(Box::new(pool)));
    s.set_instance_types("default", family_catalogue());
    add_pod(&mut s, "a", 1_000, true);
    s
}

/// The launched NodeClaims' requirements on `key`, after the batch window.
fn launched_requirement(
    s: &ClusterState,
    key: &str,
) -> (
    Tick,
    Vec<karpenter_cloudprovider::v1::NodeSelectorRequirementWithMinValues>,
) {
    let mut r = reconciler();
    tick(&mut r, s, 1, 0);
    let t = tick(&mut r, s, 1, 2_000);
    let reqs = t
        .actions
        .iter()
        .filter_map(|a| match a {
            Action::LaunchNodeClaim { claim, .. } => claim
                .spec
                .requirements
                .iter()
                .find(|r| r.key == key)
                .cloned(),
            _ => None,
        })
        .collect();
    (t, reqs)
}

#[test]
fn a_claim_lists_the_capacity_types_its_listed_types_offer() {
    // Spot is offered only by types past the 60 cheapest: the claim is narrowed to on-demand.
    let s = family_index(serde_json::json!([]));
    let (t, reqs) = launched_requirement(&s, "karpenter.sh/capacity-type");
    assert_eq!(launches(&t), 1);
    let [ct] = reqs.as_slice() else {
        panic!("{reqs:?}")
    };
    assert_eq!(ct.values, ["on-demand"], "{ct:?}");
}

#[test]
fn a_claim_whose_cheapest_60_types_miss_a_min_values_is_not_launched() {
    // 50 families among the 100 types, but the 60 cheapest span 30 of them.
    let min = |n: u32| {
        family_index(serde_json::json!([{
            "key": "karpenter.k8s.aws/instance-family", "operator": "Exists", "minValues": n
        }]))
    };
    let (t, reqs) = launched_requirement(&min(30), "karpenter.k8s.aws/instance-family");
    assert_eq!(launches(&t), 1);
    assert_eq!(reqs[0].min_values, Some(30));
    let (t, _) = launched_requirement(&min(31), "karpenter.k8s.aws/instance-family");
    assert_eq!(launches(&t), 0);
    let reasons: Vec<&str> = t
        .events
        .iter()
        .filter_map(|e| match e {
            Event::FailedScheduling { reason, .. } => Some(reason.as_str()),
            _ => None,
        })
        .collect();
    let [reason] = reasons.as_slice() else {
        panic!("{:?}", t.events)
    };
    assert!(
        reason.contains("karpenter.k8s.aws/instance-family")
            && reason.contains("needs 31")
            && reason.contains("60 cheapest"),
        "{reason}"
    );
}

#[test]
fn node_repair_as_a_disruption_method_bounds_the_drain_and_leaves_the_legacy_path_idle() {
    use karpenter_cloudprovider::RepairPolicy;
    use karpenter_cloudprovider::v1::ConditionStatus;
    const MIN: Millis = 60_000;
    // The fake provider's set: Ready=False (the fallback) after 30 minutes, drained for 10.
    let policies = [RepairPolicy::replace(
        "Ready",
        ConditionStatus::False,
        std::time::Duration::from_secs(30 * 60),
    )
    .drain_bound(std::time::Duration::from_secs(10 * 60))];
    let mut s = ClusterState::new();
    // Consolidation off: only repair may act on these empty nodes.
    let mut p = pool();
    p.spec.disruption.consolidate_after =
        karpenter_cloudprovider::duration::NillableDuration::parse("Never").unwrap();
    s.apply(Object::NodePool(Box::new(p)));
    s.set_instance_types("default", on_demand_catalogue("zone-a"));
    for name in ["a", "b", "c", "d", "e"] {
        let ready = if name == "a" { "False" } else { "True" };
        add_reporting_node(&mut s, name, &LIVE, ready, "KubeletNotReady");
    }
    let mut settings = ReconcilerSettings::default();
    settings.disruption.node_repair = true;
    let mut r = Reconciler::new(settings, NameGenerator::default());
    let mut at = |now: Millis| {
        let drift = BTreeMap::new();
        let facts = ProviderFacts {
            drift: &drift,
            version: 0,
            repair_policies: &policies,
            seconds: &|| 0.0,
            solving: &|_| {},
        };
        r.tick(&s, &facts, now)
    };
    let t = at(29 * MIN);
    assert!(
        !t.events
            .iter()
            .any(|e| matches!(e, Event::DisruptionDecided(_)))
    );
    // The pass re-runs when the toleration ends, though nothing else changed.
    assert!(t.next_wakeup.is_some_and(|w| w <= 30 * MIN));
    let t = at(30 * MIN);
    let decided: Vec<_> = t
        .events
        .iter()
        .filter_map(|e| match e {
            Event::DisruptionDecided(c) => Some(c),
            _ => None,
        })
        .collect();
    let [cmd] = decided.as_slice() else {
        panic!("{:?}", t.events)
    };
    assert_eq!(cmd.reason, karpenter_disruption::Reason::UNHEALTHY);
    assert_eq!(cmd.node_names(), ["a"]);
    let mut repaired = Vec::new();
    for now in [30 * MIN + 1_000, 30 * MIN + 2_000, 30 * MIN + 3_000] {
        repaired.extend(at(now).actions.into_iter().filter_map(|a| match a {
            Action::RepairNodeClaim {
                node_claim,
                drain_bound,
                legacy,
                ..
            } => Some((node_claim, drain_bound, legacy)),
            _ => None,
        }));
    }
    assert_eq!(repaired, [("a".to_owned(), Some(10 * MIN), false)]);
}
