//! The stable equivalent of the `scenario` fuzz target: every committed corpus file and crash
//! replayed through its entry function, and proptests that feed it arbitrary bytes and
//! scenarios built from the format's pieces (durations from `0` to overflowing ones, every
//! timeline action, settings at their limits).

use karpenter_simulator::fuzzing;
use karpenter_testing::fuzz::replay_corpus;
use proptest::prelude::*;

#[test]
fn scenario_corpus() {
    replay_corpus("scenario", fuzzing::scenario);
}

/// A duration as a scenario may write it: Go text, bare seconds, or nonsense.
fn duration() -> impl Strategy<Value = String> {
    prop_oneof![
        prop::sample::select(vec![
            "0",
            "1ms",
            "30s",
            "1m30s",
            "1h",
            "-5s",
            "1.5h",
            "9223372036854775807",
            "1e3",
            "\"\"",
            "2562047h47m16.854775807s",
            "2562048h",
            "10s",
            // The largest whole seconds whose milliseconds fit an i64, and a third of it.
            "9223372036854775",
            "3074457345618258",
        ])
        .prop_map(str::to_owned),
        (0u64..4000).prop_map(|s| s.to_string()),
        any::<u64>().prop_map(|s| s.to_string()),
    ]
}

/// One timeline entry: `at` or `after` (or both, or neither) and one action or none.
fn event() -> impl Strategy<Value = String> {
    let when = prop_oneof![
        duration().prop_map(|d| format!("at: {d}")),
        duration().prop_map(|d| format!("after: {d}")),
        (duration(), duration()).prop_map(|(a, b)| format!("at: {a}, after: {b}")),
        Just(String::new()),
    ];
    let action = prop_oneof![
        Just(String::new()),
        (0i64..6).prop_map(|n| format!("scale: {{deployment: inflate, replicas: {n}}}")),
        any::<i32>().prop_map(|n| format!("scale: {{deployment: inflate, replicas: {n}}}")),
        Just("scale: {job: nope, replicas: 1}".to_owned()),
        Just("delete: {kind: Deployment, name: inflate}".to_owned()),
        Just("delete: {kind: NodePool, name: default}".to_owned()),
        Just("drift: {nodePool: default}".to_owned()),
        (0usize..4).prop_map(|n| format!("interrupt: {{capacityType: on-demand, count: {n}}}")),
        Just("interrupt: {node: nope}".to_owned()),
        Just("insufficientCapacity: {capacityType: spot}".to_owned()),
        Just("restoreCapacity: {}".to_owned()),
        Just("updateNodePool: {name: default, patch: {spec: {limits: {cpu: \"2\"}}}}".to_owned()),
        Just("updateNodePool: {name: default, patch: {spec: {template: {spec: {expireAfter: 1m}}}}}".to_owned()),
        Just("apply: {file: inflate/nodepool.yaml}".to_owned()),
        Just("apply: {apiVersion: v1, kind: Pod, metadata: {name: solo}, spec: {containers: [{name: c, image: x, resources: {requests: {cpu: 100m}}}]}}".to_owned()),
    ];
    (when, action).prop_map(|(when, action)| {
        let fields: Vec<&str> = [when.as_str(), action.as_str()]
            .into_iter()
            .filter(|f| !f.is_empty())
            .collect();
        format!("  - {{{}}}\n", fields.join(", "))
    })
}

/// A whole scenario: the inflate Deployment on the getting-started NodePool, settings at
/// their limits, a short timeline.
fn scenario() -> impl Strategy<Value = String> {
    (
        prop::option::of(duration()),
        prop::option::of(duration()),
        prop::option::of(duration()),
        any::<bool>(),
        prop::collection::vec(event(), 0..6),
        "[0-9]{1,3}m?",
    )
        .prop_map(|(total, idle, interval, optimizer, timeline, cpu)| {
            let mut text = String::from(
                "apiVersion: karpenter-rs/v1alpha1\nkind: Scenario\nmetadata: {name: fuzz}\nspec:\n",
            );
            if let Some(d) = total {
                text.push_str(&format!("  duration: {d}\n"));
            }
            text.push_str(&format!("  settings:\n    optimizer: {optimizer}\n"));
            if let Some(d) = idle {
                text.push_str(&format!("    batchIdleDuration: {d}\n"));
            }
            if let Some(d) = interval {
                text.push_str(&format!("    disruptionInterval: {d}\n"));
            }
            text.push_str(&format!(
                "  manifests:\n  - file: inflate/nodepool.yaml\n  - {{apiVersion: apps/v1, kind: Deployment, metadata: {{name: inflate}}, spec: {{replicas: 1, selector: {{matchLabels: {{app: i}}}}, template: {{metadata: {{labels: {{app: i}}}}, spec: {{containers: [{{name: c, image: x, resources: {{requests: {{cpu: \"{cpu}\"}}}}}}]}}}}}}}}\n"
            ));
            text.push_str("  timeline:\n");
            for e in timeline {
                text.push_str(&e);
            }
            text
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn scenarios_from_any_bytes(data in prop::collection::vec(any::<u8>(), 0..256)) {
        fuzzing::scenario(&data);
    }

    #[test]
    fn scenarios_near_the_format(text in scenario()) {
        fuzzing::scenario(text.as_bytes());
    }
}
