//! Upstream's NodeClaim tagging controller: launches carry only static tags (so identical
//! claims make identical CreateFleet requests that batch), and once a claim has its Node
//! the instance gets `Name` (the Node's name), `karpenter.sh/nodeclaim` and
//! `eks:eks-cluster-name`, each only where the instance lacks it (a user's `Name` stays).
//! The claim is then annotated, so it is done once. At most one CreateTags call a second:
//! it shares EC2's rate limit with CreateFleet.

use crate::launch::{TAG_EKS_CLUSTER_NAME, TAG_NODECLAIM};
use crate::provider::AwsCloudProvider;
use karpenter_cloudprovider::{CloudProviderError, NodeClaim};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

/// Annotation on a NodeClaim whose instance has been tagged.
pub const ANNOTATION_INSTANCE_TAGGED: &str = "karpenter.k8s.aws/tagged";
/// The compatibility annotation upstream writes beside it (the cluster-name tag is set).
pub const ANNOTATION_CLUSTER_NAME_TAGGED: &str =
    "compatibility.karpenter.k8s.aws/cluster-name-tagged";
/// The EC2 `Name` tag.
pub const TAG_NAME: &str = "Name";
/// The pause after each CreateTags call.
pub const CREATE_TAGS_INTERVAL: Duration = Duration::from_secs(1);
/// How often the claims are looked at again.
pub const SCAN_INTERVAL: Duration = Duration::from_secs(1);

/// Whether `claim`'s instance still needs its tags: not yet annotated as tagged, its Node
/// known, an AWS provider id set, and not being deleted.
pub fn is_taggable(claim: &NodeClaim) -> bool {
    let done = |k| claim.annotation(k) == Some("true");
    let tagged = done(ANNOTATION_INSTANCE_TAGGED) && done(ANNOTATION_CLUSTER_NAME_TAGGED);
    !tagged
        && !claim.node_name().is_empty()
        && crate::instance::parse_provider_id(claim.provider_id()).is_some()
        && !claim.is_deleting()
}

/// The tags `claim`'s instance should get, without those it has (`present`).
pub fn missing_tags(
    claim: &NodeClaim,
    cluster_name: &str,
    present: &BTreeMap<String, String>,
) -> BTreeMap<String, String> {
    [
        (TAG_NAME, claim.node_name()),
        (TAG_NODECLAIM, claim.name()),
        (TAG_EKS_CLUSTER_NAME, cluster_name),
    ]
    .into_iter()
    .filter(|(k, _)| !present.contains_key(*k))
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect()
}

/// The merge patch that marks a claim tagged.
pub fn tagged_patch() -> serde_json::Value {
    serde_json::json!({"metadata": {"annotations": {
        ANNOTATION_INSTANCE_TAGGED: "true",
        ANNOTATION_CLUSTER_NAME_TAGGED: "true",
    }}})
}

/// What tagging one claim's instance did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tagged {
    /// The instance had every tag already: no call.
    Already,
    /// CreateTags added the missing ones.
    Added,
}

/// Where the tagging loop reads claims and marks them tagged (the operator's stores and
/// API).
#[async_trait::async_trait]
pub trait TagTarget: Send + Sync {
    /// The NodeClaims now.
    fn claims(&self) -> Vec<Arc<NodeClaim>>;
    /// Writes [`tagged_patch`] onto claim `name`.
    async fn mark_tagged(&self, name: &str) -> Result<(), String>;
}

/// One look at every claim of `target`: tags each taggable claim's instance and marks the
/// claim, pausing [`CREATE_TAGS_INTERVAL`] after each CreateTags call. Returns how many
/// claims were marked. A claim whose instance is gone is skipped (its deletion follows);
/// failures are logged and tried again on the next look.
pub async fn tag_pass(provider: &AwsCloudProvider, target: &dyn TagTarget) -> usize {
    let mut marked = 0;
    for claim in target.claims().iter().filter(|c| is_taggable(c)) {
        let name = claim.name();
        match provider.tag_instance(claim).await {
            Ok(tagged) => {
                match target.mark_tagged(name).await {
                    Ok(()) => marked += 1,
                    Err(e) => {
                        tracing::warn!(nodeclaim = name, error = %e, "marking nodeclaim tagged failed")
                    }
                }
                if tagged == Tagged::Added {
                    tokio::time::sleep(CREATE_TAGS_INTERVAL).await;
                }
            }
            Err(e) if e.is_not_found() => {}
            Err(e) => tracing::warn!(nodeclaim = name, error = %e, "tagging instance failed"),
        }
    }
    marked
}

/// [`tag_pass`] every [`SCAN_INTERVAL`] until `shutdown` turns true.
pub async fn run(
    provider: Arc<AwsCloudProvider>,
    target: Arc<dyn TagTarget>,
    mut shutdown: watch::Receiver<bool>,
) {
    while !*shutdown.borrow() {
        tag_pass(&provider, target.as_ref()).await;
        tokio::select! {
            _ = shutdown.changed() => {}
            () = tokio::time::sleep(SCAN_INTERVAL) => {}
        }
    }
}

impl AwsCloudProvider {
    /// Adds the tags `claim`'s instance lacks ([`missing_tags`]); `NotFound` when the
    /// instance is gone.
    pub async fn tag_instance(&self, claim: &NodeClaim) -> Result<Tagged, CloudProviderError> {
        let instance = self.get_instance(claim.provider_id()).await?;
        let missing = missing_tags(claim, &self.settings().cluster_name, &instance.tags);
        if missing.is_empty() {
            return Ok(Tagged::Already);
        }
        let tags = missing
            .iter()
            .map(|(k, v)| aws_sdk_ec2::types::Tag::builder().key(k).value(v).build());
        self.ec2_client()
            .create_tags()
            .resources(&instance.id)
            .set_tags(Some(tags.collect()))
            .send()
            .await
            .map_err(|e| crate::error::AwsError::api("CreateTags", e))?;
        Ok(Tagged::Added)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use karpenter_cloudprovider::v1::NodeClaimStatus;

    fn claim(node: &str, provider_id: &str) -> NodeClaim {
        let mut c: NodeClaim = serde_json::from_value(serde_json::json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
            "metadata": {"name": "default-abc"},
            "spec": {"requirements": [], "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}}
        }))
        .unwrap();
        let status = c.status.get_or_insert_with(NodeClaimStatus::default);
        status.node_name = node.into();
        status.provider_id = provider_id.into();
        c
    }

    #[test]
    fn a_claim_is_taggable_once_it_has_a_node_and_until_it_is_marked() {
        let pid = "aws:///us-east-1a/i-1";
        assert!(!is_taggable(&claim("", pid)));
        assert!(!is_taggable(&claim("ip-10-0-0-1", "")));
        let mut c = claim("ip-10-0-0-1", pid);
        assert!(is_taggable(&c));
        let annotations = c.metadata.annotations.get_or_insert_with(BTreeMap::new);
        annotations.insert(ANNOTATION_INSTANCE_TAGGED.into(), "true".into());
        // Upstream wants the compatibility annotation too.
        assert!(is_taggable(&c));
        let patch = tagged_patch();
        let set = patch["metadata"]["annotations"].as_object().unwrap();
        for (k, v) in set {
            let annotations = c.metadata.annotations.get_or_insert_with(BTreeMap::new);
            annotations.insert(k.clone(), v.as_str().unwrap().into());
        }
        assert!(!is_taggable(&c));
        let mut deleting = claim("ip-10-0-0-1", pid);
        deleting.metadata.deletion_timestamp = c.metadata.creation_timestamp.clone().or(Some(
            k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                k8s_openapi::jiff::Timestamp::UNIX_EPOCH,
            ),
        ));
        assert!(!is_taggable(&deleting));
    }

    #[test]
    fn only_the_missing_tags_are_added_and_a_users_name_stays() {
        let c = claim("ip-10-0-0-1", "aws:///us-east-1a/i-1");
        let none = missing_tags(&c, "demo", &BTreeMap::new());
        assert_eq!(none["Name"], "ip-10-0-0-1");
        assert_eq!(none["karpenter.sh/nodeclaim"], "default-abc");
        assert_eq!(none["eks:eks-cluster-name"], "demo");
        let present = BTreeMap::from([
            ("Name".to_string(), "mine".to_string()),
            ("eks:eks-cluster-name".to_string(), "demo".to_string()),
        ]);
        let some = missing_tags(&c, "demo", &present);
        assert_eq!(
            some,
            BTreeMap::from([("karpenter.sh/nodeclaim".into(), "default-abc".into())])
        );
    }
}
