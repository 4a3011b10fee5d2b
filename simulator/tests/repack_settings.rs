//! A scenario's re-pack settings out of their ranges are rejected before the run starts,
//! naming the setting as the scenario spells it.

use karpenter_simulator::scenario::Dur;
use karpenter_simulator::{Disk, RunOptions, Scenario, run_collected};
use std::path::PathBuf;

fn scenario() -> Scenario {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples/repack.yaml");
    Scenario::load(&path, &Disk).expect("the bundled repack scenario loads")
}

fn error_of(scenario: &Scenario) -> String {
    run_collected(scenario, RunOptions::OPTIMIZED, &Disk)
        .expect_err("out-of-range settings are rejected")
        .to_string()
}

#[test]
fn each_out_of_range_repack_setting_is_named() {
    let mut s = scenario();
    s.settings.repack_price_improvement_threshold = 1.0;
    let err = error_of(&s);
    assert!(
        err.contains("spec.settings.repackPriceImprovementThreshold") && err.contains("[0, 1)"),
        "{err}"
    );

    let mut s = scenario();
    s.settings.repack_min_node_age = Dur(25 * 3_600_000);
    let err = error_of(&s);
    assert!(
        err.contains("spec.settings.repackMinNodeAge") && err.contains("90000000 ms"),
        "{err}"
    );

    let mut s = scenario();
    s.settings.repack_min_score = 100.5;
    let err = error_of(&s);
    assert!(
        err.contains("spec.settings.repackMinScore") && err.contains("100.5"),
        "{err}"
    );
}

#[test]
fn settings_in_range_run() {
    let mut s = scenario();
    s.settings.repack_price_improvement_threshold = 0.0;
    s.settings.repack_min_node_age = Dur(24 * 3_600_000);
    s.settings.repack_min_score = 100.0;
    run_collected(&s, RunOptions::OPTIMIZED, &Disk).expect("every bound is inside its range");
}
