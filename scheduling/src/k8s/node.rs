//! `Node` into [`model::Node`], with Karpenter's view of taints and lifecycle.

use super::{ConversionError, cluster_scoped, labels, millis, resources, taint_effect};
use crate::labels::{NODE_INITIALIZED, NODEPOOL};
use crate::model::{self, NodeState};
use crate::taints::{Taint, TaintEffect};
use k8s_openapi::api::core::v1 as core;

/// `karpenter.sh/disrupted`: Karpenter's NoSchedule taint on a node it is about to remove.
const DISRUPTED_TAINT_KEY: &str = "karpenter.sh/disrupted";

/// Key prefixes of taint families a controller adds while a node comes up (the Node
/// Readiness Controller's `readiness.k8s.io/<rule>`), as Karpenter's
/// `KnownEphemeralTaintKeyPrefixes`.
pub const EPHEMERAL_TAINT_KEY_PREFIXES: &[&str] = &["readiness.k8s.io/"];

/// The taints Karpenter expects on a node while it initializes and therefore ignores until
/// it is initialized (`KnownEphemeralTaints`): not-ready (NoSchedule and NoExecute),
/// unreachable (NoSchedule), the cloud provider's `uninitialized` (NoSchedule) and
/// `karpenter.sh/unregistered` (NoExecute).
pub fn ephemeral_taints() -> Vec<Taint> {
    vec![
        Taint::new("node.kubernetes.io/not-ready", "", TaintEffect::NoSchedule),
        Taint::new("node.kubernetes.io/not-ready", "", TaintEffect::NoExecute),
        Taint::new(
            "node.kubernetes.io/unreachable",
            "",
            TaintEffect::NoSchedule,
        ),
        Taint::new(
            "node.cloudprovider.kubernetes.io/uninitialized",
            "true",
            TaintEffect::NoSchedule,
        ),
        Taint::new("karpenter.sh/unregistered", "", TaintEffect::NoExecute),
    ]
}

/// Whether `taint` is one Karpenter treats as ephemeral: same key and effect as one of
/// [`ephemeral_taints`] (values are not compared, as `MatchTaint` does not compare them), or
/// a key under one of [`EPHEMERAL_TAINT_KEY_PREFIXES`].
pub fn is_ephemeral_taint(taint: &Taint) -> bool {
    ephemeral_taints()
        .iter()
        .any(|e| same_key_and_effect(e, taint))
        || EPHEMERAL_TAINT_KEY_PREFIXES
            .iter()
            .any(|p| taint.key.starts_with(p))
}

// Compared locally rather than through `Taint::matches` so the rule stays exactly
// `MatchTaint`'s (key and effect) regardless of how that helper evolves.
fn same_key_and_effect(a: &Taint, b: &Taint) -> bool {
    a.key == b.key && a.effect == b.effect
}

/// Converts a Node as Karpenter's cluster state sees it.
///
/// - A node is *managed* when it carries the `karpenter.sh/nodepool` label (which is also its
///   `node_pool`), and *initialized* when unmanaged or labelled `karpenter.sh/initialized=true`.
/// - Taints: while a managed node is not initialized, the ephemeral taints
///   ([`is_ephemeral_taint`]) and the given `startup_taints` (the NodePool's or NodeClaim's,
///   matched by key and effect) are dropped, because they are expected to go away; once it is
///   initialized every taint counts, as in `StateNode.Taints`.
/// - State: `Deleting` when it has a `deletionTimestamp` or the `karpenter.sh/disrupted`
///   NoSchedule taint (Karpenter marked it for disruption); otherwise `InFlight` when its
///   `Ready` condition is not `True` or it is managed and not initialized; otherwise `Ready`.
/// - `price` is left at 0: a Node does not say what it costs.
///
/// # Errors
/// A [`ConversionError`] naming the node and field for a missing name, an unknown taint
/// effect, or a malformed or negative capacity/allocatable quantity.
pub fn node_from_k8s(
    node: &core::Node,
    startup_taints: &[Taint],
) -> Result<model::Node, ConversionError> {
    let (ctx, name) = cluster_scoped("Node", &node.metadata)?;
    let labels = labels(node.metadata.labels.as_ref());
    let node_pool = labels.get(NODEPOOL).cloned();
    let managed = node_pool.is_some();
    let initialized = !managed || labels.get(NODE_INITIALIZED).is_some_and(|v| v == "true");

    let spec = node.spec.as_ref();
    let mut all_taints = Vec::new();
    for (i, t) in spec
        .and_then(|s| s.taints.as_ref())
        .into_iter()
        .flatten()
        .enumerate()
    {
        let effect = taint_effect(&ctx, &format!("spec.taints[{i}].effect"), &t.effect)?;
        all_taints.push(Taint::new(
            t.key.clone(),
            t.value.clone().unwrap_or_default(),
            effect,
        ));
    }
    let disrupted = all_taints
        .iter()
        .any(|t| t.key == DISRUPTED_TAINT_KEY && t.effect == TaintEffect::NoSchedule);
    let taints = if initialized {
        all_taints
    } else {
        all_taints
            .into_iter()
            .filter(|t| {
                !is_ephemeral_taint(t) && !startup_taints.iter().any(|s| same_key_and_effect(s, t))
            })
            .collect()
    };

    let status = node.status.as_ref();
    let ready = status
        .and_then(|s| s.conditions.as_ref())
        .into_iter()
        .flatten()
        .any(|c| c.type_ == "Ready" && c.status == "True");
    let state = if node.metadata.deletion_timestamp.is_some() || disrupted {
        NodeState::Deleting
    } else if !ready || !initialized {
        NodeState::InFlight
    } else {
        NodeState::Ready
    };

    Ok(model::Node {
        // Filled from the node's ResourceSlices by whoever tracks them.
        devices: Vec::new(),
        name,
        node_pool,
        annotations: super::labels(node.metadata.annotations.as_ref()),
        taints,
        allocatable: resources(
            &ctx,
            "status.allocatable",
            status.and_then(|s| s.allocatable.as_ref()),
        )?,
        capacity: resources(
            &ctx,
            "status.capacity",
            status.and_then(|s| s.capacity.as_ref()),
        )?,
        state,
        price: 0.0,
        created_at: millis(node.metadata.creation_timestamp.as_ref()).unwrap_or_default(),
        labels,
        // A property of a consolidation simulation, not of the Node object.
        under_consolidate_after: false,
    })
}
