//! [`FakeCloudProvider`]: an in-memory [`CloudProvider`] that launches "instances" from a
//! catalogue the way EC2 CreateFleet does for Karpenter, with knobs for tests and the
//! simulator (insufficient capacity, drift, NodeClass readiness, launch latency) and a log of
//! every call.

use k8s_openapi::apimachinery::pkg::api::resource::Quantity as K8sQuantity;
use karpenter_catalog::{Catalogue, CatalogueError, CatalogueOptions, default_instance_types};
use karpenter_cloudprovider::v1::{ConditionStatus, NodeClaim, NodeClaimStatus, NodePool};
use karpenter_cloudprovider::{
    CloudProvider, CloudProviderError, DriftReason, OfferingRef, RepairPolicy,
};
use karpenter_scheduling::model::{InstanceType, Offering};
use karpenter_scheduling::requirements::{NodeSelectorRequirement, Requirements};
use karpenter_scheduling::{Quantity, Resources, labels};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use crate::launch_faults::{LaunchFaultError, LaunchFaults};
use crate::reservations::{FakeReservation, ReservationError, with_reserved};
use karpenter_cloudprovider::reserved::allows_reservation;

/// The name the provider reports (metrics label).
pub const PROVIDER_NAME: &str = "fake";

/// Image ID written into launched claims.
pub const FAKE_IMAGE_ID: &str = "fake-image";

/// One recorded provider call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProviderCall {
    /// `create`, `delete`, `get`, `list`, `instance_types` or `is_drifted`.
    pub method: &'static str,
    /// What it was called with: the NodeClaim or NodePool name, or the provider ID (`get`,
    /// `delete`); empty for `list`.
    pub argument: String,
}

#[derive(Debug, Clone)]
struct Instance {
    claim: NodeClaim,
    price: f64,
    /// The capacity reservation it was launched into.
    reservation: Option<String>,
}

#[derive(Debug, Default)]
struct State {
    next_id: u64,
    /// Keyed by provider ID; IDs sort in launch order because the counter is zero-padded.
    instances: BTreeMap<String, Instance>,
    /// Offerings learnt to have no capacity; reported with `available: false`.
    unavailable: BTreeSet<OfferingRef>,
    /// Offerings that fail with insufficient capacity whenever a launch tries them.
    insufficient: BTreeSet<OfferingRef>,
    /// Drift by NodeClaim name or provider ID.
    drift: BTreeMap<String, DriftReason>,
    node_class_not_ready: Option<String>,
    /// The next launches that fail with a `Create` error: how many, and its reason.
    failing_launches: (u32, String),
    calls: Vec<ProviderCall>,
    /// Capacity reservations by id.
    reservations: BTreeMap<String, FakeReservation>,
    /// Instances of each reservation held outside this provider's memory.
    held_elsewhere: BTreeMap<String, u32>,
}

impl State {
    /// Instances `r` can still take: its count less the running instances launched into it.
    fn remaining(&self, r: &FakeReservation) -> u32 {
        let used = self
            .instances
            .values()
            .filter(|i| i.reservation.as_deref() == Some(r.id.as_str()))
            .count();
        let elsewhere = self.held_elsewhere.get(&r.id).copied().unwrap_or(0);
        r.count
            .saturating_sub(u32::try_from(used).unwrap_or(u32::MAX))
            .saturating_sub(elsewhere)
    }
}

/// An in-memory cloud provider over a fixed list of instance types.
///
/// Deterministic: no clock, no randomness. Instance IDs come from a counter
/// (`fake://<zone>/i-<17 hex digits>`), and `create` launches the cheapest available offering
/// that satisfies the claim, preferring reserved, then spot, then on-demand capacity as
/// Karpenter's AWS provider does. State sits behind a [`std::sync::Mutex`], so the provider
/// can be shared (`Arc<FakeCloudProvider>`) and configured while in use.
#[derive(Debug)]
pub struct FakeCloudProvider {
    instance_types: Vec<Arc<InstanceType>>,
    filter_by_node_pool: bool,
    launch_latency: Duration,
    /// Launch delays by offering (`--fake-launch-delay`); its insufficient offerings are in
    /// the state's `insufficient`.
    launch_faults: LaunchFaults,
    /// The `ReservedCapacity` feature gate: off, reservations are neither offered nor used.
    reserved_capacity: bool,
    state: Mutex<State>,
}

impl Default for FakeCloudProvider {
    /// The embedded EC2 catalogue with default options.
    fn default() -> Self {
        Self::new(default_instance_types().to_vec())
    }
}

impl FakeCloudProvider {
    /// A provider over `instance_types` (the catalogue `instance_types` returns and `create`
    /// chooses from); GPU types publish their DRA devices ([`crate::devices`]).
    pub fn new(instance_types: Vec<Arc<InstanceType>>) -> Self {
        Self {
            instance_types: crate::devices::with_gpu_devices(instance_types),
            filter_by_node_pool: false,
            launch_latency: Duration::ZERO,
            launch_faults: LaunchFaults::default(),
            reserved_capacity: true,
            state: Mutex::new(State::default()),
        }
    }

    /// A provider over a catalogue built with `options`.
    pub fn from_catalogue(
        catalogue: &Catalogue,
        options: &CatalogueOptions,
    ) -> Result<Self, CatalogueError> {
        Ok(Self::new(catalogue.instance_types(options)?))
    }

    /// Makes `instance_types(pool)` return only the types whose requirements intersect the
    /// pool's template requirements (by default every type is returned, as upstream's
    /// providers do, and the scheduler filters).
    pub fn with_node_pool_filtering(mut self, enabled: bool) -> Self {
        self.filter_by_node_pool = enabled;
        self
    }

    /// Sets the launch latency. The provider has no clock and never sleeps: callers (the
    /// simulator) read [`launch_latency`](Self::launch_latency) and advance their own clock.
    pub fn with_launch_latency(mut self, latency: Duration) -> Self {
        self.launch_latency = latency;
        self
    }

    /// Injects `faults`: every launch on an offering they name as insufficient fails with
    /// insufficient capacity (and the offering is then reported unavailable), and
    /// [`launch_delay_of`](Self::launch_delay_of) tells how long each launch takes.
    ///
    /// # Errors
    /// A pattern that names no offering of this provider's catalogue.
    pub fn with_launch_faults(mut self, faults: LaunchFaults) -> Result<Self, LaunchFaultError> {
        faults.validate(&self.instance_types)?;
        self.insufficient_capacity(faults.insufficient_offerings(&self.instance_types));
        self.launch_faults = faults;
        Ok(self)
    }

    /// How long the launch of `launched` (a claim as [`create`](CloudProvider::create)
    /// returned it) takes under the launch faults: zero unless `--fake-launch-delay` names
    /// its offering. The provider never sleeps; a caller with a clock waits this long.
    pub fn launch_delay_of(&self, launched: &NodeClaim) -> Duration {
        let label = |k: &str| launched.label(k).unwrap_or_default().to_owned();
        self.launch_faults.delay_of(&OfferingRef {
            instance_type: label(labels::INSTANCE_TYPE),
            zone: label(labels::ZONE),
            capacity_type: label(labels::CAPACITY_TYPE),
        })
    }

    /// Sets Karpenter's `ReservedCapacity` feature gate (on by default): off, the provider
    /// offers no reserved capacity and launches nothing into a reservation, as the AWS
    /// provider does.
    pub fn with_reserved_capacity(mut self, enabled: bool) -> Self {
        self.reserved_capacity = enabled;
        self
    }

    /// Adds a capacity reservation: `instance_types` then reports a `reserved` offering for
    /// it with the instances it has left, and `create` launches into it first. Launching
    /// takes a slot, deleting the instance gives it back; a launch that finds it full fails
    /// with insufficient capacity.
    pub fn add_reservation(&self, reservation: FakeReservation) -> Result<(), ReservationError> {
        reservation.validate(&self.instance_types)?;
        let mut state = self.state();
        if state.reservations.contains_key(&reservation.id) {
            return Err(ReservationError::Duplicate(reservation.id));
        }
        state
            .reservations
            .insert(reservation.id.clone(), reservation);
        Ok(())
    }

    /// Sets how many instances of each reservation (by id) are held by instances this
    /// provider does not keep in memory: the in-cluster provider's instances are Nodes, so
    /// it counts them there ([`crate::node_instances::reservations_in_use`]) before each
    /// call. `instance_types` then reports, and `create` launches into, only what is left.
    pub fn set_reservations_held_elsewhere(&self, held: BTreeMap<String, u32>) {
        self.state().held_elsewhere = held;
    }

    /// Whether any capacity reservation was added.
    pub fn has_reservations(&self) -> bool {
        !self.state().reservations.is_empty()
    }

    /// Each reservation with the instances it has left, by id.
    pub fn reservations(&self) -> Vec<(FakeReservation, u32)> {
        let state = self.state();
        state
            .reservations
            .values()
            .map(|r| (r.clone(), state.remaining(r)))
            .collect()
    }

    /// The reservation an instance was launched into, if any.
    pub fn reservation_of(&self, provider_id: &str) -> Option<String> {
        self.state()
            .instances
            .get(provider_id)
            .and_then(|i| i.reservation.clone())
    }

    /// The configured launch latency (zero by default).
    pub fn launch_latency(&self) -> Duration {
        self.launch_latency
    }

    fn state(&self) -> MutexGuard<'_, State> {
        // A panic elsewhere while holding the lock leaves the maps consistent (every update
        // is a single insert or remove), so a poisoned lock is still safe to use.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn record(state: &mut State, method: &'static str, argument: &str) {
        state.calls.push(ProviderCall {
            method,
            argument: argument.to_string(),
        });
    }

    /// Makes every launch attempt on these offerings fail with insufficient capacity (and
    /// marks them unavailable when tried), until [`clear_insufficient_capacity`](Self::clear_insufficient_capacity).
    pub fn insufficient_capacity(&self, offerings: impl IntoIterator<Item = OfferingRef>) {
        self.state().insufficient.extend(offerings);
    }

    /// Restores capacity for every offering (already learnt unavailability stays until
    /// [`reset_unavailable_offerings`](Self::reset_unavailable_offerings)).
    pub fn clear_insufficient_capacity(&self) {
        self.state().insufficient.clear();
    }

    /// The offerings currently reported unavailable, sorted.
    pub fn unavailable_offerings(&self) -> Vec<OfferingRef> {
        self.state().unavailable.iter().cloned().collect()
    }

    /// Forgets learnt unavailability, as Karpenter's unavailable-offerings cache expires.
    pub fn reset_unavailable_offerings(&self) {
        self.state().unavailable.clear();
    }

    /// Makes `is_drifted` report `reason` for the claim with this name or provider ID.
    pub fn set_drifted(&self, name_or_provider_id: impl Into<String>, reason: DriftReason) {
        self.state()
            .drift
            .insert(name_or_provider_id.into(), reason);
    }

    /// Clears drift for a claim name or provider ID.
    pub fn clear_drift(&self, name_or_provider_id: &str) {
        self.state().drift.remove(name_or_provider_id);
    }

    /// With `Some(reason)`, every `create` fails with `NodeClassNotReady`; `None` restores.
    pub fn set_node_class_not_ready(&self, reason: Option<String>) {
        self.state().node_class_not_ready = reason;
    }

    /// The next `count` launches fail with a [`CloudProviderError::Create`] of `reason`
    /// (neither capacity nor NodeClass: a launch the controller retries), as an EC2 API
    /// error such as `RequestLimitExceeded` would. Replaces any count still pending.
    pub fn fail_launches(&self, count: u32, reason: impl Into<String>) {
        self.state().failing_launches = (count, reason.into());
    }

    /// Every call so far, in order.
    pub fn calls(&self) -> Vec<ProviderCall> {
        self.state().calls.clone()
    }

    /// Forgets the recorded calls.
    pub fn clear_calls(&self) {
        self.state().calls.clear();
    }

    /// Number of running instances.
    pub fn instance_count(&self) -> usize {
        self.state().instances.len()
    }

    /// The hourly price of the offering an instance was launched on.
    pub fn price_of(&self, provider_id: &str) -> Option<f64> {
        self.state().instances.get(provider_id).map(|i| i.price)
    }

    /// The catalogue as `instance_types` would report it, with learnt unavailability applied
    /// and a reserved offering for each reservation (when the gate is on).
    fn current_instance_types(&self, state: &State) -> Vec<Arc<InstanceType>> {
        let types = self.with_unavailability(&state.unavailable);
        if !self.reserved_capacity || state.reservations.is_empty() {
            return types;
        }
        types
            .into_iter()
            .map(|it| {
                let offerings: Vec<Offering> = state
                    .reservations
                    .values()
                    .filter(|r| r.instance_type == it.name)
                    .map(|r| {
                        let o = r.offering(&it, state.remaining(r), true);
                        let unavailable = state.unavailable.contains(&offering_ref(&it, &o));
                        Offering {
                            available: o.available && !unavailable,
                            ..o
                        }
                    })
                    .collect();
                if offerings.is_empty() {
                    it
                } else {
                    Arc::new(with_reserved(&it, offerings))
                }
            })
            .collect()
    }

    /// The catalogue with learnt unavailability applied.
    fn with_unavailability(&self, unavailable: &BTreeSet<OfferingRef>) -> Vec<Arc<InstanceType>> {
        if unavailable.is_empty() {
            return self.instance_types.clone();
        }
        self.instance_types
            .iter()
            .map(|it| {
                let affected = it
                    .offerings
                    .iter()
                    .any(|o| o.available && unavailable.contains(&offering_ref(it, o)));
                if !affected {
                    return it.clone();
                }
                let mut copy = InstanceType::clone(it);
                for o in &mut copy.offerings {
                    if unavailable.contains(&offering_ref(it, o)) {
                        o.available = false;
                    }
                }
                Arc::new(copy)
            })
            .collect()
    }
}

fn offering_ref(it: &InstanceType, o: &Offering) -> OfferingRef {
    OfferingRef {
        instance_type: it.name.clone(),
        zone: o.zone.clone(),
        capacity_type: o.capacity_type.clone(),
    }
}

/// Lower is preferred: Karpenter launches reserved capacity first, then spot, then on-demand.
fn capacity_type_rank(capacity_type: &str) -> u8 {
    match capacity_type {
        labels::CAPACITY_TYPE_RESERVED => 0,
        labels::CAPACITY_TYPE_SPOT => 1,
        labels::CAPACITY_TYPE_ON_DEMAND => 2,
        _ => 3,
    }
}

fn claim_requirements(claim: &NodeClaim) -> Result<Requirements, CloudProviderError> {
    let reqs: Vec<NodeSelectorRequirement> = claim
        .spec
        .requirements
        .iter()
        .map(|r| r.to_model())
        .collect();
    Requirements::from_node_selector(&reqs).map_err(|e| CloudProviderError::Create {
        reason: "InvalidRequirements".into(),
        message: format!("NodeClaim {:?}: spec.requirements: {e}", claim.name()),
    })
}

fn claim_requests(claim: &NodeClaim) -> Result<Resources, CloudProviderError> {
    let invalid = |message: String| CloudProviderError::Create {
        reason: "InvalidResourceRequests".into(),
        message,
    };
    let mut parsed = Vec::with_capacity(claim.spec.resources.requests.len());
    for (name, q) in &claim.spec.resources.requests {
        let q = Quantity::parse(&q.0).map_err(|e| {
            invalid(format!(
                "NodeClaim {:?}: spec.resources.requests[{name}]: {e}",
                claim.name()
            ))
        })?;
        parsed.push((name.as_str(), q));
    }
    Resources::from_quantities(parsed.iter().map(|(n, q)| (*n, q))).map_err(|e| {
        invalid(format!(
            "NodeClaim {:?}: spec.resources.requests: {e}",
            claim.name()
        ))
    })
}

fn allows(reqs: &Requirements, key: &str, value: &str) -> bool {
    reqs.get(key).is_none_or(|r| r.has(value))
}

/// The reserved offerings `reqs` and `requests` allow whose reservation has no instance
/// left, with the reservation ids.
fn full_reservations(
    types: &[Arc<InstanceType>],
    reqs: &Requirements,
    requests: &Resources,
) -> Vec<(OfferingRef, String)> {
    let mut out = Vec::new();
    for it in types {
        if it.requirements.intersects(reqs).is_err()
            || !requests.fits(&with_unknown_extended(&it.allocatable(), requests))
        {
            continue;
        }
        for o in &it.offerings {
            let Some(r) = &o.reservation else { continue };
            if r.capacity == 0
                && allows(reqs, labels::ZONE, &o.zone)
                && allows(reqs, labels::CAPACITY_TYPE, &o.capacity_type)
                && allows_reservation(reqs, o)
            {
                out.push((offering_ref(it, o), r.id.clone()));
            }
        }
    }
    out
}

fn to_k8s(resources: &Resources) -> BTreeMap<String, K8sQuantity> {
    resources
        .to_quantities()
        .into_iter()
        .map(|(k, q)| (k, K8sQuantity(q.to_string())))
        .collect()
}

/// `resources` plus every extended resource of `requests` it does not define, at the
/// requested amount. As Karpenter's kwok provider does, the fake takes a resource the
/// catalogue does not know about (one a NodeOverlay's `capacity` promised, which a device
/// plugin would advertise) to be present on the node as requested; resources the type does
/// define must still fit.
fn with_unknown_extended(resources: &Resources, requests: &Resources) -> Resources {
    let mut out = resources.clone();
    for (name, amount) in &requests.extended {
        if resources.get(name) == 0 {
            out.set(name, *amount);
        }
    }
    out
}

fn launched_claim(
    claim: &NodeClaim,
    it: &InstanceType,
    offering: &Offering,
    requests: &Resources,
    provider_id: String,
) -> NodeClaim {
    let mut out = claim.clone();
    let node_labels = out.metadata.labels.get_or_insert_with(BTreeMap::new);
    node_labels.extend(it.requirements.single_valued_labels());
    node_labels.insert(labels::ZONE.to_string(), offering.zone.clone());
    node_labels.insert(
        labels::CAPACITY_TYPE.to_string(),
        offering.capacity_type.clone(),
    );
    if let Some(r) = &offering.reservation {
        node_labels.insert(r.id_label.clone(), r.id.clone());
        node_labels.extend(r.labels.iter().map(|(k, v)| (k.clone(), v.clone())));
    }
    let status = out.status.get_or_insert_with(NodeClaimStatus::default);
    status.provider_id = provider_id;
    status.image_id = FAKE_IMAGE_ID.to_string();
    status.capacity = to_k8s(&with_unknown_extended(&it.capacity, requests));
    status.allocatable = to_k8s(&with_unknown_extended(&it.allocatable(), requests));
    out
}

#[async_trait::async_trait]
impl CloudProvider for FakeCloudProvider {
    async fn create(&self, node_claim: &NodeClaim) -> Result<NodeClaim, CloudProviderError> {
        let mut state = self.state();
        Self::record(&mut state, "create", node_claim.name());
        if let Some(reason) = &state.node_class_not_ready {
            return Err(CloudProviderError::NodeClassNotReady {
                name: node_claim.spec.node_class_ref.name.clone(),
                reason: reason.clone(),
            });
        }
        if state.failing_launches.0 > 0 {
            state.failing_launches.0 -= 1;
            return Err(CloudProviderError::Create {
                reason: state.failing_launches.1.clone(),
                message: format!(
                    "launching NodeClaim {:?} failed (injected fault)",
                    node_claim.name()
                ),
            });
        }
        let reqs = claim_requirements(node_claim)?;
        let requests = claim_requests(node_claim)?;

        // The offerings as `instance_types` reports them now: reservations with their
        // instances left, learnt unavailability applied.
        let types = self.current_instance_types(&state);
        let mut candidates: Vec<(&Arc<InstanceType>, &Offering)> = Vec::new();
        for it in &types {
            if it.requirements.intersects(&reqs).is_err()
                || !requests.fits(&with_unknown_extended(&it.allocatable(), &requests))
            {
                continue;
            }
            for o in &it.offerings {
                if o.available
                    && allows(&reqs, labels::ZONE, &o.zone)
                    && allows(&reqs, labels::CAPACITY_TYPE, &o.capacity_type)
                    && allows_reservation(&reqs, o)
                    && !state.unavailable.contains(&offering_ref(it, o))
                {
                    candidates.push((it, o));
                }
            }
        }
        let Some(best_rank) = candidates
            .iter()
            .map(|(_, o)| capacity_type_rank(&o.capacity_type))
            .min()
        else {
            // A claim held reservations that have filled up since the scheduler counted them
            // (EC2's ReservationCapacityExceeded): they already report no capacity, so the
            // next plan falls back to the pool's other capacity types.
            let full = full_reservations(&types, &reqs, &requests);
            if !full.is_empty() {
                let ids: Vec<String> = full.iter().map(|(_, id)| id.clone()).collect();
                return Err(CloudProviderError::InsufficientCapacity {
                    message: format!(
                        "capacity reservation {} has no instance left for NodeClaim {:?}",
                        ids.join(", "),
                        node_claim.name()
                    ),
                    offerings: full.into_iter().map(|(o, _)| o).collect(),
                });
            }
            return Err(CloudProviderError::InsufficientCapacity {
                offerings: Vec::new(),
                message: format!(
                    "no available offering satisfies the requirements and requests of NodeClaim {:?}",
                    node_claim.name()
                ),
            });
        };
        // Like a CreateFleet request: only the preferred capacity type, cheapest first.
        candidates.retain(|(_, o)| capacity_type_rank(&o.capacity_type) == best_rank);
        candidates.sort_by(|(a, x), (b, y)| {
            x.price
                .total_cmp(&y.price)
                .then_with(|| a.name.cmp(&b.name))
                .then_with(|| x.zone.cmp(&y.zone))
        });

        let mut failed = Vec::new();
        for (it, offering) in candidates {
            let key = offering_ref(it, offering);
            if state.insufficient.contains(&key) {
                state.unavailable.insert(key.clone());
                failed.push(key);
                continue;
            }
            let reservation = offering.reservation.as_ref().map(|r| r.id.clone());
            state.next_id += 1;
            let provider_id = format!("fake://{}/i-{:017x}", offering.zone, state.next_id);
            let claim = launched_claim(node_claim, it, offering, &requests, provider_id.clone());
            state.instances.insert(
                provider_id,
                Instance {
                    claim: claim.clone(),
                    price: offering.price,
                    reservation,
                },
            );
            return Ok(claim);
        }
        let message = format!(
            "all {} offerings tried for NodeClaim {:?} had insufficient capacity",
            failed.len(),
            node_claim.name()
        );
        Err(CloudProviderError::InsufficientCapacity {
            offerings: failed,
            message,
        })
    }

    async fn delete(&self, node_claim: &NodeClaim) -> Result<(), CloudProviderError> {
        let mut state = self.state();
        let provider_id = node_claim.provider_id();
        Self::record(&mut state, "delete", provider_id);
        match state.instances.remove(provider_id) {
            Some(_) => Ok(()),
            None => Err(CloudProviderError::NotFound {
                provider_id: if provider_id.is_empty() {
                    node_claim.name().to_string()
                } else {
                    provider_id.to_string()
                },
            }),
        }
    }

    async fn get(&self, provider_id: &str) -> Result<NodeClaim, CloudProviderError> {
        let mut state = self.state();
        Self::record(&mut state, "get", provider_id);
        state
            .instances
            .get(provider_id)
            .map(|i| i.claim.clone())
            .ok_or_else(|| CloudProviderError::NotFound {
                provider_id: provider_id.to_string(),
            })
    }

    async fn list(&self) -> Result<Vec<NodeClaim>, CloudProviderError> {
        let mut state = self.state();
        Self::record(&mut state, "list", "");
        Ok(state.instances.values().map(|i| i.claim.clone()).collect())
    }

    async fn instance_types(
        &self,
        node_pool: &NodePool,
    ) -> Result<Vec<Arc<InstanceType>>, CloudProviderError> {
        let mut state = self.state();
        Self::record(&mut state, "instance_types", node_pool.name());
        let types = self.current_instance_types(&state);
        drop(state);
        if !self.filter_by_node_pool {
            return Ok(types);
        }
        let pool_reqs = node_pool.template_requirements().map_err(|e| {
            CloudProviderError::Other(format!(
                "NodePool {:?}: spec.template.spec.requirements: {e}",
                node_pool.name()
            ))
        })?;
        Ok(types
            .into_iter()
            .filter(|it| it.requirements.intersects(&pool_reqs).is_ok())
            .collect())
    }

    async fn is_drifted(
        &self,
        node_claim: &NodeClaim,
    ) -> Result<Option<DriftReason>, CloudProviderError> {
        let mut state = self.state();
        Self::record(&mut state, "is_drifted", node_claim.name());
        let by_name = state.drift.get(node_claim.name());
        let by_id = || state.drift.get(node_claim.provider_id());
        Ok(by_name.or_else(by_id).cloned())
    }

    /// Karpenter v1.15's AWS provider for the kubelet's conditions: a node `Ready=False`
    /// (the set's fallback) or `Ready=Unknown` for 30 minutes is replaced, its drain bounded
    /// by 10 minutes.
    fn repair_policies(&self) -> Vec<RepairPolicy> {
        let (thirty, ten) = (Duration::from_secs(30 * 60), Duration::from_secs(10 * 60));
        vec![
            RepairPolicy::replace("Ready", ConditionStatus::False, thirty).drain_bound(ten),
            RepairPolicy::replace("Ready", ConditionStatus::Unknown, thirty)
                .for_reasons(".*")
                .drain_bound(ten),
        ]
    }

    fn name(&self) -> &str {
        PROVIDER_NAME
    }
}
