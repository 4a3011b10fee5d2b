//! The `aws` provider's own families, as upstream's AWS provider registers them:
//! `karpenter_cloudprovider_instance_launch_failures_total{zone,zone_id,capacity_type,reason}`
//! (one per failed CreateFleet offering),
//! `karpenter_cloudprovider_instance_termination_failures_total{zone,zone_id}` and
//! `karpenter_ec2nodeclasses_userdata_bytes{nodeclass}`, and the AWS SDK families upstream
//! gets from github.com/jonathan-innis/aws-sdk-go-prometheus, `aws_sdk_go_request_*`
//! `{service,action,code}`, and `karpenter_interruption_instance_status_unhealthy_total{category}`
//! (each unhealthy EC2 status check of the cluster's instances, once while it lasts), and
//! `karpenter_cloudprovider_batcher_batch_{size,time_seconds}{batcher}` (each batched EC2
//! call's size and each batch's window). With the `aws` feature, [`AwsProviderMetrics`] is the
//! provider's `ProviderObserver`.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

/// Labels of the launch-failure counter.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct LaunchFailureLabels {
    /// The failed override's availability zone.
    pub zone: String,
    /// Its zone id (empty when the NodeClass's subnets do not name it).
    pub zone_id: String,
    /// The launch's capacity type.
    pub capacity_type: String,
    /// Upstream's well-known launch failure reason (`LaunchFailed` when none fits).
    pub reason: String,
}

/// Labels of the termination-failure counter.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct ZoneLabels {
    /// The instance's availability zone.
    pub zone: String,
    /// Its zone id (empty when unknown).
    pub zone_id: String,
}

/// `{nodeclass}` of the user-data gauge.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct NodeClassLabels {
    /// The EC2NodeClass.
    pub nodeclass: String,
}

/// Labels of the `aws_sdk_go_request_*` families.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct SdkLabels {
    /// The SDK's service id (`EC2`).
    pub service: String,
    /// The operation (`CreateFleet`).
    pub action: String,
    /// The HTTP status code (`-1`: no response).
    pub code: String,
}

/// `{batcher}` of the batcher histograms.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct BatcherLabels {
    /// `create_fleet`, `describe_instances` or `terminate_instances`.
    pub batcher: String,
}

/// Upstream's batch-size buckets: 1 … 1,000 requests.
const BATCH_SIZE_BUCKETS: [f64; 34] = [
    1.0, 2.0, 4.0, 5.0, 10.0, 15.0, 20.0, 25.0, 30.0, 40.0, 50.0, 60.0, 70.0, 80.0, 90.0, 100.0,
    125.0, 150.0, 175.0, 200.0, 225.0, 250.0, 275.0, 300.0, 350.0, 400.0, 450.0, 500.0, 550.0,
    600.0, 700.0, 800.0, 900.0, 1000.0,
];

fn batch_size_histogram() -> Histogram {
    Histogram::new(BATCH_SIZE_BUCKETS)
}

/// `{category}` of the instance-status counter.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct CategoryLabels {
    /// EC2's status check category (`InstanceStatus`, `SystemStatus`, `EventStatus`).
    pub category: String,
}

type SdkHistograms = Family<SdkLabels, Histogram, fn() -> Histogram>;

/// 10 ms … about 22 min by half again: the SDK middleware's latency buckets.
fn sdk_latency() -> Histogram {
    Histogram::new(exponential_buckets(0.01, 1.5, 20))
}

/// 0 … 10 retries.
fn sdk_retries() -> Histogram {
    Histogram::new((0..=10).map(f64::from))
}

/// The families; clones share them.
#[derive(Debug, Clone)]
pub struct AwsProviderMetrics {
    /// `karpenter_cloudprovider_instance_launch_failures_total`.
    pub launch_failures: Family<LaunchFailureLabels, Counter>,
    /// `karpenter_cloudprovider_instance_termination_failures_total`.
    pub termination_failures: Family<ZoneLabels, Counter>,
    /// `karpenter_ec2nodeclasses_userdata_bytes`: the size of the latest rendered user
    /// data (raw, before base64) per class; the series goes with the class.
    pub userdata_bytes: Family<NodeClassLabels, Gauge>,
    /// `aws_sdk_go_request_total`: finished API calls, by their last attempt's code.
    pub sdk_requests: Family<SdkLabels, Counter>,
    /// `aws_sdk_go_request_attempt_total`: attempts, by their own code.
    pub sdk_attempts: Family<SdkLabels, Counter>,
    /// `aws_sdk_go_request_duration_seconds`: whole calls, retries included.
    pub sdk_duration: SdkHistograms,
    /// `aws_sdk_go_request_attempt_duration_seconds`: single attempts.
    pub sdk_attempt_duration: SdkHistograms,
    /// `aws_sdk_go_request_retry_count`: retries per call.
    pub sdk_retries: SdkHistograms,
    /// `karpenter_interruption_instance_status_unhealthy_total`: unhealthy status checks of
    /// the cluster's instances, each counted once while it lasts.
    pub instance_status_unhealthy: Family<CategoryLabels, Counter>,
    /// `karpenter_cloudprovider_batcher_batch_time_seconds`: from a batch's first request
    /// to its close, per batcher.
    pub batch_time: Family<BatcherLabels, Histogram, fn() -> Histogram>,
    /// `karpenter_cloudprovider_batcher_batch_size`: requests per batched EC2 call.
    pub batch_size: Family<BatcherLabels, Histogram, fn() -> Histogram>,
}

impl Default for AwsProviderMetrics {
    fn default() -> Self {
        Self {
            launch_failures: Family::default(),
            termination_failures: Family::default(),
            userdata_bytes: Family::default(),
            sdk_requests: Family::default(),
            sdk_attempts: Family::default(),
            sdk_duration: Family::new_with_constructor(sdk_latency),
            sdk_attempt_duration: Family::new_with_constructor(sdk_latency),
            sdk_retries: Family::new_with_constructor(sdk_retries),
            instance_status_unhealthy: Family::default(),
            batch_time: Family::new_with_constructor(super::duration_histogram),
            batch_size: Family::new_with_constructor(batch_size_histogram),
        }
    }
}

impl AwsProviderMetrics {
    /// Creates the families and registers them in `registry`.
    pub fn register(registry: &mut Registry) -> Self {
        let m = Self::default();
        // prometheus-client appends `_total` to counters itself.
        registry.register(
            "karpenter_cloudprovider_instance_launch_failures",
            "Number of failed CreateFleet offerings, by availability zone, zone id, capacity type and launch failure reason.",
            m.launch_failures.clone(),
        );
        registry.register(
            "karpenter_cloudprovider_instance_termination_failures",
            "Number of failed TerminateInstances calls, by availability zone and zone id.",
            m.termination_failures.clone(),
        );
        registry.register(
            "karpenter_ec2nodeclasses_userdata_bytes",
            "Size in bytes of the user data (before base64) rendered for the EC2NodeClass.",
            m.userdata_bytes.clone(),
        );
        registry.register(
            "aws_sdk_go_request",
            "The total number of AWS SDK requests",
            m.sdk_requests.clone(),
        );
        registry.register(
            "aws_sdk_go_request_attempt",
            "The total number of AWS SDK request attempts",
            m.sdk_attempts.clone(),
        );
        registry.register(
            "aws_sdk_go_request_duration_seconds",
            "Latency of AWS SDK requests",
            m.sdk_duration.clone(),
        );
        registry.register(
            "aws_sdk_go_request_attempt_duration_seconds",
            "Latency of AWS SDK request attempts",
            m.sdk_attempt_duration.clone(),
        );
        registry.register(
            "aws_sdk_go_request_retry_count",
            "The number of AWS SDK retry attempts per request",
            m.sdk_retries.clone(),
        );
        registry.register(
            "karpenter_interruption_instance_status_unhealthy",
            "Number of unique unhealthy instance statuses EC2 DescribeInstanceStatus reported for the cluster's instances, by status check category.",
            m.instance_status_unhealthy.clone(),
        );
        registry.register(
            "karpenter_cloudprovider_batcher_batch_time_seconds",
            "Duration of the batching window per batcher",
            m.batch_time.clone(),
        );
        registry.register(
            "karpenter_cloudprovider_batcher_batch_size",
            "Size of the request batch per batcher",
            m.batch_size.clone(),
        );
        m
    }
}

#[cfg(feature = "aws")]
impl karpenter_cloudprovider_aws::observe::ProviderObserver for AwsProviderMetrics {
    fn launch_failure(&self, f: &karpenter_cloudprovider_aws::observe::LaunchFailure) {
        self.launch_failures
            .get_or_create(&LaunchFailureLabels {
                zone: f.zone.clone(),
                zone_id: f.zone_id.clone(),
                capacity_type: f.capacity_type.clone(),
                reason: f.reason.to_string(),
            })
            .inc();
    }

    fn termination_failure(&self, zone: &str, zone_id: &str) {
        self.termination_failures
            .get_or_create(&ZoneLabels {
                zone: zone.to_string(),
                zone_id: zone_id.to_string(),
            })
            .inc();
    }

    fn user_data_rendered(&self, node_class: &str, bytes: usize) {
        let labels = NodeClassLabels {
            nodeclass: node_class.to_string(),
        };
        let bytes = i64::try_from(bytes).unwrap_or(i64::MAX);
        self.userdata_bytes.get_or_create(&labels).set(bytes);
    }

    fn node_class_deleted(&self, node_class: &str) {
        self.userdata_bytes.remove(&NodeClassLabels {
            nodeclass: node_class.to_string(),
        });
    }

    fn api_request(&self, r: &karpenter_cloudprovider_aws::observe::ApiRequest) {
        let labels = |code: i32| SdkLabels {
            service: r.service.clone(),
            action: r.action.clone(),
            code: code.to_string(),
        };
        // Upstream's middleware reports whole milliseconds.
        let secs = |d: std::time::Duration| d.as_millis() as f64 / 1000.0;
        let call = labels(r.code);
        self.sdk_requests.get_or_create(&call).inc();
        self.sdk_duration
            .get_or_create(&call)
            .observe(secs(r.duration));
        self.sdk_retries
            .get_or_create(&call)
            .observe(r.retries() as f64);
        for a in &r.attempts {
            self.sdk_attempts.get_or_create(&labels(a.code)).inc();
            // As upstream, an attempt's latency is labelled with the call's final code.
            self.sdk_attempt_duration
                .get_or_create(&call)
                .observe(secs(a.duration));
        }
    }

    fn instance_status_unhealthy(&self, category: &str) {
        let labels = CategoryLabels {
            category: category.to_string(),
        };
        self.instance_status_unhealthy.get_or_create(&labels).inc();
    }

    fn batch_window(&self, batcher: &'static str, elapsed: std::time::Duration) {
        let labels = BatcherLabels {
            batcher: batcher.to_string(),
        };
        let h = self.batch_time.get_or_create(&labels);
        h.observe(elapsed.as_secs_f64());
    }

    fn batch_size(&self, batcher: &'static str, size: usize) {
        let labels = BatcherLabels {
            batcher: batcher.to_string(),
        };
        self.batch_size.get_or_create(&labels).observe(size as f64);
    }
}

#[cfg(all(test, feature = "aws"))]
mod tests {
    use super::*;
    use karpenter_cloudprovider_aws::observe::{
        ApiAttempt, ApiRequest, LaunchFailure, ProviderObserver,
    };
    use std::time::Duration;

    fn exposition(r: &Registry) -> String {
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, r).unwrap();
        out
    }

    #[test]
    fn observer_events_become_series() {
        let mut r = Registry::default();
        let m = AwsProviderMetrics::register(&mut r);
        let failure = LaunchFailure {
            zone: "us-east-1a".into(),
            zone_id: "use1-az1".into(),
            capacity_type: "spot".into(),
            reason: "VCPULimitExceeded",
        };
        m.launch_failure(&failure);
        m.launch_failure(&failure);
        m.termination_failure("us-east-1b", "");
        m.user_data_rendered("default", 1234);
        m.user_data_rendered("other", 7);
        m.node_class_deleted("other");
        m.instance_status_unhealthy("SystemStatus");
        m.instance_status_unhealthy("SystemStatus");
        m.instance_status_unhealthy("EventStatus");
        m.batch_window("create_fleet", Duration::from_millis(40));
        m.batch_size("create_fleet", 3);
        m.batch_size("terminate_instances", 1);
        m.api_request(&ApiRequest {
            service: "EC2".into(),
            action: "CreateFleet".into(),
            code: 200,
            duration: Duration::from_millis(1500),
            attempts: vec![
                ApiAttempt {
                    code: 503,
                    duration: Duration::from_millis(20),
                },
                ApiAttempt {
                    code: 200,
                    duration: Duration::from_millis(30),
                },
            ],
        });
        let text = exposition(&r);
        assert!(text.contains(
            r#"karpenter_cloudprovider_instance_launch_failures_total{zone="us-east-1a",zone_id="use1-az1",capacity_type="spot",reason="VCPULimitExceeded"} 2"#
        ), "{text}");
        assert!(text.contains(
            r#"karpenter_cloudprovider_instance_termination_failures_total{zone="us-east-1b",zone_id=""} 1"#
        ), "{text}");
        assert!(
            text.contains(r#"karpenter_ec2nodeclasses_userdata_bytes{nodeclass="default"} 1234"#),
            "{text}"
        );
        assert!(!text.contains(r#"nodeclass="other""#), "{text}");
        for line in [
            r#"karpenter_interruption_instance_status_unhealthy_total{category="SystemStatus"} 2"#,
            r#"karpenter_interruption_instance_status_unhealthy_total{category="EventStatus"} 1"#,
        ] {
            assert!(text.contains(line), "{line} in {text}");
        }
        let call = r#"{service="EC2",action="CreateFleet",code="200"}"#;
        for line in [
            format!("aws_sdk_go_request_total{call} 1"),
            r#"aws_sdk_go_request_attempt_total{service="EC2",action="CreateFleet",code="503"} 1"#
                .to_string(),
            format!("aws_sdk_go_request_attempt_total{call} 1"),
            format!("aws_sdk_go_request_duration_seconds_sum{call} 1.5"),
            format!("aws_sdk_go_request_attempt_duration_seconds_count{call} 2"),
            format!("aws_sdk_go_request_retry_count_sum{call} 1.0"),
            r#"karpenter_cloudprovider_batcher_batch_time_seconds_bucket{le="0.05",batcher="create_fleet"} 1"#.to_string(),
            r#"karpenter_cloudprovider_batcher_batch_time_seconds_bucket{le="0.025",batcher="create_fleet"} 0"#.to_string(),
            r#"karpenter_cloudprovider_batcher_batch_size_bucket{le="2.0",batcher="create_fleet"} 0"#.to_string(),
            r#"karpenter_cloudprovider_batcher_batch_size_bucket{le="4.0",batcher="create_fleet"} 1"#.to_string(),
            r#"karpenter_cloudprovider_batcher_batch_size_sum{batcher="terminate_instances"} 1.0"#.to_string(),
        ] {
            assert!(text.contains(&line), "{line} in {text}");
        }
    }
}
