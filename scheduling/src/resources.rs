//! Resource lists (cpu, memory, ephemeral-storage, pods and extended resources) with checked
//! arithmetic, in the integer units the kube-scheduler uses.

use crate::quantity::Quantity;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// `cpu`.
pub const CPU: &str = "cpu";
/// `memory`.
pub const MEMORY: &str = "memory";
/// `ephemeral-storage`.
pub const EPHEMERAL_STORAGE: &str = "ephemeral-storage";
/// `pods`.
pub const PODS: &str = "pods";

/// A resource list in the kube-scheduler's units: cpu in millicores (`MilliValue`), every
/// other resource in whole units (`Value`, rounded up).
///
/// Extended resources (`nvidia.com/gpu`, `vpc.amazonaws.com/efa` …) are kept sorted by name
/// with no zero entries, so two equal lists compare equal. Serialises as a map of resource
/// name to quantity text, like a Kubernetes `ResourceList`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Resources {
    /// Millicores.
    pub cpu_millis: i64,
    /// Bytes.
    pub memory: i64,
    /// Bytes.
    pub ephemeral_storage: i64,
    /// Pod count.
    pub pods: i64,
    /// Extended resources, sorted by name, values non-zero.
    pub extended: Vec<(String, i64)>,
}

/// A resource list that cannot be represented.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ResourceError {
    /// A negative quantity where Kubernetes requires a non-negative one.
    #[error("resource {name:?}: negative quantity {quantity}")]
    Negative {
        /// Resource name.
        name: String,
        /// The quantity as written.
        quantity: String,
    },
    /// A resource name Kubernetes would reject.
    #[error("resource name {name:?}: {reason}")]
    InvalidName {
        /// Resource name.
        name: String,
        /// Why it is invalid.
        reason: String,
    },
}

impl Resources {
    /// Builds a list from named quantities (a `ResourceList`); entries of the same name are
    /// summed. Negative quantities are rejected.
    pub fn from_quantities<'a, I>(items: I) -> Result<Self, ResourceError>
    where
        I: IntoIterator<Item = (&'a str, &'a Quantity)>,
    {
        let _ = items;
        todo!()
    }

    /// Shorthand for tests and tools: a list from `(name, quantity text)` pairs.
    ///
    /// # Panics
    /// Never on valid text; malformed text is returned as an error message.
    pub fn parse(items: &[(&str, &str)]) -> Result<Self, String> {
        let _ = items;
        todo!()
    }

    /// The amount of `name` in scheduler units (0 when absent).
    pub fn get(&self, name: &str) -> i64 {
        let _ = name;
        todo!()
    }

    /// Sets the amount of `name` in scheduler units (removing an extended entry set to 0).
    pub fn set(&mut self, name: &str, value: i64) {
        let _ = (name, value);
        todo!()
    }

    /// Every resource with a non-zero amount, in a stable order (cpu, memory,
    /// ephemeral-storage, pods, then extended by name).
    pub fn iter(&self) -> impl Iterator<Item = (&str, i64)> + '_ {
        std::iter::empty()
    }

    /// `self + other`, or `None` on overflow.
    pub fn checked_add(&self, other: &Self) -> Option<Self> {
        let _ = other;
        todo!()
    }

    /// `self - other` (may go negative), or `None` on overflow.
    pub fn checked_sub(&self, other: &Self) -> Option<Self> {
        let _ = other;
        todo!()
    }

    /// Adds `other` in place, saturating at the `i64` range.
    pub fn add_assign(&mut self, other: &Self) {
        let _ = other;
        todo!()
    }

    /// Subtracts `other` in place, saturating at the `i64` range (may go negative).
    pub fn sub_assign(&mut self, other: &Self) {
        let _ = other;
        todo!()
    }

    /// Element-wise maximum.
    pub fn max(&self, other: &Self) -> Self {
        let _ = other;
        todo!()
    }

    /// Whether every requested amount is at most the available amount (a resource absent from
    /// `available` counts as 0), as the kube-scheduler's NodeResourcesFit filter decides.
    pub fn fits(&self, available: &Self) -> bool {
        let _ = available;
        todo!()
    }

    /// The names of the resources for which `self` exceeds `available`, in `iter` order.
    pub fn exceeding<'a>(&'a self, available: &'a Self) -> Vec<&'a str> {
        let _ = available;
        todo!()
    }

    /// Whether every amount is zero.
    pub fn is_zero(&self) -> bool {
        self.cpu_millis == 0
            && self.memory == 0
            && self.ephemeral_storage == 0
            && self.pods == 0
            && self.extended.is_empty()
    }

    /// Whether any amount is negative.
    pub fn any_negative(&self) -> bool {
        self.cpu_millis < 0
            || self.memory < 0
            || self.ephemeral_storage < 0
            || self.pods < 0
            || self.extended.iter().any(|(_, v)| *v < 0)
    }

    /// The list as Kubernetes quantities (cpu DecimalSI millis, memory and storage BinarySI,
    /// others DecimalSI), omitting zero entries.
    pub fn to_quantities(&self) -> BTreeMap<String, Quantity> {
        todo!()
    }
}

impl Serialize for Resources {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.to_quantities().serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for Resources {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let map = BTreeMap::<String, Quantity>::deserialize(deserializer)?;
        Resources::from_quantities(map.iter().map(|(k, v)| (k.as_str(), v)))
            .map_err(serde::de::Error::custom)
    }
}
