//! The NodePool template hash (`karpenter.sh/nodepool-hash`), used for static drift: a
//! NodeClaim whose recorded hash differs from its pool's current hash has drifted.
//!
//! Karpenter computes it with `hashstructure` v2 (`FormatV2`, FNV-1a 64, options
//! `SlicesAsSets`, `IgnoreZeroValue`, `ZeroNil`) over `spec.template`, skipping fields tagged
//! `hash:"ignore"`. This module walks the same Go field names in the same order with the same
//! mixing rules, so a template hashes to the same decimal string as upstream's:
//!
//! - included: template labels and annotations, taints and startup taints (as sets),
//!   `nodeClassRef` (kind, name, group), `terminationGracePeriod`, `expireAfter`;
//! - excluded: requirements (upstream: `hash:"ignore"`; requirement changes are detected by
//!   the dynamic drift check instead), the raw text of durations (only their length counts,
//!   so `60m` and `1h` hash alike), every disruption setting, limits and weight;
//! - zero values are skipped, so an absent field and an empty one hash alike. Go would
//!   distinguish an explicitly empty map/list (`labels: {}`) from an absent one; we cannot,
//!   and treat both as absent. A taint's `timeAdded` is not hashed (it is never set in a
//!   template).

use crate::v1::{NodeClaimTemplate, NodePool, Taint};
use std::collections::BTreeMap;

/// The hash algorithm version written to `karpenter.sh/nodepool-hash-version`; NodeClaims
/// carrying another version are re-hashed instead of being marked drifted.
pub const NODEPOOL_HASH_VERSION: &str = "v3";

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;

fn fnv(bytes: &[u8]) -> u64 {
    bytes.iter().fold(FNV_OFFSET, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(FNV_PRIME)
    })
}

fn hash_str(s: &str) -> u64 {
    fnv(s.as_bytes())
}

fn hash_i64(v: i64) -> u64 {
    fnv(&v.to_le_bytes())
}

/// Mixes two hashes in order (`hashUpdateOrdered`).
fn ordered(a: u64, b: u64) -> u64 {
    let mut buf = [0u8; 16];
    buf[..8].copy_from_slice(&a.to_le_bytes());
    buf[8..].copy_from_slice(&b.to_le_bytes());
    fnv(&buf)
}

/// Hardens an XOR accumulator (`hashFinishUnordered`).
fn finish(a: u64) -> u64 {
    fnv(&a.to_le_bytes())
}

/// A struct: its type name, then each non-zero field mixed in by XOR and hardened after each
/// one, exactly as the Go walker does (zero fields are skipped entirely, hardening included).
struct StructHasher(u64);

impl StructHasher {
    fn new(type_name: &str) -> Self {
        Self(hash_str(type_name))
    }

    fn field(&mut self, name: &str, value: Option<u64>) {
        if let Some(v) = value {
            self.0 = finish(self.0 ^ ordered(hash_str(name), v));
        }
    }

    fn done(self) -> u64 {
        self.0
    }
}

fn non_empty_str(s: &str) -> Option<u64> {
    (!s.is_empty()).then(|| hash_str(s))
}

fn map_hash(m: &BTreeMap<String, String>) -> Option<u64> {
    if m.is_empty() {
        return None;
    }
    let acc = m
        .iter()
        .fold(0u64, |acc, (k, v)| acc ^ ordered(hash_str(k), hash_str(v)));
    Some(finish(acc))
}

fn taint_hash(t: &Taint) -> u64 {
    let mut s = StructHasher::new("Taint");
    s.field("Key", non_empty_str(&t.key));
    s.field("Value", non_empty_str(&t.value));
    s.field("Effect", Some(hash_str(t.effect.as_str())));
    s.done()
}

/// Slices are sets (`SlicesAsSets`): XOR of the elements, not hardened (only `hash:"set"`
/// tagged slices are).
fn taints_hash(ts: &[Taint]) -> Option<u64> {
    if ts.is_empty() {
        return None;
    }
    Some(ts.iter().fold(0u64, |acc, t| acc ^ taint_hash(t)))
}

/// `metav1.Duration` / `time.Duration` wrapped in a struct named `type_name` with one field
/// `Duration`.
fn duration_struct(type_name: &str, nanos: i64) -> u64 {
    let mut s = StructHasher::new(type_name);
    s.field("Duration", (nanos != 0).then(|| hash_i64(nanos)));
    s.done()
}

/// The template hash as a decimal string (Karpenter's `NodePool.Hash()`).
pub fn template_hash(template: &NodeClaimTemplate) -> String {
    let meta = &template.metadata;
    let meta_hash = {
        let labels = map_hash(&meta.labels);
        let annotations = map_hash(&meta.annotations);
        (labels.is_some() || annotations.is_some()).then(|| {
            let mut s = StructHasher::new("ObjectMeta");
            s.field("Labels", labels);
            s.field("Annotations", annotations);
            s.done()
        })
    };
    let spec = &template.spec;
    let spec_hash = {
        let mut s = StructHasher::new("NodeClaimTemplateSpec");
        s.field("Taints", taints_hash(&spec.taints));
        s.field("StartupTaints", taints_hash(&spec.startup_taints));
        // Requirements: hash:"ignore".
        let r = &spec.node_class_ref;
        let mut ncr = StructHasher::new("NodeClassReference");
        ncr.field("Kind", non_empty_str(&r.kind));
        ncr.field("Name", non_empty_str(&r.name));
        ncr.field("Group", non_empty_str(&r.group));
        // The reference is a non-nil pointer in any admitted object.
        s.field("NodeClassRef", Some(ncr.done()));
        s.field(
            "TerminationGracePeriod",
            spec.termination_grace_period
                .as_ref()
                .map(|d| duration_struct("Duration", d.nanos())),
        );
        // `Never` leaves both the pointer and the raw bytes nil: the zero value, skipped.
        // A set duration is non-zero even when it is 0s, since the pointer is set.
        s.field(
            "ExpireAfter",
            spec.expire_after.duration().map(|d| {
                let mut n = StructHasher::new("NillableDuration");
                n.field("Duration", Some(hash_i64(d.nanos())));
                n.done()
            }),
        );
        s.done()
    };
    let mut t = StructHasher::new("NodeClaimTemplate");
    t.field("ObjectMeta", meta_hash);
    t.field("Spec", Some(spec_hash));
    t.done().to_string()
}

impl NodePool {
    /// The template hash recorded in `karpenter.sh/nodepool-hash` (see [`template_hash`]).
    pub fn hash(&self) -> String {
        template_hash(&self.spec.template)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::duration::{Duration, NillableDuration};
    use crate::v1::{NodeSelectorOperator, NodeSelectorRequirementWithMinValues, TaintEffect};

    fn template() -> NodeClaimTemplate {
        let mut t = NodeClaimTemplate::default();
        t.spec.node_class_ref.group = "karpenter.k8s.aws".into();
        t.spec.node_class_ref.kind = "EC2NodeClass".into();
        t.spec.node_class_ref.name = "default".into();
        t.metadata.labels.insert("team".into(), "a".into());
        t.spec
            .taints
            .push(Taint::new("dedicated", "gpu", TaintEffect::NoSchedule));
        t.spec
            .taints
            .push(Taint::new("example.com/x", "", TaintEffect::NoExecute));
        t
    }

    #[test]
    fn fnv_matches_reference_vectors() {
        assert_eq!(fnv(b""), 0xcbf29ce484222325);
        assert_eq!(fnv(b"a"), 0xaf63dc4c8601ec8c);
        assert_eq!(fnv(b"foobar"), 0x85944171f73967e8);
    }

    #[test]
    fn deterministic_and_decimal() {
        let a = template_hash(&template());
        assert_eq!(a, template_hash(&template()));
        assert!(a.parse::<u64>().is_ok(), "{a}");
    }

    #[test]
    fn requirements_and_duration_spelling_do_not_count() {
        let base = template_hash(&template());
        let mut t = template();
        t.spec
            .requirements
            .push(NodeSelectorRequirementWithMinValues::new(
                "kubernetes.io/arch",
                NodeSelectorOperator::In,
                ["arm64"],
            ));
        assert_eq!(template_hash(&t), base);
        t.spec.expire_after = NillableDuration::of(Duration::parse("43200m").unwrap());
        assert_eq!(
            template_hash(&t),
            base,
            "720h and 43200m are the same duration"
        );
    }

    #[test]
    fn taints_are_a_set_and_maps_are_unordered() {
        let base = template_hash(&template());
        let mut t = template();
        t.spec.taints.reverse();
        assert_eq!(template_hash(&t), base);
    }

    #[test]
    fn drift_fields_change_the_hash() {
        let base = template_hash(&template());
        type Change = Box<dyn Fn(&mut NodeClaimTemplate)>;
        let changes: Vec<Change> = vec![
            Box::new(|t| {
                t.metadata.labels.insert("team".into(), "b".into());
            }),
            Box::new(|t| {
                t.metadata.annotations.insert("a".into(), "b".into());
            }),
            Box::new(|t| t.spec.taints.pop().map(drop).unwrap_or(())),
            Box::new(|t| {
                t.spec
                    .startup_taints
                    .push(Taint::new("s", "", TaintEffect::NoSchedule))
            }),
            Box::new(|t| t.spec.node_class_ref.name = "other".into()),
            Box::new(|t| t.spec.expire_after = NillableDuration::never()),
            Box::new(|t| {
                t.spec.expire_after = NillableDuration::of(Duration::parse("24h").unwrap())
            }),
            Box::new(|t| t.spec.termination_grace_period = Some(Duration::parse("1h").unwrap())),
        ];
        for (i, change) in changes.iter().enumerate() {
            let mut t = template();
            change(&mut t);
            assert_ne!(template_hash(&t), base, "change {i} must alter the hash");
        }
    }

    #[test]
    fn struct_hashing_skips_zero_fields_entirely() {
        // A struct with only zero fields hashes to its type name alone.
        assert_eq!(duration_struct("Duration", 0), hash_str("Duration"));
        assert_ne!(duration_struct("Duration", 1), hash_str("Duration"));
    }
}
