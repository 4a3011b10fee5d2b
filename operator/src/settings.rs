//! Flags of `karpenter controller`: every flag has the environment variable Karpenter uses
//! for it (`pkg/operator/options`) and the same default, so a Karpenter Helm values file or
//! Deployment env block configures karpenter-rs unchanged. Validation and the settings the
//! controller runs with are [`karpenter_settings`]'s.

pub use karpenter_settings::{Flags, LogFormat, LogOutput, ProviderKind, Settings};

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
    /// With the NodeRepair gate, run the legacy node repair controller (Karpenter v1.14's:
    /// unhealthy nodes replaced at once and drained forcefully, outside disruption budgets)
    /// instead of node repair as a disruption method.
    #[arg(long, env = "LEGACY_NODE_REPAIR", default_value_t = false, action = clap::ArgAction::Set)]
    pub legacy_node_repair: bool,
    /// Capacity reservations of `--cloud-provider fake`: a JSON list of `{id, instanceType,
    /// zone, count, type, interruptible}`.
    #[arg(long, env = "FAKE_CAPACITY_RESERVATIONS", default_value = "[]")]
    pub fake_capacity_reservations: String,
    /// Offerings `--cloud-provider fake` fails with insufficient capacity: comma-separated
    /// `<instance type>[/<zone>[/<capacity type>]]`, any part `*`.
    #[arg(long, env = "FAKE_INSUFFICIENT_CAPACITY", default_value = "")]
    pub fake_insufficient_capacity: String,
    /// How long launches of `--cloud-provider fake` take: a Go duration for every launch, or
    /// comma-separated `<offering>=<duration>` (the first match applies).
    #[arg(long, env = "FAKE_LAUNCH_DELAY", default_value = "")]
    pub fake_launch_delay: String,
    /// Log verbosity: `debug`, `info` or `error`.
    #[arg(long, env = "LOG_LEVEL", default_value = "info")]
    pub log_level: String,
    /// Log format: `json` (Karpenter's default, one object a line) or `text`.
    #[arg(long, env = "LOG_FORMAT", default_value = "json")]
    pub log_format: String,
    /// Where logs go: `stdout` or `stderr` (Karpenter's LOG_OUTPUT_PATHS; one path).
    #[arg(long, env = "LOG_OUTPUT_PATHS", default_value = "stdout")]
    pub log_output_paths: String,
    /// Where a log line that cannot be written is reported (Karpenter's
    /// LOG_ERROR_OUTPUT_PATHS, zap's ErrorOutputPaths): `stdout`, `stderr` or absolute file
    /// paths, comma-separated.
    #[arg(long, env = "LOG_ERROR_OUTPUT_PATHS", default_value = "stderr")]
    pub log_error_output_paths: String,
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
    /// Export no cluster-state observability: pod, node and NodePool gauges and the
    /// NodeClaim, NodePool and Node status-condition metrics (as Karpenter's setting turns
    /// off those controllers).
    #[arg(long, env = "DISABLE_CLUSTER_STATE_OBSERVABILITY", default_value_t = false, action = clap::ArgAction::Set)]
    pub disable_cluster_state_observability: bool,
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
    /// Re-pack consolidation (karpenter-rs's own method, after Karpenter's): replace
    /// several nodes with the packing optimiser's choice of new ones when that saves past
    /// `--repack-price-improvement-threshold`.
    #[arg(long, env = "REPACK_CONSOLIDATION", default_value_t = true, action = clap::ArgAction::Set)]
    pub repack_consolidation: bool,
    /// The least share of the replaced nodes' price a re-pack must save, a fraction in
    /// [0, 1) (0.1: the replacements cost at most 90 % of the nodes they replace).
    #[arg(long, env = "REPACK_PRICE_IMPROVEMENT_THRESHOLD", default_value_t = karpenter_disruption::input::DEFAULT_PRICE_IMPROVEMENT_THRESHOLD)]
    pub repack_price_improvement_threshold: f64,
    /// How long after launch a node is left out of re-pack consolidation, a Go duration from
    /// `0s` to `24h` (Karpenter's own methods still consider it): a replacement settles
    /// before its pods may be moved again.
    #[arg(long, env = "REPACK_MIN_NODE_AGE", default_value = "10m")]
    pub repack_min_node_age: String,
    /// The least score a re-pack must reach in every NodePool it touches, 0 to 100: the share
    /// of the pool's price it saves over the share of the pool's disruption cost it causes
    /// (the `Balanced` policy's score, whatever the pool's policy); 0 turns the check off.
    #[arg(long, env = "REPACK_MIN_SCORE", default_value_t = karpenter_disruption::input::DEFAULT_REPACK_MIN_SCORE)]
    pub repack_min_score: f64,
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
    /// The kube-scheduler settings the scheduling simulation mirrors, as a YAML or JSON
    /// document (not a file name): Karpenter's `podTopologySpread: {defaultConstraints:
    /// [...]}`, or a KubeSchedulerConfiguration whose default profile's PodTopologySpread
    /// arguments are read. Pods that declare no topology spread constraint are planned with
    /// the defaults, each with the selector of the Services and controller that select it.
    #[arg(long, env = "SCHEDULER_CONFIG", default_value = "")]
    pub scheduler_config: String,
    /// Ignore pods' dynamic resource allocation requests (ResourceClaims) when simulating
    /// scheduling, as upstream does by default. With false, ResourceClaims,
    /// ResourceClaimTemplates and DeviceClasses are watched and a pod with claims is placed
    /// only on instance types or nodes whose devices serve them.
    #[arg(long, env = "IGNORE_DRA_REQUESTS", default_value_t = true, action = clap::ArgAction::Set)]
    pub ignore_dra_requests: bool,
    /// aws: AWS feature gates, `Name=bool` comma-separated: `NodeClassCEL` lets kubelet
    /// `maxPods`, `kubeReserved` and `systemReserved` be CEL expressions over the instance
    /// type.
    #[arg(
        long,
        env = "AWS_FEATURE_GATES",
        default_value = "NodeClassCEL=false,DRANVIDIAGPU=false,DRAEFA=false,RebootForRepair=false"
    )]
    pub aws_feature_gates: String,
    /// aws: how long resolved AMIs are reused before EC2 is asked again (Go duration).
    #[arg(long, env = "AMI_REFRESH_INTERVAL", default_value = "1m")]
    pub ami_refresh_interval: String,
    /// aws: how long resolved subnets are reused (Go duration).
    #[arg(long, env = "SUBNET_REFRESH_INTERVAL", default_value = "1m")]
    pub subnet_refresh_interval: String,
    /// aws: how long resolved security groups are reused (Go duration).
    #[arg(long, env = "SECURITY_GROUP_REFRESH_INTERVAL", default_value = "1m")]
    pub security_group_refresh_interval: String,
}

impl<'a> From<&'a ControllerArgs> for Flags<'a> {
    fn from(a: &'a ControllerArgs) -> Self {
        Flags {
            cloud_provider: &a.cloud_provider,
            cluster_name: &a.cluster_name,
            batch_max_duration: &a.batch_max_duration,
            batch_idle_duration: &a.batch_idle_duration,
            feature_gates: &a.feature_gates,
            legacy_node_repair: a.legacy_node_repair,
            fake_capacity_reservations: &a.fake_capacity_reservations,
            fake_insufficient_capacity: &a.fake_insufficient_capacity,
            fake_launch_delay: &a.fake_launch_delay,
            log_level: &a.log_level,
            log_format: &a.log_format,
            log_output_paths: &a.log_output_paths,
            log_error_output_paths: &a.log_error_output_paths,
            metrics_port: a.metrics_port,
            health_probe_port: a.health_probe_port,
            disable_leader_election: a.disable_leader_election,
            dry_run: a.dry_run,
            disable_cluster_state_observability: a.disable_cluster_state_observability,
            leader_election_namespace: &a.leader_election_namespace,
            leader_election_name: &a.leader_election_name,
            kube_client_qps: a.kube_client_qps,
            kube_client_burst: a.kube_client_burst,
            preference_policy: &a.preference_policy,
            min_values_policy: &a.min_values_policy,
            repack_consolidation: a.repack_consolidation,
            repack_price_improvement_threshold: a.repack_price_improvement_threshold,
            repack_min_node_age: &a.repack_min_node_age,
            repack_min_score: a.repack_min_score,
            system_namespace: &a.system_namespace,
            cluster_endpoint: &a.cluster_endpoint,
            cluster_ca_bundle: &a.cluster_ca_bundle,
            interruption_queue: &a.interruption_queue,
            isolated_vpc: a.isolated_vpc,
            vm_memory_overhead_percent: a.vm_memory_overhead_percent,
            reserved_enis: a.reserved_enis,
            scheduler_config: &a.scheduler_config,
            ignore_dra_requests: a.ignore_dra_requests,
            aws_feature_gates: &a.aws_feature_gates,
            ami_refresh_interval: &a.ami_refresh_interval,
            subnet_refresh_interval: &a.subnet_refresh_interval,
            security_group_refresh_interval: &a.security_group_refresh_interval,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;
    use karpenter_scheduling::solver::{MinValuesPolicy, PreferencePolicy};
    use karpenter_settings::{FeatureGates, LogLevel, SettingsError};
    use std::time::Duration;

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
        let e = parse(&["--repack-price-improvement-threshold", "1.2"]).unwrap_err();
        assert!(
            e.to_string().contains("REPACK_PRICE_IMPROVEMENT_THRESHOLD"),
            "{e}"
        );
    }

    #[test]
    fn repack_consolidation_is_on_by_default_and_can_be_turned_off() {
        let s = parse(&[]).unwrap();
        let repack = s.repack.expect("on by default");
        assert_eq!(repack.price_improvement_threshold, 0.1);
        assert_eq!(repack.min_node_age, 600_000);
        let s = parse(&["--repack-min-node-age", "0s"]).unwrap();
        assert_eq!(s.repack.map(|r| r.min_node_age), Some(0));
        let e = parse(&["--repack-min-node-age", "2d"]).unwrap_err();
        assert!(e.to_string().contains("REPACK_MIN_NODE_AGE"), "{e}");
        assert_eq!(repack.min_score, 0.0);
        let e = parse(&["--repack-min-score", "150"]).unwrap_err();
        assert!(e.to_string().contains("REPACK_MIN_SCORE"), "{e}");
        let s = parse(&["--repack-price-improvement-threshold", "0.35"]).unwrap();
        assert_eq!(s.repack.map(|r| r.price_improvement_threshold), Some(0.35));
        assert_eq!(
            parse(&["--repack-consolidation", "false"]).unwrap().repack,
            None
        );
    }

    #[test]
    fn leader_namespace_defaults_to_system_namespace() {
        let s = parse(&["--system-namespace", "karpenter"]).unwrap();
        assert_eq!(s.leader_election_namespace, "karpenter");
    }
}
