//! What a NodeClaim created from a plan's claim lists, as Karpenter builds it: the cheapest
//! [`MAX_INSTANCE_TYPES`] options (the AWS provider's launch-time `Truncate`), refused when
//! they no longer meet a requirement's `minValues` under the `Strict` policy, and the
//! capacity-type requirement narrowed to what those types offer (the core's `ToNodeClaim`).
//!
//! A plan's options are every instance type that fits; the list a NodeClaim carries is cut
//! so the cloud call stays small. Upstream's core lists up to 600 types and its AWS provider
//! cuts them to 60 when it launches; karpenter-rs cuts when it creates the NodeClaim, so the
//! claim says what will be launched. Either way the cut is checked as upstream checks it.

use super::MinValuesPolicy;
use super::nodeclaim::{check_min_values, offering_ok};
use crate::labels::CAPACITY_TYPE;
use crate::model::InstanceType;
use crate::plan::NewNodeClaim;
use crate::requirements::{Operator, Requirement};
use std::collections::BTreeSet;
use std::sync::Arc;

/// Upstream's launch cut: the most instance types a NodeClaim lists.
pub const MAX_INSTANCE_TYPES: usize = 60;

/// The instance types and capacity types a NodeClaim created for a planned claim lists.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LaunchCut {
    /// The cheapest options, at most the cut's size, cheapest first.
    pub instance_types: Vec<Arc<str>>,
    /// The capacity types those types offer for the claim (available offerings its
    /// requirements allow), sorted; empty when none of the types is known, and the claim's
    /// capacity-type requirement is then left as the plan wrote it.
    pub capacity_types: Vec<String>,
}

/// Why a claim cut to its cheapest types may not be launched.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{reason} among the {listed} cheapest instance types a NodeClaim lists")]
pub struct LaunchCutError {
    /// Which requirement's `minValues` the listed types miss, and by how much.
    pub reason: String,
    /// How many types were listed.
    pub listed: usize,
}

/// The cut of `claim` to its `max` cheapest options. `types` finds an option's instance type
/// (the claim's NodePool's). Under [`MinValuesPolicy::Strict`] a cut that leaves some
/// requirement of the claim fewer distinct values than its `minValues` is refused, as
/// upstream's `Truncate` refuses the launch; under `BestEffort` it is kept.
pub fn launch_cut<'t>(
    claim: &NewNodeClaim,
    types: impl Fn(&str) -> Option<&'t InstanceType>,
    max: usize,
    policy: MinValuesPolicy,
) -> Result<LaunchCut, LaunchCutError> {
    let listed: Vec<&Arc<str>> = claim
        .instance_type_options
        .iter()
        .take(max)
        .map(|o| &o.name)
        .collect();
    let known: Vec<&InstanceType> = listed.iter().filter_map(|n| types(n)).collect();
    if policy == MinValuesPolicy::Strict && claim.requirements.has_min_values() {
        let all: Vec<u32> = (0..known.len() as u32).collect();
        check_min_values(&known, &all, &claim.requirements, policy).map_err(|reason| {
            LaunchCutError {
                reason,
                listed: listed.len(),
            }
        })?;
    }
    let capacity_types: BTreeSet<&str> = known
        .iter()
        .flat_map(|it| &it.offerings)
        .filter(|o| offering_ok(o, &claim.requirements))
        .map(|o| o.capacity_type.as_str())
        .collect();
    Ok(LaunchCut {
        instance_types: listed.into_iter().cloned().collect(),
        capacity_types: capacity_types.into_iter().map(str::to_owned).collect(),
    })
}

impl LaunchCut {
    /// The capacity-type requirement the NodeClaim gets: `In` the offered capacity types,
    /// or `None` when the cut found none (the plan's requirement stands).
    pub fn capacity_type_requirement(&self) -> Option<Requirement> {
        if self.capacity_types.is_empty() {
            return None;
        }
        Requirement::new(CAPACITY_TYPE, Operator::In, self.capacity_types.iter()).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::labels::{AWS_INSTANCE_FAMILY as INSTANCE_FAMILY, INSTANCE_TYPE, ZONE};
    use crate::model::Offering;
    use crate::plan::InstanceTypeOption;
    use crate::requirements::Requirements;
    use std::collections::HashMap;

    /// `n` types `f{i}.large` of family `f{i / per_family}`, price rising with `i`; the
    /// first `spot_from` have only on-demand offerings, the rest spot as well.
    fn catalogue(n: usize, per_family: usize, spot_from: usize) -> Vec<InstanceType> {
        (0..n)
            .map(|i| {
                let name = format!("f{i}.large");
                let mut requirements = Requirements::new();
                requirements.add(Requirement::new(INSTANCE_TYPE, Operator::In, [&name]).unwrap());
                requirements.add(
                    Requirement::new(
                        INSTANCE_FAMILY,
                        Operator::In,
                        [format!("f{}", i / per_family)],
                    )
                    .unwrap(),
                );
                let offering = |capacity_type: &str, price: f64| Offering {
                    zone: "zone-a".into(),
                    capacity_type: capacity_type.into(),
                    price,
                    available: true,
                    reservation: None,
                };
                let price = 0.01 * (i + 1) as f64;
                let mut offerings = vec![offering("on-demand", price)];
                if i >= spot_from {
                    offerings.push(offering("spot", price / 3.0));
                }
                InstanceType {
                    devices: Vec::new(),
                    name,
                    requirements,
                    capacity: Default::default(),
                    overhead: Default::default(),
                    offerings,
                }
            })
            .collect()
    }

    fn claim(types: &[InstanceType], requirements: Requirements) -> NewNodeClaim {
        NewNodeClaim {
            node_pool: "default".into(),
            requirements,
            instance_type_options: Arc::new(
                types
                    .iter()
                    .map(|it| InstanceTypeOption {
                        name: it.name.as_str().into(),
                        price: it.offerings[0].price,
                        zone: "zone-a".into(),
                        capacity_type: "on-demand".into(),
                    })
                    .collect(),
            ),
            pods: Vec::new(),
            requests: Default::default(),
            daemon_overhead: Default::default(),
            price: 0.01,
        }
    }

    fn families(min: u32) -> Requirements {
        let mut r = Requirements::new();
        r.add(
            Requirement::new(INSTANCE_FAMILY, Operator::Exists, Vec::<String>::new())
                .unwrap()
                .with_min_values(Some(min)),
        );
        r
    }

    #[test]
    fn the_cut_keeps_every_keys_min_values_or_refuses_under_strict() {
        // 100 types, 2 per family: the cheapest 60 span 30 families.
        let types = catalogue(100, 2, 0);
        let by_name: HashMap<&str, &InstanceType> =
            types.iter().map(|t| (t.name.as_str(), t)).collect();
        let lookup = |n: &str| by_name.get(n).copied();
        let ok = launch_cut(
            &claim(&types, families(30)),
            lookup,
            MAX_INSTANCE_TYPES,
            MinValuesPolicy::Strict,
        )
        .unwrap();
        assert_eq!(ok.instance_types.len(), 60);
        assert_eq!(&*ok.instance_types[0], "f0.large");
        let refused = launch_cut(
            &claim(&types, families(31)),
            lookup,
            MAX_INSTANCE_TYPES,
            MinValuesPolicy::Strict,
        )
        .unwrap_err();
        assert_eq!(refused.listed, 60);
        assert!(refused.reason.contains(INSTANCE_FAMILY), "{refused}");
        assert!(
            refused.to_string().contains("needs 31 distinct values")
                && refused.to_string().contains("offer 30"),
            "{refused}"
        );
        // BestEffort launches what the cut leaves, as upstream's Truncate allows.
        let relaxed = launch_cut(
            &claim(&types, families(31)),
            lookup,
            MAX_INSTANCE_TYPES,
            MinValuesPolicy::BestEffort,
        )
        .unwrap();
        assert_eq!(relaxed.instance_types.len(), 60);
    }

    #[test]
    fn the_capacity_types_are_those_the_listed_types_offer() {
        // Spot only from the 61st type on: the 60 listed offer on-demand alone.
        let types = catalogue(100, 1, 60);
        let by_name: HashMap<&str, &InstanceType> =
            types.iter().map(|t| (t.name.as_str(), t)).collect();
        let lookup = |n: &str| by_name.get(n).copied();
        let cut = launch_cut(
            &claim(&types, Requirements::new()),
            lookup,
            MAX_INSTANCE_TYPES,
            MinValuesPolicy::Strict,
        )
        .unwrap();
        assert_eq!(cut.capacity_types, ["on-demand"]);
        let r = cut.capacity_type_requirement().unwrap();
        assert!(r.has("on-demand") && !r.has("spot"));
        // With the 61st listed, spot is offered too.
        let cut = launch_cut(
            &claim(&types, Requirements::new()),
            lookup,
            61,
            MinValuesPolicy::Strict,
        )
        .unwrap();
        assert_eq!(cut.capacity_types, ["on-demand", "spot"]);
        // Offerings the claim's requirements exclude (another zone) do not count.
        let mut elsewhere = Requirements::new();
        elsewhere.add(Requirement::new(ZONE, Operator::In, ["zone-b"]).unwrap());
        let cut = launch_cut(
            &claim(&types, elsewhere),
            lookup,
            61,
            MinValuesPolicy::Strict,
        )
        .unwrap();
        assert!(cut.capacity_types.is_empty());
        assert!(cut.capacity_type_requirement().is_none());
    }
}
