//! A pending pod's effective zone, as upstream's scheduler reports it in
//! `karpenter_scheduler_pending_pods_by_effective_zone_count`: the one zone its zone
//! requirement, its volumes' zones and its zone topology constraints leave it, `flexible`
//! when they leave several (or do not constrain the zone at all), `none` when they leave
//! none.

use super::Scheduler;
use super::topology::Topology;
use crate::labels::ZONE;
use crate::model::Pod;
use crate::requirements::{Operator, Requirement, Requirements};
use std::collections::{BTreeMap, BTreeSet};

/// The label value for a pod its constraints leave more than one zone.
pub const FLEXIBLE: &str = "flexible";
/// The label value for a pod its constraints leave no zone.
pub const NONE: &str = "none";

/// The zones pending pod `p`'s zone-keyed topology groups (spread, affinity, anti-affinity)
/// allow now: `None` when it owns no such group, `Err(())` when one allows no zone.
fn topology_zones<'t>(
    topology: &'t Topology,
    p: usize,
    pod: &Pod,
    requirements: &Requirements,
) -> Result<Option<BTreeSet<&'t str>>, ()> {
    let mut result: Option<BTreeSet<&str>> = None;
    for (key, domains) in topology.allowed_domains(p, pod, requirements) {
        if key != ZONE {
            continue;
        }
        if domains.is_empty() {
            return Err(());
        }
        let domains: BTreeSet<&str> = domains.into_iter().collect();
        result = Some(match result {
            None => domains,
            Some(r) => r.intersection(&domains).copied().collect(),
        });
    }
    Ok(result)
}

/// The effective zone of a pod with strict requirements `strict`, volume requirements
/// `volume`, and the zones its topology groups allow (`Ok(None)`: unconstrained).
/// Candidate zones come, in this order of precedence, from the zone requirement when it is
/// `In`, else from the volumes' `In` zones, else from the topology; each must then satisfy
/// all three.
fn effective_zone(
    strict: &Requirements,
    volume: &Requirements,
    topology: Result<Option<BTreeSet<&str>>, ()>,
) -> String {
    let Ok(topology) = topology else {
        return NONE.to_owned();
    };
    let zone = strict.get(ZONE);
    let volume_zone = volume.get(ZONE).filter(|r| r.operator() == Operator::In);
    let candidates: Vec<&str> = match (zone, volume_zone, &topology) {
        (Some(z), _, _) if z.operator() == Operator::In => z.values().collect(),
        (_, Some(v), _) => v.values().collect(),
        (_, _, Some(t)) if !t.is_empty() => t.iter().copied().collect(),
        _ => return FLEXIBLE.to_owned(),
    };
    let allows = |r: Option<&Requirement>, z: &str| r.is_none_or(|r| r.has(z));
    let mut matched = candidates.into_iter().filter(|z| {
        allows(zone, z)
            && allows(volume_zone, z)
            && topology
                .as_ref()
                .is_none_or(|t| t.is_empty() || t.contains(z))
    });
    match (matched.next(), matched.next()) {
        (Some(z), None) => z.to_owned(),
        (Some(_), Some(_)) => FLEXIBLE.to_owned(),
        (None, _) => NONE.to_owned(),
    }
}

impl Scheduler<'_> {
    /// The pending pods (not started: upstream counts phase `Pending`) to place, counted by
    /// effective zone, before any is placed.
    pub(super) fn pending_by_effective_zone(&self) -> BTreeMap<String, usize> {
        let mut counts = BTreeMap::new();
        for (p, pod) in self.pods.iter().enumerate() {
            if pod.is_daemon() || pod.started_at.is_some() {
                continue;
            }
            // A pod whose constraints cannot be read can go to no zone.
            let zone = match &self.base[p] {
                Ok(data) => {
                    let topology = topology_zones(&self.topology, p, pod, &data.requirements);
                    effective_zone(&data.strict, &data.volume, topology)
                }
                Err(_) => NONE.to_owned(),
            };
            *counts.entry(zone).or_insert(0) += 1;
        }
        counts
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reqs(zone: Option<(Operator, &[&str])>) -> Requirements {
        let mut r = Requirements::new();
        if let Some((op, values)) = zone {
            r.add(Requirement::new(ZONE, op, values.iter().map(|v| (*v).to_owned())).unwrap());
        }
        r
    }

    fn zones<'a>(z: &[&'a str]) -> Result<Option<BTreeSet<&'a str>>, ()> {
        Ok(Some(z.iter().copied().collect()))
    }

    #[test]
    fn the_rule_follows_upstream() {
        use Operator::{In, NotIn};
        let any = reqs(None);
        // Nothing constrains the zone.
        assert_eq!(effective_zone(&any, &any, Ok(None)), FLEXIBLE);
        // One zone required.
        assert_eq!(
            effective_zone(&reqs(Some((In, &["a"]))), &any, Ok(None)),
            "a"
        );
        assert_eq!(
            effective_zone(&reqs(Some((In, &["a", "b"]))), &any, Ok(None)),
            FLEXIBLE
        );
        // NotIn alone gives no candidates: flexible, as upstream.
        assert_eq!(
            effective_zone(&reqs(Some((NotIn, &["a"]))), &any, Ok(None)),
            FLEXIBLE
        );
        // The volume's zone, filtered by the pod's NotIn.
        assert_eq!(
            effective_zone(
                &reqs(Some((NotIn, &["a"]))),
                &reqs(Some((In, &["a", "b"]))),
                Ok(None)
            ),
            "b"
        );
        // Pod and volume disagree.
        assert_eq!(
            effective_zone(
                &reqs(Some((In, &["a"]))),
                &reqs(Some((In, &["b"]))),
                Ok(None)
            ),
            NONE
        );
        // Topology narrows the pod's zones to one, or none.
        assert_eq!(
            effective_zone(&reqs(Some((In, &["a", "b"]))), &any, zones(&["b", "c"])),
            "b"
        );
        assert_eq!(effective_zone(&any, &any, zones(&["c"])), "c");
        assert_eq!(
            effective_zone(&reqs(Some((In, &["a"]))), &any, zones(&["c"])),
            NONE
        );
        assert_eq!(effective_zone(&any, &any, Err(())), NONE);
    }
}
