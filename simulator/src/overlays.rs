//! NodeOverlays in a simulation: the scenario's overlays, applied to every NodePool's
//! instance types as the controller applies them when the NodeOverlay gate is on
//! (`settings.nodeOverlay`), with a log line whenever an overlay's verdict changes.

use karpenter_cloudprovider::overlay::{Evaluation, Verdict, overlay_instance_types};
use karpenter_cloudprovider::{NodeOverlay, NodePool};
use karpenter_cluster::Action;
use karpenter_cluster::overlay_annotations::annotate_launches;
use karpenter_scheduling::model::InstanceType;
use std::collections::BTreeMap;
use std::sync::Arc;

/// The scenario's NodeOverlays and their last verdicts.
#[derive(Debug, Default)]
pub struct Overlays {
    /// The NodeOverlay feature gate.
    enabled: bool,
    objects: BTreeMap<String, NodeOverlay>,
    verdicts: BTreeMap<String, Verdict>,
    /// The last evaluation, for the launches' annotations.
    last: Option<Evaluation>,
}

impl Overlays {
    /// No overlays yet; `enabled` is the NodeOverlay feature gate.
    pub fn new(enabled: bool) -> Self {
        Self {
            enabled,
            ..Self::default()
        }
    }

    /// Whether instance types must be recomputed across all pools (the gate is on and there
    /// is an overlay, or there was one whose changes must be undone).
    pub fn active(&self) -> bool {
        self.enabled && (!self.objects.is_empty() || !self.verdicts.is_empty())
    }

    /// Creates or replaces an overlay; returns the log line to print.
    pub fn apply(&mut self, overlay: NodeOverlay) -> String {
        let name = overlay.name().to_owned();
        let line = if !self.enabled {
            format!(
                "warning: nodeoverlay {name} ignored: the NodeOverlay feature gate is off (settings.nodeOverlay)"
            )
        } else if self.objects.contains_key(&name) {
            format!("updated nodeoverlay {name}")
        } else {
            format!("created nodeoverlay {name}")
        };
        self.objects.insert(name, overlay);
        line
    }

    /// Annotates the launches among `actions` whose options were overlaid, as Karpenter
    /// does (nothing with the gate off or before any evaluation).
    pub fn annotate(&self, actions: &mut [Action]) {
        if let Some(evaluation) = self.last.as_ref().filter(|_| self.active()) {
            annotate_launches(actions, evaluation);
        }
    }

    /// Deletes the overlay `name`; whether it existed.
    pub fn delete(&mut self, name: &str) -> bool {
        self.objects.remove(name).is_some()
    }

    /// `raw` (each pool's instance types from the provider) with the overlays applied, and
    /// a log line for each overlay whose verdict changed. With the gate off, `raw` as is.
    pub fn apply_to(
        &mut self,
        pools: &[NodePool],
        raw: BTreeMap<String, Vec<Arc<InstanceType>>>,
    ) -> (BTreeMap<String, Vec<Arc<InstanceType>>>, Vec<String>) {
        if !self.active() {
            return (raw, Vec::new());
        }
        let objects: Vec<NodeOverlay> = self.objects.values().cloned().collect();
        let pools: Vec<&NodePool> = pools.iter().collect();
        let (types, evaluation) = overlay_instance_types(&objects, &pools, &raw);
        let mut lines = Vec::new();
        for (name, verdict) in evaluation.verdicts() {
            if self.verdicts.get(name) == Some(verdict) {
                continue;
            }
            lines.push(match verdict.not_applied(name) {
                None => format!("nodeoverlay {name} applied"),
                Some(why) => format!("warning: {why}"),
            });
        }
        self.verdicts = evaluation.verdicts().clone();
        self.last = Some(evaluation);
        (types, lines)
    }
}
