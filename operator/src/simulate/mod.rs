//! `karpenter simulate SCENARIO.yaml`: the real provisioning and disruption logic on an
//! embedded cluster (the [`karpenter_cluster`] index and the fake cloud provider) with a virtual
//! clock. Prints one log line per decision and a final report; `--compare` runs the scenario
//! with and without the packing optimiser. See docs/simulator.md.

pub mod engine;
pub mod metrics;
pub mod scenario;

use crate::table::Table;
use anyhow::Result;
use engine::{Engine, LogLine, RunOptions};
use metrics::Report;
use scenario::Scenario;
use std::io::{IsTerminal, Write};
use std::path::PathBuf;

/// Arguments of `karpenter simulate`.
#[derive(Debug, clap::Args)]
pub struct SimulateArgs {
    /// The scenario file (`apiVersion: karpenter-rs/v1alpha1`, `kind: Scenario`).
    pub scenario: PathBuf,
    /// Output format of the report.
    #[arg(long, short = 'o', value_enum, default_value_t = Output::Text)]
    pub output: Output,
    /// Print only the report, not the decision log.
    #[arg(long, short = 'q')]
    pub quiet: bool,
    /// Run twice — with the packing optimiser and as Karpenter's greedy first fit — and
    /// show both reports side by side.
    #[arg(long)]
    pub compare: bool,
}

/// Report formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Output {
    /// Log lines and tables.
    Text,
    /// The report as JSON on stdout (log lines, unless `--quiet`, go to stderr).
    Json,
}

/// Formats virtual time as `HH:MM:SS` (days add to the hours).
pub fn clock(ms: i64) -> String {
    let s = ms / 1000;
    format!("{:02}:{:02}:{:02}", s / 3600, (s / 60) % 60, s % 60)
}

/// Runs one scenario with `options`, sending every log line to `log`.
pub fn run_scenario(
    scenario: &Scenario,
    options: RunOptions,
    log: &mut dyn FnMut(&LogLine),
    progress: &mut dyn FnMut(i64),
) -> Result<Report> {
    let mut engine = Engine::new(scenario, options, log)?;
    engine.run(progress)?;
    let mut report = engine.metrics.report.take().unwrap_or_default();
    report.scenario = scenario.name.clone();
    report.description = scenario.description.clone();
    Ok(report)
}

/// Runs the subcommand.
pub fn run(args: &SimulateArgs, out: &mut dyn Write) -> Result<()> {
    let scenario = Scenario::load(&args.scenario)?;
    let json = args.output == Output::Json;
    let bar = (!args.quiet && std::io::stderr().is_terminal() && scenario.duration >= 3_600_000)
        .then(|| {
            let bar = indicatif::ProgressBar::new((scenario.duration / 1000).unsigned_abs());
            bar.set_style(
                indicatif::ProgressStyle::with_template(
                    "{spinner} simulating [{bar:40}] {msg} ({elapsed})",
                )
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
            );
            bar
        });
    let runs: &[bool] = if args.compare {
        &[true, false]
    } else {
        &[scenario.settings.optimizer]
    };
    let mut reports = Vec::new();
    let mut failure: Option<std::io::Error> = None;
    for &optimizer in runs {
        if args.compare && !args.quiet {
            let title = if optimizer {
                "karpenter-rs (optimiser on)"
            } else {
                "greedy first fit (Karpenter-equivalent)"
            };
            let line = format!("=== run: {title} ===");
            emit(&bar, json, out, &line, &mut failure);
        }
        let mut log = |line: &LogLine| {
            if args.quiet {
                return;
            }
            let text = format!("{} {}", clock(line.at), line.message);
            emit(&bar, json, out, &text, &mut failure);
        };
        let mut progress = |t: i64| {
            if let Some(b) = &bar {
                b.set_position((t / 1000).unsigned_abs());
                b.set_message(clock(t));
            }
        };
        let report = run_scenario(&scenario, RunOptions { optimizer }, &mut log, &mut progress)?;
        if let Some(e) = failure.take() {
            return Err(e.into());
        }
        if let Some(b) = &bar {
            b.reset();
        }
        reports.push(report);
    }
    if let Some(b) = &bar {
        b.finish_and_clear();
    }
    if json {
        if args.compare {
            let value = serde_json::json!({
                "optimized": reports[0],
                "greedy": reports[1],
            });
            serde_json::to_writer_pretty(&mut *out, &value)?;
        } else {
            serde_json::to_writer_pretty(&mut *out, &reports[0])?;
        }
        writeln!(out)?;
    } else if args.compare {
        if !args.quiet {
            writeln!(out)?;
        }
        write!(out, "{}", render_comparison(&reports[0], &reports[1]))?;
    } else {
        if !args.quiet {
            writeln!(out)?;
        }
        write!(out, "{}", render(&reports[0]))?;
    }
    Ok(())
}

fn emit(
    bar: &Option<indicatif::ProgressBar>,
    to_stderr: bool,
    out: &mut dyn Write,
    text: &str,
    failure: &mut Option<std::io::Error>,
) {
    if failure.is_some() {
        return;
    }
    let mut write = || -> std::io::Result<()> {
        if to_stderr {
            writeln!(std::io::stderr(), "{text}")
        } else {
            writeln!(out, "{text}")
        }
    };
    let result = match bar {
        Some(b) => b.suspend(write),
        None => write(),
    };
    if let Err(e) = result {
        *failure = Some(e);
    }
}

fn pct(x: f64) -> String {
    format!("{:.1}%", x * 100.0)
}

/// The report as text tables.
pub fn render(r: &Report) -> String {
    let mut out = String::new();
    out.push_str(&format!(
        "scenario {} — {} simulated{}\n\n",
        r.scenario,
        clock((r.duration_seconds * 1000.0) as i64),
        if r.optimizer {
            ""
        } else {
            " (greedy first fit)"
        }
    ));
    if !r.description.is_empty() {
        out.insert_str(out.len() - 1, &format!("{}\n", r.description.trim()));
    }
    let mut nodes = Table::new(&[
        "INSTANCE TYPE",
        "CAPACITY",
        "LAUNCHED",
        "AT END",
        "NODE-HOURS",
        "COST $",
    ]);
    for row in &r.nodes.by_type {
        nodes.row(vec![
            row.instance_type.clone(),
            row.capacity_type.clone(),
            row.launched.to_string(),
            row.at_end.to_string(),
            format!("{:.2}", row.node_hours),
            format!("{:.4}", row.cost),
        ]);
    }
    if !nodes.is_empty() {
        out.push_str(&nodes.render());
        out.push('\n');
    }
    out.push_str(&format!(
        "nodes: {} launched, {} terminated, {} at end, peak {}\n",
        r.nodes.launched, r.nodes.terminated, r.nodes.at_end, r.nodes.peak
    ));
    let zones: Vec<String> = r
        .nodes
        .by_zone
        .iter()
        .map(|(z, n)| format!("{z} {n}"))
        .collect();
    if !zones.is_empty() {
        out.push_str(&format!("nodes by zone: {}\n", zones.join(", ")));
    }
    out.push_str(&format!(
        "cost: ${:.4} total, ${:.4}/h average, ${:.4}/h peak, ${:.4}/h at end\n",
        r.cost.total, r.cost.average_per_hour, r.cost.peak_per_hour, r.cost.at_end_per_hour
    ));
    let series: Vec<String> = r
        .cost
        .over_time
        .iter()
        .map(|p| {
            format!(
                "{} ${:.3}",
                clock((p.at_seconds * 1000.0) as i64)[..5].to_owned(),
                p.per_hour
            )
        })
        .collect();
    for chunk in series.chunks(6) {
        out.push_str(&format!("  $/h over time: {}\n", chunk.join(" | ")));
    }
    out.push_str(&format!(
        "utilization: cpu {}, memory {} (requests / allocatable, time-weighted)\n",
        pct(r.utilization.cpu),
        pct(r.utilization.memory)
    ));
    let p = &r.pods.pending_seconds;
    out.push_str(&format!(
        "pods: {} created, {} scheduled, {} evicted, {} completed; pending time p50 {:.0}s p90 {:.0}s p99 {:.0}s max {:.0}s\n",
        r.pods.created, r.pods.scheduled, r.pods.evicted, r.pods.completed, p.p50, p.p90, p.p99, p.max
    ));
    if r.disruptions.is_empty() {
        out.push_str("disruptions: none\n");
    } else {
        let list: Vec<String> = r
            .disruptions
            .iter()
            .map(|(k, v)| format!("{k} {v}"))
            .collect();
        out.push_str(&format!("disruptions (nodes): {}\n", list.join(", ")));
    }
    let a = &r.activity;
    out.push_str(&format!(
        "activity: {} provisioning solve(s), {} nodeclaim(s) created, {} launch failure(s), {} disruption pass(es), {} command(s) invalidated, at most {} node(s) disrupting at once, longest drain {:.0}s\n",
        a.provisioning_solves,
        a.node_claims_created,
        a.launch_failures,
        a.disruption_passes,
        a.invalidated_commands,
        a.peak_disrupting,
        a.longest_drain_seconds
    ));
    if !r.pods.never_scheduled.is_empty() {
        let mut t = Table::new(&["POD NEVER SCHEDULED", "WAITED", "REASON"]);
        for u in &r.pods.never_scheduled {
            t.row(vec![
                u.pod.clone(),
                format!("{:.0}s", u.pending_seconds),
                u.reason.clone(),
            ]);
        }
        out.push('\n');
        out.push_str(&t.render());
    }
    if !r.ignored_kinds.is_empty() {
        let list: Vec<String> = r
            .ignored_kinds
            .iter()
            .map(|(k, v)| format!("{v} {k}"))
            .collect();
        out.push_str(&format!("not simulated: {}\n", list.join(", ")));
    }
    out
}

/// Two reports side by side.
pub fn render_comparison(optimized: &Report, greedy: &Report) -> String {
    let mut t = Table::new(&["", "KARPENTER-RS", "GREEDY FIRST FIT"]);
    let both = |f: &dyn Fn(&Report) -> String| (f(optimized), f(greedy));
    let rows: Vec<(&str, (String, String))> = vec![
        ("total cost $", both(&|r| format!("{:.4}", r.cost.total))),
        (
            "average $/h",
            both(&|r| format!("{:.4}", r.cost.average_per_hour)),
        ),
        (
            "peak $/h",
            both(&|r| format!("{:.4}", r.cost.peak_per_hour)),
        ),
        ("nodes launched", both(&|r| r.nodes.launched.to_string())),
        ("peak nodes", both(&|r| r.nodes.peak.to_string())),
        ("nodes at end", both(&|r| r.nodes.at_end.to_string())),
        ("cpu utilization", both(&|r| pct(r.utilization.cpu))),
        ("memory utilization", both(&|r| pct(r.utilization.memory))),
        (
            "pending p50 / p99 s",
            both(&|r| {
                format!(
                    "{:.0} / {:.0}",
                    r.pods.pending_seconds.p50, r.pods.pending_seconds.p99
                )
            }),
        ),
        ("pods evicted", both(&|r| r.pods.evicted.to_string())),
        (
            "nodes disrupted",
            both(&|r| r.disruptions.values().sum::<usize>().to_string()),
        ),
        (
            "never scheduled",
            both(&|r| r.pods.never_scheduled.len().to_string()),
        ),
    ];
    for (name, (a, b)) in rows {
        t.row(vec![name.to_owned(), a, b]);
    }
    let mut out = format!("scenario {} — comparison\n\n", optimized.scenario);
    out.push_str(&t.render());
    if greedy.cost.total > 0.0 {
        let saving = (greedy.cost.total - optimized.cost.total) / greedy.cost.total * 100.0;
        out.push_str(&format!(
            "\nkarpenter-rs saves {saving:.1}% of the greedy cost\n"
        ));
    }
    out
}
