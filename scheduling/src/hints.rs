//! What a user most likely meant: the well-known label behind a mistyped or restricted key,
//! and the key a requirement that no instance type meets was probably written for.
//!
//! Nothing here changes a decision. Validation still rejects restricted keys and the solver
//! still filters instance types exactly as Karpenter does; these answers only let error
//! messages and warnings name the likely fix (`karpenter.k8s.aws/capacity-type` →
//! `karpenter.sh/capacity-type`, `instance-family In [c m r]` → `instance-category`).

use crate::labels::{self, WELL_KNOWN_LABELS};
use crate::model::InstanceType;
use crate::requirements::{Operator, Requirement, Requirements};
use std::collections::BTreeSet;
use std::sync::Arc;

/// The well-known label a user most likely meant by `key`, or `None` when `key` is
/// well-known itself, a deprecated alias Karpenter rewrites, a label outside the Kubernetes,
/// Karpenter and AWS domains (a custom label is not a mistake), or close to nothing.
///
/// A well-known label with the same name in another domain wins
/// (`karpenter.k8s.aws/capacity-type` → `karpenter.sh/capacity-type`); otherwise the one whose
/// name is closest in edit distance, within one edit per five characters of the name
/// (`topology.kubernetes.io/zones` → `topology.kubernetes.io/zone`), a label of the same
/// domain before another, then in sorted order. Deterministic.
pub fn likely_label(key: &str) -> Option<&'static str> {
    if labels::is_well_known(key) || labels::normalized(key).is_some() {
        return None;
    }
    let (domain, name) = key.split_once('/')?;
    if name.is_empty() || !is_platform_domain(domain) {
        return None;
    }
    let mut same_name = WELL_KNOWN_LABELS.iter().filter(|w| name_of(w) == name);
    if let (Some(only), None) = (same_name.next(), same_name.next()) {
        return Some(only);
    }
    let limit = (name.chars().count() / 5).max(1);
    WELL_KNOWN_LABELS
        .iter()
        .filter_map(|w| {
            let d = edit_distance(name, name_of(w));
            (d <= limit).then_some((d, labels::label_domain(w) != domain, *w))
        })
        .min()
        .map(|(_, _, w)| w)
}

/// Up to `n` well-known labels of `domain` (a sub-domain counts as its parent Karpenter
/// domain), those whose names are closest to `name` first: a short list to offer in place of
/// every well-known label. Empty when the domain has none.
pub fn well_known_in_domain(domain: &str, name: &str, n: usize) -> Vec<&'static str> {
    let parent = labels::RESTRICTED_LABEL_DOMAINS
        .iter()
        .find(|r| {
            domain == **r
                || domain
                    .strip_suffix(**r)
                    .is_some_and(|head| head.ends_with('.'))
        })
        .copied()
        .unwrap_or(domain);
    let mut in_domain: Vec<(usize, &'static str)> = WELL_KNOWN_LABELS
        .iter()
        .filter(|w| labels::label_domain(w) == parent)
        .map(|w| (edit_distance(name, name_of(w)), *w))
        .collect();
    in_domain.sort_unstable();
    in_domain.into_iter().take(n).map(|(_, w)| w).collect()
}

/// A requirement that no instance type of a catalogue can meet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnmetRequirement {
    /// The requirement as Karpenter prints it (`karpenter.k8s.aws/instance-family In [c m r]`).
    pub requirement: String,
    /// The well-known key whose catalogue values include every value the requirement lists,
    /// when there is one: what the requirement was probably meant for.
    pub meant: Option<&'static str>,
}

impl std::fmt::Display for UnmetRequirement {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "requirement {} matches no instance type of the catalogue",
            self.requirement
        )?;
        if let Some(meant) = self.meant {
            write!(
                f,
                "; did you mean {meant}, whose values include all of them?"
            )?;
        }
        Ok(())
    }
}

/// The requirements of `requirements` that filter out every one of `types`, each with the key
/// it was probably meant for.
///
/// A requirement filters a type as the solver's instance-type filter does (Karpenter's
/// `Intersects` on that key: a type that does not define the key is not filtered by it). A
/// key that no type defines is a custom label the nodes will carry, never reported here (see
/// [`likely_label`] for typos of well-known keys). Nothing is reported when `types` is empty.
pub fn unmet_requirements(
    requirements: &Requirements,
    types: &[Arc<InstanceType>],
) -> Vec<UnmetRequirement> {
    requirements
        .iter()
        .filter(|r| {
            let defined = types.iter().any(|t| t.requirements.has(r.key()));
            defined && !types.iter().any(|t| meets(t, r))
        })
        .map(|r| UnmetRequirement {
            requirement: r.to_string(),
            meant: meant_key(r, types),
        })
        .collect()
}

fn meets(t: &InstanceType, r: &Requirement) -> bool {
    let mut single = Requirements::new();
    single.add(r.clone());
    t.requirements.intersects(&single).is_ok()
}

/// The well-known key (other than the requirement's own) whose values across `types` include
/// every value an `In` requirement lists; one of the requirement's domain first, then in
/// sorted order.
fn meant_key(r: &Requirement, types: &[Arc<InstanceType>]) -> Option<&'static str> {
    if r.operator() != Operator::In || r.is_empty() {
        return None;
    }
    let wanted: Vec<&str> = r.values().collect();
    let domain = labels::label_domain(r.key());
    let mut candidates: Vec<(bool, &'static str)> = WELL_KNOWN_LABELS
        .iter()
        .filter(|w| **w != r.key())
        .filter(|w| {
            let offered: BTreeSet<&str> = types
                .iter()
                .filter_map(|t| t.requirements.get(w))
                .filter(|tr| tr.operator() == Operator::In)
                .flat_map(|tr| tr.values())
                .collect();
            wanted.iter().all(|v| offered.contains(v))
        })
        .map(|w| (labels::label_domain(w) != domain, *w))
        .collect();
    candidates.sort_unstable();
    candidates.first().map(|(_, w)| *w)
}

/// The part of a key after its `/` (the whole key when it has none).
fn name_of(key: &str) -> &str {
    key.split_once('/').map_or(key, |(_, name)| name)
}

/// Domains whose labels Kubernetes, Karpenter or the AWS provider define, where a key that is
/// not well-known is more likely a typo than a custom label.
fn is_platform_domain(domain: &str) -> bool {
    ["kubernetes.io", "k8s.io", "k8s.aws", "karpenter.sh"]
        .iter()
        .any(|d| domain == *d || domain.strip_suffix(d).is_some_and(|h| h.ends_with('.')))
}

/// Optimal-string-alignment distance: insertions, deletions, substitutions and adjacent
/// transpositions each cost one.
fn edit_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let mut rows = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for (i, row) in rows.iter_mut().enumerate() {
        row[0] = i;
    }
    for (j, cell) in rows[0].iter_mut().enumerate() {
        *cell = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut d = (rows[i - 1][j] + 1)
                .min(rows[i][j - 1] + 1)
                .min(rows[i - 1][j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                d = d.min(rows[i - 2][j - 2] + 1);
            }
            rows[i][j] = d;
        }
    }
    rows[a.len()][b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Offering;
    use crate::resources::Resources;

    #[test]
    fn likely_labels() {
        let cases = [
            // the same name in another domain
            (
                "karpenter.k8s.aws/capacity-type",
                Some("karpenter.sh/capacity-type"),
            ),
            (
                "karpenter.sh/instance-family",
                Some("karpenter.k8s.aws/instance-family"),
            ),
            ("kubernetes.io/zone", Some("topology.kubernetes.io/zone")),
            (
                "karpenter.k8s.aws/instance-type",
                Some("node.kubernetes.io/instance-type"),
            ),
            // misspellings
            (
                "karpenter.k8s.aws/instance-familly",
                Some("karpenter.k8s.aws/instance-family"),
            ),
            (
                "topology.kubernetes.io/zones",
                Some("topology.kubernetes.io/zone"),
            ),
            (
                "karpenter.sh/capacitytype",
                Some("karpenter.sh/capacity-type"),
            ),
            (
                "karpenter.k8s.aws/instance-catgeory",
                Some("karpenter.k8s.aws/instance-category"),
            ),
            // nothing to suggest
            ("karpenter.sh/custom", None),
            ("kubernetes.io/hostname", None),
            ("example.com/zone", None),
            ("team", None),
            ("topology.kubernetes.io/zone", None),
            ("failure-domain.beta.kubernetes.io/zone", None),
        ];
        for (key, want) in cases {
            assert_eq!(likely_label(key), want, "{key}");
        }
    }

    #[test]
    fn edit_distances() {
        assert_eq!(edit_distance("zone", "zone"), 0);
        assert_eq!(edit_distance("zones", "zone"), 1);
        assert_eq!(edit_distance("catgeory", "category"), 1);
        assert_eq!(edit_distance("", "abc"), 3);
        assert_eq!(edit_distance("kitten", "sitting"), 3);
    }

    #[test]
    fn a_short_list_of_a_domains_labels() {
        assert_eq!(
            well_known_in_domain("karpenter.sh", "custom", 5),
            vec!["karpenter.sh/nodepool", "karpenter.sh/capacity-type"]
        );
        let aws = well_known_in_domain("foo.karpenter.k8s.aws", "instance-famly", 3);
        assert_eq!(aws.len(), 3);
        assert_eq!(aws[0], "karpenter.k8s.aws/instance-family");
        assert!(well_known_in_domain("example.com", "x", 3).is_empty());
    }

    fn instance_type(name: &str, family: &str, category: &str) -> Arc<InstanceType> {
        let mut requirements = Requirements::new();
        for (k, v) in [
            (labels::INSTANCE_TYPE, name),
            (labels::AWS_INSTANCE_FAMILY, family),
            (labels::AWS_INSTANCE_CATEGORY, category),
        ] {
            requirements.add(Requirement::new(k, Operator::In, [v.to_owned()]).unwrap());
        }
        Arc::new(InstanceType {
            devices: Vec::new(),
            name: name.to_owned(),
            requirements,
            capacity: Resources::default(),
            overhead: Default::default(),
            offerings: Vec::<Offering>::new(),
        })
    }

    fn requirements(rs: &[(&str, Operator, &[&str])]) -> Requirements {
        let mut out = Requirements::new();
        for (k, op, vs) in rs {
            out.add(Requirement::new(*k, *op, vs.iter().map(|v| (*v).to_owned())).unwrap());
        }
        out
    }

    #[test]
    fn a_family_requirement_written_with_categories_names_the_category_key() {
        let types = [
            instance_type("m5.large", "m5", "m"),
            instance_type("c6i.large", "c6i", "c"),
            instance_type("r7g.large", "r7g", "r"),
        ];
        let reqs = requirements(&[
            (labels::AWS_INSTANCE_FAMILY, Operator::In, &["m", "c", "r"]),
            ("example.com/team", Operator::In, &["a"]),
            (labels::AWS_INSTANCE_CATEGORY, Operator::In, &["c", "x"]),
        ]);
        let unmet = unmet_requirements(&reqs, &types);
        assert_eq!(
            unmet,
            vec![UnmetRequirement {
                requirement: "karpenter.k8s.aws/instance-family In [c m r]".into(),
                meant: Some(labels::AWS_INSTANCE_CATEGORY),
            }]
        );
        assert_eq!(
            unmet[0].to_string(),
            "requirement karpenter.k8s.aws/instance-family In [c m r] matches no instance \
             type of the catalogue; did you mean karpenter.k8s.aws/instance-category, whose \
             values include all of them?"
        );
        // A value some type offers clears it; so does NotIn, which types without it meet.
        let fine = requirements(&[
            (
                labels::AWS_INSTANCE_FAMILY,
                Operator::In,
                &["m", "c5", "r7g"],
            ),
            (labels::AWS_INSTANCE_CATEGORY, Operator::NotIn, &["m", "c"]),
        ]);
        assert!(unmet_requirements(&fine, &types).is_empty());
        // Nothing the catalogue offers: reported without a guess.
        let none = requirements(&[(labels::AWS_INSTANCE_FAMILY, Operator::In, &["z9"])]);
        assert_eq!(unmet_requirements(&none, &types)[0].meant, None);
        assert!(unmet_requirements(&none, &[]).is_empty());
    }
}
