//! Criterion benchmark: the shared reconciler (`karpenter_cluster::reconciler`) on an index
//! of 1,000 nodes and 10,000 pods, the size issue 15 sets.
//!
//! - `tick after 10 changes` (at 100 and 1,000 nodes): ten pods change (as ten watch events would), the index applies
//!   them and the reconciler ticks between polls (no batch closing, no disruption pass due).
//!   Target: under 20 ms, and growing with the changes, not with the cluster.
//! - `tick with a disruption pass`: the same, at a poll, so the tick builds the disruption
//!   input and runs a full pass (every method, up to its simulation budget).
//!
//! `cargo bench -p karpenter-benches --bench reconcile`.
#![forbid(unsafe_code)]

use criterion::{Criterion, criterion_group, criterion_main};
use karpenter_benches::reconcile::{ClusterSize, indexed_cluster};
use karpenter_cluster::provisioner::NameGenerator;
use karpenter_cluster::reconciler::{ProviderFacts, Reconciler, ReconcilerSettings};
use karpenter_cluster::{ClusterState, Object};
use std::collections::BTreeMap;
use std::hint::black_box;
use std::time::{Duration, Instant};

const SIZE: ClusterSize = ClusterSize {
    nodes: 1_000,
    pods_per_node: 10,
};

/// A tenth of the size: how the cost of a tick grows with the cluster.
const SMALL: ClusterSize = ClusterSize {
    nodes: 100,
    pods_per_node: 10,
};

fn tick(r: &mut Reconciler, s: &ClusterState, version: u64, now: i64) -> usize {
    let drift = BTreeMap::new();
    let facts = ProviderFacts {
        drift: &drift,
        version,
        repair_policies: &[],
        seconds: &|| 0.0,
    };
    r.tick(s, &facts, now).actions.len()
}

/// Re-applies ten pods with a new readiness time, as ten pod status updates would.
fn change_ten(state: &mut ClusterState, round: i64) {
    let keys: Vec<_> = state.pods().keys().take(10).cloned().collect();
    for key in keys {
        let mut record = state.pods()[&key].clone();
        record.ready_at = Some(round);
        state.apply(Object::Pod(Box::new(record)));
    }
}

fn reconcile(c: &mut Criterion) {
    let mut state = indexed_cluster(SIZE);
    println!(
        "index: {} nodes, {} pods",
        state.nodes().len(),
        state.pods().len()
    );
    let mut reconciler = Reconciler::new(ReconcilerSettings::default(), NameGenerator::default());
    // The first tick runs the first disruption pass; later ticks between polls do not.
    let start = Instant::now();
    tick(&mut reconciler, &state, 0, 0);
    println!(
        "first tick (a full disruption pass): {:.1} ms",
        start.elapsed().as_secs_f64() * 1e3
    );

    let mut group = c.benchmark_group("reconcile");
    group.sample_size(20);
    group.measurement_time(Duration::from_secs(10));
    let mut small = indexed_cluster(SMALL);
    let mut small_reconciler =
        Reconciler::new(ReconcilerSettings::default(), NameGenerator::default());
    tick(&mut small_reconciler, &small, 0, 0);
    let mut round = 0;
    group.bench_function("tick after 10 changes, 100 nodes", |b| {
        b.iter(|| {
            round += 1;
            change_ten(&mut small, round);
            black_box(tick(&mut small_reconciler, &small, 0, 1_000));
        });
    });
    group.bench_function("tick after 10 changes, 1000 nodes", |b| {
        b.iter(|| {
            round += 1;
            change_ten(&mut state, round);
            black_box(tick(&mut reconciler, &state, 0, 1_000));
        });
    });
    let mut poll = 0;
    group.sample_size(10);
    group.bench_function("tick with a disruption pass", |b| {
        b.iter(|| {
            round += 1;
            poll += 1;
            change_ten(&mut state, round);
            // A fresh provider version at each poll: the pass cannot be skipped.
            black_box(tick(&mut reconciler, &state, poll, poll as i64 * 10_000));
        });
    });
    group.finish();
}

criterion_group!(benches, reconcile);
criterion_main!(benches);
