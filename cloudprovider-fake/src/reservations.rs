//! Capacity reservations in the fake provider: EC2 On-Demand Capacity Reservations and
//! Capacity Blocks as Karpenter's AWS provider publishes them (a `reserved` offering per
//! reservation, priced at the on-demand price divided by 10,000,000 so the scheduler treats
//! it as free while keeping the relative order of types, labelled with the reservation's
//! id, type and interruptibility).

use karpenter_cloudprovider::reserved::ReservedOffering;
pub use karpenter_cloudprovider::reserved::{
    RESERVATION_TYPE_CAPACITY_BLOCK, RESERVATION_TYPE_DEFAULT, with_reserved,
};
use karpenter_scheduling::model::{InstanceType, Offering};

/// A capacity reservation the fake provider launches into: `count` instances of
/// `instance_type` in `zone`. Its JSON form (`--fake-capacity-reservations`) names the fields
/// `id`, `instanceType`, `zone`, `count`, `type` (default `default`) and `interruptible`
/// (default false).
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct FakeReservation {
    /// Its id (`cr-0123456789abcdef0`).
    pub id: String,
    /// The instance type it holds.
    pub instance_type: String,
    /// Its zone.
    pub zone: String,
    /// How many instances it holds in all (running ones included).
    pub count: u32,
    /// [`RESERVATION_TYPE_DEFAULT`] or [`RESERVATION_TYPE_CAPACITY_BLOCK`].
    #[serde(rename = "type", default = "default_type")]
    pub reservation_type: String,
    /// Whether EC2 may interrupt its instances.
    #[serde(default)]
    pub interruptible: bool,
}

fn default_type() -> String {
    RESERVATION_TYPE_DEFAULT.to_owned()
}

/// Parses the JSON list of `--fake-capacity-reservations`.
///
/// # Errors
/// The text is not a list of reservations; the message names the entry and field.
pub fn parse_reservations(json: &str) -> Result<Vec<FakeReservation>, String> {
    let de = &mut serde_json::Deserializer::from_str(json);
    serde_path_to_error::deserialize(de).map_err(|e| format!("{}: {}", e.path(), e.inner()))
}

impl FakeReservation {
    /// An ordinary (`default`), uninterruptible reservation.
    pub fn new(
        id: impl Into<String>,
        instance_type: impl Into<String>,
        zone: impl Into<String>,
        count: u32,
    ) -> Self {
        Self {
            id: id.into(),
            instance_type: instance_type.into(),
            zone: zone.into(),
            count,
            reservation_type: RESERVATION_TYPE_DEFAULT.into(),
            interruptible: false,
        }
    }
}

/// A reservation the provider cannot hold, naming the reservation and the field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReservationError {
    /// A field is empty or not one of the accepted values.
    #[error("capacity reservation {id:?}: {field}: {message}")]
    Invalid {
        /// The reservation id (may be empty).
        id: String,
        /// The field (`id`, `instanceType`, `zone`, `type`).
        field: &'static str,
        /// What is wrong.
        message: String,
    },
    /// Another reservation already has this id.
    #[error("capacity reservation {0:?}: id: declared twice")]
    Duplicate(String),
}

impl FakeReservation {
    /// Checks the reservation against the provider's instance types: a known type offered
    /// in its zone, a non-empty id and a known reservation type.
    pub(crate) fn validate(
        &self,
        types: &[std::sync::Arc<InstanceType>],
    ) -> Result<(), ReservationError> {
        let invalid = |field: &'static str, message: String| ReservationError::Invalid {
            id: self.id.clone(),
            field,
            message,
        };
        if self.id.is_empty() {
            return Err(invalid("id", "must not be empty".into()));
        }
        if ![RESERVATION_TYPE_DEFAULT, RESERVATION_TYPE_CAPACITY_BLOCK]
            .contains(&self.reservation_type.as_str())
        {
            return Err(invalid(
                "type",
                format!(
                    "{:?} is neither {RESERVATION_TYPE_DEFAULT:?} nor {RESERVATION_TYPE_CAPACITY_BLOCK:?}",
                    self.reservation_type
                ),
            ));
        }
        let Some(it) = types.iter().find(|it| it.name == self.instance_type) else {
            return Err(invalid(
                "instanceType",
                format!("no instance type {:?} in the catalogue", self.instance_type),
            ));
        };
        if !it.offerings.iter().any(|o| o.zone == self.zone) {
            return Err(invalid(
                "zone",
                format!("{:?} is not offered in zone {:?}", it.name, self.zone),
            ));
        }
        Ok(())
    }

    /// The reserved offering for this reservation with `remaining` instances left, on `it`.
    pub(crate) fn offering(&self, it: &InstanceType, remaining: u32, available: bool) -> Offering {
        ReservedOffering {
            id: &self.id,
            zone: &self.zone,
            reservation_type: &self.reservation_type,
            interruptible: self.interruptible,
            remaining,
            usable: available,
        }
        .offering(it)
    }
}
