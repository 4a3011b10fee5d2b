//! The `label_selector` target: `metav1.LabelSelector`s (matchLabels and matchExpressions)
//! matched against label sets.

use super::Bytes;
use super::requirements::{KEYS, VALUES, label_set};
use crate::labels;
use crate::requirements::{NodeSelectorRequirement, Operator, Requirements};
use crate::selector::{LabelSelector, LabelSelectorRequirement, SelectorOperator};
use std::collections::BTreeMap;

const OPERATORS: &[SelectorOperator] = &[
    SelectorOperator::In,
    SelectorOperator::NotIn,
    SelectorOperator::Exists,
    SelectorOperator::DoesNotExist,
];

/// Builds a selector and a label set from `data`'s bytes and checks
/// [`check_label_selector`]; with the `k8s` feature, the input is also decoded as a
/// selector's JSON (this crate's form and core/v1's through the conversion) and checked the
/// same way.
pub fn label_selector(data: &[u8]) {
    let mut bytes = Bytes::new(data);
    let match_labels = label_set(&mut bytes);
    let match_expressions = (0..bytes.below(5))
        .map(|_| LabelSelectorRequirement {
            key: bytes.pick(KEYS).to_owned(),
            operator: bytes.pick(OPERATORS),
            values: (0..bytes.below(4))
                .map(|_| bytes.pick(VALUES).to_owned())
                .collect(),
        })
        .collect();
    let selector = LabelSelector {
        match_labels,
        match_expressions,
    };
    let labels = label_set(&mut bytes);
    check_label_selector(&selector, &labels);
    #[cfg(feature = "k8s")]
    json::label_selector(data);
}

/// What must hold for any selector and labels: validation and matching never panic, an empty
/// selector matches everything, and a valid selector without alias keys agrees with the node
/// requirements it reads as (matchLabels as `In [value]`, expressions with the same
/// operator) on labels that define every key the selector repeats — the two implement the
/// same Kubernetes semantics, except that requirements on one key intersect.
pub fn check_label_selector(selector: &LabelSelector, labels: &BTreeMap<String, String>) {
    let matched = selector.matches(labels);
    let valid = selector.validate();
    if selector.is_empty() {
        assert!(matched, "an empty selector must match {labels:?}");
    }
    let keys = || {
        selector
            .match_labels
            .keys()
            .chain(selector.match_expressions.iter().map(|e| &e.key))
    };
    if valid.is_err() || keys().any(|k| labels::normalized(k).is_some()) {
        return;
    }
    let mut manifest: Vec<NodeSelectorRequirement> = selector
        .match_labels
        .iter()
        .map(|(key, value)| NodeSelectorRequirement {
            key: key.clone(),
            operator: Operator::In,
            values: vec![value.clone()],
            min_values: None,
        })
        .collect();
    manifest.extend(
        selector
            .match_expressions
            .iter()
            .map(|e| NodeSelectorRequirement {
                key: e.key.clone(),
                operator: match e.operator {
                    SelectorOperator::In => Operator::In,
                    SelectorOperator::NotIn => Operator::NotIn,
                    SelectorOperator::Exists => Operator::Exists,
                    SelectorOperator::DoesNotExist => Operator::DoesNotExist,
                },
                values: e.values.clone(),
                min_values: None,
            }),
    );
    let requirements = Requirements::from_node_selector(&manifest)
        .unwrap_or_else(|e| panic!("valid selector {selector:?} is not valid requirements: {e}"));
    let mut seen = BTreeMap::<&String, usize>::new();
    for key in keys() {
        *seen.entry(key).or_default() += 1;
    }
    if seen
        .iter()
        .all(|(key, n)| *n == 1 || labels.contains_key(*key))
    {
        assert_eq!(
            matched,
            requirements.matches_labels(labels),
            "{selector:?} and [{requirements}] disagree on {labels:?}"
        );
    }
}

/// The manifest forms, decoded from JSON.
#[cfg(feature = "k8s")]
mod json {
    use super::check_label_selector;
    use crate::k8s::{self, Ctx};
    use crate::selector::LabelSelector;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1 as meta;
    use k8s_openapi::serde_json;
    use std::collections::BTreeMap;

    /// `data` as this crate's selector and as a `metav1.LabelSelector` converted the way pod
    /// affinities, spreads and PDBs are; a valid selector must survive a JSON round trip.
    pub(super) fn label_selector(data: &[u8]) {
        let Ok(value) = serde_json::from_slice::<serde_json::Value>(data) else {
            return;
        };
        let labels: BTreeMap<String, String> = value
            .get("labels")
            .and_then(|l| serde_json::from_value(l.clone()).ok())
            .unwrap_or_default();
        if let Ok(selector) = serde_json::from_value::<LabelSelector>(value.clone()) {
            let text = serde_json::to_string(&selector).expect("selectors serialise");
            let back: LabelSelector = serde_json::from_str(&text)
                .unwrap_or_else(|e| panic!("{selector:?} serialises as {text}, rejected: {e}"));
            assert_eq!(back, selector, "{text}");
            check_label_selector(&selector, &labels);
        }
        if let Ok(selector) = serde_json::from_value::<meta::LabelSelector>(value) {
            let ctx = Ctx::new("PodDisruptionBudget", "fuzz/pdb");
            if let Ok(Some(selector)) = k8s::label_selector(&ctx, "spec.selector", Some(&selector))
            {
                check_label_selector(&selector, &labels);
            }
        }
    }
}
