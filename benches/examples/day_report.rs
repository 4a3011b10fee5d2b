//! What a cluster pays over a day: runs each fleet shape of `benches/scenarios/day-*.yaml`
//! for 24 hours of simulated time with karpenter-rs and with the Karpenter-equivalent (the
//! greedy first fit, as `karpenter simulate --compare` runs it), computes the sum of the
//! hourly lower bounds (each hour's wanted pods planned from scratch, the plan's
//! `lowerBound`), and prints a markdown table for `docs/benchmarks.md` with the targets of
//! issue 39 checked on every shape.
//!
//! `cargo run --release -p karpenter-benches --example day_report [-- FILTER]`: only shapes
//! whose file name contains FILTER run. `KARPENTER_DAY_SCENARIOS=DIR` reads the shapes from
//! another directory. `KARPENTER_DAY_LOG=DIR` writes each run's simulator log to
//! `DIR/<shape>-rs.log` and `DIR/<shape>-keq.log` (which method evicted how many pods, and
//! when: for churn analysis).
//!
//! Targets, per shape:
//! - **saving**: the average $/h at least 20 % below the Karpenter-equivalent's, or, where the
//!   hourly bounds prove 20 % impossible (the bound itself is less than 20 % below the
//!   Karpenter-equivalent), at most 1.05 × the bound;
//! - **bound**: at most 1.15 × the sum of the hourly bounds;
//! - **pending**: pending-time p99 at most 10 s above the Karpenter-equivalent's;
//! - **evictions**: at most 1.5 × the Karpenter-equivalent's.
#![forbid(unsafe_code)]

use karpenter_simulator::{Disk, Report, RunOptions, Scenario, run_scenario};
use std::path::{Path, PathBuf};
use std::time::Instant;

/// One shape's two runs.
struct Row {
    name: String,
    optimized: Report,
    greedy: Report,
    seconds: f64,
}

impl Row {
    fn bound(&self) -> f64 {
        self.optimized
            .lower_bound
            .as_ref()
            .map_or(0.0, |b| b.average_per_hour)
    }
}

fn run(scenario: &Scenario, optimizer: bool) -> Report {
    let mut lines = String::new();
    let logging = std::env::var_os("KARPENTER_DAY_LOG");
    let report = run_scenario(
        scenario,
        RunOptions {
            optimizer,
            lower_bound: optimizer,
        },
        &Disk,
        &mut |l| {
            if logging.is_some() {
                lines.push_str(&format!("{:>9.1} {}\n", l.at as f64 / 1000.0, l.message));
            }
        },
        &mut |_| {},
    )
    .unwrap_or_else(|e| panic!("{}: {e}", scenario.name));
    if let Some(dir) = logging {
        let which = if optimizer { "rs" } else { "keq" };
        let path = Path::new(&dir).join(format!("{}-{which}.log", scenario.name));
        std::fs::write(&path, lines).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    }
    report
}

fn tick(ok: bool) -> &'static str {
    if ok { "yes" } else { "**no**" }
}

fn main() {
    let filter = std::env::args().nth(1).unwrap_or_default();
    let dir = std::env::var_os("KARPENTER_DAY_SCENARIOS").map_or_else(
        || Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios"),
        PathBuf::from,
    );
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.file_name().and_then(|n| n.to_str()).is_some_and(|n| {
                n.starts_with("day-") && n.ends_with(".yaml") && n.contains(&filter)
            })
        })
        .collect();
    files.sort();
    let mut rows = Vec::new();
    for path in &files {
        let scenario =
            Scenario::load(path, &Disk).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let start = Instant::now();
        let optimized = run(&scenario, true);
        let greedy = run(&scenario, false);
        let seconds = start.elapsed().as_secs_f64();
        eprintln!("{}: {seconds:.1} s", scenario.name);
        rows.push(Row {
            name: scenario.name.clone(),
            optimized,
            greedy,
            seconds,
        });
    }
    println!(
        "| shape | karpenter-rs $/h | Karpenter-eq. $/h | saving % | hourly bounds $/h | \
         bound below K-eq. % | karpenter-rs / bound | K-eq. / bound | pending p99 s (rs / K-eq.) \
         | evictions (rs / K-eq.) | never scheduled (rs / K-eq.) | run s |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for r in &rows {
        let (o, g, b) = (
            r.optimized.cost.average_per_hour,
            r.greedy.cost.average_per_hour,
            r.bound(),
        );
        let pct = |x: f64, of: f64| if of > 0.0 { x / of * 100.0 } else { 0.0 };
        let ratio = |x: f64| if b > 0.0 { x / b } else { f64::NAN };
        println!(
            "| {} | {o:.3} | {g:.3} | {:.1} | {b:.3} | {:.1} | {:.3} | {:.3} | {:.0} / {:.0} | {} / {} | {} / {} | {:.1} |",
            r.name,
            pct(g - o, g),
            pct(g - b, g),
            ratio(o),
            ratio(g),
            r.optimized.pods.pending_seconds.p99,
            r.greedy.pods.pending_seconds.p99,
            r.optimized.pods.evicted,
            r.greedy.pods.evicted,
            r.optimized.pods.never_scheduled.len(),
            r.greedy.pods.never_scheduled.len(),
            r.seconds,
        );
    }
    println!();
    println!(
        "| shape | ≥ 20 % below K-eq. (or ≤ 1.05 × bound where 20 % is impossible) | ≤ 1.15 × bound | pending p99 ≤ K-eq. + 10 s | evictions ≤ 1.5 × K-eq. |"
    );
    println!("|---|---|---|---|---|");
    for r in &rows {
        let (o, g, b) = (
            r.optimized.cost.average_per_hour,
            r.greedy.cost.average_per_hour,
            r.bound(),
        );
        // The bound proves a 20 % saving impossible when even it is less than 20 % below
        // the Karpenter-equivalent.
        let impossible = b > 0.8 * g;
        let saving = if impossible {
            format!(
                "{} (20 % impossible: the bound is {:.1} % below; {:.3} × bound)",
                tick(o <= 1.05 * b),
                (g - b) / g * 100.0,
                o / b
            )
        } else {
            format!(
                "{} ({:.1} %)",
                tick(o <= 0.8 * g),
                (g - o) / g.max(f64::MIN_POSITIVE) * 100.0
            )
        };
        let (po, pg) = (
            r.optimized.pods.pending_seconds.p99,
            r.greedy.pods.pending_seconds.p99,
        );
        let (eo, eg) = (
            r.optimized.pods.evicted as f64,
            r.greedy.pods.evicted as f64,
        );
        println!(
            "| {} | {saving} | {} ({:.3}) | {} ({po:.0} vs {pg:.0}) | {} ({eo:.0} vs {eg:.0}) |",
            r.name,
            tick(b > 0.0 && o <= 1.15 * b),
            if b > 0.0 { o / b } else { f64::NAN },
            tick(po <= pg + 10.0),
            tick(eo <= 1.5 * eg),
        );
        if let Some(bound) = &r.optimized.lower_bound {
            let hourly: Vec<String> = bound
                .hourly
                .iter()
                .map(|h| format!("{:.2}", h.per_hour))
                .collect();
            eprintln!(
                "{}: hourly bounds $/h [{}]; at most {} pod(s) a from-scratch plan could not place",
                r.name,
                hourly.join(", "),
                bound.unplaced_pods
            );
        }
        if let Some(bound) = &r.optimized.lower_bound
            && bound.plans_without_bound > 0
        {
            eprintln!(
                "{}: {} plan(s) of the hourly bound reported no bound (their price was used)",
                r.name, bound.plans_without_bound
            );
        }
    }
}
