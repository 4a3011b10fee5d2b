//! Criterion benchmark: one disruption pass over 1,000 nodes that ran 5,000 pods, after
//! half of the pods were deleted (Karpenter's own consolidation takes ~38 s here; the goal
//! is under 1 s). Prints the decision once before measuring.
//!
//! `cargo bench -p karpenter-disruption --bench consolidation`.
#![forbid(unsafe_code)]

#[path = "../tests/fixtures/half_empty.rs"]
mod half_empty;

use criterion::{Criterion, SamplingMode, criterion_group, criterion_main};
use karpenter_disruption::compute_pass;
use std::hint::black_box;
use std::time::Duration;

fn consolidation(c: &mut Criterion) {
    let input = half_empty::half_empty_cluster(1000, 5);
    let result = compute_pass(&input, 1);
    match result.commands.first() {
        Some(cmd) => println!(
            "decision: {:?} {:?} of {} nodes, savings ${:.2}/h, {} simulations",
            cmd.reason,
            cmd.decision,
            cmd.candidates.len(),
            cmd.savings,
            result.simulations
        ),
        None => println!("decision: none ({} simulations)", result.simulations),
    }
    let mut group = c.benchmark_group("consolidation");
    group
        .sampling_mode(SamplingMode::Flat)
        .sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(5));
    group.bench_function("1000-nodes-2500-pods", |b| {
        b.iter(|| compute_pass(black_box(&input), 1))
    });
    group.finish();
}

criterion_group!(benches, consolidation);
criterion_main!(benches);
