//! AMI aliases (`al2023@latest`, `bottlerocket@v1.20.0`, …): the public SSM parameters that
//! publish each family's images, and which instance types each image is built for.
//!
//! A family publishes one image per architecture and *variant*: the standard image, an
//! image with the NVIDIA driver for GPU instance types, and an image with the Neuron driver
//! for Inferentia/Trainium instance types. Which variants exist differs per family (Karpenter
//! v1.14's lists):
//!
//! | family | amd64 | arm64 |
//! |---|---|---|
//! | AL2023 | standard, nvidia, neuron (one parameter each) | standard, nvidia |
//! | AL2 | standard; the `-gpu` image serves both nvidia and neuron | standard |
//! | Bottlerocket | standard image also serves neuron; `-nvidia` image | standard; `-nvidia` image |
//! | Windows | one image for every instance type | — |
//!
//! A variant becomes requirements on the image's status entry (see [`AmiVariant::requirements`]),
//! and launches give each instance type the first image whose requirements it meets
//! ([`crate::ami::AmiMatcher`]).

use crate::nodeclass::{
    AMI_FAMILY_AL2, AMI_FAMILY_AL2023, AMI_FAMILY_BOTTLEROCKET, AMI_FAMILY_WINDOWS2019,
    AMI_FAMILY_WINDOWS2022, AMI_FAMILY_WINDOWS2025, Alias, AmiRequirement,
};
use karpenter_scheduling::labels;

/// The alias version that follows the newest image (`recommended`/`latest` parameters).
pub const ALIAS_VERSION_LATEST: &str = "latest";

/// Which accelerator driver an alias image carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum AmiVariant {
    /// No accelerator driver: for instance types with neither GPUs nor Neuron devices.
    Standard,
    /// The NVIDIA driver: for instance types with GPUs.
    Nvidia,
    /// The Neuron driver: for instance types with Inferentia/Trainium accelerators.
    Neuron,
}

impl AmiVariant {
    /// The name SSM parameter paths use (`standard`, `nvidia`, `neuron`).
    pub fn as_str(self) -> &'static str {
        match self {
            AmiVariant::Standard => "standard",
            AmiVariant::Nvidia => "nvidia",
            AmiVariant::Neuron => "neuron",
        }
    }

    /// The instance types the variant is for, as requirements on the instance-type labels:
    /// standard needs both `karpenter.k8s.aws/instance-gpu-count` and
    /// `karpenter.k8s.aws/instance-accelerator-count` absent; nvidia needs the GPU count
    /// present; neuron needs the accelerator count present (Karpenter's definitions).
    pub fn requirements(self) -> Vec<AmiRequirement> {
        let req = |key: &str, operator: &str| AmiRequirement {
            key: key.to_string(),
            operator: operator.to_string(),
            values: Vec::new(),
        };
        match self {
            AmiVariant::Standard => vec![
                req(labels::AWS_INSTANCE_ACCELERATOR_COUNT, "DoesNotExist"),
                req(labels::AWS_INSTANCE_GPU_COUNT, "DoesNotExist"),
            ],
            AmiVariant::Nvidia => vec![req(labels::AWS_INSTANCE_GPU_COUNT, "Exists")],
            AmiVariant::Neuron => vec![req(labels::AWS_INSTANCE_ACCELERATOR_COUNT, "Exists")],
        }
    }
}

/// One SSM parameter an alias reads, the architecture its image is published for, and the
/// variants that image serves. Empty `variants` means every instance type of the
/// architecture (Windows, which publishes no accelerator variants).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AliasParameter {
    /// The parameter name, under the settings' SSM prefix.
    pub path: String,
    /// `amd64` or `arm64`.
    pub architecture: &'static str,
    /// The variants the image serves.
    pub variants: &'static [AmiVariant],
}

const AMD64: &str = labels::ARCHITECTURE_AMD64;
const ARM64: &str = labels::ARCHITECTURE_ARM64;

/// The SSM parameters holding an alias's image ids, in a fixed order (per family, amd64
/// first). `prefix` replaces `/aws/service` (tests point it at a writable path). A pinned
/// version names the exact release (`amazon-eks-node-al2023-x86_64-nvidia-1.33-v20250101`);
/// `latest` reads the `recommended` (Bottlerocket: `latest`) parameter. Bottlerocket versions
/// may be written with a leading `v`, which its parameter names omit. Windows publishes only
/// the newest image, so its parameter ignores the version (validation allows only `latest`).
/// Unknown families (and `Custom`) have no parameters.
pub fn alias_ssm_parameters(
    alias: &Alias,
    kubernetes_version: &str,
    prefix: &str,
) -> Vec<AliasParameter> {
    let k8s = kubernetes_version;
    let latest = alias.version == ALIAS_VERSION_LATEST;
    let v = alias.version.as_str();
    let param = |path: String, architecture, variants| AliasParameter {
        path,
        architecture,
        variants,
    };
    match alias.family.as_str() {
        AMI_FAMILY_AL2023 => {
            use AmiVariant::{Neuron, Nvidia, Standard};
            let published: [(&str, &str, &[AmiVariant]); 2] = [
                ("x86_64", AMD64, &[Standard, Nvidia, Neuron]),
                ("arm64", ARM64, &[Standard, Nvidia]),
            ];
            let mut out = Vec::new();
            for (ec2_arch, arch, variants) in published {
                for variant in variants {
                    let variant_name = variant.as_str();
                    let release = if latest {
                        "recommended".to_string()
                    } else {
                        format!("amazon-eks-node-al2023-{ec2_arch}-{variant_name}-{k8s}-{v}")
                    };
                    out.push(param(
                        format!(
                            "{prefix}/eks/optimized-ami/{k8s}/amazon-linux-2023/{ec2_arch}/{variant_name}/{release}/image_id"
                        ),
                        arch,
                        std::slice::from_ref(variant),
                    ));
                }
            }
            out
        }
        AMI_FAMILY_AL2 => {
            // (path segment, release-name infix, architecture, variants)
            let published: [(&str, &str, &str, &'static [AmiVariant]); 3] = [
                ("amazon-linux-2", "", AMD64, &[AmiVariant::Standard]),
                (
                    "amazon-linux-2-arm64",
                    "arm64-",
                    ARM64,
                    &[AmiVariant::Standard],
                ),
                (
                    "amazon-linux-2-gpu",
                    "gpu-",
                    AMD64,
                    &[AmiVariant::Neuron, AmiVariant::Nvidia],
                ),
            ];
            published
                .into_iter()
                .map(|(segment, infix, arch, variants)| {
                    let release = if latest {
                        "recommended".to_string()
                    } else {
                        format!("amazon-eks-{infix}node-{k8s}-{v}")
                    };
                    param(
                        format!("{prefix}/eks/optimized-ami/{k8s}/{segment}/{release}/image_id"),
                        arch,
                        variants,
                    )
                })
                .collect()
        }
        AMI_FAMILY_BOTTLEROCKET => {
            let version = v.trim_start_matches('v');
            let published: [(&str, &str, &str, &'static [AmiVariant]); 4] = [
                (
                    "",
                    "x86_64",
                    AMD64,
                    &[AmiVariant::Standard, AmiVariant::Neuron],
                ),
                ("", "arm64", ARM64, &[AmiVariant::Standard]),
                ("-nvidia", "x86_64", AMD64, &[AmiVariant::Nvidia]),
                ("-nvidia", "arm64", ARM64, &[AmiVariant::Nvidia]),
            ];
            published
                .into_iter()
                .map(|(flavour, ec2_arch, arch, variants)| {
                    param(
                        format!("{prefix}/bottlerocket/aws-k8s-{k8s}{flavour}/{ec2_arch}/{version}/image_id"),
                        arch,
                        variants,
                    )
                })
                .collect()
        }
        AMI_FAMILY_WINDOWS2019 | AMI_FAMILY_WINDOWS2022 | AMI_FAMILY_WINDOWS2025 => {
            let year = &alias.family["Windows".len()..];
            vec![param(
                format!(
                    "{prefix}/ami-windows-latest/Windows_Server-{year}-English-Core-EKS_Optimized-{k8s}/image_id"
                ),
                AMD64,
                &[],
            )]
        }
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nodeclass::parse_alias;
    use AmiVariant::{Neuron, Nvidia, Standard};

    fn params(alias: &str, prefix: &str) -> Vec<(String, &'static str, Vec<AmiVariant>)> {
        let alias = parse_alias(alias).expect("alias");
        alias_ssm_parameters(&alias, "1.33", prefix)
            .into_iter()
            .map(|p| (p.path, p.architecture, p.variants.to_vec()))
            .collect()
    }

    /// Expected parameters: `base` + each row's path suffix, its architecture and variants.
    fn table(
        base: &str,
        rows: &[(&str, &'static str, &[AmiVariant])],
    ) -> Vec<(String, &'static str, Vec<AmiVariant>)> {
        rows.iter()
            .map(|(suffix, arch, variants)| (format!("{base}{suffix}"), *arch, variants.to_vec()))
            .collect()
    }

    #[test]
    fn al2023_latest_reads_every_variant_per_architecture() {
        assert_eq!(
            params("al2023@latest", "/aws/service"),
            table(
                "/aws/service/eks/optimized-ami/1.33/amazon-linux-2023/",
                &[
                    ("x86_64/standard/recommended/image_id", "amd64", &[Standard]),
                    ("x86_64/nvidia/recommended/image_id", "amd64", &[Nvidia]),
                    ("x86_64/neuron/recommended/image_id", "amd64", &[Neuron]),
                    ("arm64/standard/recommended/image_id", "arm64", &[Standard]),
                    ("arm64/nvidia/recommended/image_id", "arm64", &[Nvidia]),
                ]
            )
        );
    }

    #[test]
    fn al2023_pinned_versions_name_the_release_per_variant() {
        let paths: Vec<String> = params("al2023@v20250101", "/test")
            .into_iter()
            .map(|p| p.0)
            .collect();
        let base = "/test/eks/optimized-ami/1.33/amazon-linux-2023";
        assert_eq!(
            paths,
            [
                format!(
                    "{base}/x86_64/standard/amazon-eks-node-al2023-x86_64-standard-1.33-v20250101/image_id"
                ),
                format!(
                    "{base}/x86_64/nvidia/amazon-eks-node-al2023-x86_64-nvidia-1.33-v20250101/image_id"
                ),
                format!(
                    "{base}/x86_64/neuron/amazon-eks-node-al2023-x86_64-neuron-1.33-v20250101/image_id"
                ),
                format!(
                    "{base}/arm64/standard/amazon-eks-node-al2023-arm64-standard-1.33-v20250101/image_id"
                ),
                format!(
                    "{base}/arm64/nvidia/amazon-eks-node-al2023-arm64-nvidia-1.33-v20250101/image_id"
                ),
            ]
        );
    }

    #[test]
    fn al2_gpu_image_serves_nvidia_and_neuron() {
        assert_eq!(
            params("al2@latest", "/aws/service"),
            table(
                "/aws/service/eks/optimized-ami/1.33/",
                &[
                    ("amazon-linux-2/recommended/image_id", "amd64", &[Standard]),
                    (
                        "amazon-linux-2-arm64/recommended/image_id",
                        "arm64",
                        &[Standard]
                    ),
                    (
                        "amazon-linux-2-gpu/recommended/image_id",
                        "amd64",
                        &[Neuron, Nvidia]
                    ),
                ]
            )
        );
        let pinned: Vec<String> = params("al2@v20240807", "/p")
            .into_iter()
            .map(|p| p.0)
            .collect();
        assert_eq!(
            pinned,
            [
                "/p/eks/optimized-ami/1.33/amazon-linux-2/amazon-eks-node-1.33-v20240807/image_id",
                "/p/eks/optimized-ami/1.33/amazon-linux-2-arm64/amazon-eks-arm64-node-1.33-v20240807/image_id",
                "/p/eks/optimized-ami/1.33/amazon-linux-2-gpu/amazon-eks-gpu-node-1.33-v20240807/image_id",
            ]
        );
    }

    #[test]
    fn bottlerocket_standard_image_serves_neuron_and_nvidia_has_its_own() {
        assert_eq!(
            params("bottlerocket@v1.20.0", "/aws/service"),
            table(
                "/aws/service/bottlerocket/aws-k8s-1.33",
                &[
                    ("/x86_64/1.20.0/image_id", "amd64", &[Standard, Neuron]),
                    ("/arm64/1.20.0/image_id", "arm64", &[Standard]),
                    ("-nvidia/x86_64/1.20.0/image_id", "amd64", &[Nvidia]),
                    ("-nvidia/arm64/1.20.0/image_id", "arm64", &[Nvidia]),
                ]
            )
        );
        // `latest` and an unprefixed version are used as written.
        assert_eq!(
            params("bottlerocket@latest", "/x")[2].0,
            "/x/bottlerocket/aws-k8s-1.33-nvidia/x86_64/latest/image_id"
        );
        assert_eq!(
            params("bottlerocket@1.20.0", "/x")[0].0,
            "/x/bottlerocket/aws-k8s-1.33/x86_64/1.20.0/image_id"
        );
    }

    #[test]
    fn windows_has_one_image_without_variants() {
        assert_eq!(
            params("windows2022@latest", "/aws/service"),
            table(
                "/aws/service/ami-windows-latest/",
                &[(
                    "Windows_Server-2022-English-Core-EKS_Optimized-1.33/image_id",
                    "amd64",
                    &[]
                )]
            )
        );
        assert_eq!(params("windows2025@latest", "/p").len(), 1);
    }

    #[test]
    fn variant_requirements_follow_the_accelerator_labels() {
        let reqs = |v: AmiVariant| -> Vec<String> {
            v.requirements()
                .into_iter()
                .map(|r| format!("{} {} {:?}", r.key, r.operator, r.values))
                .collect()
        };
        assert_eq!(
            reqs(Standard),
            [
                "karpenter.k8s.aws/instance-accelerator-count DoesNotExist []",
                "karpenter.k8s.aws/instance-gpu-count DoesNotExist []",
            ]
        );
        assert_eq!(
            reqs(Nvidia),
            ["karpenter.k8s.aws/instance-gpu-count Exists []"]
        );
        assert_eq!(
            reqs(Neuron),
            ["karpenter.k8s.aws/instance-accelerator-count Exists []"]
        );
    }
}
