//! A manual timing probe (not an assertion): `cargo test --release -p karpenter-scheduling
//! --test solver_timing -- --ignored --nocapture`. Real benchmarks live in `benches/`.

use karpenter_testing::*;
use std::time::Instant;

#[test]
#[ignore = "timing probe; run manually in release"]
fn time_1000_pods_400_instance_types() {
    for n in [1000, 5000] {
        let s = synthetic_snapshot(n, 10);
        let start = Instant::now();
        let plan = solve_default(&s);
        println!(
            "{n} pods: {:?}, {} claims, {} unschedulable, ${:.2}/h",
            start.elapsed(),
            plan.new_node_claims.len(),
            plan.unschedulable.len(),
            plan.total_price
        );
    }
}
