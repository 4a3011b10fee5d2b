//! The latest NodeOverlay evaluation, shared between the controller that evaluates overlays
//! and a cloud provider that launches. Upstream's AWS provider reads the overlay store at
//! launch: the instance types it narrows to the cheapest 60 and the priorities it sends to
//! CreateFleet carry the overlaid prices, so a price overlay steers what is launched, not
//! only what the scheduler compares.

use super::{Evaluation, UnevaluatedNodePool};
use karpenter_scheduling::model::InstanceType;
use std::sync::{Arc, RwLock};

/// A handle on the latest [`Evaluation`]; clones share it. Empty until the first
/// [`Published::publish`], which is how it stays when the NodeOverlay gate is off.
#[derive(Debug, Clone, Default)]
pub struct Published(Arc<RwLock<Option<Arc<Evaluation>>>>);

impl Published {
    /// Makes `evaluation` the one [`Published::apply`] uses from now on.
    pub fn publish(&self, evaluation: Evaluation) {
        // A poisoned lock only means a reader panicked; the value is still whole.
        let mut slot = self.0.write().unwrap_or_else(|e| e.into_inner());
        *slot = Some(Arc::new(evaluation));
    }

    /// `types` of `pool` with the published overlays applied; `types` unchanged when
    /// nothing was published (the NodeOverlay gate is off).
    ///
    /// # Errors
    /// `pool` was not part of the published evaluation (a pool created since): as
    /// upstream, the launch waits for the next evaluation.
    pub fn apply(
        &self,
        pool: &str,
        types: &[Arc<InstanceType>],
    ) -> Result<Vec<Arc<InstanceType>>, UnevaluatedNodePool> {
        let current = self.0.read().unwrap_or_else(|e| e.into_inner()).clone();
        match current {
            None => Ok(types.to_vec()),
            Some(evaluation) => evaluation.apply(pool, types),
        }
    }
}
