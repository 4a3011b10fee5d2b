//! Runs every packing case once and prints a markdown table for `docs/benchmarks.md`.
//!
//! `cargo run --release -p karpenter-benches --example packing_report [-- FILTER]`: only
//! cases whose `group/pods` name contains FILTER run (`=karpenter-400/1000` selects exactly
//! that case, without `karpenter-400/10000`). Each case is solved twice, once with the
//! default options (greedy plus optimiser) and once with the optimiser disabled (the
//! Karpenter-equivalent greedy pass alone), so the table shows what the optimiser costs in
//! time and saves in price. Times are single `solve` calls (snapshot generation excluded);
//! the criterion bench gives statistically sound timings. With `KARPENTER_BENCH_VERBOSE=1`
//! it also prints, on stderr, how many claims of each cheapest instance type and of each
//! NodePool a plan launches, and the optimal whole-node cover behind the integer lower
//! bound (when it was computed).
//! With `KARPENTER_BENCH_DIGEST=1` it prints, on stderr, a 64-bit FNV-1a digest of each full
//! plan (both solves, `Debug` form), so two builds of the solver can be checked for identical
//! plans, not just identical table columns. With `KARPENTER_BENCH_REPEAT=N` each solve is
//! repeated N times and the best time is shown, which filters out a busy machine's noise
//! (and the first solve's cold caches). With `KARPENTER_BENCH_SEEDS=N` it then solves every
//! selected case again on the workloads of seeds 1 to N and prints a second table: mean and
//! worst gap to the lower bound, how many plans met their own bound (proven optimal) and the
//! slowest solve, which shows the table's single seed is not a lucky draw. With
//! `KARPENTER_BENCH_REPAIR_OWNERS=1` the optimiser re-pairs hostname-spread owners
//! (`OptimizerOptions::repair_spread_owners`); with `KARPENTER_BENCH_REPACK_OWNERS=0` it
//! keeps hostname-constrained owners on their greedy nodes instead of re-packing them with
//! the rest (`OptimizerOptions::repack_owners`). `KARPENTER_BENCH_WORK=N` sets the optimiser's
//! work budget (`OptimizerOptions::max_work`) instead of the default. With
//! `KARPENTER_BENCH_PROVE_BOUND=1` the lower bound is taken to the optimum of its
//! configuration LP (`OptimizerOptions::prove_bound`): minutes per case, same plans.
//! Cases whose pods have preferences (`aws-preferences`) get a second row, `(ignore)`,
//! solved with `--preference-policy ignore`.
#![forbid(unsafe_code)]

use karpenter_benches::{
    DEFAULT_SEED, PlanSummary, PodMix, fmt_opt, integer_covering_bound, packing_cases,
};
use karpenter_scheduling::solver::PreferencePolicy;
use karpenter_scheduling::{SolveOptions, solve};
use std::collections::BTreeMap;
use std::time::Instant;

fn main() {
    let filter = std::env::args().nth(1).unwrap_or_default();
    let mut options = SolveOptions::default();
    options.optimizer.repair_spread_owners =
        std::env::var_os("KARPENTER_BENCH_REPAIR_OWNERS").is_some_and(|v| v == "1");
    if let Some(v) = std::env::var_os("KARPENTER_BENCH_REPACK_OWNERS") {
        options.optimizer.repack_owners = v != "0";
    }
    options.optimizer.prove_bound =
        std::env::var_os("KARPENTER_BENCH_PROVE_BOUND").is_some_and(|v| v == "1");
    if let Some(work) = std::env::var("KARPENTER_BENCH_WORK")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
    {
        options.optimizer.max_work = work;
    }
    let mut greedy_only = SolveOptions::default();
    greedy_only.optimizer.enabled = false;
    println!(
        "| case | pods | nodes | unschedulable | time (ms) | pods/s | greedy-only time (ms) \
         | greedy price ($/h) | price ($/h) | saving % | lower bound ($/h) | gap % | budget exhausted |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|");
    let verbose = std::env::var_os("KARPENTER_BENCH_VERBOSE").is_some_and(|v| v == "1");
    let digest = std::env::var_os("KARPENTER_BENCH_DIGEST").is_some_and(|v| v == "1");
    let repeat = std::env::var("KARPENTER_BENCH_REPEAT")
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
        .unwrap_or(1)
        .max(1);
    let seeds = std::env::var("KARPENTER_BENCH_SEEDS")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
        .unwrap_or(0);
    // A case whose pods have preferences is solved a second time with them ignored
    // (`--preference-policy ignore`), its row named `group (ignore)`.
    let runs = packing_cases().into_iter().flat_map(|case| {
        let policies: &[PreferencePolicy] = if case.mix == PodMix::Preferences {
            &[PreferencePolicy::Respect, PreferencePolicy::Ignore]
        } else {
            &[PreferencePolicy::Respect]
        };
        policies.iter().map(move |&policy| (case, policy))
    });
    for (case, policy) in runs {
        let (group, options, greedy_only) = if policy == PreferencePolicy::Ignore {
            let ignoring = |o: &SolveOptions| SolveOptions {
                preference_policy: policy,
                ..o.clone()
            };
            (
                format!("{} (ignore)", case.group()),
                ignoring(&options),
                ignoring(&greedy_only),
            )
        } else {
            (
                case.group().to_owned(),
                options.clone(),
                greedy_only.clone(),
            )
        };
        // Filtered on the row's own name, so `(ignore)` selects the second rows.
        let name = format!("{group}/{}", case.pods);
        if !selected(&name, &filter) {
            continue;
        }
        let snapshot = case.snapshot(DEFAULT_SEED);
        let (plan, secs) = best_of(repeat, || solve(&snapshot, &options));
        let summary = PlanSummary::new(&snapshot, &plan);
        let plan_digest = digest.then(|| Fnv1a::digest(&plan));
        if verbose {
            // What the plan launches: claims per cheapest instance type, with their pods.
            let mut shapes: BTreeMap<&str, (usize, usize)> = BTreeMap::new();
            for claim in &plan.new_node_claims {
                let name = claim
                    .instance_type_options
                    .first()
                    .map_or("<none>", |o| o.name.as_ref());
                let entry = shapes.entry(name).or_default();
                entry.0 += 1;
                entry.1 += claim.pods.len();
            }
            for (name, (claims, pods)) in shapes {
                eprintln!("{name}: {claims} claims, {pods} pods");
            }
            // Where the pods went, for the cases with several weighted NodePools.
            let mut pools: BTreeMap<&str, (usize, usize)> = BTreeMap::new();
            for claim in &plan.new_node_claims {
                let entry = pools.entry(claim.node_pool.as_str()).or_default();
                entry.0 += 1;
                entry.1 += claim.pods.len();
            }
            for (pool, (claims, pods)) in pools {
                eprintln!("NodePool {pool}: {claims} claims, {pods} pods");
            }
            // The cover the integer bound prices, to compare node mixes with the plan's.
            if let Some(cover) = integer_covering_bound(&snapshot) {
                let mix: Vec<String> = cover
                    .nodes
                    .iter()
                    .map(|(name, count)| format!("{count}x {name}"))
                    .collect();
                eprintln!("integer cover {:.3} $/h: {}", cover.price, mix.join(", "));
            }
        }
        // Freed before the greedy-only solve, so that both solves find the allocator in the
        // same state (otherwise the second one pays for fresh memory the first one reused).
        drop(plan);
        let (greedy, greedy_secs) = best_of(repeat, || solve(&snapshot, &greedy_only));
        if let Some(plan_digest) = plan_digest {
            eprintln!(
                "{name}: plan {plan_digest:016x} greedy-only {:016x}",
                Fnv1a::digest(&greedy)
            );
        }
        // Without the optimiser's own figure, the greedy-only plan is the greedy price.
        let greedy_price = summary.greedy_price.unwrap_or(greedy.total_price);
        println!(
            "| {} | {} | {} | {} | {:.1} | {:.0} | {:.1} | {:.3} | {:.3} | {:.2} | {} | {} | {} |",
            group,
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
    if seeds > 0 {
        seed_sweep(&filter, seeds, &options);
    }
}

/// Whether the case `name` (`group/pods`) matches the command line's filter.
fn selected(name: &str, filter: &str) -> bool {
    match filter.strip_prefix('=') {
        Some(exact) => name == exact,
        None => name.contains(filter),
    }
}

/// The second table: every selected case on the workloads of seeds `1..=seeds`.
fn seed_sweep(filter: &str, seeds: u64, options: &SolveOptions) {
    println!();
    println!(
        "| case | pods | seeds | mean gap % | worst gap % (seed) | proven optimal | slowest solve (ms) |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|");
    for case in packing_cases() {
        let name = format!("{}/{}", case.group(), case.pods);
        if !selected(&name, filter) {
            continue;
        }
        let mut gaps: Vec<(f64, u64)> = Vec::new();
        let mut proven = 0u64;
        let mut slowest = 0.0f64;
        for seed in 1..=seeds {
            let snapshot = case.snapshot(seed);
            let start = Instant::now();
            let plan = solve(&snapshot, options);
            slowest = slowest.max(start.elapsed().as_secs_f64());
            // A plan that leaves pods out (a NodePool limit that binds) only meets the bound
            // of the pods it placed: that proves nothing about the pods it left out.
            if plan.unschedulable.is_empty()
                && plan
                    .lower_bound
                    .is_some_and(|b| plan.total_price - b <= 1e-6 * plan.total_price.max(1.0))
            {
                proven += 1;
            }
            if let Some(gap) = PlanSummary::new(&snapshot, &plan).gap_percent() {
                gaps.push((gap, seed));
            }
        }
        let mean = gaps.iter().map(|g| g.0).sum::<f64>() / gaps.len().max(1) as f64;
        let worst = gaps
            .iter()
            .copied()
            .max_by(|a, b| a.0.total_cmp(&b.0).then(b.1.cmp(&a.1)));
        println!(
            "| {} | {} | {} | {:.2} | {} | {}/{} | {:.1} |",
            case.group(),
            case.pods,
            seeds,
            mean,
            worst.map_or_else(|| "n/a".to_owned(), |(g, s)| format!("{g:.2} ({s})")),
            proven,
            seeds,
            slowest * 1e3,
        );
    }
}

/// Runs `solve` `repeat` times (at least once); returns the last result and the shortest
/// time in seconds. The solver is deterministic, so every run returns the same plan.
fn best_of<T>(repeat: usize, mut solve: impl FnMut() -> T) -> (T, f64) {
    let start = Instant::now();
    let mut result = solve();
    let mut best = start.elapsed().as_secs_f64();
    for _ in 1..repeat {
        let start = Instant::now();
        let value = solve();
        best = best.min(start.elapsed().as_secs_f64());
        // Dropping the previous plan is not part of the solve.
        result = value;
    }
    (result, best)
}

/// 64-bit FNV-1a over a value's `Debug` text, streamed so that a 20,000-pod plan is never
/// held as one string. Stable across runs and machines (unlike `DefaultHasher`'s contract).
struct Fnv1a(u64);

impl Fnv1a {
    fn digest(value: &impl std::fmt::Debug) -> u64 {
        use std::fmt::Write as _;
        let mut hasher = Fnv1a(0xcbf2_9ce4_8422_2325);
        // Writing into the hasher cannot fail.
        let _ = write!(hasher, "{value:?}");
        hasher.0
    }
}

impl std::fmt::Write for Fnv1a {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        for byte in s.bytes() {
            self.0 ^= u64::from(byte);
            self.0 = self.0.wrapping_mul(0x0000_0100_0000_01b3);
        }
        Ok(())
    }
}
