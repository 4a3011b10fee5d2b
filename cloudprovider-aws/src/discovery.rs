//! Resolves an EC2NodeClass's selector terms against EC2 and SSM: subnets, security groups
//! and AMIs (by alias through the public SSM parameters, or by id/name/owner/tags/
//! ssmParameter). Results are cached per selector for their refresh interval
//! ([`AwsSettings::subnet_ttl`], [`AwsSettings::security_group_ttl`],
//! [`AwsSettings::ami_ttl`]), so the
//! NodeClass controller can refresh them periodically without hammering the APIs.

use crate::alias::alias_ssm_parameters;
use crate::ami::{AmiCandidate, select_amis};
use crate::cache::{Clock, TtlCache};
use crate::error::AwsError;
use crate::nodeclass::{
    AmiSelectorTerm, AmiStatus, SecurityGroupSelectorTerm, SecurityGroupStatus, SubnetSelectorTerm,
    SubnetStatus,
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

/// Subnets, security groups and AMIs from EC2 and SSM, cached.
#[derive(Debug)]
pub struct Discovery {
    ec2: aws_sdk_ec2::Client,
    ssm: aws_sdk_ssm::Client,
    settings: AwsSettings,
    subnets: TtlCache<String, Vec<ResolvedSubnet>>,
    security_groups: TtlCache<String, Vec<SecurityGroupStatus>>,
    amis: TtlCache<String, Vec<AmiStatus>>,
}

fn key<T: serde::Serialize>(value: &T) -> String {
    serde_json::to_string(value).unwrap_or_default()
}

impl Discovery {
    /// Discovery over the given clients, caching each kind for its refresh interval on
    /// `clock`.
    pub fn new(
        ec2: aws_sdk_ec2::Client,
        ssm: aws_sdk_ssm::Client,
        settings: AwsSettings,
        clock: Arc<dyn Clock>,
    ) -> Self {
        Self {
            ec2,
            ssm,
            subnets: TtlCache::new(clock.clone(), settings.subnet_ttl),
            security_groups: TtlCache::new(clock.clone(), settings.security_group_ttl),
            amis: TtlCache::new(clock, settings.ami_ttl),
            settings,
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

    /// The status AMIs for the terms (see [`select_amis`]): for each distinct set of
    /// requirements the best image, newest first. An alias resolves through its family's
    /// SSM parameters, one entry per variant an image serves (standard, nvidia, neuron);
    /// parameters that do not exist (a variant not published for this version or region) are
    /// skipped. Other terms resolve through DescribeImages and serve their architecture.
    pub async fn amis(&self, terms: &[AmiSelectorTerm]) -> Result<Vec<AmiStatus>, AwsError> {
        let k = key(&terms);
        if let Some(hit) = self.amis.get(&k) {
            return Ok(hit);
        }
        let mut candidates: Vec<AmiCandidate> = Vec::new();
        for term in terms {
            if !term.alias.is_empty() {
                let Some(alias) = crate::nodeclass::parse_alias(&term.alias) else {
                    return Err(AwsError::Invalid {
                        what: "amiSelectorTerms.alias".into(),
                        message: format!("{:?} is not a supported alias", term.alias),
                    });
                };
                for param in alias_ssm_parameters(
                    &alias,
                    &self.settings.kubernetes_version,
                    &self.settings.ssm_prefix,
                ) {
                    let Some(id) = self.ssm_value(&param.path).await? else {
                        continue;
                    };
                    let described = self
                        .describe_images(vec![id.clone()], vec![], vec![])
                        .await?;
                    let mut image = described.into_iter().next().unwrap_or(ResolvedAmi {
                        id: id.clone(),
                        name: String::new(),
                        architecture: param.architecture.to_string(),
                        creation_date: String::new(),
                        deprecated: false,
                    });
                    // The parameter path names the architecture the image is published for.
                    image.architecture = param.architecture.to_string();
                    candidates.extend(AmiCandidate::for_variants(image, param.variants));
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
            candidates.extend(images.into_iter().map(AmiCandidate::plain));
        }
        let amis = select_amis(candidates);
        self.amis.insert(k, amis.clone());
        Ok(amis)
    }
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
}
