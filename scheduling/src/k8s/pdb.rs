//! `policy/v1` `PodDisruptionBudget` into [`crate::pdb::PodDisruptionBudget`].

use super::{ConversionError, Present, label_selector, namespaced};
use crate::pdb::PodDisruptionBudget;
use k8s_openapi::api::policy::v1 as policy;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

/// Converts a PodDisruptionBudget the way Karpenter's PDB limits read it: the selector (nil
/// stays nil and matches nothing), `status.disruptionsAllowed` (0 when there is no status
/// yet, so an unobserved budget blocks eviction), whether it blocks every eviction by spec
/// (`maxUnavailable: 0` or `"0%"`, or `minAvailable: "100%"`), and whether unhealthy pods
/// may always be evicted (`unhealthyPodEvictionPolicy: AlwaysAllow`).
///
/// # Errors
/// A [`ConversionError`] naming `namespace/name` and the field for a missing name or an
/// unknown selector operator.
pub fn pdb_from_k8s(
    pdb: &policy::PodDisruptionBudget,
) -> Result<PodDisruptionBudget, ConversionError> {
    let (ctx, namespace, name) = namespaced("PodDisruptionBudget", &pdb.metadata)?;
    let spec = pdb.spec.as_ref();
    let selector = label_selector(
        &ctx,
        "spec.selector",
        spec.and_then(|s| s.selector.as_ref()),
    )?;
    let max_unavailable = spec.and_then(|s| s.max_unavailable.as_ref());
    let min_available = spec.and_then(|s| s.min_available.as_ref());
    let fully_blocking = matches!(max_unavailable, Some(IntOrString::Int(0)))
        || matches!(max_unavailable, Some(IntOrString::String(s)) if s == "0%")
        || matches!(min_available, Some(IntOrString::String(s)) if s == "100%");
    Ok(PodDisruptionBudget {
        namespace,
        name,
        selector,
        disruptions_allowed: pdb
            .status
            .as_ref()
            .and_then(|s| s.disruptions_allowed.present().copied())
            .unwrap_or(0),
        fully_blocking,
        always_allow_unhealthy: spec.and_then(|s| s.unhealthy_pod_eviction_policy.as_deref())
            == Some("AlwaysAllow"),
    })
}
