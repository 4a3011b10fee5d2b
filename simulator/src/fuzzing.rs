//! The entry point of the `scenario` fuzz target (`fuzz/`), shared with this crate's tests,
//! which replay the committed corpus through it on stable Rust and drive it from proptest
//! generators. Not part of the API: hidden from the documentation and free to change.

use crate::scenario::Action;
use crate::{Files, RunOptions, Scenario, render, run_scenario};
use karpenter_catalog::Catalogue;
use karpenter_cluster::fuzzing::{MAX_FUZZ_REPLICAS, cap_replicas};
use karpenter_scheduling::model::Millis;
use std::path::{Path, PathBuf};

/// Where the fuzzed scenario is read from.
pub const SCENARIO_PATH: &str = "fuzz/scenario.yaml";

/// The longest simulated time a fuzz run covers; longer scenarios are only loaded.
const MAX_RUN_MS: Millis = 2 * 3_600_000;

/// The files a fuzzed scenario sees: itself, a NodePool at any path ending in
/// `nodepool.yaml`, a small instance-type catalogue at any path ending in `.json`; nothing
/// else exists.
struct FuzzFiles<'a> {
    scenario: &'a str,
}

const NODE_POOL: &str = "apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: default}
spec:
  template:
    spec:
      requirements:
        - {key: karpenter.sh/capacity-type, operator: In, values: [spot, on-demand]}
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
  disruption: {consolidationPolicy: WhenEmptyOrUnderutilized, consolidateAfter: 30s}
";

/// Six types of the embedded catalogue: both architectures, three sizes, spot and on-demand.
fn small_catalogue() -> String {
    let embedded = Catalogue::embedded();
    let names = [
        "m5.large",
        "m5.2xlarge",
        "c6g.large",
        "c6g.4xlarge",
        "r5.xlarge",
        "t3.micro",
    ];
    let small = Catalogue {
        region: embedded.region.clone(),
        instance_types: names
            .iter()
            .filter_map(|n| embedded.get(n).cloned())
            .collect(),
    };
    serde_json::to_string(&small).expect("a catalogue serialises")
}

impl Files for FuzzFiles<'_> {
    fn read_to_string(&self, path: &Path) -> std::io::Result<String> {
        let name = path.to_string_lossy();
        if path == Path::new(SCENARIO_PATH) {
            Ok(self.scenario.to_owned())
        } else if name.ends_with("nodepool.yaml") {
            Ok(NODE_POOL.to_owned())
        } else if name.ends_with(".json") {
            Ok(small_catalogue())
        } else {
            Err(std::io::ErrorKind::NotFound.into())
        }
    }
}

/// Loads `data` (invalid UTF-8 replaced) as a scenario file; when it loads and is small
/// enough to run quickly (at most two simulated hours, batch windows of at least 100 ms, a
/// disruption interval of at least a second, workloads scaled to at most
/// [`MAX_FUZZ_REPLICAS`]), runs it twice on a small catalogue and requires the same log and
/// report both times, as `karpenter simulate` promises.
pub fn scenario(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let files = FuzzFiles { scenario: &text };
    let Ok(mut scenario) = Scenario::load(Path::new(SCENARIO_PATH), &files) else {
        return;
    };
    let settings = &scenario.settings;
    if scenario.duration > MAX_RUN_MS
        || settings.batch_idle_duration.0 < 100
        || settings.batch_max_duration.0 < 100
        || settings.disruption_interval.0 < 1000
        || scenario.timeline.iter().any(|t| match &t.action {
            Action::Scale { replicas, .. } => i64::from(*replicas) > MAX_FUZZ_REPLICAS,
            Action::Interrupt(i) => i.count.is_some_and(|c| c > 64),
            _ => false,
        })
    {
        return;
    }
    if scenario.settings.catalogue.is_none() {
        scenario.settings.catalogue = Some(PathBuf::from("fuzz/catalogue.json"));
    }
    for doc in &mut scenario.manifests {
        cap_replicas(&mut doc.value);
    }
    for timed in &mut scenario.timeline {
        if let Action::Apply(docs) = &mut timed.action {
            docs.iter_mut().for_each(|d| cap_replicas(&mut d.value));
        }
    }
    let run = || {
        let mut log = Vec::new();
        let report = run_scenario(
            &scenario,
            RunOptions {
                optimizer: scenario.settings.optimizer,
                lower_bound: false,
            },
            &files,
            &mut |line| log.push(format!("{} {}", line.at, line.message)),
            &mut |_| {},
        );
        report.map(|r| {
            let _ = render(&r);
            // `karpenter simulate -o json` prints this.
            let json = serde_json::to_string(&r).expect("a report serialises");
            (log, json)
        })
    };
    let first = run();
    let second = run();
    match (first, second) {
        (Ok(a), Ok(b)) => assert!(a == b, "two runs of the same scenario differ"),
        (Err(a), Err(b)) => assert_eq!(a.to_string(), b.to_string()),
        (a, b) => panic!(
            "one run failed, the other did not: {:?} / {:?}",
            a.err(),
            b.err()
        ),
    }
}
