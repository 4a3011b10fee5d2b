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
    ///
    /// Every `matchLabels` pair must be present with that exact value, and every expression
    /// must hold: `In` needs the label present with a listed value, `NotIn` holds when the
    /// label is absent or its value is unlisted, `Exists`/`DoesNotExist` test presence only.
    /// Malformed expressions (see [`LabelSelector::validate`]) are evaluated literally rather
    /// than rejected: `In` with no values matches nothing, `NotIn` with none matches every
    /// object, and values given to `Exists`/`DoesNotExist` are ignored.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.match_labels
            .iter()
            .all(|(k, v)| labels.get(k) == Some(v))
            && self.match_expressions.iter().all(|e| e.matches(labels))
    }

    /// Checks the rules the API server enforces on a selector (`ValidateLabelSelector`):
    /// expression keys are non-empty, `In`/`NotIn` list at least one value and
    /// `Exists`/`DoesNotExist` list none. The error names the offending key and rule.
    pub fn validate(&self) -> Result<(), String> {
        if self.match_labels.contains_key("") {
            return Err("matchLabels: key must not be empty".to_owned());
        }
        for (i, e) in self.match_expressions.iter().enumerate() {
            if e.key.is_empty() {
                return Err(format!("matchExpressions[{i}].key: must not be empty"));
            }
            match e.operator {
                SelectorOperator::In | SelectorOperator::NotIn if e.values.is_empty() => {
                    return Err(format!(
                        "matchExpressions[{i}] (key {:?}): values must be non-empty when \
                         operator is {:?}",
                        e.key, e.operator
                    ));
                }
                SelectorOperator::Exists | SelectorOperator::DoesNotExist
                    if !e.values.is_empty() =>
                {
                    return Err(format!(
                        "matchExpressions[{i}] (key {:?}): values must be empty when operator \
                         is {:?}",
                        e.key, e.operator
                    ));
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// Whether the selector has no terms (matches everything).
    pub fn is_empty(&self) -> bool {
        self.match_labels.is_empty() && self.match_expressions.is_empty()
    }
}

impl LabelSelectorRequirement {
    /// Whether `labels` satisfy this one expression, with the semantics described on
    /// [`LabelSelector::matches`].
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        let value = labels.get(&self.key);
        match self.operator {
            SelectorOperator::In => value.is_some_and(|v| self.values.contains(v)),
            SelectorOperator::NotIn => value.is_none_or(|v| !self.values.contains(v)),
            SelectorOperator::Exists => value.is_some(),
            SelectorOperator::DoesNotExist => value.is_none(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    fn expr(key: &str, operator: SelectorOperator, values: &[&str]) -> LabelSelectorRequirement {
        LabelSelectorRequirement {
            key: key.to_owned(),
            operator,
            values: values.iter().map(|v| (*v).to_owned()).collect(),
        }
    }

    fn selector(ml: &[(&str, &str)], exprs: Vec<LabelSelectorRequirement>) -> LabelSelector {
        LabelSelector {
            match_labels: labels(ml),
            match_expressions: exprs,
        }
    }

    #[test]
    fn matches_table() {
        use SelectorOperator::*;
        let pod = labels(&[("app", "web"), ("tier", "frontend")]);
        let cases: Vec<(&str, LabelSelector, bool)> = vec![
            ("empty selector matches all", LabelSelector::default(), true),
            ("matchLabels hit", selector(&[("app", "web")], vec![]), true),
            (
                "matchLabels wrong value",
                selector(&[("app", "db")], vec![]),
                false,
            ),
            (
                "matchLabels missing key",
                selector(&[("env", "prod")], vec![]),
                false,
            ),
            (
                "matchLabels all must hold",
                selector(&[("app", "web"), ("tier", "x")], vec![]),
                false,
            ),
            (
                "In hit",
                selector(&[], vec![expr("app", In, &["db", "web"])]),
                true,
            ),
            (
                "In miss",
                selector(&[], vec![expr("app", In, &["db"])]),
                false,
            ),
            (
                "In absent",
                selector(&[], vec![expr("env", In, &["prod"])]),
                false,
            ),
            (
                "NotIn absent",
                selector(&[], vec![expr("env", NotIn, &["prod"])]),
                true,
            ),
            (
                "NotIn other value",
                selector(&[], vec![expr("app", NotIn, &["db"])]),
                true,
            ),
            (
                "NotIn listed value",
                selector(&[], vec![expr("app", NotIn, &["web"])]),
                false,
            ),
            (
                "Exists present",
                selector(&[], vec![expr("tier", Exists, &[])]),
                true,
            ),
            (
                "Exists absent",
                selector(&[], vec![expr("env", Exists, &[])]),
                false,
            ),
            (
                "DoesNotExist absent",
                selector(&[], vec![expr("env", DoesNotExist, &[])]),
                true,
            ),
            (
                "DoesNotExist present",
                selector(&[], vec![expr("app", DoesNotExist, &[])]),
                false,
            ),
            (
                "labels AND expressions",
                selector(&[("app", "web")], vec![expr("tier", In, &["backend"])]),
                false,
            ),
            (
                "all expressions hold",
                selector(
                    &[("app", "web")],
                    vec![
                        expr("tier", In, &["frontend"]),
                        expr("env", DoesNotExist, &[]),
                    ],
                ),
                true,
            ),
            (
                "In with no values matches nothing",
                selector(&[], vec![expr("app", In, &[])]),
                false,
            ),
        ];
        for (name, sel, want) in cases {
            assert_eq!(sel.matches(&pod), want, "{name}");
        }
        assert!(LabelSelector::default().matches(&BTreeMap::new()));
        assert!(LabelSelector::default().is_empty());
        assert!(!selector(&[("a", "b")], vec![]).is_empty());
    }

    #[test]
    fn validate_table() {
        use SelectorOperator::*;
        let ok = [
            LabelSelector::default(),
            selector(
                &[("app", "web")],
                vec![expr("a", In, &["x"]), expr("b", Exists, &[])],
            ),
            selector(
                &[],
                vec![expr("a", NotIn, &["x"]), expr("b", DoesNotExist, &[])],
            ),
        ];
        for sel in ok {
            assert_eq!(sel.validate(), Ok(()), "{sel:?}");
        }
        let bad = [
            (
                selector(&[], vec![expr("a", In, &[])]),
                "values must be non-empty",
            ),
            (
                selector(&[], vec![expr("a", NotIn, &[])]),
                "values must be non-empty",
            ),
            (
                selector(&[], vec![expr("a", Exists, &["x"])]),
                "values must be empty",
            ),
            (
                selector(&[], vec![expr("a", DoesNotExist, &["x"])]),
                "values must be empty",
            ),
            (
                selector(&[], vec![expr("", Exists, &[])]),
                "key: must not be empty",
            ),
            (selector(&[("", "x")], vec![]), "key must not be empty"),
        ];
        for (sel, want) in bad {
            let err = sel.validate().expect_err("invalid selector accepted");
            assert!(err.contains(want), "{err} should contain {want}");
        }
    }

    #[test]
    fn serde_uses_kubernetes_field_names() {
        let sel: LabelSelector = serde_json::from_str(
            r#"{"matchLabels":{"app":"web"},
                "matchExpressions":[{"key":"tier","operator":"NotIn","values":["db"]}]}"#,
        )
        .expect("parse");
        assert_eq!(sel.match_labels.get("app").map(String::as_str), Some("web"));
        assert_eq!(sel.match_expressions[0].operator, SelectorOperator::NotIn);
        assert!(sel.matches(&labels(&[("app", "web")])));
        let empty: LabelSelector = serde_json::from_str("{}").expect("parse");
        assert!(empty.is_empty());
    }
}
