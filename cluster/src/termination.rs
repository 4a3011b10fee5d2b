//! Termination: what Karpenter's terminator does to a node whose NodeClaim is being deleted.
//!
//! 1. Taint it `karpenter.sh/disrupted:NoSchedule` so nothing new lands there.
//! 2. Evict its pods in upstream's order ([`karpenter_disruption::eviction_order`]): a wave
//!    starts only when the previous one is gone. Each eviction goes through the pod's
//!    PodDisruptionBudgets; a refused eviction is retried on the next reconcile. Pods with an
//!    active `karpenter.sh/do-not-disrupt` are not evicted.
//! 3. Once the NodeClaim's `terminationGracePeriod` has passed since deletion began, or the
//!    time in its `karpenter.sh/nodeclaim-termination-timestamp` annotation (set by node
//!    repair), every remaining pod is deleted regardless of budgets and annotations.
//! 4. When no pod is left (evicted pods included, until their grace period has run out), the
//!    instance is terminated and the Node and NodeClaim go away.

use super::{Action, ClusterState, PodRecord};
use crate::deletion::DeletionCause;
use crate::reconciler::conditions::ConditionChange;
use k8s_openapi::api::core::v1::{PersistentVolume, Pod as K8sPod, Taint as K8sTaint, Toleration};
use karpenter_cloudprovider::NodeClaim;
use karpenter_cloudprovider::v1::labels::DISRUPTED_TAINT_KEY;
use karpenter_cloudprovider::v1::labels::NODECLAIM_TERMINATION_TIMESTAMP_ANNOTATION;
use karpenter_cloudprovider::v1::{ConditionStatus, ConditionType, StatusConditions};
use karpenter_disruption::candidate::do_not_disrupt_active;
use karpenter_disruption::eviction_order;
use karpenter_scheduling::model::{Millis, PodKey};
use karpenter_scheduling::taints::Taint;
use std::collections::{BTreeMap, BTreeSet};

/// How often a node being drained is reconciled (eviction retries).
pub const RECONCILE_INTERVAL_MS: Millis = 1_000;

/// Whether the deleting `claim` must stop waiting on budgets, `do-not-disrupt` and
/// VolumeAttachments at `now`: its `terminationGracePeriod` has run out since deletion
/// began, or the termination-timestamp annotation (RFC 3339) has passed.
pub fn deadline_passed(claim: &NodeClaim, now: Millis) -> bool {
    let Some(started) = claim.metadata.deletion_timestamp.as_ref() else {
        return false;
    };
    let grace = claim
        .spec
        .termination_grace_period
        .as_ref()
        .is_some_and(|g| now >= started.0.as_millisecond() + g.millis());
    let annotated = claim
        .annotation(NODECLAIM_TERMINATION_TIMESTAMP_ANNOTATION)
        .and_then(|t| t.parse::<jiff::Timestamp>().ok())
        .is_some_and(|t| now >= t.as_millisecond());
    grace || annotated
}

/// `taints` with (`on`) or without the `karpenter.sh/disrupted:NoSchedule` taint, or `None`
/// when they already are so.
pub fn with_disrupted_taint(taints: &[K8sTaint], on: bool) -> Option<Vec<K8sTaint>> {
    let disrupted = |t: &K8sTaint| t.key == DISRUPTED_TAINT_KEY && t.effect == "NoSchedule";
    if taints.iter().any(disrupted) == on {
        return None;
    }
    let mut out: Vec<K8sTaint> = taints.iter().filter(|t| !disrupted(t)).cloned().collect();
    if on {
        out.push(K8sTaint {
            key: DISRUPTED_TAINT_KEY.to_owned(),
            effect: "NoSchedule".to_owned(),
            ..K8sTaint::default()
        });
    }
    Some(out)
}

/// Where a drained claim stands with the VolumeAttachments still on its node, as upstream's
/// terminator decides before terminating the instance.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Volumes {
    /// None left: terminate.
    Detached,
    /// Some left and the grace period has not run out: wait.
    Awaiting,
    /// Some left, but the grace period ran out: terminate anyway.
    GracePeriodElapsed,
}

impl Volumes {
    /// The decision for `claim` with `pending` VolumeAttachments on its node at `now`.
    pub fn of(claim: &NodeClaim, pending: usize, now: Millis) -> Self {
        if pending == 0 {
            Self::Detached
        } else if deadline_passed(claim, now) {
            Self::GracePeriodElapsed
        } else {
            Self::Awaiting
        }
    }

    /// Whether the instance may be terminated.
    pub fn proceed(self) -> bool {
        self != Self::Awaiting
    }

    /// The claim's `VolumesDetached` condition, as upstream writes it.
    pub fn condition(self) -> ConditionChange {
        let (status, reason) = match self {
            Self::Detached => (ConditionStatus::True, "VolumesDetached"),
            Self::Awaiting => (ConditionStatus::Unknown, "AwaitingVolumeDetachment"),
            Self::GracePeriodElapsed => (ConditionStatus::False, "TerminationGracePeriodElapsed"),
        };
        ConditionChange::set(ConditionType::VolumesDetached, status, reason)
    }
}

/// Whether upstream's `IsDrainable` is false for `pod` at `now`: it tolerates
/// `karpenter.sh/disrupted:NoSchedule`, it is a mirror pod (owned by its Node), or it is stuck
/// terminating (a minute past the end of its grace period, which `deletionTimestamp` marks).
pub fn undrainable(pod: &K8sPod, now: Millis) -> bool {
    let tolerates = |t: &Toleration| {
        let effect = t
            .effect
            .as_deref()
            .is_none_or(|e| e.is_empty() || e == "NoSchedule");
        let key = t.key.as_deref().unwrap_or_default();
        let matches = match t.operator.as_deref() {
            Some("Exists") => key.is_empty() || key == DISRUPTED_TAINT_KEY,
            _ => key == DISRUPTED_TAINT_KEY && t.value.as_deref().unwrap_or_default().is_empty(),
        };
        effect && matches
    };
    let spec = pod.spec.as_ref();
    let tolerations = spec
        .and_then(|s| s.tolerations.as_ref())
        .into_iter()
        .flatten();
    let owners = pod.metadata.owner_references.iter().flatten();
    let stuck = pod.metadata.deletion_timestamp.as_ref();
    tolerations.into_iter().any(tolerates)
        || owners.into_iter().any(|o| o.kind == "Node")
        || stuck.is_some_and(|t| now > t.0.as_millisecond() + crate::STUCK_TERMINATING_MS)
}

/// The PersistentVolumeClaims `(namespace, name)` of the `pods` that cannot be drained
/// ([`undrainable`]), ephemeral volumes' claims included. Upstream's terminator does not wait
/// for the VolumeAttachments of their volumes: nothing will detach them before the instance
/// goes.
pub fn undrainable_claims<'a>(
    pods: impl IntoIterator<Item = &'a K8sPod>,
    now: Millis,
) -> BTreeSet<(String, String)> {
    let mut out = BTreeSet::new();
    for pod in pods.into_iter().filter(|p| undrainable(p, now)) {
        let namespace = pod.metadata.namespace.clone().unwrap_or_default();
        let name = pod.metadata.name.as_deref().unwrap_or_default();
        let volumes = pod.spec.as_ref().map(|s| s.volumes.iter().flatten());
        for v in volumes.into_iter().flatten() {
            let claim = match (&v.persistent_volume_claim, &v.ephemeral) {
                (Some(pvc), _) => pvc.claim_name.clone(),
                (None, Some(_)) => format!("{name}-{}", v.name),
                (None, None) => continue,
            };
            out.insert((namespace.clone(), claim));
        }
    }
    out
}

/// Whether `volume` is bound to one of `claims` (`(namespace, name)`, see
/// [`undrainable_claims`]).
pub fn claimed_by(volume: &PersistentVolume, claims: &BTreeSet<(String, String)>) -> bool {
    let claim_ref = volume.spec.as_ref().and_then(|s| s.claim_ref.as_ref());
    claim_ref.is_some_and(|r| {
        let key = (
            r.namespace.clone().unwrap_or_default(),
            r.name.clone().unwrap_or_default(),
        );
        claims.contains(&key)
    })
}

/// How often a claim whose instance is shutting down asks the provider again whether it is
/// gone (upstream's terminator requeues after 5 s).
pub const INSTANCE_POLL_MS: Millis = 5_000;

/// Whether `claim`'s instance termination has begun: the provider accepted the delete and
/// its `InstanceTerminating` condition is true. Its finalizer stays until the provider
/// reports the instance gone, as upstream's.
pub fn instance_terminating(claim: &NodeClaim) -> bool {
    claim
        .condition(ConditionType::InstanceTerminating.as_str())
        .is_some_and(|c| c.status == ConditionStatus::True)
}

/// Whether a deleting NodeClaim (with the termination finalizer) is waiting for its instance
/// to be gone: the caller asks again after [`INSTANCE_POLL_MS`].
pub fn instances_shutting_down(state: &ClusterState) -> bool {
    state.deleting_claims().any(|(claim, _)| {
        crate::registration::has_termination_finalizer(claim) && instance_terminating(claim)
    })
}

/// How termination starts, for the deleting NodeClaims and Nodes only: a Node deleted out
/// of band takes its NodeClaim with it; a deleting NodeClaim (with the termination
/// finalizer) gets its Node deleted, so the drain below begins, or, with no Node left, its
/// instance terminated.
pub fn start(state: &ClusterState) -> Vec<Action> {
    let mut actions = Vec::new();
    for (_, record) in state.deleting_nodes() {
        let Some(claim) = record
            .node_claim
            .as_ref()
            .and_then(|c| state.node_claims().get(c))
        else {
            continue;
        };
        if !claim.is_deleting() {
            actions.push(Action::DeleteNodeClaim {
                node_claim: claim.name().to_owned(),
                cause: DeletionCause::NodeDeleted,
            });
        }
    }
    for (claim, node) in state.deleting_claims() {
        if !crate::registration::has_termination_finalizer(claim) {
            continue;
        }
        match node {
            Some(record) if !record.deleting => actions.push(Action::DeleteNode {
                node: record.node.name.clone(),
            }),
            // Drained by `step`.
            Some(_) => {}
            None => actions.push(Action::TerminateInstance {
                node_claim: claim.name().to_owned(),
                node: None,
            }),
        }
    }
    actions
}

/// Whether node `name` is drained at `now`: every pod left that Karpenter drains is
/// terminating, and none is still within its grace period (those hold the instance until
/// they are gone or stuck, as upstream's drain waits).
pub fn drained(state: &ClusterState, name: &str, now: Millis) -> bool {
    state.pods_on(name).all(|p| !p.is_waiting_eviction(now))
}

/// Upstream's `IsDrainable` on the solver's pod (terminating pods are left out apart): a pod
/// that tolerates `karpenter.sh/disrupted:NoSchedule` (a DaemonSet's tolerating everything,
/// typically) would only come back to the node, and a mirror pod cannot be deleted through
/// the API, so neither is evicted nor holds the node's termination; they go with the node.
fn awaits_eviction(pod: &karpenter_scheduling::model::Pod, disrupted: &Taint) -> bool {
    !pod.tolerations.iter().any(|t| t.tolerates(disrupted))
        && pod.owner.as_ref().is_none_or(|o| o.kind != "Node")
}

/// One reconcile of every terminating node at `now`: the actions, and whether any node is
/// still draining (so the caller reconciles again after [`RECONCILE_INTERVAL_MS`]).
pub fn step(state: &ClusterState, now: Millis) -> (Vec<Action>, bool) {
    let mut actions = Vec::new();
    let mut draining = false;
    if state.deleting_nodes().next().is_none() {
        return (actions, draining);
    }
    // PDB allowances are shared by every node drained in this reconcile.
    let mut allowed: BTreeMap<String, i32> = BTreeMap::new();
    let budgets = state.pdb_budgets(now);
    let disrupted = crate::disrupted_taint();
    for budget in &budgets {
        allowed.insert(budget.key(), budget.disruptions_allowed);
    }
    for (name, record) in state.deleting_nodes() {
        if !record.is_disrupted() {
            actions.push(Action::TaintDisrupted { node: name.clone() });
        }
        let claim = record
            .node_claim
            .as_ref()
            .and_then(|c| state.node_claims().get(c));
        let grace_over = claim.is_some_and(|c| deadline_passed(c, now));
        let pods: Vec<&PodRecord> = state
            .pods_on(name)
            .filter(|p| !p.pod.terminating && awaits_eviction(&p.pod, &disrupted))
            .collect();
        if pods.is_empty() {
            if !drained(state, name, now) {
                draining = true;
                continue;
            }
            if let Some(claim) = &record.node_claim {
                actions.push(Action::TerminateInstance {
                    node_claim: claim.clone(),
                    node: Some(name.clone()),
                });
            }
            continue;
        }
        draining = true;
        let by_key: BTreeMap<PodKey, &PodRecord> = pods.iter().map(|p| (p.pod.key(), *p)).collect();
        let waves = eviction_order(pods.iter().map(|p| &p.pod));
        let Some(wave) = waves.iter().find(|w| !w.is_empty()) else {
            continue;
        };
        for key in wave {
            let Some(record) = by_key.get(key) else {
                continue;
            };
            if grace_over {
                actions.push(Action::DeletePod {
                    pod: key.clone(),
                    node: name.clone(),
                });
                continue;
            }
            if do_not_disrupt_active(&record.pod, now) {
                continue;
            }
            let covering: Vec<String> = budgets
                .iter()
                .filter(|b| b.matches(&record.pod))
                .map(|b| b.key())
                .collect();
            let unhealthy_ok = !record.is_ready(now)
                && budgets
                    .iter()
                    .filter(|b| b.matches(&record.pod))
                    .all(|b| b.always_allow_unhealthy);
            // The eviction API refuses a pod under several budgets.
            if covering.len() > 1 {
                continue;
            }
            if let Some(pdb) = covering.first()
                && !unhealthy_ok
            {
                let left = allowed.entry(pdb.clone()).or_insert(0);
                if *left <= 0 {
                    continue;
                }
                *left -= 1;
            }
            actions.push(Action::EvictPod {
                pod: key.clone(),
                node: name.clone(),
            });
        }
    }
    (actions, draining)
}

#[cfg(test)]
mod volume_tests {
    use super::*;
    use crate::provisioner::time;

    #[test]
    fn volumes_hold_the_instance_until_detached_or_the_grace_period_ends() {
        let mut claim: NodeClaim = serde_json::from_value(serde_json::json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
            "metadata": {"name": "c"},
            "spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                     "requirements": [], "terminationGracePeriod": "30s"}
        }))
        .unwrap();
        claim.metadata.deletion_timestamp = Some(time(1_000));
        assert_eq!(Volumes::of(&claim, 0, 2_000), Volumes::Detached);
        assert_eq!(Volumes::of(&claim, 2, 2_000), Volumes::Awaiting);
        assert!(!Volumes::Awaiting.proceed());
        assert_eq!(Volumes::of(&claim, 2, 31_000), Volumes::GracePeriodElapsed);
        assert!(Volumes::GracePeriodElapsed.proceed());
        let reasons: Vec<(ConditionStatus, String)> = [
            Volumes::Detached,
            Volumes::Awaiting,
            Volumes::GracePeriodElapsed,
        ]
        .iter()
        .map(|v| {
            let (status, reason, _) = v.condition().to.unwrap();
            (status, reason)
        })
        .collect();
        assert_eq!(
            reasons,
            [
                (ConditionStatus::True, "VolumesDetached".to_owned()),
                (
                    ConditionStatus::Unknown,
                    "AwaitingVolumeDetachment".to_owned()
                ),
                (
                    ConditionStatus::False,
                    "TerminationGracePeriodElapsed".to_owned()
                ),
            ]
        );
    }
}

#[cfg(test)]
mod taint_tests {
    use super::*;

    #[test]
    fn undrainable_pods_volumes_do_not_hold_the_instance() {
        let pod = |extra: serde_json::Value| -> K8sPod {
            let mut v = serde_json::json!({
                "metadata": {"name": "db-0", "namespace": "prod"},
                "spec": {"containers": [], "volumes": [
                    {"name": "data", "persistentVolumeClaim": {"claimName": "data-db-0"}},
                    {"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {}}}},
                    {"name": "cfg", "configMap": {"name": "c"}}
                ]}
            });
            json_merge(&mut v, extra);
            serde_json::from_value(v).unwrap()
        };
        let now = 1_000_000;
        let plain = pod(serde_json::json!({}));
        assert!(!undrainable(&plain, now));
        assert!(undrainable_claims([&plain], now).is_empty());
        let tolerant = pod(serde_json::json!({"spec": {"tolerations": [{"operator": "Exists"}]}}));
        assert!(undrainable(&tolerant, now));
        assert_eq!(
            undrainable_claims([&tolerant], now),
            BTreeSet::from([
                ("prod".to_owned(), "data-db-0".to_owned()),
                ("prod".to_owned(), "db-0-scratch".to_owned()),
            ])
        );
        let keyed = pod(serde_json::json!({"spec": {"tolerations": [
            {"key": "karpenter.sh/disrupted", "effect": "NoSchedule"}]}}));
        assert!(undrainable(&keyed, now));
        let other_effect = pod(serde_json::json!({"spec": {"tolerations": [
            {"key": "karpenter.sh/disrupted", "effect": "NoExecute"}]}}));
        assert!(!undrainable(&other_effect, now));
        let mirror = pod(serde_json::json!({"metadata": {"ownerReferences": [
            {"apiVersion": "v1", "kind": "Node", "name": "n", "uid": "u"}]}}));
        assert!(undrainable(&mirror, now));
        let deleted = |at: i64| {
            let ts = jiff::Timestamp::from_millisecond(at).unwrap().to_string();
            pod(serde_json::json!({"metadata": {"deletionTimestamp": ts}}))
        };
        assert!(
            !undrainable(&deleted(now - 30_000), now),
            "within its grace period"
        );
        assert!(
            undrainable(&deleted(now - 61_000), now),
            "stuck terminating"
        );
    }

    fn json_merge(base: &mut serde_json::Value, extra: serde_json::Value) {
        match (base, extra) {
            (serde_json::Value::Object(b), serde_json::Value::Object(e)) => {
                for (k, v) in e {
                    json_merge(b.entry(k).or_insert(serde_json::Value::Null), v);
                }
            }
            (b, e) => *b = e,
        }
    }

    #[test]
    fn the_disrupted_taint_is_added_and_removed_once() {
        let other = K8sTaint {
            key: "team".into(),
            value: Some("a".into()),
            effect: "NoSchedule".into(),
            ..K8sTaint::default()
        };
        let on = with_disrupted_taint(std::slice::from_ref(&other), true).unwrap();
        assert_eq!(on.len(), 2);
        assert_eq!(on[1].key, DISRUPTED_TAINT_KEY);
        assert_eq!(with_disrupted_taint(&on, true), None, "already tainted");
        assert_eq!(with_disrupted_taint(&on, false), Some(vec![other.clone()]));
        assert_eq!(with_disrupted_taint(&[other], false), None);
    }
}
