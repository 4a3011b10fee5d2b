//! The `requirements` target: node selector requirements (with Karpenter's Gte, Lte and
//! minValues) and the algebra built on them.

use super::Bytes;
use crate::labels;
use crate::requirements::{NodeSelectorRequirement, Operator, Requirements};
use std::collections::BTreeMap;

/// Keys that collide on purpose: an alias and its target, a restricted key, a numeric one,
/// the empty key.
pub(super) const KEYS: &[&str] = &[
    labels::ZONE,
    "failure-domain.beta.kubernetes.io/zone",
    labels::CAPACITY_TYPE,
    labels::AWS_INSTANCE_CPU,
    labels::HOSTNAME,
    "app",
    "",
];

/// Values around the integer edge cases the bounds parse.
pub(super) const VALUES: &[&str] = &[
    "a",
    "b",
    "0",
    "1",
    "2",
    "-1",
    "10",
    "01",
    "+5",
    " 3",
    "9223372036854775807",
    "-9223372036854775808",
    "9223372036854775808",
    "",
];

/// Every operator, Karpenter's Gte and Lte included.
pub const OPERATORS: &[Operator] = &[
    Operator::In,
    Operator::NotIn,
    Operator::Exists,
    Operator::DoesNotExist,
    Operator::Gt,
    Operator::Lt,
    Operator::Gte,
    Operator::Lte,
];

/// Builds two requirement lists and a label set from `data`'s bytes and checks
/// [`check_requirements`]; with the `k8s` feature, the input is also decoded as the JSON a
/// manifest holds (Karpenter's form with Gte/Lte and minValues, and core/v1's) and checked
/// the same way.
pub fn requirements(data: &[u8]) {
    let mut bytes = Bytes::new(data);
    let a = requirement_list(&mut bytes);
    let b = requirement_list(&mut bytes);
    let labels = label_set(&mut bytes);
    check_requirements(&a, &b, &labels);
    #[cfg(feature = "k8s")]
    json::requirements(data);
}

fn requirement_list(bytes: &mut Bytes<'_>) -> Vec<NodeSelectorRequirement> {
    (0..bytes.below(6))
        .map(|_| {
            let key = bytes.pick(KEYS).to_owned();
            let operator = bytes.pick(OPERATORS);
            let values = (0..bytes.below(4))
                .map(|_| bytes.pick(VALUES).to_owned())
                .collect();
            let min_values = match bytes.below(6) {
                0 => Some(0),
                1 => Some(1),
                2 => Some(u32::MAX),
                _ => None,
            };
            NodeSelectorRequirement {
                key,
                operator,
                values,
                min_values,
            }
        })
        .collect()
}

pub(super) fn label_set(bytes: &mut Bytes<'_>) -> BTreeMap<String, String> {
    (0..bytes.below(KEYS.len() + 1))
        .map(|_| (bytes.pick(KEYS).to_owned(), bytes.pick(VALUES).to_owned()))
        .collect()
}

/// What must hold for any two requirement lists and labels, when the lists are valid:
///
/// - the manifest form round-trips: `from_node_selector(r.to_node_selector()) == r`;
/// - `has_intersection` agrees with `intersection(..).is_empty()`, and `intersects` is
///   symmetric;
/// - on labels that define every key involved, combining two sets (`add_all`) matches exactly
///   the labels both sets match;
/// - a representative value (`any`, `single_valued_labels`) is allowed by its requirement;
/// - labels with no alias keys satisfy the requirements made from them.
///
/// Invalid lists must be rejected with an error, not a panic.
pub fn check_requirements(
    a: &[NodeSelectorRequirement],
    b: &[NodeSelectorRequirement],
    labels: &BTreeMap<String, String>,
) {
    let (Ok(ra), Ok(rb)) = (
        Requirements::from_node_selector(a),
        Requirements::from_node_selector(b),
    ) else {
        return;
    };
    for r in [&ra, &rb] {
        check_one(r);
        let _ = r.matches_labels(labels);
    }
    for key in ra.keys() {
        let Some(y) = rb.get(key) else { continue };
        let x = ra.get(key).expect("a listed key");
        let meet = x.intersection(y);
        assert_eq!(
            x.has_intersection(y),
            !meet.is_empty(),
            "has_intersection disagrees with intersection: {x} / {y} -> {meet}"
        );
        assert_eq!(x.has_intersection(y), y.has_intersection(x), "{x} / {y}");
    }
    assert_eq!(
        ra.intersects(&rb).is_ok(),
        rb.intersects(&ra).is_ok(),
        "intersects is not symmetric: [{ra}] / [{rb}]"
    );
    for allow in [false, true] {
        let _ = ra.compatible(&rb, allow).map_err(|e| e.to_string());
    }
    let mut both = ra.clone();
    both.add_all(&rb);
    check_one(&both);
    if ra.keys().chain(rb.keys()).all(|k| labels.contains_key(k)) {
        assert_eq!(
            both.matches_labels(labels),
            ra.matches_labels(labels) && rb.matches_labels(labels),
            "[{ra}] and [{rb}] combine to [{both}], which disagrees on {labels:?}"
        );
    }
    if labels.keys().all(|k| labels::normalized(k).is_none()) {
        let own = Requirements::from_labels(labels);
        assert!(own.matches_labels(labels), "{labels:?} fail [{own}]");
        check_one(&own);
    }
}

/// Properties of one valid set.
fn check_one(r: &Requirements) {
    let manifest = r.to_node_selector();
    let back = Requirements::from_node_selector(&manifest)
        .unwrap_or_else(|e| panic!("[{r}] writes {manifest:?}, which is rejected: {e}"));
    assert_eq!(&back, r, "[{r}] does not round-trip through {manifest:?}");
    let _ = (r.to_string(), r.has_min_values());
    for req in r {
        let _ = (req.to_string(), req.to_node_selector(), req.len());
        if let Some(v) = req.any() {
            assert!(req.has(v), "{req}: its representative {v:?} is not allowed");
        }
    }
    for (key, value) in r.single_valued_labels() {
        assert!(
            r.get(&key).is_some_and(|req| req.has(&value)),
            "{key}={value}"
        );
    }
}

/// The manifest forms, decoded from JSON.
#[cfg(feature = "k8s")]
mod json {
    use super::check_requirements;
    use crate::k8s::{Ctx, node_selector_requirements};
    use crate::requirements::{NodeSelectorRequirement, Requirements};
    use k8s_openapi::api::core::v1 as core;
    use k8s_openapi::serde_json;
    use std::collections::BTreeMap;

    /// `data` as a list of Karpenter requirements and as core/v1 ones (whose operators the
    /// conversion restricts); decoding the list straight into [`Requirements`] must agree
    /// with converting it, and a valid set must survive a JSON round trip.
    pub(super) fn requirements(data: &[u8]) {
        let Ok(value) = serde_json::from_slice::<serde_json::Value>(data) else {
            return;
        };
        let no_labels = BTreeMap::new();
        if let Ok(list) = serde_json::from_value::<Vec<NodeSelectorRequirement>>(value.clone()) {
            let direct = serde_json::from_value::<Requirements>(value.clone());
            let converted = Requirements::from_node_selector(&list);
            assert_eq!(direct.as_ref().ok(), converted.as_ref().ok(), "{value}");
            if let Ok(r) = converted {
                let text = serde_json::to_string(&r).expect("requirements serialise");
                let back: Requirements = serde_json::from_str(&text)
                    .unwrap_or_else(|e| panic!("[{r}] serialises as {text}, rejected: {e}"));
                assert_eq!(back, r, "{text}");
            }
            check_requirements(&list, &list, &no_labels);
        }
        if let Ok(list) = serde_json::from_value::<Vec<core::NodeSelectorRequirement>>(value) {
            let ctx = Ctx::new("Pod", "fuzz/pod");
            if let Ok(list) = node_selector_requirements(&ctx, "nodeAffinity", Some(&list)) {
                check_requirements(&list, &[], &no_labels);
            }
        }
    }
}
