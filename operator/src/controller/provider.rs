//! Building the cloud provider named by `--cloud-provider`. Extension point: a provider is a
//! [`ProviderKind`] variant (parsed in `settings`) and an arm in [`build`]. The result is always
//! wrapped in [`Metered`], so every provider reports Karpenter's cloud-provider metrics (`aws`
//! also its own, through its observer). A provider that owns Kubernetes objects of its own (the
//! `aws` provider's EC2NodeClasses) or listens to the cloud (its interruption queue) also
//! returns [`ProviderHooks`], which the controller calls on every leader pass.

use super::Ctx;
use super::fake::ClusterFakeProvider;
use crate::settings::{ProviderKind, Settings};
use anyhow::Context as _;
use karpenter_cloudprovider::CloudProvider;
use karpenter_cloudprovider::overlay::Published;
use karpenter_cloudprovider_fake::FakeCloudProvider;
use karpenter_metrics::Metrics;
use karpenter_metrics::cloudprovider::Metered;
use kube::{Api, Client};
use std::sync::Arc;
use tokio::sync::{Notify, watch};

/// Provider-specific work the controller drives.
#[async_trait::async_trait]
pub trait ProviderHooks: Send + Sync {
    /// Runs at the start of every leader pass, before instance types are read, so objects
    /// the provider resolves (NodeClasses) are current when pools are priced.
    async fn reconcile(&self, ctx: &Ctx);

    /// Starts background work that only the leader may do (polling the interruption
    /// queue). It stops when `shutdown` turns true.
    fn start_leader_tasks(&self, ctx: &Ctx, shutdown: watch::Receiver<bool>);

    /// The provider's NodeClasses as they are now (NodePools' `NodeClassReady`).
    fn node_classes(&self) -> karpenter_cluster::node_class::NodeClasses;
}

/// A built provider.
pub struct Built {
    /// The provider (metered).
    pub provider: Arc<dyn CloudProvider>,
    /// Its hooks, if it has any.
    pub hooks: Option<Arc<dyn ProviderHooks>>,
    /// Watch tasks the provider added; like the controller's own, they end only on a bug.
    pub watchers: Vec<tokio::task::JoinHandle<()>>,
}

fn metered<P: CloudProvider + 'static>(inner: Arc<P>, metrics: &Metrics) -> Arc<dyn CloudProvider> {
    Arc::new(
        Metered::with_metrics(inner, metrics.cloudprovider.clone())
            .for_controller("nodeclaim.lifecycle"),
    )
}

/// The provider for `settings`. `changed` is notified by any watch the provider adds.
///
/// # Errors
/// The provider cannot be set up (no AWS region, or a binary built without the provider).
pub async fn build(
    settings: &Settings,
    client: &Client,
    metrics: &Metrics,
    changed: Arc<Notify>,
    overlays: Published,
) -> anyhow::Result<Built> {
    match settings.provider {
        ProviderKind::Fake => {
            // The fake launches the cheapest offering by its own prices (docs/operator.md).
            drop(overlays);
            let faults = settings.fake_launch_faults.clone();
            let fake = FakeCloudProvider::default()
                .with_reserved_capacity(settings.feature_gates.reserved_capacity)
                .with_launch_faults(faults)
                .context("fake launch faults")?;
            for r in &settings.fake_reservations {
                fake.add_reservation(r.clone())
                    .context("fake reservations")?;
            }
            let inner = ClusterFakeProvider::new(fake, Api::all(client.clone()));
            Ok(Built {
                provider: metered(Arc::new(inner), metrics),
                hooks: None,
                watchers: Vec::new(),
            })
        }
        #[cfg(feature = "aws")]
        ProviderKind::Aws => {
            let aws = super::aws::build(settings, client, changed, overlays).await?;
            aws.provider.set_observer(Arc::new(metrics.aws.clone()));
            Ok(Built {
                provider: metered(aws.provider.clone(), metrics),
                hooks: Some(aws.hooks),
                watchers: vec![aws.watcher],
            })
        }
        #[cfg(not(feature = "aws"))]
        ProviderKind::Aws => {
            let _ = changed;
            anyhow::bail!(
                "--cloud-provider aws: this binary was built without the `aws` feature (cargo build --release --features aws)"
            )
        }
    }
}
