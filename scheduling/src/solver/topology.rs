//! Topology spread, pod affinity and pod anti-affinity (`topology.go`, `topologygroup.go`,
//! `topologynodefilter.go`, `topologydomaingroup.go`).
//!
//! A [`TopologyGroup`] counts matching pods per domain of one topology key. Pending pods own
//! the groups of their own constraints; "inverse" groups hold the required anti-affinity of
//! pods (running or pending) so that an incoming pod they select is kept out of their
//! domains. Groups are kept in creation order and looked up by identity, so nothing depends
//! on hash iteration order.

use crate::labels::HOSTNAME;
use crate::model::{InclusionPolicy, Labels, Node, Pod, PodAffinityTerm, WhenUnsatisfiable};
use crate::requirements::{Operator, Requirement, Requirements};
use crate::selector::{LabelSelector, LabelSelectorRequirement, SelectorOperator};
use crate::solver::PreferencePolicy;
use crate::solver::preferences::Relaxed;
use crate::taints::{Taint, Toleration, first_untolerated};
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// What a group enforces.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Kind {
    /// `topologySpreadConstraints`.
    Spread,
    /// Required (or preferred, while respected) pod affinity.
    Affinity,
    /// Required (or preferred, while respected) pod anti-affinity.
    AntiAffinity,
}

impl Kind {
    fn describe(self) -> &'static str {
        match self {
            Kind::Spread => "topology spread",
            Kind::Affinity => "pod affinity",
            Kind::AntiAffinity => "pod anti-affinity",
        }
    }
}

/// The namespaces a group looks at.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum Namespaces {
    /// An empty namespace selector: every namespace.
    All,
    /// These namespaces.
    Set(BTreeSet<String>),
}

impl Namespaces {
    fn contains(&self, ns: &str) -> bool {
        match self {
            Namespaces::All => true,
            Namespaces::Set(s) => s.contains(ns),
        }
    }

    /// `buildNamespaceList`: the pod's namespace when neither list nor selector is given, the
    /// listed namespaces plus those whose labels the selector matches otherwise.
    fn for_term(
        pod_ns: &str,
        term: &PodAffinityTerm,
        namespaces: &BTreeMap<String, Labels>,
    ) -> Self {
        match &term.namespace_selector {
            None if term.namespaces.is_empty() => {
                Namespaces::Set(BTreeSet::from([pod_ns.to_string()]))
            }
            None => Namespaces::Set(term.namespaces.iter().cloned().collect()),
            Some(sel) if sel.is_empty() => Namespaces::All,
            Some(sel) => {
                let mut set: BTreeSet<String> = term.namespaces.iter().cloned().collect();
                set.extend(
                    namespaces
                        .iter()
                        .filter(|(_, l)| sel.matches(l))
                        .map(|(n, _)| n.clone()),
                );
                Namespaces::Set(set)
            }
        }
    }
}

/// Which nodes a spread constraint counts (`nodeAffinityPolicy`, `nodeTaintsPolicy`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct NodeFilter {
    requirements: Vec<Requirements>,
    honor_affinity: bool,
    honor_taints: bool,
    tolerations: Vec<Toleration>,
}

impl NodeFilter {
    fn new(r: &Relaxed<'_>, taints: InclusionPolicy, affinity: InclusionPolicy) -> Self {
        let selector = Requirements::from_labels(r.pod.node_selector.iter());
        let requirements = if r.required_terms.is_empty() {
            vec![selector]
        } else {
            r.required_terms
                .iter()
                .map(|term| {
                    let mut reqs = selector.clone();
                    if let Ok(t) = Requirements::from_node_selector(&term.match_expressions) {
                        reqs.add_all(&t);
                    }
                    reqs
                })
                .collect()
        };
        NodeFilter {
            requirements,
            honor_affinity: affinity == InclusionPolicy::Honor,
            honor_taints: taints == InclusionPolicy::Honor,
            tolerations: r.tolerations.to_vec(),
        }
    }

    /// Whether a node with these taints and requirements counts.
    fn matches(&self, taints: &[Taint], reqs: &Requirements, allow_undefined: bool) -> bool {
        let affinity = !self.honor_affinity
            || self.requirements.is_empty()
            || self
                .requirements
                .iter()
                .any(|f| reqs.compatible(f, allow_undefined).is_ok());
        let tolerated =
            !self.honor_taints || first_untolerated(taints, &self.tolerations, true).is_none();
        affinity && tolerated
    }
}

/// The identity of a group: two constraints with equal identity share counts.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct GroupId {
    kind: Kind,
    key: String,
    namespaces: Namespaces,
    selector: Option<LabelSelector>,
    max_skew: i32,
    min_domains: Option<i32>,
    filter: Option<NodeFilter>,
}

/// Pod counts per domain of one topology key.
#[derive(Debug, Clone)]
pub(crate) struct TopologyGroup {
    id: GroupId,
    domains: BTreeMap<String, i64>,
    empty: BTreeSet<String>,
    /// The counts of `domains` whose name is a new claim's placeholder hostname, indexed by
    /// its number: the greedy claim scan asks for one per open claim and pod, and a string
    /// search there made the scan superlinear.
    placeholders: Vec<i64>,
}

/// The prefix of the hostnames the scheduler gives new claims.
pub(crate) const PLACEHOLDER_PREFIX: &str = "hostname-placeholder-";

/// The number `n` of a hostname spelled exactly `hostname-placeholder-{n:04}`; any other
/// spelling (even one naming the same number) is another domain and gets `None`.
pub(crate) fn placeholder_number(host: &str) -> Option<usize> {
    let digits = host.strip_prefix(PLACEHOLDER_PREFIX)?;
    let canonical = digits.len() >= 4
        && digits.bytes().all(|b| b.is_ascii_digit())
        && (digits.len() == 4 || !digits.starts_with('0'));
    if canonical { digits.parse().ok() } else { None }
}

fn req(key: &str, op: Operator, values: Vec<String>) -> Result<Requirement, String> {
    Requirement::new(key, op, values).map_err(|e| format!("invalid topology key {key:?}: {e}"))
}

/// `In [values]`, or `DoesNotExist` when there are none.
fn domains_req(key: &str, values: Vec<String>) -> Result<Requirement, String> {
    if values.is_empty() {
        req(key, Operator::DoesNotExist, vec![])
    } else {
        req(key, Operator::In, values)
    }
}

fn finite_single(r: &Requirement) -> Option<&str> {
    if r.operator() == Operator::In && r.len() == 1 {
        r.values().next()
    } else {
        None
    }
}

/// A requirement in a few words (`In [a, b]`, `Exists`).
pub(crate) fn describe_requirement(r: &Requirement) -> String {
    match r.operator() {
        Operator::In | Operator::NotIn => {
            format!(
                "{:?} [{}]",
                r.operator(),
                r.values().collect::<Vec<_>>().join(", ")
            )
        }
        op => format!("{op:?}"),
    }
}

impl TopologyGroup {
    fn selects(&self, pod: &Pod) -> bool {
        self.id.namespaces.contains(&pod.namespace)
            && self
                .id
                .selector
                .as_ref()
                .is_some_and(|s| s.matches(&pod.labels))
    }

    /// Whether placing `pod` on a node with these taints/requirements changes this group's
    /// counts.
    fn counts(
        &self,
        pod: &Pod,
        taints: &[Taint],
        reqs: &Requirements,
        allow_undefined: bool,
    ) -> bool {
        self.selects(pod)
            && self
                .id
                .filter
                .as_ref()
                .is_none_or(|f| f.matches(taints, reqs, allow_undefined))
    }

    fn register(&mut self, domain: &str) {
        if !self.domains.contains_key(domain) {
            self.domains.insert(domain.to_string(), 0);
            self.empty.insert(domain.to_string());
        }
    }

    fn record(&mut self, domain: &str) {
        *self.domains.entry(domain.to_string()).or_insert(0) += 1;
        self.empty.remove(domain);
        if let Some(n) = placeholder_number(domain) {
            if self.placeholders.len() <= n {
                self.placeholders.resize(n + 1, 0);
            }
            self.placeholders[n] += 1;
        }
    }

    /// [`Self::count`] for a hostname, without a string search for placeholder hostnames.
    fn host_count(&self, host: &str) -> i64 {
        match placeholder_number(host) {
            Some(n) => self.placeholders.get(n).copied().unwrap_or(0),
            None => self.count(host),
        }
    }

    fn count(&self, domain: &str) -> i64 {
        self.domains.get(domain).copied().unwrap_or(0)
    }

    /// The domains `pod` may use, as a requirement on the group's key.
    fn next(
        &self,
        pod: &Pod,
        pod_domains: &Requirement,
        node_domains: &Requirement,
    ) -> Result<Requirement, String> {
        match self.id.kind {
            Kind::Spread => self.next_spread(pod, pod_domains, node_domains),
            Kind::Affinity => self.next_affinity(pod, pod_domains, node_domains),
            Kind::AntiAffinity => self.next_anti_affinity(pod_domains, node_domains),
        }
    }

    fn min_count(&self, pod_domains: &Requirement) -> i64 {
        if self.id.key == HOSTNAME {
            return 0;
        }
        let mut min = i64::from(i32::MAX);
        let mut supported = 0i64;
        for (d, &c) in &self.domains {
            if pod_domains.has(d) {
                supported += 1;
                min = min.min(c);
            }
        }
        if self
            .id
            .min_domains
            .is_some_and(|m| supported < i64::from(m))
        {
            min = 0;
        }
        min
    }

    fn next_spread(
        &self,
        pod: &Pod,
        pod_domains: &Requirement,
        node_domains: &Requirement,
    ) -> Result<Requirement, String> {
        let key = &self.id.key;
        let min = self.min_count(pod_domains);
        let own = i64::from(self.selects(pod));
        let skew = i64::from(self.id.max_skew);
        if key == HOSTNAME
            && let Some(host) = finite_single(node_domains)
        {
            let count = self.host_count(host) + own;
            return domains_req(
                key,
                if count <= skew {
                    vec![host.to_string()]
                } else {
                    vec![]
                },
            );
        }
        let mut best: Option<(&str, i64)> = None;
        let candidates: Box<dyn Iterator<Item = (&str, i64)> + '_> =
            if node_domains.operator() == Operator::In {
                Box::new(
                    node_domains.values().filter_map(|d| {
                        self.domains.get_key_value(d).map(|(k, &c)| (k.as_str(), c))
                    }),
                )
            } else {
                Box::new(
                    self.domains
                        .iter()
                        .filter(|(d, _)| node_domains.has(d))
                        .map(|(d, &c)| (d.as_str(), c)),
                )
            };
        for (d, c) in candidates {
            let c = c + own;
            if c - min <= skew && best.is_none_or(|(_, b)| c < b) {
                best = Some((d, c));
            }
        }
        domains_req(
            key,
            best.map(|(d, _)| vec![d.to_string()]).unwrap_or_default(),
        )
    }

    fn any_compatible_pod_domain(&self, pod_domains: &Requirement) -> bool {
        self.domains
            .iter()
            .any(|(d, &c)| c > 0 && pod_domains.has(d))
    }

    fn next_affinity(
        &self,
        pod: &Pod,
        pod_domains: &Requirement,
        node_domains: &Requirement,
    ) -> Result<Requirement, String> {
        let key = &self.id.key;
        // With no matching pod anywhere, a pod that selects itself may start the group.
        let may_seed = self.selects(pod)
            && (self.domains.len() == self.empty.len()
                || !self.any_compatible_pod_domain(pod_domains));
        if key == HOSTNAME
            && let Some(host) = finite_single(node_domains)
        {
            let ok = pod_domains.has(host) && (self.host_count(host) > 0 || may_seed);
            return domains_req(key, if ok { vec![host.to_string()] } else { vec![] });
        }
        let mut options: Vec<String> = if node_domains.operator() == Operator::In {
            node_domains
                .values()
                .filter(|d| pod_domains.has(d) && self.count(d) > 0)
                .map(str::to_string)
                .collect()
        } else {
            self.domains
                .iter()
                .filter(|(d, c)| **c > 0 && pod_domains.has(d) && node_domains.has(d))
                .map(|(d, _)| d.clone())
                .collect()
        };
        if options.is_empty() && may_seed {
            if let Some(d) = self
                .domains
                .keys()
                .find(|d| pod_domains.has(d) && node_domains.has(d))
            {
                options.push(d.clone());
            }
            if let Some(d) = self.domains.keys().find(|d| pod_domains.has(d))
                && !options.contains(d)
            {
                options.push(d.clone());
            }
        }
        domains_req(key, options)
    }

    fn next_anti_affinity(
        &self,
        pod_domains: &Requirement,
        node_domains: &Requirement,
    ) -> Result<Requirement, String> {
        let key = &self.id.key;
        if key == HOSTNAME
            && let Some(host) = finite_single(node_domains)
        {
            return domains_req(
                key,
                if self.host_count(host) == 0 {
                    vec![host.to_string()]
                } else {
                    vec![]
                },
            );
        }
        let options = self
            .empty
            .iter()
            .filter(|d| node_domains.has(d) && pod_domains.has(d))
            .cloned()
            .collect();
        domains_req(key, options)
    }

    fn describe_counts(&self) -> String {
        let shown: Vec<String> = self
            .domains
            .iter()
            .take(25)
            .map(|(d, c)| format!("{d}={c}"))
            .collect();
        let more = self.domains.len().saturating_sub(25);
        if more > 0 {
            format!("{} and {more} more", shown.join(", "))
        } else {
            shown.join(", ")
        }
    }
}

/// Domains NodePools can create per key, each with the taint sets of the pools offering it
/// (an untainted pool makes the domain open to every pod).
#[derive(Debug, Clone, Default)]
pub(crate) struct DomainGroups {
    by_key: BTreeMap<String, BTreeMap<String, Vec<Vec<Taint>>>>,
}

impl DomainGroups {
    /// Records that a pool with `taints` can create `domain` for `key`.
    pub(crate) fn insert(&mut self, key: &str, domain: &str, taints: &[Taint]) {
        // Look the key up before allocating it: almost every insert finds it.
        if !self.by_key.contains_key(key) {
            self.by_key.insert(key.to_string(), BTreeMap::new());
        }
        let Some(domains) = self.by_key.get_mut(key) else {
            return;
        };
        match domains.get_mut(domain) {
            None => {
                domains.insert(domain.to_string(), vec![taints.to_vec()]);
            }
            Some(sets) if taints.is_empty() => *sets = vec![Vec::new()],
            Some(sets) if sets[0].is_empty() => {}
            Some(sets) => sets.push(taints.to_vec()),
        }
    }

    fn for_each(
        &self,
        key: &str,
        tolerations: &[Toleration],
        honor_taints: bool,
        mut f: impl FnMut(&str),
    ) {
        if let Some(domains) = self.by_key.get(key) {
            for (d, sets) in domains {
                if !honor_taints
                    || sets
                        .iter()
                        .any(|ts| first_untolerated(ts, tolerations, true).is_none())
                {
                    f(d);
                }
            }
        }
    }
}

/// A node as topology counting sees it.
#[derive(Debug, Clone)]
pub(crate) struct ClusterNode<'a> {
    /// The node.
    pub node: &'a Node,
    /// `In [value]` for each label (shared with the [`crate::solver::SolveCache`]).
    pub reqs: std::sync::Arc<Requirements>,
    /// Being deleted: its pods still count, but its domain is not offered.
    pub deleting: bool,
}

/// Running pods and their nodes, for counting existing domains.
#[derive(Debug, Clone)]
pub(crate) struct Cluster<'a> {
    /// Every node of the snapshot.
    pub nodes: Vec<ClusterNode<'a>>,
    /// Bound, non-terminating pods with the index of their node in `nodes`.
    pub bound: Vec<(&'a Pod, usize)>,
    /// Namespace labels.
    pub namespaces: &'a BTreeMap<String, Labels>,
}

/// How many more pods one hostname-keyed group, owned by a pod on a new node, lets onto
/// that node: see [`Topology::host_caps`].
#[derive(Debug, Clone)]
pub(crate) struct HostCap {
    group: usize,
    inverse: bool,
    /// Selected pods that may still join the node.
    pub(crate) room: i64,
}

/// Every topology group of one solve.
#[derive(Debug, Clone)]
pub(crate) struct Topology {
    policy: PreferencePolicy,
    domain_groups: DomainGroups,
    groups: Vec<TopologyGroup>,
    index: HashMap<GroupId, usize>,
    inverse: Vec<TopologyGroup>,
    inverse_index: HashMap<GroupId, usize>,
    owned: Vec<Vec<usize>>,
    inverse_owned: Vec<Vec<usize>>,
    /// Per pending pod, the groups of `owned` it holds as a requirement (a DoNotSchedule
    /// spread, a required affinity or anti-affinity term); the others are preferences.
    owned_required: Vec<Vec<usize>>,
    /// Per pending pod, when it was placed (the greedy pass's count of placements so far,
    /// from 1), 0 while it is not.
    placed: Vec<u32>,
    /// Placements so far.
    placements: u32,
    /// Per group, once the greedy pass is over ([`Topology::settle`]): whether some owner
    /// holds it as a requirement, and the latest placement of an owner (0 for none).
    settled: Vec<(bool, u32)>,
}

fn with_label_keys(
    selector: &Option<LabelSelector>,
    pod: &Pod,
    match_keys: &[String],
    mismatch_keys: &[String],
) -> Option<LabelSelector> {
    let mut sel = selector.clone()?;
    for (keys, operator) in [
        (match_keys, SelectorOperator::In),
        (mismatch_keys, SelectorOperator::NotIn),
    ] {
        for k in keys {
            if let Some(v) = pod.labels.get(k) {
                sel.match_expressions.push(LabelSelectorRequirement {
                    key: k.clone(),
                    operator,
                    values: vec![v.clone()],
                });
            }
        }
    }
    Some(sel)
}

impl Topology {
    /// An empty topology for `pending` pods.
    pub(crate) fn new(
        policy: PreferencePolicy,
        domain_groups: DomainGroups,
        pending: usize,
    ) -> Self {
        Topology {
            policy,
            domain_groups,
            groups: Vec::new(),
            index: HashMap::new(),
            inverse: Vec::new(),
            inverse_index: HashMap::new(),
            owned: vec![Vec::new(); pending],
            inverse_owned: vec![Vec::new(); pending],
            owned_required: vec![Vec::new(); pending],
            placed: vec![0; pending],
            placements: 0,
            settled: Vec::new(),
        }
    }

    fn new_group(&self, id: GroupId, tolerations: &[Toleration]) -> TopologyGroup {
        let honor_taints = id.filter.as_ref().is_none_or(|f| f.honor_taints);
        let mut g = TopologyGroup {
            id,
            domains: BTreeMap::new(),
            empty: BTreeSet::new(),
            placeholders: Vec::new(),
        };
        let key = g.id.key.clone();
        self.domain_groups
            .for_each(&key, tolerations, honor_taints, |d| g.register(d));
        g
    }

    fn anti_affinity_ids(&self, pod: &Pod, cluster: &Cluster<'_>) -> Vec<GroupId> {
        pod.affinity
            .pod_anti_affinity
            .required
            .iter()
            .map(|term| GroupId {
                kind: Kind::AntiAffinity,
                key: term.topology_key.clone(),
                namespaces: Namespaces::for_term(&pod.namespace, term, cluster.namespaces),
                selector: with_label_keys(
                    &term.label_selector,
                    pod,
                    &term.match_label_keys,
                    &term.mismatch_label_keys,
                ),
                max_skew: i32::MAX,
                min_domains: None,
                filter: None,
            })
            .collect()
    }

    fn inverse_group(&mut self, id: GroupId, tolerations: &[Toleration]) -> usize {
        if let Some(&i) = self.inverse_index.get(&id) {
            return i;
        }
        let g = self.new_group(id.clone(), tolerations);
        self.inverse.push(g);
        self.inverse_index.insert(id, self.inverse.len() - 1);
        self.inverse.len() - 1
    }

    /// Tracks the required anti-affinity of every running pod, so incoming pods it selects
    /// stay out of its domain.
    pub(crate) fn add_running_anti_affinities(&mut self, cluster: &Cluster<'_>) {
        for &(pod, node) in &cluster.bound {
            for id in self.anti_affinity_ids(pod, cluster) {
                let g = self.inverse_group(id, &pod.tolerations);
                let key = self.inverse[g].id.key.clone();
                if let Some(d) = cluster.nodes[node].node.labels.get(&key) {
                    self.inverse[g].record(d);
                }
            }
        }
    }

    /// `Topology.Update`: (re)builds the groups pending pod `p` owns from its current
    /// relaxation state, counting existing pods for groups seen for the first time.
    pub(crate) fn update(&mut self, p: usize, r: &Relaxed<'_>, cluster: &Cluster<'_>) {
        self.owned[p].clear();
        self.owned_required[p].clear();
        let pod = r.pod;
        let has_anti = !pod.affinity.pod_anti_affinity.required.is_empty()
            || (self.policy == PreferencePolicy::Respect
                && !pod.affinity.pod_anti_affinity.preferred.is_empty());
        if has_anti {
            for id in self.anti_affinity_ids(pod, cluster) {
                let g = self.inverse_group(id, &r.tolerations);
                if !self.inverse_owned[p].contains(&g) {
                    self.inverse_owned[p].push(g);
                }
            }
        }
        let mut ids = Vec::new();
        let mut required = Vec::new();
        for tsc in r.spreads.iter() {
            required.push(tsc.when_unsatisfiable == WhenUnsatisfiable::DoNotSchedule);
            ids.push(GroupId {
                kind: Kind::Spread,
                key: tsc.topology_key.clone(),
                namespaces: Namespaces::Set(BTreeSet::from([pod.namespace.clone()])),
                selector: with_label_keys(&tsc.label_selector, pod, &tsc.match_label_keys, &[]),
                max_skew: tsc.max_skew,
                min_domains: tsc.min_domains,
                filter: Some(NodeFilter::new(
                    r,
                    tsc.node_taints_policy,
                    tsc.node_affinity_policy,
                )),
            });
        }
        let a = &pod.affinity;
        let affinity = (a.pod_affinity.required.iter().map(|t| (t, true)))
            .chain(r.preferred_affinity.iter().map(|w| (&w.term, false)));
        let anti = (a.pod_anti_affinity.required.iter().map(|t| (t, true)))
            .chain(r.preferred_anti_affinity.iter().map(|w| (&w.term, false)));
        for (kind, (term, is_required)) in affinity
            .map(|t| (Kind::Affinity, t))
            .chain(anti.map(|t| (Kind::AntiAffinity, t)))
        {
            required.push(is_required);
            ids.push(GroupId {
                kind,
                key: term.topology_key.clone(),
                namespaces: Namespaces::for_term(&pod.namespace, term, cluster.namespaces),
                selector: with_label_keys(
                    &term.label_selector,
                    pod,
                    &term.match_label_keys,
                    &term.mismatch_label_keys,
                ),
                max_skew: i32::MAX,
                min_domains: None,
                filter: None,
            });
        }
        for (id, is_required) in ids.into_iter().zip(required) {
            let g = match self.index.get(&id) {
                Some(&g) => g,
                None => {
                    let mut g = self.new_group(id.clone(), &r.tolerations);
                    count_domains(&mut g, cluster);
                    self.groups.push(g);
                    self.index.insert(id, self.groups.len() - 1);
                    self.groups.len() - 1
                }
            };
            if !self.owned[p].contains(&g) {
                self.owned[p].push(g);
            }
            if is_required && !self.owned_required[p].contains(&g) {
                self.owned_required[p].push(g);
            }
        }
    }

    /// Makes `domain` of `key` known to every group (a new node or claim's hostname).
    pub(crate) fn register(&mut self, key: &str, domain: &str) {
        self.register_since(key, domain, (0, 0));
    }

    /// How many groups and inverse groups exist, for [`Topology::register_since`].
    pub(crate) fn group_counts(&self) -> (usize, usize) {
        (self.groups.len(), self.inverse.len())
    }

    /// [`Topology::register`] for the groups created after `since` (a
    /// [`Topology::group_counts`] value) only: the older ones already know `domain`, since
    /// groups are only ever appended and never forget a domain. Returns the current counts,
    /// so a claim committed pod after pod registers its hostname with each group once.
    pub(crate) fn register_since(
        &mut self,
        key: &str,
        domain: &str,
        since: (usize, usize),
    ) -> (usize, usize) {
        let (groups, inverse) = since;
        for g in self
            .groups
            .iter_mut()
            .skip(groups)
            .chain(self.inverse.iter_mut().skip(inverse))
        {
            if g.id.key == key {
                g.register(domain);
            }
        }
        self.group_counts()
    }

    /// `Topology.AddRequirements`: the domain requirements pod `p` needs on a node with these
    /// taints and requirements, or why no domain works (an empty message without `explain`,
    /// for callers that discard it).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn requirements(
        &self,
        p: usize,
        pod: &Pod,
        taints: &[Taint],
        strict: &Requirements,
        node: &Requirements,
        allow_undefined: bool,
        explain: bool,
    ) -> Result<Requirements, String> {
        let mut out = Requirements::new();
        let owned = self.owned[p].iter().map(|&g| &self.groups[g]);
        let inverse = self
            .inverse
            .iter()
            .filter(|g| g.counts(pod, taints, node, allow_undefined));
        let mut exists: Option<Requirement> = None;
        for g in owned.chain(inverse) {
            let key = &g.id.key;
            // An undefined key allows any domain; build that `Exists` once per key.
            let mut any = || -> Result<Requirement, String> {
                match &exists {
                    Some(e) if e.key() == key.as_str() => Ok(e.clone()),
                    _ => {
                        let e = req(key, Operator::Exists, Vec::<String>::new())?;
                        exists = Some(e.clone());
                        Ok(e)
                    }
                }
            };
            let (pod_any, node_any);
            let pod_domains = match strict.get(key) {
                Some(r) => r,
                None => {
                    pod_any = any()?;
                    &pod_any
                }
            };
            let node_domains = match node.get(key) {
                Some(r) => r,
                None => {
                    node_any = any()?;
                    &node_any
                }
            };
            let domains = g.next(pod, pod_domains, node_domains)?;
            if domains.is_empty() {
                if !explain {
                    return Err(String::new());
                }
                return Err(format!(
                    "{} on {key} cannot be satisfied (pods per domain: {}; pod allows {}, node allows {})",
                    g.id.kind.describe(),
                    g.describe_counts(),
                    describe_requirement(pod_domains),
                    describe_requirement(node_domains),
                ));
            }
            out.add(domains);
        }
        Ok(out)
    }

    /// Whether a node whose hostname is `host` certainly cannot take pending pod `p` because
    /// of a hostname-keyed group the pod owns: required anti-affinity with a matching pod
    /// already there, or a hostname spread whose count there would exceed maxSkew. These are
    /// exactly the cases [`Topology::requirements`] rejects for a single-host node, checked
    /// with one map lookup so the claim scan stays linear in the number of open claims;
    /// `false` means "run the full check", never "accepted".
    /// `number` is [`placeholder_number`] of `host`, which the caller keeps per claim.
    pub(crate) fn hostname_blocked(
        &self,
        p: usize,
        pod: &Pod,
        host: &str,
        number: Option<usize>,
    ) -> bool {
        self.owned[p].iter().any(|&g| {
            let g = &self.groups[g];
            if g.id.key != HOSTNAME {
                return false;
            }
            let count = || match number {
                Some(n) => g.placeholders.get(n).copied().unwrap_or(0),
                None => g.count(host),
            };
            match g.id.kind {
                Kind::AntiAffinity => count() > 0,
                Kind::Spread => count() + i64::from(g.selects(pod)) > i64::from(g.id.max_skew),
                Kind::Affinity => false,
            }
        })
    }

    /// For each non-hostname group pending pod `p` owns, the domains a node could still be
    /// given for it, computed once per attempt from counts that do not change until the pod is
    /// placed. A node whose requirement on that key is `In` a set disjoint from these domains
    /// is certainly rejected by [`Topology::requirements`] (no domain is chosen) or by the
    /// compatibility check that follows it (the chosen domains lie outside the node's), so
    /// the claim scan can skip it with [`domains_blocked`]. Hostname groups are left to
    /// [`Topology::hostname_blocked`].
    pub(crate) fn allowed_domains(
        &self,
        p: usize,
        pod: &Pod,
        strict: &Requirements,
    ) -> Vec<(&str, Vec<&str>)> {
        let mut out = Vec::new();
        for &g in &self.owned[p] {
            let g = &self.groups[g];
            let key = g.id.key.as_str();
            if key == HOSTNAME {
                continue;
            }
            let any;
            let pod_domains = match strict.get(key) {
                Some(r) => r,
                None => match req(key, Operator::Exists, Vec::new()) {
                    Ok(r) => {
                        any = r;
                        &any
                    }
                    Err(_) => continue,
                },
            };
            let allowed: Vec<&str> = match g.id.kind {
                Kind::Spread => {
                    let min = g.min_count(pod_domains);
                    let own = i64::from(g.selects(pod));
                    let skew = i64::from(g.id.max_skew);
                    g.domains
                        .iter()
                        .filter(|(_, c)| **c + own - min <= skew)
                        .map(|(d, _)| d.as_str())
                        .collect()
                }
                Kind::Affinity => {
                    let may_seed = g.selects(pod)
                        && (g.domains.len() == g.empty.len()
                            || !g.any_compatible_pod_domain(pod_domains));
                    g.domains
                        .iter()
                        .filter(|(d, c)| (**c > 0 || may_seed) && pod_domains.has(d))
                        .map(|(d, _)| d.as_str())
                        .collect()
                }
                Kind::AntiAffinity => g
                    .empty
                    .iter()
                    .filter(|d| pod_domains.has(d))
                    .map(String::as_str)
                    .collect(),
            };
            out.push((key, allowed));
        }
        out
    }

    /// Whether pending pod `p` may move to another new node with the same requirements
    /// `reqs`, one that holds only pods for which this is also true, without breaking any
    /// topology decision: every group it owns is keyed on a label `reqs` pins to one value
    /// (and not the hostname, which differs from node to node), and so is every group that
    /// could count it, except hostname-keyed spreads and anti-affinities owned by other
    /// pods. Those only ever limit how many selected pods share their owner's node, and the
    /// hostname's minimum count is always 0 (a new node has none), so the pod leaving that
    /// node only lowers a count there; and it arrives on a node holding no owner of a
    /// hostname-keyed group, since such owners are never movable. A hostname-keyed affinity
    /// that selects the pod keeps it, since its owner may need it beside itself.
    /// Conservative otherwise: a group that merely selects the pod counts, whatever its node
    /// filter says.
    pub(crate) fn movable(&self, p: usize, pod: &Pod, reqs: &Requirements) -> bool {
        self.held_only_by(p, pod, reqs, |_| false, false)
    }

    /// Whether pending pod `p` may move to any new node with requirements `reqs` whose
    /// final content keeps every hostname-keyed constraint of every pod on it (see
    /// [`Self::owner_caps`]): besides what [`Self::movable`] allows, the groups it owns and
    /// its own required anti-affinity may be keyed on the hostname, as long as none is a
    /// pod affinity (its owner may need a partner that stays elsewhere). A hostname-keyed
    /// spread or anti-affinity only bounds which pods share its owner's node (the
    /// hostname's minimum count is always 0, and a new node's hostname is its own), so on
    /// a new node it is kept exactly when that node's final content keeps it.
    pub(crate) fn kept_on_hostname_only(&self, p: usize, pod: &Pod, reqs: &Requirements) -> bool {
        let apart = |g: &TopologyGroup| g.id.key == HOSTNAME && g.id.kind != Kind::Affinity;
        self.held_only_by(p, pod, reqs, apart, true)
    }

    /// Records, once the greedy pass is over, which groups still bind the pods they count
    /// (see [`Self::binds`]): owners are final then.
    pub(crate) fn settle(&mut self) {
        let mut settled = vec![(false, 0u32); self.groups.len()];
        for (p, owned) in self.owned.iter().enumerate() {
            for &g in owned {
                settled[g].1 = settled[g].1.max(self.placed[p]);
            }
            for &g in &self.owned_required[p] {
                settled[g].0 = true;
            }
        }
        self.settled = settled;
    }

    /// Whether group `g` (of [`Self::groups`]) has a say in where pod `p`, which it counts,
    /// may be moved: when some owner holds it as a requirement (its final counts must keep
    /// that owner's constraint), or when an owner was placed after `p` and so chose its
    /// domain knowing where `p` was. A group held only as a preference by owners placed
    /// before `p` has none: Karpenter weighs an owner's preferences only when placing that
    /// owner, and later pods go wherever their own constraints allow, so a pod placed after
    /// them may move as freely. The same holds for a group no pod owns any more (every
    /// owner relaxed it away). Until [`Self::settle`] runs, every group binds.
    fn binds(&self, g: usize, p: usize) -> bool {
        self.settled
            .get(g)
            .is_none_or(|&(required, latest)| required || latest >= self.placed[p])
    }

    /// Whether every group pod `p` owns is keyed on a label `reqs` pins to one value or
    /// is one `owned_ok` accepts, its required anti-affinity is pinned so too (or, with
    /// `inverse_on_hostname`, keyed on the hostname), and every group that could count it
    /// is pinned or a hostname spread or anti-affinity of another pod or has no say in
    /// where `p` goes (see [`Self::movable`] and [`Self::binds`]).
    fn held_only_by(
        &self,
        p: usize,
        pod: &Pod,
        reqs: &Requirements,
        owned_ok: impl Fn(&TopologyGroup) -> bool,
        inverse_on_hostname: bool,
    ) -> bool {
        let pinned = |key: &str| key != HOSTNAME && reqs.get(key).and_then(finite_single).is_some();
        let leaves_harmlessly =
            |g: &TopologyGroup| g.id.key == HOSTNAME && g.id.kind != Kind::Affinity;
        self.owned[p].iter().all(|&g| {
            let g = &self.groups[g];
            pinned(&g.id.key) || owned_ok(g)
        }) && self.inverse_owned[p].iter().all(|&g| {
            let key = &self.inverse[g].id.key;
            pinned(key) || (inverse_on_hostname && key == HOSTNAME)
        }) && self.groups.iter().enumerate().all(|(i, g)| {
            pinned(&g.id.key) || leaves_harmlessly(g) || !self.binds(i, p) || !g.selects(pod)
        }) && self
            .inverse
            .iter()
            .all(|g| pinned(&g.id.key) || leaves_harmlessly(g) || !g.selects(pod))
    }

    /// The limits the pending pods `present`, all on one new node, put on pods joining that
    /// node through the hostname-keyed spreads and anti-affinities they own (see
    /// [`HostCap`]). A required or respected anti-affinity lets no pod it selects join. A
    /// spread with maxSkew k lets selected pods join while its owner sees at most
    /// k − (1 if it selects itself) selected pods beside it: the hostname's minimum count is
    /// always 0, so that is the skew the greedy pass checks, here over the node's final
    /// content rather than only the pods placed before the owner. A spread already past
    /// that gets a negative room and admits nothing more.
    pub(crate) fn host_caps(&self, present: &[(usize, &Pod)]) -> Vec<HostCap> {
        let mut caps = Vec::new();
        for &(q, owner) in present {
            caps.extend(self.owner_caps(q, owner, present));
        }
        caps
    }

    /// The hostname-keyed spreads and anti-affinities the pending pods `pods` own, as
    /// per-node capacities a packing can check like resources: per such group, at most
    /// its maxSkew (a spread) or 1 (an anti-affinity, required or preferred, and the
    /// inverse of a required one) of the pods that own it or that it selects share a new
    /// node. Returns each dimension's capacity and, per pod of `pods`, the dimensions it
    /// takes one unit of. A node within every capacity keeps every cap
    /// [`Self::host_caps`] computes for it (the count includes the owner, so a spread's
    /// room k − 1 − others and an anti-affinity's room −others stay non-negative); it is
    /// stricter only where an owner is not selected by its own group.
    pub(crate) fn apart_dims(&self, pods: &[(usize, &Pod)]) -> (Vec<i64>, Vec<Vec<usize>>) {
        let mut keys: BTreeMap<(usize, bool), usize> = BTreeMap::new();
        let mut caps: Vec<i64> = Vec::new();
        let mut uses: Vec<Vec<usize>> = vec![Vec::new(); pods.len()];
        let mut dim = |key: (usize, bool), cap: i64| {
            *keys.entry(key).or_insert_with(|| {
                caps.push(cap);
                caps.len() - 1
            })
        };
        let mut found: Vec<((usize, bool), i64)> = Vec::new();
        for &(q, _) in pods {
            for &g in &self.owned[q] {
                let group = &self.groups[g];
                if group.id.key != HOSTNAME {
                    continue;
                }
                match group.id.kind {
                    Kind::Affinity => {}
                    Kind::AntiAffinity => found.push(((g, false), 1)),
                    Kind::Spread => found.push(((g, false), i64::from(group.id.max_skew))),
                }
            }
            for &g in &self.inverse_owned[q] {
                if self.inverse[g].id.key == HOSTNAME {
                    found.push(((g, true), 1));
                }
            }
        }
        found.sort_unstable();
        found.dedup();
        for &(key, cap) in &found {
            dim(key, cap);
        }
        for (n, &(q, pod)) in pods.iter().enumerate() {
            for &(key, _) in &found {
                let (g, inverse) = key;
                let owns = if inverse {
                    self.inverse_owned[q].contains(&g)
                } else {
                    self.owned[q].contains(&g)
                };
                let group = if inverse {
                    &self.inverse[g]
                } else {
                    &self.groups[g]
                };
                if owns || group.selects(pod) {
                    uses[n].push(keys[&key]);
                }
            }
        }
        (caps, uses)
    }

    /// The [`HostCap`]s pod `q` (`owner`) owns on a new node holding `present` (which may
    /// include `q` itself; it is never counted beside itself), as [`Self::host_caps`]
    /// computes them. A cap with a negative room is one the node's content already breaks
    /// (for an anti-affinity: a pod it selects is there).
    pub(crate) fn owner_caps(
        &self,
        q: usize,
        owner: &Pod,
        present: &[(usize, &Pod)],
    ) -> Vec<HostCap> {
        let mut caps = Vec::new();
        for &g in &self.owned[q] {
            let group = &self.groups[g];
            if group.id.key != HOSTNAME {
                continue;
            }
            let beside = || {
                let n = present
                    .iter()
                    .filter(|&&(o, pod)| o != q && group.selects(pod))
                    .count();
                i64::try_from(n).unwrap_or(i64::MAX)
            };
            let room = match group.id.kind {
                Kind::Affinity => continue,
                Kind::AntiAffinity => -beside(),
                Kind::Spread => {
                    i64::from(group.id.max_skew) - i64::from(group.selects(owner)) - beside()
                }
            };
            caps.push(HostCap {
                group: g,
                inverse: false,
                room,
            });
        }
        for &g in &self.inverse_owned[q] {
            let group = &self.inverse[g];
            if group.id.key == HOSTNAME {
                let beside = present
                    .iter()
                    .filter(|&&(o, pod)| o != q && group.selects(pod))
                    .count();
                caps.push(HostCap {
                    group: g,
                    inverse: true,
                    room: -i64::try_from(beside).unwrap_or(i64::MAX),
                });
            }
        }
        caps
    }

    /// Whether pending pod `p`, which [`Self::movable`] keeps, is kept only by hostname
    /// spreads it owns: every other group it owns, and every group that could count it,
    /// is one `movable` would let it leave (keyed on a label `reqs` pins to one value, or a
    /// hostname spread or anti-affinity of another pod), and it owns no hostname-keyed
    /// anti-affinity or affinity. Such a pod may move to another node with requirements
    /// `reqs` whose final content keeps every hostname-keyed count it takes part in within
    /// bounds (its own spreads' counts beside it, and the caps of the owners already
    /// there, see [`Self::owner_caps`]): the hostname's minimum count is always 0, so a
    /// spread only bounds how many selected pods share its owner's node.
    pub(crate) fn spread_owner_only(&self, p: usize, pod: &Pod, reqs: &Requirements) -> bool {
        let host_spread = |g: &TopologyGroup| g.id.key == HOSTNAME && g.id.kind == Kind::Spread;
        self.owned[p].iter().any(|&g| host_spread(&self.groups[g]))
            && self.held_only_by(p, pod, reqs, host_spread, false)
    }

    /// Whether every group that selects `pod` (its own, other pods', and the inverse groups
    /// of running pods' anti-affinity) is a hostname-keyed anti-affinity: nothing but which
    /// pods share its node decides where it may go.
    pub(crate) fn selected_only_apart(&self, pod: &Pod) -> bool {
        self.groups
            .iter()
            .chain(self.inverse.iter())
            .all(|g| !g.selects(pod) || (g.id.key == HOSTNAME && g.id.kind == Kind::AntiAffinity))
    }

    /// Whether `cap`'s group counts `pod`: such a pod may join the cap's node only while
    /// the cap's room is positive, and uses one of it.
    pub(crate) fn cap_selects(&self, cap: &HostCap, pod: &Pod) -> bool {
        let group = if cap.inverse {
            &self.inverse[cap.group]
        } else {
            &self.groups[cap.group]
        };
        group.selects(pod)
    }

    /// `Topology.Record`: counts pod `p` placed on a node with these taints/requirements.
    pub(crate) fn record(
        &mut self,
        p: usize,
        pod: &Pod,
        taints: &[Taint],
        reqs: &Requirements,
        allow_undefined: bool,
    ) {
        self.placements += 1;
        self.placed[p] = self.placements;
        for g in &mut self.groups {
            if g.counts(pod, taints, reqs, allow_undefined) {
                let Some(r) = reqs.get(&g.id.key) else {
                    continue;
                };
                if g.id.kind == Kind::AntiAffinity {
                    let values: Vec<String> = r.values().map(str::to_string).collect();
                    for v in values {
                        g.record(&v);
                    }
                } else if let Some(v) = finite_single(r) {
                    let v = v.to_string();
                    g.record(&v);
                }
            }
        }
        for &g in &self.inverse_owned[p] {
            let g = &mut self.inverse[g];
            if let Some(r) = reqs.get(&g.id.key) {
                let values: Vec<String> = r.values().map(str::to_string).collect();
                for v in values {
                    g.record(&v);
                }
            }
        }
    }
}

/// Whether a node with requirements `node` is certainly rejected by one of the
/// [`Topology::allowed_domains`] entries: it pins the key to `In` values none of which is
/// allowed. `false` means "run the full check".
pub(crate) fn domains_blocked(allowed: &[(&str, Vec<&str>)], node: &Requirements) -> bool {
    allowed.iter().any(|(key, domains)| {
        node.get(key).is_some_and(|r| {
            r.operator() == Operator::In && !r.values().any(|v| domains.contains(&v))
        })
    })
}

/// `countDomains`: registers the domains of matching nodes and counts the running pods the
/// group selects.
fn count_domains(g: &mut TopologyGroup, cluster: &Cluster<'_>) {
    for n in cluster.nodes.iter().filter(|n| !n.deleting) {
        let matches =
            g.id.filter
                .as_ref()
                .is_none_or(|f| f.matches(&n.node.taints, &n.reqs, false));
        if matches && let Some(d) = n.node.labels.get(&g.id.key) {
            let d = d.clone();
            g.register(&d);
        }
    }
    for &(pod, node) in &cluster.bound {
        if !g.selects(pod) {
            continue;
        }
        let n = &cluster.nodes[node];
        let domain = match n.node.labels.get(&g.id.key) {
            Some(d) => d.as_str(),
            None if g.id.key == HOSTNAME => n.node.name.as_str(),
            None => continue,
        };
        if g.id
            .filter
            .as_ref()
            .is_none_or(|f| f.matches(&n.node.taints, &n.reqs, false))
        {
            let d = domain.to_string();
            g.record(&d);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholder_numbers_only_for_the_exact_spelling() {
        for (host, want) in [
            ("hostname-placeholder-0001", Some(1)),
            ("hostname-placeholder-0000", Some(0)),
            ("hostname-placeholder-12345", Some(12345)),
            ("hostname-placeholder-1", None),
            ("hostname-placeholder-01234", None),
            ("hostname-placeholder-00a1", None),
            ("hostname-placeholder-+001", None),
            ("ip-10-0-0-1", None),
        ] {
            assert_eq!(placeholder_number(host), want, "{host}");
        }
    }

    #[test]
    fn host_count_agrees_with_the_domain_map() {
        let mut g = TopologyGroup {
            id: GroupId {
                kind: Kind::AntiAffinity,
                key: HOSTNAME.to_string(),
                namespaces: Namespaces::All,
                selector: None,
                max_skew: 1,
                min_domains: None,
                filter: None,
            },
            domains: BTreeMap::new(),
            empty: BTreeSet::new(),
            placeholders: Vec::new(),
        };
        for host in [
            "hostname-placeholder-0003",
            "hostname-placeholder-0003",
            "hostname-placeholder-3",
            "node-a",
        ] {
            g.record(host);
        }
        for host in [
            "hostname-placeholder-0003",
            "hostname-placeholder-3",
            "hostname-placeholder-0002",
            "hostname-placeholder-9999",
            "node-a",
            "node-b",
        ] {
            assert_eq!(g.host_count(host), g.count(host), "{host}");
        }
        assert_eq!(g.host_count("hostname-placeholder-0003"), 2);
    }
}
