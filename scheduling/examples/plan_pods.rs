//! Plans capacity for a handful of pending pods, the way a tool built on
//! `karpenter-scheduling` would: describe the instance types a NodePool may launch, the
//! NodePool itself (requirements and a cpu limit), a DaemonSet and the pending pods with their
//! constraints, call [`karpenter_scheduling::solve`], and read the plan.
//!
//! ```text
//! cargo run -p karpenter-scheduling --example plan_pods
//! ```
//!
//! The instance types are written out by hand, as a provider of one's own would produce
//! them; for the EC2 catalogue with Karpenter's allocatable and pricing rules, see
//! `karpenter_catalog::default_instance_types`.

use karpenter_scheduling::labels::{ARCH, CAPACITY_TYPE, HOSTNAME, INSTANCE_TYPE, ZONE};
use karpenter_scheduling::model::{
    DaemonSet, InclusionPolicy, Overhead, OwnerRef, PodAffinityTerm, TopologySpreadConstraint,
    WhenUnsatisfiable,
};
use karpenter_scheduling::plan::BoundGap;
use karpenter_scheduling::requirements::NodeSelectorRequirement;
use karpenter_scheduling::selector::LabelSelector;
use karpenter_scheduling::{
    InstanceType, NodePool, Offering, Operator, Pod, Quantity, Requirement, Requirements,
    Resources, Snapshot, SolveOptions, solve,
};
use std::error::Error;
use std::sync::Arc;

const ZONES: [&str; 3] = ["us-east-1a", "us-east-1b", "us-east-1c"];

/// An instance type offered in every zone of [`ZONES`], on demand at `on_demand` and as spot
/// at `spot` dollars per hour, with kube-reserved and an eviction threshold taken off its
/// capacity.
fn instance_type(
    name: &str,
    arch: &str,
    cpu: &str,
    memory: &str,
    on_demand: f64,
    spot: f64,
) -> Result<Arc<InstanceType>, Box<dyn Error>> {
    // The labels a node of this type carries, as requirements: the solver intersects them
    // with the NodePool's requirements and the pods' node selectors and affinities.
    let mut requirements = Requirements::new();
    requirements.add(Requirement::new(INSTANCE_TYPE, Operator::In, [name])?);
    requirements.add(Requirement::new(ARCH, Operator::In, [arch])?);
    requirements.add(Requirement::new(ZONE, Operator::In, ZONES)?);
    requirements.add(Requirement::new(
        CAPACITY_TYPE,
        Operator::In,
        ["on-demand", "spot"],
    )?);
    let offerings = ZONES
        .iter()
        .flat_map(|zone| {
            [("on-demand", on_demand), ("spot", spot)].map(|(capacity_type, price)| Offering {
                zone: zone.to_string(),
                capacity_type: capacity_type.to_string(),
                price,
                available: true,
                reservation: None,
            })
        })
        .collect();
    Ok(Arc::new(InstanceType {
        devices: Vec::new(),
        name: name.to_string(),
        requirements,
        capacity: Resources::parse(&[("cpu", cpu), ("memory", memory), ("pods", "58")])?,
        overhead: Overhead {
            kube_reserved: Resources::parse(&[("cpu", "80m"), ("memory", "893Mi")])?,
            eviction_threshold: Resources::parse(&[("memory", "100Mi")])?,
            ..Overhead::default()
        },
        offerings,
    }))
}

/// `count` pods `default/{app}-{i}` labelled `app={app}`, each requesting `cpu` and `memory`.
fn replicas(app: &str, count: usize, cpu: &str, memory: &str) -> Result<Vec<Pod>, Box<dyn Error>> {
    let requests = Resources::parse(&[("cpu", cpu), ("memory", memory)])?;
    Ok((0..count)
        .map(|i| Pod {
            namespace: "default".to_string(),
            name: format!("{app}-{i}"),
            uid: format!("uid-{app}-{i}"),
            labels: [("app".to_string(), app.to_string())].into(),
            owner: Some(OwnerRef {
                kind: "ReplicaSet".to_string(),
                name: app.to_string(),
                uid: format!("uid-{app}"),
            }),
            requests: requests.clone(),
            ..Pod::default()
        })
        .collect())
}

/// Selects the pods labelled `app={app}`.
fn app(app: &str) -> Option<LabelSelector> {
    Some(LabelSelector {
        match_labels: [("app".to_string(), app.to_string())].into(),
        match_expressions: Vec::new(),
    })
}

fn main() -> Result<(), Box<dyn Error>> {
    let instance_types = vec![
        instance_type("m5.large", "amd64", "2", "8Gi", 0.096, 0.037)?,
        instance_type("m5.xlarge", "amd64", "4", "16Gi", 0.192, 0.072)?,
        instance_type("m5.2xlarge", "amd64", "8", "32Gi", 0.384, 0.151)?,
        instance_type("c5.xlarge", "amd64", "4", "8Gi", 0.17, 0.067)?,
        instance_type("r5.large", "amd64", "2", "16Gi", 0.126, 0.043)?,
        instance_type("m6g.large", "arm64", "2", "8Gi", 0.077, 0.031)?,
    ];

    // On-demand amd64 capacity only, at most 24 cpus in all: the manifest's
    // `spec.template.spec.requirements` and `spec.limits`.
    let pool = NodePool {
        name: "general".to_string(),
        requirements: Requirements::from_node_selector(&[
            NodeSelectorRequirement {
                key: ARCH.to_string(),
                operator: Operator::In,
                values: vec!["amd64".to_string()],
                min_values: None,
            },
            NodeSelectorRequirement {
                key: CAPACITY_TYPE.to_string(),
                operator: Operator::In,
                values: vec!["on-demand".to_string()],
                min_values: None,
            },
        ])?,
        limits: [("cpu".to_string(), Quantity::parse("30")?)].into(),
        instance_types,
        ..NodePool::default()
    };

    // A node agent on every node: its requests count on each NodeClaim the plan opens.
    let mut agent = replicas("node-agent", 1, "100m", "128Mi")?.remove(0);
    agent.namespace = "kube-system".to_string();
    agent.owner = Some(OwnerRef {
        kind: "DaemonSet".to_string(),
        name: "node-agent".to_string(),
        uid: "uid-node-agent".to_string(),
    });
    let daemon = DaemonSet {
        namespace: "kube-system".to_string(),
        name: "node-agent".to_string(),
        pod: agent,
    };

    // web: spread evenly over the zones (maxSkew 1, DoNotSchedule).
    let mut pending = replicas("web", 6, "500m", "1Gi")?;
    for pod in &mut pending {
        pod.topology_spread_constraints
            .push(TopologySpreadConstraint {
                max_skew: 1,
                topology_key: ZONE.to_string(),
                when_unsatisfiable: WhenUnsatisfiable::DoNotSchedule,
                label_selector: app("web"),
                min_domains: None,
                node_affinity_policy: InclusionPolicy::Honor,
                node_taints_policy: InclusionPolicy::Ignore,
                match_label_keys: Vec::new(),
            });
    }
    // cache: never two on one node (required hostname anti-affinity).
    for mut pod in replicas("cache", 3, "1", "6Gi")? {
        pod.affinity
            .pod_anti_affinity
            .required
            .push(PodAffinityTerm {
                label_selector: app("cache"),
                topology_key: HOSTNAME.to_string(),
                ..PodAffinityTerm::default()
            });
        pending.push(pod);
    }
    // batch: large jobs; etl: larger than any instance type.
    pending.extend(replicas("batch", 3, "3500m", "12Gi")?);
    pending.extend(replicas("etl", 1, "12", "24Gi")?);
    // arm: asks for arm64, which the pool excludes.
    for mut pod in replicas("arm", 1, "250m", "256Mi")? {
        pod.node_selector
            .insert(ARCH.to_string(), "arm64".to_string());
        pending.push(pod);
    }

    let snapshot = Snapshot {
        pending_pods: pending,
        node_pools: vec![pool],
        daemon_sets: vec![daemon],
        ..Snapshot::default()
    };
    let plan = solve(&snapshot, &SolveOptions::default());
    // Every pending pod is either placed or explained.
    assert_eq!(
        plan.placed_pods() + plan.unschedulable.len(),
        snapshot.pending_pods.len()
    );

    println!(
        "{} pending pods: {} placed on {} new NodeClaims, {} unschedulable\n",
        snapshot.pending_pods.len(),
        plan.placed_pods(),
        plan.new_node_claims.len(),
        plan.unschedulable.len()
    );
    for (i, claim) in plan.new_node_claims.iter().enumerate() {
        println!(
            "NodeClaim {} (NodePool {}): ${:.3}/h, requests cpu {}m memory {}Mi \
             (DaemonSets: cpu {}m)",
            i + 1,
            claim.node_pool,
            claim.price,
            claim.requests.cpu_millis,
            claim.requests.memory >> 20,
            claim.daemon_overhead.cpu_millis,
        );
        println!("  requirements: {}", claim.requirements);
        let pods: Vec<String> = claim.pods.iter().map(ToString::to_string).collect();
        println!("  pods: {}", pods.join(", "));
        let shown = 3.min(claim.instance_type_options.len());
        for option in &claim.instance_type_options[..shown] {
            println!(
                "  option: {} in {} ({}) at ${:.3}/h",
                option.name, option.zone, option.capacity_type, option.price
            );
        }
        if claim.instance_type_options.len() > shown {
            println!(
                "  … and {} more options",
                claim.instance_type_options.len() - shown
            );
        }
    }
    for pod in &plan.unschedulable {
        println!("\nunschedulable {}: {}", pod.pod, pod.reason);
    }

    println!("\ntotal ${:.3}/h", plan.total_price);
    if let Some(greedy) = plan.greedy_price {
        println!("greedy (Karpenter's own packing) ${greedy:.3}/h");
    }
    match (plan.lower_bound, plan.bound_gap()) {
        (Some(bound), Some(BoundGap::Relative(gap))) => println!(
            "lower bound ${bound:.3}/h: the plan is at most {:.1} % above the optimum",
            gap * 100.0
        ),
        (Some(bound), Some(BoundGap::Loose { pods })) => println!(
            "lower bound ${bound:.3}/h, but {pods} pods are placed under per-node constraints \
             the bound leaves out, so no gap is given"
        ),
        _ => println!("no lower bound was computed"),
    }
    Ok(())
}
