//! Default pod topology spread constraints (`--scheduler-config`, Karpenter v1.15), applied to
//! the scheduling simulation's copies of pods as the kube-scheduler's PodTopologySpread
//! plugin applies them:
//! - only to a pod that declares no `topologySpreadConstraints` of its own (all or nothing);
//! - each default gets the selector kube-scheduler's `helper.DefaultSelector` deduces: the
//!   selectors of the Services in the pod's namespace that select it, merged as equality
//!   matches, with its controller's selector on top — a ReplicationController's labels
//!   overwrite, a ReplicaSet's or StatefulSet's selector is ANDed on as expressions;
//! - a pod for which nothing can be deduced (no Service selects it, no such controller) is
//!   left unconstrained, since an empty selector would count every pod of its namespace.
//!
//! The constraints exist only on the copies the solver plans with (the index's
//! [`snapshot`](crate::ClusterState::snapshot)); nothing is written back to a pod.
//!
//! The owner is found by kind and name in the pod's namespace, as upstream fetches it; its
//! API group is not compared. In `karpenter plan` and the simulator, a pod expanded from a
//! Deployment names the Deployment as its owner: the Deployment's selector stands for the
//! ReplicaSet the Deployment controller would create (whose selector adds only the
//! `pod-template-hash` label all of that ReplicaSet's pods carry).

use crate::scheduler_config::SchedulerConfig;
use karpenter_scheduling::model::{Labels, Pod, TopologySpreadConstraint};
use karpenter_scheduling::selector::{LabelSelector, LabelSelectorRequirement, SelectorOperator};
use std::collections::BTreeMap;

/// The kinds of object whose selectors a default selector is deduced from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum SourceKind {
    /// A Service (`spec.selector`, equality only).
    Service,
    /// A ReplicationController (`spec.selector`, equality only).
    ReplicationController,
    /// A ReplicaSet (`spec.selector`).
    ReplicaSet,
    /// A StatefulSet (`spec.selector`).
    StatefulSet,
    /// A Deployment, standing for its ReplicaSet where pods name the Deployment as their
    /// owner (the simulator and `karpenter plan` expand Deployments into pods directly).
    Deployment,
}

impl SourceKind {
    /// The kind as an owner reference names it (`Service` for services).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Service => "Service",
            Self::ReplicationController => "ReplicationController",
            Self::ReplicaSet => "ReplicaSet",
            Self::StatefulSet => "StatefulSet",
            Self::Deployment => "Deployment",
        }
    }

    /// The controller kind an owner reference's `kind` names, if its selector counts.
    pub fn of_owner(kind: &str) -> Option<Self> {
        match kind {
            "ReplicationController" => Some(Self::ReplicationController),
            "ReplicaSet" => Some(Self::ReplicaSet),
            "StatefulSet" => Some(Self::StatefulSet),
            "Deployment" => Some(Self::Deployment),
            _ => None,
        }
    }
}

/// One object's selector, as the index keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SelectorSource {
    /// What it is.
    pub kind: SourceKind,
    /// Its namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
    /// Its selector: `match_labels` only for a Service or ReplicationController; `None` when
    /// absent (a Service without a selector selects no pod).
    pub selector: Option<LabelSelector>,
}

/// The default constraints and the selectors they are deduced from.
#[derive(Debug, Clone, Default)]
pub struct DefaultSpread {
    constraints: Vec<TopologySpreadConstraint>,
    /// Selectors by namespace, kind and name, so a namespace's Services are one range.
    sources: BTreeMap<(String, SourceKind, String), Option<LabelSelector>>,
}

/// What decides a pod's selector: its namespace, its controller and its labels. Pods of one
/// workload share all three, so the deduction runs once per workload and label set.
type ShapeKey = (String, Option<(String, String)>, Labels);

impl DefaultSpread {
    /// Takes the constraints of `config` (none for `None`).
    pub fn configure(&mut self, config: Option<&SchedulerConfig>) {
        self.constraints = config
            .map(|c| c.default_constraints.clone())
            .unwrap_or_default();
    }

    /// Whether any default constraint is configured.
    pub fn is_active(&self) -> bool {
        !self.constraints.is_empty()
    }

    /// Records (or replaces) a selector.
    pub fn insert(&mut self, source: SelectorSource) {
        self.sources.insert(
            (source.namespace, source.kind, source.name),
            source.selector,
        );
    }

    /// Forgets a selector; returns whether it was known.
    pub fn remove(&mut self, kind: SourceKind, namespace: &str, name: &str) -> bool {
        self.sources
            .remove(&(namespace.to_owned(), kind, name.to_owned()))
            .is_some()
    }

    /// Forgets every selector, keeping the constraints.
    pub fn clear_sources(&mut self) {
        self.sources.clear();
    }

    /// Gives every pod of `pods` that declares no spread constraint the defaults, with the
    /// selector deduced for it; pods with no deducible selector are left alone. A no-op
    /// without configured constraints.
    pub fn apply<'p>(&self, pods: impl IntoIterator<Item = &'p mut Pod>) {
        if self.constraints.is_empty() {
            return;
        }
        let mut selectors: BTreeMap<ShapeKey, Option<LabelSelector>> = BTreeMap::new();
        for pod in pods {
            if !pod.topology_spread_constraints.is_empty() {
                continue;
            }
            let key = (
                pod.namespace.clone(),
                pod.owner.as_ref().map(|o| (o.kind.clone(), o.name.clone())),
                pod.labels.clone(),
            );
            let selector = selectors
                .entry(key)
                .or_insert_with(|| self.default_selector(pod));
            let Some(selector) = selector else {
                continue;
            };
            pod.topology_spread_constraints = self
                .constraints
                .iter()
                .map(|c| TopologySpreadConstraint {
                    label_selector: Some(selector.clone()),
                    ..c.clone()
                })
                .collect();
        }
    }

    /// `helper.DefaultSelector`: the matching Services' selectors merged, then the
    /// controller's. `None` when that leaves nothing to select by.
    pub fn default_selector(&self, pod: &Pod) -> Option<LabelSelector> {
        let mut match_labels = Labels::new();
        let ns = &pod.namespace;
        let services = self
            .sources
            .range((ns.clone(), SourceKind::Service, String::new())..)
            .take_while(|((n, kind, _), _)| n == ns && *kind == SourceKind::Service);
        for (_, selector) in services {
            // A Service without a selector selects nothing; an empty one selects every pod
            // but contributes no label.
            let Some(selector) = selector else { continue };
            if selector.matches(&pod.labels) {
                match_labels.extend(
                    selector
                        .match_labels
                        .iter()
                        .map(|(k, v)| (k.clone(), v.clone())),
                );
            }
        }
        let mut match_expressions = Vec::new();
        let owner = pod
            .owner
            .as_ref()
            .and_then(|o| Some((SourceKind::of_owner(&o.kind)?, o.name.clone())));
        if let Some((kind, name)) = owner
            && let Some(Some(selector)) = self.sources.get(&(ns.clone(), kind, name))
        {
            if kind == SourceKind::ReplicationController {
                match_labels.extend(
                    selector
                        .match_labels
                        .iter()
                        .map(|(k, v)| (k.clone(), v.clone())),
                );
            } else {
                match_expressions.extend(selector.match_labels.iter().map(|(k, v)| {
                    LabelSelectorRequirement {
                        key: k.clone(),
                        operator: SelectorOperator::In,
                        values: vec![v.clone()],
                    }
                }));
                match_expressions.extend(selector.match_expressions.iter().cloned());
            }
        }
        if match_labels.is_empty() && match_expressions.is_empty() {
            return None;
        }
        Some(LabelSelector {
            match_labels,
            match_expressions,
        })
    }
}

/// The constraints in one line for logs and reports:
/// `topology.kubernetes.io/zone maxSkew 1 DoNotSchedule, kubernetes.io/hostname maxSkew 2
/// ScheduleAnyway`.
pub fn describe(constraints: &[TopologySpreadConstraint]) -> String {
    let one = |c: &TopologySpreadConstraint| {
        let mut text = format!(
            "{} maxSkew {} {:?}",
            c.topology_key, c.max_skew, c.when_unsatisfiable
        );
        if let Some(min) = c.min_domains {
            text.push_str(&format!(" minDomains {min}"));
        }
        text
    };
    constraints.iter().map(one).collect::<Vec<_>>().join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scheduler_config::parse_scheduler_config;
    use karpenter_scheduling::model::{OwnerRef, WhenUnsatisfiable};

    const ZONE: &str = "topology.kubernetes.io/zone";

    fn labels(pairs: &[(&str, &str)]) -> Labels {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    fn configured() -> DefaultSpread {
        let config = parse_scheduler_config(&format!(
            "podTopologySpread: {{defaultConstraints: [\
             {{maxSkew: 1, topologyKey: {ZONE}, whenUnsatisfiable: DoNotSchedule}}, \
             {{maxSkew: 2, topologyKey: kubernetes.io/hostname, whenUnsatisfiable: ScheduleAnyway}}]}}"
        ))
        .unwrap()
        .unwrap();
        let mut spread = DefaultSpread::default();
        spread.configure(Some(&config));
        spread
    }

    fn source(kind: SourceKind, ns: &str, name: &str, selector: LabelSelector) -> SelectorSource {
        SelectorSource {
            kind,
            namespace: ns.into(),
            name: name.into(),
            selector: Some(selector),
        }
    }

    fn eq(pairs: &[(&str, &str)]) -> LabelSelector {
        LabelSelector {
            match_labels: labels(pairs),
            match_expressions: Vec::new(),
        }
    }

    fn pod(ns: &str, name: &str, pod_labels: &[(&str, &str)], owner: Option<(&str, &str)>) -> Pod {
        Pod {
            namespace: ns.into(),
            name: name.into(),
            labels: labels(pod_labels),
            owner: owner.map(|(kind, name)| OwnerRef {
                kind: kind.into(),
                name: name.into(),
                uid: format!("{name}-uid"),
            }),
            ..Pod::default()
        }
    }

    #[test]
    fn services_and_the_controller_make_the_selector() {
        let mut spread = configured();
        spread.insert(source(
            SourceKind::Service,
            "shop",
            "web",
            eq(&[("app", "web")]),
        ));
        spread.insert(source(
            SourceKind::Service,
            "shop",
            "all-tiers",
            eq(&[("tier", "fe")]),
        ));
        // Selects nothing of the pod's: contributes nothing.
        spread.insert(source(
            SourceKind::Service,
            "shop",
            "db",
            eq(&[("app", "db")]),
        ));
        // Another namespace's Service never counts.
        spread.insert(source(
            SourceKind::Service,
            "other",
            "x",
            eq(&[("app", "web")]),
        ));
        spread.insert(SelectorSource {
            kind: SourceKind::Service,
            namespace: "shop".into(),
            name: "headless".into(),
            selector: None,
        });
        let mut rs = eq(&[("app", "web")]);
        rs.match_expressions.push(LabelSelectorRequirement {
            key: "track".into(),
            operator: SelectorOperator::NotIn,
            values: vec!["canary".into()],
        });
        spread.insert(source(SourceKind::ReplicaSet, "shop", "web-abc", rs));
        let p = pod(
            "shop",
            "web-abc-1",
            &[("app", "web"), ("tier", "fe"), ("pod-template-hash", "abc")],
            Some(("ReplicaSet", "web-abc")),
        );
        let selector = spread.default_selector(&p).unwrap();
        assert_eq!(
            selector.match_labels,
            labels(&[("app", "web"), ("tier", "fe")])
        );
        assert_eq!(
            selector.match_expressions,
            [
                LabelSelectorRequirement {
                    key: "app".into(),
                    operator: SelectorOperator::In,
                    values: vec!["web".into()],
                },
                LabelSelectorRequirement {
                    key: "track".into(),
                    operator: SelectorOperator::NotIn,
                    values: vec!["canary".into()],
                },
            ]
        );
    }

    #[test]
    fn a_replication_controller_overwrites_service_labels() {
        let mut spread = configured();
        spread.insert(source(
            SourceKind::Service,
            "ns",
            "svc",
            eq(&[("app", "web")]),
        ));
        spread.insert(source(
            SourceKind::ReplicationController,
            "ns",
            "rc",
            eq(&[("app", "old"), ("rc", "yes")]),
        ));
        let p = pod(
            "ns",
            "p",
            &[("app", "web")],
            Some(("ReplicationController", "rc")),
        );
        let selector = spread.default_selector(&p).unwrap();
        assert_eq!(
            selector.match_labels,
            labels(&[("app", "old"), ("rc", "yes")])
        );
        assert!(selector.match_expressions.is_empty());
    }

    #[test]
    fn no_selector_means_no_defaults() {
        let mut spread = configured();
        spread.insert(source(
            SourceKind::Service,
            "ns",
            "svc",
            eq(&[("app", "web")]),
        ));
        // A Job's pod, a DaemonSet's pod, an owner that is gone, a Service with an empty
        // selector: nothing to deduce from.
        spread.insert(source(SourceKind::Service, "ns", "everything", eq(&[])));
        for owner in [Some(("Job", "j")), Some(("ReplicaSet", "gone")), None] {
            let mut pods = [pod("ns", "p", &[("app", "batch")], owner)];
            spread.apply(&mut pods);
            assert!(pods[0].topology_spread_constraints.is_empty(), "{owner:?}");
        }
    }

    #[test]
    fn defaults_go_only_to_pods_without_their_own() {
        let mut spread = configured();
        spread.insert(source(
            SourceKind::StatefulSet,
            "ns",
            "db",
            eq(&[("app", "db")]),
        ));
        let own = TopologySpreadConstraint {
            max_skew: 7,
            topology_key: "kubernetes.io/hostname".into(),
            when_unsatisfiable: WhenUnsatisfiable::ScheduleAnyway,
            label_selector: None,
            min_domains: None,
            node_affinity_policy: karpenter_scheduling::model::InclusionPolicy::Honor,
            node_taints_policy: karpenter_scheduling::model::InclusionPolicy::Ignore,
            match_label_keys: Vec::new(),
        };
        let mut with_own = pod("ns", "db-0", &[("app", "db")], Some(("StatefulSet", "db")));
        with_own.topology_spread_constraints = vec![own.clone()];
        let mut pods = [
            pod("ns", "db-1", &[("app", "db")], Some(("StatefulSet", "db"))),
            with_own,
            pod("ns", "db-2", &[("app", "db")], Some(("StatefulSet", "db"))),
        ];
        spread.apply(&mut pods);
        assert_eq!(pods[1].topology_spread_constraints, [own]);
        for p in [&pods[0], &pods[2]] {
            let c = &p.topology_spread_constraints;
            assert_eq!(c.len(), 2);
            assert_eq!((c[0].topology_key.as_str(), c[0].max_skew), (ZONE, 1));
            assert_eq!(c[1].when_unsatisfiable, WhenUnsatisfiable::ScheduleAnyway);
            let s = c[0].label_selector.as_ref().unwrap();
            assert!(s.match_labels.is_empty());
            assert_eq!(s.match_expressions[0].values, ["db"]);
            assert_eq!(c[0].label_selector, c[1].label_selector);
        }
        // Unconfigured, nothing changes.
        let mut plain = DefaultSpread::default();
        plain.insert(source(
            SourceKind::StatefulSet,
            "ns",
            "db",
            eq(&[("app", "db")]),
        ));
        let mut pods = [pod(
            "ns",
            "db-1",
            &[("app", "db")],
            Some(("StatefulSet", "db")),
        )];
        plain.apply(&mut pods);
        assert!(pods[0].topology_spread_constraints.is_empty());
        assert!(!plain.is_active() && spread.is_active());
        assert_eq!(
            describe(&spread.constraints),
            "topology.kubernetes.io/zone maxSkew 1 DoNotSchedule, kubernetes.io/hostname \
             maxSkew 2 ScheduleAnyway"
        );
    }

    #[test]
    fn removing_a_source_takes_its_part_away() {
        let mut spread = configured();
        spread.insert(source(
            SourceKind::Service,
            "ns",
            "svc",
            eq(&[("app", "web")]),
        ));
        let p = pod("ns", "p", &[("app", "web")], None);
        assert!(spread.default_selector(&p).is_some());
        assert!(spread.remove(SourceKind::Service, "ns", "svc"));
        assert!(!spread.remove(SourceKind::Service, "ns", "svc"));
        assert!(spread.default_selector(&p).is_none());
    }
}
