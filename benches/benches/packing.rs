//! Criterion benchmark of `solve` on Karpenter's scheduling-benchmark workload (400
//! synthetic instance types, 1 to 20,000 pods) and on the real AWS catalogue.
//!
//! `cargo bench -p karpenter-benches --bench packing [-- FILTER]`. Throughput is reported
//! in pods (elements) per second.
//!
//! Before a selected case is sampled, one solve outside criterion's timing prints a
//! `quality` line: nodes, price, lower bound, gap and that solve's wall time. A case whose
//! single solve takes longer than [`SLOW_CASE`] is not sampled (ten samples of it would
//! take minutes on two cores); its `quality` line is the measurement. Set
//! `KARPENTER_BENCH_SAMPLE_SLOW=1` to sample such cases anyway.
#![forbid(unsafe_code)]

use criterion::measurement::WallTime;
use criterion::{
    BenchmarkGroup, BenchmarkId, Criterion, SamplingMode, Throughput, criterion_group,
    criterion_main,
};
use karpenter_benches::{Case, DEFAULT_SEED, PlanSummary, fmt_opt, packing_cases};
use karpenter_scheduling::{SolveOptions, solve};
use std::collections::BTreeMap;
use std::hint::black_box;
use std::time::{Duration, Instant};

/// Single-solve time above which a case is reported but not sampled.
const SLOW_CASE: Duration = Duration::from_secs(8);

/// Sampling for a case: large cases take up to seconds per solve, so they get criterion's
/// minimum of ten flat samples and a short warm-up to keep the bench within minutes.
fn configure(group: &mut BenchmarkGroup<'_, WallTime>, pods: usize) {
    if pods >= 2000 {
        group
            .sampling_mode(SamplingMode::Flat)
            .sample_size(10)
            .warm_up_time(Duration::from_millis(500))
            .measurement_time(Duration::from_secs(5));
    } else {
        group
            .sampling_mode(SamplingMode::Auto)
            .sample_size(20)
            .warm_up_time(Duration::from_secs(1))
            .measurement_time(Duration::from_secs(3));
    }
}

/// Criterion flags followed by a value, which must not be mistaken for a filter.
const FLAGS_WITH_VALUE: [&str; 15] = [
    "--save-baseline",
    "--baseline",
    "--baseline-lenient",
    "--load-baseline",
    "--sample-size",
    "--warm-up-time",
    "--measurement-time",
    "--nresamples",
    "--noise-threshold",
    "--confidence-level",
    "--significance-level",
    "--profile-time",
    "--output-format",
    "--color",
    "--plotting-backend",
];

/// Filters given on the command line (`cargo bench -- FILTER`), matched as substrings of
/// `group/pods`, the way criterion names these benchmarks, so filtered-out cases do not pay
/// for their untimed solve; flags (and their values) are criterion's own.
fn filters() -> Vec<String> {
    let mut out = Vec::new();
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        if FLAGS_WITH_VALUE.contains(&arg.as_str()) {
            args.next();
        } else if !arg.starts_with('-') {
            out.push(arg);
        }
    }
    out
}

fn packing(c: &mut Criterion) {
    let options = SolveOptions::default();
    let filters = filters();
    let sample_slow = std::env::var_os("KARPENTER_BENCH_SAMPLE_SLOW").is_some_and(|v| v == "1");
    let mut groups: BTreeMap<&'static str, Vec<Case>> = BTreeMap::new();
    for case in packing_cases() {
        let id = format!("{}/{}", case.group(), case.pods);
        if filters.is_empty() || filters.iter().any(|f| id.contains(f.as_str())) {
            groups.entry(case.group()).or_default().push(case);
        }
    }
    for (name, cases) in groups {
        let mut group = c.benchmark_group(name);
        for case in cases {
            let snapshot = case.snapshot(DEFAULT_SEED);
            let start = Instant::now();
            let plan = solve(&snapshot, &options);
            let elapsed = start.elapsed();
            let summary = PlanSummary::new(&snapshot, &plan);
            println!(
                "quality {}/{}: one solve {:.1} ms ({:.0} pods/s), nodes {}, unschedulable {}, \
                 price {:.3}, greedy price {}, lower bound {}, gap% {}",
                case.group(),
                case.pods,
                elapsed.as_secs_f64() * 1e3,
                case.pods as f64 / elapsed.as_secs_f64().max(1e-9),
                summary.nodes,
                summary.unschedulable,
                summary.price,
                fmt_opt(summary.greedy_price, 3),
                fmt_opt(summary.lower_bound(), 3),
                fmt_opt(summary.gap_percent(), 2),
            );
            if elapsed > SLOW_CASE && !sample_slow {
                println!(
                    "skipping criterion sampling of {}/{}: one solve took {:.1} s (> {} s); \
                     KARPENTER_BENCH_SAMPLE_SLOW=1 samples it",
                    case.group(),
                    case.pods,
                    elapsed.as_secs_f64(),
                    SLOW_CASE.as_secs()
                );
                continue;
            }
            configure(&mut group, case.pods);
            group.throughput(Throughput::Elements(case.pods as u64));
            group.bench_with_input(BenchmarkId::from_parameter(case.pods), &snapshot, |b, s| {
                b.iter(|| solve(black_box(s), black_box(&options)))
            });
        }
        group.finish();
    }
}

criterion_group!(benches, packing);
criterion_main!(benches);
