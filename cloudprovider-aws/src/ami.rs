//! Which AMIs an EC2NodeClass offers and which one each instance type boots, as Karpenter
//! v1.14 decides both.
//!
//! Every discovered image comes with requirements: its architecture, plus, for alias images,
//! the accelerator variant it was published for ([`crate::alias`]). An image serving several
//! variants (AL2's GPU image serves nvidia and neuron) yields one entry per variant.
//! [`select_amis`] keeps, for each distinct set of requirements, the best image (not
//! deprecated, then newest, then the greatest name) and orders the result newest first; that
//! list is the NodeClass's `status.amis`. At launch, [`AmiMatcher`] gives each instance type
//! the first entry whose requirements it is compatible with, so a GPU type gets the nvidia
//! image, a Neuron type the neuron image and the rest the standard one; a launch makes one
//! launch template per image.

use crate::alias::AmiVariant;
use crate::discovery::ResolvedAmi;
use crate::nodeclass::{AmiRequirement, AmiStatus};
use karpenter_scheduling::labels;
use karpenter_scheduling::model::InstanceType;
use karpenter_scheduling::requirements::{NodeSelectorRequirement, Operator, Requirements};
use std::collections::BTreeMap;
use std::sync::Arc;

/// A discovered image with the requirements of the instance types it serves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AmiCandidate {
    /// The image.
    pub image: ResolvedAmi,
    /// Architecture and, for alias images, variant requirements, in status order.
    pub requirements: Vec<AmiRequirement>,
}

fn architecture_requirement(architecture: &str) -> AmiRequirement {
    AmiRequirement {
        key: labels::ARCH.to_string(),
        operator: Operator::In.as_str().to_string(),
        values: vec![architecture.to_string()],
    }
}

/// Status order: shorter keys first, then by key (upstream's ordering), values sorted.
fn normalized(mut requirements: Vec<AmiRequirement>) -> Vec<AmiRequirement> {
    for r in &mut requirements {
        r.values.sort();
        r.values.dedup();
    }
    requirements.sort_by(|a, b| {
        a.key
            .len()
            .cmp(&b.key.len())
            .then_with(|| a.key.cmp(&b.key))
    });
    requirements
}

impl AmiCandidate {
    /// An image selected by id, name, tags or `ssmParameter`: it serves every instance type
    /// of its architecture.
    pub fn plain(image: ResolvedAmi) -> Self {
        let requirements = vec![architecture_requirement(&image.architecture)];
        Self {
            image,
            requirements,
        }
    }

    /// An alias image: one candidate per variant it serves, each requiring the image's
    /// architecture and the variant's accelerator labels; with no variants (Windows), one
    /// candidate for the whole architecture.
    pub fn for_variants(image: ResolvedAmi, variants: &[AmiVariant]) -> Vec<Self> {
        if variants.is_empty() {
            return vec![Self::plain(image)];
        }
        variants
            .iter()
            .map(|variant| {
                let mut requirements = vec![architecture_requirement(&image.architecture)];
                requirements.extend(variant.requirements());
                Self {
                    image: image.clone(),
                    requirements: normalized(requirements),
                }
            })
            .collect()
    }
}

/// Seconds since the epoch of an EC2 creation date; unparsable or missing dates sort as the
/// oldest (upstream treats a missing date the same way).
fn creation_seconds(date: &str) -> i64 {
    aws_sdk_ec2::primitives::DateTime::from_str(
        date,
        aws_sdk_ec2::primitives::DateTimeFormat::DateTime,
    )
    .map_or(i64::MIN, |t| t.secs())
}

/// Whether `candidate` is a better image than `existing` for the same requirements: not
/// deprecated beats deprecated, then newer beats older, then the greater name wins.
fn better(candidate: &ResolvedAmi, existing: &ResolvedAmi) -> bool {
    if candidate.deprecated != existing.deprecated {
        return !candidate.deprecated;
    }
    let (c, e) = (
        creation_seconds(&candidate.creation_date),
        creation_seconds(&existing.creation_date),
    );
    if c != e {
        return c > e;
    }
    candidate.name > existing.name
}

fn requirements_key(requirements: &[AmiRequirement]) -> String {
    requirements
        .iter()
        .map(|r| format!("{} {} {}", r.key, r.operator, r.values.join(",")))
        .collect::<Vec<_>>()
        .join(";")
}

/// The status AMIs for discovered candidates: for each distinct set of requirements the best
/// image (see the module docs), newest first, ties by image id and then requirements, so the
/// result does not depend on discovery order.
pub fn select_amis(candidates: Vec<AmiCandidate>) -> Vec<AmiStatus> {
    let mut best: BTreeMap<String, AmiCandidate> = BTreeMap::new();
    for candidate in candidates {
        let candidate = AmiCandidate {
            requirements: normalized(candidate.requirements),
            ..candidate
        };
        let key = requirements_key(&candidate.requirements);
        match best.get(&key) {
            Some(existing) if !better(&candidate.image, &existing.image) => {}
            _ => {
                best.insert(key, candidate);
            }
        }
    }
    let mut chosen: Vec<(String, AmiCandidate)> = best.into_iter().collect();
    chosen.sort_by(|(ka, a), (kb, b)| {
        creation_seconds(&b.image.creation_date)
            .cmp(&creation_seconds(&a.image.creation_date))
            .then_with(|| a.image.id.cmp(&b.image.id))
            .then_with(|| ka.cmp(kb))
    });
    chosen
        .into_iter()
        .map(|(_, c)| AmiStatus {
            id: c.image.id,
            name: c.image.name,
            deprecated: c.image.deprecated,
            requirements: c.requirements,
        })
        .collect()
}

fn parse_operator(operator: &str) -> Option<Operator> {
    serde_json::from_value(serde_json::Value::String(operator.to_string())).ok()
}

/// The requirements of one status AMI; `None` when an entry cannot be read (an unknown
/// operator or an invalid value written into the status by hand).
pub fn ami_requirements(ami: &AmiStatus) -> Option<Requirements> {
    let selectors: Option<Vec<NodeSelectorRequirement>> = ami
        .requirements
        .iter()
        .map(|r| {
            Some(NodeSelectorRequirement {
                key: r.key.clone(),
                operator: parse_operator(&r.operator)?,
                values: r.values.clone(),
                min_values: None,
            })
        })
        .collect();
    Requirements::from_node_selector(&selectors?).ok()
}

/// A NodeClass's status AMIs with their requirements parsed once, in status order, for
/// choosing the image of each instance type of a launch.
#[derive(Debug, Clone, Default)]
pub struct AmiMatcher {
    amis: Vec<(String, Requirements)>,
}

impl AmiMatcher {
    /// The matcher for `amis` (a NodeClass's `status.amis`). Entries whose requirements
    /// cannot be read are left out, with a warning: no instance type is sent to an image
    /// whose constraints are unknown.
    pub fn new(amis: &[AmiStatus]) -> Self {
        let amis = amis
            .iter()
            .filter_map(|ami| match ami_requirements(ami) {
                Some(reqs) => Some((ami.id.clone(), reqs)),
                None => {
                    tracing::warn!(
                        ami = %ami.id,
                        "status.amis entry has unreadable requirements; not used for launches"
                    );
                    None
                }
            })
            .collect();
        Self { amis }
    }

    /// Whether there is no usable AMI at all.
    pub fn is_empty(&self) -> bool {
        self.amis.is_empty()
    }

    /// The image `instance_type` boots: the first AMI (status order) whose requirements the
    /// instance type's labels are compatible with; `None` when no AMI serves it (say an arm64
    /// GPU type when the family publishes no arm64 nvidia image).
    pub fn image_for(&self, instance_type: &InstanceType) -> Option<&str> {
        self.amis
            .iter()
            .find(|(_, reqs)| instance_type.requirements.compatible(reqs, false).is_ok())
            .map(|(id, _)| id.as_str())
    }
}

/// The instance types each image would boot, by image id (Karpenter's `MapToInstanceTypes`);
/// types no AMI serves are left out. Each image gets its own launch template.
pub fn map_to_instance_types(
    instance_types: &[Arc<InstanceType>],
    amis: &[AmiStatus],
) -> BTreeMap<String, Vec<Arc<InstanceType>>> {
    let matcher = AmiMatcher::new(amis);
    let mut out: BTreeMap<String, Vec<Arc<InstanceType>>> = BTreeMap::new();
    for it in instance_types {
        if let Some(image) = matcher.image_for(it) {
            out.entry(image.to_string()).or_default().push(it.clone());
        }
    }
    out
}

/// Status AMIs built the way discovery builds them, for tests in this crate.
#[cfg(test)]
pub(crate) mod test_support {
    use super::*;
    use crate::alias::{AliasParameter, alias_ssm_parameters};
    use crate::nodeclass::parse_alias;

    /// The status of `alias` when every parameter exists and names the image `id_of` gives
    /// it, all created at the same time.
    pub(crate) fn alias_status(
        alias: &str,
        id_of: impl Fn(&AliasParameter) -> String,
    ) -> Vec<AmiStatus> {
        let alias = parse_alias(alias).expect("alias");
        let mut candidates = Vec::new();
        for p in alias_ssm_parameters(&alias, "1.32", "/aws/service") {
            let image = ResolvedAmi {
                id: id_of(&p),
                name: String::new(),
                architecture: p.architecture.to_string(),
                creation_date: "2025-01-01T00:00:00Z".into(),
                deprecated: false,
            };
            candidates.extend(AmiCandidate::for_variants(image, p.variants));
        }
        select_amis(candidates)
    }

    /// `al2023@latest` with one image per (architecture, variant): `ami-<arch>-<variant>`.
    pub(crate) fn al2023_status() -> Vec<AmiStatus> {
        alias_status("al2023@latest", |p| {
            format!("ami-{}-{}", p.architecture, p.variants[0].as_str())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::test_support::{al2023_status, alias_status};
    use super::*;
    use crate::alias::AmiVariant;

    fn image(id: &str, arch: &str, created: &str, deprecated: bool) -> ResolvedAmi {
        ResolvedAmi {
            id: id.into(),
            name: format!("name-{id}"),
            architecture: arch.into(),
            creation_date: created.into(),
            deprecated,
        }
    }

    /// The catalogue types `names`, mapped to `status`'s images: image id → type names.
    fn mapped_names(names: &[&str], status: &[AmiStatus]) -> BTreeMap<String, Vec<String>> {
        let types: Vec<Arc<InstanceType>> = names.iter().map(|n| catalogue_type(n)).collect();
        map_to_instance_types(&types, status)
            .into_iter()
            .map(|(id, its)| (id, its.iter().map(|it| it.name.clone()).collect()))
            .collect()
    }

    fn catalogue_type(name: &str) -> Arc<InstanceType> {
        karpenter_catalog::default_instance_types()
            .iter()
            .find(|it| it.name == name)
            .unwrap_or_else(|| panic!("{name} is in the catalogue"))
            .clone()
    }

    #[test]
    fn every_al2023_variant_is_a_status_entry_with_its_requirements() {
        let status = al2023_status();
        assert_eq!(status.len(), 5);
        let nvidia = status
            .iter()
            .find(|a| a.id == "ami-amd64-nvidia")
            .expect("nvidia entry");
        let reqs: Vec<(&str, &str, Vec<String>)> = nvidia
            .requirements
            .iter()
            .map(|r| (r.key.as_str(), r.operator.as_str(), r.values.clone()))
            .collect();
        assert_eq!(
            reqs,
            [
                ("kubernetes.io/arch", "In", vec!["amd64".to_string()]),
                ("karpenter.k8s.aws/instance-gpu-count", "Exists", vec![]),
            ]
        );
        let standard = status
            .iter()
            .find(|a| a.id == "ami-arm64-standard")
            .expect("standard entry");
        assert_eq!(
            standard
                .requirements
                .iter()
                .map(|r| r.key.as_str())
                .collect::<Vec<_>>(),
            [
                "kubernetes.io/arch",
                "karpenter.k8s.aws/instance-gpu-count",
                "karpenter.k8s.aws/instance-accelerator-count",
            ]
        );
    }

    #[test]
    fn catalogue_types_get_the_variant_their_accelerators_need() {
        let matcher = AmiMatcher::new(&al2023_status());
        for (name, want) in [
            ("m5.large", "ami-amd64-standard"),
            ("m6g.large", "ami-arm64-standard"),
            ("g4dn.xlarge", "ami-amd64-nvidia"),
            ("p4d.24xlarge", "ami-amd64-nvidia"),
            // Fractional GPU: EC2 reports 0 whole GPUs but the GPU labels are present.
            ("g6f.large", "ami-amd64-nvidia"),
            ("g5g.xlarge", "ami-arm64-nvidia"),
            ("inf1.xlarge", "ami-amd64-neuron"),
            ("inf2.xlarge", "ami-amd64-neuron"),
            ("trn1.2xlarge", "ami-amd64-neuron"),
        ] {
            assert_eq!(
                matcher.image_for(&catalogue_type(name)),
                Some(want),
                "{name}"
            );
        }
    }

    #[test]
    fn types_without_a_published_variant_get_no_image() {
        // Only the standard images resolved (say the accelerator parameters are missing in
        // this region): accelerated types have no image rather than a driverless one.
        let status: Vec<AmiStatus> = al2023_status()
            .into_iter()
            .filter(|a| a.id.ends_with("-standard"))
            .collect();
        assert_eq!(
            mapped_names(
                &["m5.large", "g4dn.xlarge", "inf1.xlarge", "m6g.large"],
                &status
            ),
            BTreeMap::from([
                (
                    "ami-amd64-standard".to_string(),
                    vec!["m5.large".to_string()]
                ),
                (
                    "ami-arm64-standard".to_string(),
                    vec!["m6g.large".to_string()]
                ),
            ])
        );
    }

    #[test]
    fn al2_gpu_image_serves_gpu_and_neuron_types() {
        let status = alias_status("al2@latest", |p| {
            if p.variants.contains(&AmiVariant::Nvidia) {
                "ami-gpu".to_string()
            } else {
                format!("ami-{}", p.architecture)
            }
        });
        // amd64 standard, arm64 standard, and the GPU image twice (nvidia, neuron).
        assert_eq!(status.len(), 4);
        let names = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            mapped_names(
                &["g4dn.xlarge", "inf2.xlarge", "c5.large", "c6g.large"],
                &status
            ),
            BTreeMap::from([
                ("ami-amd64".to_string(), names(&["c5.large"])),
                ("ami-arm64".to_string(), names(&["c6g.large"])),
                (
                    "ami-gpu".to_string(),
                    names(&["g4dn.xlarge", "inf2.xlarge"])
                ),
            ])
        );
    }

    #[test]
    fn windows_and_plain_images_serve_every_type_of_their_architecture() {
        let status = select_amis(
            AmiCandidate::for_variants(
                image("ami-win", "amd64", "2025-01-01T00:00:00Z", false),
                &[],
            )
            .into_iter()
            .chain([AmiCandidate::plain(image(
                "ami-arm",
                "arm64",
                "2025-01-01T00:00:00Z",
                false,
            ))])
            .collect(),
        );
        let matcher = AmiMatcher::new(&status);
        assert_eq!(
            matcher.image_for(&catalogue_type("g4dn.xlarge")),
            Some("ami-win")
        );
        assert_eq!(
            matcher.image_for(&catalogue_type("m5.large")),
            Some("ami-win")
        );
        assert_eq!(
            matcher.image_for(&catalogue_type("g5g.xlarge")),
            Some("ami-arm")
        );
    }

    #[test]
    fn one_image_per_requirement_set_preferring_current_then_newest_then_name() {
        let status = select_amis(vec![
            AmiCandidate::plain(image("ami-old", "amd64", "2024-01-01T00:00:00Z", false)),
            AmiCandidate::plain(image("ami-newdep", "amd64", "2025-06-01T00:00:00Z", true)),
            AmiCandidate::plain(image("ami-new", "amd64", "2025-01-01T00:00:00.000Z", false)),
            AmiCandidate::plain(image("ami-armdep", "arm64", "2025-01-01T00:00:00Z", true)),
            AmiCandidate::plain(image(
                "ami-armolddep",
                "arm64",
                "2023-01-01T00:00:00Z",
                true,
            )),
            // Same date as ami-new: the greater name wins; ami-new's is "name-ami-new".
            AmiCandidate::plain(image("ami-a", "amd64", "2025-01-01T00:00:00Z", false)),
        ]);
        let ids: Vec<(&str, bool)> = status
            .iter()
            .map(|a| (a.id.as_str(), a.deprecated))
            .collect();
        // Newest first: both chosen images are from 2025-01-01, ties by id.
        assert_eq!(ids, [("ami-armdep", true), ("ami-new", false)]);
    }

    #[test]
    fn status_entries_written_by_hand_are_read_or_skipped() {
        let ok = AmiStatus {
            id: "ami-1".into(),
            requirements: vec![AmiRequirement {
                key: labels::AWS_INSTANCE_GPU_COUNT.into(),
                operator: "Exists".into(),
                values: vec![],
            }],
            ..Default::default()
        };
        let bad = AmiStatus {
            id: "ami-2".into(),
            requirements: vec![AmiRequirement {
                key: labels::ARCH.into(),
                operator: "Near".into(),
                values: vec!["amd64".into()],
            }],
            ..Default::default()
        };
        assert!(ami_requirements(&ok).is_some());
        assert!(ami_requirements(&bad).is_none());
        let matcher = AmiMatcher::new(&[bad, ok]);
        assert_eq!(
            matcher.image_for(&catalogue_type("g4dn.xlarge")),
            Some("ami-1")
        );
        assert_eq!(matcher.image_for(&catalogue_type("m5.large")), None);
        // An entry with no requirements (older status) serves everything.
        let any = AmiMatcher::new(&[AmiStatus {
            id: "ami-any".into(),
            ..Default::default()
        }]);
        assert_eq!(any.image_for(&catalogue_type("m6g.large")), Some("ami-any"));
    }
}
