//! Karpenter v1.14 settings (environment variables and feature gates) that karpenter-rs does
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
const UNSUPPORTED_ENV: [(&str, &str, &str); 9] = [
    (
        "KARPENTER_SERVICE",
        "",
        "karpenter-rs runs no webhooks (validation is in the CRDs), so it needs no webhook Service",
    ),
    (
        "ENABLE_PROFILING",
        "false",
        "karpenter-rs serves no profiling endpoints",
    ),
    (
        "DISABLE_CONTROLLER_WARMUP",
        "false",
        "karpenter-rs always warms up: every replica starts its watches before leader election",
    ),
    (
        "DISABLE_CLUSTER_STATE_OBSERVABILITY",
        "false",
        "cluster-state metrics and events are always exported",
    ),
    (
        "LOG_ERROR_OUTPUT_PATHS",
        "stderr",
        "errors are written with the other logs, to LOG_OUTPUT_PATHS",
    ),
    (
        "IGNORE_DRA_REQUESTS",
        "true",
        "dynamic resource allocation requests are always ignored in scheduling simulations \
         (upstream's default)",
    ),
    (
        "MEMORY_LIMIT",
        "-1",
        "a Go garbage-collector limit; a Rust binary has no such setting",
    ),
    (
        "CPU_REQUESTS",
        "1000",
        "upstream scales its reconcile concurrency with it; karpenter-rs runs one reconciler",
    ),
    (
        "ENABLE_ZONAL_SHIFT",
        "false",
        "the AWS provider reads no ARC zonal shifts: launches and terminations do not avoid a \
         zonally shifted availability zone",
    ),
];

/// Feature gates upstream has and karpenter-rs does not implement, with what happens instead
/// (none at the moment: every gate of Karpenter v1.15 is acted on).
const UNSUPPORTED_GATES: [(&str, &str); 0] = [];

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
        if same == value.trim() {
            continue;
        }
        out.push(IgnoredSetting {
            name: name.to_owned(),
            value,
            why,
        });
    }
    for entry in feature_gates.split(',') {
        let Some((gate, value)) = entry.split_once('=') else {
            continue;
        };
        let (gate, value) = (gate.trim(), value.trim());
        let on = crate::feature_gates::parse_go_bool(value) == Some(true);
        if let Some((_, why)) = UNSUPPORTED_GATES.iter().find(|(g, _)| *g == gate)
            && on
        {
            out.push(IgnoredSetting {
                name: format!("FEATURE_GATES {gate}"),
                value: value.to_owned(),
                why,
            });
        }
    }
    out
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
                    ("IGNORE_DRA_REQUESTS", "false"),
                    ("KARPENTER_SERVICE", "karpenter"),
                    ("LOG_LEVEL", "debug"),
                    ("DISABLE_CONTROLLER_WARMUP", "true"),
                    ("ENABLE_ZONAL_SHIFT", "true"),
                ],
                "NodeRepair=true, CapacityBuffer=true"
            ),
            [
                "KARPENTER_SERVICE=karpenter",
                "ENABLE_PROFILING=true",
                "DISABLE_CONTROLLER_WARMUP=true",
                "IGNORE_DRA_REQUESTS=false",
                "ENABLE_ZONAL_SHIFT=true",
            ]
        );
    }
}
