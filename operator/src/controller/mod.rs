//! `karpenter controller`: the operator on a real cluster.
//!
//! Watches feed reflector stores ([`state`]); every pass the leader applies what changed in
//! them to the shared [`ClusterState`](karpenter_cluster::ClusterState) index ([`feed`]),
//! ticks the shared [`Reconciler`](karpenter_cluster::reconciler::Reconciler) on a blocking
//! thread, publishes its events (logs, Kubernetes events, metrics) and carries its actions
//! out against the API server and the cloud provider ([`exec`]). The NodeClaim lifecycle,
//! which a cluster observes rather than times, is decided in [`lifecycle`]. All progress
//! lives in the objects (finalizers, taints, conditions), so a restarted or newly elected
//! replica resumes where the last one stopped.

pub mod api;
#[cfg(feature = "aws")]
pub mod aws;
#[cfg(all(test, feature = "aws"))]
mod aws_tests;
pub mod capacity_buffer;
pub mod consolidation;
pub mod dry_run;
pub mod events;
pub mod exec;
pub mod explain;
pub mod fake;
pub mod ignored;
pub mod interruptions;
pub mod kubelet;
pub mod leader;
pub mod lifecycle;
pub mod logging;
pub mod nodeoverlay;
pub mod nodepool;
pub mod provider;
pub mod repair;
pub mod retry_log;
pub mod run;
pub mod state;
pub mod static_pools;
#[cfg(test)]
pub(crate) mod testing;
#[cfg(test)]
mod tests;

use crate::settings::Settings;
use api::RateLimiter;
use events::EventSink;
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use karpenter_cloudprovider::{CloudProvider, CloudProviderError, NodeClaim, NodePool};
use karpenter_metrics::Metrics;
use karpenter_scheduling::model::Millis;
use kube::{Api, Client};
use state::Stores;
use std::sync::Arc;

pub use run::run;

/// The clock reconcilers read (a fixed or stepped clock in tests).
pub type Clock = Arc<dyn Fn() -> jiff::Timestamp + Send + Sync>;

/// The wall clock.
pub fn system_clock() -> Clock {
    Arc::new(jiff::Timestamp::now)
}

/// What every reconciler needs.
#[derive(Clone)]
pub struct Ctx {
    /// The API client.
    pub client: Client,
    /// The cloud provider (metered).
    pub provider: Arc<dyn CloudProvider>,
    /// Settings.
    pub settings: Settings,
    /// Metrics.
    pub metrics: Metrics,
    /// Watch stores.
    pub stores: Stores,
    /// Events.
    pub events: EventSink,
    /// Client-side rate limit for writes and reads outside the watches.
    pub limiter: RateLimiter,
    /// Clock.
    pub clock: Clock,
    /// Interruption notices from the provider's queue, for the index.
    pub interruptions: interruptions::InterruptionInbox,
}

impl Ctx {
    /// NodeClaims.
    pub fn node_claims(&self) -> Api<NodeClaim> {
        Api::all(self.client.clone())
    }
    /// NodePools.
    pub fn node_pools(&self) -> Api<NodePool> {
        Api::all(self.client.clone())
    }
    /// Nodes.
    pub fn nodes(&self) -> Api<Node> {
        Api::all(self.client.clone())
    }
    /// Pods of `namespace`.
    pub fn pods(&self, namespace: &str) -> Api<Pod> {
        Api::namespaced(self.client.clone(), namespace)
    }
    /// Now, in Unix milliseconds.
    pub fn now_ms(&self) -> Millis {
        (self.clock)().as_millisecond()
    }
    /// Now, as an API timestamp.
    pub fn now_time(&self) -> Time {
        Time((self.clock)())
    }
}

/// Why one reconcile of one object failed. The object is reconciled again on a later pass,
/// from whatever state the API server then holds.
#[derive(Debug, thiserror::Error)]
pub enum ReconcileError {
    /// An API call failed.
    #[error("{what} {object}: {source}")]
    Api {
        /// What was being done.
        what: &'static str,
        /// The object.
        object: String,
        /// The error.
        #[source]
        source: kube::Error,
    },
    /// A cloud-provider call failed.
    #[error("{what} for {object}: {source}")]
    Provider {
        /// What was being done.
        what: &'static str,
        /// The object.
        object: String,
        /// The error.
        #[source]
        source: CloudProviderError,
    },
}

impl ReconcileError {
    /// A `map_err` adapter for API errors.
    pub fn api(what: &'static str, object: &str) -> impl FnOnce(kube::Error) -> Self {
        let object = object.to_owned();
        move |source| Self::Api {
            what,
            object,
            source,
        }
    }

    /// `res` as the outcome of `what` on `object`, a 404 counted as success: the object is
    /// gone, which is what a delete or a change to a deleted object comes to.
    ///
    /// # Errors
    /// Any other API error.
    pub fn unless_gone<T>(
        res: Result<T, kube::Error>,
        what: &'static str,
        object: &str,
    ) -> Result<(), Self> {
        match res {
            Err(e) if api::classify(&e) != api::ErrorClass::NotFound => {
                Err(Self::api(what, object)(e))
            }
            _ => Ok(()),
        }
    }
}
