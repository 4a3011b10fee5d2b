//! Runs disruption passes over a small cluster, the way a tool built on
//! `karpenter-disruption` would: describe the nodes (one empty, one on an instance generation
//! its NodePool no longer allows, one mostly idle, one busy) with their pods, NodeClaim facts
//! and a NodePool whose budget allows one disruption at a time; call
//! [`karpenter_disruption::compute_pass`]; print each command and why every other node stays;
//! re-check a command with [`karpenter_disruption::validate`] and drain a node in
//! [`karpenter_disruption::eviction_order`].
//!
//! ```text
//! cargo run -p karpenter-disruption --example disruption_pass
//! ```
//!
//! The instance types are the EC2 catalogue of `karpenter-catalog`; a provider of one's own
//! hands the scheduling model's `InstanceType`s in the same place.

use karpenter_catalog::default_instance_types;
use karpenter_cloudprovider::v1::{Budget, ConsolidationPolicy};
use karpenter_disruption::eviction::SYSTEM_CRITICAL_PRIORITY;
use karpenter_disruption::{
    Command, DisruptionInput, NodeInfo, PassResult, PoolDisruption, compute_pass, eviction_order,
    validate,
};
use karpenter_scheduling::labels::{
    AWS_INSTANCE_CATEGORY, AWS_INSTANCE_GENERATION, CAPACITY_TYPE, HOSTNAME, NODEPOOL, ZONE,
};
use karpenter_scheduling::model::{Millis, OwnerRef};
use karpenter_scheduling::pdb::PodDisruptionBudget;
use karpenter_scheduling::selector::LabelSelector;
use karpenter_scheduling::{Node, NodePool, Operator, Pod, Requirement, Requirements, Resources};
use std::error::Error;

const POOL: &str = "general";
const MINUTE: Millis = 60_000;
/// 2025-01-06T12:00:00Z: the core never reads a clock, the caller says what time it is.
const NOW: Millis = 1_736_164_800_000;

/// Adds a Karpenter-managed node `name` of [`POOL`] on the on-demand EC2 type `instance_type`
/// in `zone`, launched two days before [`NOW`], with the node agent every node runs.
fn add_node(
    input: &mut DisruptionInput,
    name: &str,
    instance_type: &str,
    zone: &str,
) -> Result<(), Box<dyn Error>> {
    let it = default_instance_types()
        .iter()
        .find(|it| it.name == instance_type)
        .ok_or_else(|| format!("no instance type {instance_type} in the catalogue"))?;
    // A node's labels: the type's single-valued labels (instance type, arch, category,
    // generation …) plus where and how it was bought and which NodePool owns it.
    let mut labels = it.requirements.single_valued_labels();
    for (key, value) in [
        (ZONE, zone),
        (CAPACITY_TYPE, "on-demand"),
        (NODEPOOL, POOL),
        (HOSTNAME, name),
    ] {
        labels.insert(key.to_string(), value.to_string());
    }
    input.cluster.nodes.push(Node {
        name: name.to_string(),
        node_pool: Some(POOL.to_string()),
        labels,
        allocatable: it.allocatable(),
        capacity: it.capacity.clone(),
        price: it.offering_price(Some(zone), "on-demand").unwrap_or(0.0),
        created_at: NOW - 2 * 24 * 60 * MINUTE,
        ..Node::default()
    });
    // What the NodeClaim says; a node without this entry is not Karpenter's to disrupt.
    input.nodes.insert(
        name.to_string(),
        NodeInfo {
            node_claim: format!("{name}-claim"),
            initialized: true,
            initialized_at: Some(NOW - 2 * 24 * 60 * MINUTE + MINUTE),
            ready: true,
            created_at: NOW - 2 * 24 * 60 * MINUTE,
            last_pod_event_at: Some(NOW - 60 * MINUTE),
            ..NodeInfo::default()
        },
    );
    let mut agent = pod("kube-system", "DaemonSet", &format!("agent-{name}"), "100m")?;
    // system-node-critical: drained last.
    agent.priority = SYSTEM_CRITICAL_PRIORITY + 1000;
    bind(input, agent, name);
    Ok(())
}

/// A running pod `namespace/name` requesting `cpu` and 1 GiB, labelled `app` and owned by a
/// `kind` of that name: the part of `name` before its first `-`.
fn pod(namespace: &str, kind: &str, name: &str, cpu: &str) -> Result<Pod, Box<dyn Error>> {
    let app = name.split('-').next().unwrap_or(name);
    Ok(Pod {
        namespace: namespace.to_string(),
        name: name.to_string(),
        uid: format!("uid-{name}"),
        labels: [("app".to_string(), app.to_string())].into(),
        owner: Some(OwnerRef {
            kind: kind.to_string(),
            name: app.to_string(),
            uid: format!("uid-{app}"),
        }),
        requests: Resources::parse(&[("cpu", cpu), ("memory", "1Gi"), ("pods", "1")])?,
        started_at: Some(NOW - 60 * MINUTE),
        ..Pod::default()
    })
}

fn bind(input: &mut DisruptionInput, mut pod: Pod, node: &str) {
    pod.node_name = Some(node.to_string());
    input.cluster.bound_pods.push(pod);
}

fn app_pod(
    input: &mut DisruptionInput,
    name: &str,
    cpu: &str,
    node: &str,
) -> Result<(), Box<dyn Error>> {
    let p = pod("default", "ReplicaSet", name, cpu)?;
    bind(input, p, node);
    Ok(())
}

fn print_pass(title: &str, result: &PassResult) {
    println!("== {title}: {} simulations", result.simulations);
    for cmd in &result.commands {
        print_command(cmd);
    }
    if result.commands.is_empty() {
        println!("no command");
    }
    for e in &result.explanations {
        let holds: Vec<String> = e.holds.iter().map(ToString::to_string).collect();
        println!("  {} stays: {}", e.node, holds.join("; "));
    }
    println!();
}

fn print_command(cmd: &Command) {
    println!(
        "{} {:?} of {:?}, saving ${:.3}/h: {}",
        cmd.reason,
        cmd.decision,
        cmd.node_names(),
        cmd.savings,
        cmd.explanation
    );
    for r in &cmd.replacements {
        let first = r.instance_type_options.first();
        println!(
            "  replacement in {} for {} pods: {} options from {} at ${:.3}/h",
            r.node_pool,
            r.pods.len(),
            r.instance_type_options.len(),
            first.map_or("-", |o| &o.name),
            r.price
        );
    }
}

fn main() -> Result<(), Box<dyn Error>> {
    // Default options: 15 s validation delay, up to 64 scheduling simulations a pass.
    let mut input = DisruptionInput::default();

    // The NodePool: current-generation (6 and later) c, m and r instances on demand. Its
    // disruption settings: consolidate empty and underused nodes 30 s after their last pod
    // event, and never disrupt more than one node at a time.
    let mut requirements = Requirements::new();
    requirements.add(Requirement::new(
        CAPACITY_TYPE,
        Operator::In,
        ["on-demand"],
    )?);
    requirements.add(Requirement::new(
        AWS_INSTANCE_CATEGORY,
        Operator::In,
        ["c", "m", "r"],
    )?);
    requirements.add(Requirement::new(
        AWS_INSTANCE_GENERATION,
        Operator::Gt,
        ["5"],
    )?);
    input.cluster.node_pools.push(NodePool {
        name: POOL.to_string(),
        requirements,
        instance_types: default_instance_types().to_vec(),
        ..NodePool::default()
    });
    input.node_pools.insert(
        POOL.to_string(),
        PoolDisruption {
            consolidation_policy: ConsolidationPolicy::WhenEmptyOrUnderutilized,
            consolidate_after: Some(30_000),
            budgets: vec![Budget::nodes("1")],
            ..PoolDisruption::default()
        },
    );

    // Only the node agent runs here.
    add_node(&mut input, "node-empty", "m6i.large", "us-east-1a")?;
    // Generation 5: the pool's requirements no longer admit it.
    add_node(&mut input, "node-old", "m5.xlarge", "us-east-1a")?;
    app_pod(&mut input, "web-0", "1", "node-old")?;
    app_pod(&mut input, "web-1", "1", "node-old")?;
    // Eight cores for half of one.
    add_node(&mut input, "node-idle", "m6i.2xlarge", "us-east-1b")?;
    app_pod(&mut input, "api-0", "500m", "node-idle")?;
    // Busy, and its database may not be evicted now (a PDB allowing no disruption).
    add_node(&mut input, "node-busy", "m6i.xlarge", "us-east-1b")?;
    app_pod(&mut input, "db-0", "2", "node-busy")?;
    app_pod(&mut input, "api-1", "1", "node-busy")?;
    input.pdbs.push(PodDisruptionBudget {
        namespace: "default".to_string(),
        name: "db".to_string(),
        selector: Some(LabelSelector {
            match_labels: [("app".to_string(), "db".to_string())].into(),
            match_expressions: Vec::new(),
        }),
        disruptions_allowed: 0,
        ..PodDisruptionBudget::default()
    });

    let first = compute_pass(&input, NOW);
    print_pass("pass 1", &first);

    // An emptiness or consolidation command is carried out only if it still holds after
    // the validation delay, against the state seen then.
    if let Some(cmd) = first.commands.first() {
        let due = cmd.validation_due(input.options.validation_delay_ms);
        let mut changed = input.clone();
        for node in cmd.node_names() {
            app_pod(&mut changed, &format!("late-{node}"), "100m", node)?;
        }
        match validate(cmd, &changed, due) {
            Ok(()) => println!("validation with a new pod on the node: still valid"),
            Err(e) => println!("validation with a new pod on the node: {e}"),
        }
        match validate(cmd, &input, due) {
            Ok(()) => println!("validation against unchanged state: valid, carried out\n"),
            Err(e) => println!("validation against unchanged state: {e}\n"),
        }
        // Carry it out: the candidates and their pods leave the cluster.
        let gone = cmd.node_names();
        input
            .cluster
            .nodes
            .retain(|n| !gone.contains(&n.name.as_str()));
        input
            .cluster
            .bound_pods
            .retain(|p| !p.node_name.as_deref().is_some_and(|n| gone.contains(&n)));
        for node in gone {
            input.nodes.remove(node);
        }
    }

    let second = compute_pass(&input, NOW + 5 * MINUTE);
    print_pass("pass 2", &second);
    if let Some(cmd) = second.commands.first() {
        // The terminator drains each candidate in this order: workloads before node agents,
        // critical pods last.
        for node in cmd.node_names() {
            let on_node = input
                .cluster
                .bound_pods
                .iter()
                .filter(|p| p.node_name.as_deref() == Some(node));
            let waves = [
                "workloads",
                "node agents",
                "critical workloads",
                "critical agents",
            ];
            for (wave, pods) in waves.iter().zip(eviction_order(on_node)) {
                let names: Vec<String> = pods.iter().map(ToString::to_string).collect();
                if !names.is_empty() {
                    println!("  drain {node}: {wave}: {}", names.join(", "));
                }
            }
            // Still being disrupted when the next pass runs: it uses up the budget.
            input.disrupting.insert(node.to_string());
        }
        println!();
    }

    let third = compute_pass(&input, NOW + 6 * MINUTE);
    print_pass("pass 3, while the pass 2 command is under way", &third);
    Ok(())
}
