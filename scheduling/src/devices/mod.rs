//! Dynamic Resource Allocation as the solver simulates it (Karpenter's `dynamicresources`):
//! the devices an instance type's node will publish, the device requests of a pod's
//! ResourceClaims, and whether a node's devices satisfy every claim placed on it.
//!
//! The solver only sees claims when the operator resolves them (`--ignore-dra-requests=false`);
//! otherwise pods carry none and scheduling is unchanged.

mod allocate;
pub mod cel;

pub(crate) use allocate::{CompiledClaim, allocate, compile_claims};

use crate::quantity::Quantity;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// A typed device attribute, as in a ResourceSlice (`{"string": "h100"}`, `{"int": 80}`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum DeviceAttribute {
    /// An integer.
    Int(i64),
    /// A boolean.
    Bool(bool),
    /// A string.
    String(String),
    /// A semantic version, compared for equality only.
    Version(String),
}

/// One device a node publishes (or, for an instance type, will publish once its driver runs).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Device {
    /// The DRA driver (`gpu.fake.karpenter.sh`).
    pub driver: String,
    /// The pool within the driver (a node-local pool is usually named for the node).
    #[serde(default)]
    pub pool: String,
    /// The device's name, unique within its pool.
    pub name: String,
    /// Attributes by name; a name without a domain (`model`) is in the driver's domain, as
    /// ResourceSlices define it.
    #[serde(default)]
    pub attributes: BTreeMap<String, DeviceAttribute>,
    /// Capacities by name, domain-qualified as attributes are.
    #[serde(default)]
    pub capacity: BTreeMap<String, Quantity>,
}

impl Device {
    /// The attribute `name` in `domain`: a fully qualified key, or an unqualified one when
    /// the domain is the driver's.
    pub fn attribute(&self, domain: &str, name: &str) -> Option<&DeviceAttribute> {
        lookup(&self.attributes, &self.driver, domain, name)
    }

    /// The capacity `name` in `domain`, looked up as [`Device::attribute`].
    pub fn capacity_of(&self, domain: &str, name: &str) -> Option<&Quantity> {
        lookup(&self.capacity, &self.driver, domain, name)
    }
}

fn lookup<'a, V>(
    map: &'a BTreeMap<String, V>,
    driver: &str,
    domain: &str,
    name: &str,
) -> Option<&'a V> {
    map.get(&format!("{domain}/{name}"))
        .or_else(|| (domain == driver).then(|| map.get(name)).flatten())
}

/// How many devices a request wants.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum DeviceCount {
    /// Exactly this many matching devices (`allocationMode: ExactCount`).
    ExactCount(u32),
    /// Every matching device on the node, at least one (`allocationMode: All`).
    All,
}

/// One request of a claim, with its DeviceClass's selectors already added.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeviceRequest {
    /// The request's name in the claim.
    pub name: String,
    /// The DeviceClass it names.
    #[serde(default)]
    pub device_class: String,
    /// CEL selectors (the class's, then the request's), all of which a device must satisfy.
    #[serde(default)]
    pub selectors: Vec<String>,
    /// How many devices.
    pub count: DeviceCount,
}

/// A ResourceClaim a pod needs, direct or generated from a ResourceClaimTemplate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeviceClaim {
    /// `namespace/name` of the claim (for a template not yet instantiated, the pod's own
    /// name and claim entry, so that no other pod shares it). Pods naming the same claim on
    /// one node share its devices.
    pub key: String,
    /// Its device requests.
    #[serde(default)]
    pub requests: Vec<DeviceRequest>,
    /// Why the claim cannot be simulated (a feature the solver does not evaluate, a missing
    /// DeviceClass): the pod is then reported unschedulable with this reason rather than
    /// placed on a guess.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unsupported: Option<String>,
}
