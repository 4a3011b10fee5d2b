//! NodeClaims launched over instance types that NodeOverlays changed carry Karpenter's
//! annotations saying so (`karpenter.sh/price-overlay-applied`,
//! `karpenter.sh/capacity-overlay-applied`), decided from the claim's own instance-type
//! options. Both the controller and the simulator annotate the launches a tick decided.

use crate::Action;
use karpenter_cloudprovider::overlay::{Evaluation, overlay_instance_types};
use karpenter_cloudprovider::v1::NodeSelectorOperator;
use karpenter_cloudprovider::{NodeOverlay, NodePool};
use karpenter_scheduling::labels::INSTANCE_TYPE;
use karpenter_scheduling::model::InstanceType;
use std::collections::BTreeMap;
use std::sync::Arc;

/// What an evaluation was computed from: each overlay's and each pool's name and generation.
type Fingerprint = Vec<(String, Option<i64>)>;

fn fingerprint(overlays: &[Arc<NodeOverlay>], pools: &[Arc<NodePool>]) -> Fingerprint {
    let mut f: Fingerprint = overlays
        .iter()
        .map(|o| (format!("o/{}", o.name()), o.metadata.generation))
        .chain(
            pools
                .iter()
                .map(|p| (format!("p/{}", p.name()), p.metadata.generation)),
        )
        .collect();
    f.sort();
    f
}

/// A controller's NodeOverlay bookkeeping: what the last evaluation was computed from (so
/// that a changed overlay or NodePool triggers a new one) and its result (for the launches'
/// annotations).
#[derive(Debug, Default)]
pub struct OverlayState {
    evaluated: Option<Fingerprint>,
    last: Option<Evaluation>,
}

impl OverlayState {
    /// Whether an overlay or a NodePool changed (by generation) since the last evaluation,
    /// so instance types must be refreshed and overlaid again.
    pub fn stale(&self, overlays: &[Arc<NodeOverlay>], pools: &[Arc<NodePool>]) -> bool {
        self.evaluated.as_ref() != Some(&fingerprint(overlays, pools))
    }

    /// `raw` (the provider's instance types by pool) with `overlays` applied, and the
    /// evaluation (for the overlays' status). Overlays are taken in name order.
    pub fn apply(
        &mut self,
        mut overlays: Vec<Arc<NodeOverlay>>,
        pools: &[Arc<NodePool>],
        raw: BTreeMap<String, Vec<Arc<InstanceType>>>,
    ) -> (BTreeMap<String, Vec<Arc<InstanceType>>>, Evaluation) {
        overlays.sort_by(|a, b| a.name().cmp(b.name()));
        self.evaluated = Some(fingerprint(&overlays, pools));
        let objects: Vec<NodeOverlay> = overlays.iter().map(|o| NodeOverlay::clone(o)).collect();
        let pool_refs: Vec<&NodePool> = pools.iter().map(AsRef::as_ref).collect();
        let (types, evaluation) = overlay_instance_types(&objects, &pool_refs, &raw);
        self.last = Some(evaluation.clone());
        (types, evaluation)
    }

    /// Forgets the last evaluation's inputs, so the next check finds it stale (after its
    /// status could not be written).
    pub fn forget(&mut self) {
        self.evaluated = None;
    }

    /// Annotates the launches among `actions` whose instance-type options were overlaid.
    pub fn annotate(&self, actions: &mut [Action]) {
        if let Some(evaluation) = &self.last {
            annotate_launches(actions, evaluation);
        }
    }
}

/// Adds the overlay annotations to every [`Action::LaunchNodeClaim`] in `actions` whose
/// instance-type options include a type `evaluation` overlaid in the claim's pool.
pub fn annotate_launches(actions: &mut [Action], evaluation: &Evaluation) {
    for action in actions {
        let Action::LaunchNodeClaim { claim, .. } = action else {
            continue;
        };
        let pool = claim.node_pool().unwrap_or_default().to_owned();
        let options = claim
            .spec
            .requirements
            .iter()
            .filter(|r| r.key == INSTANCE_TYPE && r.operator == NodeSelectorOperator::In)
            .flat_map(|r| r.values.iter().map(String::as_str));
        let marks = evaluation.claim_annotations(&pool, options);
        if marks.is_empty() {
            continue;
        }
        let annotations = claim.metadata.annotations.get_or_insert_with(BTreeMap::new);
        for (key, value) in marks {
            annotations.insert(key.to_owned(), value.to_owned());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use karpenter_cloudprovider::overlay::{
        CAPACITY_OVERLAY_APPLIED_ANNOTATION, PRICE_OVERLAY_APPLIED_ANNOTATION, evaluate,
    };
    use karpenter_cloudprovider::v1::{NodeClaim, NodeSelectorRequirementWithMinValues};
    use karpenter_cloudprovider::v1alpha1::{NodeOverlaySpec, NodeSelectorRequirement};
    use karpenter_cloudprovider::{NodeOverlay, NodePool};
    use karpenter_scheduling::NewNodeClaim;
    use karpenter_testing::instance_types::InstanceTypeBuilder;

    fn launch(pool: &str, types: &[&str]) -> Action {
        let mut claim: NodeClaim = serde_json::from_value(serde_json::json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
            "metadata": {"name": "c", "labels": {"karpenter.sh/nodepool": pool}},
            "spec": {"requirements": [], "nodeClassRef": {"group": "g", "kind": "k", "name": "n"}}
        }))
        .unwrap();
        claim.spec.requirements = vec![NodeSelectorRequirementWithMinValues::new(
            INSTANCE_TYPE,
            NodeSelectorOperator::In,
            types.iter().copied(),
        )];
        Action::LaunchNodeClaim {
            claim: Box::new(claim),
            plan: Box::new(NewNodeClaim {
                node_pool: pool.into(),
                requirements: Default::default(),
                instance_type_options: Default::default(),
                pods: Vec::new(),
                requests: Default::default(),
                daemon_overhead: Default::default(),
                price: 0.0,
            }),
        }
    }

    fn annotations(a: &Action) -> BTreeMap<String, String> {
        match a {
            Action::LaunchNodeClaim { claim, .. } => {
                claim.metadata.annotations.clone().unwrap_or_default()
            }
            _ => BTreeMap::new(),
        }
    }

    #[test]
    fn launches_over_overlaid_types_are_annotated() {
        let pool = NodePool::new("default", Default::default());
        let types = vec![
            InstanceTypeBuilder::new("small", 2, 4)
                .on_demand(0.1)
                .build(),
            InstanceTypeBuilder::new("large", 8, 16)
                .on_demand(0.4)
                .build(),
        ];
        let overlay = NodeOverlay::new(
            "cheap-small",
            NodeOverlaySpec {
                requirements: vec![NodeSelectorRequirement::new(
                    INSTANCE_TYPE,
                    NodeSelectorOperator::In,
                    ["small"],
                )],
                price_adjustment: Some("-10%".into()),
                ..NodeOverlaySpec::default()
            },
        );
        let evaluation = evaluate(&[overlay], &[(&pool, types.as_slice())]);
        let mut actions = vec![
            launch("default", &["small", "large"]),
            launch("default", &["large"]),
            launch("other", &["small"]),
        ];
        annotate_launches(&mut actions, &evaluation);
        assert_eq!(
            annotations(&actions[0]).get(PRICE_OVERLAY_APPLIED_ANNOTATION),
            Some(&"true".to_owned())
        );
        assert!(!annotations(&actions[0]).contains_key(CAPACITY_OVERLAY_APPLIED_ANNOTATION));
        assert!(annotations(&actions[1]).is_empty());
        assert!(annotations(&actions[2]).is_empty());
    }
}
