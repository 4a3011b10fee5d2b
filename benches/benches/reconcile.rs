//! Criterion benchmark: the shared reconciler (`karpenter_cluster::reconciler`) on an index
//! of 1,000 nodes and 10,000 pods, the size issue 15 sets.
//!
//! - `tick after 10 changes` (at 100 and 1,000 nodes): ten pods change (as ten watch events would), the index applies
//!   them and the reconciler ticks between polls (no batch closing, no disruption pass due).
//!   Target: under 20 ms, and growing with the changes, not with the cluster.
//! - `tick with a disruption pass`: the same, at a poll, so the tick builds the disruption
//!   input and runs a full pass (every method, up to its simulation budget).
//!
//! - `feed sync` / `feed sync_changes after 10 changes`: the controller's feed from API
//!   objects at the same size, reading every store versus only the ten changed pods.
//!
//! `cargo bench -p karpenter-benches --bench reconcile`.
#![forbid(unsafe_code)]

use criterion::{Criterion, criterion_group, criterion_main};
use karpenter_benches::reconcile::{ClusterSize, api_cluster, indexed_cluster};
use karpenter_cluster::feed::{ApiObjects, Changes, Feed};
use karpenter_cluster::provisioner::NameGenerator;
use karpenter_cluster::provisioner::time;
use karpenter_cluster::reconciler::{ProviderFacts, Reconciler, ReconcilerSettings, conditions};
use karpenter_cluster::{Action, ClusterState, Object};
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
        solving: &|_| {},
    };
    r.tick(s, &facts, now).actions.len()
}

/// Ticks at `now` and writes back the NodeClaim status the tick asked for (conditions,
/// pod-event stamps), as a driver's writes come back through its watches: a settled index
/// is what the later ticks measure.
fn settle(r: &mut Reconciler, s: &mut ClusterState, now: i64) {
    let drift = BTreeMap::new();
    let facts = ProviderFacts {
        drift: &drift,
        version: 0,
        repair_policies: &[],
        seconds: &|| 0.0,
        solving: &|_| {},
    };
    for action in r.tick(s, &facts, now).actions {
        let (Action::SetClaimConditions { node_claim, .. }
        | Action::StampPodEvent { node_claim, .. }) = &action
        else {
            continue;
        };
        let Some(mut claim) = s.node_claims().get(node_claim).cloned() else {
            continue;
        };
        match action {
            Action::SetClaimConditions { changes, .. } => {
                conditions::apply(&mut claim, &changes, time(now));
            }
            Action::StampPodEvent { at, .. } => {
                claim
                    .status
                    .get_or_insert_with(Default::default)
                    .last_pod_event_time = Some(time(at));
            }
            _ => {}
        }
        s.apply(Object::NodeClaim(Box::new(claim)));
    }
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
    settle(&mut reconciler, &mut state, 0);
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
    settle(&mut small_reconciler, &mut small, 0);
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

/// The controller's feed at the same size: ten pods get a new resourceVersion (ten watch
/// events) and the feed brings the index in line with every store.
fn feed(c: &mut Criterion) {
    let mut api = api_cluster(SIZE);
    let mut state = ClusterState::new();
    let mut feed = Feed::default();
    let types = BTreeMap::new();
    let synced = feed.sync(&mut state, &api.view(), &types, 0);
    assert!(synced.skipped.is_empty(), "{:?}", synced.skipped);
    println!("feed: {} objects applied", synced.changes);
    let mut round = 1u64;
    let mut group = c.benchmark_group("reconcile");
    group.sample_size(20);
    group.bench_function("feed sync after 10 changes, 1000 nodes", |b| {
        b.iter(|| {
            round += 1;
            for pod in api.pods.iter_mut().take(10) {
                let mut p = k8s_openapi::api::core::v1::Pod::clone(pod);
                p.metadata.resource_version = Some(round.to_string());
                *pod = std::sync::Arc::new(p);
            }
            let synced = feed.sync(&mut state, &api.view(), &types, 0);
            black_box(synced.changes)
        });
    });
    group.bench_function("feed sync_changes after 10 changes, 1000 nodes", |b| {
        b.iter(|| {
            round += 1;
            let mut changed = Vec::new();
            for pod in api.pods.iter_mut().take(10) {
                let mut p = k8s_openapi::api::core::v1::Pod::clone(pod);
                p.metadata.resource_version = Some(round.to_string());
                *pod = std::sync::Arc::new(p);
                changed.push(pod.clone());
            }
            let changes = Changes {
                present: ApiObjects {
                    pods: &changed,
                    ..ApiObjects::default()
                },
                deleted: &[],
            };
            let synced = feed.sync_changes(&mut state, &changes, &api, &types);
            black_box(synced.changes)
        });
    });
    group.finish();
}

criterion_group!(benches, reconcile, feed);
criterion_main!(benches);
