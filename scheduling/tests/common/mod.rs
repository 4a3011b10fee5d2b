//! Shared builders for the solver's scenario tests and proptests: a small catalogue
//! (zones a/b/c, spot and on-demand), pools, pods, nodes.
#![allow(dead_code)]

use karpenter_scheduling::labels::{ARCH, CAPACITY_TYPE, HOSTNAME, INSTANCE_TYPE, ZONE};
use karpenter_scheduling::model::{
    DaemonSet, InstanceType, Node, NodePool, NodeSelectorTerm, NodeState, Offering, OwnerRef, Pod,
    PodAffinityTerm, TopologySpreadConstraint, WhenUnsatisfiable,
};
use karpenter_scheduling::requirements::{NodeSelectorRequirement, Operator, Requirements};
use karpenter_scheduling::resources::Resources;
use karpenter_scheduling::selector::LabelSelector;
use karpenter_scheduling::taints::{Taint, TaintEffect, Toleration, TolerationOperator};
use karpenter_scheduling::{Plan, Snapshot, SolveOptions, solve};
use std::collections::BTreeMap;
use std::sync::Arc;

pub const ZONES: [&str; 3] = ["zone-a", "zone-b", "zone-c"];
pub const GI: i64 = 1 << 30;
pub const MI: i64 = 1 << 20;

pub fn nsr(key: &str, op: Operator, values: &[&str]) -> NodeSelectorRequirement {
    NodeSelectorRequirement {
        key: key.into(),
        operator: op,
        values: values.iter().map(|v| v.to_string()).collect(),
        min_values: None,
    }
}

pub fn reqs(items: &[NodeSelectorRequirement]) -> Requirements {
    Requirements::from_node_selector(items).expect("valid requirements")
}

pub fn res(cpu_millis: i64, memory: i64) -> Resources {
    Resources {
        cpu_millis,
        memory,
        ..Resources::default()
    }
}

/// An instance type in every zone with an on-demand and (when `spot`) a spot offering at
/// 40% of on-demand.
pub fn instance_type(
    name: &str,
    cpu: i64,
    mem_gi: i64,
    od: f64,
    spot: bool,
    extra: &[(&str, i64)],
) -> Arc<InstanceType> {
    let cts: Vec<&str> = if spot {
        vec!["spot", "on-demand"]
    } else {
        vec!["on-demand"]
    };
    let mut offerings = Vec::new();
    for z in ZONES {
        for ct in &cts {
            let price = if *ct == "spot" { od * 0.4 } else { od };
            offerings.push(Offering {
                zone: z.into(),
                capacity_type: ct.to_string(),
                price,
                available: true,
            });
        }
    }
    let mut capacity = Resources {
        cpu_millis: cpu * 1000,
        memory: mem_gi * GI,
        pods: 110,
        ..Resources::default()
    };
    capacity.extended = extra.iter().map(|(n, v)| (n.to_string(), *v)).collect();
    Arc::new(InstanceType {
        name: name.into(),
        requirements: reqs(&[
            nsr(INSTANCE_TYPE, Operator::In, &[name]),
            nsr(ZONE, Operator::In, &ZONES),
            nsr(CAPACITY_TYPE, Operator::In, &cts),
            nsr(ARCH, Operator::In, &["amd64"]),
        ]),
        capacity,
        overhead: Default::default(),
        offerings,
    })
}

pub fn catalogue() -> Vec<Arc<InstanceType>> {
    vec![
        instance_type("small", 2, 4, 0.10, true, &[]),
        instance_type("medium", 4, 8, 0.20, true, &[]),
        instance_type("large", 8, 16, 0.40, true, &[]),
        instance_type("xlarge", 16, 32, 0.80, true, &[]),
        instance_type("gpu", 8, 32, 3.00, false, &[("nvidia.com/gpu", 1)]),
    ]
}

pub fn pool(name: &str) -> NodePool {
    NodePool {
        name: name.into(),
        instance_types: catalogue(),
        ..NodePool::default()
    }
}

pub fn pod(name: &str, cpu_millis: i64, mem: i64) -> Pod {
    Pod {
        namespace: "default".into(),
        name: name.into(),
        uid: name.into(),
        requests: res(cpu_millis, mem),
        ..Pod::default()
    }
}

pub fn labeled(mut p: Pod, labels: &[(&str, &str)]) -> Pod {
    p.labels
        .extend(labels.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    p
}

pub fn selector(labels: &[(&str, &str)]) -> Option<LabelSelector> {
    Some(LabelSelector {
        match_labels: labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        match_expressions: vec![],
    })
}

pub fn spread(
    key: &str,
    skew: i32,
    labels: &[(&str, &str)],
    when: WhenUnsatisfiable,
) -> TopologySpreadConstraint {
    TopologySpreadConstraint {
        max_skew: skew,
        topology_key: key.into(),
        when_unsatisfiable: when,
        label_selector: selector(labels),
        min_domains: None,
        node_affinity_policy: karpenter_scheduling::model::InclusionPolicy::Honor,
        node_taints_policy: karpenter_scheduling::model::InclusionPolicy::Ignore,
        match_label_keys: vec![],
    }
}

pub fn term(key: &str, labels: &[(&str, &str)]) -> PodAffinityTerm {
    PodAffinityTerm {
        label_selector: selector(labels),
        topology_key: key.into(),
        ..PodAffinityTerm::default()
    }
}

pub fn affinity_terms(items: &[NodeSelectorRequirement]) -> NodeSelectorTerm {
    NodeSelectorTerm {
        match_expressions: items.to_vec(),
        match_fields: vec![],
    }
}

pub fn taint(key: &str, value: &str, effect: TaintEffect) -> Taint {
    Taint::new(key, value, effect)
}

pub fn toleration(key: &str, value: &str) -> Toleration {
    Toleration {
        key: key.into(),
        operator: TolerationOperator::Equal,
        value: value.into(),
        ..Toleration::default()
    }
}

pub fn node(name: &str, zone: &str, cpu: i64, mem_gi: i64) -> Node {
    let labels: BTreeMap<String, String> = [
        (HOSTNAME, name),
        (ZONE, zone),
        (INSTANCE_TYPE, "large"),
        (CAPACITY_TYPE, "on-demand"),
        (ARCH, "amd64"),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    let alloc = Resources {
        cpu_millis: cpu * 1000,
        memory: mem_gi * GI,
        pods: 110,
        ..Resources::default()
    };
    Node {
        name: name.into(),
        node_pool: Some("default".into()),
        labels,
        allocatable: alloc.clone(),
        capacity: alloc,
        state: NodeState::Ready,
        ..Node::default()
    }
}

pub fn bound(mut p: Pod, node: &str) -> Pod {
    p.node_name = Some(node.into());
    p
}

pub fn daemon(name: &str, cpu_millis: i64) -> DaemonSet {
    let mut p = pod(name, cpu_millis, 0);
    p.owner = Some(OwnerRef {
        kind: "DaemonSet".into(),
        name: name.into(),
        uid: String::new(),
    });
    DaemonSet {
        namespace: "kube-system".into(),
        name: name.into(),
        pod: p,
    }
}

pub fn snapshot(pending: Vec<Pod>, pools: Vec<NodePool>) -> Snapshot {
    Snapshot {
        pending_pods: pending,
        node_pools: pools,
        ..Snapshot::default()
    }
}

pub fn run(s: &Snapshot) -> Plan {
    solve(s, &SolveOptions::default())
}

/// The claim holding `pod`, by index.
pub fn claim_of(plan: &Plan, pod: &str) -> Option<usize> {
    plan.new_node_claims
        .iter()
        .position(|c| c.pods.iter().any(|k| k.name == pod))
}

/// The single value a claim's requirement pins `key` to.
pub fn pinned(plan: &Plan, claim: usize, key: &str) -> Option<String> {
    let r = plan.new_node_claims[claim].requirements.get(key)?;
    let v: Vec<&str> = r.values().collect();
    (r.operator() == Operator::In && v.len() == 1).then(|| v[0].to_string())
}

pub fn reason<'a>(plan: &'a Plan, pod: &str) -> Option<&'a str> {
    plan.unschedulable
        .iter()
        .find(|u| u.pod.name == pod)
        .map(|u| u.reason.as_str())
}

pub fn _unused(_: WhenUnsatisfiable) {}

/// The pod the property tests generate: pod `i` labelled `app{app}` (or `spread`) with the
/// given requests; a `spread` pod carries a zonal DoNotSchedule spread of maxSkew 1 over the
/// `spread` pods, any other one an optional zone selector (`ZONES[zone]`) and, with `anti`,
/// required hostname anti-affinity against its own app.
pub fn property_pod(
    i: usize,
    cpu_millis: i64,
    mem_mi: i64,
    app: u8,
    spread_zones: bool,
    zone: Option<usize>,
    anti: bool,
) -> Pod {
    let app = if spread_zones {
        "spread".to_string()
    } else {
        format!("app{app}")
    };
    let mut p = labeled(
        pod(&format!("p{i:03}"), cpu_millis, mem_mi * MI),
        &[("app", &app)],
    );
    if spread_zones {
        p.topology_spread_constraints = vec![spread(
            ZONE,
            1,
            &[("app", "spread")],
            WhenUnsatisfiable::DoNotSchedule,
        )];
    } else {
        if let Some(z) = zone {
            p.node_selector.insert(ZONE.into(), ZONES[z].into());
        }
        if anti {
            p.affinity.pod_anti_affinity.required = vec![term(HOSTNAME, &[("app", &app)])];
        }
    }
    p
}

/// The timing probes' synthetic cluster: 400 instance types (2–64 cpu, a quarter without
/// spot), `pods` pods over ten apps, and every `spread_every`-th pod (none when 0) carrying a
/// zonal spread over app `a0`.
pub fn synthetic_snapshot(pods: usize, spread_every: usize) -> Snapshot {
    let mut its = Vec::new();
    for i in 0..400i64 {
        let cpu = 2 << (i % 6);
        its.push(instance_type(
            &format!("it-{i:03}"),
            cpu,
            cpu * (2 + i % 3),
            0.05 * cpu as f64 + 0.001 * i as f64,
            i % 4 != 0,
            &[],
        ));
    }
    let mut p = pool("default");
    p.instance_types = its;
    let pending = (0..pods)
        .map(|i| {
            let mut p = labeled(
                pod(
                    &format!("p{i:05}"),
                    100 * (1 + (i as i64 % 20)),
                    (128 + 64 * (i as i64 % 16)) * MI,
                ),
                &[("app", &format!("a{}", i % 10))],
            );
            if spread_every > 0 && i % spread_every == 0 {
                p.topology_spread_constraints = vec![spread(
                    ZONE,
                    1,
                    &[("app", "a0")],
                    WhenUnsatisfiable::DoNotSchedule,
                )];
            }
            p
        })
        .collect();
    snapshot(pending, vec![p])
}

/// The cheapest on-demand or spot price of a type.
pub fn min_price(it: &InstanceType) -> f64 {
    it.offerings
        .iter()
        .map(|o| o.price)
        .fold(f64::INFINITY, f64::min)
}

/// The cheapest plan over every partition of the pods into nodes and every choice of a type
/// per node that holds it, with the nodes' total cpu capacity within `limit` (millicores).
pub fn brute_force(
    requests: &[(i64, i64)],
    types: &[Arc<InstanceType>],
    limit: Option<i64>,
) -> f64 {
    /// Cheapest choice of one type per block with total capacity within the limit.
    fn choose(
        blocks: &[(i64, i64, i64)],
        types: &[Arc<InstanceType>],
        left: i64,
        spent: f64,
        best: &mut f64,
    ) {
        if spent >= *best {
            return;
        }
        let Some((&(cpu, mem, n), rest)) = blocks.split_first() else {
            *best = spent;
            return;
        };
        for it in types {
            let a = it.allocatable();
            if cpu <= a.cpu_millis
                && mem <= a.memory
                && n <= a.pods
                && it.capacity.cpu_millis <= left
            {
                choose(
                    rest,
                    types,
                    left - it.capacity.cpu_millis,
                    spent + min_price(it),
                    best,
                );
            }
        }
    }
    fn go(
        i: usize,
        requests: &[(i64, i64)],
        blocks: &mut Vec<(i64, i64, i64)>,
        types: &[Arc<InstanceType>],
        limit: i64,
        best: &mut f64,
    ) {
        if i == requests.len() {
            choose(blocks, types, limit, 0.0, best);
            return;
        }
        let (cpu, mem) = requests[i];
        for b in 0..blocks.len() {
            blocks[b].0 += cpu;
            blocks[b].1 += mem;
            blocks[b].2 += 1;
            go(i + 1, requests, blocks, types, limit, best);
            blocks[b].0 -= cpu;
            blocks[b].1 -= mem;
            blocks[b].2 -= 1;
        }
        blocks.push((cpu, mem, 1));
        go(i + 1, requests, blocks, types, limit, best);
        blocks.pop();
    }
    let mut best = f64::INFINITY;
    go(
        0,
        requests,
        &mut Vec::new(),
        types,
        limit.unwrap_or(i64::MAX),
        &mut best,
    );
    best
}
