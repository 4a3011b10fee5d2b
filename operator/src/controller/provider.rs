//! Building the cloud provider named by `--cloud-provider`.
//!
//! Extension point: a provider is a [`ProviderKind`] variant (parsed in `settings`) and an
//! arm in [`build`]. The result is always wrapped in [`Metered`], so every provider reports
//! Karpenter's cloud-provider metrics.

use super::fake::ClusterFakeProvider;
use crate::metrics::Metrics;
use crate::settings::{ProviderKind, Settings};
use karpenter_cloudprovider::{CloudProvider, Metered};
use karpenter_cloudprovider_fake::FakeCloudProvider;
use kube::{Api, Client};
use std::sync::Arc;

/// The provider for `settings`, metered, labelled with `controller`.
pub fn build(settings: &Settings, client: &Client, metrics: &Metrics) -> Arc<dyn CloudProvider> {
    match settings.provider {
        ProviderKind::Fake => {
            let inner =
                ClusterFakeProvider::new(FakeCloudProvider::default(), Api::all(client.clone()));
            let metered = Metered::with_metrics(Arc::new(inner), metrics.cloudprovider.clone())
                .for_controller("nodeclaim.lifecycle");
            Arc::new(metered)
        }
    }
}
