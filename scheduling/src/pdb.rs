//! PodDisruptionBudgets as the disruption logic sees them.

use crate::model::Pod;
use crate::selector::LabelSelector;
use serde::{Deserialize, Serialize};

/// A PodDisruptionBudget reduced to what deciding an eviction needs (Karpenter's PDB limits).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PodDisruptionBudget {
    /// Namespace; the budget only covers pods in it.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// `spec.selector`; `None` (nil) selects no pod, an empty selector every pod of the
    /// namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<LabelSelector>,
    /// `status.disruptionsAllowed`: how many covered pods may be evicted now.
    #[serde(default)]
    pub disruptions_allowed: i32,
    /// The spec forbids every voluntary eviction (`maxUnavailable: 0` / `"0%"` or
    /// `minAvailable: "100%"`), whatever the status says; Karpenter does not provision for
    /// pods such a budget covers.
    #[serde(default)]
    pub fully_blocking: bool,
    /// `unhealthyPodEvictionPolicy: AlwaysAllow`: pods that are not Ready may be evicted even
    /// when no disruption is allowed.
    #[serde(default)]
    pub always_allow_unhealthy: bool,
}

impl PodDisruptionBudget {
    /// Whether the budget covers `pod`: same namespace and the selector matches its labels.
    /// A nil selector matches no pod and an empty one matches every pod, as
    /// `metav1.LabelSelectorAsSelector` decides.
    pub fn matches(&self, pod: &Pod) -> bool {
        pod.namespace == self.namespace
            && self
                .selector
                .as_ref()
                .is_some_and(|s| s.matches(&pod.labels))
    }

    /// `namespace/name`.
    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::selector::{LabelSelectorRequirement, SelectorOperator};

    fn pod(namespace: &str, labels: &[(&str, &str)]) -> Pod {
        Pod {
            namespace: namespace.into(),
            name: "p".into(),
            labels: labels
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            ..Pod::default()
        }
    }

    fn pdb(selector: Option<LabelSelector>) -> PodDisruptionBudget {
        PodDisruptionBudget {
            namespace: "shop".into(),
            name: "web".into(),
            selector,
            disruptions_allowed: 1,
            ..PodDisruptionBudget::default()
        }
    }

    #[test]
    fn nil_selector_matches_nothing_and_empty_matches_the_namespace() {
        let web = pod("shop", &[("app", "web")]);
        assert!(!pdb(None).matches(&web));
        assert!(pdb(Some(LabelSelector::default())).matches(&web));
        assert!(pdb(Some(LabelSelector::default())).matches(&pod("shop", &[])));
        assert!(!pdb(Some(LabelSelector::default())).matches(&pod("other", &[])));
    }

    #[test]
    fn selector_table() {
        let by_label = LabelSelector {
            match_labels: [("app".to_string(), "web".to_string())].into(),
            ..LabelSelector::default()
        };
        let not_canary = LabelSelector {
            match_expressions: vec![LabelSelectorRequirement {
                key: "track".into(),
                operator: SelectorOperator::NotIn,
                values: vec!["canary".into()],
            }],
            ..LabelSelector::default()
        };
        let cases = [
            (&by_label, pod("shop", &[("app", "web")]), true),
            (&by_label, pod("shop", &[("app", "db")]), false),
            (&by_label, pod("other", &[("app", "web")]), false),
            (&not_canary, pod("shop", &[("track", "stable")]), true),
            (&not_canary, pod("shop", &[]), true),
            (&not_canary, pod("shop", &[("track", "canary")]), false),
        ];
        for (i, (selector, p, expected)) in cases.into_iter().enumerate() {
            assert_eq!(
                pdb(Some(selector.clone())).matches(&p),
                expected,
                "case {i}"
            );
        }
    }

    #[test]
    fn serde_is_camel_case_and_round_trips() {
        let b = PodDisruptionBudget {
            fully_blocking: true,
            always_allow_unhealthy: true,
            ..pdb(Some(LabelSelector::default()))
        };
        let v = serde_json::to_value(&b).unwrap();
        assert_eq!(v["disruptionsAllowed"], 1);
        assert_eq!(v["fullyBlocking"], true);
        assert_eq!(v["alwaysAllowUnhealthy"], true);
        assert_eq!(serde_json::from_value::<PodDisruptionBudget>(v).unwrap(), b);
        let minimal: PodDisruptionBudget =
            serde_json::from_value(serde_json::json!({"namespace": "a", "name": "b"})).unwrap();
        assert_eq!(minimal.selector, None);
        assert_eq!(minimal.disruptions_allowed, 0);
    }
}
