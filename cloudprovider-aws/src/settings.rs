//! Provider settings (Karpenter's `--cluster-name`, `--cluster-endpoint`,
//! `--interruption-queue` … flags) and the AWS clients built from them.

use crate::observe::ObserverSlot;
use crate::sdk_metrics::SdkMetrics;
use base64::Engine as _;
use std::time::Duration;

/// Where and how the provider runs.
#[derive(Debug, Clone, PartialEq)]
pub struct AwsSettings {
    /// EKS cluster name (tags, user data).
    pub cluster_name: String,
    /// API server URL written into user data.
    pub cluster_endpoint: String,
    /// Base64 cluster CA bundle written into user data.
    pub cluster_ca_bundle: Option<String>,
    /// Service CIDR for nodeadm (AL2023).
    pub cluster_cidr: Option<String>,
    /// AWS region.
    pub region: String,
    /// Kubernetes minor version (`1.33`) used in the EKS-optimised AMI SSM paths.
    pub kubernetes_version: String,
    /// Prefix of the public SSM parameters for AMI aliases. `/aws/service` on AWS; the moto
    /// emulator refuses writes under `/aws/`, so tests point it elsewhere.
    pub ssm_prefix: String,
    /// SQS queue (name or URL) receiving EventBridge interruption events, if enabled.
    pub interruption_queue: Option<String>,
    /// `--vm-memory-overhead-percent` as a fraction (0.075).
    pub vm_memory_overhead_percent: f64,
    /// `--reserved-enis`.
    pub reserved_enis: u32,
    /// Query the Pricing API for on-demand prices (off in isolated VPCs and on emulators,
    /// which then use the bundled table).
    pub pricing_api: bool,
    /// `--isolated-vpc`: IAM is unreachable, so instance profiles are neither deleted with
    /// their EC2NodeClass nor garbage-collected (as in Karpenter).
    pub isolated_vpc: bool,
    /// Whether IAM instance profiles may be created and deleted for `spec.role` (off in the
    /// shadow mode, which writes nothing to AWS).
    pub manage_instance_profiles: bool,
    /// How long discovered capacity reservations are reused.
    pub discovery_ttl: Duration,
    /// `--subnet-refresh-interval`: how long discovered subnets are reused.
    pub subnet_ttl: Duration,
    /// `--security-group-refresh-interval`: how long discovered security groups are reused.
    pub security_group_ttl: Duration,
    /// `--ami-refresh-interval`: how long resolved AMIs are reused.
    pub ami_ttl: Duration,
    /// `AWS_FEATURE_GATES` `NodeClassCEL`: kubelet expressions are evaluated (off: a class
    /// with one is not valid).
    pub node_class_cel: bool,
    /// How long the DescribeInstanceTypes/Offerings results are reused.
    pub instance_types_ttl: Duration,
    /// How long prices are reused.
    pub pricing_ttl: Duration,
    /// Karpenter's `ReservedCapacity` gate (default on): capacity reservations selected by
    /// EC2NodeClasses are discovered and offered as the `reserved` capacity type.
    pub reserved_capacity: bool,
}

impl AwsSettings {
    /// Settings for `cluster_name` in `region` with Karpenter's defaults.
    pub fn new(cluster_name: impl Into<String>, region: impl Into<String>) -> Self {
        Self {
            cluster_name: cluster_name.into(),
            cluster_endpoint: String::new(),
            cluster_ca_bundle: None,
            cluster_cidr: None,
            region: region.into(),
            kubernetes_version: "1.33".into(),
            ssm_prefix: "/aws/service".into(),
            interruption_queue: None,
            vm_memory_overhead_percent: 0.075,
            reserved_enis: 0,
            pricing_api: true,
            isolated_vpc: false,
            manage_instance_profiles: true,
            discovery_ttl: Duration::from_secs(60),
            subnet_ttl: Duration::from_secs(60),
            security_group_ttl: Duration::from_secs(60),
            ami_ttl: Duration::from_secs(60),
            node_class_cel: false,
            instance_types_ttl: Duration::from_secs(5 * 60),
            pricing_ttl: Duration::from_secs(12 * 60 * 60),
            reserved_capacity: true,
        }
    }
}

/// The AWS service clients the provider uses.
#[derive(Debug, Clone)]
pub struct AwsClients {
    /// EC2.
    pub ec2: aws_sdk_ec2::Client,
    /// SSM (AMI aliases, `ssmParameter` terms).
    pub ssm: aws_sdk_ssm::Client,
    /// SQS (interruption queue).
    pub sqs: aws_sdk_sqs::Client,
    /// Pricing (always us-east-1, where the API is served).
    pub pricing: aws_sdk_pricing::Client,
    /// IAM (instance profiles for `spec.role`).
    pub iam: aws_sdk_iam::Client,
    /// The observer every client's [`SdkMetrics`] interceptor (and the provider) reports to.
    pub observer: ObserverSlot,
}

impl AwsClients {
    /// Clients from the default credential chain and `region`.
    pub async fn from_env(region: &str) -> Self {
        let config = aws_config::defaults(aws_config::BehaviorVersion::latest())
            .region(aws_config::Region::new(region.to_string()))
            .load()
            .await;
        Self::from_sdk_config(&config)
    }

    /// Clients from the default credential chain and the region it resolves (`AWS_REGION`,
    /// the profile, or the instance metadata service), which is returned with them. The
    /// standard `AWS_ENDPOINT_URL` variables are honoured, so the same code talks to an
    /// emulator.
    pub async fn from_default_chain() -> (Self, Option<String>) {
        let config = aws_config::defaults(aws_config::BehaviorVersion::latest())
            .load()
            .await;
        let region = config.region().map(|r| r.to_string());
        (Self::from_sdk_config(&config), region)
    }

    /// Clients for an emulator or proxy at `endpoint` (`http://127.0.0.1:5000`) with static
    /// test credentials.
    pub async fn for_endpoint(endpoint: &str, region: &str) -> Self {
        let creds =
            aws_sdk_ec2::config::Credentials::new("testing", "testing", None, None, "static");
        let config = aws_config::defaults(aws_config::BehaviorVersion::latest())
            .region(aws_config::Region::new(region.to_string()))
            .endpoint_url(endpoint)
            .credentials_provider(creds)
            .load()
            .await;
        Self::from_sdk_config(&config)
    }

    /// Clients from a loaded SDK configuration.
    pub fn from_sdk_config(config: &aws_config::SdkConfig) -> Self {
        let observer = ObserverSlot::default();
        let metrics = SdkMetrics::new(observer.clone());
        let pricing_config = aws_sdk_pricing::config::Builder::from(config)
            .region(aws_config::Region::new("us-east-1"))
            .interceptor(metrics.clone());
        macro_rules! client {
            ($sdk:ident) => {
                $sdk::Client::from_conf(
                    $sdk::config::Builder::from(config)
                        .interceptor(metrics.clone())
                        .build(),
                )
            };
        }
        Self {
            ec2: client!(aws_sdk_ec2),
            ssm: client!(aws_sdk_ssm),
            sqs: client!(aws_sdk_sqs),
            pricing: aws_sdk_pricing::Client::from_conf(pricing_config.build()),
            iam: client!(aws_sdk_iam),
            observer,
        }
    }
}

/// `major.minor` of the API server (`1.33`), as the EKS AMI parameters name versions.
/// EKS reports minors like `33+`, so everything from the first non-digit is dropped.
pub fn kubernetes_version(major: &str, minor: &str) -> Option<String> {
    let digits = |s: &str| -> String { s.chars().take_while(char::is_ascii_digit).collect() };
    let (major, minor) = (digits(major), digits(minor));
    (!major.is_empty() && !minor.is_empty()).then(|| format!("{major}.{minor}"))
}

/// PEM text of DER certificates, base64-encoded as user data expects a CA bundle.
pub fn ca_bundle_from_der(certs: &[Vec<u8>]) -> String {
    let b64 = base64::engine::general_purpose::STANDARD;
    let mut pem = String::new();
    for der in certs {
        pem.push_str("-----BEGIN CERTIFICATE-----\n");
        let body = b64.encode(der);
        for line in body.as_bytes().chunks(64) {
            pem.push_str(&String::from_utf8_lossy(line));
            pem.push('\n');
        }
        pem.push_str("-----END CERTIFICATE-----\n");
    }
    b64.encode(pem)
}

#[cfg(test)]
mod pem_tests {
    use super::*;

    #[test]
    fn ca_bundle_is_base64_pem() {
        let b64 = ca_bundle_from_der(&[vec![1, 2, 3]]);
        let pem = base64::engine::general_purpose::STANDARD
            .decode(b64)
            .expect("base64");
        assert_eq!(
            String::from_utf8(pem).unwrap(),
            "-----BEGIN CERTIFICATE-----\nAQID\n-----END CERTIFICATE-----\n"
        );
    }

    #[test]
    fn kubernetes_version_drops_eks_suffixes() {
        assert_eq!(kubernetes_version("1", "33+").as_deref(), Some("1.33"));
        assert_eq!(kubernetes_version("", "33"), None);
    }
}
