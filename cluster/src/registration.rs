//! NodeClaim lifecycle on a real cluster: Launched → Registered → Initialized, with
//! Karpenter's launch and registration timeouts.
//!
//! The simulator's kubelet (`karpenter_simulator`'s `kubelet` module) times these
//! transitions; in a cluster they are *observed* (a Node joins with the claim's provider ID,
//! its agents remove startup taints). Either way the decision is a pure function of the
//! claim, the index's record of its Node and `now` ([`next_step`]); the reconciler ticks it
//! for both drivers, which carry the step out. Expiry is not decided here: it is a forceful
//! command of `karpenter_disruption`, executed by the disruption loop.

use crate::deletion::LifecycleTimeout;
use crate::{Kubelet, NodeRecord};
use k8s_openapi::api::core::v1::{Node, Taint as K8sTaint};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use karpenter_cloudprovider::v1::{ConditionType, NodeClaim, labels as v1labels};
use karpenter_scheduling::k8s::is_ephemeral_taint;
use karpenter_scheduling::model::Millis;
use std::collections::BTreeMap;

/// Karpenter's registration TTL: a launched claim whose Node has not joined by then is
/// deleted (and its instance terminated).
pub const REGISTRATION_TIMEOUT_MS: Millis = 15 * 60 * 1000;
/// A claim that could not launch for this long is deleted so the pods are re-planned.
pub const LAUNCH_TIMEOUT_MS: Millis = 5 * 60 * 1000;
/// Label set on a Node once Karpenter registered it.
pub const REGISTERED_LABEL: &str = v1labels::NODE_REGISTERED;
/// Label set on a Node once it initialized.
pub const INITIALIZED_LABEL: &str = v1labels::NODE_INITIALIZED;

/// The next thing to do for a NodeClaim that is not being deleted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Add the `karpenter.sh/termination` finalizer.
    AddFinalizer,
    /// Ask the provider for an instance.
    Launch,
    /// Its Node joined: sync labels, taints, finalizer and owner onto it; set Registered.
    Register {
        /// Node name.
        node: String,
    },
    /// The Node is Ready with startup taints gone and resources reported: set Initialized.
    Initialize {
        /// Node name.
        node: String,
    },
    /// Give up on the claim (it is deleted, which terminates any instance).
    Delete {
        /// Which deadline passed.
        timeout: LifecycleTimeout,
        /// Human-readable explanation.
        message: String,
    },
    /// Nothing to do until something changes.
    Wait,
}

fn since(claim: &NodeClaim, t: ConditionType) -> Option<Millis> {
    claim
        .get_condition(t)
        .map(|c| c.last_transition_time.0.as_millisecond())
}

fn created(claim: &NodeClaim) -> Millis {
    claim
        .metadata
        .creation_timestamp
        .as_ref()
        .map_or(0, |t| t.0.as_millisecond())
}

fn node_ready(node: &Node) -> bool {
    node.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .into_iter()
        .flatten()
        .any(|c| c.type_ == "Ready" && c.status == "True")
}

fn node_taints(node: &Node) -> &[K8sTaint] {
    node.spec
        .as_ref()
        .and_then(|s| s.taints.as_deref())
        .unwrap_or_default()
}

/// Why a registered node is not initialized yet, or `None` when it is: it must be Ready,
/// carry none of the claim's startup taints nor an ephemeral taint, and report every
/// resource the claim's instance type advertises (extended resources such as GPUs appear
/// only once their device plugin runs).
pub fn not_initialized_reason(claim: &NodeClaim, node: &Node) -> Option<String> {
    if !node_ready(node) {
        return Some("node is not Ready".into());
    }
    for t in node_taints(node) {
        if claim
            .spec
            .startup_taints
            .iter()
            .any(|s| s.key == t.key && s.effect.as_str() == t.effect)
        {
            return Some(format!("startup taint {:?} still present", t.key));
        }
        if t.key == v1labels::UNREGISTERED_TAINT_KEY {
            return Some("unregistered taint still present".into());
        }
        let model = karpenter_scheduling::taints::Taint::new(
            t.key.clone(),
            t.value.clone().unwrap_or_default(),
            match t.effect.as_str() {
                "NoExecute" => karpenter_scheduling::taints::TaintEffect::NoExecute,
                "PreferNoSchedule" => karpenter_scheduling::taints::TaintEffect::PreferNoSchedule,
                _ => karpenter_scheduling::taints::TaintEffect::NoSchedule,
            },
        );
        if is_ephemeral_taint(&model) {
            return Some(format!("ephemeral taint {:?} still present", t.key));
        }
    }
    let allocatable = node
        .status
        .as_ref()
        .and_then(|s| s.allocatable.clone())
        .unwrap_or_default();
    if let Some(status) = &claim.status {
        for (resource, q) in &status.allocatable {
            let expected_nonzero = q.0 != "0";
            let has = allocatable.get(resource).is_some_and(|v| v.0 != "0");
            if expected_nonzero && !has {
                return Some(format!("resource {resource:?} not registered"));
            }
        }
    }
    None
}

/// Whether `claim` carries `karpenter.sh/termination` (so its deletion waits for the drain).
pub fn has_termination_finalizer(claim: &NodeClaim) -> bool {
    claim
        .metadata
        .finalizers
        .as_ref()
        .is_some_and(|f| f.iter().any(|x| x == v1labels::TERMINATION_FINALIZER))
}

/// The next step for `claim` at `now`, given the index's record of its joined Node (if
/// any). Steps run one per reconcile: each is observed through the object before the next.
pub fn next_step(claim: &NodeClaim, node: Option<&NodeRecord>, now: Millis) -> Step {
    if claim.is_deleting() {
        return Step::Wait;
    }
    if !has_termination_finalizer(claim) {
        return Step::AddFinalizer;
    }
    if !claim.is(ConditionType::Launched) {
        if now >= created(claim).saturating_add(LAUNCH_TIMEOUT_MS)
            && claim.get_condition(ConditionType::Launched).is_some()
        {
            return Step::Delete {
                timeout: LifecycleTimeout::Launch,
                message: format!(
                    "NodeClaim {} did not launch within {} minutes",
                    claim.name(),
                    LAUNCH_TIMEOUT_MS / 60_000
                ),
            };
        }
        return Step::Launch;
    }
    let joined = node.filter(|n| matches!(n.kubelet, Kubelet::Joined { .. }));
    if !claim.is(ConditionType::Registered) {
        if let Some(node) = joined {
            return Step::Register {
                node: node.node.name.clone(),
            };
        }
        if now >= registration_deadline(claim) {
            return Step::Delete {
                timeout: LifecycleTimeout::Registration,
                message: format!(
                    "no node registered for NodeClaim {} within {} minutes",
                    claim.name(),
                    REGISTRATION_TIMEOUT_MS / 60_000
                ),
            };
        }
        return Step::Wait;
    }
    if !claim.is(ConditionType::Initialized)
        && let Some(node) = joined
        && node.kubelet.initializable()
    {
        return Step::Initialize {
            node: node.node.name.clone(),
        };
    }
    Step::Wait
}

fn registration_deadline(claim: &NodeClaim) -> Millis {
    since(claim, ConditionType::Launched)
        .unwrap_or_else(|| created(claim))
        .saturating_add(REGISTRATION_TIMEOUT_MS)
}

/// When [`next_step`] for a claim now waiting would decide differently with nothing else
/// changing: the end of its registration window (launched, no Node yet). A claim that failed
/// to launch is retried at every reconcile and needs no timer.
pub fn deadline(claim: &NodeClaim) -> Option<Millis> {
    (claim.is(ConditionType::Launched) && !claim.is(ConditionType::Registered))
        .then(|| registration_deadline(claim))
}

/// The Node after registration: the claim's labels and annotations, `registered=true`, the
/// claim's taints (unless the node opts out), no unregistered taint, the termination
/// finalizer and an owner reference to the claim (so deleting the claim removes the Node).
pub fn registered_node_patch(claim: &NodeClaim, node: &Node) -> serde_json::Value {
    let mut labels: BTreeMap<String, String> = claim.metadata.labels.clone().unwrap_or_default();
    labels.insert(REGISTERED_LABEL.to_owned(), "true".to_owned());
    labels.insert(
        v1labels::NODECLAIM_LABEL.to_owned(),
        claim.name().to_owned(),
    );
    let sync_taints = !node.metadata.labels.as_ref().is_some_and(|l| {
        l.get(v1labels::NODE_DO_NOT_SYNC_TAINTS)
            .is_some_and(|v| v == "true")
    });
    let mut taints: Vec<K8sTaint> = node_taints(node)
        .iter()
        .filter(|t| t.key != v1labels::UNREGISTERED_TAINT_KEY)
        .cloned()
        .collect();
    if sync_taints {
        for t in &claim.spec.taints {
            if !taints
                .iter()
                .any(|x| x.key == t.key && x.effect == t.effect.as_str())
            {
                taints.push(K8sTaint {
                    key: t.key.clone(),
                    value: (!t.value.is_empty()).then(|| t.value.clone()),
                    effect: t.effect.as_str().to_owned(),
                    time_added: None,
                });
            }
        }
    }
    let mut finalizers = node.metadata.finalizers.clone().unwrap_or_default();
    if !finalizers
        .iter()
        .any(|f| f == v1labels::TERMINATION_FINALIZER)
    {
        finalizers.push(v1labels::TERMINATION_FINALIZER.to_owned());
    }
    let mut owners = node.metadata.owner_references.clone().unwrap_or_default();
    let uid = claim.metadata.uid.clone().unwrap_or_default();
    if !uid.is_empty() && !owners.iter().any(|o| o.uid == uid) {
        owners.push(OwnerReference {
            api_version: format!("{}/v1", v1labels::GROUP),
            kind: "NodeClaim".into(),
            name: claim.name().to_owned(),
            uid,
            block_owner_deletion: Some(true),
            controller: None,
        });
    }
    serde_json::json!({
        "metadata": {
            "resourceVersion": node.metadata.resource_version,
            "labels": labels,
            "annotations": claim.metadata.annotations.clone().unwrap_or_default(),
            "finalizers": finalizers,
            "ownerReferences": owners,
        },
        "spec": { "taints": taints },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use karpenter_cloudprovider::v1::StatusConditions;
    use karpenter_testing::api::{node_claim, ready, registering_node as node};

    /// The index's record of `n`, joined to `c`, as the controller's feed builds it.
    fn record(c: &NodeClaim, n: &Node) -> NodeRecord {
        crate::api_objects::node_record(n, Some(c)).unwrap()
    }

    #[test]
    fn steps_follow_the_lifecycle() {
        let mut c = node_claim("default-abcde");
        c.metadata.finalizers = None;
        assert_eq!(next_step(&c, None, 0), Step::AddFinalizer);
        c.metadata.finalizers = Some(vec![v1labels::TERMINATION_FINALIZER.into()]);
        assert_eq!(next_step(&c, None, 0), Step::Launch);
        c.set_true("Launched", crate::provisioner::time(1_000));
        assert_eq!(next_step(&c, None, 2_000), Step::Wait);
        assert_eq!(deadline(&c), Some(1_000 + REGISTRATION_TIMEOUT_MS));
        let n = node("default-abcde", "fake://us-east-1a/default-abcde");
        assert_eq!(
            next_step(&c, Some(&record(&c, &n)), 2_000),
            Step::Register {
                node: "default-abcde".into()
            }
        );
        c.set_true("Registered", crate::provisioner::time(2_000));
        // Not Ready and still tainted unregistered: not initialized.
        assert_eq!(next_step(&c, Some(&record(&c, &n)), 3_000), Step::Wait);
        let mut n = ready(n);
        n.spec.as_mut().unwrap().taints = Some(Vec::new());
        assert_eq!(
            next_step(&c, Some(&record(&c, &n)), 3_000),
            Step::Initialize {
                node: "default-abcde".into()
            }
        );
    }

    #[test]
    fn registration_timeout_deletes() {
        let mut c = node_claim("x");
        c.set_true("Launched", crate::provisioner::time(0));
        assert_eq!(next_step(&c, None, REGISTRATION_TIMEOUT_MS - 1), Step::Wait);
        assert!(matches!(
            next_step(&c, None, REGISTRATION_TIMEOUT_MS),
            Step::Delete {
                timeout: LifecycleTimeout::Registration,
                ..
            }
        ));
    }

    #[test]
    fn startup_taints_block_initialization() {
        let mut c = node_claim("x");
        c.spec.startup_taints = vec![karpenter_cloudprovider::v1::Taint::new(
            "example.com/agent",
            "",
            karpenter_cloudprovider::v1::TaintEffect::NoSchedule,
        )];
        let mut n = ready(node("x", "fake://z/x"));
        n.spec.as_mut().unwrap().taints = Some(vec![K8sTaint {
            key: "example.com/agent".into(),
            effect: "NoSchedule".into(),
            ..Default::default()
        }]);
        assert!(
            not_initialized_reason(&c, &n)
                .unwrap()
                .contains("startup taint")
        );
        n.spec.as_mut().unwrap().taints = Some(vec![K8sTaint {
            key: "node.kubernetes.io/not-ready".into(),
            effect: "NoSchedule".into(),
            ..Default::default()
        }]);
        assert!(
            not_initialized_reason(&c, &n)
                .unwrap()
                .contains("ephemeral")
        );
        n.spec.as_mut().unwrap().taints = None;
        assert_eq!(not_initialized_reason(&c, &n), None);
    }

    #[test]
    fn registration_patch_syncs_claim_onto_node() {
        let mut c = node_claim("x");
        c.metadata.uid = Some("uid-1".into());
        c.spec.taints = vec![karpenter_cloudprovider::v1::Taint::new(
            "dedicated",
            "gpu",
            karpenter_cloudprovider::v1::TaintEffect::NoSchedule,
        )];
        let n = node("x", "fake://z/x");
        let p = registered_node_patch(&c, &n);
        let taints = p["spec"]["taints"].as_array().unwrap();
        assert!(
            taints
                .iter()
                .all(|t| t["key"] != v1labels::UNREGISTERED_TAINT_KEY)
        );
        assert!(taints.iter().any(|t| t["key"] == "dedicated"));
        assert_eq!(p["metadata"]["labels"][REGISTERED_LABEL], "true");
        assert_eq!(
            p["metadata"]["finalizers"][0],
            v1labels::TERMINATION_FINALIZER
        );
        assert_eq!(p["metadata"]["ownerReferences"][0]["kind"], "NodeClaim");
    }
}
