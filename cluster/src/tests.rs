//! Tests of the index and the controller steps, on hand-built state.

use super::orchestration::{Orchestrator, Outcome};
use super::provisioner::{LaunchTypes, NameGenerator, time};
use super::*;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use karpenter_cloudprovider::v1::{NodeClaimSpec, StatusConditions};
use karpenter_disruption::{CandidateRef, Command, Decision, Reason};
use karpenter_scheduling::labels;
use karpenter_scheduling::model::OwnerRef;
use karpenter_scheduling::selector::LabelSelector;

fn claim(name: &str, conditions: &[(ConditionType, Millis)]) -> NodeClaim {
    let mut c = NodeClaim {
        metadata: ObjectMeta {
            name: Some(name.into()),
            labels: Some([(labels::NODEPOOL.to_owned(), "default".to_owned())].into()),
            ..ObjectMeta::default()
        },
        spec: NodeClaimSpec {
            taints: Vec::new(),
            startup_taints: Vec::new(),
            requirements: Vec::new(),
            resources: Default::default(),
            node_class_ref: Default::default(),
            termination_grace_period: None,
            expire_after: karpenter_cloudprovider::v1::default_expire_after(),
        },
        status: None,
    };
    for (t, at) in conditions {
        c.set_true(t.as_str(), time(*at));
    }
    c
}

fn node(name: &str, claim: Option<&str>) -> NodeRecord {
    NodeRecord {
        node: model::Node {
            name: name.into(),
            node_pool: claim.map(|_| "default".to_owned()),
            capacity: Resources {
                cpu_millis: 4000,
                ..Resources::default()
            },
            ..model::Node::default()
        },
        node_claim: claim.map(str::to_owned),
        startup_taints: Vec::new(),
        deleting: false,
        kubelet: Kubelet::ready(),
    }
}

fn pod(name: &str, node: Option<&str>, ready_at: Option<Millis>) -> PodRecord {
    PodRecord {
        pod: Pod {
            namespace: "default".into(),
            name: name.into(),
            labels: [("app".to_owned(), "web".to_owned())].into(),
            node_name: node.map(str::to_owned),
            ..Pod::default()
        },
        ready_at,
        deleting_at: None,
        unschedulable: node.is_none(),
    }
}

fn pdb(min: Option<IntOrString>, max: Option<IntOrString>) -> PdbRecord {
    PdbRecord {
        budget: PodDisruptionBudget {
            namespace: "default".into(),
            name: "web".into(),
            selector: Some(LabelSelector {
                match_labels: [("app".to_owned(), "web".to_owned())].into(),
                ..LabelSelector::default()
            }),
            ..PodDisruptionBudget::default()
        },
        min_available: min,
        max_unavailable: max,
    }
}

#[test]
fn apply_delete_reset_bump_the_generation() {
    let mut s = ClusterState::new();
    let g0 = s.generation();
    s.apply(Object::Node(Box::new(node("n1", None))));
    assert!(s.generation() > g0);
    let g1 = s.generation();
    assert!(!s.delete(&ObjectKey::Node("missing".into())));
    assert_eq!(s.generation(), g1);
    assert!(s.delete(&ObjectKey::Node("n1".into())));
    assert!(s.generation() > g1);
    s.apply(Object::Pod(Box::new(pod("p", None, None))));
    s.reset();
    assert!(s.pods().is_empty() && s.nodes().is_empty());
}

#[test]
fn snapshot_scopes_and_node_states() {
    let mut s = ClusterState::new();
    s.apply(Object::NodeClaim(Box::new(claim(
        "ready",
        &[
            (ConditionType::Launched, 0),
            (ConditionType::Registered, 1),
            (ConditionType::Initialized, 2),
        ],
    ))));
    s.apply(Object::NodeClaim(Box::new(claim(
        "launching",
        &[(ConditionType::Launched, 0)],
    ))));
    s.apply(Object::Node(Box::new(node("ready", Some("ready")))));
    s.apply(Object::Node(Box::new(node("launching", Some("launching")))));
    let mut tainted = node("static", None);
    tainted.node.taints.push(disrupted_taint());
    s.apply(Object::Node(Box::new(tainted)));
    s.apply(Object::Pod(Box::new(pod("bound", Some("ready"), Some(0)))));
    s.apply(Object::Pod(Box::new(pod("pending", None, None))));

    let states = |snap: &Snapshot| -> Vec<(String, NodeState)> {
        snap.nodes
            .iter()
            .map(|n| (n.name.clone(), n.state))
            .collect()
    };
    let provisioner = s.snapshot(5, Scope::Provisioner);
    assert_eq!(
        states(&provisioner),
        [
            ("launching".to_owned(), NodeState::InFlight),
            ("ready".to_owned(), NodeState::Ready),
            ("static".to_owned(), NodeState::Deleting),
        ]
    );
    assert_eq!(provisioner.pending_pods.len(), 1);
    assert_eq!(provisioner.bound_pods.len(), 1);
    assert_eq!(provisioner.now, 5);
    // The kube-scheduler cannot bind to a node that has not initialized.
    let scheduler = s.snapshot(5, Scope::Scheduler);
    assert_eq!(
        states(&scheduler),
        [
            ("ready".to_owned(), NodeState::Ready),
            ("static".to_owned(), NodeState::Deleting),
        ]
    );
    assert!(scheduler.node_pools.is_empty());
    // Usage counts every node of the pool, in flight or not.
    assert_eq!(s.node_pool_usage()["default"].cpu_millis, 8000);
}

#[test]
fn pdb_status_follows_kube_controller_manager() {
    use IntOrString::{Int, String as Pct};
    // Four covered pods: three Ready, one pending.
    let cases = [
        (Some(Int(2)), None, 1),
        (Some(Int(3)), None, 0),
        (Some(Pct("50%".into())), None, 1),
        (None, Some(Int(1)), 0),
        (None, Some(Int(2)), 1),
        (None, Some(Pct("25%".into())), 0),
        (None, Some(Pct("100%".into())), 3),
    ];
    for (i, (min, max, allowed)) in cases.into_iter().enumerate() {
        let mut s = ClusterState::new();
        s.apply(Object::Pdb(Box::new(pdb(min, max))));
        for (n, ready) in [("a", Some(0)), ("b", Some(0)), ("c", Some(0))] {
            s.apply(Object::Pod(Box::new(pod(n, Some("n"), ready))));
        }
        s.apply(Object::Pod(Box::new(pod("d", None, None))));
        assert_eq!(
            s.pdb_budgets(10)[0].disruptions_allowed,
            allowed,
            "case {i}"
        );
    }
}

fn draining(grace: Option<&str>) -> ClusterState {
    let mut s = ClusterState::new();
    let mut c = claim("n", &[(ConditionType::Initialized, 0)]);
    c.metadata.deletion_timestamp = Some(time(1_000));
    c.spec.termination_grace_period =
        grace.map(|g| karpenter_cloudprovider::Duration::parse(g).unwrap());
    s.apply(Object::NodeClaim(Box::new(c)));
    let mut n = node("n", Some("n"));
    n.deleting = true;
    n.node.taints.push(disrupted_taint());
    s.apply(Object::Node(Box::new(n)));
    s.apply(Object::Pdb(Box::new(pdb(None, Some(IntOrString::Int(1))))));
    s.apply(Object::Pod(Box::new(pod("a", Some("n"), Some(0)))));
    s.apply(Object::Pod(Box::new(pod("b", Some("n"), Some(0)))));
    let mut ds = pod("agent", Some("n"), Some(0));
    ds.pod.labels.clear();
    ds.pod.owner = Some(OwnerRef {
        kind: "DaemonSet".into(),
        name: "agent".into(),
        uid: String::new(),
    });
    s.apply(Object::Pod(Box::new(ds)));
    s
}

/// Upstream's `IsDrainable`: a pod tolerating `karpenter.sh/disrupted:NoSchedule` (here a
/// DaemonSet pod tolerating everything) is not evicted and does not hold the termination.
#[test]
fn pods_tolerating_the_disrupted_taint_are_not_evicted() {
    let mut s = draining(None);
    s.delete(&ObjectKey::Pod(PodKey::new("default", "a")));
    s.delete(&ObjectKey::Pod(PodKey::new("default", "b")));
    let mut agent = s
        .pods_on("n")
        .find(|p| p.pod.name == "agent")
        .cloned()
        .unwrap();
    agent
        .pod
        .tolerations
        .push(karpenter_scheduling::taints::Toleration {
            operator: karpenter_scheduling::taints::TolerationOperator::Exists,
            ..Default::default()
        });
    s.apply(Object::Pod(Box::new(agent)));
    let (actions, draining_now) = termination::step(&s, 3_000);
    assert!(!draining_now, "{actions:?}");
    assert!(
        matches!(&actions[..], [Action::TerminateInstance { node_claim, .. }] if node_claim == "n"),
        "{actions:?}"
    );
}

#[test]
fn termination_evicts_through_pdbs_in_waves_then_terminates() {
    let s = draining(None);
    let (actions, draining_now) = termination::step(&s, 2_000);
    assert!(draining_now);
    // maxUnavailable 1 lets one web pod go; the DaemonSet pod waits for the next wave.
    let evicted: Vec<String> = actions
        .iter()
        .filter_map(|a| match a {
            Action::EvictPod { pod, .. } => Some(pod.name.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(evicted, ["a"]);

    let mut s = draining(None);
    s.delete(&ObjectKey::Pod(PodKey::new("default", "a")));
    s.delete(&ObjectKey::Pod(PodKey::new("default", "b")));
    let (actions, _) = termination::step(&s, 3_000);
    assert!(matches!(&actions[..], [Action::EvictPod { pod, .. }] if pod.name == "agent"));
    s.delete(&ObjectKey::Pod(PodKey::new("default", "agent")));
    let (actions, draining_now) = termination::step(&s, 4_000);
    assert!(!draining_now);
    assert!(
        matches!(&actions[..], [Action::TerminateInstance { node_claim, .. }] if node_claim == "n")
    );
}

#[test]
fn termination_grace_period_overrides_pdbs() {
    let s = draining(Some("1m"));
    let (before, _) = termination::step(&s, 60_000);
    assert_eq!(
        before
            .iter()
            .filter(|a| matches!(a, Action::DeletePod { .. }))
            .count(),
        0
    );
    // Deletion began at 1 s, so the grace period ends at 61 s.
    let (after, _) = termination::step(&s, 61_000);
    assert_eq!(
        after
            .iter()
            .filter(|a| matches!(a, Action::DeletePod { .. }))
            .count(),
        2
    );
}

#[test]
fn termination_timestamp_annotation_overrides_pdbs() {
    let mut s = draining(None);
    let mut c = claim("n", &[(ConditionType::Initialized, 0)]);
    c.metadata.deletion_timestamp = Some(time(1_000));
    c.metadata.annotations = Some(
        [(
            karpenter_cloudprovider::v1::labels::NODECLAIM_TERMINATION_TIMESTAMP_ANNOTATION
                .to_owned(),
            "1970-01-01T00:00:30Z".to_owned(),
        )]
        .into(),
    );
    s.apply(Object::NodeClaim(Box::new(c.clone())));
    let deletes = |now| {
        termination::step(&s, now)
            .0
            .iter()
            .filter(|a| matches!(a, Action::DeletePod { .. }))
            .count()
    };
    assert_eq!(deletes(29_000), 0);
    assert_eq!(deletes(30_000), 2);
    assert!(termination::deadline_passed(&c, 30_000));
    assert!(!termination::deadline_passed(&c, 29_999));
}

fn command(forceful: bool, created_at: Millis) -> Command {
    Command {
        reason: if forceful {
            Reason::Expired
        } else {
            Reason::EMPTY
        },
        decision: Decision::Delete,
        candidates: vec![CandidateRef {
            node: "n".into(),
            node_claim: "n".into(),
            node_pool: "default".into(),
            price: 0.1,
            pods: Vec::new(),
        }],
        replacements: Vec::new(),
        savings: 0.1,
        explanation: String::new(),
        created_at,
        forceful,
        consolidation: None,
        repair: None,
    }
}

#[test]
fn orchestration_forceful_acts_at_once_graceful_waits_for_validation() {
    let mut o = Orchestrator::new(15_000);
    let actions = o.submit(command(true, 0));
    assert!(
        matches!(&actions[..], [Action::DeleteNodeClaim { cause, .. }] if cause.as_str() == "Expired")
    );
    assert!(!o.is_busy());

    assert!(o.submit(command(false, 0)).is_empty());
    assert_eq!(o.disrupting().into_iter().collect::<Vec<_>>(), ["n"]);
    assert_eq!(o.next_due(), Some(15_000));
    let s = ClusterState::new();
    let fresh = |d: &BTreeSet<String>| {
        s.disruption_input(
            15_000,
            &DisruptionOptions::default(),
            d,
            &BTreeMap::new(),
            &BTreeSet::new(),
        )
    };
    let mut names = NameGenerator::default();
    let (actions, outcomes) = o.step(
        &s,
        &fresh,
        &mut names,
        &LaunchTypes::new(&s, Default::default()),
        10_000,
    );
    assert!(actions.is_empty() && outcomes.is_empty() && o.is_busy());
    // The node is gone by validation time: the command is dropped, nothing is done.
    let (actions, outcomes) = o.step(
        &s,
        &fresh,
        &mut names,
        &LaunchTypes::new(&s, Default::default()),
        15_000,
    );
    assert!(actions.is_empty());
    assert!(matches!(&outcomes[..], [Outcome::Invalidated { .. }]));
    assert!(!o.is_busy());
}

#[test]
fn drift_is_validated_at_once_and_consolidation_after_the_delay() {
    let mut o = Orchestrator::new(15_000);
    let mut drifted = command(false, 1_000);
    drifted.reason = Reason::DRIFTED;
    assert!(o.submit(drifted).is_empty());
    assert_eq!(o.next_due(), Some(1_000));
    let s = ClusterState::new();
    let fresh = |d: &BTreeSet<String>| {
        s.disruption_input(
            1_000,
            &DisruptionOptions::default(),
            d,
            &BTreeMap::new(),
            &BTreeSet::new(),
        )
    };
    let mut names = NameGenerator::default();
    // Validated on the same pass it was queued in (the node is gone here, so it is dropped).
    let (_, outcomes) = o.step(
        &s,
        &fresh,
        &mut names,
        &LaunchTypes::new(&s, Default::default()),
        1_000,
    );
    assert!(matches!(&outcomes[..], [Outcome::Invalidated { .. }]));

    let mut underused = command(false, 1_000);
    underused.reason = Reason::UNDERUTILIZED;
    assert!(o.submit(underused).is_empty());
    assert_eq!(o.next_due(), Some(16_000));
}

#[test]
fn pods_of_deleting_nodes_are_displaced_and_hold_termination_through_their_grace() {
    let mut s = ClusterState::new();
    let mut n = node("n1", Some("c1"));
    n.deleting = true;
    s.apply(Object::Node(Box::new(n)));
    s.apply(Object::Node(Box::new(node("n2", Some("c2")))));
    s.apply(Object::NodeClaim(Box::new(claim("c1", &[]))));
    s.apply(Object::Pod(Box::new(pod("web-1", Some("n1"), Some(0)))));
    s.apply(Object::Pod(Box::new(pod("web-2", Some("n2"), Some(0)))));
    let displaced = s.displaced_pods();
    assert_eq!(displaced.len(), 1);
    assert_eq!(s.displaced_pod_count(), 1);
    assert_eq!(&*displaced[0].name, "web-1");
    assert_eq!(displaced[0].node_name, None);

    // Evicted: terminating with 20 s of grace from t=1 s. The instance waits for it.
    let mut evicted = pod("web-1", Some("n1"), Some(0));
    evicted.pod.terminating = true;
    evicted.deleting_at = Some(21_000);
    s.apply(Object::Pod(Box::new(evicted)));
    assert!(s.displaced_pods().is_empty());
    assert_eq!(s.displaced_pod_count(), 0);
    let terminates = |s: &ClusterState, now| {
        termination::step(s, now)
            .0
            .iter()
            .any(|a| matches!(a, Action::TerminateInstance { .. }))
    };
    assert!(!terminates(&s, 5_000));
    assert!(!terminates(&s, 21_000 + STUCK_TERMINATING_MS - 1));
    // Stuck past its grace period plus a minute: no longer waited for.
    assert!(terminates(&s, 21_000 + STUCK_TERMINATING_MS));
}

#[test]
fn pods_on_follows_binding_rebinding_and_deletion() {
    let mut s = ClusterState::new();
    let names = |s: &ClusterState, n: &str| -> Vec<String> {
        s.pods_on(n).map(|p| p.pod.name.clone()).collect()
    };
    s.apply(Object::Pod(Box::new(pod("a", Some("n1"), None))));
    s.apply(Object::Pod(Box::new(pod("b", Some("n1"), None))));
    s.apply(Object::Pod(Box::new(pod("c", None, None))));
    assert_eq!(names(&s, "n1"), ["a", "b"]);
    // Re-applied bound elsewhere, the pod leaves its old node.
    s.apply(Object::Pod(Box::new(pod("a", Some("n2"), None))));
    assert_eq!(names(&s, "n1"), ["b"]);
    assert_eq!(names(&s, "n2"), ["a"]);
    // Re-applied on the same node (a status change), it stays.
    s.apply(Object::Pod(Box::new(pod("b", Some("n1"), Some(5)))));
    assert_eq!(names(&s, "n1"), ["b"]);
    s.delete(&ObjectKey::Pod(PodKey::new("default", "b")));
    assert!(names(&s, "n1").is_empty());
    s.reset();
    assert!(names(&s, "n2").is_empty());
}

#[test]
fn utilization_counts_managed_nodes_only() {
    let mut s = ClusterState::new();
    let with_allocatable = |name: &str, claim: Option<&str>, cpu_millis| {
        let mut n = node(name, claim);
        n.node.allocatable = Resources {
            cpu_millis,
            ..Resources::default()
        };
        n
    };
    s.apply(Object::Node(Box::new(with_allocatable(
        "n1",
        Some("c1"),
        4000,
    ))));
    s.apply(Object::Node(Box::new(with_allocatable(
        "n2",
        Some("c2"),
        4000,
    ))));
    // Not Karpenter's: neither its allocatable nor its pods count (31.25 % if they did).
    s.apply(Object::Node(Box::new(with_allocatable(
        "other", None, 8000,
    ))));
    for (name, at, cpu_millis) in [("a", "n1", 1000), ("b", "n2", 1000), ("c", "other", 3000)] {
        let mut p = pod(name, Some(at), None);
        p.pod.requests = Resources {
            cpu_millis,
            ..Resources::default()
        };
        s.apply(Object::Pod(Box::new(p)));
    }
    // A pending pod requests nothing of any node.
    s.apply(Object::Pod(Box::new(pod("d", None, None))));
    let u = s.utilization_percent();
    assert_eq!(u.get("cpu"), Some(&25.0), "{u:?}");
    assert_eq!(u.len(), 1, "no allocatable of other resources: {u:?}");
}

#[test]
fn static_pools_take_no_pods_from_the_scheduler() {
    let pool = |name: &str, replicas: Option<i64>| -> NodePool {
        let mut v = serde_json::json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodePool",
            "metadata": {"name": name},
            "spec": {"template": {"spec": {
                "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                "requirements": []}}}
        });
        if let Some(r) = replicas {
            v["spec"]["replicas"] = r.into();
        }
        serde_json::from_value(v).unwrap()
    };
    let mut s = ClusterState::new();
    s.apply(Object::NodePool(Box::new(pool("dynamic", None))));
    s.apply(Object::NodePool(Box::new(pool("static", Some(2)))));
    let names: Vec<String> = s
        .snapshot(0, Scope::Provisioner)
        .node_pools
        .iter()
        .map(|p| p.name.clone())
        .collect();
    assert_eq!(names, ["dynamic"]);
    // Both are kept in the index (disruption and status still see the static one).
    assert_eq!(s.node_pools().len(), 2);
}

#[test]
fn provisionable_deleting_and_initialized_are_kept_as_objects_change() {
    let mut s = ClusterState::new();
    let provisionable = |s: &ClusterState| -> Vec<String> {
        s.provisionable_pods().map(|p| p.pod.name.clone()).collect()
    };
    // `pod` marks unbound pods unschedulable.
    s.apply(Object::Pod(Box::new(pod("a", None, None))));
    s.apply(Object::Pod(Box::new(pod("b", None, None))));
    assert_eq!(provisionable(&s), ["a", "b"]);
    s.apply(Object::Pod(Box::new(pod("a", Some("n1"), None))));
    assert_eq!(provisionable(&s), ["b"], "bound");
    let mut terminating = pod("b", None, None);
    terminating.pod.terminating = true;
    s.apply(Object::Pod(Box::new(terminating)));
    assert!(provisionable(&s).is_empty(), "terminating");
    s.apply(Object::Pod(Box::new(pod("c", None, None))));
    s.delete(&ObjectKey::Pod(PodKey::new("default", "c")));
    assert!(provisionable(&s).is_empty(), "deleted");

    let mut n1 = node("n1", Some("c1"));
    s.apply(Object::Node(Box::new(n1.clone())));
    assert_eq!(s.deleting_nodes().count(), 0);
    n1.deleting = true;
    s.apply(Object::Node(Box::new(n1.clone())));
    assert_eq!(
        s.deleting_nodes()
            .map(|(n, _)| n.as_str())
            .collect::<Vec<_>>(),
        ["n1"]
    );
    assert_eq!(s.displaced_pods().len(), 1, "pod a must move");
    s.delete(&ObjectKey::Node("n1".into()));
    assert_eq!(s.deleting_nodes().count(), 0);

    let before = s.initializations();
    s.apply(Object::NodeClaim(Box::new(claim(
        "c1",
        &[(ConditionType::Launched, 0)],
    ))));
    assert_eq!(s.initializations(), before);
    let ready = claim("c1", &[(ConditionType::Initialized, 5)]);
    s.apply(Object::NodeClaim(Box::new(ready.clone())));
    s.apply(Object::NodeClaim(Box::new(ready)));
    assert_eq!(s.initializations(), before + 1, "counted once");
}

#[test]
fn termination_starts_from_either_side_and_ends_at_the_instance() {
    let deleting = |name: &str, finalizer: bool| {
        let mut c = claim(name, &[(ConditionType::Registered, 0)]);
        c.metadata.deletion_timestamp = Some(time(1_000));
        if finalizer {
            c.metadata.finalizers = Some(vec![
                karpenter_cloudprovider::v1::labels::TERMINATION_FINALIZER.into(),
            ]);
        }
        c
    };
    let mut s = ClusterState::new();
    // A Node deleted out of band: its claim follows.
    s.apply(Object::NodeClaim(Box::new(claim("kept", &[]))));
    let mut gone = node("ip-kept", Some("kept"));
    gone.deleting = true;
    s.apply(Object::Node(Box::new(gone)));
    // A deleting claim whose Node stands: the Node is deleted (the drain follows).
    s.apply(Object::NodeClaim(Box::new(deleting("standing", true))));
    s.apply(Object::Node(Box::new(node(
        "ip-standing",
        Some("standing"),
    ))));
    // A deleting claim with no Node: the instance goes.
    s.apply(Object::NodeClaim(Box::new(deleting("nodeless", true))));
    // Without the finalizer nothing waits on Karpenter.
    s.apply(Object::NodeClaim(Box::new(deleting("unheld", false))));
    let actions: Vec<String> = termination::start(&s)
        .iter()
        .map(|a| format!("{a:?}"))
        .collect();
    assert_eq!(
        actions,
        [
            format!(
                "{:?}",
                Action::DeleteNodeClaim {
                    node_claim: "kept".into(),
                    cause: crate::DeletionCause::NodeDeleted
                }
            ),
            format!(
                "{:?}",
                Action::TerminateInstance {
                    node_claim: "nodeless".into(),
                    node: None,
                }
            ),
            format!(
                "{:?}",
                Action::DeleteNode {
                    node: "ip-standing".into()
                }
            ),
        ]
    );
}

#[test]
fn an_action_names_the_object_its_result_comes_back_on() {
    let pod = PodKey::new("ns", "p");
    let cases = [
        (
            Action::LaunchInstance {
                node_claim: "c".into(),
            },
            ObjectKey::NodeClaim("c".into()),
        ),
        (
            Action::TaintDisrupted { node: "n".into() },
            ObjectKey::Node("n".into()),
        ),
        (
            Action::EvictPod {
                pod: pod.clone(),
                node: "n".into(),
            },
            ObjectKey::Pod(pod),
        ),
    ];
    for (action, key) in cases {
        assert_eq!(action.object(), key, "{action:?}");
    }
}

#[test]
fn a_claim_whose_instance_is_shutting_down_keeps_asking_until_it_is_gone() {
    use karpenter_cloudprovider::v1::StatusConditions;
    let mut s = ClusterState::new();
    let mut c = claim("n", &[(ConditionType::Initialized, 0)]);
    c.metadata.deletion_timestamp = Some(time(1_000));
    c.metadata.finalizers = Some(vec![
        karpenter_cloudprovider::v1::labels::TERMINATION_FINALIZER.to_owned(),
    ]);
    s.apply(Object::NodeClaim(Box::new(c.clone())));
    assert!(
        !termination::instances_shutting_down(&s),
        "termination not begun: nothing to ask yet"
    );
    c.set_true(ConditionType::InstanceTerminating.as_str(), time(2_000));
    assert!(termination::instance_terminating(&c));
    s.apply(Object::NodeClaim(Box::new(c.clone())));
    assert!(termination::instances_shutting_down(&s));
    // With no Node left, every pass asks the provider again to terminate the instance.
    assert!(
        termination::start(&s).iter().any(
            |a| matches!(a, Action::TerminateInstance { node_claim, .. } if node_claim == "n")
        )
    );
    c.metadata.finalizers = None;
    s.apply(Object::NodeClaim(Box::new(c)));
    assert!(
        !termination::instances_shutting_down(&s),
        "gone: the finalizer was removed"
    );
}

/// `--scheduler-config` with a zone spread, and a Service selecting `app: web`.
fn spread_index() -> ClusterState {
    use crate::default_spread::{SelectorSource, SourceKind};
    let mut s = ClusterState::new();
    let config = crate::scheduler_config::parse_scheduler_config(
        "podTopologySpread: {defaultConstraints: [{maxSkew: 1, \
         topologyKey: topology.kubernetes.io/zone, whenUnsatisfiable: DoNotSchedule}]}",
    )
    .unwrap();
    s.set_scheduler_config(config.as_ref());
    s.apply(Object::SelectorSource(Box::new(SelectorSource {
        kind: SourceKind::Service,
        namespace: "default".into(),
        name: "web".into(),
        selector: Some(LabelSelector {
            match_labels: [("app".to_owned(), "web".to_owned())].into(),
            ..LabelSelector::default()
        }),
    })));
    s
}

#[test]
fn snapshots_carry_default_spreads_for_pods_that_declare_none() {
    use crate::default_spread::SourceKind;
    let mut s = spread_index();
    s.apply(Object::Node(Box::new(node("n1", None))));
    s.apply(Object::Pod(Box::new(pod("pending", None, None))));
    s.apply(Object::Pod(Box::new(pod("bound", Some("n1"), Some(0)))));
    let snap = s.snapshot(0, Scope::Provisioner);
    for p in snap.pending_pods.iter().chain(&snap.bound_pods) {
        let c = &p.topology_spread_constraints;
        assert_eq!(c.len(), 1, "{}", p.name);
        assert_eq!(c[0].topology_key, "topology.kubernetes.io/zone");
        let selector = c[0].label_selector.as_ref().unwrap();
        assert_eq!(selector.match_labels["app"], "web");
    }
    // The index keeps the pods as they are: only the copies carry the defaults.
    assert!(
        s.pods()
            .values()
            .all(|p| p.pod.topology_spread_constraints.is_empty())
    );
    // A deleting node's pods move with the defaults too.
    let mut deleting = node("n1", None);
    deleting.deleting = true;
    s.apply(Object::Node(Box::new(deleting)));
    assert_eq!(s.displaced_pods()[0].topology_spread_constraints.len(), 1);

    // Without the Service, nothing selects the pods: no defaults.
    let g = s.generation();
    assert!(s.delete(&ObjectKey::SelectorSource(
        SourceKind::Service,
        "default".into(),
        "web".into()
    )));
    assert!(s.generation() > g, "a selector change can change decisions");
    let snap = s.snapshot(0, Scope::Provisioner);
    assert!(snap.pending_pods[0].topology_spread_constraints.is_empty());

    // A re-list forgets the selectors and keeps the configuration.
    let mut s = spread_index();
    s.reset();
    assert!(s.default_spread().is_active());
    s.apply(Object::Pod(Box::new(pod("pending", None, None))));
    let snap = s.snapshot(0, Scope::Scheduler);
    assert!(snap.pending_pods[0].topology_spread_constraints.is_empty());
    s.set_scheduler_config(None);
    assert!(!s.default_spread().is_active());
}
