//! Taints and tolerations, matched exactly as the kube-scheduler matches them.

use crate::resources::qualified_name_error;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// A taint effect.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum TaintEffect {
    /// Pods that do not tolerate it are not scheduled.
    NoSchedule,
    /// The scheduler tries to avoid the node.
    PreferNoSchedule,
    /// Pods that do not tolerate it are not scheduled and are evicted.
    NoExecute,
}

/// A node taint.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Taint {
    /// Taint key.
    pub key: String,
    /// Taint value (empty when absent).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub value: String,
    /// Effect.
    pub effect: TaintEffect,
}

/// A toleration operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
pub enum TolerationOperator {
    /// Key and value must match (the default).
    #[default]
    Equal,
    /// The key must match; the value is ignored.
    Exists,
}

/// A pod toleration, with Kubernetes' optional fields.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Toleration {
    /// Key; empty with operator Exists tolerates every key.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub key: String,
    /// Operator (default Equal).
    #[serde(default)]
    pub operator: TolerationOperator,
    /// Value, compared with Equal.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub value: String,
    /// Effect; `None` tolerates every effect.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub effect: Option<TaintEffect>,
    /// Only meaningful for NoExecute; does not affect scheduling.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub toleration_seconds: Option<i64>,
}

impl Taint {
    /// A taint.
    pub fn new(key: impl Into<String>, value: impl Into<String>, effect: TaintEffect) -> Self {
        Self {
            key: key.into(),
            value: value.into(),
            effect,
        }
    }

    /// Whether two taints are the same for matching purposes (key and effect), like
    /// `Taint.MatchTaint`.
    pub fn matches(&self, other: &Taint) -> bool {
        self.key == other.key && self.effect == other.effect
    }
}

impl Toleration {
    /// `Toleration.ToleratesTaint`: whether this toleration tolerates `taint`.
    ///
    /// The effect must match unless it is `None`; the key must match unless it is empty; then
    /// `Exists` accepts any value and `Equal` requires equal values. As upstream, an empty key
    /// with `Equal` (which API validation forbids) therefore tolerates every taint whose value
    /// equals the toleration's value, whatever its key.
    pub fn tolerates(&self, taint: &Taint) -> bool {
        if self.effect.is_some_and(|effect| effect != taint.effect) {
            return false;
        }
        if !self.key.is_empty() && self.key != taint.key {
            return false;
        }
        match self.operator {
            TolerationOperator::Equal => self.value == taint.value,
            TolerationOperator::Exists => true,
        }
    }
}

/// The first taint among `taints` that `tolerations` do not tolerate, considering only the
/// effects the scheduler filters on (NoSchedule, NoExecute) and — when `prefer_no_schedule`
/// is true, as Karpenter does before it relaxes preferences — PreferNoSchedule too.
pub fn first_untolerated<'a>(
    taints: &'a [Taint],
    tolerations: &[Toleration],
    prefer_no_schedule: bool,
) -> Option<&'a Taint> {
    taints
        .iter()
        .filter(|taint| match taint.effect {
            TaintEffect::NoSchedule | TaintEffect::NoExecute => true,
            TaintEffect::PreferNoSchedule => prefer_no_schedule,
        })
        .find(|taint| !tolerations.iter().any(|t| t.tolerates(taint)))
}

impl TaintEffect {
    /// The effect's API name (`NoSchedule`, `PreferNoSchedule`, `NoExecute`).
    pub fn as_str(&self) -> &'static str {
        match self {
            TaintEffect::NoSchedule => "NoSchedule",
            TaintEffect::PreferNoSchedule => "PreferNoSchedule",
            TaintEffect::NoExecute => "NoExecute",
        }
    }
}

impl fmt::Display for TaintEffect {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.as_str())
    }
}

impl FromStr for TaintEffect {
    type Err = TaintParseError;

    /// Parses an effect's exact API name (case-sensitive, as the API server).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "NoSchedule" => Ok(TaintEffect::NoSchedule),
            "PreferNoSchedule" => Ok(TaintEffect::PreferNoSchedule),
            "NoExecute" => Ok(TaintEffect::NoExecute),
            _ => Err(TaintParseError {
                text: s.to_owned(),
                reason: "effect must be NoSchedule, PreferNoSchedule or NoExecute".to_owned(),
            }),
        }
    }
}

/// A taint text that is not `key[=value]:Effect` with a valid key and value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("taint {text:?}: {reason}")]
pub struct TaintParseError {
    /// The text that failed to parse.
    pub text: String,
    /// Why it failed.
    pub reason: String,
}

impl fmt::Display for Taint {
    /// `key=value:Effect`, or `key:Effect` when the value is empty — `Taint.ToString`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.value.is_empty() {
            write!(f, "{}:{}", self.key, self.effect)
        } else {
            write!(f, "{}={}:{}", self.key, self.value, self.effect)
        }
    }
}

impl FromStr for Taint {
    type Err = TaintParseError;

    /// Parses the `Display` form, `key=value:Effect` or `key:Effect`, the way `kubectl taint`
    /// does: the key must be a qualified name and the value a label value; the effect is
    /// required. The error names the whole text.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let fail = |reason: String| TaintParseError {
            text: s.to_owned(),
            reason,
        };
        let (key_value, effect) = s
            .split_once(':')
            .ok_or_else(|| fail("expected key[=value]:Effect".to_owned()))?;
        if effect.contains(':') {
            return Err(fail("more than one ':'".to_owned()));
        }
        let effect = effect.parse::<TaintEffect>().map_err(|e| fail(e.reason))?;
        let (key, value) = key_value.split_once('=').unwrap_or((key_value, ""));
        if value.contains('=') {
            return Err(fail("more than one '='".to_owned()));
        }
        if let Some(reason) = qualified_name_error(key) {
            return Err(fail(format!("invalid key {key:?}: {reason}")));
        }
        if let Some(reason) = label_value_error(value) {
            return Err(fail(format!("invalid value {value:?}: {reason}")));
        }
        Ok(Taint::new(key, value, effect))
    }
}

/// Why `value` is not a valid label value (empty, or at most 63 characters of
/// `[A-Za-z0-9._-]` starting and ending alphanumeric), or `None` when it is one.
fn label_value_error(value: &str) -> Option<String> {
    if value.is_empty() {
        return None;
    }
    if value.len() > 63 {
        return Some("must be no more than 63 characters".to_owned());
    }
    let b = value.as_bytes();
    let chars_ok = b
        .iter()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'));
    if chars_ok && b[0].is_ascii_alphanumeric() && b[b.len() - 1].is_ascii_alphanumeric() {
        None
    } else {
        Some(
            "must consist of alphanumeric characters, '-', '_' or '.', and must start and end \
             with an alphanumeric character"
                .to_owned(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::TaintEffect::{NoExecute, NoSchedule, PreferNoSchedule};
    use super::TolerationOperator::{Equal, Exists};
    use super::*;

    fn tol(
        key: &str,
        op: TolerationOperator,
        value: &str,
        effect: Option<TaintEffect>,
    ) -> Toleration {
        Toleration {
            key: key.to_owned(),
            operator: op,
            value: value.to_owned(),
            effect,
            toleration_seconds: None,
        }
    }

    /// TestTolerationToleratesTaint (Equal/Exists cases) plus the edge rules of ToleratesTaint.
    #[test]
    fn tolerates_table() {
        let table: &[(&str, Toleration, Taint, bool)] = &[
            (
                "same key+effect, Exists, no value",
                tol("foo", Exists, "", Some(NoSchedule)),
                Taint::new("foo", "", NoSchedule),
                true,
            ),
            (
                "same key+effect, Exists, some value",
                tol("foo", Exists, "", Some(NoSchedule)),
                Taint::new("foo", "bar", NoSchedule),
                true,
            ),
            (
                "empty key Exists matches all keys",
                tol("", Exists, "", Some(NoSchedule)),
                Taint::new("foo", "bar", NoSchedule),
                true,
            ),
            (
                "same key, effect, value, Equal",
                tol("foo", Equal, "bar", Some(NoSchedule)),
                Taint::new("foo", "bar", NoSchedule),
                true,
            ),
            (
                "different values, Equal",
                tol("foo", Equal, "value1", Some(NoSchedule)),
                Taint::new("foo", "value2", NoSchedule),
                false,
            ),
            (
                "different effects",
                tol("foo", Equal, "bar", Some(NoSchedule)),
                Taint::new("foo", "bar", NoExecute),
                false,
            ),
            (
                "no effect matches every effect",
                tol("foo", Equal, "bar", None),
                Taint::new("foo", "bar", NoExecute),
                true,
            ),
            (
                "no effect, PreferNoSchedule",
                tol("foo", Exists, "", None),
                Taint::new("foo", "x", PreferNoSchedule),
                true,
            ),
            (
                "different keys",
                tol("foo", Exists, "", None),
                Taint::new("other", "", NoSchedule),
                false,
            ),
            (
                "tolerate everything",
                tol("", Exists, "", None),
                Taint::new("any", "thing", NoExecute),
                true,
            ),
            (
                "Equal with empty values",
                tol("foo", Equal, "", Some(NoSchedule)),
                Taint::new("foo", "", NoSchedule),
                true,
            ),
            (
                "Equal empty vs set value",
                tol("foo", Equal, "", Some(NoSchedule)),
                Taint::new("foo", "bar", NoSchedule),
                false,
            ),
            (
                "Exists ignores a toleration value",
                tol("foo", Exists, "ignored", None),
                Taint::new("foo", "bar", NoSchedule),
                true,
            ),
            // Upstream skips the key check for an empty key, whatever the operator.
            (
                "empty key Equal, equal value",
                tol("", Equal, "bar", None),
                Taint::new("foo", "bar", NoSchedule),
                true,
            ),
            (
                "empty key Equal, empty values",
                tol("", Equal, "", None),
                Taint::new("foo", "", NoSchedule),
                true,
            ),
            (
                "empty key Equal, different value",
                tol("", Equal, "", None),
                Taint::new("foo", "bar", NoSchedule),
                false,
            ),
            (
                "keys are case-sensitive",
                tol("Foo", Exists, "", None),
                Taint::new("foo", "", NoSchedule),
                false,
            ),
        ];
        for (name, toleration, taint, expect) in table {
            assert_eq!(toleration.tolerates(taint), *expect, "{name}");
        }
    }

    #[test]
    fn match_taint_compares_key_and_effect_only() {
        let a = Taint::new("k", "v1", NoSchedule);
        assert!(a.matches(&Taint::new("k", "v2", NoSchedule)));
        assert!(!a.matches(&Taint::new("k", "v1", NoExecute)));
        assert!(!a.matches(&Taint::new("other", "v1", NoSchedule)));
    }

    #[test]
    fn first_untolerated_filters_effects() {
        let taints = [
            Taint::new("soft", "", PreferNoSchedule),
            Taint::new("gpu", "true", NoSchedule),
            Taint::new("evict", "", NoExecute),
        ];
        assert_eq!(first_untolerated(&taints, &[], false), Some(&taints[1]));
        assert_eq!(first_untolerated(&taints, &[], true), Some(&taints[0]));
        let gpu = tol("gpu", Equal, "true", Some(NoSchedule));
        assert_eq!(
            first_untolerated(&taints, std::slice::from_ref(&gpu), false),
            Some(&taints[2])
        );
        let all = [gpu.clone(), tol("evict", Exists, "", None)];
        assert_eq!(first_untolerated(&taints, &all, false), None);
        assert_eq!(first_untolerated(&taints, &all, true), Some(&taints[0]));
        assert_eq!(
            first_untolerated(&taints, &[tol("", Exists, "", None)], true),
            None
        );
        assert_eq!(first_untolerated(&[], &[], true), None);
    }

    #[test]
    fn display_and_parse() {
        let table = [
            (
                Taint::new("nvidia.com/gpu", "true", NoSchedule),
                "nvidia.com/gpu=true:NoSchedule",
            ),
            (
                Taint::new("karpenter.sh/disrupted", "", NoSchedule),
                "karpenter.sh/disrupted:NoSchedule",
            ),
            (
                Taint::new("dedicated", "batch", PreferNoSchedule),
                "dedicated=batch:PreferNoSchedule",
            ),
            (
                Taint::new("node.kubernetes.io/unreachable", "", NoExecute),
                "node.kubernetes.io/unreachable:NoExecute",
            ),
        ];
        for (taint, text) in table {
            assert_eq!(taint.to_string(), text);
            assert_eq!(text.parse::<Taint>().unwrap(), taint);
        }
        // `key=:Effect` is the same as `key:Effect`.
        assert_eq!(
            "k=:NoSchedule".parse::<Taint>().unwrap(),
            Taint::new("k", "", NoSchedule)
        );
    }

    #[test]
    fn parse_errors_name_the_text() {
        for text in [
            "",
            "key",
            "key=value",
            "key:",
            "key:noschedule",
            "key:NoSchedule:NoExecute",
            "=value:NoSchedule",
            ":NoSchedule",
            "k=a=b:NoSchedule",
            "bad key:NoSchedule",
            "k=-bad:NoSchedule",
            "Upper.com/k:NoSchedule",
        ] {
            let err = text.parse::<Taint>().expect_err(text);
            assert_eq!(err.text, text);
            assert!(err.to_string().contains(&format!("{text:?}")), "{err}");
        }
    }

    #[test]
    fn serde_matches_the_kubernetes_shape() {
        let taint: Taint = serde_json::from_str(r#"{"key":"k","effect":"NoExecute"}"#).unwrap();
        assert_eq!(taint, Taint::new("k", "", NoExecute));
        assert_eq!(
            serde_json::to_string(&taint).unwrap(),
            r#"{"key":"k","effect":"NoExecute"}"#
        );
        let toleration: Toleration =
            serde_json::from_str(r#"{"operator":"Exists","tolerationSeconds":30}"#).unwrap();
        assert_eq!(toleration.operator, Exists);
        assert_eq!(toleration.toleration_seconds, Some(30));
        assert!(toleration.tolerates(&taint));
        let default: Toleration = serde_json::from_str(r#"{"key":"k"}"#).unwrap();
        assert_eq!(default.operator, Equal);
        assert!(default.tolerates(&taint));
    }
}
