//! Manual probes (not assertions) for the packing optimiser's price and speed:
//! `cargo test --release -p karpenter-scheduling --test optimizer_timing -- --ignored --nocapture`.
//!
//! `synthetic_catalogue` uses 400 hand-built types; `aws_catalogue` reads the real AWS
//! catalogue JSON named by `KARPENTER_AWS_CATALOGUE` (or `../../shared/data/…` next to the
//! repository) and is skipped when the file is absent. Real benchmarks live in `benches/`.

use karpenter_scheduling::labels::{ARCH, CAPACITY_TYPE, INSTANCE_TYPE, ZONE};
use karpenter_scheduling::model::{InstanceType, Offering, Overhead, Pod};
use karpenter_scheduling::requirements::Operator;
use karpenter_scheduling::resources::Resources;
use karpenter_scheduling::solver::OptimizerOptions;
use karpenter_scheduling::{Plan, Snapshot, SolveOptions, solve};
use karpenter_testing::*;
use std::sync::Arc;
use std::time::Instant;

fn greedy_only() -> SolveOptions {
    SolveOptions {
        optimizer: OptimizerOptions {
            enabled: false,
            ..OptimizerOptions::default()
        },
        ..SolveOptions::default()
    }
}

fn report(name: &str, s: &Snapshot) {
    let start = Instant::now();
    let greedy = solve(s, &greedy_only());
    let greedy_time = start.elapsed();
    let start = Instant::now();
    let plan: Plan = solve(s, &SolveOptions::default());
    let time = start.elapsed();
    let bound = plan.lower_bound.unwrap_or(f64::NAN);
    println!(
        "{name}: greedy {greedy_time:?} ${:.3}/h ({} claims) | solve {time:?} ${:.3}/h ({} claims) | bound ${bound:.3}/h | gap {:.2}% (greedy {:.2}%) | {:?}",
        greedy.total_price,
        greedy.new_node_claims.len(),
        plan.total_price,
        plan.new_node_claims.len(),
        100.0 * (plan.total_price / bound - 1.0),
        100.0 * (greedy.total_price / bound - 1.0),
        plan.optimizer,
    );
    assert_eq!(plan.placed_pods(), greedy.placed_pods());
    assert!(plan.total_price <= greedy.total_price + 1e-6);
}

#[test]
#[ignore = "timing probe; run manually in release"]
fn synthetic_catalogue() {
    for n in [1000, 5000, 20_000] {
        report(
            &format!("synthetic {n} pods, zone spread"),
            &synthetic_snapshot(n, 10),
        );
        report(
            &format!("synthetic {n} pods, free"),
            &synthetic_snapshot(n, 0),
        );
    }
}

/// Karpenter's AWS overhead: ENI-limited max pods, kube-reserved by core count and pods,
/// 100Mi eviction threshold, 7.5% VM memory overhead.
fn aws_types(path: &std::path::Path) -> Option<Vec<Arc<InstanceType>>> {
    let text = std::fs::read_to_string(path).ok()?;
    let doc: serde_json::Value = serde_json::from_str(&text).ok()?;
    let mut out = Vec::new();
    for it in doc["instance_types"].as_array()? {
        let name = it["name"].as_str()?;
        let Some(price) = it["on_demand_price_per_hour_usd"].as_f64() else {
            continue;
        };
        if it["gpu"].is_object() || it["neuron_devices"].as_i64().unwrap_or(0) > 0 {
            continue;
        }
        let vcpu = it["vcpu"].as_i64()?;
        let mem_mib = it["memory_mib"].as_i64()?;
        let enis = it["max_network_interfaces"].as_i64()?;
        let ips = it["ipv4_per_interface"].as_i64()?;
        let arch = it["architecture"].as_str()?.to_string();
        let zones: Vec<String> = it["zones"]
            .as_array()?
            .iter()
            .filter_map(|z| z.as_str().map(str::to_string))
            .collect();
        let max_pods = (enis * (ips - 1) + 2).min(250);
        let cpu_millis = vcpu * 1000;
        let mut reserved_cpu = 0i64;
        for core in 0..vcpu {
            reserved_cpu += match core {
                0 => 60,
                1 => 10,
                2 | 3 => 5,
                _ => 0,
            };
        }
        reserved_cpu += (vcpu - 4).max(0) * 10 / 4;
        let memory = (mem_mib as f64 * (1.0 - 0.075)) as i64 * MI;
        let overhead = Overhead {
            kube_reserved: Resources {
                cpu_millis: reserved_cpu,
                memory: (11 * max_pods + 255) * MI,
                ..Resources::default()
            },
            system_reserved: Resources::default(),
            eviction_threshold: Resources {
                memory: 100 * MI,
                ..Resources::default()
            },
        };
        let zone_refs: Vec<&str> = zones.iter().map(String::as_str).collect();
        out.push(Arc::new(InstanceType {
            devices: Vec::new(),
            name: name.to_string(),
            requirements: reqs(&[
                nsr(INSTANCE_TYPE, Operator::In, &[name]),
                nsr(ZONE, Operator::In, &zone_refs),
                nsr(CAPACITY_TYPE, Operator::In, &["on-demand"]),
                nsr(ARCH, Operator::In, &[arch.as_str()]),
            ]),
            capacity: Resources {
                cpu_millis,
                memory,
                pods: max_pods,
                ..Resources::default()
            },
            overhead,
            offerings: zones
                .iter()
                .map(|z| Offering {
                    zone: z.clone(),
                    capacity_type: "on-demand".into(),
                    price,
                    available: true,
                    reservation: None,
                })
                .collect(),
        }));
    }
    Some(out)
}

/// Deterministic pseudo-random pods: a few deployment shapes, like a real cluster.
fn aws_pods(n: usize, seed: u64) -> Vec<Pod> {
    let shapes: [(i64, i64); 8] = [
        (250, 512),
        (500, 1024),
        (1000, 2048),
        (2000, 4096),
        (1500, 6144),
        (4000, 8192),
        (750, 3072),
        (3000, 2048),
    ];
    let mut x = seed;
    (0..n)
        .map(|i| {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let (cpu, mem) = shapes[(x >> 33) as usize % shapes.len()];
            pod(&format!("p{i:05}"), cpu, mem * MI)
        })
        .collect()
}

#[test]
#[ignore = "price/timing probe on the real AWS catalogue; run manually in release"]
fn aws_catalogue() {
    let path = std::env::var("KARPENTER_AWS_CATALOGUE").map_or_else(
        |_| {
            std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../../shared/data/aws-instance-types.json")
        },
        std::path::PathBuf::from,
    );
    let Some(types) = aws_types(&path) else {
        println!("no catalogue at {}", path.display());
        return;
    };
    println!("{} instance types", types.len());
    let mut amd = pool("default");
    amd.instance_types = types.clone();
    amd.requirements = reqs(&[nsr(ARCH, Operator::In, &["amd64"])]);
    for (n, seed) in [
        (10, 1),
        (50, 2),
        (200, 3),
        (1000, 4),
        (5000, 5),
        (20_000, 6),
    ] {
        let s = snapshot(aws_pods(n, seed), vec![amd.clone()]);
        report(&format!("aws {n} pods"), &s);
    }
    let mut ds = daemon("agent", 200);
    ds.pod.requests.memory = 256 * MI;
    let mut s = snapshot(aws_pods(1000, 9), vec![amd]);
    s.daemon_sets = vec![ds];
    report("aws 1000 pods + daemonset", &s);
}

#[test]
#[ignore = "timing probe; run manually in release"]
fn synthetic_1000_zone_spread() {
    for _ in 0..5 {
        report(
            "synthetic 1000 pods, zone spread",
            &synthetic_snapshot(1000, 10),
        );
    }
}

#[test]
#[ignore = "timing probe; run manually in release"]
fn aws_20000() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../shared/data/aws-instance-types.json");
    let Some(types) = aws_types(&path) else {
        return;
    };
    let mut amd = pool("default");
    amd.instance_types = types;
    amd.requirements = reqs(&[nsr(ARCH, Operator::In, &["amd64"])]);
    report("aws 20000 pods", &snapshot(aws_pods(20_000, 6), vec![amd]));
}

/// Karpenter's benchmark request distribution with no constraints: cpu from
/// {100, 250, 500, 1000, 1500}m, memory from {100, 256, 512, 1024, 2048, 4096}Mi.
fn unconstrained_pods(n: usize, seed: u64) -> Vec<Pod> {
    const CPU: [i64; 5] = [100, 250, 500, 1000, 1500];
    const MEM: [i64; 6] = [100, 256, 512, 1024, 2048, 4096];
    let mut x = seed;
    let mut next = move || {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (x >> 33) as usize
    };
    (0..n)
        .map(|i| {
            let cpu = CPU[next() % CPU.len()];
            let mem = MEM[next() % MEM.len()];
            pod(&format!("p{i:05}"), cpu, mem * MI)
        })
        .collect()
}

/// The case the LP rounding is for: many small unconstrained pods on the real catalogue,
/// where the greedy grows claims onto the largest types. Prints the gap to the bound;
/// asserts only that every pod is placed and the price never rises above the greedy's.
#[test]
#[ignore = "price probe on the real AWS catalogue; run manually in release"]
fn aws_unconstrained() {
    let path = std::env::var("KARPENTER_AWS_CATALOGUE").map_or_else(
        |_| {
            std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../../shared/data/aws-instance-types.json")
        },
        std::path::PathBuf::from,
    );
    let Some(types) = aws_types(&path) else {
        println!("no catalogue at {}", path.display());
        return;
    };
    let mut amd = pool("default");
    amd.instance_types = types;
    amd.requirements = reqs(&[nsr(ARCH, Operator::In, &["amd64"])]);
    for (n, seed) in [(100, 11), (1000, 12), (5000, 13), (20_000, 14)] {
        let s = snapshot(unconstrained_pods(n, seed), vec![amd.clone()]);
        report(&format!("aws unconstrained {n} pods"), &s);
    }
}
