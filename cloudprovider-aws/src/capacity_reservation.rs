//! Capacity reservations (on-demand capacity reservations and capacity blocks) selected by an
//! EC2NodeClass's `capacityReservationSelectorTerms`, as Karpenter's AWS provider finds them:
//! each term with an `id` is one query by id; a term with tags, an owner or an instance match
//! criteria is one query by filters (a tag value `*` only asks for the key); every query asks
//! for `active` reservations only. Reservations that ended are dropped, and capacity blocks
//! within 40 minutes of their end are reported `expiring`, so no new node is launched into
//! them.
//!
//! How many instances each reservation still takes is kept in [`Availability`]: set from
//! each listing, decremented on a launch, incremented on a termination and zeroed when EC2
//! says the reservation is full, so the offerings built from it stop promising capacity
//! between listings.

use crate::cache::{Clock, TtlCache};
use crate::error::AwsError;
use crate::nodeclass::CapacityReservationSelectorTerm;
use aws_sdk_ec2::types::{
    CapacityReservation as Ec2Reservation, CapacityReservationType, Filter, InstanceMatchCriteria,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use karpenter_cloudprovider::reserved::{ReservedOffering, with_reserved};
use karpenter_scheduling::model::InstanceType;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime};

/// A capacity block this close to its end is `expiring`: no new node goes into it.
pub const EXPIRATION_PERIOD: Duration = Duration::from_secs(40 * 60);

/// `reservationType` of an on-demand capacity reservation.
pub const TYPE_DEFAULT: &str = "default";
/// `reservationType` of a capacity block.
pub const TYPE_CAPACITY_BLOCK: &str = "capacity-block";
/// `state` of a reservation new nodes may use.
pub const STATE_ACTIVE: &str = "active";
/// `state` of a capacity block about to end.
pub const STATE_EXPIRING: &str = "expiring";

/// A reservation in an EC2NodeClass's `status.capacityReservations`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CapacityReservationStatus {
    /// Zone of the reservation.
    pub availability_zone: String,
    /// When the reservation ends, if it does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<String>")]
    pub end_time: Option<Time>,
    /// Reservation id (`cr-…`).
    pub id: String,
    /// `open` or `targeted`.
    pub instance_match_criteria: String,
    /// The instance type it reserves.
    pub instance_type: String,
    /// The account that owns it.
    #[serde(rename = "ownerID")]
    pub owner_id: String,
    /// `default` or `capacity-block`.
    pub reservation_type: String,
    /// Whether EC2 may reclaim the capacity (interruptible reservations).
    #[serde(default)]
    pub interruptible: bool,
    /// `active` or `expiring`.
    pub state: String,
}

/// One DescribeCapacityReservations query.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct Query {
    /// A reservation id; the other fields are then empty.
    pub id: String,
    /// Owning account.
    pub owner_id: String,
    /// Tags; `*` asks for the key only.
    pub tags: BTreeMap<String, String>,
    /// `open` or `targeted`.
    pub instance_match_criteria: String,
}

impl Query {
    /// The queries of `terms`, in order: a term with an `id` gives a query by id, a term
    /// with tags or an instance match criteria a query by filters.
    pub fn of_terms(terms: &[CapacityReservationSelectorTerm]) -> Vec<Query> {
        let mut out = Vec::new();
        for t in terms {
            if !t.id.is_empty() {
                out.push(Query {
                    id: t.id.clone(),
                    owner_id: String::new(),
                    tags: BTreeMap::new(),
                    instance_match_criteria: String::new(),
                });
            }
            if !t.tags.is_empty() || !t.instance_match_criteria.is_empty() {
                out.push(Query {
                    id: String::new(),
                    owner_id: t.owner_id.clone(),
                    tags: t.tags.clone(),
                    instance_match_criteria: t.instance_match_criteria.clone(),
                });
            }
        }
        out
    }

    /// The EC2 filters of this query (`state=active` first); the id goes in
    /// `CapacityReservationIds` instead.
    pub fn filters(&self) -> Vec<Filter> {
        let filter = |name: String, value: &str| {
            Filter::builder()
                .name(name)
                .values(value.to_owned())
                .build()
        };
        let mut filters = vec![filter("state".into(), STATE_ACTIVE)];
        if !self.id.is_empty() {
            return filters;
        }
        if !self.owner_id.is_empty() {
            filters.push(filter("owner-id".into(), &self.owner_id));
        }
        for (k, v) in &self.tags {
            filters.push(if v == "*" {
                filter("tag-key".into(), k)
            } else {
                filter(format!("tag:{k}"), v)
            });
        }
        if !self.instance_match_criteria.is_empty() {
            filters.push(filter(
                "instance-match-criteria".into(),
                &self.instance_match_criteria,
            ));
        }
        filters
    }
}

fn system_time(t: &aws_sdk_ec2::primitives::DateTime) -> Option<SystemTime> {
    SystemTime::try_from(*t).ok()
}

/// The status entry of `cr` at `now`, or why it cannot be used (an instance match criteria
/// or reservation type Karpenter does not know, a missing field).
///
/// # Errors
/// [`AwsError::InvalidResponse`] naming the reservation and what is wrong with it.
pub fn from_ec2(
    cr: &Ec2Reservation,
    now: SystemTime,
) -> Result<CapacityReservationStatus, AwsError> {
    let id = cr.capacity_reservation_id().unwrap_or_default().to_owned();
    let invalid = |message: String| AwsError::InvalidResponse {
        operation: "DescribeCapacityReservations",
        message: format!("capacity reservation {id:?}: {message}"),
    };
    let criteria = match cr.instance_match_criteria() {
        Some(InstanceMatchCriteria::Open) => "open",
        Some(InstanceMatchCriteria::Targeted) => "targeted",
        other => {
            return Err(invalid(format!(
                "unsupported instance match criteria {other:?}"
            )));
        }
    };
    let reservation_type = match cr.reservation_type() {
        None | Some(CapacityReservationType::Default) => TYPE_DEFAULT,
        Some(CapacityReservationType::CapacityBlock) => TYPE_CAPACITY_BLOCK,
        Some(other) => return Err(invalid(format!("unsupported reservation type {other:?}"))),
    };
    let end = cr.end_date().and_then(system_time);
    let expiring = reservation_type == TYPE_CAPACITY_BLOCK
        && end.is_some_and(|e| now + EXPIRATION_PERIOD >= e);
    let field = |v: Option<&str>, name: &str| {
        v.map(str::to_owned)
            .ok_or_else(|| invalid(format!("no {name}")))
    };
    Ok(CapacityReservationStatus {
        availability_zone: field(cr.availability_zone(), "availability zone")?,
        end_time: end.and_then(|e| {
            k8s_openapi::jiff::Timestamp::try_from(e)
                .ok()
                .map(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time)
        }),
        id: field(cr.capacity_reservation_id(), "id")?,
        instance_match_criteria: criteria.to_owned(),
        instance_type: field(cr.instance_type(), "instance type")?,
        owner_id: field(cr.owner_id(), "owner")?,
        reservation_type: reservation_type.to_owned(),
        interruptible: cr.interruptible().unwrap_or(false),
        state: if expiring {
            STATE_EXPIRING
        } else {
            STATE_ACTIVE
        }
        .to_owned(),
    })
}

/// `types` with a `reserved` offering for each reservation of their type in `reservations`
/// (an EC2NodeClass's `status.capacityReservations`), as upstream's reserved-capacity
/// resolver adds them: priced nearly free, with the instances [`Availability`] says it still
/// takes, and unavailable when that is none, when the reservation is expiring, or when the
/// type is not offered in its zone (no subnet there). Types without a reservation are
/// returned as they are.
pub fn with_reserved_offerings(
    types: Vec<Arc<InstanceType>>,
    reservations: &[CapacityReservationStatus],
    availability: &Availability,
) -> Vec<Arc<InstanceType>> {
    if reservations.is_empty() {
        return types;
    }
    types
        .into_iter()
        .map(|it| {
            let offerings: Vec<_> = reservations
                .iter()
                .filter(|r| r.instance_type == it.name)
                .map(|r| {
                    ReservedOffering {
                        id: &r.id,
                        zone: &r.availability_zone,
                        reservation_type: &r.reservation_type,
                        interruptible: r.interruptible,
                        remaining: availability.available(&r.id),
                        usable: r.state != STATE_EXPIRING
                            && it.offerings.iter().any(|o| o.zone == r.availability_zone),
                    }
                    .offering(&it)
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

/// How many instances each reservation still takes, between listings.
#[derive(Debug, Default)]
pub struct Availability {
    counts: Mutex<BTreeMap<String, u32>>,
}

impl Availability {
    fn counts(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, u32>> {
        self.counts.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Sets the counts a listing reported.
    pub fn sync(&self, listed: impl IntoIterator<Item = (String, u32)>) {
        self.counts().extend(listed);
    }

    /// Instances `id` still takes (0 for an unknown reservation).
    pub fn available(&self, id: &str) -> u32 {
        self.counts().get(id).copied().unwrap_or(0)
    }

    /// One instance launched into `id`.
    pub fn launched(&self, id: &str) {
        if let Some(n) = self.counts().get_mut(id) {
            *n = n.saturating_sub(1);
        }
    }

    /// One instance of `id` terminated.
    pub fn terminated(&self, id: &str) {
        if let Some(n) = self.counts().get_mut(id) {
            *n += 1;
        }
    }

    /// EC2 reported `id` full.
    pub fn exhausted(&self, id: &str) {
        if let Some(n) = self.counts().get_mut(id) {
            *n = 0;
        }
    }
}

/// Capacity reservations from EC2, each query's result cached for the discovery TTL.
#[derive(Debug)]
pub struct CapacityReservations {
    ec2: aws_sdk_ec2::Client,
    clock: Arc<dyn Clock>,
    queries: TtlCache<String, Vec<Ec2Reservation>>,
    availability: Arc<Availability>,
}

impl CapacityReservations {
    /// Reservations over `ec2`, caching each query for `ttl` on `clock`.
    pub fn new(ec2: aws_sdk_ec2::Client, clock: Arc<dyn Clock>, ttl: Duration) -> Self {
        Self {
            ec2,
            queries: TtlCache::new(clock.clone(), ttl),
            clock,
            availability: Arc::default(),
        }
    }

    /// The reservations' remaining instance counts (shared with whoever learns that one is
    /// full, such as the interruption handler).
    pub fn availability(&self) -> &Arc<Availability> {
        &self.availability
    }

    /// The reservations `terms` select, by id, without those that ended. Reservations EC2
    /// describes in a way Karpenter cannot use are left out and returned as errors beside.
    ///
    /// # Errors
    /// The DescribeCapacityReservations call failed (a reservation id that does not exist is
    /// not an error: it selects nothing).
    pub async fn list(
        &self,
        terms: &[CapacityReservationSelectorTerm],
    ) -> Result<(Vec<CapacityReservationStatus>, Vec<AwsError>), AwsError> {
        let mut found: BTreeMap<String, Ec2Reservation> = BTreeMap::new();
        for q in Query::of_terms(terms) {
            let key = serde_json::to_string(&q).unwrap_or_default();
            let listed = match self.queries.get(&key) {
                Some(hit) => hit,
                None => {
                    let listed = self.describe(&q).await?;
                    self.availability.sync(listed.iter().filter_map(|r| {
                        let n = u32::try_from(r.available_instance_count().unwrap_or(0)).ok()?;
                        Some((r.capacity_reservation_id()?.to_owned(), n))
                    }));
                    self.queries.insert(key, listed.clone());
                    listed
                }
            };
            for r in listed {
                if let Some(id) = r.capacity_reservation_id() {
                    found.insert(id.to_owned(), r);
                }
            }
        }
        let now = self.clock.now();
        let mut out = Vec::new();
        let mut errors = Vec::new();
        for r in found.values() {
            if r.end_date().and_then(system_time).is_some_and(|e| e <= now) {
                continue;
            }
            match from_ec2(r, now) {
                Ok(s) => out.push(s),
                Err(e) => errors.push(e),
            }
        }
        Ok((out, errors))
    }

    async fn describe(&self, q: &Query) -> Result<Vec<Ec2Reservation>, AwsError> {
        let mut out = Vec::new();
        let mut token = None;
        loop {
            let mut call = self
                .ec2
                .describe_capacity_reservations()
                .set_filters(Some(q.filters()))
                .set_next_token(token);
            if q.id.is_empty() {
                call = call.max_results(1000);
            } else {
                call = call.capacity_reservation_ids(q.id.clone());
            }
            let page = match call.send().await {
                Ok(page) => page,
                Err(e) => {
                    let e = AwsError::api("DescribeCapacityReservations", e);
                    if e.code().is_some_and(|c| c.contains("NotFound")) {
                        break;
                    }
                    return Err(e);
                }
            };
            out.extend(page.capacity_reservations().iter().cloned());
            token = page.next_token().map(str::to_owned);
            if token.is_none() {
                break;
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn term(id: &str, tags: &[(&str, &str)], criteria: &str) -> CapacityReservationSelectorTerm {
        CapacityReservationSelectorTerm {
            tags: tags
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
            id: id.to_owned(),
            owner_id: if tags.is_empty() {
                String::new()
            } else {
                "123456789012".into()
            },
            instance_match_criteria: criteria.to_owned(),
        }
    }

    fn filters(q: &Query) -> Vec<(String, Vec<String>)> {
        q.filters()
            .iter()
            .map(|f| (f.name().unwrap_or_default().to_owned(), f.values().to_vec()))
            .collect()
    }

    #[test]
    fn each_term_gives_upstreams_queries() {
        let queries = Query::of_terms(&[
            term("cr-1", &[], ""),
            term("", &[("team", "ml"), ("any", "*")], ""),
            term("", &[], "targeted"),
        ]);
        assert_eq!(queries.len(), 3);
        assert_eq!(queries[0].id, "cr-1");
        assert_eq!(
            filters(&queries[0]),
            [("state".into(), vec!["active".into()])]
        );
        assert_eq!(
            filters(&queries[1]),
            [
                ("state".to_owned(), vec!["active".to_owned()]),
                ("owner-id".into(), vec!["123456789012".into()]),
                ("tag-key".into(), vec!["any".into()]),
                ("tag:team".into(), vec!["ml".into()]),
            ]
        );
        assert_eq!(
            filters(&queries[2])[1],
            ("instance-match-criteria".into(), vec!["targeted".into()])
        );
    }

    fn reservation(kind: CapacityReservationType, end_in: Option<u64>) -> Ec2Reservation {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
        let mut b = Ec2Reservation::builder()
            .capacity_reservation_id("cr-1")
            .instance_type("p5.48xlarge")
            .availability_zone("us-east-1a")
            .owner_id("123456789012")
            .instance_match_criteria(InstanceMatchCriteria::Targeted)
            .reservation_type(kind)
            .available_instance_count(2);
        if let Some(secs) = end_in {
            b = b.end_date(aws_sdk_ec2::primitives::DateTime::from(
                now + Duration::from_secs(secs),
            ));
        }
        b.build()
    }

    #[test]
    fn capacity_blocks_close_to_their_end_are_expiring() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
        let block = |end| reservation(CapacityReservationType::CapacityBlock, end);
        let s = from_ec2(&block(Some(3_600)), now).unwrap();
        assert_eq!(
            (s.reservation_type.as_str(), s.state.as_str()),
            (TYPE_CAPACITY_BLOCK, STATE_ACTIVE)
        );
        assert!(s.end_time.is_some());
        let s = from_ec2(&block(Some(30 * 60)), now).unwrap();
        assert_eq!(s.state, STATE_EXPIRING);
        // An on-demand reservation ending soon is still active.
        let odcr = reservation(CapacityReservationType::Default, Some(60));
        let s = from_ec2(&odcr, now).unwrap();
        assert_eq!(
            (s.reservation_type.as_str(), s.state.as_str()),
            (TYPE_DEFAULT, STATE_ACTIVE)
        );
        assert_eq!(s.instance_match_criteria, "targeted");
        let odd = Ec2Reservation::builder()
            .capacity_reservation_id("cr-2")
            .instance_match_criteria(InstanceMatchCriteria::from("future"))
            .build();
        let err = from_ec2(&odd, now).unwrap_err().to_string();
        assert!(
            err.contains("cr-2") && err.contains("instance match criteria"),
            "{err}"
        );
    }

    #[test]
    fn availability_follows_launches_terminations_and_exhaustion() {
        let a = Availability::default();
        a.sync([("cr-1".to_owned(), 2)]);
        a.launched("cr-1");
        assert_eq!(a.available("cr-1"), 1);
        a.launched("cr-1");
        a.launched("cr-1");
        assert_eq!(a.available("cr-1"), 0, "never below zero");
        a.terminated("cr-1");
        assert_eq!(a.available("cr-1"), 1);
        a.exhausted("cr-1");
        assert_eq!(a.available("cr-1"), 0);
        assert_eq!(a.available("cr-unknown"), 0);
        a.sync([("cr-1".to_owned(), 3)]);
        assert_eq!(a.available("cr-1"), 3, "a listing resets the count");
    }
}
