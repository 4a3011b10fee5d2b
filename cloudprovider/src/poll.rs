//! Asking a provider about many objects in one go, as the controller's periodic refreshes
//! do: every answer that came, and every failure with what it was about, so that one failed
//! call neither hides the others nor goes unnoticed.

use crate::v1::ConditionType;
use crate::{CloudProvider, CloudProviderError, NodeClaim, NodePool};
use karpenter_scheduling::model::InstanceType;
use std::collections::BTreeMap;
use std::sync::Arc;

/// What the calls returned, by object name, and the names whose call failed.
pub type Answers<T> = (BTreeMap<String, T>, Vec<(String, CloudProviderError)>);

/// Every pool's instance types.
pub async fn instance_types_of(
    provider: &dyn CloudProvider,
    pools: &[Arc<NodePool>],
) -> Answers<Vec<Arc<InstanceType>>> {
    let (mut types, mut failed) = (BTreeMap::new(), Vec::new());
    for pool in pools {
        match provider.instance_types(pool).await {
            Ok(t) => drop(types.insert(pool.name().to_owned(), t)),
            Err(e) => failed.push((pool.name().to_owned(), e)),
        }
    }
    (types, failed)
}

/// The drift reason of every drifted NodeClaim among the launched ones not being deleted
/// (others cannot drift: nothing runs yet, or they are going).
pub async fn drift_of(provider: &dyn CloudProvider, claims: &[Arc<NodeClaim>]) -> Answers<String> {
    let (mut drift, mut failed) = (BTreeMap::new(), Vec::new());
    let live = claims
        .iter()
        .filter(|c| c.is(ConditionType::Launched) && !c.is_deleting());
    for claim in live {
        match provider.is_drifted(claim).await {
            Ok(Some(reason)) => drop(drift.insert(claim.name().to_owned(), reason.to_string())),
            Ok(None) => {}
            Err(e) => failed.push((claim.name().to_owned(), e)),
        }
    }
    (drift, failed)
}

/// Deletes the instances of `claims`; those whose deletion failed, by provider ID (an
/// instance already gone is not a failure).
pub async fn delete_all<'a>(
    provider: &dyn CloudProvider,
    claims: impl IntoIterator<Item = &'a NodeClaim>,
) -> Vec<(String, CloudProviderError)> {
    let mut failed = Vec::new();
    for claim in claims {
        match provider.delete(claim).await {
            Err(e) if !e.is_not_found() => failed.push((claim.provider_id().to_owned(), e)),
            _ => {}
        }
    }
    failed
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{DriftReason, RepairPolicy};

    /// Fails for objects named `bad`; drifted for objects named `drifted`; `gone` has no
    /// instance to delete.
    struct Scripted;

    fn bad(name: &str) -> Result<(), CloudProviderError> {
        match name {
            "bad" => Err(CloudProviderError::Other(format!("{name} failed"))),
            _ => Ok(()),
        }
    }

    #[async_trait::async_trait]
    impl CloudProvider for Scripted {
        async fn create(&self, c: &NodeClaim) -> Result<NodeClaim, CloudProviderError> {
            Ok(c.clone())
        }
        async fn delete(&self, c: &NodeClaim) -> Result<(), CloudProviderError> {
            match c.name() {
                "gone" => Err(CloudProviderError::NotFound {
                    provider_id: c.name().into(),
                }),
                name => bad(name),
            }
        }
        async fn get(&self, id: &str) -> Result<NodeClaim, CloudProviderError> {
            Err(CloudProviderError::NotFound {
                provider_id: id.into(),
            })
        }
        async fn list(&self) -> Result<Vec<NodeClaim>, CloudProviderError> {
            Ok(Vec::new())
        }
        async fn instance_types(
            &self,
            pool: &NodePool,
        ) -> Result<Vec<Arc<InstanceType>>, CloudProviderError> {
            bad(pool.name()).map(|()| Vec::new())
        }
        async fn is_drifted(
            &self,
            c: &NodeClaim,
        ) -> Result<Option<DriftReason>, CloudProviderError> {
            bad(c.name())?;
            Ok((c.name() == "drifted").then(|| DriftReason::new("NodeClassDrift")))
        }
        fn repair_policies(&self) -> Vec<RepairPolicy> {
            Vec::new()
        }
        fn name(&self) -> &str {
            "scripted"
        }
    }

    fn claim(name: &str, launched: bool, deleting: bool) -> Arc<NodeClaim> {
        let status = if launched { "True" } else { "False" };
        let at = "2026-01-01T00:00:00Z";
        let mut json = serde_json::json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim", "metadata": {"name": name},
            "spec": {"requirements": [], "nodeClassRef":
                {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}},
            "status": {"conditions": [{"type": "Launched", "status": status,
                "lastTransitionTime": at, "reason": "Launched", "message": ""}]},
        });
        if deleting {
            json["metadata"]["deletionTimestamp"] = at.into();
        }
        Arc::new(serde_json::from_value(json).unwrap())
    }

    fn run<F: std::future::Future>(f: F) -> F::Output {
        let rt = tokio::runtime::Builder::new_current_thread().build();
        rt.unwrap().block_on(f)
    }

    #[test]
    fn a_failed_pool_is_reported_and_the_others_answered() {
        let pool = |name: &str| -> Arc<NodePool> {
            let json = serde_json::json!({
                "apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": name},
                "spec": {"template": {"spec": {"requirements": [], "nodeClassRef":
                    {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "d"}}}},
            });
            Arc::new(serde_json::from_value(json).unwrap())
        };
        let (types, failed) = run(instance_types_of(&Scripted, &[pool("a"), pool("bad")]));
        assert_eq!(types.keys().collect::<Vec<_>>(), ["a"]);
        assert_eq!(failed.len(), 1);
        assert_eq!(failed[0].0, "bad");
    }

    #[test]
    fn only_launched_claims_not_being_deleted_are_asked_about_drift() {
        let claims = [
            claim("drifted", true, false),
            claim("fine", true, false),
            claim("bad", true, false),
            claim("pending", false, false),
            claim("going", true, true),
        ];
        let (drift, failed) = run(drift_of(&Scripted, &claims));
        let drift: Vec<_> = drift.iter().collect();
        assert_eq!(
            drift,
            [(&"drifted".to_owned(), &"NodeClassDrift".to_owned())]
        );
        let failed: Vec<_> = failed.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(failed, ["bad"]);
    }

    #[test]
    fn deletions_report_failures_but_not_instances_already_gone() {
        let claims = [
            claim("a", true, false),
            claim("gone", true, false),
            claim("bad", true, false),
        ];
        let failed = run(delete_all(&Scripted, claims.iter().map(AsRef::as_ref)));
        assert_eq!(failed.len(), 1, "{failed:?}");
        assert_eq!(failed[0].1.to_string(), "bad failed");
    }
}
