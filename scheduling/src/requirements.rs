//! Node requirements with Karpenter's semantics: a set of values (or its complement) per key,
//! numeric bounds for Gt/Lt/Gte/Lte, and minValues.

use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

/// A node selector operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Operator {
    /// The label's value is one of the values.
    In,
    /// The label is absent or its value is none of the values.
    NotIn,
    /// The label is present.
    Exists,
    /// The label is absent.
    DoesNotExist,
    /// The label's value is an integer greater than the single value.
    Gt,
    /// The label's value is an integer less than the single value.
    Lt,
    /// The label's value is an integer greater than or equal to the single value.
    Gte,
    /// The label's value is an integer less than or equal to the single value.
    Lte,
}

/// A requirement as written in a manifest (`NodeSelectorRequirement`, with Karpenter's
/// `minValues`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeSelectorRequirement {
    /// Label key.
    pub key: String,
    /// Operator.
    pub operator: Operator,
    /// Values.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub values: Vec<String>,
    /// Minimum number of distinct values the launch must keep available (Karpenter only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_values: Option<u32>,
}

/// One key's requirement in Karpenter's normal form: either a finite set of allowed values or
/// the complement of a finite set of excluded values, optionally bounded by integers
/// (Gt/Lt/Gte/Lte), plus minValues.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Requirement {
    key: String,
    complement: bool,
    values: BTreeSet<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    greater_than: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    less_than: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    min_values: Option<u32>,
}

/// A requirement that cannot be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("requirement on {key:?}: {reason}")]
pub struct RequirementError {
    /// The key.
    pub key: String,
    /// Why it is invalid (operator/value rules of the Kubernetes API).
    pub reason: String,
}

impl Requirement {
    /// Builds a requirement from operator and values with the Kubernetes API's rules
    /// (In/NotIn need values, Exists/DoesNotExist take none, Gt/Lt/Gte/Lte one integer).
    pub fn new(
        key: impl Into<String>,
        operator: Operator,
        values: impl IntoIterator<Item = impl Into<String>>,
    ) -> Result<Self, RequirementError> {
        let _ = (key.into(), operator, values.into_iter().map(Into::into).collect::<Vec<String>>());
        todo!()
    }

    /// From the manifest form.
    pub fn from_node_selector(r: &NodeSelectorRequirement) -> Result<Self, RequirementError> {
        let _ = r;
        todo!()
    }

    /// The key.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// The operator this requirement is equivalent to (In, NotIn, Exists, DoesNotExist, or a
    /// numeric bound), as Karpenter's `Requirement.Operator` reports it.
    pub fn operator(&self) -> Operator {
        todo!()
    }

    /// Whether `value` is allowed.
    pub fn has(&self, value: &str) -> bool {
        let _ = value;
        todo!()
    }

    /// The intersection of two requirements on the same key (minValues: the larger).
    pub fn intersection(&self, other: &Requirement) -> Requirement {
        let _ = other;
        todo!()
    }

    /// The number of allowed values (`usize::MAX` for a complement).
    pub fn len(&self) -> usize {
        todo!()
    }

    /// Whether no value is allowed (DoesNotExist, or an empty intersection).
    pub fn is_empty(&self) -> bool {
        todo!()
    }

    /// The allowed values of a finite requirement, sorted; empty for a complement.
    pub fn values(&self) -> impl Iterator<Item = &str> + '_ {
        self.values.iter().map(String::as_str)
    }

    /// A deterministic representative allowed value (the smallest finite one), if any.
    pub fn any(&self) -> Option<&str> {
        todo!()
    }

    /// minValues.
    pub fn min_values(&self) -> Option<u32> {
        self.min_values
    }

    /// Back to the manifest form.
    pub fn to_node_selector(&self) -> NodeSelectorRequirement {
        todo!()
    }
}

/// Requirements per key; a key with no entry is undefined (anything goes, including absence).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Requirements {
    map: BTreeMap<String, Requirement>,
}

/// Why two requirement sets are incompatible, naming the key and the two sides.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct Incompatible {
    /// The key that conflicts.
    pub key: String,
    /// A sentence a person can act on, like Karpenter's.
    pub message: String,
}

impl Requirements {
    /// No requirements.
    pub fn new() -> Self {
        Self::default()
    }

    /// From manifest requirements; repeated keys are intersected.
    pub fn from_node_selector(reqs: &[NodeSelectorRequirement]) -> Result<Self, RequirementError> {
        let _ = reqs;
        todo!()
    }

    /// `In [value]` for every label.
    pub fn from_labels<'a, I>(labels: I) -> Self
    where
        I: IntoIterator<Item = (&'a String, &'a String)>,
    {
        let _ = labels.into_iter().count();
        todo!()
    }

    /// Adds a requirement, intersecting with any existing one on the same key.
    pub fn add(&mut self, r: Requirement) {
        let _ = r;
        todo!()
    }

    /// Adds every requirement of `other`.
    pub fn add_all(&mut self, other: &Requirements) {
        let _ = other;
        todo!()
    }

    /// The requirement on `key`, if defined.
    pub fn get(&self, key: &str) -> Option<&Requirement> {
        self.map.get(key)
    }

    /// Whether `key` is defined.
    pub fn has(&self, key: &str) -> bool {
        self.map.contains_key(key)
    }

    /// Iterates the requirements in key order.
    pub fn iter(&self) -> impl Iterator<Item = &Requirement> + '_ {
        self.map.values()
    }

    /// Number of keys.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// Whether no key is defined.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// Karpenter's `Intersects`: every key defined on both sides has a non-empty intersection.
    pub fn intersects(&self, other: &Requirements) -> Result<(), Incompatible> {
        let _ = other;
        todo!()
    }

    /// Karpenter's `Compatible`: `other` can be met by something described by `self`. A key
    /// that `other` requires but `self` leaves undefined is allowed only for NotIn and
    /// DoesNotExist, or when the key is well-known (`allow_undefined_well_known`).
    pub fn compatible(
        &self,
        other: &Requirements,
        allow_undefined_well_known: bool,
    ) -> Result<(), Incompatible> {
        let _ = (other, allow_undefined_well_known);
        todo!()
    }

    /// Whether node `labels` satisfy every requirement (a missing label satisfies only NotIn
    /// and DoesNotExist), as a node selector term is evaluated against a node.
    pub fn matches_labels(&self, labels: &BTreeMap<String, String>) -> bool {
        let _ = labels;
        todo!()
    }

    /// The labels these requirements pin to one value (In with a single value).
    pub fn single_valued_labels(&self) -> BTreeMap<String, String> {
        todo!()
    }

    /// Back to the manifest form, in key order.
    pub fn to_node_selector(&self) -> Vec<NodeSelectorRequirement> {
        self.map.values().map(Requirement::to_node_selector).collect()
    }
}
