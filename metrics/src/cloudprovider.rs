//! [`Metered`]: a [`CloudProvider`] decorator that records Karpenter's cloud-provider metrics,
//! `karpenter_cloudprovider_duration_seconds{controller,method,provider}` and
//! `karpenter_cloudprovider_errors_total{controller,method,provider,error,nodepool}`.

use karpenter_cloudprovider::v1::{NodeClaim, NodePool};
use karpenter_cloudprovider::{CloudProvider, CloudProviderError, DriftReason, RepairPolicy};
use karpenter_scheduling::InstanceType;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;
use std::sync::Arc;
use std::time::Instant;

/// Name of the latency histogram.
pub const DURATION_METRIC: &str = "karpenter_cloudprovider_duration_seconds";
/// Name of the error counter (the exposition adds nothing: the `_total` is part of the
/// registered counter's name as prometheus-client renders it).
pub const ERRORS_METRIC: &str = "karpenter_cloudprovider_errors_total";

/// Prometheus' default buckets, which Karpenter's histogram uses.
const BUCKETS: [f64; 11] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

fn new_histogram() -> Histogram {
    Histogram::new(BUCKETS)
}

/// Labels of the duration histogram.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct DurationLabels {
    /// The controller that made the call.
    pub controller: String,
    /// `Create`, `Delete`, `Get`, `List`, `GetInstanceTypes`, `IsDrifted`.
    pub method: String,
    /// The provider's name.
    pub provider: String,
}

/// Labels of the error counter.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct ErrorLabels {
    /// The controller that made the call.
    pub controller: String,
    /// The method.
    pub method: String,
    /// The provider's name.
    pub provider: String,
    /// [`CloudProviderError::metric_label`], `unknown` for an error outside its categories.
    pub error: String,
    /// The NodePool of the call's NodeClaim or NodePool; empty for calls about no single
    /// pool (`List`, and `Get`, which fails before it knows the claim).
    pub nodepool: String,
}

/// The metric families, shared by every [`Metered`] built from the same registry.
#[derive(Clone)]
pub struct CloudProviderMetrics {
    /// `karpenter_cloudprovider_duration_seconds`.
    pub duration: Family<DurationLabels, Histogram, fn() -> Histogram>,
    /// `karpenter_cloudprovider_errors_total`.
    pub errors: Family<ErrorLabels, Counter>,
}

impl CloudProviderMetrics {
    /// Creates the families and registers them in `registry`.
    pub fn register(registry: &mut Registry) -> Self {
        let duration = Family::<DurationLabels, Histogram, fn() -> Histogram>::new_with_constructor(
            new_histogram,
        );
        let errors = Family::<ErrorLabels, Counter>::default();
        registry.register(
            DURATION_METRIC,
            "Duration of cloud provider method calls. Labeled by the controller, method name and provider.",
            duration.clone(),
        );
        // prometheus-client appends `_total` to counters itself.
        registry.register(
            ERRORS_METRIC.trim_end_matches("_total"),
            "Total number of errors returned from CloudProvider calls.",
            errors.clone(),
        );
        Self { duration, errors }
    }
}

/// Wraps a provider and records, for every call except `repair_policies` and `name`, its
/// latency and (on error) an error count, labelled with the controller given at construction.
#[derive(Clone)]
pub struct Metered<P> {
    inner: Arc<P>,
    metrics: CloudProviderMetrics,
    controller: String,
}

impl<P: CloudProvider> Metered<P> {
    /// Decorates `inner` with already registered families.
    pub fn with_metrics(inner: Arc<P>, metrics: CloudProviderMetrics) -> Self {
        Self {
            inner,
            metrics,
            controller: String::new(),
        }
    }

    /// The same provider and metrics, labelled with `controller` (Karpenter labels each call
    /// with the controller that made it).
    pub fn for_controller(&self, controller: impl Into<String>) -> Self {
        Self {
            inner: Arc::clone(&self.inner),
            metrics: self.metrics.clone(),
            controller: controller.into(),
        }
    }

    fn record<T>(
        &self,
        method: &str,
        nodepool: &str,
        started: Instant,
        result: &Result<T, CloudProviderError>,
    ) {
        let provider = self.inner.name().to_owned();
        self.metrics
            .duration
            .get_or_create(&DurationLabels {
                controller: self.controller.clone(),
                method: method.to_owned(),
                provider: provider.clone(),
            })
            .observe(started.elapsed().as_secs_f64());
        if let Err(e) = result {
            self.metrics
                .errors
                .get_or_create(&ErrorLabels {
                    controller: self.controller.clone(),
                    method: method.to_owned(),
                    provider,
                    error: match e.metric_label() {
                        "" => "unknown".to_owned(),
                        label => label.to_owned(),
                    },
                    nodepool: nodepool.to_owned(),
                })
                .inc();
        }
    }
}

#[async_trait::async_trait]
impl<P: CloudProvider> CloudProvider for Metered<P> {
    async fn create(&self, node_claim: &NodeClaim) -> Result<NodeClaim, CloudProviderError> {
        let started = Instant::now();
        let r = self.inner.create(node_claim).await;
        self.record(
            "Create",
            node_claim.node_pool().unwrap_or_default(),
            started,
            &r,
        );
        r
    }

    async fn delete(&self, node_claim: &NodeClaim) -> Result<(), CloudProviderError> {
        let started = Instant::now();
        let r = self.inner.delete(node_claim).await;
        self.record(
            "Delete",
            node_claim.node_pool().unwrap_or_default(),
            started,
            &r,
        );
        r
    }

    async fn get(&self, provider_id: &str) -> Result<NodeClaim, CloudProviderError> {
        let started = Instant::now();
        let r = self.inner.get(provider_id).await;
        self.record("Get", "", started, &r);
        r
    }

    async fn list(&self) -> Result<Vec<NodeClaim>, CloudProviderError> {
        let started = Instant::now();
        let r = self.inner.list().await;
        self.record("List", "", started, &r);
        r
    }

    async fn instance_types(
        &self,
        node_pool: &NodePool,
    ) -> Result<Vec<Arc<InstanceType>>, CloudProviderError> {
        let started = Instant::now();
        let r = self.inner.instance_types(node_pool).await;
        self.record("GetInstanceTypes", node_pool.name(), started, &r);
        r
    }

    async fn is_drifted(
        &self,
        node_claim: &NodeClaim,
    ) -> Result<Option<DriftReason>, CloudProviderError> {
        let started = Instant::now();
        let r = self.inner.is_drifted(node_claim).await;
        self.record(
            "IsDrifted",
            node_claim.node_pool().unwrap_or_default(),
            started,
            &r,
        );
        r
    }

    fn repair_policies(&self) -> Vec<RepairPolicy> {
        self.inner.repair_policies()
    }

    fn name(&self) -> &str {
        self.inner.name()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use karpenter_cloudprovider::v1::NodeClaimSpec;
    use std::future::Future;
    use std::task::{Context, Poll, Waker};

    /// Drives a future that never waits on I/O (the test provider completes immediately).
    fn block_on<F: Future>(fut: F) -> F::Output {
        let mut fut = std::pin::pin!(fut);
        let mut cx = Context::from_waker(Waker::noop());
        loop {
            if let Poll::Ready(v) = fut.as_mut().poll(&mut cx) {
                return v;
            }
        }
    }

    struct TestProvider;

    #[async_trait::async_trait]
    impl CloudProvider for TestProvider {
        async fn create(&self, node_claim: &NodeClaim) -> Result<NodeClaim, CloudProviderError> {
            Ok(node_claim.clone())
        }
        async fn delete(&self, node_claim: &NodeClaim) -> Result<(), CloudProviderError> {
            Err(CloudProviderError::NotFound {
                provider_id: node_claim.name().to_owned(),
            })
        }
        async fn get(&self, provider_id: &str) -> Result<NodeClaim, CloudProviderError> {
            Err(CloudProviderError::NotFound {
                provider_id: provider_id.to_owned(),
            })
        }
        async fn list(&self) -> Result<Vec<NodeClaim>, CloudProviderError> {
            Err(CloudProviderError::Other("throttled".into()))
        }
        async fn instance_types(
            &self,
            _: &NodePool,
        ) -> Result<Vec<Arc<InstanceType>>, CloudProviderError> {
            Err(CloudProviderError::InsufficientCapacity {
                offerings: vec![],
                message: "none".into(),
            })
        }
        async fn is_drifted(
            &self,
            _: &NodeClaim,
        ) -> Result<Option<DriftReason>, CloudProviderError> {
            Ok(Some(DriftReason::new("AMIDrift")))
        }
        fn repair_policies(&self) -> Vec<RepairPolicy> {
            Vec::new()
        }
        fn name(&self) -> &str {
            "test"
        }
    }

    fn claim() -> NodeClaim {
        let spec: NodeClaimSpec = serde_json::from_value(serde_json::json!({
            "requirements": [],
            "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}
        }))
        .expect("valid spec");
        let mut c = NodeClaim::new("claim-1", spec);
        c.metadata.labels =
            Some([("karpenter.sh/nodepool".to_owned(), "default".to_owned())].into());
        c
    }

    #[test]
    fn records_latency_and_typed_errors() {
        let mut registry = Registry::default();
        let metered = Metered::with_metrics(
            Arc::new(TestProvider),
            CloudProviderMetrics::register(&mut registry),
        )
        .for_controller("provisioner");
        assert_eq!(metered.name(), "test");
        assert!(block_on(metered.create(&claim())).is_ok());
        assert!(block_on(metered.create(&claim())).is_ok());
        assert!(
            block_on(metered.delete(&claim()))
                .unwrap_err()
                .is_not_found()
        );
        assert!(block_on(metered.get("aws:///x")).is_err());
        assert!(block_on(metered.list()).is_err());
        assert!(block_on(metered.instance_types(&NodePool::new("p", Default::default()))).is_err());
        assert_eq!(
            block_on(metered.is_drifted(&claim())).unwrap(),
            Some(DriftReason::new("AMIDrift"))
        );

        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
        let has = |needle: &str| assert!(text.contains(needle), "missing {needle} in\n{text}");
        has("# TYPE karpenter_cloudprovider_duration_seconds histogram");
        has(
            "karpenter_cloudprovider_duration_seconds_count{controller=\"provisioner\",method=\"Create\",provider=\"test\"} 2",
        );
        has(
            "karpenter_cloudprovider_duration_seconds_count{controller=\"provisioner\",method=\"IsDrifted\",provider=\"test\"} 1",
        );
        has(
            "karpenter_cloudprovider_duration_seconds_bucket{le=\"0.005\",controller=\"provisioner\",method=\"Get\",provider=\"test\"}",
        );
        has(
            "karpenter_cloudprovider_errors_total{controller=\"provisioner\",method=\"Delete\",provider=\"test\",error=\"NodeClaimNotFoundError\",nodepool=\"default\"} 1",
        );
        has(
            "karpenter_cloudprovider_errors_total{controller=\"provisioner\",method=\"GetInstanceTypes\",provider=\"test\",error=\"InsufficientCapacityError\",nodepool=\"p\"} 1",
        );
        has(
            "karpenter_cloudprovider_errors_total{controller=\"provisioner\",method=\"List\",provider=\"test\",error=\"unknown\",nodepool=\"\"} 1",
        );
        assert!(
            !text.contains("method=\"Create\",provider=\"test\",error"),
            "no error recorded for successes"
        );
    }
}
