//! The bundled scenarios under `examples/` run in-process through the library: each report
//! must agree with itself (costs, node counts) and with the decision log, and the scenarios
//! must show what they were written to show. `operator/tests/simulate_scenarios.rs` runs the
//! same scenarios through the `karpenter simulate` binary.

use karpenter_simulator::{
    Disk, Files, LogLine, Report, RunOptions, Scenario, render, render_comparison, run_scenario,
};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

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
        RunOptions {
            optimizer,
            lower_bound: false,
        },
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
    assert_timeline_matches_log(r, lines);
}

/// The text after `key` in `message`, up to the next `,` or `)`.
fn field<'a>(message: &'a str, key: &str) -> &'a str {
    let rest = &message[message
        .find(key)
        .unwrap_or_else(|| panic!("{key} in {message}"))
        + key.len()..];
    &rest[..rest.find([',', ')']).unwrap_or(rest.len())]
}

/// A node's life as the decision log tells it (no bundled scenario has unmanaged nodes).
struct Life {
    name: String,
    start: i64,
    stop: Option<i64>,
    instance_type: String,
    zone: String,
    capacity_type: String,
    price: f64,
}

fn lives(lines: &[LogLine]) -> Vec<Life> {
    let mut lives: Vec<Life> = Vec::new();
    for l in lines {
        if let Some(rest) = l.message.strip_prefix("launched nodeclaim ") {
            let price = field(&l.message, ", $");
            lives.push(Life {
                name: rest[..rest.find(' ').unwrap()].to_owned(),
                start: l.at,
                stop: None,
                instance_type: field(&l.message, "instance-type ").to_owned(),
                zone: field(&l.message, "zone ").to_owned(),
                capacity_type: field(&l.message, "capacity-type ").to_owned(),
                price: price.trim_end_matches("/h").parse().unwrap(),
            });
        } else if let Some(rest) = l.message.strip_prefix("deleted nodeclaim ") {
            let name = &rest[..rest.find(';').unwrap()];
            let life = lives
                .iter_mut()
                .find(|x| x.name == name && x.stop.is_none())
                .unwrap_or_else(|| panic!("{name} deleted but never launched"));
            life.stop = Some(l.at);
        }
    }
    lives
}

/// The report's timeline says at each sample what the decision log says happened by then:
/// the nodes alive (by instance type, capacity type and zone) and their price, the nodes
/// disrupted in each interval, and the batches of pending pods.
fn assert_timeline_matches_log(r: &Report, lines: &[LogLine]) {
    let name = &r.scenario;
    let t = &r.timeline;
    let n = t.at_seconds.len();
    assert!((2..=721).contains(&n), "{name}: {n} samples");
    assert_eq!(t.at_seconds[0], 0.0);
    assert_eq!(
        t.at_seconds[n - 1],
        r.duration_seconds,
        "{name}: last sample at the end"
    );
    for (what, len) in [
        ("cost", t.cost_per_hour.len()),
        ("nodes", t.nodes.len()),
        ("pending", t.pending_pods.len()),
        ("pending peak", t.pending_pods_peak.len()),
    ] {
        assert_eq!(len, n, "{name}: {what} samples");
    }
    let breakdowns = [
        &t.nodes_by_instance_type,
        &t.nodes_by_capacity_type,
        &t.nodes_by_zone,
    ];
    for series in breakdowns
        .iter()
        .flat_map(|b| b.values())
        .chain(t.disruptions.values())
    {
        assert_eq!(series.len(), n, "{name}");
    }
    let lives = lives(lines);
    let ms = |k: usize| (t.at_seconds[k] * 1000.0).round() as i64;
    for k in 0..n {
        let at = ms(k);
        let alive: Vec<&Life> = lives
            .iter()
            .filter(|l| l.start <= at && l.stop.is_none_or(|s| s > at))
            .collect();
        assert_eq!(t.nodes[k], alive.len(), "{name}: nodes at {at} ms");
        let price: f64 = alive.iter().map(|l| l.price).sum();
        assert!(
            close(
                t.cost_per_hour[k],
                price,
                0.0001 * (alive.len() as f64 + 1.0)
            ),
            "{name}: $/h at {at} ms: {} vs {price}",
            t.cost_per_hour[k]
        );
        let fields: [fn(&Life) -> &str; 3] =
            [|l| &l.instance_type, |l| &l.capacity_type, |l| &l.zone];
        for (series, key) in breakdowns.iter().zip(fields) {
            let mut expected: BTreeMap<&str, usize> = BTreeMap::new();
            for l in &alive {
                *expected.entry(key(l)).or_default() += 1;
            }
            let actual: BTreeMap<&str, usize> = series
                .iter()
                .filter(|(_, v)| v[k] > 0)
                .map(|(key, v)| (key.as_str(), v[k]))
                .collect();
            assert_eq!(actual, expected, "{name}: breakdown at {at} ms");
        }
    }
    // Disruptions land in the interval (previous sample, sample] that holds them.
    let interval = (t.interval_seconds * 1000.0) as i64;
    let sample_of = |at: i64| {
        usize::try_from((at + interval - 1) / interval)
            .unwrap()
            .min(n - 1)
    };
    let mut expected: BTreeMap<String, Vec<usize>> = BTreeMap::new();
    for l in lines {
        let m = &l.message;
        let (reason, count) = if m.starts_with("disrupting node(s) via ") {
            (
                field(m, "reason "),
                field(m, "terminating ")
                    .split(' ')
                    .next()
                    .unwrap_or_default()
                    .parse::<usize>()
                    .unwrap_or_else(|_| panic!("{m}")),
            )
        } else if m.starts_with("deleting nodeclaim ") {
            let reason = field(m, "(reason ");
            if reason != "Interrupted" && !reason.ends_with("Deleted") {
                continue;
            }
            (reason, 1)
        } else {
            continue;
        };
        expected
            .entry(reason.to_owned())
            .or_insert_with(|| vec![0; n])[sample_of(l.at)] += count;
    }
    assert_eq!(t.disruptions, expected, "{name}: disruptions over time");
    for (reason, total) in &r.disruptions {
        assert_eq!(
            t.disruptions[reason].iter().sum::<usize>(),
            *total,
            "{name}: {reason}"
        );
    }
    // Pending pods: an interval's peak is at least what its sample saw; what is left at the
    // end never scheduled. (A planned batch is no lower bound: it counts the pods of deleting
    // nodes, which are still bound.)
    for k in 0..n {
        assert!(
            t.pending_pods_peak[k] >= t.pending_pods[k],
            "{name}: sample {k}"
        );
    }
    assert_eq!(
        t.pending_pods[n - 1],
        r.pods.never_scheduled.len(),
        "{name}"
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
    // The five pods wait from the scale-up at 30 s until they bind 41 s later.
    assert_eq!(r.pods.pending_seconds.max, 41.0);
    // The empty node's NodeClaim is deleted at 16:16 and its instance terminated on the
    // terminator's next reconcile, a second later.
    assert_eq!(r.activity.longest_drain_seconds, 1.0);
    // One solve when the batch closes, one when the node initializes with the pods still
    // pending (they are nominated to it, nothing new is launched).
    assert_eq!(r.activity.provisioning_solves, 2);
    let t = &r.timeline;
    assert_eq!(t.interval_seconds, 5.0, "30 minutes in 5-second samples");
    for (k, at) in t.at_seconds.iter().enumerate() {
        let pending = if (30.0..71.0).contains(at) { 5 } else { 0 };
        assert_eq!(t.pending_pods[k], pending, "at {at} s");
        // The interval (70 s, 75 s] saw them until 71 s.
        let peak = if (30.0..76.0).contains(at) { 5 } else { 0 };
        assert_eq!(t.pending_pods_peak[k], peak, "at {at} s");
    }
    assert_eq!(t.disruptions["Empty"].iter().sum::<usize>(), 1);
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
fn repack_merges_the_nodes_small_batches_got_into_fewer_cheaper_ones() {
    let scenario = load("repack.yaml");
    let (with, lines) = run(&scenario, true);
    let mut off = scenario.clone();
    off.settings.repack_consolidation = false;
    let (without, off_lines) = run(&off, true);
    // The Karpenter-equivalent, over the part where karpenter-rs re-packs.
    let mut first = scenario.clone();
    first.duration = 20 * 60_000;
    let (_, greedy_lines) = run(&first, false);
    let repacks = count(&lines, "via replace (re-pack), reason Underutilized");
    assert!(repacks >= 2, "{repacks} re-pack command(s)");
    // Re-packing is karpenter-rs's own: never without it, nor in the Karpenter-equivalent.
    assert_eq!(count(&off_lines, "(re-pack)"), 0);
    assert_eq!(count(&greedy_lines, "(re-pack)"), 0);
    // It saves what it promises: at least the threshold on what it replaces, so the day
    // costs less, and every pod keeps a place.
    assert!(
        with.cost.total < without.cost.total * 0.97,
        "with re-pack {} vs without {}",
        with.cost.total,
        without.cost.total
    );
    assert!(with.nodes.at_end < without.nodes.at_end);
    assert!(with.pods.never_scheduled.is_empty());
    assert_consistent(&with, &lines);
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

#[test]
fn a_static_pool_keeps_its_nodes_while_the_overflow_comes_and_goes() {
    let scenario = load("static-pool.yaml");
    let (r, lines) = run(&scenario, true);
    assert_consistent(&r, &lines);
    assert!(r.pods.never_scheduled.is_empty());
    assert_eq!(
        count(
            &lines,
            "static nodepool reserved: 0 of 3 replica(s); creating 3"
        ),
        1
    );
    assert_eq!(
        count(
            &lines,
            "static nodepool reserved: 3 of 2 replica(s); deleting 1"
        ),
        1
    );
    // The overflow pool launched for the sale and was consolidated away after it; the
    // static nodes, empty or not, were never consolidated.
    assert!(count(&lines, "(nodepool overflow") > 0, "no overflow node");
    let consolidated: Vec<&LogLine> = lines
        .iter()
        .filter(|l| {
            l.message.contains("reason Empty") || l.message.contains("reason Underutilized")
        })
        .collect();
    assert!(!consolidated.is_empty(), "the overflow is consolidated");
    assert!(
        consolidated
            .iter()
            .all(|l| !l.message.contains("reserved-")),
        "{consolidated:#?}"
    );
    assert_eq!(r.nodes.at_end, 2, "two static nodes left");
}
