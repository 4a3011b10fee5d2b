//! Settings of `karpenter controller`, validated: every flag has the environment variable
//! Karpenter uses for it (`pkg/operator/options`) and the same default, so a Karpenter Helm
//! values file or Deployment env block configures karpenter-rs unchanged.
//!
//! The operator defines the flags themselves (with `clap`) and hands their text to
//! [`Settings::from_args`] as [`Flags`]; everything that checks, converts and derives a
//! value lives here, so it is tested without a command line.

#![forbid(unsafe_code)]

mod error;
mod flags;
pub mod launch_faults;
mod values;

pub use error::SettingsError;
pub use flags::Flags;
pub use karpenter_cluster::feature_gates::{FeatureGateError, FeatureGates, gate_map};
pub use karpenter_cluster::scheduler_config::{SchedulerConfig, SchedulerConfigError};
pub use values::{
    ErrorOutput, LogFormat, LogLevel, LogOutput, ProviderKind, duration, min_values_policy,
    preference_policy,
};

use karpenter_cloudprovider_fake::FakeReservation;
use karpenter_cloudprovider_fake::launch_faults::LaunchFaults;
use karpenter_cloudprovider_fake::reservations::parse_reservations;
use karpenter_cluster::scheduler_config::parse_scheduler_config;
use karpenter_disruption::RepackOptions;
use karpenter_scheduling::solver::{MinValuesPolicy, PreferencePolicy};
use std::time::Duration;

/// Settings only the `aws` provider reads (Karpenter's AWS options).
#[derive(Debug, Clone, PartialEq)]
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
    /// AWS_FEATURE_GATES `NodeClassCEL`: kubelet `maxPods`, `kubeReserved` and
    /// `systemReserved` may be CEL expressions over the instance type.
    pub node_class_cel: bool,
    /// AMI_REFRESH_INTERVAL: how long resolved AMIs are reused.
    pub ami_refresh_interval: Duration,
    /// SUBNET_REFRESH_INTERVAL: how long resolved subnets are reused.
    pub subnet_refresh_interval: Duration,
    /// SECURITY_GROUP_REFRESH_INTERVAL: how long resolved security groups are reused.
    pub security_group_refresh_interval: Duration,
}

impl Default for AwsOptions {
    fn default() -> Self {
        Self {
            cluster_endpoint: String::new(),
            cluster_ca_bundle: String::new(),
            interruption_queue: String::new(),
            isolated_vpc: false,
            vm_memory_overhead_percent: 0.075,
            reserved_enis: 0,
            node_class_cel: false,
            ami_refresh_interval: Duration::from_secs(60),
            subnet_refresh_interval: Duration::from_secs(60),
            security_group_refresh_interval: Duration::from_secs(60),
        }
    }
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
    /// LEGACY_NODE_REPAIR: with `NodeRepair`, the pre-v1.15 repair controller (immediate,
    /// forceful replacement outside disruption budgets) instead of node repair as a
    /// disruption method.
    pub legacy_node_repair: bool,
    /// FAKE_CAPACITY_RESERVATIONS.
    pub fake_reservations: Vec<FakeReservation>,
    /// FAKE_INSUFFICIENT_CAPACITY and FAKE_LAUNCH_DELAY: offerings the fake provider fails
    /// with insufficient capacity, and how long its launches take.
    pub fake_launch_faults: LaunchFaults,
    /// LOG_LEVEL.
    pub log_level: LogLevel,
    /// LOG_FORMAT.
    pub log_format: LogFormat,
    /// LOG_OUTPUT_PATHS.
    pub log_output: LogOutput,
    /// LOG_ERROR_OUTPUT_PATHS: where a log line that cannot be written is reported.
    pub log_error_output: Vec<ErrorOutput>,
    /// METRICS_PORT.
    pub metrics_port: u16,
    /// HEALTH_PROBE_PORT.
    pub health_probe_port: u16,
    /// DISABLE_LEADER_ELECTION (always true in dry-run mode).
    pub disable_leader_election: bool,
    /// DRY_RUN: decide and report, write nothing.
    pub dry_run: bool,
    /// DISABLE_CLUSTER_STATE_OBSERVABILITY: no pod, node and NodePool gauges and no status
    /// condition metrics of NodeClaims, NodePools and Nodes (upstream's cluster-state
    /// observability controllers), to spare a large cluster their cost.
    pub disable_cluster_state_observability: bool,
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
    /// Re-pack consolidation (REPACK_CONSOLIDATION, karpenter-rs's own method) with its
    /// price-improvement threshold (REPACK_PRICE_IMPROVEMENT_THRESHOLD), the age below
    /// which nodes are left out of it (REPACK_MIN_NODE_AGE) and the score a move must reach
    /// for its churn (REPACK_MIN_SCORE); `None` when off.
    pub repack: Option<RepackOptions>,
    /// SYSTEM_NAMESPACE.
    pub system_namespace: String,
    /// The `aws` provider's options.
    pub aws: AwsOptions,
    /// SCHEDULER_CONFIG: the kube-scheduler settings the scheduling simulation mirrors
    /// (default pod topology spread constraints); `None` when empty.
    pub scheduler_config: Option<SchedulerConfig>,
    /// IGNORE_DRA_REQUESTS: plan pods without their ResourceClaims (upstream's default).
    /// When false, the controller watches resource.k8s.io objects and places a pod with
    /// claims only where devices serve them.
    pub ignore_dra_requests: bool,
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
            legacy_node_repair: false,
            fake_reservations: Vec::new(),
            fake_launch_faults: LaunchFaults::default(),
            log_level: LogLevel::Info,
            log_format: LogFormat::Json,
            log_output: LogOutput::Stdout,
            log_error_output: vec![ErrorOutput::Stderr],
            metrics_port: 8080,
            health_probe_port: 8081,
            disable_leader_election: false,
            dry_run: false,
            disable_cluster_state_observability: false,
            leader_election_namespace: "kube-system".into(),
            leader_election_name: "karpenter-leader-election".into(),
            kube_client_qps: 200,
            kube_client_burst: 300,
            preference_policy: PreferencePolicy::Respect,
            min_values_policy: MinValuesPolicy::Strict,
            repack: Some(RepackOptions::default()),
            system_namespace: "kube-system".into(),
            aws: AwsOptions::default(),
            scheduler_config: None,
            ignore_dra_requests: true,
        }
    }
}

impl Settings {
    /// Validates the raw flags, checking them in a fixed order (provider, logging,
    /// policies, client rate, re-pack threshold, node age and score, AWS options, durations, gates,
    /// reservations, scheduler configuration) so the same bad
    /// input always names the same flag.
    ///
    /// # Errors
    /// A [`SettingsError`] naming the first invalid flag.
    pub fn from_args<'a>(args: impl Into<Flags<'a>>) -> Result<Self, SettingsError> {
        let args: Flags<'a> = args.into();
        let provider = ProviderKind::parse(args.cloud_provider)?;
        let log_level = LogLevel::parse(args.log_level)?;
        let log_format = LogFormat::parse(args.log_format)?;
        let log_output = LogOutput::parse(args.log_output_paths)?;
        let log_error_output = ErrorOutput::parse_list(args.log_error_output_paths)?;
        let preference_policy = preference_policy(args.preference_policy)?;
        let min_values_policy = min_values_policy(args.min_values_policy)?;
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
        let threshold = args.repack_price_improvement_threshold;
        if !RepackOptions::valid_threshold(threshold) {
            return Err(SettingsError::Invalid {
                flag: "repack-price-improvement-threshold",
                env: "REPACK_PRICE_IMPROVEMENT_THRESHOLD",
                value: threshold.to_string(),
                expected: RepackOptions::THRESHOLD_RANGE,
            });
        }
        let repack_min_node_age = values::repack_min_node_age(args.repack_min_node_age)?;
        if !RepackOptions::valid_min_score(args.repack_min_score) {
            return Err(SettingsError::Invalid {
                flag: "repack-min-score",
                env: "REPACK_MIN_SCORE",
                value: args.repack_min_score.to_string(),
                expected: RepackOptions::MIN_SCORE_RANGE,
            });
        }
        if provider == ProviderKind::Aws {
            // Instances are tagged and user data written with both; without them nodes
            // could neither be found again nor join.
            for (flag, env, value) in [
                ("cluster-name", "CLUSTER_NAME", args.cluster_name),
                (
                    "cluster-endpoint",
                    "CLUSTER_ENDPOINT",
                    args.cluster_endpoint,
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
        let fake_launch_faults =
            launch_faults::parse(args.fake_insufficient_capacity, args.fake_launch_delay)?;
        if provider != ProviderKind::Fake {
            // Accepted but not acted on would hide a mistake.
            for ((flag, env), value) in [
                (
                    launch_faults::INSUFFICIENT_CAPACITY,
                    args.fake_insufficient_capacity,
                ),
                (launch_faults::LAUNCH_DELAY, args.fake_launch_delay),
            ] {
                if !value.trim().is_empty() {
                    return Err(SettingsError::FakeOnly { flag, env });
                }
            }
        }
        let leader_election_namespace = if args.leader_election_namespace.is_empty() {
            args.system_namespace
        } else {
            args.leader_election_namespace
        };
        Ok(Self {
            provider,
            cluster_name: args.cluster_name.to_owned(),
            batch_max_duration: duration(
                "batch-max-duration",
                "BATCH_MAX_DURATION",
                args.batch_max_duration,
            )?,
            batch_idle_duration: duration(
                "batch-idle-duration",
                "BATCH_IDLE_DURATION",
                args.batch_idle_duration,
            )?,
            feature_gates: FeatureGates::parse(args.feature_gates)?,
            legacy_node_repair: args.legacy_node_repair,
            fake_reservations: parse_reservations(args.fake_capacity_reservations)
                .map_err(SettingsError::FakeReservations)?,
            fake_launch_faults,
            log_level,
            log_format,
            log_output,
            log_error_output,
            metrics_port: args.metrics_port,
            health_probe_port: args.health_probe_port,
            disable_leader_election: args.disable_leader_election || args.dry_run,
            dry_run: args.dry_run,
            disable_cluster_state_observability: args.disable_cluster_state_observability,
            leader_election_namespace: leader_election_namespace.to_owned(),
            leader_election_name: args.leader_election_name.to_owned(),
            kube_client_qps: args.kube_client_qps,
            kube_client_burst: args.kube_client_burst.max(args.kube_client_qps),
            preference_policy,
            min_values_policy,
            repack: args.repack_consolidation.then(|| RepackOptions {
                price_improvement_threshold: threshold,
                min_node_age: repack_min_node_age,
                min_score: args.repack_min_score,
                ..RepackOptions::default()
            }),
            system_namespace: args.system_namespace.to_owned(),
            aws: AwsOptions {
                cluster_endpoint: args.cluster_endpoint.to_owned(),
                cluster_ca_bundle: args.cluster_ca_bundle.to_owned(),
                interruption_queue: args.interruption_queue.to_owned(),
                isolated_vpc: args.isolated_vpc,
                vm_memory_overhead_percent: args.vm_memory_overhead_percent,
                reserved_enis: args.reserved_enis,
                node_class_cel: gate_map(args.aws_feature_gates)
                    .map_err(|e| SettingsError::Invalid {
                        flag: "aws-feature-gates",
                        env: "AWS_FEATURE_GATES",
                        value: format!("{} ({e})", args.aws_feature_gates),
                        expected: "Name=true|false, comma-separated",
                    })?
                    .get("NodeClassCEL")
                    .copied()
                    .unwrap_or(false),
                ami_refresh_interval: duration(
                    "ami-refresh-interval",
                    "AMI_REFRESH_INTERVAL",
                    args.ami_refresh_interval,
                )?,
                subnet_refresh_interval: duration(
                    "subnet-refresh-interval",
                    "SUBNET_REFRESH_INTERVAL",
                    args.subnet_refresh_interval,
                )?,
                security_group_refresh_interval: duration(
                    "security-group-refresh-interval",
                    "SECURITY_GROUP_REFRESH_INTERVAL",
                    args.security_group_refresh_interval,
                )?,
            },
            scheduler_config: parse_scheduler_config(args.scheduler_config)?,
            ignore_dra_requests: args.ignore_dra_requests,
        })
    }
}

#[cfg(test)]
mod tests;
