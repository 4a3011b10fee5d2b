//! Scenario tests for `solve`, built from upstream Karpenter's scheduling behaviour.

use karpenter_scheduling::labels::{CAPACITY_TYPE, HOSTNAME, INSTANCE_TYPE, NODEPOOL, ZONE};
use karpenter_scheduling::model::{
    HostPort, NodeState, PreferredSchedulingTerm, WeightedPodAffinityTerm, WhenUnsatisfiable,
};
use karpenter_scheduling::quantity::{Quantity, QuantityFormat};
use karpenter_scheduling::requirements::{Operator, Requirement};
use karpenter_scheduling::solver::{MinValuesPolicy, PreferencePolicy};
use karpenter_scheduling::taints::TaintEffect;
use karpenter_scheduling::{Snapshot, SolveOptions, solve};
use karpenter_testing::*;

#[test]
fn single_pod_gets_cheapest_claim() {
    let plan = solve_default(&snapshot(vec![pod("p", 1000, GI)], vec![pool("default")]));
    assert!(plan.unschedulable.is_empty());
    assert_eq!(plan.new_node_claims.len(), 1);
    let c = &plan.new_node_claims[0];
    assert_eq!(c.node_pool, "default");
    assert_eq!(&*c.instance_type_options[0].name, "small");
    assert_eq!(&*c.instance_type_options[0].capacity_type, "spot");
    assert!((c.price - 0.04).abs() < 1e-9);
    assert!((plan.total_price - 0.04).abs() < 1e-9);
    // gpu has no spot, costs more: ranked last.
    assert_eq!(&*c.instance_type_options.last().unwrap().name, "gpu");
    let prices: Vec<f64> = c.instance_type_options.iter().map(|o| o.price).collect();
    assert!(prices.windows(2).all(|w| w[0] <= w[1]));
    assert_eq!(
        c.requirements
            .get(NODEPOOL)
            .unwrap()
            .values()
            .collect::<Vec<_>>(),
        vec!["default"]
    );
    assert!(c.requirements.get(HOSTNAME).is_none());
    assert_eq!(c.requests.pods, 1);
}

#[test]
fn pods_pack_largest_first_and_never_exceed_allocatable() {
    let pods: Vec<_> = (0..10).map(|i| pod(&format!("p{i}"), 3000, GI)).collect();
    let plan = solve_default(&snapshot(pods, vec![pool("default")]));
    assert!(plan.unschedulable.is_empty());
    assert_eq!(plan.placed_pods(), 10);
    // 5 pods of 3 cpu fit a 16-cpu xlarge; the greedy packer opens 2 claims.
    assert_eq!(plan.new_node_claims.len(), 2);
    for c in &plan.new_node_claims {
        assert!(c.requests.cpu_millis <= 16_000);
        assert_eq!(&*c.instance_type_options[0].name, "xlarge");
    }
}

#[test]
fn node_selector_narrows_zone() {
    let mut p = pod("p", 1000, GI);
    p.node_selector.insert(ZONE.into(), "zone-b".into());
    let plan = solve_default(&snapshot(vec![p], vec![pool("default")]));
    assert_eq!(pinned(&plan, 0, ZONE).as_deref(), Some("zone-b"));
    assert!(
        plan.new_node_claims[0]
            .instance_type_options
            .iter()
            .all(|o| &*o.zone == "zone-b")
    );
}

#[test]
fn required_affinity_falls_back_to_next_or_term() {
    let mut p = pod("p", 1000, GI);
    p.affinity.node_affinity.required = vec![
        affinity_terms(&[nsr(ZONE, Operator::In, &["zone-x"])]),
        affinity_terms(&[nsr(ZONE, Operator::In, &["zone-c"])]),
    ];
    let plan = solve_default(&snapshot(vec![p], vec![pool("default")]));
    assert!(plan.unschedulable.is_empty(), "{:?}", plan.unschedulable);
    assert_eq!(pinned(&plan, 0, ZONE).as_deref(), Some("zone-c"));
}

#[test]
fn volume_requirements_are_anded() {
    let mut p = pod("p", 1000, GI);
    p.volume_requirements = vec![nsr(ZONE, Operator::In, &["zone-a"])];
    p.node_selector
        .insert(CAPACITY_TYPE.into(), "on-demand".into());
    let plan = solve_default(&snapshot(vec![p], vec![pool("default")]));
    assert_eq!(pinned(&plan, 0, ZONE).as_deref(), Some("zone-a"));
    assert_eq!(
        &*plan.new_node_claims[0].instance_type_options[0].capacity_type,
        "on-demand"
    );
}

#[test]
fn incompatible_requirement_is_explained() {
    let mut p = pod("p", 1000, GI);
    p.node_selector.insert("team".into(), "blue".into());
    let plan = solve_default(&snapshot(vec![p], vec![pool("default")]));
    let why = reason(&plan, "p").unwrap();
    assert!(why.contains("NodePool \"default\""), "{why}");
    assert!(why.contains("incompatible requirements"), "{why}");
    assert!(why.contains("team"), "{why}");
}

#[test]
fn taints_need_tolerations() {
    let mut tainted = pool("gpu-pool");
    tainted.taints = vec![taint("dedicated", "gpu", TaintEffect::NoSchedule)];
    tainted.startup_taints = vec![taint("startup", "", TaintEffect::NoSchedule)];
    let mut tolerant = pod("tolerant", 1000, GI);
    tolerant.tolerations = vec![toleration("dedicated", "gpu")];
    let plan = solve_default(&snapshot(
        vec![pod("plain", 1000, GI), tolerant],
        vec![tainted],
    ));
    assert_eq!(plan.placed_pods(), 1, "startup taints are ignored");
    let why = reason(&plan, "plain").unwrap();
    assert!(
        why.contains("did not tolerate taint dedicated=gpu:NoSchedule"),
        "{why}"
    );
}

#[test]
fn prefer_no_schedule_taint_is_relaxed() {
    let mut p = pool("default");
    p.taints = vec![taint("soft", "x", TaintEffect::PreferNoSchedule)];
    let plan = solve_default(&snapshot(vec![pod("p", 1000, GI)], vec![p]));
    assert!(plan.unschedulable.is_empty(), "{:?}", plan.unschedulable);
}

#[test]
fn pools_are_tried_by_weight_then_name() {
    let mut heavy = pool("z-heavy");
    heavy.weight = 10;
    let light = pool("a-light");
    let plan = solve_default(&snapshot(
        vec![pod("p", 1000, GI)],
        vec![light.clone(), heavy.clone()],
    ));
    assert_eq!(plan.new_node_claims[0].node_pool, "z-heavy");
    // The heavier pool cannot take it: fall through to the lighter one.
    heavy.requirements = reqs(&[nsr(ZONE, Operator::In, &["zone-a"])]);
    let mut p = pod("p", 1000, GI);
    p.node_selector.insert(ZONE.into(), "zone-b".into());
    let plan = solve_default(&snapshot(vec![p], vec![light, heavy]));
    assert_eq!(plan.new_node_claims[0].node_pool, "a-light");
    // Same weight: by name.
    let plan = solve_default(&snapshot(
        vec![pod("p", 1000, GI)],
        vec![pool("b"), pool("a")],
    ));
    assert_eq!(plan.new_node_claims[0].node_pool, "a");
}

#[test]
fn pool_limits_reduce_with_each_claim() {
    let mut p = pool("default");
    p.limits.insert(
        "cpu".into(),
        Quantity::from_value(10, QuantityFormat::DecimalSI),
    );
    // Two 7-cpu pods: the first claim can be at most xlarge? 16 > 10 so large (8); the second
    // would need another 8 cpu: limit reached.
    let plan = solve_default(&snapshot(
        vec![pod("a", 7000, GI), pod("b", 7000, GI)],
        vec![p],
    ));
    assert_eq!(plan.new_node_claims.len(), 1);
    assert!(
        plan.new_node_claims[0]
            .instance_type_options
            .iter()
            .all(|o| &*o.name != "xlarge")
    );
    let why = reason(&plan, "b").unwrap();
    assert!(why.contains("limit of cpu reached"), "{why}");
}

#[test]
fn pool_usage_counts_against_limits_and_nodes_limit() {
    let mut p = pool("default");
    p.limits.insert(
        "cpu".into(),
        Quantity::from_value(10, QuantityFormat::DecimalSI),
    );
    p.usage = res(9000, 0);
    let plan = solve_default(&snapshot(vec![pod("a", 500, GI)], vec![p]));
    assert!(reason(&plan, "a").unwrap().contains("limit of cpu reached"));
}

#[test]
fn oversized_pod_names_the_resource() {
    let plan = solve_default(&snapshot(
        vec![pod("big", 64_000, GI)],
        vec![pool("default")],
    ));
    let why = reason(&plan, "big").unwrap();
    assert!(why.contains("no instance type has enough cpu"), "{why}");
    assert!(why.contains("needs 64 cpu"), "{why}");
}

#[test]
fn extended_resources_select_instance_types() {
    let mut p = pod("trainer", 1000, GI);
    p.requests.extended = vec![("nvidia.com/gpu".into(), 1)];
    let plan = solve_default(&snapshot(vec![p], vec![pool("default")]));
    let c = &plan.new_node_claims[0];
    assert_eq!(c.instance_type_options.len(), 1);
    assert_eq!(&*c.instance_type_options[0].name, "gpu");
}

#[test]
fn existing_nodes_are_used_first_and_deleting_ones_skipped() {
    let mut s = snapshot(vec![pod("p", 1000, GI)], vec![pool("default")]);
    let mut deleting = node("a-deleting", "zone-a", 8, 16);
    deleting.state = NodeState::Deleting;
    let full = node("b-full", "zone-a", 2, 4);
    s.nodes = vec![deleting, full, node("c-free", "zone-b", 8, 16)];
    s.bound_pods = vec![bound(pod("hog", 1500, GI), "b-full")];
    let plan = solve_default(&s);
    assert!(plan.new_node_claims.is_empty());
    assert_eq!(plan.existing.len(), 1);
    assert_eq!(plan.existing[0].node, "c-free");
}

#[test]
fn ready_nodes_before_in_flight() {
    let mut s = snapshot(vec![pod("p", 1000, GI)], vec![pool("default")]);
    let mut inflight = node("a-inflight", "zone-a", 8, 16);
    inflight.state = NodeState::InFlight;
    s.nodes = vec![inflight, node("z-ready", "zone-a", 8, 16)];
    let plan = solve_default(&s);
    assert_eq!(plan.existing[0].node, "z-ready");
}

#[test]
fn node_taints_keep_pods_off_existing_nodes() {
    let mut s = snapshot(vec![pod("p", 1000, GI)], vec![pool("default")]);
    let mut n = node("tainted", "zone-a", 8, 16);
    n.taints = vec![taint("maint", "", TaintEffect::NoSchedule)];
    s.nodes = vec![n];
    let plan = solve_default(&s);
    assert!(plan.existing.is_empty());
    assert_eq!(plan.new_node_claims.len(), 1);
}

#[test]
fn zone_spread_uses_each_zone() {
    let pods: Vec<_> = (0..3)
        .map(|i| {
            let mut p = labeled(pod(&format!("p{i}"), 1000, GI), &[("app", "web")]);
            p.topology_spread_constraints = vec![spread(
                ZONE,
                1,
                &[("app", "web")],
                WhenUnsatisfiable::DoNotSchedule,
            )];
            p
        })
        .collect();
    let plan = solve_default(&snapshot(pods, vec![pool("default")]));
    assert!(plan.unschedulable.is_empty());
    let mut zones: Vec<String> = (0..plan.new_node_claims.len())
        .filter_map(|c| pinned(&plan, c, ZONE))
        .collect();
    zones.sort();
    assert_eq!(zones, vec!["zone-a", "zone-b", "zone-c"]);
}

/// Full nodes in zone-a and zone-b, each with a running `app=web` pod, and a pending
/// `app=web` pod (`name`) spread over zones with max skew 1: only zone-c is left to it.
fn web_spread_in_two_full_zones(name: &str) -> (Snapshot, karpenter_scheduling::model::Pod) {
    let mut s = snapshot(vec![], vec![pool("default")]);
    let mut a = node("na", "zone-a", 2, 4);
    a.taints = vec![taint("full", "", TaintEffect::NoSchedule)];
    let mut b = node("nb", "zone-b", 2, 4);
    b.taints = a.taints.clone();
    s.nodes = vec![a, b];
    s.bound_pods = vec![
        bound(labeled(pod("r1", 100, MI), &[("app", "web")]), "na"),
        bound(labeled(pod("r2", 100, MI), &[("app", "web")]), "nb"),
    ];
    let mut p = labeled(pod(name, 1000, GI), &[("app", "web")]);
    p.topology_spread_constraints = vec![spread(
        ZONE,
        1,
        &[("app", "web")],
        WhenUnsatisfiable::DoNotSchedule,
    )];
    (s, p)
}

#[test]
fn zone_spread_counts_running_pods() {
    let (mut s, p) = web_spread_in_two_full_zones("new");
    s.pending_pods = vec![p];
    let plan = solve_default(&s);
    assert_eq!(pinned(&plan, 0, ZONE).as_deref(), Some("zone-c"));
}

#[test]
fn unsatisfiable_spread_is_explained() {
    let mut s = snapshot(vec![], vec![pool("default")]);
    let mut p = labeled(pod("new", 1000, GI), &[("app", "web")]);
    p.topology_spread_constraints = vec![spread(
        ZONE,
        1,
        &[("app", "web")],
        WhenUnsatisfiable::DoNotSchedule,
    )];
    // Only zone-a allowed by the pod, but zone-b and zone-c are emptier with skew 1 after 2 pods.
    p.node_selector.insert(ZONE.into(), "zone-a".into());
    let mut n = node("na", "zone-a", 2, 4);
    n.taints = vec![taint("full", "", TaintEffect::NoSchedule)];
    s.nodes = vec![n];
    s.bound_pods = vec![bound(labeled(pod("r1", 100, MI), &[("app", "web")]), "na")];
    let mut spread_all = p.clone();
    spread_all.node_selector.clear();
    s.pending_pods = vec![p];
    let plan = solve_default(&s);
    // The pod's own domains are only zone-a, so the minimum is taken over zone-a: allowed.
    assert!(plan.unschedulable.is_empty(), "{:?}", plan.unschedulable);
}

#[test]
fn hostname_spread_puts_each_pod_on_its_own_node() {
    let pods: Vec<_> = (0..4)
        .map(|i| {
            let mut p = labeled(pod(&format!("p{i}"), 100, MI), &[("app", "web")]);
            p.topology_spread_constraints = vec![spread(
                HOSTNAME,
                1,
                &[("app", "web")],
                WhenUnsatisfiable::DoNotSchedule,
            )];
            p
        })
        .collect();
    let plan = solve_default(&snapshot(pods, vec![pool("default")]));
    assert!(plan.unschedulable.is_empty());
    assert_eq!(plan.new_node_claims.len(), 4);
}

#[test]
fn capacity_type_spread() {
    let pods: Vec<_> = (0..2)
        .map(|i| {
            let mut p = labeled(pod(&format!("p{i}"), 100, MI), &[("app", "web")]);
            p.topology_spread_constraints = vec![spread(
                CAPACITY_TYPE,
                1,
                &[("app", "web")],
                WhenUnsatisfiable::DoNotSchedule,
            )];
            p
        })
        .collect();
    let plan = solve_default(&snapshot(pods, vec![pool("default")]));
    let mut cts: Vec<String> = (0..plan.new_node_claims.len())
        .filter_map(|c| pinned(&plan, c, CAPACITY_TYPE))
        .collect();
    cts.sort();
    assert_eq!(cts, vec!["on-demand", "spot"]);
}

#[test]
fn hostname_anti_affinity_separates_pods() {
    let pods: Vec<_> = (0..3)
        .map(|i| {
            let mut p = labeled(pod(&format!("p{i}"), 100, MI), &[("app", "db")]);
            p.affinity.pod_anti_affinity.required = vec![term(HOSTNAME, &[("app", "db")])];
            p
        })
        .collect();
    let plan = solve_default(&snapshot(pods, vec![pool("default")]));
    assert!(plan.unschedulable.is_empty());
    assert_eq!(plan.new_node_claims.len(), 3);
}

#[test]
fn zone_anti_affinity_with_pinned_zones() {
    let pods: Vec<_> = ZONES
        .iter()
        .enumerate()
        .map(|(i, z)| {
            let mut p = labeled(pod(&format!("p{i}"), 100, MI), &[("app", "db")]);
            p.node_selector.insert(ZONE.into(), z.to_string());
            p.affinity.pod_anti_affinity.required = vec![term(ZONE, &[("app", "db")])];
            p
        })
        .collect();
    let mut extra = labeled(pod("p9", 100, MI), &[("app", "db")]);
    extra.node_selector.insert(ZONE.into(), "zone-a".into());
    extra.affinity.pod_anti_affinity.required = vec![term(ZONE, &[("app", "db")])];
    let mut all = pods;
    all.push(extra);
    let plan = solve_default(&snapshot(all, vec![pool("default")]));
    assert_eq!(plan.placed_pods(), 3);
    assert_eq!(plan.unschedulable.len(), 1);
    assert!(
        plan.unschedulable[0].reason.contains("pod anti-affinity"),
        "{}",
        plan.unschedulable[0].reason
    );
}

/// A pending `web` pod, a zone-a node `na`, and a running pod bound to `guard_node` whose
/// anti-affinity keeps `web` out of its zone.
fn web_and_guard(guard_node: &str) -> Snapshot {
    let mut s = snapshot(
        vec![labeled(pod("web", 1000, GI), &[("app", "web")])],
        vec![pool("default")],
    );
    s.nodes = vec![node("na", "zone-a", 8, 16)];
    let mut guard = pod("guard", 100, MI);
    guard.affinity.pod_anti_affinity.required = vec![term(ZONE, &[("app", "web")])];
    s.bound_pods = vec![bound(guard, guard_node)];
    s
}

#[test]
fn running_pods_anti_affinity_repels_incoming_pods() {
    let plan = solve_default(&web_and_guard("na"));
    assert!(
        plan.existing.is_empty(),
        "the running pod's anti-affinity keeps web off zone-a"
    );
    let zone = plan.new_node_claims[0].requirements.get(ZONE).unwrap();
    assert!(!zone.has("zone-a"));
}

#[test]
fn pods_bound_to_a_node_the_snapshot_lacks_are_ignored() {
    // A disruption simulation takes candidate nodes out and leaves their pods bound: the
    // guard's anti-affinity goes with its node.
    let mut s = web_and_guard("gone");
    let plan = solve_default(&s);
    assert_eq!(plan.existing.len(), 1, "web lands on zone-a: {plan:?}");
    assert!(plan.new_node_claims.is_empty());
    s.bound_pods.clear();
    assert_eq!(plan, solve_default(&s));
}

#[test]
fn pod_affinity_co_locates_pending_pods() {
    let a = labeled(pod("a", 1000, GI), &[("app", "a")]);
    let mut b = pod("b", 500, GI);
    b.affinity.pod_affinity.required = vec![term(HOSTNAME, &[("app", "a")])];
    let plan = solve_default(&snapshot(vec![a, b], vec![pool("default")]));
    assert!(plan.unschedulable.is_empty(), "{:?}", plan.unschedulable);
    assert_eq!(plan.new_node_claims.len(), 1);
}

#[test]
fn pod_affinity_follows_running_pod_zone() {
    let mut s = snapshot(vec![], vec![pool("default")]);
    let mut n = node("nb", "zone-b", 2, 4);
    n.taints = vec![taint("full", "", TaintEffect::NoSchedule)];
    s.nodes = vec![n];
    s.bound_pods = vec![bound(labeled(pod("db", 100, MI), &[("app", "db")]), "nb")];
    let mut p = pod("client", 1000, GI);
    p.affinity.pod_affinity.required = vec![term(ZONE, &[("app", "db")])];
    s.pending_pods = vec![p];
    let plan = solve_default(&s);
    assert_eq!(pinned(&plan, 0, ZONE).as_deref(), Some("zone-b"));
}

#[test]
fn unsatisfiable_pod_affinity_is_explained() {
    let mut p = pod("client", 1000, GI);
    p.affinity.pod_affinity.required = vec![term(ZONE, &[("app", "missing")])];
    let plan = solve_default(&snapshot(vec![p], vec![pool("default")]));
    let why = reason(&plan, "client").unwrap();
    assert!(
        why.contains("pod affinity on topology.kubernetes.io/zone cannot be satisfied"),
        "{why}"
    );
}

#[test]
fn host_ports_conflict() {
    let port = HostPort {
        port: 8080,
        protocol: "TCP".into(),
        host_ip: String::new(),
    };
    let mut a = pod("a", 100, MI);
    a.host_ports = vec![port.clone()];
    let mut b = pod("b", 100, MI);
    b.host_ports = vec![port.clone()];
    let plan = solve_default(&snapshot(vec![a.clone(), b], vec![pool("default")]));
    assert_eq!(plan.new_node_claims.len(), 2);
    // An existing node with the port bound is skipped.
    let mut s = snapshot(vec![a], vec![pool("default")]);
    s.nodes = vec![node("n", "zone-a", 8, 16)];
    let mut holder = pod("holder", 100, MI);
    holder.host_ports = vec![port];
    s.bound_pods = vec![bound(holder, "n")];
    let plan = solve_default(&s);
    assert!(plan.existing.is_empty());
    assert_eq!(plan.new_node_claims.len(), 1);
}

#[test]
fn daemon_port_conflict_is_explained() {
    let port = HostPort {
        port: 9100,
        protocol: "TCP".into(),
        host_ip: String::new(),
    };
    let mut ds = daemon("exporter", 100);
    ds.pod.host_ports = vec![port.clone()];
    let mut p = pod("p", 100, MI);
    p.host_ports = vec![port];
    let mut s = snapshot(vec![p], vec![pool("default")]);
    s.daemon_sets = vec![ds];
    let plan = solve_default(&s);
    let why = reason(&plan, "p").unwrap();
    assert!(why.contains("host port 9100/TCP"), "{why}");
}

#[test]
fn daemon_overhead_only_where_daemons_run() {
    let mut tainted = pool("tainted");
    tainted.taints = vec![taint("dedicated", "x", TaintEffect::NoSchedule)];
    let mut p = pod("p", 1000, GI);
    p.tolerations = vec![toleration("dedicated", "x")];
    let mut s = snapshot(vec![p.clone()], vec![tainted]);
    s.daemon_sets = vec![daemon("agent", 1500)];
    let plan = solve_default(&s);
    assert!(
        plan.new_node_claims[0].daemon_overhead.is_zero(),
        "daemon does not tolerate the taint"
    );
    let mut s = snapshot(vec![p], vec![pool("default")]);
    s.daemon_sets = vec![daemon("agent", 1500)];
    let plan = solve_default(&s);
    let c = &plan.new_node_claims[0];
    assert_eq!(c.daemon_overhead.cpu_millis, 1500);
    assert_eq!(c.requests.cpu_millis, 2500);
    // 1 + 1.5 cpu does not fit a 2-cpu small.
    assert_eq!(&*c.instance_type_options[0].name, "medium");
}

#[test]
fn daemon_with_incompatible_selector_adds_nothing() {
    let mut ds = daemon("arm-agent", 1500);
    ds.pod
        .node_selector
        .insert("kubernetes.io/arch".into(), "arm64".into());
    let mut s = snapshot(vec![pod("p", 1000, GI)], vec![pool("default")]);
    s.daemon_sets = vec![ds];
    let plan = solve_default(&s);
    assert!(plan.new_node_claims[0].daemon_overhead.is_zero());
}

#[test]
fn preferred_node_affinity_is_respected_then_relaxed() {
    let mut p = pod("p", 1000, GI);
    p.affinity.node_affinity.preferred = vec![PreferredSchedulingTerm {
        weight: 10,
        preference: affinity_terms(&[nsr(ZONE, Operator::In, &["zone-c"])]),
    }];
    let plan = solve_default(&snapshot(vec![p.clone()], vec![pool("default")]));
    assert_eq!(pinned(&plan, 0, ZONE).as_deref(), Some("zone-c"));
    // Ignored: no zone narrowing.
    let opts = SolveOptions {
        preference_policy: PreferencePolicy::Ignore,
        ..SolveOptions::default()
    };
    let plan = solve(&snapshot(vec![p.clone()], vec![pool("default")]), &opts);
    assert!(pinned(&plan, 0, ZONE).is_none());
    // Impossible preference: relaxed.
    p.affinity.node_affinity.preferred[0].preference =
        affinity_terms(&[nsr(ZONE, Operator::In, &["zone-x"])]);
    let plan = solve_default(&snapshot(vec![p], vec![pool("default")]));
    assert!(plan.unschedulable.is_empty());
}

#[test]
fn schedule_anyway_spread_is_relaxed() {
    let mut p = labeled(pod("p", 1000, GI), &[("app", "web")]);
    p.node_selector.insert(ZONE.into(), "zone-a".into());
    p.topology_spread_constraints = vec![spread(
        ZONE,
        1,
        &[("app", "web")],
        WhenUnsatisfiable::ScheduleAnyway,
    )];
    let mut s = snapshot(vec![p], vec![pool("default")]);
    let mut n = node("na", "zone-a", 2, 4);
    n.taints = vec![taint("full", "", TaintEffect::NoSchedule)];
    s.nodes = vec![n];
    s.bound_pods = (0..3)
        .map(|i| {
            bound(
                labeled(pod(&format!("r{i}"), 1, 1), &[("app", "web")]),
                "na",
            )
        })
        .collect();
    let plan = solve_default(&s);
    assert!(plan.unschedulable.is_empty(), "{:?}", plan.unschedulable);
}

#[test]
fn preferred_anti_affinity_is_relaxed() {
    let pods: Vec<_> = (0..2)
        .map(|i| {
            let mut p = labeled(pod(&format!("p{i}"), 100, MI), &[("app", "x")]);
            p.node_selector.insert(ZONE.into(), "zone-a".into());
            p.affinity.pod_anti_affinity.preferred = vec![WeightedPodAffinityTerm {
                weight: 1,
                term: term(ZONE, &[("app", "x")]),
            }];
            p
        })
        .collect();
    let plan = solve_default(&snapshot(pods, vec![pool("default")]));
    assert!(plan.unschedulable.is_empty(), "{:?}", plan.unschedulable);
}

#[test]
fn min_values_strict_and_best_effort() {
    let mut p = pool("default");
    let mut r = nsr(INSTANCE_TYPE, Operator::Exists, &[]);
    r.min_values = Some(3);
    p.requirements = reqs(&[r]);
    // 7 cpu fits large, xlarge, gpu: 3 types — fine.
    let plan = solve_default(&snapshot(vec![pod("ok", 7000, GI)], vec![p.clone()]));
    assert!(plan.unschedulable.is_empty(), "{:?}", plan.unschedulable);
    // 12 cpu fits only xlarge.
    let plan = solve_default(&snapshot(vec![pod("big", 12_000, GI)], vec![p.clone()]));
    let why = reason(&plan, "big").unwrap();
    assert!(why.contains("minValues"), "{why}");
    let opts = SolveOptions {
        min_values_policy: MinValuesPolicy::BestEffort,
        ..SolveOptions::default()
    };
    let plan = solve(&snapshot(vec![pod("big", 12_000, GI)], vec![p]), &opts);
    assert!(plan.unschedulable.is_empty());
    assert_eq!(
        plan.new_node_claims[0]
            .requirements
            .get(INSTANCE_TYPE)
            .unwrap()
            .min_values(),
        Some(1)
    );
}

#[test]
fn unschedulable_reason_names_every_pool() {
    let mut a = pool("a");
    a.taints = vec![taint("t", "v", TaintEffect::NoSchedule)];
    let mut b = pool("b");
    b.requirements = reqs(&[nsr(ZONE, Operator::In, &["zone-a"])]);
    let mut p = pod("p", 1000, GI);
    p.node_selector.insert(ZONE.into(), "zone-b".into());
    let plan = solve_default(&snapshot(vec![p], vec![a, b]));
    let why = reason(&plan, "p").unwrap();
    assert!(
        why.contains("NodePool \"a\": did not tolerate taint t=v:NoSchedule"),
        "{why}"
    );
    assert!(
        why.contains("NodePool \"b\": incompatible requirements"),
        "{why}"
    );
}

#[test]
fn pending_daemon_pods_are_left_alone() {
    let mut d = daemon("agent", 100).pod;
    d.name = "agent-xyz".into();
    let plan = solve_default(&snapshot(vec![d], vec![pool("default")]));
    assert_eq!(plan.placed_pods(), 0);
    assert!(plan.unschedulable.is_empty());
}

#[test]
fn solving_twice_gives_the_same_plan() {
    let mut pods = Vec::new();
    for i in 0..40 {
        let mut p = labeled(
            pod(&format!("p{i}"), 250 * (i % 5 + 1), GI),
            &[("app", if i % 2 == 0 { "a" } else { "b" })],
        );
        if i % 3 == 0 {
            p.topology_spread_constraints = vec![spread(
                ZONE,
                1,
                &[("app", "a")],
                WhenUnsatisfiable::DoNotSchedule,
            )];
        }
        pods.push(p);
    }
    let s = snapshot(pods, vec![pool("default"), pool("other")]);
    assert_eq!(solve_default(&s), solve_default(&s));
}

#[test]
fn a_solve_cache_never_answers_with_what_a_node_or_pool_no_longer_has() {
    use karpenter_scheduling::solver::{SolveCache, solve_cached};
    let mut p = pod("p", 1000, GI);
    p.node_selector.insert(ZONE.into(), "zone-a".into());
    let mut s = snapshot(vec![p], vec![pool("default")]);
    s.nodes.push(node("n1", "zone-a", 4, 16));
    let mut cache = SolveCache::new();
    let plan = solve_cached(&s, &SolveOptions::default(), &mut cache);
    assert_eq!(plan, solve_default(&s));
    assert_eq!(plan.existing.len(), 1, "the pod fits the zone-a node");
    assert!(plan.new_node_claims.is_empty());
    // The same node and pool again: found, not rebuilt.
    let built = cache.builds();
    solve_cached(&s, &SolveOptions::default(), &mut cache);
    assert_eq!(cache.builds(), built);

    // Relabelled into another zone: a stale entry would still place the pod there.
    s.nodes[0].labels.insert(ZONE.into(), "zone-b".into());
    let plan = solve_cached(&s, &SolveOptions::default(), &mut cache);
    assert_eq!(cache.builds(), built + 1);
    assert_eq!(plan, solve_default(&s));
    assert!(plan.existing.is_empty());
    assert_eq!(plan.new_node_claims.len(), 1);
    assert_eq!(pinned(&plan, 0, ZONE).as_deref(), Some("zone-a"));

    // The pool no longer offers zone-a: a stale template would still launch there.
    s.node_pools[0]
        .requirements
        .add(Requirement::new(ZONE, Operator::In, ["zone-b"]).unwrap());
    let plan = solve_cached(&s, &SolveOptions::default(), &mut cache);
    assert_eq!(plan, solve_default(&s));
    assert!(plan.new_node_claims.is_empty());
    assert_eq!(plan.unschedulable.len(), 1);

    // Nor do its instance types, rebuilt with zone-a unavailable and the pool open again.
    s.node_pools[0].requirements = Default::default();
    for it in &mut s.node_pools[0].instance_types {
        for o in &mut std::sync::Arc::make_mut(it).offerings {
            o.available &= o.zone != "zone-a";
        }
    }
    let plan = solve_cached(&s, &SolveOptions::default(), &mut cache);
    assert_eq!(plan, solve_default(&s));
    assert!(plan.new_node_claims.is_empty());
    assert_eq!(plan.unschedulable.len(), 1);
}

#[test]
fn pending_pods_are_counted_by_effective_zone_before_placement() {
    // The spread leaves only the empty zone.
    let (mut s, spread_pod) = web_spread_in_two_full_zones("spread");
    let mut pinned_pod = pod("pinned", 1000, GI);
    pinned_pod
        .node_selector
        .insert(ZONE.into(), "zone-b".into());
    let mut clash = pod("clash", 1000, GI);
    clash.node_selector.insert(ZONE.into(), "zone-a".into());
    clash.volume_requirements = vec![nsr(ZONE, Operator::In, &["zone-b"])];
    let free = pod("free", 1000, GI);
    let mut started = pod("started", 1000, GI);
    started.started_at = Some(0);
    s.pending_pods = vec![spread_pod, pinned_pod, clash, free, started];
    let plan = solve_default(&s);
    assert_eq!(
        plan.pending_by_effective_zone,
        [
            ("flexible".to_owned(), 1),
            ("none".to_owned(), 1),
            ("zone-b".to_owned(), 1),
            ("zone-c".to_owned(), 1),
        ]
        .into(),
        "a started pod is not pending"
    );
}

#[test]
fn a_plan_with_no_new_nodes_costs_positive_zero() {
    // An empty f64 sum is -0.0, which `karpenter plan` printed as "-0.0000 $/hour".
    let greedy = SolveOptions {
        optimizer: karpenter_scheduling::solver::OptimizerOptions {
            enabled: false,
            ..Default::default()
        },
        ..SolveOptions::default()
    };
    for options in [SolveOptions::default(), greedy] {
        let plan = solve(&Snapshot::default(), &options);
        assert!(plan.new_node_claims.is_empty());
        assert!(plan.total_price.is_sign_positive(), "{}", plan.total_price);
        assert_eq!(format!("{:.4}", plan.total_price), "0.0000");
    }
}
