//! Label selectors over pod and namespace labels (`metav1.LabelSelector`).

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// A label selector operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum SelectorOperator {
    /// Value in the set.
    In,
    /// Label absent or value not in the set.
    NotIn,
    /// Label present.
    Exists,
    /// Label absent.
    DoesNotExist,
}

/// One expression of a label selector.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LabelSelectorRequirement {
    /// Label key.
    pub key: String,
    /// Operator.
    pub operator: SelectorOperator,
    /// Values (In/NotIn).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub values: Vec<String>,
}

/// `metav1.LabelSelector`: matchLabels AND matchExpressions. An empty selector matches every
/// object; callers model an absent (nil) selector as `Option::None`, which matches none.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LabelSelector {
    /// Exact label matches.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub match_labels: BTreeMap<String, String>,
    /// Expressions.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub match_expressions: Vec<LabelSelectorRequirement>,
}

impl LabelSelector {
    /// Whether `labels` satisfy the selector (`metav1.LabelSelectorAsSelector(...).Matches`).
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        let _ = labels;
        todo!()
    }

    /// Whether the selector has no terms (matches everything).
    pub fn is_empty(&self) -> bool {
        self.match_labels.is_empty() && self.match_expressions.is_empty()
    }
}
