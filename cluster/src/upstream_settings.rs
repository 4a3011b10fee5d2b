//! Karpenter v1.15.1 settings (environment variables and feature gates) that karpenter-rs does
//! not act on. A team that carries its Karpenter environment over gets each one named at
//! start-up instead of a controller that quietly behaves differently. A setting whose value
//! is what karpenter-rs does anyway (upstream's default, except for the controller warm-up,
//! which karpenter-rs always does) is not reported.

/// One setting the controller was given and does not act on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IgnoredSetting {
    /// The environment variable or `FEATURE_GATES` entry.
    pub name: String,
    /// The value it was given.
    pub value: String,
    /// What karpenter-rs does instead.
    pub why: &'static str,
}

/// Upstream's environment variables karpenter-rs has no equivalent for: name, the value that
/// describes what karpenter-rs does, and what happens instead.
const UNSUPPORTED_ENV: [(&str, &str, &str); 5] = [
    (
        "ENABLE_PROFILING",
        "false",
        "karpenter-rs serves no /debug/pprof endpoints: they are Go's runtime profiles \
         (goroutines, the GC heap, blocking), which a Rust binary does not have; profile its CPU \
         with perf against the process",
    ),
    (
        "DISABLE_CONTROLLER_WARMUP",
        "false",
        "karpenter-rs always warms up: every replica starts its watches before leader election, \
         so a standby takes over without listing the cluster",
    ),
    (
        "MEMORY_LIMIT",
        "-1",
        "upstream sets the Go garbage collector's soft limit (GOMEMLIMIT) to 90% of it; a Rust \
         binary frees memory when it is dropped and has no collector to limit",
    ),
    (
        "CPU_REQUESTS",
        "1000",
        "upstream runs its scheduling loop's fit checks on ceil(CPU_REQUESTS/1000) goroutines; \
         karpenter-rs's solver is sequential for determinism and puts the plan's lower bound on \
         a second thread when the process may use a second CPU (its cgroup quota allowing)",
    ),
    (
        "ENABLE_ZONAL_SHIFT",
        "false",
        "the AWS provider reads no ARC zonal shifts: launches and terminations do not avoid a \
         zonally shifted availability zone",
    ),
];

/// Upstream's durations that mean the same as their default when written differently
/// (`60s` for `1m`): compared as Go durations.
fn same_duration(a: &str, b: &str) -> bool {
    use karpenter_cloudprovider::duration::parse_go_duration;
    matches!((parse_go_duration(a), parse_go_duration(b)), (Ok(x), Ok(y)) if x == y)
}

/// Feature gates upstream has and karpenter-rs does not implement, with what happens instead.
const UNSUPPORTED_GATES: [(&str, &str); 3] = [
    (
        "TerminateFirstDrift",
        "a drifted node is replaced before it is terminated, never terminated first: when no \
         replacement can be staged (a full capacity reservation, a static NodePool at its node \
         limit) the node stays",
    ),
    (
        "TerminateFirstRepair",
        "an unhealthy node is replaced before it is terminated, never terminated first",
    ),
    (
        "PodDeletionCostManagement",
        "controller.kubernetes.io/pod-deletion-cost is not written on pods; it is still read as \
         a pod's disruption cost",
    ),
];

/// The AWS provider's gates (`AWS_FEATURE_GATES`) karpenter-rs does not implement.
const UNSUPPORTED_AWS_GATES: [(&str, &str); 3] = [
    (
        "DRANVIDIAGPU",
        "instance types publish no NVIDIA GPU devices for dynamic resource allocation",
    ),
    (
        "DRAEFA",
        "instance types publish no EFA devices for dynamic resource allocation",
    ),
    (
        "RebootForRepair",
        "node repair replaces nodes; it never reboots them in place",
    ),
];

/// The settings in the environment (read through `env`) and in `feature_gates` that karpenter-rs
/// would not act on, in a stable order.
pub fn ignored_settings(
    env: impl Fn(&str) -> Option<String>,
    feature_gates: &str,
) -> Vec<IgnoredSetting> {
    let mut out = Vec::new();
    for (name, same, why) in UNSUPPORTED_ENV {
        let Some(value) = env(name) else {
            continue;
        };
        if same == value.trim() || same_duration(same, value.trim()) {
            continue;
        }
        out.push(IgnoredSetting {
            name: name.to_owned(),
            value,
            why,
        });
    }
    enabled_gates(
        &mut out,
        "FEATURE_GATES",
        feature_gates,
        &UNSUPPORTED_GATES,
        &ACTED_ON_GATES,
    );
    if let Some(aws) = env("AWS_FEATURE_GATES") {
        enabled_gates(
            &mut out,
            "AWS_FEATURE_GATES",
            &aws,
            &UNSUPPORTED_AWS_GATES,
            &ACTED_ON_AWS_GATES,
        );
    }
    out
}

/// The gates of `FEATURE_GATES` karpenter-rs acts on ([`crate::feature_gates::FeatureGates`]).
const ACTED_ON_GATES: [&str; 6] = [
    "SpotToSpotConsolidation",
    "NodeRepair",
    "ReservedCapacity",
    "NodeOverlay",
    "StaticCapacity",
    "CapacityBuffer",
];

/// The gates of `AWS_FEATURE_GATES` karpenter-rs acts on.
const ACTED_ON_AWS_GATES: [&str; 1] = ["NodeClassCEL"];

/// Why a gate name neither Karpenter nor karpenter-rs knows is named: like upstream, the
/// controller accepts it and does nothing, so a misspelt gate silently keeps its default.
const UNKNOWN_GATE: &str = "not a feature gate of Karpenter v1.15 or karpenter-rs: ignored, as \
     upstream ignores unknown gates (a misspelt gate keeps its default; check the name)";

/// Names every gate of `unsupported` that `gates` (`Name=bool,…`) turns on, and every gate
/// in neither `unsupported` nor `acted_on`, whatever its value.
fn enabled_gates(
    out: &mut Vec<IgnoredSetting>,
    setting: &str,
    gates: &str,
    unsupported: &[(&str, &'static str)],
    acted_on: &[&str],
) {
    for entry in gates.split(',') {
        let Some((gate, value)) = entry.split_once('=') else {
            continue;
        };
        let (gate, value) = (gate.trim(), value.trim());
        if !acted_on.contains(&gate) && !unsupported.iter().any(|(g, _)| *g == gate) {
            out.push(IgnoredSetting {
                name: format!("{setting} {gate}"),
                value: value.to_owned(),
                why: UNKNOWN_GATE,
            });
            continue;
        }
        let on = crate::feature_gates::parse_go_bool(value) == Some(true);
        if let Some((_, why)) = unsupported.iter().find(|(g, _)| *g == gate)
            && on
        {
            out.push(IgnoredSetting {
                name: format!("{setting} {gate}"),
                value: value.to_owned(),
                why,
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn run(vars: &[(&str, &str)], gates: &str) -> Vec<String> {
        let env: BTreeMap<&str, &str> = vars.iter().copied().collect();
        ignored_settings(|k| env.get(k).map(|v| (*v).to_owned()), gates)
            .into_iter()
            .map(|s| format!("{}={}", s.name, s.value))
            .collect()
    }

    #[test]
    fn unknown_gates_are_named_whatever_their_value() {
        assert_eq!(
            run(&[], "CapacityBuffers=true, NodeRepair=true,Hello=false"),
            [
                "FEATURE_GATES CapacityBuffers=true",
                "FEATURE_GATES Hello=false"
            ]
        );
        assert_eq!(
            run(
                &[("AWS_FEATURE_GATES", "NodeClassCel=true,NodeClassCEL=true")],
                ""
            ),
            ["AWS_FEATURE_GATES NodeClassCel=true"]
        );
    }

    #[test]
    fn upstream_defaults_are_quiet_and_other_values_are_named() {
        assert!(run(&[], "NodeRepair=false,CapacityBuffer=false").is_empty());
        assert!(
            run(
                &[
                    ("ENABLE_PROFILING", "false"),
                    ("IGNORE_DRA_REQUESTS", "true"),
                    ("MEMORY_LIMIT", "-1"),
                    ("KARPENTER_SERVICE", ""),
                    ("DISABLE_CONTROLLER_WARMUP", "false"),
                    ("ENABLE_ZONAL_SHIFT", "false"),
                ],
                ""
            )
            .is_empty()
        );
        assert_eq!(
            run(
                &[
                    ("ENABLE_PROFILING", "true"),
                    // Acted on (`--ignore-dra-requests`), so never named.
                    ("IGNORE_DRA_REQUESTS", "false"),
                    // Read by nothing upstream either (the webhooks it named are gone).
                    ("KARPENTER_SERVICE", "karpenter"),
                    ("LOG_LEVEL", "debug"),
                    ("DISABLE_CONTROLLER_WARMUP", "true"),
                    ("ENABLE_ZONAL_SHIFT", "true"),
                ],
                "NodeRepair=true, CapacityBuffer=true"
            ),
            [
                "ENABLE_PROFILING=true",
                "DISABLE_CONTROLLER_WARMUP=true",
                "ENABLE_ZONAL_SHIFT=true",
            ]
        );
    }

    #[test]
    fn v1_15_settings_are_named_when_they_would_change_behaviour() {
        // Defaults, and the same durations written another way, are quiet.
        assert!(
            run(
                &[
                    ("SECURITY_GROUP_REFRESH_INTERVAL", "60s"),
                    ("AMI_REFRESH_INTERVAL", "1m"),
                    ("SUBNET_REFRESH_INTERVAL", "1m0s"),
                    (
                        "AWS_FEATURE_GATES",
                        "NodeClassCEL=false,DRANVIDIAGPU=false,DRAEFA=false,RebootForRepair=false"
                    ),
                ],
                "TerminateFirstDrift=false,TerminateFirstRepair=false,PodDeletionCostManagement=false"
            )
            .is_empty()
        );
        assert_eq!(
            run(
                &[
                    // Acted on by the AWS provider, so never named.
                    ("SECURITY_GROUP_REFRESH_INTERVAL", "5m"),
                    (
                        "AWS_FEATURE_GATES",
                        "RebootForRepair=true, DRAEFA=false, NodeClassCEL=true"
                    ),
                    // Acted on (karpenter_cluster::default_spread), so never named.
                    (
                        "SCHEDULER_CONFIG",
                        "podTopologySpread: {defaultConstraints: [{maxSkew: 1, topologyKey: topology.kubernetes.io/zone, whenUnsatisfiable: ScheduleAnyway}]}"
                    ),
                ],
                "TerminateFirstDrift=true,PodDeletionCostManagement=1"
            ),
            [
                "FEATURE_GATES TerminateFirstDrift=true",
                "FEATURE_GATES PodDeletionCostManagement=1",
                "AWS_FEATURE_GATES RebootForRepair=true",
            ]
        );
    }
}
