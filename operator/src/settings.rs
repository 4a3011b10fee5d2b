//! Settings of `karpenter controller`: every flag has the environment variable Karpenter uses
//! for it (`pkg/operator/options`) and the same default, so a Karpenter Helm values file or
//! Deployment env block configures karpenter-rs unchanged.

use karpenter_cloudprovider::duration::parse_go_duration;
use karpenter_cloudprovider_fake::reservations::parse_reservations;
pub use karpenter_cluster::feature_gates::{FeatureGateError, FeatureGates};
use karpenter_scheduling::solver::{MinValuesPolicy, PreferencePolicy};
use std::time::Duration;

/// A setting that cannot be used, naming the flag / variable and the offending text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SettingsError {
    /// A duration Go's `time.ParseDuration` would reject, or one that is not positive.
    #[error("--{flag} ({env}): invalid duration {value:?}: {reason}")]
    Duration {
        /// Flag name.
        flag: &'static str,
        /// Environment variable.
        env: &'static str,
        /// The text given.
        value: String,
        /// Why it is rejected.
        reason: String,
    },
    /// `FAKE_CAPACITY_RESERVATIONS` is not a JSON list of reservations.
    #[error("--fake-capacity-reservations (FAKE_CAPACITY_RESERVATIONS): {0}")]
    FakeReservations(String),
    /// `FEATURE_GATES` is not a comma-separated list of `Name=true|false`.
    #[error("--feature-gates (FEATURE_GATES): {0}")]
    FeatureGates(#[from] FeatureGateError),
    /// A setting the chosen provider cannot run without.
    #[error("--{flag} ({env}) is required with --cloud-provider {provider}")]
    Required {
        /// Flag name.
        flag: &'static str,
        /// Environment variable.
        env: &'static str,
        /// The provider.
        provider: &'static str,
    },
    /// A value outside its allowed set (log level, policies, provider …).
    #[error("--{flag} ({env}): invalid value {value:?}, expected one of {expected}")]
    Invalid {
        /// Flag name.
        flag: &'static str,
        /// Environment variable.
        env: &'static str,
        /// The text given.
        value: String,
        /// The accepted values.
        expected: &'static str,
    },
}

/// Flags and environment variables of `karpenter controller`.
#[derive(Debug, Clone, clap::Args)]
pub struct ControllerArgs {
    /// Cloud provider: `fake` (in-memory instances over the bundled EC2 catalogue; the
    /// controller also creates, heartbeats and deletes their Node objects) or `aws` (EC2;
    /// only in binaries built with the `aws` feature, as the published image is).
    #[arg(long, env = "CLOUD_PROVIDER", default_value = "fake")]
    pub cloud_provider: String,
    /// Cluster name (logged at start; providers that tag instances use it).
    #[arg(long, env = "CLUSTER_NAME", default_value = "")]
    pub cluster_name: String,
    /// Longest batching window for pending pods (Go duration).
    #[arg(long, env = "BATCH_MAX_DURATION", default_value = "10s")]
    pub batch_max_duration: String,
    /// Batching window ends after this long without a new pending pod (Go duration).
    #[arg(long, env = "BATCH_IDLE_DURATION", default_value = "1s")]
    pub batch_idle_duration: String,
    /// Feature gates, `Name=bool` comma-separated.
    #[arg(
        long,
        env = "FEATURE_GATES",
        default_value = "NodeRepair=false,ReservedCapacity=true,SpotToSpotConsolidation=false,NodeOverlay=false,StaticCapacity=false"
    )]
    pub feature_gates: String,
    /// Capacity reservations of `--cloud-provider fake`: a JSON list of `{id, instanceType,
    /// zone, count, type, interruptible}`.
    #[arg(long, env = "FAKE_CAPACITY_RESERVATIONS", default_value = "[]")]
    pub fake_capacity_reservations: String,
    /// Log verbosity: `debug`, `info` or `error`.
    #[arg(long, env = "LOG_LEVEL", default_value = "info")]
    pub log_level: String,
    /// Log format: `json` (Karpenter's default, one object a line) or `text`.
    #[arg(long, env = "LOG_FORMAT", default_value = "json")]
    pub log_format: String,
    /// Where logs go: `stdout` or `stderr` (Karpenter's LOG_OUTPUT_PATHS; one path).
    #[arg(long, env = "LOG_OUTPUT_PATHS", default_value = "stdout")]
    pub log_output_paths: String,
    /// Port of `/metrics`.
    #[arg(long, env = "METRICS_PORT", default_value_t = 8080)]
    pub metrics_port: u16,
    /// Port of `/healthz` and `/readyz`.
    #[arg(long, env = "HEALTH_PROBE_PORT", default_value_t = 8081)]
    pub health_probe_port: u16,
    /// Run without a leader-election Lease (only for a single replica).
    #[arg(long, env = "DISABLE_LEADER_ELECTION", default_value_t = false, action = clap::ArgAction::Set)]
    pub disable_leader_election: bool,
    /// Shadow mode: watch the cluster and report (logs and `karpenter_dry_run_*` metrics)
    /// what would be provisioned and disrupted, writing nothing to the API server or the
    /// cloud. Needs only read access; implies no leader election.
    #[arg(long, env = "DRY_RUN", default_value_t = false, action = clap::ArgAction::Set, num_args = 0..=1, default_missing_value = "true")]
    pub dry_run: bool,
    /// Namespace of the leader-election Lease; default: the pod's namespace
    /// (`SYSTEM_NAMESPACE`), else `kube-system`.
    #[arg(long, env = "LEADER_ELECTION_NAMESPACE", default_value = "")]
    pub leader_election_namespace: String,
    /// Name of the leader-election Lease.
    #[arg(
        long,
        env = "LEADER_ELECTION_NAME",
        default_value = "karpenter-leader-election"
    )]
    pub leader_election_name: String,
    /// Sustained API request rate (requests per second).
    #[arg(long, env = "KUBE_CLIENT_QPS", default_value_t = 200)]
    pub kube_client_qps: u32,
    /// API request burst above the sustained rate.
    #[arg(long, env = "KUBE_CLIENT_BURST", default_value_t = 300)]
    pub kube_client_burst: u32,
    /// `Respect` or `Ignore` preferred affinities, ScheduleAnyway spreads and
    /// PreferNoSchedule taints.
    #[arg(long, env = "PREFERENCE_POLICY", default_value = "Respect")]
    pub preference_policy: String,
    /// `Strict` or `BestEffort` minValues.
    #[arg(long, env = "MIN_VALUES_POLICY", default_value = "Strict")]
    pub min_values_policy: String,
    /// The namespace the controller runs in (the chart sets it from the downward API).
    #[arg(long, env = "SYSTEM_NAMESPACE", default_value = "kube-system")]
    pub system_namespace: String,
    /// aws: the API server URL new nodes join (required; Karpenter can look it up with
    /// eks:DescribeCluster, karpenter-rs does not call EKS).
    #[arg(long, env = "CLUSTER_ENDPOINT", default_value = "")]
    pub cluster_endpoint: String,
    /// aws: base64 PEM CA bundle for nodes; default: the CA the controller itself trusts
    /// (the service-account CA in a pod, else the kubeconfig's).
    #[arg(long, env = "CLUSTER_CA_BUNDLE", default_value = "")]
    pub cluster_ca_bundle: String,
    /// aws: SQS queue (name or URL) receiving EventBridge interruption events; empty
    /// disables interruption handling.
    #[arg(long, env = "INTERRUPTION_QUEUE", default_value = "")]
    pub interruption_queue: String,
    /// aws: no internet access; on-demand prices come from the bundled table instead of
    /// the Pricing API.
    #[arg(long, env = "ISOLATED_VPC", default_value_t = false, action = clap::ArgAction::Set)]
    pub isolated_vpc: bool,
    /// aws: share of memory the hypervisor takes from every instance type (0.075 = 7.5%).
    #[arg(long, env = "VM_MEMORY_OVERHEAD_PERCENT", default_value_t = 0.075)]
    pub vm_memory_overhead_percent: f64,
    /// aws: ENIs reserved for other uses when computing max pods.
    #[arg(long, env = "RESERVED_ENIS", default_value_t = 0)]
    pub reserved_enis: u32,
}

/// Log verbosity.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogLevel {
    /// Everything.
    Debug,
    /// Decisions and state changes.
    Info,
    /// Errors only.
    Error,
}

/// Log format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormat {
    /// One JSON object a line.
    Json,
    /// Human-readable lines.
    Text,
}

/// Where log lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogOutput {
    /// Standard output.
    Stdout,
    /// Standard error.
    Stderr,
}

/// The cloud providers `karpenter controller` can run with.
///
/// New providers are added here (and in `controller::provider::build`); any other name is
/// rejected when the settings are parsed, before anything connects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProviderKind {
    /// The in-memory provider; the controller plays cloud and kubelet for its nodes.
    Fake,
    /// EC2, with EC2NodeClasses and the SQS interruption queue.
    Aws,
}

impl ProviderKind {
    /// Every provider name accepted by `--cloud-provider`.
    pub const NAMES: &'static str = "fake, aws";

    fn parse(text: &str) -> Option<Self> {
        match text {
            "fake" => Some(Self::Fake),
            "aws" => Some(Self::Aws),
            _ => None,
        }
    }
}

/// Settings only the `aws` provider reads (Karpenter's AWS options).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct AwsOptions {
    /// CLUSTER_ENDPOINT.
    pub cluster_endpoint: String,
    /// CLUSTER_CA_BUNDLE (empty: the controller's own CA).
    pub cluster_ca_bundle: String,
    /// INTERRUPTION_QUEUE (empty: disabled).
    pub interruption_queue: String,
    /// ISOLATED_VPC.
    pub isolated_vpc: bool,
    /// VM_MEMORY_OVERHEAD_PERCENT, a fraction in [0, 1).
    pub vm_memory_overhead_percent: f64,
    /// RESERVED_ENIS.
    pub reserved_enis: u32,
}

/// Validated settings.
#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    /// The provider.
    pub provider: ProviderKind,
    /// CLUSTER_NAME.
    pub cluster_name: String,
    /// BATCH_MAX_DURATION.
    pub batch_max_duration: Duration,
    /// BATCH_IDLE_DURATION.
    pub batch_idle_duration: Duration,
    /// FEATURE_GATES.
    pub feature_gates: FeatureGates,
    /// FAKE_CAPACITY_RESERVATIONS.
    pub fake_reservations: Vec<karpenter_cloudprovider_fake::FakeReservation>,
    /// LOG_LEVEL.
    pub log_level: LogLevel,
    /// LOG_FORMAT.
    pub log_format: LogFormat,
    /// LOG_OUTPUT_PATHS.
    pub log_output: LogOutput,
    /// METRICS_PORT.
    pub metrics_port: u16,
    /// HEALTH_PROBE_PORT.
    pub health_probe_port: u16,
    /// DISABLE_LEADER_ELECTION (always true in dry-run mode).
    pub disable_leader_election: bool,
    /// DRY_RUN: decide and report, write nothing.
    pub dry_run: bool,
    /// Namespace of the leader-election Lease (resolved default).
    pub leader_election_namespace: String,
    /// LEADER_ELECTION_NAME.
    pub leader_election_name: String,
    /// KUBE_CLIENT_QPS (at least 1).
    pub kube_client_qps: u32,
    /// KUBE_CLIENT_BURST (at least the QPS).
    pub kube_client_burst: u32,
    /// PREFERENCE_POLICY.
    pub preference_policy: PreferencePolicy,
    /// MIN_VALUES_POLICY.
    pub min_values_policy: MinValuesPolicy,
    /// SYSTEM_NAMESPACE.
    pub system_namespace: String,
    /// The `aws` provider's options.
    pub aws: AwsOptions,
}

impl Default for Settings {
    /// Karpenter's defaults with the fake provider (what an empty command line and
    /// environment give).
    fn default() -> Self {
        Settings {
            provider: ProviderKind::Fake,
            cluster_name: String::new(),
            batch_max_duration: Duration::from_secs(10),
            batch_idle_duration: Duration::from_secs(1),
            feature_gates: FeatureGates::default(),
            fake_reservations: Vec::new(),
            log_level: LogLevel::Info,
            log_format: LogFormat::Json,
            log_output: LogOutput::Stdout,
            metrics_port: 8080,
            health_probe_port: 8081,
            disable_leader_election: false,
            dry_run: false,
            leader_election_namespace: "kube-system".into(),
            leader_election_name: "karpenter-leader-election".into(),
            kube_client_qps: 200,
            kube_client_burst: 300,
            preference_policy: PreferencePolicy::Respect,
            min_values_policy: MinValuesPolicy::Strict,
            system_namespace: "kube-system".into(),
            aws: AwsOptions {
                vm_memory_overhead_percent: 0.075,
                ..AwsOptions::default()
            },
        }
    }
}

fn duration(flag: &'static str, env: &'static str, value: &str) -> Result<Duration, SettingsError> {
    let err = |reason: String| SettingsError::Duration {
        flag,
        env,
        value: value.to_owned(),
        reason,
    };
    let nanos = parse_go_duration(value).map_err(|e| err(e.to_string()))?;
    let nanos = u64::try_from(nanos)
        .ok()
        .filter(|n| *n > 0)
        .ok_or_else(|| err("must be positive".into()))?;
    Ok(Duration::from_nanos(nanos))
}

impl Settings {
    /// Validates the raw flags.
    ///
    /// # Errors
    /// A [`SettingsError`] naming the first invalid flag.
    pub fn from_args(args: &ControllerArgs) -> Result<Self, SettingsError> {
        let provider =
            ProviderKind::parse(&args.cloud_provider).ok_or_else(|| SettingsError::Invalid {
                flag: "cloud-provider",
                env: "CLOUD_PROVIDER",
                value: args.cloud_provider.clone(),
                expected: ProviderKind::NAMES,
            })?;
        let log_level = match args.log_level.as_str() {
            "debug" => LogLevel::Debug,
            // Karpenter accepts an empty level as info.
            "info" | "" => LogLevel::Info,
            "error" => LogLevel::Error,
            other => {
                return Err(SettingsError::Invalid {
                    flag: "log-level",
                    env: "LOG_LEVEL",
                    value: other.to_owned(),
                    expected: "debug, info, error",
                });
            }
        };
        let log_format = match args.log_format.as_str() {
            "json" => LogFormat::Json,
            "text" => LogFormat::Text,
            other => {
                return Err(SettingsError::Invalid {
                    flag: "log-format",
                    env: "LOG_FORMAT",
                    value: other.to_owned(),
                    expected: "json, text",
                });
            }
        };
        let log_output = match args.log_output_paths.as_str() {
            "stdout" | "" => LogOutput::Stdout,
            "stderr" => LogOutput::Stderr,
            other => {
                return Err(SettingsError::Invalid {
                    flag: "log-output-paths",
                    env: "LOG_OUTPUT_PATHS",
                    value: other.to_owned(),
                    expected: "stdout, stderr",
                });
            }
        };
        let preference_policy = match args.preference_policy.as_str() {
            "Respect" => PreferencePolicy::Respect,
            "Ignore" => PreferencePolicy::Ignore,
            other => {
                return Err(SettingsError::Invalid {
                    flag: "preference-policy",
                    env: "PREFERENCE_POLICY",
                    value: other.to_owned(),
                    expected: "Respect, Ignore",
                });
            }
        };
        let min_values_policy = match args.min_values_policy.as_str() {
            "Strict" => MinValuesPolicy::Strict,
            "BestEffort" => MinValuesPolicy::BestEffort,
            other => {
                return Err(SettingsError::Invalid {
                    flag: "min-values-policy",
                    env: "MIN_VALUES_POLICY",
                    value: other.to_owned(),
                    expected: "Strict, BestEffort",
                });
            }
        };
        if args.kube_client_qps == 0 {
            return Err(SettingsError::Invalid {
                flag: "kube-client-qps",
                env: "KUBE_CLIENT_QPS",
                value: "0".into(),
                expected: "a positive integer",
            });
        }
        if !(0.0..1.0).contains(&args.vm_memory_overhead_percent) {
            return Err(SettingsError::Invalid {
                flag: "vm-memory-overhead-percent",
                env: "VM_MEMORY_OVERHEAD_PERCENT",
                value: args.vm_memory_overhead_percent.to_string(),
                expected: "a fraction in [0, 1)",
            });
        }
        if provider == ProviderKind::Aws {
            // Instances are tagged and user data written with both; without them nodes
            // could neither be found again nor join.
            for (flag, env, value) in [
                ("cluster-name", "CLUSTER_NAME", &args.cluster_name),
                (
                    "cluster-endpoint",
                    "CLUSTER_ENDPOINT",
                    &args.cluster_endpoint,
                ),
            ] {
                if value.is_empty() {
                    return Err(SettingsError::Required {
                        flag,
                        env,
                        provider: "aws",
                    });
                }
            }
        }
        let leader_election_namespace = if args.leader_election_namespace.is_empty() {
            args.system_namespace.clone()
        } else {
            args.leader_election_namespace.clone()
        };
        Ok(Self {
            provider,
            cluster_name: args.cluster_name.clone(),
            batch_max_duration: duration(
                "batch-max-duration",
                "BATCH_MAX_DURATION",
                &args.batch_max_duration,
            )?,
            batch_idle_duration: duration(
                "batch-idle-duration",
                "BATCH_IDLE_DURATION",
                &args.batch_idle_duration,
            )?,
            feature_gates: FeatureGates::parse(&args.feature_gates)?,
            fake_reservations: parse_reservations(&args.fake_capacity_reservations)
                .map_err(SettingsError::FakeReservations)?,
            log_level,
            log_format,
            log_output,
            metrics_port: args.metrics_port,
            health_probe_port: args.health_probe_port,
            disable_leader_election: args.disable_leader_election || args.dry_run,
            dry_run: args.dry_run,
            leader_election_namespace,
            leader_election_name: args.leader_election_name.clone(),
            kube_client_qps: args.kube_client_qps,
            kube_client_burst: args.kube_client_burst.max(args.kube_client_qps),
            preference_policy,
            min_values_policy,
            system_namespace: args.system_namespace.clone(),
            aws: AwsOptions {
                cluster_endpoint: args.cluster_endpoint.clone(),
                cluster_ca_bundle: args.cluster_ca_bundle.clone(),
                interruption_queue: args.interruption_queue.clone(),
                isolated_vpc: args.isolated_vpc,
                vm_memory_overhead_percent: args.vm_memory_overhead_percent,
                reserved_enis: args.reserved_enis,
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(clap::Parser)]
    struct Cli {
        #[command(flatten)]
        args: ControllerArgs,
    }

    fn parse(argv: &[&str]) -> Result<Settings, SettingsError> {
        let mut full = vec!["karpenter"];
        full.extend_from_slice(argv);
        Settings::from_args(&Cli::parse_from(full).args)
    }

    #[test]
    fn fake_capacity_reservations_parse_or_name_the_entry() {
        let s = parse(&[
            "--fake-capacity-reservations",
            r#"[{"id": "cr-1", "instanceType": "m5.xlarge", "zone": "us-east-1a", "count": 2}]"#,
        ])
        .unwrap();
        assert_eq!(s.fake_reservations.len(), 1);
        assert_eq!(s.fake_reservations[0].count, 2);
        assert!(parse(&[]).unwrap().fake_reservations.is_empty());
        let e = parse(&["--fake-capacity-reservations", r#"[{"id": "cr-1"}]"#]).unwrap_err();
        let text = e.to_string();
        assert!(
            text.contains("--fake-capacity-reservations") && text.contains("[0]"),
            "{text}"
        );
    }

    #[test]
    fn dry_run_is_a_switch_and_turns_leader_election_off() {
        let s = parse(&["--dry-run"]).unwrap();
        assert!(s.dry_run && s.disable_leader_election, "a Lease is a write");
        let s = parse(&["--dry-run", "false"]).unwrap();
        assert!(!s.dry_run && !s.disable_leader_election);
    }

    #[test]
    fn defaults_match_karpenter() {
        let s = parse(&[]).expect("defaults are valid");
        assert_eq!(s.batch_max_duration, Duration::from_secs(10));
        assert_eq!(s.batch_idle_duration, Duration::from_secs(1));
        assert_eq!(s.metrics_port, 8080);
        assert_eq!(s.health_probe_port, 8081);
        assert_eq!(s.kube_client_qps, 200);
        assert_eq!(s.kube_client_burst, 300);
        assert!(!s.disable_leader_election);
        assert!(!s.dry_run);
        assert_eq!(s.leader_election_name, "karpenter-leader-election");
        assert_eq!(s.preference_policy, PreferencePolicy::Respect);
        assert_eq!(s.min_values_policy, MinValuesPolicy::Strict);
        assert_eq!(s.feature_gates, FeatureGates::default());
        assert!(!s.feature_gates.spot_to_spot_consolidation);
        assert_eq!(s.log_level, LogLevel::Info);
        assert_eq!(s.provider, ProviderKind::Fake);
        assert_eq!(s, Settings::default());
    }

    #[test]
    fn flags_override() {
        let s = parse(&[
            "--batch-max-duration",
            "1m30s",
            "--batch-idle-duration",
            "500ms",
            "--feature-gates",
            "SpotToSpotConsolidation=true",
            "--disable-leader-election",
            "true",
            "--leader-election-namespace",
            "karpenter",
            "--log-level",
            "debug",
            "--log-format",
            "text",
            "--min-values-policy",
            "BestEffort",
        ])
        .unwrap();
        assert_eq!(s.batch_max_duration, Duration::from_secs(90));
        assert_eq!(s.batch_idle_duration, Duration::from_millis(500));
        assert!(s.feature_gates.spot_to_spot_consolidation);
        assert!(
            s.feature_gates.reserved_capacity,
            "unlisted gates keep defaults"
        );
        assert!(s.disable_leader_election);
        assert_eq!(s.leader_election_namespace, "karpenter");
        assert_eq!(s.log_level, LogLevel::Debug);
        assert_eq!(s.log_format, LogFormat::Text);
        assert_eq!(s.min_values_policy, MinValuesPolicy::BestEffort);
    }

    #[test]
    fn aws_requires_cluster_name_and_endpoint() {
        assert_eq!(
            parse(&["--cloud-provider", "aws"]),
            Err(SettingsError::Required {
                flag: "cluster-name",
                env: "CLUSTER_NAME",
                provider: "aws"
            })
        );
        assert_eq!(
            parse(&["--cloud-provider", "aws", "--cluster-name", "prod"]),
            Err(SettingsError::Required {
                flag: "cluster-endpoint",
                env: "CLUSTER_ENDPOINT",
                provider: "aws"
            })
        );
        let s = parse(&[
            "--cloud-provider",
            "aws",
            "--cluster-name",
            "prod",
            "--cluster-endpoint",
            "https://ABC.gr7.us-east-1.eks.amazonaws.com",
            "--interruption-queue",
            "prod",
            "--isolated-vpc",
            "true",
            "--reserved-enis",
            "1",
        ])
        .expect("valid");
        assert_eq!(s.provider, ProviderKind::Aws);
        assert_eq!(s.aws.interruption_queue, "prod");
        assert!(s.aws.isolated_vpc);
        assert_eq!(s.aws.reserved_enis, 1);
        assert_eq!(s.aws.vm_memory_overhead_percent, 0.075);
        assert!(matches!(
            parse(&["--vm-memory-overhead-percent", "1.5"]),
            Err(SettingsError::Invalid {
                flag: "vm-memory-overhead-percent",
                ..
            })
        ));
        assert!(matches!(
            parse(&["--cloud-provider", "gcp"]),
            Err(SettingsError::Invalid {
                flag: "cloud-provider",
                ..
            })
        ));
    }

    #[test]
    fn invalid_values_name_the_flag() {
        let e = parse(&["--batch-max-duration", "10"]).unwrap_err();
        assert!(e.to_string().contains("BATCH_MAX_DURATION"), "{e}");
        let e = parse(&["--batch-idle-duration", "1d"]).unwrap_err();
        assert!(e.to_string().contains("batch-idle-duration"), "{e}");
        let e = parse(&["--log-level", "verbose"]).unwrap_err();
        assert!(e.to_string().contains("LOG_LEVEL"), "{e}");
        let e = parse(&["--preference-policy", "respect"]).unwrap_err();
        assert!(e.to_string().contains("PREFERENCE_POLICY"), "{e}");
        let e = parse(&["--cloud-provider", "gcp"]).unwrap_err();
        assert!(e.to_string().contains("\"gcp\""), "{e}");
        assert!(e.to_string().contains("fake"), "{e}");
    }

    #[test]
    fn leader_namespace_defaults_to_system_namespace() {
        let s = parse(&["--system-namespace", "karpenter"]).unwrap();
        assert_eq!(s.leader_election_namespace, "karpenter");
    }
}
