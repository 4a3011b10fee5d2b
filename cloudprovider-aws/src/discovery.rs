//! Resolves an EC2NodeClass's selector terms against EC2 and SSM: subnets, security groups
//! and AMIs (by alias through the public SSM parameters, or by id/name/owner/tags/
//! ssmParameter). Results are cached per selector for [`AwsSettings::discovery_ttl`], so the
//! NodeClass controller can refresh them periodically without hammering the APIs.

use crate::cache::{Clock, TtlCache};
use crate::error::AwsError;
use crate::nodeclass::{
    AMI_FAMILY_AL2, AMI_FAMILY_AL2023, AMI_FAMILY_BOTTLEROCKET, AMI_FAMILY_WINDOWS2019,
    AMI_FAMILY_WINDOWS2022, AMI_FAMILY_WINDOWS2025, Alias, AmiRequirement, AmiSelectorTerm,
    AmiStatus, SecurityGroupSelectorTerm, SecurityGroupStatus, SubnetSelectorTerm, SubnetStatus,
};
use crate::settings::AwsSettings;
use aws_sdk_ec2::types::Filter;
use karpenter_scheduling::labels;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// A subnet with the free-address count launches use to pick one per zone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResolvedSubnet {
    /// Subnet id.
    pub id: String,
    /// Zone name.
    pub zone: String,
    /// Zone id.
    pub zone_id: String,
    /// Free IPv4 addresses.
    pub available_ips: i32,
}

impl ResolvedSubnet {
    /// The status form.
    pub fn to_status(&self) -> SubnetStatus {
        SubnetStatus {
            id: self.id.clone(),
            zone: self.zone.clone(),
            zone_id: self.zone_id.clone(),
        }
    }
}

/// An image with its architecture (Kubernetes spelling) and creation date.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResolvedAmi {
    /// Image id.
    pub id: String,
    /// Image name.
    pub name: String,
    /// `amd64` or `arm64`.
    pub architecture: String,
    /// ISO 8601 creation date (sorts lexicographically).
    pub creation_date: String,
    /// Whether the image is past its deprecation time.
    pub deprecated: bool,
}

impl ResolvedAmi {
    /// The status form: the image and the architecture it serves.
    pub fn to_status(&self) -> AmiStatus {
        AmiStatus {
            id: self.id.clone(),
            name: self.name.clone(),
            deprecated: self.deprecated,
            requirements: vec![AmiRequirement {
                key: labels::ARCH.to_string(),
                operator: "In".into(),
                values: vec![self.architecture.clone()],
            }],
        }
    }
}

/// EC2 filters for a subnet or security-group term's tags: `tag:<key>=<value>`, or
/// `tag-key=<key>` when the value is `*`.
pub fn tag_filters(tags: &BTreeMap<String, String>) -> Vec<Filter> {
    tags.iter()
        .map(|(k, v)| {
            if v == "*" {
                Filter::builder().name("tag-key").values(k).build()
            } else {
                Filter::builder().name(format!("tag:{k}")).values(v).build()
            }
        })
        .collect()
}

/// The DescribeSubnets filters of one term.
pub fn subnet_filters(term: &SubnetSelectorTerm) -> Vec<Filter> {
    let mut f = tag_filters(&term.tags);
    if !term.id.is_empty() {
        f.push(Filter::builder().name("subnet-id").values(&term.id).build());
    }
    f
}

/// The DescribeSecurityGroups filters of one term.
pub fn security_group_filters(term: &SecurityGroupSelectorTerm) -> Vec<Filter> {
    let mut f = tag_filters(&term.tags);
    if !term.id.is_empty() {
        f.push(Filter::builder().name("group-id").values(&term.id).build());
    }
    if !term.name.is_empty() {
        f.push(
            Filter::builder()
                .name("group-name")
                .values(&term.name)
                .build(),
        );
    }
    f
}

/// EC2's architecture name to Kubernetes' (`x86_64` → `amd64`); `None` for architectures
/// Karpenter does not run (i386, Mac).
pub fn kube_architecture(ec2: &str) -> Option<&'static str> {
    match ec2 {
        "x86_64" => Some(labels::ARCHITECTURE_AMD64),
        "arm64" => Some(labels::ARCHITECTURE_ARM64),
        _ => None,
    }
}

/// The SSM parameters that hold an alias's image ids, with the architecture each serves.
/// `prefix` replaces `/aws/service`. Windows is amd64 only.
pub fn alias_ssm_parameters(
    alias: &Alias,
    kubernetes_version: &str,
    prefix: &str,
) -> Vec<(String, &'static str)> {
    let k8s = kubernetes_version;
    let latest = alias.version == "latest";
    let v = &alias.version;
    let mut out = Vec::new();
    for (ec2_arch, arch) in [("x86_64", "amd64"), ("arm64", "arm64")] {
        let path = match alias.family.as_str() {
            AMI_FAMILY_AL2023 => {
                let base = format!(
                    "{prefix}/eks/optimized-ami/{k8s}/amazon-linux-2023/{ec2_arch}/standard"
                );
                if latest {
                    format!("{base}/recommended/image_id")
                } else {
                    format!("{base}/amazon-eks-node-al2023-{ec2_arch}-standard-{k8s}-{v}/image_id")
                }
            }
            AMI_FAMILY_AL2 => {
                let variant = if arch == "arm64" {
                    "amazon-linux-2-arm64"
                } else {
                    "amazon-linux-2"
                };
                if latest {
                    format!("{prefix}/eks/optimized-ami/{k8s}/{variant}/recommended/image_id")
                } else {
                    format!(
                        "{prefix}/eks/optimized-ami/{k8s}/{variant}/amazon-eks-{}node-{k8s}-{v}/image_id",
                        if arch == "arm64" { "arm64-" } else { "" }
                    )
                }
            }
            AMI_FAMILY_BOTTLEROCKET => {
                let version = if latest {
                    "latest".to_string()
                } else {
                    v.trim_start_matches('v').to_string()
                };
                format!("{prefix}/bottlerocket/aws-k8s-{k8s}/{ec2_arch}/{version}/image_id")
            }
            AMI_FAMILY_WINDOWS2019 | AMI_FAMILY_WINDOWS2022 | AMI_FAMILY_WINDOWS2025 => {
                if arch != "amd64" {
                    continue;
                }
                let year = &alias.family["Windows".len()..];
                format!(
                    "{prefix}/ami-windows-latest/Windows_Server-{year}-English-Core-EKS_Optimized-{k8s}/image_id"
                )
            }
            _ => continue,
        };
        out.push((path, arch));
    }
    out
}

/// Subnets, security groups and AMIs from EC2 and SSM, cached.
#[derive(Debug)]
pub struct Discovery {
    ec2: aws_sdk_ec2::Client,
    ssm: aws_sdk_ssm::Client,
    settings: AwsSettings,
    subnets: TtlCache<String, Vec<ResolvedSubnet>>,
    security_groups: TtlCache<String, Vec<SecurityGroupStatus>>,
    amis: TtlCache<String, Vec<ResolvedAmi>>,
}

fn key<T: serde::Serialize>(value: &T) -> String {
    serde_json::to_string(value).unwrap_or_default()
}

impl Discovery {
    /// Discovery over the given clients, caching for `settings.discovery_ttl` on `clock`.
    pub fn new(
        ec2: aws_sdk_ec2::Client,
        ssm: aws_sdk_ssm::Client,
        settings: AwsSettings,
        clock: Arc<dyn Clock>,
    ) -> Self {
        let ttl = settings.discovery_ttl;
        Self {
            ec2,
            ssm,
            settings,
            subnets: TtlCache::new(clock.clone(), ttl),
            security_groups: TtlCache::new(clock.clone(), ttl),
            amis: TtlCache::new(clock, ttl),
        }
    }

    /// Forgets every cached result (the next call asks AWS again).
    pub fn invalidate(&self) {
        self.subnets.clear();
        self.security_groups.clear();
        self.amis.clear();
    }

    /// Subnets matching any term, most free addresses first (ties by id).
    pub async fn subnets(
        &self,
        terms: &[SubnetSelectorTerm],
    ) -> Result<Vec<ResolvedSubnet>, AwsError> {
        let k = key(&terms);
        if let Some(hit) = self.subnets.get(&k) {
            return Ok(hit);
        }
        let mut found: BTreeMap<String, ResolvedSubnet> = BTreeMap::new();
        for term in terms {
            let mut token = None;
            loop {
                let out = self
                    .ec2
                    .describe_subnets()
                    .set_filters(Some(subnet_filters(term)))
                    .set_next_token(token)
                    .send()
                    .await
                    .map_err(|e| AwsError::api("DescribeSubnets", e))?;
                for s in out.subnets() {
                    let Some(id) = s.subnet_id() else { continue };
                    found.insert(
                        id.to_string(),
                        ResolvedSubnet {
                            id: id.to_string(),
                            zone: s.availability_zone().unwrap_or_default().to_string(),
                            zone_id: s.availability_zone_id().unwrap_or_default().to_string(),
                            available_ips: s.available_ip_address_count().unwrap_or(0),
                        },
                    );
                }
                token = out.next_token().map(str::to_string);
                if token.is_none() {
                    break;
                }
            }
        }
        let mut subnets: Vec<ResolvedSubnet> = found.into_values().collect();
        subnets.sort_by(|a, b| {
            b.available_ips
                .cmp(&a.available_ips)
                .then_with(|| a.id.cmp(&b.id))
        });
        self.subnets.insert(k, subnets.clone());
        Ok(subnets)
    }

    /// Security groups matching any term, by id.
    pub async fn security_groups(
        &self,
        terms: &[SecurityGroupSelectorTerm],
    ) -> Result<Vec<SecurityGroupStatus>, AwsError> {
        let k = key(&terms);
        if let Some(hit) = self.security_groups.get(&k) {
            return Ok(hit);
        }
        let mut found: BTreeMap<String, SecurityGroupStatus> = BTreeMap::new();
        for term in terms {
            let mut token = None;
            loop {
                let out = self
                    .ec2
                    .describe_security_groups()
                    .set_filters(Some(security_group_filters(term)))
                    .set_next_token(token)
                    .send()
                    .await
                    .map_err(|e| AwsError::api("DescribeSecurityGroups", e))?;
                for g in out.security_groups() {
                    let Some(id) = g.group_id() else { continue };
                    found.insert(
                        id.to_string(),
                        SecurityGroupStatus {
                            id: id.to_string(),
                            name: g.group_name().unwrap_or_default().to_string(),
                        },
                    );
                }
                token = out.next_token().map(str::to_string);
                if token.is_none() {
                    break;
                }
            }
        }
        let groups: Vec<SecurityGroupStatus> = found.into_values().collect();
        self.security_groups.insert(k, groups.clone());
        Ok(groups)
    }

    async fn ssm_value(&self, name: &str) -> Result<Option<String>, AwsError> {
        match self.ssm.get_parameter().name(name).send().await {
            Ok(out) => Ok(out.parameter().and_then(|p| p.value()).map(str::to_string)),
            Err(e) => {
                let err = AwsError::api("GetParameter", e);
                if err.code() == Some("ParameterNotFound") {
                    Ok(None)
                } else {
                    Err(err)
                }
            }
        }
    }

    async fn describe_images(
        &self,
        ids: Vec<String>,
        owners: Vec<String>,
        filters: Vec<Filter>,
    ) -> Result<Vec<ResolvedAmi>, AwsError> {
        let out = self
            .ec2
            .describe_images()
            .set_image_ids((!ids.is_empty()).then_some(ids))
            .set_owners((!owners.is_empty()).then_some(owners))
            .set_filters((!filters.is_empty()).then_some(filters))
            .send()
            .await;
        let out = match out {
            Ok(o) => o,
            Err(e) => {
                let err = AwsError::api("DescribeImages", e);
                // An id that does not exist is an empty result, not a failure.
                if err.code().is_some_and(|c| c.starts_with("InvalidAMIID")) {
                    return Ok(Vec::new());
                }
                return Err(err);
            }
        };
        let now = aws_sdk_ec2::primitives::DateTime::from(std::time::SystemTime::now());
        Ok(out
            .images()
            .iter()
            .filter_map(|img| {
                let arch = kube_architecture(img.architecture()?.as_str())?;
                Some(ResolvedAmi {
                    id: img.image_id()?.to_string(),
                    name: img.name().unwrap_or_default().to_string(),
                    architecture: arch.to_string(),
                    creation_date: img.creation_date().unwrap_or_default().to_string(),
                    deprecated: img
                        .deprecation_time()
                        .and_then(|t| {
                            aws_sdk_ec2::primitives::DateTime::from_str(
                                t,
                                aws_sdk_ec2::primitives::DateTimeFormat::DateTime,
                            )
                            .ok()
                        })
                        .is_some_and(|t| t.secs() <= now.secs()),
                })
            })
            .collect())
    }

    /// AMIs for the terms, newest first. An alias resolves through SSM (one image per
    /// architecture); other terms through DescribeImages.
    pub async fn amis(&self, terms: &[AmiSelectorTerm]) -> Result<Vec<ResolvedAmi>, AwsError> {
        let k = key(&terms);
        if let Some(hit) = self.amis.get(&k) {
            return Ok(hit);
        }
        let mut found: BTreeMap<String, ResolvedAmi> = BTreeMap::new();
        for term in terms {
            if !term.alias.is_empty() {
                let Some(alias) = crate::nodeclass::parse_alias(&term.alias) else {
                    return Err(AwsError::Invalid {
                        what: "amiSelectorTerms.alias".into(),
                        message: format!("{:?} is not a supported alias", term.alias),
                    });
                };
                for (param, arch) in alias_ssm_parameters(
                    &alias,
                    &self.settings.kubernetes_version,
                    &self.settings.ssm_prefix,
                ) {
                    let Some(id) = self.ssm_value(&param).await? else {
                        continue;
                    };
                    let described = self
                        .describe_images(vec![id.clone()], vec![], vec![])
                        .await?;
                    let mut ami = described.into_iter().next().unwrap_or(ResolvedAmi {
                        id: id.clone(),
                        name: String::new(),
                        architecture: arch.to_string(),
                        creation_date: String::new(),
                        deprecated: false,
                    });
                    // The parameter path names the architecture the image is published for.
                    ami.architecture = arch.to_string();
                    found.insert(format!("{id}/{arch}"), ami);
                }
                continue;
            }
            let images = if !term.ssm_parameter.is_empty() {
                match self.ssm_value(&term.ssm_parameter).await? {
                    Some(id) => self.describe_images(vec![id], vec![], vec![]).await?,
                    None => Vec::new(),
                }
            } else if !term.id.is_empty() {
                self.describe_images(vec![term.id.clone()], vec![], vec![])
                    .await?
            } else {
                let mut filters = tag_filters(&term.tags);
                if !term.name.is_empty() {
                    filters.push(Filter::builder().name("name").values(&term.name).build());
                }
                let owners = if !term.owner.is_empty() {
                    vec![term.owner.clone()]
                } else if term.tags.is_empty() {
                    // A bare name could match anyone's public image; upstream limits it to
                    // the account's own and Amazon's.
                    vec!["self".to_string(), "amazon".to_string()]
                } else {
                    Vec::new()
                };
                self.describe_images(vec![], owners, filters).await?
            };
            for ami in images {
                found.insert(format!("{}/{}", ami.id, ami.architecture), ami);
            }
        }
        let mut amis: Vec<ResolvedAmi> = found.into_values().collect();
        amis.sort_by(|a, b| {
            b.creation_date
                .cmp(&a.creation_date)
                .then_with(|| a.id.cmp(&b.id))
        });
        self.amis.insert(k, amis.clone());
        Ok(amis)
    }
}

/// For each architecture, the newest non-deprecated AMI (deprecated ones only when nothing
/// else serves the architecture), as launches choose images.
pub fn newest_per_architecture(amis: &[AmiStatus]) -> BTreeMap<String, String> {
    let mut out: BTreeMap<String, String> = BTreeMap::new();
    let mut fallback: BTreeMap<String, String> = BTreeMap::new();
    for ami in amis {
        for r in ami.requirements.iter().filter(|r| r.key == labels::ARCH) {
            for arch in &r.values {
                let target = if ami.deprecated {
                    &mut fallback
                } else {
                    &mut out
                };
                target.entry(arch.clone()).or_insert_with(|| ami.id.clone());
            }
        }
    }
    for (arch, id) in fallback {
        out.entry(arch).or_insert(id);
    }
    out
}

/// The zones of resolved subnets.
pub fn zones(subnets: &[SubnetStatus]) -> BTreeSet<String> {
    subnets.iter().map(|s| s.zone.clone()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filters_of_terms() {
        let term = SubnetSelectorTerm {
            tags: [
                ("karpenter.sh/discovery".to_string(), "demo".to_string()),
                ("Name".to_string(), "*".to_string()),
            ]
            .into(),
            id: String::new(),
        };
        let f = subnet_filters(&term);
        assert_eq!(f[0].name(), Some("tag-key"));
        assert_eq!(f[0].values(), ["Name"]);
        assert_eq!(f[1].name(), Some("tag:karpenter.sh/discovery"));
        assert_eq!(f[1].values(), ["demo"]);
        let sg = SecurityGroupSelectorTerm {
            name: "eks-cluster-sg".into(),
            ..Default::default()
        };
        let f = security_group_filters(&sg);
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].name(), Some("group-name"));
    }

    #[test]
    fn alias_parameter_paths() {
        let al2023 = crate::nodeclass::parse_alias("al2023@latest").expect("alias");
        assert_eq!(
            alias_ssm_parameters(&al2023, "1.33", "/aws/service"),
            vec![
                ("/aws/service/eks/optimized-ami/1.33/amazon-linux-2023/x86_64/standard/recommended/image_id".to_string(), "amd64"),
                ("/aws/service/eks/optimized-ami/1.33/amazon-linux-2023/arm64/standard/recommended/image_id".to_string(), "arm64"),
            ]
        );
        let pinned = crate::nodeclass::parse_alias("al2023@v20250101").expect("alias");
        assert_eq!(
            alias_ssm_parameters(&pinned, "1.33", "/test")[0].0,
            "/test/eks/optimized-ami/1.33/amazon-linux-2023/x86_64/standard/amazon-eks-node-al2023-x86_64-standard-1.33-v20250101/image_id"
        );
        let br = crate::nodeclass::parse_alias("bottlerocket@v1.20.0").expect("alias");
        assert_eq!(
            alias_ssm_parameters(&br, "1.33", "/aws/service")[1].0,
            "/aws/service/bottlerocket/aws-k8s-1.33/arm64/1.20.0/image_id"
        );
        let win = crate::nodeclass::parse_alias("windows2022@latest").expect("alias");
        let w = alias_ssm_parameters(&win, "1.33", "/aws/service");
        assert_eq!(w.len(), 1);
        assert_eq!(
            w[0].0,
            "/aws/service/ami-windows-latest/Windows_Server-2022-English-Core-EKS_Optimized-1.33/image_id"
        );
    }

    #[test]
    fn newest_image_per_architecture_skips_deprecated() {
        let ami = |id: &str, arch: &str, deprecated: bool| AmiStatus {
            id: id.into(),
            name: String::new(),
            deprecated,
            requirements: vec![AmiRequirement {
                key: labels::ARCH.into(),
                operator: "In".into(),
                values: vec![arch.into()],
            }],
        };
        let picked = newest_per_architecture(&[
            ami("ami-new-dep", "amd64", true),
            ami("ami-amd", "amd64", false),
            ami("ami-old", "amd64", false),
            ami("ami-arm-dep", "arm64", true),
        ]);
        assert_eq!(picked["amd64"], "ami-amd");
        assert_eq!(picked["arm64"], "ami-arm-dep");
    }
}
