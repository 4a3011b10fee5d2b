//! The raw flags, as the command line or the environment gave them.

/// Every setting of `karpenter controller` before validation, borrowed from wherever the
/// caller parsed it (the operator's `clap` arguments). Field names are the flags' with `-`
/// as `_`; each documents its environment variable.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Flags<'a> {
    /// CLOUD_PROVIDER.
    pub cloud_provider: &'a str,
    /// CLUSTER_NAME.
    pub cluster_name: &'a str,
    /// BATCH_MAX_DURATION (Go duration).
    pub batch_max_duration: &'a str,
    /// BATCH_IDLE_DURATION (Go duration).
    pub batch_idle_duration: &'a str,
    /// FEATURE_GATES.
    pub feature_gates: &'a str,
    /// LEGACY_NODE_REPAIR.
    pub legacy_node_repair: bool,
    /// FAKE_CAPACITY_RESERVATIONS (JSON).
    pub fake_capacity_reservations: &'a str,
    /// FAKE_INSUFFICIENT_CAPACITY (offering patterns).
    pub fake_insufficient_capacity: &'a str,
    /// FAKE_LAUNCH_DELAY (a Go duration, or `<offering>=<duration>` entries).
    pub fake_launch_delay: &'a str,
    /// LOG_LEVEL.
    pub log_level: &'a str,
    /// LOG_FORMAT.
    pub log_format: &'a str,
    /// LOG_OUTPUT_PATHS.
    pub log_output_paths: &'a str,
    /// LOG_ERROR_OUTPUT_PATHS.
    pub log_error_output_paths: &'a str,
    /// METRICS_PORT.
    pub metrics_port: u16,
    /// HEALTH_PROBE_PORT.
    pub health_probe_port: u16,
    /// DISABLE_LEADER_ELECTION.
    pub disable_leader_election: bool,
    /// DRY_RUN.
    pub dry_run: bool,
    /// DISABLE_CLUSTER_STATE_OBSERVABILITY.
    pub disable_cluster_state_observability: bool,
    /// LEADER_ELECTION_NAMESPACE (empty: SYSTEM_NAMESPACE).
    pub leader_election_namespace: &'a str,
    /// LEADER_ELECTION_NAME.
    pub leader_election_name: &'a str,
    /// KUBE_CLIENT_QPS.
    pub kube_client_qps: u32,
    /// KUBE_CLIENT_BURST.
    pub kube_client_burst: u32,
    /// PREFERENCE_POLICY.
    pub preference_policy: &'a str,
    /// MIN_VALUES_POLICY.
    pub min_values_policy: &'a str,
    /// REPACK_CONSOLIDATION (karpenter-rs).
    pub repack_consolidation: bool,
    /// REPACK_PRICE_IMPROVEMENT_THRESHOLD (karpenter-rs).
    pub repack_price_improvement_threshold: f64,
    /// REPACK_MIN_NODE_AGE (karpenter-rs; Go duration).
    pub repack_min_node_age: &'a str,
    /// REPACK_MIN_SCORE (karpenter-rs).
    pub repack_min_score: f64,
    /// SYSTEM_NAMESPACE.
    pub system_namespace: &'a str,
    /// CLUSTER_ENDPOINT.
    pub cluster_endpoint: &'a str,
    /// CLUSTER_CA_BUNDLE.
    pub cluster_ca_bundle: &'a str,
    /// INTERRUPTION_QUEUE.
    pub interruption_queue: &'a str,
    /// ISOLATED_VPC.
    pub isolated_vpc: bool,
    /// VM_MEMORY_OVERHEAD_PERCENT.
    pub vm_memory_overhead_percent: f64,
    /// RESERVED_ENIS.
    pub reserved_enis: u32,
    /// SCHEDULER_CONFIG (a YAML or JSON document; empty: none).
    pub scheduler_config: &'a str,
    /// IGNORE_DRA_REQUESTS.
    pub ignore_dra_requests: bool,
    /// AWS_FEATURE_GATES.
    pub aws_feature_gates: &'a str,
    /// AMI_REFRESH_INTERVAL (Go duration).
    pub ami_refresh_interval: &'a str,
    /// SUBNET_REFRESH_INTERVAL (Go duration).
    pub subnet_refresh_interval: &'a str,
    /// SECURITY_GROUP_REFRESH_INTERVAL (Go duration).
    pub security_group_refresh_interval: &'a str,
}
