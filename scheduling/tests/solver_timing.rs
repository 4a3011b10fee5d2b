//! A manual timing probe (not an assertion): `cargo test --release -p karpenter-scheduling
//! --test solver_timing -- --ignored --nocapture`. Real benchmarks live in `benches/`.

mod common;

use common::*;
use karpenter_scheduling::labels::ZONE;
use karpenter_scheduling::model::WhenUnsatisfiable;
use std::time::Instant;

fn big_snapshot(pods: usize) -> karpenter_scheduling::Snapshot {
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
            if i % 10 == 0 {
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

#[test]
#[ignore = "timing probe; run manually in release"]
fn time_1000_pods_400_instance_types() {
    for n in [1000, 5000] {
        let s = big_snapshot(n);
        let start = Instant::now();
        let plan = run(&s);
        println!(
            "{n} pods: {:?}, {} claims, {} unschedulable, ${:.2}/h",
            start.elapsed(),
            plan.new_node_claims.len(),
            plan.unschedulable.len(),
            plan.total_price
        );
    }
}
