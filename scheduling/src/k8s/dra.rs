//! A pod's ResourceClaims as the solver's [`DeviceClaim`]s, resolved against the
//! ResourceClaims, ResourceClaimTemplates and DeviceClasses of the cluster (resource.k8s.io/v1).
//!
//! A claim the solver cannot simulate is still returned, with
//! [`DeviceClaim::unsupported`] saying why, so the pod is reported unschedulable with that
//! reason instead of being placed on a guess: a missing claim, template or class, a request
//! with `firstAvailable`, `adminAccess` or capacity requirements, claim `constraints`, a
//! selector that is not CEL.

use super::Present;
use crate::devices::{DeviceClaim, DeviceCount, DeviceRequest};
use k8s_openapi::api::core::v1 as core;
use k8s_openapi::api::resource::v1 as resource;

/// The DRA objects a pod's claims can refer to.
pub trait DraObjects {
    /// The ResourceClaim `namespace/name`.
    fn resource_claim(&self, namespace: &str, name: &str) -> Option<&resource::ResourceClaim>;
    /// The ResourceClaimTemplate `namespace/name`.
    fn resource_claim_template(
        &self,
        namespace: &str,
        name: &str,
    ) -> Option<&resource::ResourceClaimTemplate>;
    /// The DeviceClass `name`.
    fn device_class(&self, name: &str) -> Option<&resource::DeviceClass>;
}

/// The pod's claims, in `spec.resourceClaims` order. A claim from a template uses the claim
/// generated for the pod when `status.resourceClaimStatuses` names one, and the template
/// itself before that (keyed to the pod, so no other pod shares it); an entry whose status
/// says no claim was generated needs no device.
pub fn device_claims_from_k8s(pod: &core::Pod, objects: &impl DraObjects) -> Vec<DeviceClaim> {
    let ns = pod.metadata.namespace.as_deref().unwrap_or("default");
    let pod_name = pod.metadata.name.as_deref().unwrap_or_default();
    let Some(spec) = &pod.spec else {
        return Vec::new();
    };
    let statuses = pod
        .status
        .as_ref()
        .and_then(|s| s.resource_claim_statuses.as_ref());
    let mut out = Vec::new();
    for entry in spec.resource_claims.iter().flatten() {
        let generated = statuses
            .and_then(|s| s.iter().find(|s| s.name == entry.name))
            .map(|s| s.resource_claim_name.clone());
        let (key, claim_spec) = if let Some(name) = &entry.resource_claim_name {
            let key = format!("{ns}/{name}");
            match objects.resource_claim(ns, name) {
                Some(c) => (key, spec_of(c.spec.present())),
                None => (key, Err("the ResourceClaim does not exist".to_string())),
            }
        } else if let Some(template) = &entry.resource_claim_template_name {
            let generated_claim = match generated {
                // The status says no claim was needed.
                Some(None) => continue,
                Some(Some(name)) => objects.resource_claim(ns, &name).map(|c| (name, c)),
                None => None,
            };
            if let Some((name, c)) = generated_claim {
                (format!("{ns}/{name}"), spec_of(c.spec.present()))
            } else {
                let key = format!("{ns}/{pod_name}/{}", entry.name);
                match objects.resource_claim_template(ns, template) {
                    Some(t) => (
                        key,
                        spec_of(t.spec.present().and_then(|s| s.spec.present())),
                    ),
                    None => (
                        key,
                        Err(format!(
                            "the ResourceClaimTemplate {ns}/{template} does not exist"
                        )),
                    ),
                }
            }
        } else {
            continue;
        };
        out.push(match claim_spec.and_then(|s| requests(s, objects)) {
            Ok(requests) => DeviceClaim {
                key,
                requests,
                unsupported: None,
            },
            Err(why) => DeviceClaim {
                key,
                requests: Vec::new(),
                unsupported: Some(why),
            },
        });
    }
    out
}

fn spec_of(
    spec: Option<&resource::ResourceClaimSpec>,
) -> Result<&resource::ResourceClaimSpec, String> {
    spec.ok_or_else(|| "it has no spec".to_string())
}

fn cel(
    selectors: Option<&Vec<resource::DeviceSelector>>,
    what: &str,
) -> Result<Vec<String>, String> {
    selectors
        .into_iter()
        .flatten()
        .map(|s| {
            s.cel
                .as_ref()
                .map(|c| c.expression.clone())
                .ok_or_else(|| format!("{what} has a selector that is not CEL"))
        })
        .collect()
}

fn requests(
    spec: &resource::ResourceClaimSpec,
    objects: &impl DraObjects,
) -> Result<Vec<DeviceRequest>, String> {
    let Some(devices) = &spec.devices else {
        return Ok(Vec::new());
    };
    if devices.constraints.as_ref().is_some_and(|c| !c.is_empty()) {
        return Err("device constraints (matchAttribute) are not simulated".into());
    }
    devices
        .requests
        .iter()
        .flatten()
        .map(|r| {
            let what = format!("request {}", r.name);
            if r.first_available.as_ref().is_some_and(|f| !f.is_empty()) {
                return Err(format!("{what}: firstAvailable is not simulated"));
            }
            let Some(exact) = &r.exactly else {
                return Err(format!("{what}: has neither exactly nor firstAvailable"));
            };
            if exact.admin_access == Some(true) {
                return Err(format!("{what}: adminAccess is not simulated"));
            }
            if exact.capacity.is_some() {
                return Err(format!("{what}: capacity requests are not simulated"));
            }
            let class_name = &exact.device_class_name;
            let class = objects
                .device_class(class_name)
                .ok_or_else(|| format!("{what}: the DeviceClass {class_name} does not exist"))?;
            let mut selectors = cel(
                class.spec.present().and_then(|s| s.selectors.as_ref()),
                &format!("DeviceClass {class_name}"),
            )?;
            selectors.extend(cel(exact.selectors.as_ref(), &what)?);
            let count = match exact.allocation_mode.as_deref() {
                None | Some("ExactCount") => {
                    let n = exact.count.unwrap_or(1);
                    DeviceCount::ExactCount(
                        u32::try_from(n)
                            .ok()
                            .filter(|n| *n > 0)
                            .ok_or_else(|| format!("{what}: count {n} is not positive"))?,
                    )
                }
                Some("All") => DeviceCount::All,
                Some(other) => return Err(format!("{what}: unknown allocationMode {other}")),
            };
            Ok(DeviceRequest {
                name: r.name.clone(),
                device_class: class_name.clone(),
                selectors,
                count,
            })
        })
        .collect()
}
