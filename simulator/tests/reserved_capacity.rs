//! `examples/reserved-capacity.yaml`: a capacity reservation is launched into first, never
//! beyond its count; the rest falls back to on-demand; consolidation keeps the reserved
//! nodes; with the ReservedCapacity gate off the reservation is not used.

use karpenter_simulator::{Disk, Report, RunOptions, Scenario, run_collected};
use std::path::PathBuf;

fn scenario() -> Scenario {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples/reserved-capacity.yaml");
    Scenario::load(&path, &Disk).expect("scenario loads")
}

fn run(scenario: &Scenario, optimizer: bool) -> (Report, Vec<String>) {
    let options = if optimizer {
        RunOptions::OPTIMIZED
    } else {
        RunOptions::GREEDY
    };
    let run = run_collected(scenario, options, &Disk).expect("scenario runs");
    let lines = run.messages();
    let report = run.report;
    (report, lines)
}

fn launched(report: &Report, capacity_type: &str) -> usize {
    report
        .nodes
        .by_type
        .iter()
        .filter(|t| t.capacity_type == capacity_type)
        .map(|t| t.launched)
        .sum()
}

#[test]
fn the_reservation_is_used_first_and_the_rest_falls_back_to_on_demand() {
    for optimizer in [true, false] {
        let (report, lines) = run(&scenario(), optimizer);
        let log = lines.join("\n");
        assert_eq!(launched(&report, "reserved"), 3, "{log}");
        assert_eq!(launched(&report, "on-demand"), 1, "{log}");
        assert!(report.pods.never_scheduled.is_empty(), "{log}");
        let row = &report.reservations[0];
        assert_eq!(row.id, "cr-0123456789abcdef0");
        assert_eq!((row.count, row.launched), (3, 3), "{log}");
        // Consolidation removes the dear on-demand nodes, not the reserved ones.
        assert_eq!(row.in_use_at_end, 3, "{log}");
        assert!(
            report
                .nodes
                .by_type
                .iter()
                .filter(|t| t.capacity_type == "on-demand")
                .all(|t| t.at_end == 0),
            "{log}"
        );
        let reserved_launches = lines
            .iter()
            .filter(|l| {
                l.contains("capacity-type reserved, capacity-reservation cr-0123456789abcdef0")
            })
            .count();
        assert_eq!(reserved_launches, 3, "{log}");
        // The pods the reservation could not hold waited for the next round (upstream's
        // strict mode), which then launched them on demand; waiting is not a scheduling
        // failure, so nothing reports them as one.
        let first = lines
            .iter()
            .position(|l| l.contains("computed 3 new node(s) will fit 6 pod(s)"))
            .expect("the first round fills the reservation");
        assert!(
            lines[first + 1..]
                .iter()
                .any(|l| l.contains("computed 1 new node(s) will fit 4 pod(s)")),
            "{log}"
        );
        assert!(
            !lines.iter().any(|l| l.contains("could not be reserved")),
            "{log}"
        );
        // No launch ever failed for want of reserved capacity: the scheduler never
        // promised the reservation more than it had.
        assert_eq!(report.activity.launch_failures, 0, "{log}");
        let text = karpenter_simulator::render(&report);
        assert!(text.contains("CAPACITY RESERVATION"), "{text}");
    }
}

#[test]
fn with_the_gate_off_the_reservation_is_not_used() {
    let mut off = scenario();
    off.settings.reserved_capacity = false;
    let (report, lines) = run(&off, true);
    assert_eq!(launched(&report, "reserved"), 0, "{}", lines.join("\n"));
    assert!(launched(&report, "on-demand") > 0);
    assert_eq!(report.reservations[0].launched, 0);
    assert!(report.pods.never_scheduled.is_empty());
}

#[test]
fn a_reservation_of_an_unknown_instance_type_is_an_error_naming_the_field() {
    let mut bad = scenario();
    bad.settings.capacity_reservations[0].instance_type = "m5.nonexistent".into();
    let err = run_collected(&bad, RunOptions::OPTIMIZED, &Disk)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("spec.settings.capacityReservations[0]") && err.contains("instanceType"),
        "{err}"
    );
}
