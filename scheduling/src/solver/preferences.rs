//! The mutable, relaxable view of a pod's constraints, and Karpenter's relaxation order
//! (`preferences.go`): drop the first of several required node-affinity OR terms, then the
//! heaviest preferred pod-affinity term, preferred pod-anti-affinity term, preferred
//! node-affinity term, a ScheduleAnyway spread, and finally tolerate PreferNoSchedule taints
//! (only when some NodePool has such a taint).

use crate::model::{
    NodeSelectorTerm, Pod, PreferredSchedulingTerm, TopologySpreadConstraint,
    WeightedPodAffinityTerm, WhenUnsatisfiable,
};
use crate::solver::PreferencePolicy;
use crate::taints::{TaintEffect, Toleration, TolerationOperator};
use std::borrow::Cow;

/// A pod's constraints as currently relaxed. Starts borrowed; a relaxation copies only the
/// list it changes.
#[derive(Debug, Clone)]
pub(crate) struct Relaxed<'a> {
    /// The pod.
    pub pod: &'a Pod,
    /// Remaining required node-affinity OR terms; the first one is the one in force.
    pub required_terms: Cow<'a, [NodeSelectorTerm]>,
    /// Preferred node-affinity terms, heaviest first; the first one is treated as required.
    pub preferred_node: Cow<'a, [PreferredSchedulingTerm]>,
    /// Preferred pod-affinity terms still in force, heaviest first.
    pub preferred_affinity: Cow<'a, [WeightedPodAffinityTerm]>,
    /// Preferred pod-anti-affinity terms still in force, heaviest first.
    pub preferred_anti_affinity: Cow<'a, [WeightedPodAffinityTerm]>,
    /// Spread constraints still in force.
    pub spreads: Cow<'a, [TopologySpreadConstraint]>,
    /// Tolerations, possibly with the added PreferNoSchedule toleration.
    pub tolerations: Cow<'a, [Toleration]>,
}

fn by_weight<T: Clone>(items: &[T], weight: fn(&T) -> i32) -> Cow<'_, [T]> {
    if items.windows(2).all(|w| weight(&w[0]) >= weight(&w[1])) {
        Cow::Borrowed(items)
    } else {
        let mut v = items.to_vec();
        v.sort_by_key(|t| std::cmp::Reverse(weight(t)));
        Cow::Owned(v)
    }
}

impl<'a> Relaxed<'a> {
    /// The pod as written. With [`PreferencePolicy::Ignore`], preferences are dropped up front
    /// and PreferNoSchedule taints are tolerated.
    pub(crate) fn new(pod: &'a Pod, policy: PreferencePolicy) -> Self {
        let a = &pod.affinity;
        let mut r = Relaxed {
            pod,
            required_terms: Cow::Borrowed(&a.node_affinity.required),
            preferred_node: by_weight(&a.node_affinity.preferred, |t| t.weight),
            preferred_affinity: by_weight(&a.pod_affinity.preferred, |t| t.weight),
            preferred_anti_affinity: by_weight(&a.pod_anti_affinity.preferred, |t| t.weight),
            spreads: Cow::Borrowed(&pod.topology_spread_constraints),
            tolerations: Cow::Borrowed(&pod.tolerations),
        };
        if policy == PreferencePolicy::Ignore {
            r.preferred_node = Cow::Borrowed(&[]);
            r.preferred_affinity = Cow::Borrowed(&[]);
            r.preferred_anti_affinity = Cow::Borrowed(&[]);
            if r.spreads
                .iter()
                .any(|s| s.when_unsatisfiable == WhenUnsatisfiable::ScheduleAnyway)
            {
                r.spreads = Cow::Owned(
                    r.spreads
                        .iter()
                        .filter(|s| s.when_unsatisfiable == WhenUnsatisfiable::DoNotSchedule)
                        .cloned()
                        .collect(),
                );
            }
            r.tolerate_prefer_no_schedule();
        }
        r
    }

    /// Whether PreferNoSchedule taints are tolerated (added toleration or the pod's own
    /// `Exists`/PreferNoSchedule one).
    pub(crate) fn tolerates_prefer_no_schedule(&self) -> bool {
        self.tolerations.iter().any(is_pns_toleration)
    }

    fn tolerate_prefer_no_schedule(&mut self) -> bool {
        if self.tolerates_prefer_no_schedule() {
            return false;
        }
        self.tolerations.to_mut().push(Toleration {
            operator: TolerationOperator::Exists,
            effect: Some(TaintEffect::PreferNoSchedule),
            ..Toleration::default()
        });
        true
    }

    /// Applies the next relaxation in upstream order; false when nothing is left to relax.
    /// `tolerate_pns_step` is whether any NodePool has a PreferNoSchedule taint.
    pub(crate) fn relax(&mut self, tolerate_pns_step: bool) -> bool {
        if self.required_terms.len() > 1 {
            self.required_terms.to_mut().remove(0);
            return true;
        }
        if !self.preferred_affinity.is_empty() {
            self.preferred_affinity.to_mut().remove(0);
            return true;
        }
        if !self.preferred_anti_affinity.is_empty() {
            self.preferred_anti_affinity.to_mut().remove(0);
            return true;
        }
        if !self.preferred_node.is_empty() {
            self.preferred_node.to_mut().remove(0);
            return true;
        }
        if let Some(i) = self
            .spreads
            .iter()
            .position(|s| s.when_unsatisfiable == WhenUnsatisfiable::ScheduleAnyway)
        {
            // Upstream swaps the last constraint into the removed slot.
            self.spreads.to_mut().swap_remove(i);
            return true;
        }
        tolerate_pns_step && self.tolerate_prefer_no_schedule()
    }
}

fn is_pns_toleration(t: &Toleration) -> bool {
    t.key.is_empty()
        && t.operator == TolerationOperator::Exists
        && t.value.is_empty()
        && t.effect == Some(TaintEffect::PreferNoSchedule)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{PodAffinityTerm, WeightedPodAffinityTerm};

    #[test]
    fn relaxes_in_upstream_order() {
        let mut pod = Pod::default();
        pod.affinity.node_affinity.required = vec![NodeSelectorTerm::default(); 2];
        pod.affinity.node_affinity.preferred = vec![
            PreferredSchedulingTerm {
                weight: 1,
                preference: NodeSelectorTerm::default(),
            },
            PreferredSchedulingTerm {
                weight: 50,
                preference: NodeSelectorTerm::default(),
            },
        ];
        let term = |w| WeightedPodAffinityTerm {
            weight: w,
            term: PodAffinityTerm::default(),
        };
        pod.affinity.pod_affinity.preferred = vec![term(1)];
        pod.affinity.pod_anti_affinity.preferred = vec![term(2)];
        pod.topology_spread_constraints = vec![TopologySpreadConstraint {
            max_skew: 1,
            topology_key: "k".into(),
            when_unsatisfiable: WhenUnsatisfiable::ScheduleAnyway,
            label_selector: None,
            min_domains: None,
            node_affinity_policy: crate::model::InclusionPolicy::Honor,
            node_taints_policy: crate::model::InclusionPolicy::Ignore,
            match_label_keys: vec![],
        }];
        let mut r = Relaxed::new(&pod, PreferencePolicy::Respect);
        assert_eq!(r.preferred_node[0].weight, 50);
        assert!(r.relax(true));
        assert_eq!(r.required_terms.len(), 1);
        assert!(r.relax(true));
        assert!(r.preferred_affinity.is_empty());
        assert!(r.relax(true));
        assert!(r.preferred_anti_affinity.is_empty());
        assert!(r.relax(true));
        assert_eq!(r.preferred_node.len(), 1);
        assert!(r.relax(true));
        assert!(r.preferred_node.is_empty());
        assert!(r.relax(true));
        assert!(r.spreads.is_empty());
        assert!(!r.tolerates_prefer_no_schedule());
        assert!(r.relax(true));
        assert!(r.tolerates_prefer_no_schedule());
        assert!(!r.relax(true));
    }

    #[test]
    fn ignore_policy_drops_preferences_up_front() {
        let mut pod = Pod::default();
        pod.affinity.node_affinity.preferred = vec![PreferredSchedulingTerm {
            weight: 1,
            preference: NodeSelectorTerm::default(),
        }];
        let r = Relaxed::new(&pod, PreferencePolicy::Ignore);
        assert!(r.preferred_node.is_empty());
        assert!(r.tolerates_prefer_no_schedule());
        let mut r = r;
        assert!(!r.relax(true));
    }
}
