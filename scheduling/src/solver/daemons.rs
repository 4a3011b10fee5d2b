//! DaemonSet overhead (`buildDaemonOverheadGroups`, `isDaemonPodCompatible`,
//! `getCompatibleDaemonPods`): a DaemonSet pod counts against a node only when it would run
//! there — it tolerates the taints and its node selector / required affinity fits.

use crate::model::{DaemonSet, HostPort, InstanceType, Node, Pod};
use crate::requirements::Requirements;
use crate::resources::Resources;
use crate::solver::arith;
use crate::taints::{Taint, first_untolerated};
use std::collections::BTreeMap;

/// A DaemonSet pod with its requirement alternatives precomputed.
#[derive(Debug, Clone)]
pub(crate) struct Daemon<'a> {
    /// The pod template.
    pub pod: &'a Pod,
    /// nodeSelector ∩ each required node-affinity term (one entry when there are no terms);
    /// invalid terms are left out, so a DaemonSet with only invalid terms runs nowhere.
    pub alternatives: Vec<Requirements>,
    /// Requests with `pods: 1`.
    pub requests: Resources,
}

impl<'a> Daemon<'a> {
    /// Precomputes a DaemonSet's data.
    pub(crate) fn new(ds: &'a DaemonSet) -> Self {
        let pod = &ds.pod;
        let selector = Requirements::from_labels(pod.node_selector.iter());
        let alternatives = if pod.affinity.node_affinity.required.is_empty() {
            vec![selector]
        } else {
            pod.affinity
                .node_affinity
                .required
                .iter()
                .filter_map(|t| Requirements::from_node_selector(&t.match_expressions).ok())
                .map(|t| {
                    let mut r = selector.clone();
                    r.add_all(&t);
                    r
                })
                .collect()
        };
        let mut requests = pod.requests.clone();
        requests.pods = 1;
        Daemon {
            pod,
            alternatives,
            requests,
        }
    }

    /// Whether it would run on a new node of a pool with `taints` and `template`
    /// requirements, launched as `it`. PreferNoSchedule taints never keep a daemon off.
    pub(crate) fn runs_on_claim(
        &self,
        taints: &[Taint],
        template: &Requirements,
        it: &InstanceType,
    ) -> bool {
        first_untolerated(taints, &self.pod.tolerations, false).is_none()
            && self.alternatives.iter().any(|r| {
                template.compatible(r, true).is_ok() && it.requirements.intersects(r).is_ok()
            })
    }

    /// Whether it would run on an existing node (first required term only, as upstream's
    /// strict pod requirements).
    pub(crate) fn runs_on_node(&self, node: &Node, labels: &Requirements) -> bool {
        first_untolerated(&node.taints, &self.pod.tolerations, true).is_none()
            && self
                .alternatives
                .first()
                .is_some_and(|r| labels.compatible(r, false).is_ok())
    }
}

/// Instance types of one pool that run the same set of DaemonSets.
#[derive(Debug, Clone)]
pub(crate) struct DaemonGroup {
    /// Sum of the daemons' requests.
    pub overhead: Resources,
    /// Host ports the daemons bind.
    pub ports: Vec<HostPort>,
}

/// Groups a pool's instance types by the DaemonSets that would run on them; returns the
/// groups (in first-seen order) and each instance type's group.
pub(crate) fn group(
    daemons: &[Daemon<'_>],
    taints: &[Taint],
    template: &Requirements,
    its: &[&InstanceType],
) -> (Vec<DaemonGroup>, Vec<usize>) {
    let mut by_set: BTreeMap<Vec<usize>, usize> = BTreeMap::new();
    let mut groups = Vec::new();
    let mut membership = Vec::with_capacity(its.len());
    for it in its {
        let set: Vec<usize> = (0..daemons.len())
            .filter(|&d| daemons[d].runs_on_claim(taints, template, it))
            .collect();
        let g = *by_set.entry(set).or_insert_with_key(|set| {
            let mut overhead = Resources::default();
            let mut ports = Vec::new();
            for &d in set {
                arith::add_into(&mut overhead, &daemons[d].requests);
                ports.extend_from_slice(&daemons[d].pod.host_ports);
            }
            groups.push(DaemonGroup { overhead, ports });
            groups.len() - 1
        });
        membership.push(g);
    }
    (groups, membership)
}
