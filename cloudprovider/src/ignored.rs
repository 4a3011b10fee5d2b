//! Fields karpenter-rs accepts, because Karpenter's API has them, but does not act on (yet).
//! Accepting a user's YAML and then behaving differently from Karpenter without a word is the
//! worst kind of incompatibility, so every such field is named: callers log it and publish it
//! as an event when an object is admitted or the controller starts.

use crate::v1::NodePool;
use std::collections::BTreeMap;
use std::fmt;

/// One field set on an object that karpenter-rs does not act on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IgnoredField {
    /// JSON path of the field (`spec.replicas`).
    pub path: String,
    /// What karpenter-rs does instead, for a person to read.
    pub why: String,
}

impl fmt::Display for IgnoredField {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} is not acted on: {}", self.path, self.why)
    }
}

/// The event reason under which ignored fields are published.
pub const EVENT_REASON: &str = "IgnoredField";

/// The generation each object's ignored fields were last told for: a controller tells them
/// once per object generation, so a steady state does not repeat them every pass.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ToldGenerations {
    told: BTreeMap<(String, String), Option<i64>>,
}

impl ToldGenerations {
    /// Whether the ignored fields of the `kind` object `name` at `generation` are yet to be
    /// told; from this call on they count as told.
    pub fn first_time(&mut self, kind: &str, name: &str, generation: Option<i64>) -> bool {
        let key = (kind.to_owned(), name.to_owned());
        self.told.insert(key, generation) != Some(generation)
    }
}

/// Karpenter's default for the `StaticCapacity` feature gate (v1.14): off.
pub const STATIC_CAPACITY_DEFAULT: bool = false;

impl NodePool {
    /// The fields of this pool karpenter-rs does not act on; empty when it honours all of
    /// them. `static_capacity` is the `StaticCapacity` feature gate: with it on, static pools
    /// (`spec.replicas`) are kept at their size; with it off, as in Karpenter, `replicas`
    /// creates no nodes.
    pub fn ignored_fields(&self, static_capacity: bool) -> Vec<IgnoredField> {
        let mut ignored = Vec::new();
        if let Some(replicas) = self.spec.replicas.filter(|_| !static_capacity) {
            ignored.push(IgnoredField {
                path: "spec.replicas".into(),
                why: format!(
                    "the StaticCapacity feature gate is off (its default, as in Karpenter): no \
                     {replicas} node(s) are created or kept for this pool; as in Karpenter, it \
                     takes no pending pods and its nodes are not consolidated"
                ),
            });
        }
        ignored
    }
}

/// One warning line per ignored field of each pool, `NodePool <name>: <field> is not acted
/// on: <why>`, in the pools' order, with the `StaticCapacity` gate as given.
pub fn node_pool_warnings<'a>(
    pools: impl IntoIterator<Item = &'a NodePool>,
    static_capacity: bool,
) -> Vec<String> {
    pools
        .into_iter()
        .flat_map(|p| {
            p.ignored_fields(static_capacity)
                .into_iter()
                .map(move |f| format!("NodePool {}: {f}", p.name()))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ignored_fields_are_told_once_per_generation() {
        let mut told = ToldGenerations::default();
        assert!(told.first_time("NodePool", "a", Some(1)));
        assert!(!told.first_time("NodePool", "a", Some(1)));
        assert!(told.first_time("NodeClaim", "a", Some(1)), "another kind");
        assert!(told.first_time("NodePool", "b", Some(1)), "another object");
        assert!(
            told.first_time("NodePool", "a", Some(2)),
            "a new generation"
        );
        assert!(!told.first_time("NodePool", "a", Some(2)));
        assert!(told.first_time("Pod", "p", None));
        assert!(!told.first_time("Pod", "p", None));
    }

    fn pool(extra: serde_json::Value) -> NodePool {
        let mut v = serde_json::json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodePool",
            "metadata": {"name": "p"},
            "spec": {"template": {"spec": {
                "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                "requirements": []}}}
        });
        if let (Some(spec), Some(extra)) = (v["spec"].as_object_mut(), extra.as_object()) {
            spec.extend(extra.clone());
        }
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn replicas_is_named_only_while_the_static_capacity_gate_is_off() {
        assert!(pool(serde_json::json!({})).ignored_fields(false).is_empty());
        let ignored = pool(serde_json::json!({"replicas": 3})).ignored_fields(false);
        assert_eq!(ignored.len(), 1);
        assert_eq!(ignored[0].path, "spec.replicas");
        assert!(
            ignored[0].to_string().starts_with(
                "spec.replicas is not acted on: the StaticCapacity feature gate is off"
            )
        );
        assert!(
            pool(serde_json::json!({"replicas": 3}))
                .ignored_fields(true)
                .is_empty()
        );
        let pools = [
            pool(serde_json::json!({})),
            pool(serde_json::json!({"replicas": 3})),
        ];
        let warnings = node_pool_warnings(&pools, STATIC_CAPACITY_DEFAULT);
        assert_eq!(warnings.len(), 1);
        assert!(warnings[0].starts_with("NodePool p: spec.replicas is not acted on"));
        assert!(node_pool_warnings(&pools, true).is_empty());
    }
}
