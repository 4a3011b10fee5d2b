//! A run's results (written as JSON by `run`) and the comparison table (`table`).

use crate::audit::{ApiCounts, Budget};
use crate::workload::{Kind, Thresholds};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// CPU and memory of one process over a window.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ProcWindow {
    pub cpu_secs: f64,
    pub avg_cores: f64,
    pub peak_rss_mib: f64,
    pub p95_rss_mib: f64,
}

/// Time of one stage of the controller's pass within a window.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StageStats {
    pub count: f64,
    pub mean_ms: Option<f64>,
    /// Upper bounds of the histogram buckets holding the median and the 99th percentile.
    pub p50_ms: Option<f64>,
    pub p99_ms: Option<f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PhaseResult {
    pub name: String,
    pub kind: Kind,
    pub pods: u32,
    pub start_ms: i64,
    pub end_ms: i64,
    /// From the phase's change to every benchmark pod Running and Ready.
    pub running_secs: Option<f64>,
    /// To the last node change (or to Running, when later).
    pub settled_secs: f64,
    /// To the end of the phase (for consolidation and drift, after the quiet window).
    pub total_secs: f64,
    pub timed_out: bool,
    pub pending_p50_secs: Option<f64>,
    pub pending_p99_secs: Option<f64>,
    /// Pods that appeared in the phase and were still not running at its end.
    pub never_ran: usize,
    pub nodes: usize,
    pub price_per_hour: f64,
    pub dollar_hours: f64,
    pub cpu_util: f64,
    pub memory_util: f64,
    pub launches: u64,
    pub nodes_removed: u64,
    pub procs: BTreeMap<String, ProcWindow>,
    pub api: BTreeMap<String, ApiCounts>,
    pub stages: BTreeMap<String, StageStats>,
    pub thresholds: Option<Thresholds>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Totals {
    pub wall_secs: f64,
    pub dollar_hours: f64,
    pub procs: BTreeMap<String, ProcWindow>,
    pub api: BTreeMap<String, ApiCounts>,
    /// The controller's requests against its own `--kube-client-qps`/`--kube-client-burst`.
    pub budget: Option<Budget>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunResult {
    pub peer: String,
    pub suite: String,
    pub quick: bool,
    pub started: String,
    pub cpus: usize,
    /// `/proc/loadavg` before and after: the machine may be shared.
    pub load_before: String,
    pub load_after: String,
    pub phases: Vec<PhaseResult>,
    pub totals: Totals,
}

fn secs(v: Option<f64>) -> String {
    v.map_or_else(|| "–".to_owned(), |v| format!("{v:.0}"))
}

fn secs1(v: Option<f64>) -> String {
    v.map_or_else(|| "–".to_owned(), |v| format!("{v:.1}"))
}

/// `get 12 · list 3 …` in a fixed verb order.
pub fn verbs(c: &ApiCounts) -> String {
    const ORDER: [&str; 8] = [
        "get",
        "list",
        "watch",
        "create",
        "update",
        "patch",
        "delete",
        "deletecollection",
    ];
    let mut parts: Vec<String> = ORDER
        .iter()
        .filter_map(|v| c.by_verb.get(*v).map(|n| format!("{v} {n}")))
        .collect();
    for (v, n) in &c.by_verb {
        if !ORDER.contains(&v.as_str()) {
            parts.push(format!("{v} {n}"));
        }
    }
    parts.join(" · ")
}

/// The controller's requests, and its kubelet share when it has one (ours does the
/// kubelet's work in-process; the peer leaves it to kwok, shown apart).
fn requests(p: &BTreeMap<String, ApiCounts>) -> String {
    let c = p.get("controller").cloned().unwrap_or_default();
    let mut s = c.total().to_string();
    if c.kubelet > 0 {
        let _ = write!(s, " ({} kubelet)", c.kubelet);
    }
    if let Some(k) = p.get("kwok") {
        let _ = write!(s, " + kwok {}", k.total());
    }
    s
}

fn proc_cell(p: &BTreeMap<String, ProcWindow>, what: impl Fn(&ProcWindow) -> String) -> String {
    let mut s = p.get("controller").map_or_else(|| "–".to_owned(), &what);
    if let Some(k) = p.get("kwok") {
        let _ = write!(s, " + kwok {}", what(k));
    }
    s
}

/// The per-phase table of several runs (rows of the same phase side by side).
pub fn phase_table(runs: &[RunResult]) -> String {
    let mut out = String::new();
    out.push_str(
        "| phase | controller | to Running s | settled s | pending p50 / p99 s | nodes | $/h | $·h | \
         launched / removed | evictions | CPU s (avg cores) | peak RSS MiB | API requests |\n",
    );
    out.push_str("|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n");
    let Some(first) = runs.first() else {
        return out;
    };
    for (i, phase) in first.phases.iter().enumerate() {
        for run in runs {
            let Some(p) = run.phases.get(i).filter(|p| p.name == phase.name) else {
                continue;
            };
            let name = if run.peer == first.peer {
                p.name.clone()
            } else {
                String::new()
            };
            let evictions: u64 = p.api.values().map(|c| c.evictions).sum();
            let _ = writeln!(
                out,
                "| {name} | {} | {}{} | {} | {} / {} | {} | {:.2} | {:.2} | {} / {} | {} | {} | {} | {} |",
                run.peer,
                secs(p.running_secs),
                if p.timed_out { " (timed out)" } else { "" },
                secs(Some(p.settled_secs)),
                secs1(p.pending_p50_secs),
                secs1(p.pending_p99_secs),
                p.nodes,
                p.price_per_hour,
                p.dollar_hours,
                p.launches,
                p.nodes_removed,
                evictions,
                proc_cell(&p.procs, |w| format!(
                    "{:.0} ({:.2})",
                    w.cpu_secs, w.avg_cores
                )),
                proc_cell(&p.procs, |w| format!("{:.0}", w.peak_rss_mib)),
                requests(&p.api),
            );
        }
    }
    out
}

/// Totals of each run and its requests by verb.
pub fn totals_table(runs: &[RunResult]) -> String {
    let mut out = String::new();
    out.push_str(
        "| controller | wall s | $·h | CPU s | peak RSS MiB | requests by verb (controller) | kwok |\n\
         |---|--:|--:|--:|--:|---|---|\n",
    );
    for run in runs {
        let t = &run.totals;
        let c = t.api.get("controller").cloned().unwrap_or_default();
        let kwok = t.api.get("kwok").map_or_else(
            || "–".to_owned(),
            |k| {
                let p = t.procs.get("kwok").cloned().unwrap_or_default();
                format!(
                    "{} requests, {:.0} CPU s, {:.0} MiB",
                    k.total(),
                    p.cpu_secs,
                    p.peak_rss_mib
                )
            },
        );
        let ctl = t.procs.get("controller").cloned().unwrap_or_default();
        let _ = writeln!(
            out,
            "| {} | {:.0} | {:.2} | {:.0} | {:.0} | {} total: {} | {kwok} |",
            run.peer,
            t.wall_secs,
            t.dollar_hours,
            ctl.cpu_secs,
            ctl.peak_rss_mib,
            c.total(),
            verbs(&c),
        );
    }
    out
}

/// Whether each of the targets holds for `ours` against `peer`, and whether each
/// run stays inside upstream's own thresholds.
pub fn targets_table(peer: &RunResult, ours: &RunResult) -> String {
    let mut out = String::new();
    out.push_str("| target | upstream | karpenter-rs | holds |\n|---|--:|--:|---|\n");
    let yes = |b: bool| if b { "yes" } else { "**no**" };
    // Time to Running, on every scale-out phase both finished.
    let mut faster = 0;
    let mut compared = 0;
    let (mut sum_peer, mut sum_ours) = (0.0, 0.0);
    for (a, b) in peer.phases.iter().zip(&ours.phases) {
        if a.kind != Kind::ScaleOut || a.name != b.name {
            continue;
        }
        if let (Some(x), Some(y)) = (a.running_secs, b.running_secs) {
            compared += 1;
            sum_peer += x;
            sum_ours += y;
            if y <= x {
                faster += 1;
            }
        }
    }
    let _ = writeln!(
        out,
        "| time to all pods Running, summed over {compared} scale-outs (s) | {sum_peer:.0} | {sum_ours:.0} | {} ({faster} of {compared} phases at or below) |",
        yes(sum_ours <= sum_peer && faster == compared),
    );
    // Cost after each phase (the mean of the phases' $/h, resets left out).
    let ends = |r: &RunResult| {
        let v: Vec<f64> = r
            .phases
            .iter()
            .filter(|p| p.kind != Kind::Reset && p.pods > 0)
            .map(|p| p.price_per_hour)
            .collect();
        v.iter().sum::<f64>() / v.len().max(1) as f64
    };
    let (cp, co) = (ends(peer), ends(ours));
    let _ = writeln!(
        out,
        "| cost: mean $/h after each phase, ≥ 20 % below | {cp:.2} | {co:.2} ({:+.1} %) | {} |",
        (co / cp - 1.0) * 100.0,
        yes(co <= 0.8 * cp),
    );
    let (dp, dop) = (peer.totals.dollar_hours, ours.totals.dollar_hours);
    let _ = writeln!(
        out,
        "| $·h over the run, ≥ 20 % below | {dp:.2} | {dop:.2} ({:+.1} %) | {} |",
        (dop / dp - 1.0) * 100.0,
        yes(dop <= 0.8 * dp),
    );
    let cpu = |r: &RunResult, name: &str| r.totals.procs.get(name).map_or(0.0, |p| p.cpu_secs);
    let rss = |r: &RunResult| {
        r.totals
            .procs
            .get("controller")
            .map_or(0.0, |p| p.peak_rss_mib)
    };
    let (c_peer, c_ours) = (cpu(peer, "controller"), cpu(ours, "controller"));
    let _ = writeln!(
        out,
        "| controller CPU s, ≤ 1/5 (upstream + kwok: {:.0}) | {c_peer:.0} | {c_ours:.0} ({:.2}×) | {} |",
        c_peer + cpu(peer, "kwok"),
        c_ours / c_peer,
        yes(c_ours <= c_peer / 5.0),
    );
    let (r_peer, r_ours) = (rss(peer), rss(ours));
    let _ = writeln!(
        out,
        "| controller peak RSS MiB, ≤ 1/3 | {r_peer:.0} | {r_ours:.0} ({:.2}×) | {} |",
        r_ours / r_peer,
        yes(r_ours <= r_peer / 3.0),
    );
    for run in [peer, ours] {
        let mut broken = Vec::new();
        let mut checked = 0;
        for p in &run.phases {
            let Some(t) = p.thresholds else { continue };
            checked += 1;
            let w = p.procs.get("controller").cloned().unwrap_or_default();
            if p.timed_out || p.total_secs > t.total_secs {
                broken.push(format!(
                    "{}: {:.0} s > {:.0} s",
                    p.name, p.total_secs, t.total_secs
                ));
            }
            if w.p95_rss_mib > t.memory_mb {
                broken.push(format!(
                    "{}: p95 RSS {:.0} MiB > {:.0} MB",
                    p.name, w.p95_rss_mib, t.memory_mb
                ));
            }
            if w.avg_cores > t.cpu_cores {
                broken.push(format!(
                    "{}: {:.2} cores > {:.2}",
                    p.name, w.avg_cores, t.cpu_cores
                ));
            }
        }
        let _ = writeln!(
            out,
            "| {}: inside upstream's thresholds ({checked} phases) | | | {}{} |",
            run.peer,
            yes(broken.is_empty()),
            if broken.is_empty() {
                String::new()
            } else {
                format!(": {}", broken.join("; "))
            },
        );
    }
    out
}

/// Everything `table` prints for a set of runs.
pub fn render(runs: &[RunResult]) -> String {
    let mut out = String::new();
    for run in runs {
        let _ = writeln!(
            out,
            "- {}: suite `{}`{}, started {}, {} CPUs, load average before `{}`, after `{}`",
            run.peer,
            run.suite,
            if run.quick { " (--quick)" } else { "" },
            run.started,
            run.cpus,
            run.load_before.trim(),
            run.load_after.trim(),
        );
    }
    out.push('\n');
    out.push_str(&phase_table(runs));
    out.push('\n');
    out.push_str(&totals_table(runs));
    let peer = runs.iter().find(|r| r.peer == "upstream");
    let ours = runs.iter().find(|r| r.peer == "karpenter-rs");
    if let (Some(p), Some(o)) = (peer, ours) {
        out.push('\n');
        out.push_str(&targets_table(p, o));
    }
    if let Some(b) = ours.and_then(|o| o.totals.budget) {
        let _ = writeln!(
            out,
            "\nkarpenter-rs client budget (qps {}, burst {}): peak {} requests in one second, {:.1}/s over ten, deepest overdraft {:.1} requests.",
            b.qps, b.burst, b.peak_1s, b.peak_10s_per_sec, b.overdraft
        );
    }
    out
}

/// The controller-scale suite's table: how pass time, memory and requests grow with size.
pub fn scale_table(run: &RunResult) -> String {
    let mut out = String::new();
    out.push_str(
        "| phase | pods | nodes | to Running s | passes | reconciler mean / p50 / p99 ms | \
         state mean ms | peak RSS MiB | CPU s | requests (kubelet) | req/s | requests per new pod |\n\
         |---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n",
    );
    let mut previous = 0_u32;
    for p in &run.phases {
        let ms = |v: Option<f64>| v.map_or_else(|| "–".to_owned(), |v| format!("{v:.0}"));
        let r = p.stages.get("reconciler").cloned().unwrap_or_default();
        let state = p.stages.get("state").cloned().unwrap_or_default();
        let c = p.api.get("controller").cloned().unwrap_or_default();
        let w = p.procs.get("controller").cloned().unwrap_or_default();
        let own = c.total() - c.kubelet;
        let new_pods = p.pods.saturating_sub(previous);
        let per_pod = if new_pods > 0 && p.kind == Kind::ScaleOut {
            format!("{:.2}", own as f64 / f64::from(new_pods))
        } else {
            "–".to_owned()
        };
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {:.0} | {} / {} / {} | {} | {:.0} | {:.0} | {} ({}) | {:.0} | {} |",
            p.name,
            p.pods,
            p.nodes,
            p.running_secs
                .map_or_else(|| "–".to_owned(), |v| format!("{v:.0}")),
            r.count,
            ms(r.mean_ms),
            ms(r.p50_ms),
            ms(r.p99_ms),
            ms(state.mean_ms),
            w.peak_rss_mib,
            w.cpu_secs,
            c.total(),
            c.kubelet,
            c.total() as f64 / p.total_secs.max(0.001),
            per_pod,
        );
        previous = p.pods;
    }
    if let Some(b) = run.totals.budget {
        let _ = writeln!(
            out,
            "\nClient budget (qps {}, burst {}): peak {} requests in one second, {:.1}/s over ten, deepest overdraft {:.1} requests.",
            b.qps, b.burst, b.peak_1s, b.peak_10s_per_sec, b.overdraft
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn phase(name: &str, kind: Kind, running: f64, price: f64) -> PhaseResult {
        PhaseResult {
            name: name.into(),
            kind,
            pods: 10,
            start_ms: 0,
            end_ms: 1000,
            running_secs: Some(running),
            settled_secs: running,
            total_secs: running,
            timed_out: false,
            pending_p50_secs: Some(1.0),
            pending_p99_secs: Some(2.0),
            never_ran: 0,
            nodes: 3,
            price_per_hour: price,
            dollar_hours: price,
            cpu_util: 0.5,
            memory_util: 0.5,
            launches: 3,
            nodes_removed: 0,
            procs: BTreeMap::from([(
                "controller".into(),
                ProcWindow {
                    cpu_secs: 10.0,
                    avg_cores: 0.1,
                    peak_rss_mib: 100.0,
                    p95_rss_mib: 90.0,
                },
            )]),
            api: BTreeMap::new(),
            stages: BTreeMap::new(),
            thresholds: Some(Thresholds {
                total_secs: 120.0,
                memory_mb: 120.0,
                cpu_cores: 0.5,
            }),
        }
    }

    fn run(peer: &str, running: f64, price: f64, cpu: f64, rss: f64) -> RunResult {
        RunResult {
            peer: peer.into(),
            suite: "peers".into(),
            quick: true,
            started: String::new(),
            cpus: 2,
            load_before: String::new(),
            load_after: String::new(),
            phases: vec![phase("basic: 1,000 pods", Kind::ScaleOut, running, price)],
            totals: Totals {
                wall_secs: 100.0,
                dollar_hours: price,
                procs: BTreeMap::from([(
                    "controller".into(),
                    ProcWindow {
                        cpu_secs: cpu,
                        avg_cores: 0.1,
                        peak_rss_mib: rss,
                        p95_rss_mib: rss,
                    },
                )]),
                api: BTreeMap::new(),
                budget: None,
            },
        }
    }

    #[test]
    fn targets_say_which_hold() {
        let peer = run("upstream", 60.0, 10.0, 100.0, 300.0);
        let good = run("karpenter-rs", 50.0, 7.0, 10.0, 50.0);
        let table = targets_table(&peer, &good);
        assert!(!table.contains("**no**"), "{table}");
        let bad = run("karpenter-rs", 70.0, 9.0, 30.0, 200.0);
        let table = targets_table(&peer, &bad);
        assert_eq!(table.matches("**no**").count(), 5, "{table}");
    }

    #[test]
    fn the_phase_table_pairs_runs() {
        let runs = [
            run("upstream", 60.0, 10.0, 100.0, 300.0),
            run("karpenter-rs", 50.0, 7.0, 10.0, 50.0),
        ];
        let table = phase_table(&runs);
        assert_eq!(table.lines().count(), 4);
        assert!(
            table.contains("| basic: 1,000 pods | upstream | 60 |"),
            "{table}"
        );
        assert!(table.contains("|  | karpenter-rs | 50 |"), "{table}");
    }
}
