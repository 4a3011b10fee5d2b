//! Hand-sized instance types and the small catalogues scenario tests use, where every
//! number is round enough to check a plan by hand.

use crate::requirements::{nsr, reqs};
use crate::resources::GI;
use karpenter_scheduling::labels::{
    ARCH, CAPACITY_TYPE, CAPACITY_TYPE_ON_DEMAND, CAPACITY_TYPE_SPOT, INSTANCE_TYPE, ZONE,
};
use karpenter_scheduling::model::{InstanceType, Offering};
use karpenter_scheduling::requirements::Operator;
use karpenter_scheduling::resources::Resources;
use std::sync::Arc;

/// The zones of the small catalogues.
pub const ZONES: [&str; 3] = ["zone-a", "zone-b", "zone-c"];

/// The spot price of [`catalogue`]'s types as a fraction of their on-demand price.
pub const SPOT_FRACTION: f64 = 0.4;

/// The general-purpose shapes of the small catalogues: name, cores, GiB and on-demand price
/// per hour. Each size doubles the previous one, and so does the price.
pub const GENERAL_PURPOSE: [(&str, i64, i64, f64); 4] = [
    ("small", 2, 4, 0.10),
    ("medium", 4, 8, 0.20),
    ("large", 8, 16, 0.40),
    ("xlarge", 16, 32, 0.80),
];

/// A spot price: absolute, or a fraction of the on-demand price known only at `build`.
#[derive(Debug, Clone, Copy, PartialEq)]
enum SpotPrice {
    Absolute(f64),
    OfOnDemand(f64),
}

/// Builds an [`InstanceType`] with no kubelet overhead (allocatable equals capacity).
///
/// What [`build`](Self::build) guarantees: the requirements pin the instance-type label to
/// the name, the zone label to the zones, the capacity-type label to the capacity types that
/// have a price, and the architecture to `amd64`; there is one available offering per zone
/// and priced capacity type, zone by zone in the order given, spot before on-demand.
#[derive(Debug, Clone, PartialEq)]
pub struct InstanceTypeBuilder {
    name: String,
    capacity: Resources,
    zones: Vec<String>,
    on_demand: Option<f64>,
    spot: Option<SpotPrice>,
}

impl InstanceTypeBuilder {
    /// `name` with `cores` whole cores, `memory_gib` GiB and 110 pods, in every zone of
    /// [`ZONES`], with no offering until a price is set.
    pub fn new(name: &str, cores: i64, memory_gib: i64) -> Self {
        Self {
            name: name.into(),
            capacity: Resources {
                cpu_millis: cores * 1000,
                memory: memory_gib * GI,
                pods: 110,
                ..Resources::default()
            },
            zones: ZONES.iter().map(|z| z.to_string()).collect(),
            on_demand: None,
            spot: None,
        }
    }

    /// Offered on demand at `price` per hour in every zone.
    pub fn on_demand(mut self, price: f64) -> Self {
        self.on_demand = Some(price);
        self
    }

    /// Offered as spot at `price` per hour in every zone.
    pub fn spot(mut self, price: f64) -> Self {
        self.spot = Some(SpotPrice::Absolute(price));
        self
    }

    /// Offered as spot at `fraction` × the on-demand price in every zone.
    ///
    /// [`build`](Self::build) panics when no on-demand price is set.
    pub fn spot_at(mut self, fraction: f64) -> Self {
        self.spot = Some(SpotPrice::OfOnDemand(fraction));
        self
    }

    /// Only in `zones` (in this order), instead of [`ZONES`].
    pub fn zones(mut self, zones: &[&str]) -> Self {
        self.zones = zones.iter().map(|z| z.to_string()).collect();
        self
    }

    /// With `amount` of the extended resource `name` (`nvidia.com/gpu`).
    pub fn extended(mut self, name: &str, amount: i64) -> Self {
        self.capacity.extended.push((name.into(), amount));
        self
    }

    /// The instance type (see the type's documentation for what it guarantees).
    ///
    /// # Panics
    ///
    /// When [`spot_at`](Self::spot_at) was used without an on-demand price.
    pub fn build(self) -> Arc<InstanceType> {
        let spot = self.spot.map(|s| match s {
            SpotPrice::Absolute(price) => price,
            SpotPrice::OfOnDemand(fraction) => {
                let on_demand = self.on_demand.expect("spot_at needs an on-demand price");
                on_demand * fraction
            }
        });
        let priced: Vec<(&str, f64)> = [
            (CAPACITY_TYPE_SPOT, spot),
            (CAPACITY_TYPE_ON_DEMAND, self.on_demand),
        ]
        .into_iter()
        .filter_map(|(ct, price)| Some((ct, price?)))
        .collect();
        let offerings = self
            .zones
            .iter()
            .flat_map(|zone| {
                priced.iter().map(move |&(ct, price)| Offering {
                    zone: zone.clone(),
                    capacity_type: ct.into(),
                    price,
                    available: true,
                    reservation: None,
                })
            })
            .collect();
        let zones: Vec<&str> = self.zones.iter().map(String::as_str).collect();
        let capacity_types: Vec<&str> = priced.iter().map(|&(ct, _)| ct).collect();
        Arc::new(InstanceType {
            devices: Vec::new(),
            requirements: reqs(&[
                nsr(INSTANCE_TYPE, Operator::In, &[&self.name]),
                nsr(ZONE, Operator::In, &zones),
                nsr(CAPACITY_TYPE, Operator::In, &capacity_types),
                nsr(ARCH, Operator::In, &["amd64"]),
            ]),
            name: self.name,
            capacity: self.capacity,
            overhead: Default::default(),
            offerings,
        })
    }
}

/// The scheduling tests' catalogue: the [`GENERAL_PURPOSE`] shapes in every zone of
/// [`ZONES`], on demand and as spot at [`SPOT_FRACTION`] of the price, and `gpu` (8 cores,
/// 32 GiB, one `nvidia.com/gpu`, on demand only at 3.00).
pub fn catalogue() -> Vec<Arc<InstanceType>> {
    let mut types: Vec<_> = GENERAL_PURPOSE
        .iter()
        .map(|&(name, cores, gib, price)| {
            InstanceTypeBuilder::new(name, cores, gib)
                .on_demand(price)
                .spot_at(SPOT_FRACTION)
                .build()
        })
        .collect();
    types.push(
        InstanceTypeBuilder::new("gpu", 8, 32)
            .on_demand(3.00)
            .extended("nvidia.com/gpu", 1)
            .build(),
    );
    types
}

/// Each `(name, cores, GiB, price)` of `shapes`, in that order, offered on demand at that
/// price in every zone of [`ZONES`].
pub fn on_demand_types(shapes: &[(&str, i64, i64, f64)]) -> Vec<Arc<InstanceType>> {
    shapes
        .iter()
        .map(|&(name, cores, gib, price)| {
            InstanceTypeBuilder::new(name, cores, gib)
                .on_demand(price)
                .build()
        })
        .collect()
}

/// The [`GENERAL_PURPOSE`] shapes on demand only, in the single zone `zone`.
pub fn on_demand_catalogue(zone: &str) -> Vec<Arc<InstanceType>> {
    GENERAL_PURPOSE
        .iter()
        .map(|&(name, cores, gib, price)| {
            InstanceTypeBuilder::new(name, cores, gib)
                .zones(&[zone])
                .on_demand(price)
                .build()
        })
        .collect()
}

/// `n` spot-only types in the single zone `zone`: `spot-{i:02}` has i+1 cores, 2(i+1) GiB
/// and costs half of 0.10 per core.
pub fn spot_catalogue(n: usize, zone: &str) -> Vec<Arc<InstanceType>> {
    (0..n)
        .map(|i| {
            let k = i as i64 + 1;
            InstanceTypeBuilder::new(&format!("spot-{i:02}"), k, 2 * k)
                .zones(&[zone])
                .spot(0.1 * k as f64 * 0.5)
                .build()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builder_pins_labels_and_orders_offerings_zone_by_zone_spot_first() {
        let it = InstanceTypeBuilder::new("t", 2, 4)
            .zones(&["z1", "z2"])
            .on_demand(1.0)
            .spot_at(0.25)
            .extended("nvidia.com/gpu", 2)
            .build();
        let offerings: Vec<(&str, &str, f64)> = it
            .offerings
            .iter()
            .map(|o| (o.zone.as_str(), o.capacity_type.as_str(), o.price))
            .collect();
        assert_eq!(
            offerings,
            [
                ("z1", "spot", 0.25),
                ("z1", "on-demand", 1.0),
                ("z2", "spot", 0.25),
                ("z2", "on-demand", 1.0),
            ]
        );
        assert_eq!(it.allocatable(), it.capacity);
        assert_eq!(it.capacity.cpu_millis, 2000);
        assert_eq!(it.capacity.memory, 4 * GI);
        assert_eq!(it.capacity.extended, [("nvidia.com/gpu".to_string(), 2)]);
        for (key, want) in [
            (INSTANCE_TYPE, vec!["t"]),
            (ZONE, vec!["z1", "z2"]),
            (CAPACITY_TYPE, vec!["on-demand", "spot"]),
            (ARCH, vec!["amd64"]),
        ] {
            let got: Vec<&str> = it.requirements.get(key).expect(key).values().collect();
            assert_eq!(got, want, "{key}");
        }
    }

    #[test]
    fn catalogues() {
        let c = catalogue();
        assert_eq!(c.len(), 5);
        assert_eq!(c[0].offerings.len(), 6);
        assert!((c[0].offerings[0].price - 0.04).abs() < 1e-12);
        assert_eq!(c[4].offerings.len(), 3);
        let od = on_demand_catalogue("zone-a");
        assert!(od.iter().all(|t| t.offerings.len() == 1));
        let spot = spot_catalogue(3, "zone-a");
        assert_eq!(spot[2].name, "spot-02");
        assert_eq!(spot[2].offerings[0].capacity_type, "spot");
        assert!((spot[2].offerings[0].price - 0.15).abs() < 1e-12);
    }
}
