//! A pod's effective resource requests, computed as Kubernetes computes them.

use crate::quantity::Quantity;
use crate::resources::{ResourceError, Resources};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The resources of one container as written in the pod spec.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ContainerResources {
    /// `resources.requests`.
    #[serde(default)]
    pub requests: BTreeMap<String, Quantity>,
    /// `resources.limits`; a resource with a limit but no request requests its limit, as the
    /// API server's defaulting does.
    #[serde(default)]
    pub limits: BTreeMap<String, Quantity>,
    /// For init containers: `restartPolicy: Always` (a sidecar that keeps running).
    #[serde(default)]
    pub restart_always: bool,
}

/// The effective requests of a pod: max(largest init container, sum of containers), where
/// restartable (sidecar) init containers add to everything that starts after them, plus the
/// pod overhead — the rules of `resourcehelper.PodRequests`.
pub fn pod_requests(
    containers: &[ContainerResources],
    init_containers: &[ContainerResources],
    overhead: Option<&BTreeMap<String, Quantity>>,
) -> Result<Resources, ResourceError> {
    let _ = (containers, init_containers, overhead);
    todo!()
}
