//! Runs every packing case once and prints a markdown table for `docs/benchmarks.md`.
//!
//! `cargo run --release -p karpenter-benches --bin packing_report [-- FILTER]`: only cases
//! whose `group/pods` name contains FILTER run. Each case is solved twice, once with the
//! default options (greedy plus optimiser) and once with the optimiser disabled (the
//! Karpenter-equivalent greedy pass alone), so the table shows what the optimiser costs in
//! time and saves in price. Times are single `solve` calls (snapshot generation excluded);
//! the criterion bench gives statistically sound timings. With `KARPENTER_BENCH_VERBOSE=1`
//! it also prints, on stderr, how many claims of each cheapest instance type a plan launches.
#![forbid(unsafe_code)]

use karpenter_benches::{DEFAULT_SEED, PlanSummary, fmt_opt, packing_cases};
use karpenter_scheduling::{SolveOptions, solve};
use std::collections::BTreeMap;
use std::time::Instant;

fn main() {
    let filter = std::env::args().nth(1).unwrap_or_default();
    let options = SolveOptions::default();
    let mut greedy_only = SolveOptions::default();
    greedy_only.optimizer.enabled = false;
    println!(
        "| case | pods | nodes | unschedulable | time (ms) | pods/s | greedy-only time (ms) \
         | greedy price ($/h) | price ($/h) | saving % | lower bound ($/h) | gap % | budget exhausted |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|");
    let verbose = std::env::var_os("KARPENTER_BENCH_VERBOSE").is_some_and(|v| v == "1");
    for case in packing_cases() {
        let name = format!("{}/{}", case.group(), case.pods);
        if !name.contains(&filter) {
            continue;
        }
        let snapshot = case.snapshot(DEFAULT_SEED);
        let start = Instant::now();
        let plan = solve(&snapshot, &options);
        let secs = start.elapsed().as_secs_f64();
        let start = Instant::now();
        let greedy = solve(&snapshot, &greedy_only);
        let greedy_secs = start.elapsed().as_secs_f64();
        let summary = PlanSummary::new(&snapshot, &plan);
        if verbose {
            // What the plan launches: claims per cheapest instance type, with their pods.
            let mut shapes: BTreeMap<&str, (usize, usize)> = BTreeMap::new();
            for claim in &plan.new_node_claims {
                let name = claim
                    .instance_type_options
                    .first()
                    .map_or("<none>", |o| o.name.as_str());
                let entry = shapes.entry(name).or_default();
                entry.0 += 1;
                entry.1 += claim.pods.len();
            }
            for (name, (claims, pods)) in shapes {
                eprintln!("{name}: {claims} claims, {pods} pods");
            }
        }
        // Without the optimiser's own figure, the greedy-only plan is the greedy price.
        let greedy_price = summary.greedy_price.unwrap_or(greedy.total_price);
        println!(
            "| {} | {} | {} | {} | {:.1} | {:.0} | {:.1} | {:.3} | {:.3} | {:.2} | {} | {} | {} |",
            case.group(),
            case.pods,
            summary.nodes,
            summary.unschedulable,
            secs * 1e3,
            case.pods as f64 / secs.max(1e-9),
            greedy_secs * 1e3,
            greedy_price,
            summary.price,
            (greedy_price - summary.price) / greedy_price.max(f64::MIN_POSITIVE) * 100.0,
            fmt_opt(summary.lower_bound(), 3),
            fmt_opt(summary.gap_percent(), 2),
            summary
                .optimizer
                .as_ref()
                .map_or("n/a", |s| if s.budget_exhausted { "yes" } else { "no" }),
        );
    }
}
