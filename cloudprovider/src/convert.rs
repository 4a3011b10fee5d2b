//! From the API's [`NodePool`] to the solver's [`model::NodePool`].

use crate::v1::NodePool;
use crate::validation::ValidationErrors;
use karpenter_scheduling::model;
use karpenter_scheduling::requirements::{RequirementError, Requirements};
use karpenter_scheduling::{InstanceType, Quantity, Resources};
use std::collections::BTreeMap;
use std::sync::Arc;

/// Why a NodePool cannot be handed to the solver.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConversionError {
    /// The pool fails validation.
    #[error(transparent)]
    Invalid(#[from] ValidationErrors),
    /// A requirement the scheduling model rejects.
    #[error("NodePool {pool:?}: spec.template.spec.requirements: {source}")]
    Requirement {
        /// Pool name.
        pool: String,
        /// The model's error.
        source: RequirementError,
    },
    /// A limit that is not a quantity.
    #[error("NodePool {pool:?}: spec.limits[{resource}]: {reason}")]
    Limit {
        /// Pool name.
        pool: String,
        /// Resource name.
        resource: String,
        /// Why the quantity is invalid.
        reason: String,
    },
}

impl NodePool {
    /// The template's requirements in the scheduling model (labels not folded in).
    ///
    /// # Errors
    /// A requirement the model rejects (validation rejects such pools first).
    pub fn template_requirements(&self) -> Result<Requirements, RequirementError> {
        let reqs: Vec<_> = self
            .spec
            .template
            .spec
            .requirements
            .iter()
            .map(|r| r.to_model())
            .collect();
        Requirements::from_node_selector(&reqs)
    }

    /// Likely mistakes in the template's requirements, one line each naming the pool: a
    /// requirement that none of `types` meets (with the key it was probably meant for, as
    /// `instance-family In [c m r]` was meant for `instance-category`), and a key close to a
    /// well-known label that is not one (nodes would carry it as a custom label, filtering
    /// nothing). Restricted keys are left to validation, whose error names the likely fix.
    /// Empty for a pool whose requirements do not convert (validation rejects it).
    ///
    /// `types_of_region` says whether `types` are offered in the pool's region; when they are
    /// not (the embedded us-east-1 catalogue checking a manifest written for any region),
    /// requirements on zones, the region, zone IDs, capacity reservations and placement groups
    /// are not checked.
    pub fn requirement_hints(
        &self,
        types: &[std::sync::Arc<karpenter_scheduling::InstanceType>],
        types_of_region: bool,
    ) -> Vec<String> {
        use karpenter_scheduling::{hints, labels};
        let Ok(mut requirements) = self.template_requirements() else {
            return Vec::new();
        };
        if !types_of_region {
            for key in [
                labels::ZONE,
                labels::REGION,
                labels::ZONE_ID,
                labels::AWS_CAPACITY_RESERVATION_ID,
                labels::AWS_CAPACITY_RESERVATION_TYPE,
                labels::AWS_CAPACITY_RESERVATION_INTERRUPTIBLE,
                labels::AWS_PLACEMENT_GROUP_ID,
                labels::AWS_PLACEMENT_GROUP_PARTITION,
            ] {
                requirements.remove(key);
            }
        }
        let pool = self.name();
        let unmet = hints::unmet_requirements(&requirements, types)
            .into_iter()
            .map(|u| format!("NodePool {pool:?}: {u}"));
        let typos = requirements.iter().filter_map(|r| {
            let key = r.key();
            if labels::restricted_reason(key).is_some() {
                return None;
            }
            hints::likely_label(key).map(|meant| {
                format!(
                    "NodePool {pool:?}: requirement key {key} is not a well-known label, so it \
                     filters no instance type and nodes carry it as a custom label; did you \
                     mean {meant}?"
                )
            })
        });
        unmet.chain(typos).collect()
    }

    /// The solver's view of this pool: weight, template labels/annotations/taints,
    /// requirements (labels are not folded in; the solver adds them), limits, the capacity
    /// already in `usage`, and the provider's `instance_types` for the pool.
    ///
    /// The pool is validated first, so an invalid pool is never scheduled against.
    pub fn to_model(
        &self,
        instance_types: Vec<Arc<InstanceType>>,
        usage: Resources,
    ) -> Result<model::NodePool, ConversionError> {
        self.validate()?;
        let name = self.name().to_owned();
        let t = &self.spec.template;
        let requirements =
            self.template_requirements()
                .map_err(|source| ConversionError::Requirement {
                    pool: name.clone(),
                    source,
                })?;
        let mut limits = BTreeMap::new();
        for (resource, q) in &self.spec.limits {
            let parsed = Quantity::parse(&q.0).map_err(|e| ConversionError::Limit {
                pool: name.clone(),
                resource: resource.clone(),
                reason: e.to_string(),
            })?;
            limits.insert(resource.clone(), parsed);
        }
        Ok(model::NodePool {
            name,
            weight: self.weight(),
            labels: t.metadata.labels.clone(),
            annotations: t.metadata.annotations.clone(),
            taints: t.spec.taints.iter().map(|x| x.to_model()).collect(),
            startup_taints: t.spec.startup_taints.iter().map(|x| x.to_model()).collect(),
            requirements,
            limits,
            usage,
            instance_types,
        })
    }
}
