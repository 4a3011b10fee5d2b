//! # karpenter-simulator
//!
//! The real provisioning and disruption logic of karpenter-rs on an embedded cluster (the
//! [`karpenter_cluster`] index and the fake cloud provider) with a virtual clock: the
//! scenario format ([`scenario`]), the engine that runs one ([`engine`]) and what a run
//! measures ([`metrics::Report`], with the run over time in [`timeline`]), rendered as text
//! by [`render`] and [`render_comparison`] and as a self-contained HTML page of charts and
//! tables by [`render_html`] and [`render_html_comparison`] ([`html`]). `karpenter simulate`
//! is a thin command around this crate; see docs/simulator.md.
//!
//! Deterministic and without I/O of its own: time is virtual, maps are ordered, names come
//! from counters, and every file a scenario names is read through the caller's [`Files`].
//! The same scenario and [`RunOptions`] always give the same log and the same report.
#![forbid(unsafe_code)]

mod buffers;
mod controller_manager;
pub mod engine;
#[doc(hidden)]
pub mod fuzzing;
pub mod html;
pub mod kubelet;
pub mod lower_bound;
pub mod metrics;
pub mod overlays;
pub mod plan_json;
pub mod plan_table;
mod rate_limiter;
pub mod scenario;
pub mod table;
pub mod timeline;
mod workloads;

pub use engine::{Engine, LogLine, RunOptions, SimulationError};
pub use html::{CHARTS, render_html, render_html_comparison};
pub use metrics::Report;
pub use scenario::{Scenario, ScenarioError};

use karpenter_cluster::manifests::{Document, ManifestError, parse_str};
use std::path::Path;
use table::Table;

/// The files a scenario names — the scenario itself, its `{file: path}` manifests and its
/// `settings.catalogue` — as the simulator sees them. The crate reads nothing by itself:
/// `karpenter simulate` passes an implementation that reads the disk, a test may serve text
/// from memory.
pub trait Files {
    /// The text of the file at `path`.
    ///
    /// # Errors
    ///
    /// Why the file cannot be read; the simulator reports it with the path.
    fn read_to_string(&self, path: &Path) -> std::io::Result<String>;

    /// The manifest documents at `path`, for a scenario's `{file: path}` reference. The
    /// default reads the one file through [`Files::read_to_string`] and parses it with
    /// [`parse_str`]; an implementation may also accept directories.
    ///
    /// # Errors
    ///
    /// [`ManifestError::Io`] naming `path` when it cannot be read, or the parser's error
    /// naming the file and document.
    fn manifests(&self, path: &Path) -> Result<Vec<Document>, ManifestError> {
        manifest_file(self, path)
    }
}

/// The local disk as [`Files`]: every path is read as it is, and a `{file: path}` reference
/// names one file (`karpenter simulate` also accepts directories; it brings its own reader).
#[derive(Debug, Clone, Copy, Default)]
pub struct Disk;

impl Files for Disk {
    fn read_to_string(&self, path: &Path) -> std::io::Result<String> {
        std::fs::read_to_string(path)
    }
}

/// A finished run: its report and every decision it logged, in order.
#[derive(Debug, Clone)]
pub struct Run {
    /// The report [`run_scenario`] returns.
    pub report: Report,
    /// The decision log, as [`run_scenario`] sends it line by line.
    pub log: Vec<LogLine>,
}

impl Run {
    /// The log's messages without their times.
    pub fn messages(&self) -> Vec<String> {
        self.log.iter().map(|l| l.message.clone()).collect()
    }
}

/// Runs `scenario` to its end as [`run_scenario`] does, keeping the decision log instead of
/// streaming it (for tests and tools that read the log afterwards).
///
/// # Errors
///
/// As [`run_scenario`].
pub fn run_collected(
    scenario: &Scenario,
    options: RunOptions,
    files: &dyn Files,
) -> Result<Run, SimulationError> {
    let mut log = Vec::new();
    let report = run_scenario(
        scenario,
        options,
        files,
        &mut |l: &LogLine| log.push(l.clone()),
        &mut |_| {},
    )?;
    Ok(Run { report, log })
}

/// The documents of the one file at `path`, read through `files`; a read error becomes
/// [`ManifestError::Io`] naming `path`.
fn manifest_file<F: Files + ?Sized>(
    files: &F,
    path: &Path,
) -> Result<Vec<Document>, ManifestError> {
    let text = files
        .read_to_string(path)
        .map_err(|source| ManifestError::Io {
            path: path.display().to_string(),
            source,
        })?;
    parse_str(path, &text)
}

/// Formats virtual time as `HH:MM:SS` (days add to the hours).
pub fn clock(ms: i64) -> String {
    let s = ms / 1000;
    format!("{:02}:{:02}:{:02}", s / 3600, (s / 60) % 60, s % 60)
}

/// Runs one scenario with `options` to its end and returns its report (named and described
/// as the scenario is). Every decision is sent to `log` as it is made, and `progress` gets
/// the virtual time after each step; `files` serves the catalogue the scenario names.
///
/// # Errors
///
/// A manifest or timeline event the simulator cannot apply, or a catalogue that cannot be
/// read; each names the file, document or event and the field.
pub fn run_scenario(
    scenario: &Scenario,
    options: RunOptions,
    files: &dyn Files,
    log: &mut dyn FnMut(&LogLine),
    progress: &mut dyn FnMut(i64),
) -> Result<Report, SimulationError> {
    let mut engine = Engine::new(scenario, options, files, log)?;
    engine.run(progress)?;
    let mut report = engine.metrics.report.take().unwrap_or_default();
    report.lower_bound = engine.lower_bound();
    report.scenario = scenario.name.clone();
    report.description = scenario.description.clone();
    Ok(report)
}

fn pct(x: f64) -> String {
    format!("{:.1}%", x * 100.0)
}

/// The report as text: a header, a table of instance types, then one line per measure
/// (what `karpenter simulate` prints after the log).
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
    let mut nodes = Table::new(&TYPE_COLUMNS);
    for row in &r.nodes.by_type {
        nodes.row(type_cells(row));
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
    if !r.reservations.is_empty() {
        let mut t = Table::new(&[
            "CAPACITY RESERVATION",
            "INSTANCE TYPE",
            "ZONE",
            "COUNT",
            "LAUNCHED INTO",
            "IN USE AT END",
        ]);
        for row in &r.reservations {
            t.row(vec![
                row.id.clone(),
                row.instance_type.clone(),
                row.zone.clone(),
                row.count.to_string(),
                row.launched.to_string(),
                row.in_use_at_end.to_string(),
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
    if let Some(bound) = &r.lower_bound {
        let label = if r.optimizer {
            "karpenter-rs"
        } else {
            "greedy first fit"
        };
        out.push_str(&bound_lines(bound, &[(label, r)]));
    }
    out
}

/// The columns of the instance-type table.
pub(crate) const TYPE_COLUMNS: [&str; 6] = [
    "INSTANCE TYPE",
    "CAPACITY",
    "LAUNCHED",
    "AT END",
    "NODE-HOURS",
    "COST $",
];

/// One row of the instance-type table, under [`TYPE_COLUMNS`].
pub(crate) fn type_cells(row: &metrics::TypeRow) -> Vec<String> {
    vec![
        row.instance_type.clone(),
        row.capacity_type.clone(),
        row.launched.to_string(),
        row.at_end.to_string(),
        format!("{:.2}", row.node_hours),
        format!("{:.4}", row.cost),
    ]
}

/// The figures two runs are compared on, named: what [`render_comparison`] and the HTML
/// report's summary show for each run.
pub(crate) fn summary_rows(r: &Report) -> Vec<(&'static str, String)> {
    vec![
        ("total cost $", format!("{:.4}", r.cost.total)),
        ("average $/h", format!("{:.4}", r.cost.average_per_hour)),
        ("peak $/h", format!("{:.4}", r.cost.peak_per_hour)),
        ("nodes launched", r.nodes.launched.to_string()),
        ("peak nodes", r.nodes.peak.to_string()),
        ("nodes at end", r.nodes.at_end.to_string()),
        ("cpu utilization", pct(r.utilization.cpu)),
        ("memory utilization", pct(r.utilization.memory)),
        (
            "pending p50 / p99 s",
            format!(
                "{:.0} / {:.0}",
                r.pods.pending_seconds.p50, r.pods.pending_seconds.p99
            ),
        ),
        ("pods evicted", r.pods.evicted.to_string()),
        (
            "nodes disrupted",
            r.disruptions.values().sum::<usize>().to_string(),
        ),
        ("never scheduled", r.pods.never_scheduled.len().to_string()),
    ]
}

/// The share of the greedy run's cost, in percent, that the optimised run saves (negative
/// when it costs more); `None` when the greedy run cost nothing.
pub(crate) fn saving_percent(optimized: &Report, greedy: &Report) -> Option<f64> {
    (greedy.cost.total > 0.0)
        .then(|| (greedy.cost.total - optimized.cost.total) / greedy.cost.total * 100.0)
}

/// The line a comparison (`karpenter simulate --compare`) prints before the log of each
/// run: the packing optimiser's, or the greedy first fit that is Karpenter's equivalent.
pub fn run_heading(optimizer: bool) -> String {
    let title = if optimizer {
        "karpenter-rs (optimiser on)"
    } else {
        "greedy first fit (Karpenter-equivalent)"
    };
    format!("=== run: {title} ===")
}

/// Two reports of the same scenario side by side — the optimiser's and the greedy first
/// fit's — and the share of the greedy cost the optimiser saves.
pub fn render_comparison(optimized: &Report, greedy: &Report) -> String {
    let mut t = Table::new(&["", "KARPENTER-RS", "GREEDY FIRST FIT"]);
    for ((name, a), (_, b)) in summary_rows(optimized)
        .into_iter()
        .zip(summary_rows(greedy))
    {
        t.row(vec![name.to_owned(), a, b]);
    }
    let mut out = format!("scenario {} — comparison\n\n", optimized.scenario);
    out.push_str(&t.render());
    if let Some(saving) = saving_percent(optimized, greedy) {
        out.push_str(&format!(
            "\nkarpenter-rs saves {saving:.1}% of the greedy cost\n"
        ));
    }
    if let Some(bound) = &optimized.lower_bound {
        out.push_str(&bound_lines(
            bound,
            &[("karpenter-rs", optimized), ("greedy first fit", greedy)],
        ));
    }
    out
}

/// The hourly lower bound and each run's cost against it, as the reports print them.
fn bound_lines(bound: &lower_bound::LowerBoundReport, runs: &[(&str, &Report)]) -> String {
    let mut out = format!(
        "hourly lower bound: ${:.4}/h average, ${:.4} over the run ({} pod set(s) planned from scratch)\n",
        bound.average_per_hour, bound.total, bound.plans
    );
    if bound.plans_without_bound > 0 {
        out.push_str(&format!(
            "  warning: {} plan(s) reported no lower bound; their price was used instead\n",
            bound.plans_without_bound
        ));
    }
    if bound.unplaced_pods > 0 {
        out.push_str(&format!(
            "  warning: a plan from scratch could not place up to {} pod(s); the bound leaves them out\n",
            bound.unplaced_pods
        ));
    }
    if bound.total > 0.0 {
        let ratios: Vec<String> = runs
            .iter()
            .map(|(label, r)| format!("{label} {:.3}x", r.cost.total / bound.total))
            .collect();
        out.push_str(&format!("cost / bound: {}\n", ratios.join(", ")));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_compared_run_is_headed_by_what_packs_it() {
        assert_eq!(
            run_heading(true),
            "=== run: karpenter-rs (optimiser on) ==="
        );
        assert_eq!(
            run_heading(false),
            "=== run: greedy first fit (Karpenter-equivalent) ==="
        );
    }
}
