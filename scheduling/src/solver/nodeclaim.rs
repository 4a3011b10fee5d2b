//! NodeClaim templates (one per NodePool) and the claims this solve opens (`nodeclaim.go`,
//! `nodeclaimtemplate.go`): requirements narrowed pod by pod, and the instance types that can
//! still host every pod plus DaemonSet overhead with a compatible available offering.

use crate::labels::{
    CAPACITY_TYPE, HOSTNAME, NODE_INITIALIZED, NODE_REGISTERED, NODEPOOL, RESERVED_CAPACITY_LABELS,
    ZONE,
};
use crate::model::{HostPort, InstanceType, NodePool, Offering};
use crate::plan::InstanceTypeOption;
use crate::requirements::{Operator, Requirement, Requirements};
use crate::resources::Resources;
use crate::solver::MinValuesPolicy;
use crate::solver::alloc_table::{AllocTable, Bounds};
use crate::solver::arith;
use crate::solver::daemons::{self, Daemon, DaemonGroup};
use crate::solver::hostports::{self, HostPortUsage};
use crate::solver::topology::{self, describe_requirement};
use std::cell::{OnceCell, RefCell};
use std::collections::hash_map::DefaultHasher;
use std::collections::{BTreeSet, HashMap};
use std::hash::{Hash, Hasher};
use std::sync::Arc;

/// Whether an offering is available and allowed by `reqs` (zone, capacity type and, for a
/// reserved offering, its reservation id).
pub(crate) fn offering_ok(o: &Offering, reqs: &Requirements) -> bool {
    OfferingFilter::new(reqs).allows(o)
}

/// [`offering_ok`] for many offerings against the same requirements: the keys every
/// offering is checked on are looked up once, not once per offering (an instance type has a
/// dozen offerings, and the requirements some 25 keys).
struct OfferingFilter<'r> {
    reqs: &'r Requirements,
    zone: Option<&'r Requirement>,
    capacity: Option<&'r Requirement>,
    /// Whether `reqs` allow an offering without a reservation: they require none of the
    /// labels only reserved nodes carry.
    unreserved: bool,
}

impl<'r> OfferingFilter<'r> {
    fn new(reqs: &'r Requirements) -> Self {
        Self {
            reqs,
            zone: reqs.get(ZONE),
            capacity: reqs.get(CAPACITY_TYPE),
            unreserved: RESERVED_CAPACITY_LABELS
                .iter()
                .all(|k| reqs.get(k).is_none_or(|x| tolerates_absence(x.operator()))),
        }
    }

    /// Whether `o` is available and allowed.
    fn allows(&self, o: &Offering) -> bool {
        offering_allowed(o, self.zone, self.capacity)
            && match &o.reservation {
                None => self.unreserved,
                Some(r) => {
                    self.reqs.get(&r.id_label).is_none_or(|x| x.has(&r.id))
                        && r.labels
                            .iter()
                            .all(|(k, v)| self.reqs.get(k).is_none_or(|x| x.has(v)))
                }
            }
    }
}

/// [`offering_ok`] given the zone and capacity-type requirements themselves, for
/// requirements that say nothing about reservation ids.
fn offering_allowed(
    o: &Offering,
    zone: Option<&Requirement>,
    capacity: Option<&Requirement>,
) -> bool {
    o.available
        && zone.is_none_or(|r| r.has(&o.zone))
        && capacity.is_none_or(|r| r.has(&o.capacity_type))
}

/// The cheapest available offering allowed by `reqs` (ties: zone, then capacity type).
pub(crate) fn cheapest<'a>(it: &'a InstanceType, reqs: &Requirements) -> Option<&'a Offering> {
    let filter = OfferingFilter::new(reqs);
    cheapest_index(it, |o| filter.allows(o)).map(|i| &it.offerings[i as usize])
}

/// The index of the cheapest offering `ok` accepts (ties: zone, then capacity type, then the
/// first listed), the one rule behind [`cheapest`] and [`Template::offers`].
fn cheapest_index(it: &InstanceType, ok: impl Fn(&Offering) -> bool) -> Option<u32> {
    it.offerings
        .iter()
        .enumerate()
        .filter(|(_, o)| ok(o))
        .min_by(|(_, a), (_, b)| {
            a.price
                .total_cmp(&b.price)
                .then_with(|| a.zone.cmp(&b.zone))
                .then_with(|| a.capacity_type.cmp(&b.capacity_type))
        })
        .map(|(i, _)| i as u32)
}

/// A NodePool ready to open claims.
#[derive(Debug, Clone)]
pub(crate) struct Template<'a> {
    /// The pool.
    pub pool: &'a NodePool,
    /// Pool requirements ∩ template labels ∩ `karpenter.sh/nodepool` ∩ registered/initialized.
    pub reqs: Requirements,
    /// Instance types compatible with `reqs` that have an available compatible offering.
    pub its: Vec<&'a InstanceType>,
    /// Their allocatable.
    pub allocs: Vec<Resources>,
    /// The same, packed for the scans over a claim's options.
    pub alloc_table: AllocTable,
    /// DaemonSet groups.
    pub groups: Vec<DaemonGroup>,
    /// Each instance type's group.
    pub group_of: Vec<usize>,
    /// The smallest DaemonSet overhead of any group, for quick rejection.
    pub min_overhead: Resources,
    /// Element-wise largest capacity of `its` (never below zero): when the pool's limits
    /// leave room for it, they leave room for every instance type.
    pub max_capacity: Resources,
    /// Whether some instance type has an offering with a reservation.
    pub has_reserved: bool,
    /// Every (instance type, offering) index pair whose offering has a reservation.
    pub reserved_offerings: Vec<(u32, u32)>,
    /// The label keys that decide which reservation an offering launches into: the
    /// reservations' id labels and further labels, and the labels only reserved nodes carry
    /// (sorted). A requirement on one of them is checked offering by offering.
    pub reservation_keys: Vec<String>,
    /// Memo tables over `its`, kept by the [`crate::solver::SolveCache`] so later solves over
    /// the same pool and instance types start warm.
    memo: &'a TemplateMemo,
}

/// An instance type's name and, per offering, its zone and capacity type, shared.
#[derive(Debug, Clone)]
struct OptionNames {
    name: Arc<str>,
    /// The place of `name` among the template's names in string order, equal names sharing
    /// one, so ranking options compares two integers instead of two strings.
    name_rank: u32,
    offerings: Vec<(Arc<str>, Arc<str>)>,
}

/// What a template computes on demand over its instance types. It depends only on which
/// instance types the template has (see [`compatible_types`]), so it is shared by every solve
/// whose pool has the same requirements, labels and instance types.
#[derive(Debug, Default)]
pub(crate) struct TemplateMemo {
    /// Per requirement seen in a claim's narrowing, which instance types' requirements
    /// intersect it: the same few narrowings (a zone, a capacity type) recur for claim after
    /// claim, and checking every instance type's labels each time dominated the greedy pass.
    compat: RefCell<HashMap<Requirement, Arc<[bool]>>>,
    /// Per label key a narrowing was on, the instance types' requirements on it, each
    /// distinct one once: a new narrowing on a key then checks a handful of distinct
    /// requirements instead of looking the key up in all 1,340 types' requirements, which
    /// (strings scattered over the heap) took about half a millisecond each time.
    columns: RefCell<HashMap<String, Arc<KeyColumn>>>,
    /// Per (zone, capacity-type) requirement pair seen, each instance type's cheapest
    /// compatible available offering as [`cheapest`] picks it. Offerings depend on those two
    /// keys only, and claims repeat a handful of pairs, so the price and offering checks of
    /// every claim's options read a table instead of searching each option's offerings.
    offers: RefCell<OfferCache>,
    /// Shared copies of each instance type's name and its offerings' zones and capacity
    /// types, built when the first claim's options are ranked: a plan on a large catalogue
    /// lists hundreds of thousands of options, and cloning three strings for each was most
    /// of the time it took to build the plan.
    names: OnceCell<Vec<OptionNames>>,
    /// Per offering table of [`Self::offers`] (the same `Arc`), every instance type with an
    /// offering in it, cheapest first and then by name: a plan's claims share a handful of
    /// tables, so each claim's options are this order filtered instead of a sort of its own.
    orders: RefCell<Vec<(OfferTable, Arc<[u32]>)>>,
}

/// Per instance type, the index of its cheapest allowed offering ([`Template::offers`]).
type OfferTable = Arc<[Option<u32>]>;

/// The zone and capacity-type requirements an offering table was built for, and the table.
type OfferEntry = (Option<Requirement>, Option<Requirement>, Arc<[Option<u32>]>);

/// [`Template::offers`]'s tables, bucketed by a hash of the requirement pair (equal pairs are
/// compared in the bucket, so a lookup clones nothing).
#[derive(Debug, Clone, Default)]
struct OfferCache {
    buckets: HashMap<u64, Vec<OfferEntry>>,
    len: usize,
}

/// How many offering tables [`Template::offers`] keeps, like [`COMPAT_CACHE_LIMIT`].
const OFFER_CACHE_LIMIT: usize = 256;

/// How many distinct requirements [`Template::compatible_with`] remembers; beyond this it
/// computes without storing, so a stream of unique narrowings cannot grow memory unbounded.
const COMPAT_CACHE_LIMIT: usize = 4096;

/// How many price orders [`TemplateMemo`] keeps, like [`COMPAT_CACHE_LIMIT`].
const ORDER_CACHE_LIMIT: usize = 64;

/// How many label keys' columns [`TemplateMemo`] keeps, like [`COMPAT_CACHE_LIMIT`].
const KEY_COLUMN_LIMIT: usize = 256;

/// The instance types' requirements on one label key: `distinct` holds each different one
/// (`None` for types without the key) and `of` says which is each type's.
#[derive(Debug)]
struct KeyColumn {
    distinct: Vec<Option<Requirement>>,
    of: Vec<u32>,
}

fn single(key: &str, value: &str) -> Option<Requirement> {
    Requirement::new(key, Operator::In, [value]).ok()
}

/// The requirements every claim of `pool` starts from: the pool's requirements and labels,
/// its name, registered and initialized.
pub(crate) fn template_requirements(pool: &NodePool) -> Requirements {
    let mut reqs = pool.requirements.clone();
    reqs.add_all(&Requirements::from_labels(pool.labels.iter()));
    for (k, v) in [
        (NODEPOOL, pool.name.as_str()),
        (NODE_REGISTERED, "true"),
        (NODE_INITIALIZED, "true"),
    ] {
        if let Some(r) = single(k, v) {
            reqs.add(r);
        }
    }
    reqs
}

/// The indices of `pool`'s instance types compatible with `reqs` (its
/// [`template_requirements`]) that have an available compatible offering.
pub(crate) fn compatible_types(pool: &NodePool, reqs: &Requirements) -> Vec<u32> {
    let filter = OfferingFilter::new(reqs);
    (0..pool.instance_types.len() as u32)
        .filter(|&i| {
            let it = &pool.instance_types[i as usize];
            intersects_ok(&it.requirements, reqs) && it.offerings.iter().any(|o| filter.allows(o))
        })
        .collect()
}

impl<'a> Template<'a> {
    /// Builds the template from what [`template_requirements`] and [`compatible_types`] give
    /// for `pool`, or says why the pool cannot launch anything.
    pub(crate) fn new(
        pool: &'a NodePool,
        reqs: Requirements,
        compatible: &[u32],
        memo: &'a TemplateMemo,
        daemons: &[Daemon<'_>],
        policy: MinValuesPolicy,
    ) -> Result<Self, String> {
        let its: Vec<&InstanceType> = compatible
            .iter()
            .map(|&i| &*pool.instance_types[i as usize])
            .collect();
        if its.is_empty() {
            return Err("its requirements filter out every instance type".to_string());
        }
        let all: Vec<u32> = (0..its.len() as u32).collect();
        check_min_values(&its, &all, &reqs, policy)?;
        let (groups, group_of) = daemons::group(daemons, &pool.taints, &reqs, &its);
        let min_overhead = groups
            .iter()
            .map(|g| g.overhead.clone())
            .reduce(|a, b| arith::min(&a, &b))
            .unwrap_or_default();
        let allocs: Vec<Resources> = its.iter().map(|it| it.allocatable()).collect();
        let alloc_table = AllocTable::new(&allocs);
        let max_capacity = its.iter().fold(Resources::default(), |acc, it| {
            arith::max(&acc, &it.capacity)
        });
        let reserved_offerings: Vec<(u32, u32)> = its
            .iter()
            .enumerate()
            .flat_map(|(i, it)| {
                it.offerings
                    .iter()
                    .enumerate()
                    .filter(|(_, o)| o.reservation.is_some())
                    .map(move |(o, _)| (i as u32, o as u32))
            })
            .collect();
        let mut reservation_keys: Vec<String> = reserved_offerings
            .iter()
            .filter_map(|&(i, o)| its[i as usize].offerings[o as usize].reservation.as_ref())
            .flat_map(|r| std::iter::once(&r.id_label).chain(r.labels.keys()))
            .cloned()
            .chain(RESERVED_CAPACITY_LABELS.iter().map(|k| k.to_string()))
            .collect();
        reservation_keys.sort_unstable();
        reservation_keys.dedup();
        Ok(Template {
            pool,
            reqs,
            its,
            allocs,
            alloc_table,
            groups,
            group_of,
            min_overhead,
            max_capacity,
            has_reserved: !reserved_offerings.is_empty(),
            reserved_offerings,
            reservation_keys,
            memo,
        })
    }

    /// For each instance type, the index of its cheapest available offering allowed by
    /// `reqs` — exactly the offering [`cheapest`] returns — or `None` when it has none.
    pub(crate) fn offers(&self, reqs: &Requirements) -> Arc<[Option<u32>]> {
        let (zone, capacity) = (reqs.get(ZONE), reqs.get(CAPACITY_TYPE));
        if self.reservation_keys.iter().any(|l| reqs.has(l)) {
            // Pinned to reservations (a finished claim, or a pod selecting one): rare, and
            // not worth a cache keyed on more than zone and capacity type.
            let filter = OfferingFilter::new(reqs);
            return self
                .its
                .iter()
                .map(|it| cheapest_index(it, |o| filter.allows(o)))
                .collect();
        }
        let hash = {
            let mut h = DefaultHasher::new();
            zone.hash(&mut h);
            capacity.hash(&mut h);
            h.finish()
        };
        if let Some(bucket) = self.memo.offers.borrow().buckets.get(&hash)
            && let Some((_, _, v)) = bucket
                .iter()
                .find(|(z, c, _)| z.as_ref() == zone && c.as_ref() == capacity)
        {
            return Arc::clone(v);
        }
        let v: Arc<[Option<u32>]> = self
            .its
            .iter()
            .map(|it| cheapest_index(it, |o| offering_allowed(o, zone, capacity)))
            .collect();
        let mut cache = self.memo.offers.borrow_mut();
        if cache.len < OFFER_CACHE_LIMIT {
            cache.len += 1;
            cache.buckets.entry(hash).or_default().push((
                zone.cloned(),
                capacity.cloned(),
                Arc::clone(&v),
            ));
        }
        v
    }

    /// For each instance type, whether its requirements intersect `r` on `r`'s key (an
    /// instance type without that key always does): the per-key part of [`intersects_ok`],
    /// which is a conjunction over the keys both sides define.
    pub(crate) fn compatible_with(&self, r: &Requirement) -> Arc<[bool]> {
        if let Some(v) = self.memo.compat.borrow().get(r) {
            return Arc::clone(v);
        }
        let v: Arc<[bool]> = if self.reqs.get(r.key()) == Some(r) {
            // Every instance type here was kept for intersecting the template's requirements
            // key by key ([`intersects_ok`]), by the same test as below.
            self.its.iter().map(|_| true).collect()
        } else {
            let column = self.key_column(r.key());
            let answers: Vec<bool> = column
                .distinct
                .iter()
                .map(|y| key_compatible(r, y.as_ref()))
                .collect();
            column.of.iter().map(|&k| answers[k as usize]).collect()
        };
        let mut cache = self.memo.compat.borrow_mut();
        if cache.len() < COMPAT_CACHE_LIMIT {
            cache.insert(r.clone(), Arc::clone(&v));
        }
        v
    }

    /// The instance types' requirements on `key` (see [`KeyColumn`]), from the memo.
    fn key_column(&self, key: &str) -> Arc<KeyColumn> {
        if let Some(c) = self.memo.columns.borrow().get(key) {
            return Arc::clone(c);
        }
        let mut index: HashMap<Option<&Requirement>, u32> = HashMap::new();
        let mut distinct: Vec<Option<Requirement>> = Vec::new();
        let of = self
            .its
            .iter()
            .map(|it| {
                let y = it.requirements.get(key);
                *index.entry(y).or_insert_with(|| {
                    distinct.push(y.cloned());
                    (distinct.len() - 1) as u32
                })
            })
            .collect();
        let column = Arc::new(KeyColumn { distinct, of });
        let mut columns = self.memo.columns.borrow_mut();
        if columns.len() < KEY_COLUMN_LIMIT {
            columns.insert(key.to_string(), Arc::clone(&column));
        }
        column
    }
}

/// A claim opened by this solve.
#[derive(Debug, Clone)]
pub(crate) struct Claim {
    /// Index of its template.
    pub template: usize,
    /// Placeholder hostname, unique within the solve.
    pub hostname: String,
    /// Current requirements.
    pub reqs: Requirements,
    /// Indices (into the template's instance types) still possible.
    pub options: Vec<u32>,
    /// Sum of its pods' requests.
    pub requests: Resources,
    /// Its pods' host ports.
    pub ports: HostPortUsage,
    /// Its pods.
    pub pods: Vec<usize>,
    /// The bounds of the options' allocatables (the largest, and the smallest), kept in
    /// step with `options`.
    pub bounds: Bounds,
    /// The number of `hostname` when it is a canonical placeholder, parsed once because the
    /// claim scan asks for it per pod.
    pub host_number: Option<usize>,
    /// The zones `reqs` pins the claim to, as a bit set over the scheduler's zone numbering,
    /// kept in step with `reqs` by the scheduler; `None` when unknown or not an `In` set (the
    /// zone pre-check then never skips the claim).
    pub zone_mask: Option<u64>,
    /// [`crate::solver::topology::Topology::group_counts`] when `hostname` was last
    /// registered with the topology groups; (0, 0) before the first commit.
    pub registered: (usize, usize),
    /// The reservations it holds (see [`crate::solver::reservations`]).
    pub reserved: BTreeSet<String>,
}

/// What adding a pod to a claim would change.
#[derive(Debug)]
pub(crate) struct ClaimUpdate {
    /// The narrowed requirements, or `None` when the pod leaves them unchanged.
    pub reqs: Option<Requirements>,
    /// The remaining options.
    pub options: Vec<u32>,
    /// The reservations the claim holds once the pod is added.
    pub reserved: BTreeSet<String>,
}

impl Claim {
    /// An empty claim of template `t` limited to `options`.
    pub(crate) fn new(
        template: usize,
        t: &Template<'_>,
        hostname: String,
        options: Vec<u32>,
    ) -> Self {
        let mut reqs = t.reqs.clone();
        if let Some(r) = single(HOSTNAME, &hostname) {
            reqs.add(r);
        }
        let mut c = Claim {
            template,
            hostname,
            reqs,
            options,
            requests: Resources::default(),
            ports: HostPortUsage::default(),
            pods: Vec::new(),
            bounds: Bounds::default(),
            host_number: None,
            zone_mask: None,
            registered: (0, 0),
            reserved: BTreeSet::new(),
        };
        c.host_number = topology::placeholder_number(&c.hostname);
        c.refresh_bounds(t);
        c
    }

    /// A claim the optimiser planned whole: its pods (without host ports), their summed
    /// requests, its requirements (hostname included) and the options already checked.
    pub(crate) fn planned(
        template: usize,
        t: &Template<'_>,
        hostname: String,
        reqs: Requirements,
        options: Vec<u32>,
        pods: Vec<usize>,
        requests: Resources,
    ) -> Self {
        let mut c = Claim {
            template,
            hostname,
            reqs,
            options,
            requests,
            ports: HostPortUsage::default(),
            pods,
            bounds: Bounds::default(),
            host_number: None,
            zone_mask: None,
            registered: (0, 0),
            reserved: BTreeSet::new(),
        };
        c.host_number = topology::placeholder_number(&c.hostname);
        c.refresh_bounds(t);
        c
    }

    /// This claim with only `pods` (whose requests sum to `requests`) and `options`: same
    /// hostname, requirements and host ports, for the optimiser once it moved the claim's
    /// other pods (none of which bound a host port) elsewhere.
    pub(crate) fn shrunk(
        &self,
        t: &Template<'_>,
        pods: Vec<usize>,
        requests: Resources,
        options: Vec<u32>,
    ) -> Self {
        let mut c = self.clone();
        c.pods = pods;
        c.requests = requests;
        c.options = options;
        c.refresh_bounds(t);
        c
    }

    /// Keeps only the options `keep` accepts (in their order), refreshing what depends on
    /// them.
    pub(crate) fn retain_options(&mut self, t: &Template<'_>, keep: impl FnMut(&u32) -> bool) {
        self.options.retain(keep);
        self.refresh_bounds(t);
    }

    fn refresh_bounds(&mut self, t: &Template<'_>) {
        self.bounds = t.alloc_table.bounds(&self.options);
    }

    /// Whether `requests` more could possibly fit (a cheap filter before the full check).
    /// The claim scan reads its scalar case from the scheduler's compact headroom copy and
    /// asks the claim only when extended resources are involved.
    pub(crate) fn might_fit(&self, t: &Template<'_>, requests: &Resources) -> bool {
        let mut total = arith::sum(&self.requests, requests);
        arith::add_into(&mut total, &t.min_overhead);
        arith::fits(&total, &self.bounds.max)
    }

    /// Applies an update for a pod already checked.
    pub(crate) fn apply(
        &mut self,
        t: &Template<'_>,
        pod: usize,
        requests: &Resources,
        ports: &[HostPort],
        update: ClaimUpdate,
    ) {
        let narrowed = update.options.len() != self.options.len();
        if let Some(reqs) = update.reqs {
            self.reqs = reqs;
        }
        self.options = update.options;
        self.reserved = update.reserved;
        arith::add_into(&mut self.requests, requests);
        self.ports.add(ports);
        self.pods.push(pod);
        if narrowed {
            self.refresh_bounds(t);
        }
    }

    /// The instance types that still host all pods + daemons with `reqs` after adding a pod
    /// with `requests`/`ports`. `delta` holds the requirements `reqs` changed relative to the
    /// claim's own (their new values), or `None` when nothing changed: every current option
    /// already satisfies the claim's requirements and has a compatible offering, so only the
    /// changed keys need re-checking. Without `explain` a rejection carries an empty message,
    /// for callers that discard it.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn filter(
        &self,
        t: &Template<'_>,
        reqs: &Requirements,
        delta: Option<&Requirements>,
        requests: &Resources,
        ports: &[HostPort],
        policy: MinValuesPolicy,
        explain: bool,
    ) -> Result<(Vec<u32>, Option<Requirements>), String> {
        if let Some((new, existing)) = self.ports.conflict(ports) {
            if !explain {
                return Err(String::new());
            }
            return Err(format!(
                "host port {} conflicts with host port {} of another pod planned for the same node",
                hostports::describe(new),
                hostports::describe(existing)
            ));
        }
        let base = arith::sum(&self.requests, requests);
        let totals: Vec<Option<Resources>> = t
            .groups
            .iter()
            .map(|g| {
                let conflict = ports
                    .iter()
                    .any(|p| g.ports.iter().any(|d| hostports::conflicts(p, d)));
                (!conflict).then(|| arith::sum(&base, &g.overhead))
            })
            .collect();
        // Offerings depend on zone, capacity type and reservation ids only.
        let offers_changed = delta.is_some_and(|d| {
            d.has(ZONE) || d.has(CAPACITY_TYPE) || t.reservation_keys.iter().any(|l| d.has(l))
        });
        let masks: Vec<Arc<[bool]>> = delta
            .map(|d| d.iter().map(|r| t.compatible_with(r)).collect())
            .unwrap_or_default();
        let offers = offers_changed.then(|| t.offers(reqs));
        let check = |iu: usize| -> (bool, bool) {
            let compat = masks.iter().all(|m| m[iu]);
            let offer = offers.as_ref().is_none_or(|o| o[iu].is_some());
            (compat, offer)
        };
        // Most pods fit even the smallest option of the claim they join: then only the
        // requirement checks can drop options.
        let every_fits = totals
            .iter()
            .all(|total| total.as_ref().is_some_and(|x| self.bounds.all_fit(x)));
        if every_fits && !explain {
            let kept: Vec<u32> = if masks.is_empty() && offers.is_none() {
                self.options.clone()
            } else {
                let ok = |&i: &u32| check(i as usize) == (true, true);
                self.options.iter().copied().filter(ok).collect()
            };
            if kept.is_empty() {
                return Err(String::new());
            }
            let relaxed = check_min_values(&t.its, &kept, reqs, policy)?;
            return Ok((kept, relaxed));
        }
        // The usual case: one DaemonSet group and no requirement changed, so the fit alone
        // decides (the loop below would answer the same, checking far more per option).
        if !explain && masks.is_empty() && offers.is_none() && totals.len() == 1 {
            let Some(total) = &totals[0] else {
                return Err(String::new());
            };
            let kept: Vec<u32> = self
                .options
                .iter()
                .copied()
                .filter(|&i| t.alloc_table.fits(total, i as usize))
                .collect();
            if kept.is_empty() {
                return Err(String::new());
            }
            let relaxed = check_min_values(&t.its, &kept, reqs, policy)?;
            return Ok((kept, relaxed));
        }
        let mut kept = Vec::with_capacity(self.options.len());
        let (mut any_compat, mut any_fit, mut any_offer, mut any_group) =
            (false, false, false, false);
        for &i in &self.options {
            let iu = i as usize;
            let Some(total) = &totals[t.group_of[iu]] else {
                continue;
            };
            any_group = true;
            let fit = t.alloc_table.fits(total, iu);
            // An option that cannot fit is dropped whatever its requirements say; the
            // requirement checks only matter then for the rejection message.
            let (compat, offer) = if fit || explain {
                check(iu)
            } else {
                (true, true)
            };
            any_compat |= compat;
            any_fit |= fit;
            any_offer |= offer;
            if compat && fit && offer {
                kept.push(i);
            }
        }
        if kept.is_empty() {
            if !explain {
                return Err(String::new());
            }
            let compat_max = self
                .options
                .iter()
                .map(|&i| i as usize)
                .filter(|&iu| totals[t.group_of[iu]].is_some())
                .filter(|&iu| check(iu) == (true, true))
                .fold(Resources::default(), |acc, iu| {
                    arith::max(&acc, &t.allocs[iu])
                });
            let min_total = arith::sum(&base, &t.min_overhead);
            return Err(if !any_group {
                let p = ports.iter().find(|p| {
                    t.groups
                        .iter()
                        .any(|g| g.ports.iter().any(|d| hostports::conflicts(p, d)))
                });
                format!(
                    "host port {} conflicts with a DaemonSet on every instance type",
                    p.map(hostports::describe).unwrap_or_default()
                )
            } else if !any_compat {
                format!(
                    "no instance type satisfies the requirements ({})",
                    describe_reqs(reqs)
                )
            } else if !any_offer {
                format!(
                    "no instance type has an available offering for {}",
                    describe_offering_reqs(reqs)
                )
            } else if !any_fit {
                format!(
                    "no instance type has enough {}",
                    describe_needs(&min_total, &compat_max)
                )
            } else {
                format!(
                    "no instance type meets the requirements, has an available offering and has enough resources at once ({}; needs {})",
                    describe_offering_reqs(reqs),
                    describe_total(&min_total)
                )
            });
        }
        let relaxed = check_min_values(&t.its, &kept, reqs, policy)?;
        Ok((kept, relaxed))
    }
}

/// Whether a missing label satisfies a requirement with this operator.
fn tolerates_absence(op: Operator) -> bool {
    matches!(op, Operator::NotIn | Operator::DoesNotExist)
}

/// `a.intersects(b).is_ok()`, without building the failure message (the hot loops only need
/// the answer).
pub(crate) fn intersects_ok(a: &Requirements, b: &Requirements) -> bool {
    let (small, large) = if a.len() <= b.len() { (a, b) } else { (b, a) };
    small.iter().all(|x| key_compatible(x, large.get(x.key())))
}

/// Whether requirement `x` and the other side's requirement `y` on the same key (`None`
/// when it has none, which never conflicts) can both hold: the per-key test of
/// [`intersects_ok`] and [`Template::compatible_with`].
fn key_compatible(x: &Requirement, y: Option<&Requirement>) -> bool {
    y.is_none_or(|y| {
        x.has_intersection(y)
            || (tolerates_absence(x.operator()) && tolerates_absence(y.operator()))
    })
}

/// `base.compatible(other, allow_undefined_well_known).is_ok()`, without building the
/// failure message.
pub(crate) fn compatible_ok(
    base: &Requirements,
    other: &Requirements,
    allow_undefined_well_known: bool,
) -> bool {
    other.iter().all(|r| {
        (allow_undefined_well_known && crate::labels::is_well_known(r.key()))
            || base.has(r.key())
            || tolerates_absence(r.operator())
    }) && intersects_ok(base, other)
}

/// Adds `other` to `reqs` (intersecting per key), cloning `reqs` only when some key actually
/// changes; every changed key's new requirement is also added to `delta`.
pub(crate) fn merge(
    reqs: &mut std::borrow::Cow<'_, Requirements>,
    other: &Requirements,
    delta: &mut Requirements,
) {
    for r in other.iter() {
        let next = match reqs.get(r.key()) {
            Some(existing) => {
                let n = r.intersection(existing);
                if n == *existing {
                    continue;
                }
                n
            }
            None => r.clone(),
        };
        let owned = reqs.to_mut();
        owned.remove(r.key());
        owned.add(next.clone());
        delta.remove(r.key());
        delta.add(next);
    }
}

fn describe_reqs(reqs: &Requirements) -> String {
    reqs.iter()
        .filter(|r| {
            r.key() != HOSTNAME && r.key() != NODE_REGISTERED && r.key() != NODE_INITIALIZED
        })
        .map(|r| format!("{} {}", r.key(), describe_requirement(r)))
        .collect::<Vec<_>>()
        .join(", ")
}

fn describe_offering_reqs(reqs: &Requirements) -> String {
    let part = |k: &str| {
        reqs.get(k).map_or_else(
            || format!("{k} any"),
            |r| format!("{k} {}", describe_requirement(r)),
        )
    };
    format!("{}, {}", part(ZONE), part(CAPACITY_TYPE))
}

fn describe_total(total: &Resources) -> String {
    arith::entries(total)
        .into_iter()
        .map(|(n, v)| format!("{} {n}", arith::format_amount(n, v)))
        .collect::<Vec<_>>()
        .join(", ")
}

/// `cpu, memory (needs 64 cpu, 512Gi memory; largest compatible has 16 cpu, 64Gi memory)`.
fn describe_needs(total: &Resources, largest: &Resources) -> String {
    let over: Vec<(&str, i64)> = arith::entries(total)
        .into_iter()
        .filter(|(n, v)| *v > arith::get(largest, n))
        .collect();
    if over.is_empty() {
        return format!("resources (needs {})", describe_total(total));
    }
    let names: Vec<&str> = over.iter().map(|(n, _)| *n).collect();
    let needs: Vec<String> = over
        .iter()
        .map(|(n, v)| format!("{} {n}", arith::format_amount(n, *v)))
        .collect();
    let has: Vec<String> = over
        .iter()
        .map(|(n, _)| format!("{} {n}", arith::format_amount(n, arith::get(largest, n))))
        .collect();
    format!(
        "{} (needs {}; largest compatible has {})",
        names.join(", "),
        needs.join(", "),
        has.join(", ")
    )
}

/// minValues: every requirement with minValues must keep that many distinct values among
/// the instance types left. Strict: an error; BestEffort: the requirements with minValues
/// lowered to what is achievable (or `None` when nothing had to change).
pub(crate) fn check_min_values(
    its: &[&InstanceType],
    kept: &[u32],
    reqs: &Requirements,
    policy: MinValuesPolicy,
) -> Result<Option<Requirements>, String> {
    let mut lowered: Vec<(String, u32)> = Vec::new();
    for r in reqs.iter() {
        let Some(min) = r.min_values() else { continue };
        let mut values: Vec<&str> = kept
            .iter()
            .filter_map(|&i| its[i as usize].requirements.get(r.key()))
            .flat_map(|itr| itr.values())
            .filter(|v| r.has(v))
            .collect();
        values.sort_unstable();
        values.dedup();
        let n = values.len() as u32;
        if n < min {
            if policy == MinValuesPolicy::Strict {
                return Err(format!(
                    "minValues requirement is not met for {}: needs {min} distinct values, the instance types left offer {n}",
                    r.key()
                ));
            }
            lowered.push((r.key().to_string(), n));
        }
    }
    if lowered.is_empty() {
        return Ok(None);
    }
    let mut out = Requirements::new();
    for r in reqs.iter() {
        match lowered.iter().find(|(k, _)| k == r.key()) {
            Some((_, n)) => {
                let mut ns = r.to_node_selector();
                ns.min_values = Some(*n);
                out.add(Requirement::from_node_selector(&ns).map_err(|e| e.to_string())?);
            }
            None => out.add(r.clone()),
        }
    }
    Ok(Some(out))
}

/// The plan's options: each remaining instance type with its cheapest compatible available
/// offering, cheapest first (ties by name, then by catalogue order). `options` is ascending,
/// as every claim's is.
pub(crate) fn ranked_options(
    t: &Template<'_>,
    options: &[u32],
    reqs: &Requirements,
) -> Vec<InstanceTypeOption> {
    let offers = t.offers(reqs);
    let names = t.memo.names.get_or_init(|| option_names(&t.its));
    let order = price_order(t, &offers, names);
    let mut member = vec![false; t.its.len()];
    for &i in options {
        member[i as usize] = true;
    }
    let mut ranked = Vec::with_capacity(options.len());
    ranked.extend(
        order
            .iter()
            .filter(|&&i| member[i as usize])
            .filter_map(|&i| {
                let o = offers[i as usize]?;
                let n = &names[i as usize];
                let (zone, capacity_type) = &n.offerings[o as usize];
                Some(InstanceTypeOption {
                    name: Arc::clone(&n.name),
                    price: t.its[i as usize].offerings[o as usize].price,
                    zone: Arc::clone(zone),
                    capacity_type: Arc::clone(capacity_type),
                })
            }),
    );
    ranked
}

/// Every instance type with an offering in `offers`, by its price there, then name rank, then
/// index; remembered per table.
fn price_order(t: &Template<'_>, offers: &OfferTable, names: &[OptionNames]) -> Arc<[u32]> {
    if let Some((_, order)) = t
        .memo
        .orders
        .borrow()
        .iter()
        .find(|(table, _)| Arc::ptr_eq(table, offers))
    {
        return Arc::clone(order);
    }
    // Sort small keys: (price, name rank, index) tuples compare two numbers, not two names.
    let mut ranked: Vec<(f64, u32, u32)> = offers
        .iter()
        .enumerate()
        .filter_map(|(i, o)| {
            let price = t.its[i].offerings[(*o)? as usize].price;
            Some((price, names[i].name_rank, i as u32))
        })
        .collect();
    ranked.sort_unstable_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)).then(a.2.cmp(&b.2)));
    let order: Arc<[u32]> = ranked.into_iter().map(|(_, _, i)| i).collect();
    let mut orders = t.memo.orders.borrow_mut();
    if orders.len() < ORDER_CACHE_LIMIT {
        orders.push((Arc::clone(offers), Arc::clone(&order)));
    }
    order
}

/// Each instance type's [`OptionNames`], with one shared copy of each distinct zone and
/// capacity type.
fn option_names<'a>(its: &[&'a InstanceType]) -> Vec<OptionNames> {
    // A region has a handful of zones and capacity types: a scan of those seen beats
    // hashing each offering's two strings.
    let mut interned: Vec<(&'a str, Arc<str>)> = Vec::new();
    let mut intern = |s: &'a str| -> Arc<str> {
        if let Some((_, a)) = interned.iter().find(|(k, _)| *k == s) {
            return Arc::clone(a);
        }
        let a: Arc<str> = Arc::from(s);
        interned.push((s, Arc::clone(&a)));
        a
    };
    let mut by_name: Vec<usize> = (0..its.len()).collect();
    by_name.sort_by(|&a, &b| its[a].name.cmp(&its[b].name));
    let mut rank = vec![0u32; its.len()];
    for w in by_name.windows(2) {
        rank[w[1]] = rank[w[0]] + u32::from(its[w[0]].name != its[w[1]].name);
    }
    its.iter()
        .zip(rank)
        .map(|(it, name_rank)| OptionNames {
            name: Arc::from(it.name.as_str()),
            name_rank,
            offerings: it
                .offerings
                .iter()
                .map(|o| (intern(&o.zone), intern(&o.capacity_type)))
                .collect(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Overhead;
    use std::sync::Arc;

    fn offering(zone: &str, capacity_type: &str, price: f64, available: bool) -> Offering {
        Offering {
            zone: zone.to_string(),
            capacity_type: capacity_type.to_string(),
            price,
            available,
            reservation: None,
        }
    }

    fn instance_type(name: &str, offerings: Vec<Offering>) -> Arc<InstanceType> {
        Arc::new(InstanceType {
            devices: Vec::new(),
            name: name.to_string(),
            requirements: Requirements::new(),
            capacity: Resources {
                cpu_millis: 4000,
                memory: 8 << 30,
                pods: 110,
                ..Resources::default()
            },
            overhead: Overhead::default(),
            offerings,
        })
    }

    /// Runs `f` on the template of `pool` with no DaemonSets.
    fn with_template<R>(pool: &NodePool, f: impl FnOnce(&Template<'_>) -> R) -> R {
        let memo = TemplateMemo::default();
        let base = template_requirements(pool);
        let its = compatible_types(pool, &base);
        let t =
            Template::new(pool, base, &its, &memo, &[], MinValuesPolicy::Strict).expect("template");
        f(&t)
    }

    fn reqs(parts: &[(&str, Operator, &[&str])]) -> Requirements {
        parts
            .iter()
            .map(|(k, op, vs)| Requirement::new(*k, *op, vs.iter().copied()).expect("requirement"))
            .collect()
    }

    #[test]
    fn offer_tables_pick_exactly_the_offering_cheapest_picks() {
        let pool = NodePool {
            name: "default".to_string(),
            instance_types: vec![
                // Three offerings at one price: zone breaks the tie, then capacity type.
                instance_type(
                    "tied",
                    vec![
                        offering("b", "spot", 1.0, true),
                        offering("a", "spot", 1.0, true),
                        offering("a", "on-demand", 1.0, true),
                    ],
                ),
                // The cheapest is unavailable.
                instance_type(
                    "unavailable",
                    vec![
                        offering("a", "spot", 0.1, false),
                        offering("b", "on-demand", 0.5, true),
                        offering("c", "spot", 0.4, true),
                    ],
                ),
                instance_type("zone-c", vec![offering("c", "on-demand", 2.0, true)]),
            ],
            ..NodePool::default()
        };
        with_template(&pool, |t| {
            assert_eq!(t.its.len(), 3);
            let cases = [
                reqs(&[]),
                reqs(&[(ZONE, Operator::In, &["a"])]),
                reqs(&[(ZONE, Operator::NotIn, &["c"])]),
                reqs(&[(CAPACITY_TYPE, Operator::In, &["on-demand"])]),
                reqs(&[
                    (ZONE, Operator::In, &["a", "b"]),
                    (CAPACITY_TYPE, Operator::In, &["spot"]),
                ]),
                reqs(&[(ZONE, Operator::In, &["d"])]),
            ];
            for r in &cases {
                let table = t.offers(r);
                for (i, it) in t.its.iter().enumerate() {
                    let want = cheapest(it, r).map(|o| o as *const Offering);
                    let got = table[i].map(|o| &it.offerings[o as usize] as *const Offering);
                    assert_eq!(got, want, "{} with {r}", it.name);
                }
                assert!(
                    Arc::ptr_eq(&table, &t.offers(r)),
                    "a repeated requirement pair reads the stored table ({r})"
                );
            }
            // The tie goes to zone a, then on-demand; zone d leaves nothing.
            assert_eq!(t.offers(&cases[0])[0], Some(2));
            assert_eq!(t.offers(&cases[0])[1], Some(2));
            assert!(t.offers(&cases[5]).iter().all(Option::is_none));
        });
    }

    #[test]
    fn compatibility_masks_match_each_types_own_check() {
        // Types with and without each key, with shared and distinct requirements on it, so
        // the per-key columns hold repeated, distinct and absent entries.
        let labelled = |name: &str, parts: &[(&str, Operator, &[&str])]| {
            let mut it = (*instance_type(name, vec![offering("a", "spot", 1.0, true)])).clone();
            it.requirements = reqs(parts);
            Arc::new(it)
        };
        let zones = |z: &'static [&'static str]| (ZONE, Operator::In, z);
        let pool = NodePool {
            name: "default".to_string(),
            requirements: reqs(&[("arch", Operator::In, &["amd64", "arm64"])]),
            instance_types: vec![
                labelled(
                    "a",
                    &[zones(&["a", "b"]), ("arch", Operator::In, &["amd64"])],
                ),
                labelled(
                    "b",
                    &[zones(&["a", "b"]), ("arch", Operator::In, &["arm64"])],
                ),
                labelled("c", &[zones(&["c"]), ("gen", Operator::In, &["5"])]),
                labelled(
                    "d",
                    &[
                        ("gen", Operator::In, &["7"]),
                        ("gpu", Operator::DoesNotExist, &[]),
                    ],
                ),
                labelled("e", &[zones(&["a", "b"]), ("gpu", Operator::Exists, &[])]),
            ],
            ..NodePool::default()
        };
        with_template(&pool, |t| {
            assert_eq!(t.its.len(), 5);
            let mut cases: Vec<Requirement> = [
                (ZONE, Operator::In, &["a"][..]),
                (ZONE, Operator::In, &["c", "d"]),
                (ZONE, Operator::NotIn, &["a", "b"]),
                (ZONE, Operator::Exists, &[]),
                (ZONE, Operator::DoesNotExist, &[]),
                ("arch", Operator::In, &["arm64"]),
                ("gen", Operator::Gt, &["6"]),
                ("gen", Operator::Lt, &["6"]),
                ("gpu", Operator::NotIn, &["x"]),
                ("gpu", Operator::DoesNotExist, &[]),
                ("missing", Operator::In, &["x"]),
            ]
            .iter()
            .map(|(k, op, vs)| Requirement::new(*k, *op, vs.iter().copied()).expect("requirement"))
            .collect();
            cases.extend(t.reqs.iter().cloned());
            for r in &cases {
                let mask = t.compatible_with(r);
                for (i, it) in t.its.iter().enumerate() {
                    let want = it.requirements.get(r.key()).is_none_or(|y| {
                        r.has_intersection(y)
                            || (tolerates_absence(r.operator()) && tolerates_absence(y.operator()))
                    });
                    assert_eq!(mask[i], want, "{} against {r}", it.name);
                }
                assert!(
                    Arc::ptr_eq(&mask, &t.compatible_with(r)),
                    "{r} is remembered"
                );
            }
        });
    }

    #[test]
    fn options_rank_by_price_then_name_whatever_their_catalogue_order() {
        let pool = NodePool {
            name: "default".to_string(),
            instance_types: vec![
                instance_type("m5.large", vec![offering("a", "spot", 1.0, true)]),
                instance_type("c5.large", vec![offering("a", "spot", 1.0, true)]),
                instance_type("t3.nano", vec![offering("a", "spot", 0.5, true)]),
                instance_type("a1.large", vec![offering("b", "spot", 2.0, true)]),
                instance_type("z1d.large", vec![offering("a", "spot", 1.0, true)]),
                instance_type("none", vec![offering("a", "spot", 0.1, false)]),
            ],
            ..NodePool::default()
        };
        with_template(&pool, |t| {
            let all: Vec<u32> = (0..t.its.len() as u32).rev().collect();
            let ranked = |r: &Requirements| -> Vec<String> {
                ranked_options(t, &all, r)
                    .iter()
                    .map(|o| format!("{} {} {}", o.name, o.zone, o.price))
                    .collect()
            };
            // Cheapest first; the three at 1.0 by name, not by catalogue or option order; a type
            // with no available offering is not an option.
            assert_eq!(
                ranked(&reqs(&[])),
                [
                    "t3.nano a 0.5",
                    "c5.large a 1",
                    "m5.large a 1",
                    "z1d.large a 1",
                    "a1.large b 2"
                ]
            );
            assert_eq!(
                ranked(&reqs(&[(ZONE, Operator::In, &["b"])])),
                ["a1.large b 2"]
            );
        });
    }
}
