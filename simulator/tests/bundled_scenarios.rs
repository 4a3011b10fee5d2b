//! The bundled scenarios under `examples/` run in-process through the library: each report
//! must agree with itself (costs, node counts) and with the decision log, and the scenarios
//! must show what they were written to show. `operator/tests/simulate_scenarios.rs` runs the
//! same scenarios through the `karpenter simulate` binary.

use karpenter_simulator::{
    Files, LogLine, Report, RunOptions, Scenario, render, render_comparison, run_scenario,
};
use std::path::{Path, PathBuf};

/// Reads the scenario's files from disk (the library itself reads nothing).
struct Disk;

impl Files for Disk {
    fn read_to_string(&self, path: &Path) -> std::io::Result<String> {
        std::fs::read_to_string(path)
    }
}

fn example(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../examples")
        .join(name)
}

fn load(name: &str) -> Scenario {
    Scenario::load(&example(name), &Disk).unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// Runs `scenario` and returns its report and every log line.
fn run(scenario: &Scenario, optimizer: bool) -> (Report, Vec<LogLine>) {
    let mut lines = Vec::new();
    let mut last = -1;
    let report = run_scenario(
        scenario,
        RunOptions { optimizer },
        &Disk,
        &mut |line: &LogLine| lines.push(line.clone()),
        &mut |t| {
            assert!(t >= last, "virtual time went back from {last} to {t}");
            last = t;
        },
    )
    .unwrap_or_else(|e| panic!("{}: {e}", scenario.name));
    assert_eq!(
        last, scenario.duration,
        "the run ends at the scenario's duration"
    );
    (report, lines)
}

fn count(lines: &[LogLine], needle: &str) -> usize {
    lines.iter().filter(|l| l.message.contains(needle)).count()
}

fn close(a: f64, b: f64, tolerance: f64) -> bool {
    (a - b).abs() <= tolerance
}

/// What must hold in every report, whatever the scenario.
fn assert_consistent(r: &Report, lines: &[LogLine]) {
    let name = &r.scenario;
    // Each per-type cost is rounded to 4 decimals, so the sum may be off by half a unit each.
    let by_type: f64 = r.nodes.by_type.iter().map(|t| t.cost).sum();
    let tolerance = 0.0001 * (r.nodes.by_type.len() as f64 + 1.0);
    assert!(
        close(by_type, r.cost.total, tolerance),
        "{name}: cost by type {by_type} vs total {}",
        r.cost.total
    );
    // Both are rounded to 4 decimals: the average's rounding grows with the hours.
    let hours = r.duration_seconds / 3600.0;
    assert!(
        close(
            r.cost.average_per_hour * hours,
            r.cost.total,
            0.0001 * (hours + 1.0)
        ),
        "{name}: average {} vs total {} over {hours} h",
        r.cost.average_per_hour,
        r.cost.total
    );
    assert!(
        r.cost.peak_per_hour + 1e-9 >= r.cost.average_per_hour,
        "{name}"
    );
    assert!(
        r.cost.peak_per_hour + 1e-9 >= r.cost.at_end_per_hour,
        "{name}"
    );
    let rows_launched: usize = r.nodes.by_type.iter().map(|t| t.launched).sum();
    let rows_at_end: usize = r.nodes.by_type.iter().map(|t| t.at_end).sum();
    assert!(r.nodes.launched <= rows_launched, "{name}");
    assert_eq!(r.nodes.at_end, rows_at_end, "{name}");
    assert!(r.nodes.peak >= r.nodes.at_end, "{name}");
    assert_eq!(
        r.nodes.by_zone.values().sum::<usize>(),
        rows_launched,
        "{name}"
    );
    assert!(r.pods.scheduled <= r.pods.created, "{name}");
    // The log tells the same story as the counters.
    assert_eq!(
        count(lines, "launched nodeclaim "),
        r.nodes.launched,
        "{name}: launch log lines"
    );
    assert_eq!(
        count(lines, "created nodeclaim "),
        r.activity.node_claims_created,
        "{name}: creation log lines"
    );
    assert_eq!(
        count(lines, "deleted nodeclaim "),
        r.nodes.terminated,
        "{name}: deletion log lines"
    );
    assert!(
        lines.windows(2).all(|w| w[0].at <= w[1].at),
        "{name}: log lines in time order"
    );
}

#[test]
fn every_bundled_scenario_runs_with_a_consistent_report() {
    let mut names: Vec<String> = std::fs::read_dir(example(""))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".yaml"))
        .collect();
    names.sort();
    assert!(names.len() >= 10, "{names:?}");
    for name in &names {
        let scenario = load(name);
        let (report, lines) = run(&scenario, scenario.settings.optimizer);
        assert_eq!(report.scenario, scenario.name);
        assert!(report.pods.scheduled > 0, "{name}: no pod placed");
        assert!(report.nodes.launched > 0, "{name}: no node launched");
        assert!(report.cost.total > 0.0, "{name}: nothing spent");
        assert_consistent(&report, &lines);
    }
}

#[test]
fn quickstart_launches_one_node_for_five_pods_and_removes_it() {
    let scenario = load("quickstart.yaml");
    let (r, lines) = run(&scenario, true);
    assert_consistent(&r, &lines);
    assert_eq!((r.pods.created, r.pods.scheduled), (5, 5));
    assert!(r.pods.never_scheduled.is_empty());
    assert_eq!(
        (r.nodes.launched, r.nodes.terminated, r.nodes.at_end),
        (1, 1, 0)
    );
    assert_eq!(r.disruptions.get("Empty"), Some(&1));
    assert_eq!(r.cost.at_end_per_hour, 0.0);
    let [row] = r.nodes.by_type.as_slice() else {
        panic!("one instance type expected: {:?}", r.nodes.by_type);
    };
    // One node's price over its life: cost = node-hours x $/h.
    assert!(
        close(row.cost, row.node_hours * r.cost.peak_per_hour, 0.001),
        "{row:?}"
    );
    // Provisioning happens after the scale-up at 00:00:30 and within the batch window.
    let launched = lines
        .iter()
        .find(|l| l.message.starts_with("launched nodeclaim "))
        .expect("a launch");
    assert!((30_000..=41_000).contains(&launched.at), "{launched:?}");
    let text = render(&r);
    assert!(
        text.starts_with("scenario quickstart — 00:30:00 simulated\n"),
        "{text}"
    );
    assert!(
        text.contains("nodes: 1 launched, 1 terminated, 0 at end, peak 1\n"),
        "{text}"
    );
    assert!(
        text.contains(&format!("cost: ${:.4} total", r.cost.total)),
        "{text}"
    );
}

#[test]
fn daily_traffic_follows_the_curve_and_runs_the_same_twice() {
    let scenario = load("daily-traffic.yaml");
    assert_eq!(scenario.duration, 24 * 3_600_000);
    let (r, lines) = run(&scenario, true);
    assert_consistent(&r, &lines);
    assert!(
        r.pods.never_scheduled.is_empty(),
        "{:?}",
        r.pods.never_scheduled
    );
    assert!(
        r.nodes.launched > r.nodes.at_end,
        "nodes come and go: {:?}",
        r.nodes
    );
    assert!(r.nodes.terminated > 0);
    assert!(
        r.disruptions.values().sum::<usize>() > 0,
        "evening consolidation"
    );
    // $/h over the day follows the traffic: the afternoon costs more than the night.
    let at = |hour: f64| {
        r.cost
            .over_time
            .iter()
            .find(|p| close(p.at_seconds, hour * 3600.0, 1.0))
            .unwrap_or_else(|| panic!("no sample at {hour} h: {:?}", r.cost.over_time))
            .per_hour
    };
    assert!(
        at(16.0) > at(4.0),
        "16:00 {} vs 04:00 {}",
        at(16.0),
        at(4.0)
    );
    assert_eq!(
        r.cost.over_time.len(),
        25,
        "one sample an hour, both ends included"
    );
    // Deterministic: a second run gives the same report and log.
    let (again, again_lines) = run(&scenario, true);
    assert_eq!(again, r);
    assert_eq!(again_lines, lines);
}

#[test]
fn comparison_runs_the_optimiser_no_worse_than_greedy() {
    let scenario = load("consolidation.yaml");
    let (optimized, _) = run(&scenario, true);
    let (greedy, lines) = run(&scenario, false);
    assert!(optimized.optimizer && !greedy.optimizer);
    assert_consistent(&greedy, &lines);
    assert!(
        optimized.cost.total <= greedy.cost.total + 1e-9,
        "optimised {} vs greedy {}",
        optimized.cost.total,
        greedy.cost.total
    );
    let text = render_comparison(&optimized, &greedy);
    assert!(
        text.starts_with("scenario consolidation — comparison\n"),
        "{text}"
    );
    assert!(
        text.contains(&format!("{:.4}", optimized.cost.total))
            && text.contains(&format!("{:.4}", greedy.cost.total)),
        "{text}"
    );
}

#[test]
fn files_come_only_through_the_callers_reader() {
    /// Serves nothing: every read fails.
    struct Nothing;
    impl Files for Nothing {
        fn read_to_string(&self, path: &Path) -> std::io::Result<String> {
            Err(std::io::Error::new(
                std::io::ErrorKind::NotFound,
                format!("not served: {}", path.display()),
            ))
        }
    }
    let err = Scenario::load(&example("quickstart.yaml"), &Nothing)
        .unwrap_err()
        .to_string();
    assert!(err.contains("quickstart.yaml: not served"), "{err}");
}
