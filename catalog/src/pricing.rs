//! Deterministic spot prices, and the price of reserved capacity.
//!
//! The catalogue has on-demand prices only. Every karpenter-rs tool derives spot prices with
//! one rule so they all agree: with h the FNV-1a 64-bit hash (offset basis
//! `0xcbf29ce484222325`, prime `0x100000001b3`; for each byte, xor then wrapping multiply) of
//! the UTF-8 text `"{instance type}/{zone}"`, and f = (h mod 1,000,000) / 1,000,000,
//!
//! spot = on-demand × (0.30 + 0.40 × f)
//!
//! evaluated in f64 in exactly that order. So spot costs 30–70 % of on-demand and differs per
//! zone. Example: `m5.large/us-east-1a` has h mod 1,000,000 = 160952, and with on-demand
//! 0.096 the spot price is 0.0349805568.

const FNV_OFFSET_BASIS: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;

/// FNV-1a 64-bit hash of `bytes`.
pub fn fnv1a_64(bytes: &[u8]) -> u64 {
    bytes.iter().fold(FNV_OFFSET_BASIS, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(FNV_PRIME)
    })
}

/// The fraction f in [0, 1) for an instance type in a zone: (h mod 1,000,000) / 1,000,000.
pub fn spot_fraction(instance_type: &str, zone: &str) -> f64 {
    let h = fnv1a_64(format!("{instance_type}/{zone}").as_bytes());
    (h % 1_000_000) as f64 / 1_000_000.0
}

/// The spot price of `instance_type` in `zone` given its on-demand price (see the module
/// documentation for the rule).
pub fn spot_price(instance_type: &str, zone: &str, on_demand: f64) -> f64 {
    on_demand * (0.30 + 0.40 * spot_fraction(instance_type, zone))
}

/// What Karpenter's AWS provider divides the on-demand price by to price a capacity
/// reservation's offering.
pub const RESERVED_PRICE_DIVISOR: f64 = 10_000_000.0;

/// The price of a reserved offering of a type whose on-demand price is `on_demand`: the
/// instances are already paid for, so Karpenter's AWS provider treats them as nearly free
/// (the scheduler prefers them to any spot or on-demand offering) while keeping the relative
/// order of types for consolidation.
pub fn reserved_price(on_demand: f64) -> f64 {
    on_demand / RESERVED_PRICE_DIVISOR
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reserved_capacity_is_cheaper_than_any_spot_price_and_keeps_the_order() {
        let (small, large) = (0.096, 0.192);
        assert_eq!(reserved_price(small), 0.096 / 10_000_000.0);
        assert!(reserved_price(large) > reserved_price(small));
        assert!(reserved_price(large) < spot_price("m5.large", "us-east-1a", small));
    }

    #[test]
    fn fnv1a_reference_values() {
        // Published FNV-1a 64 test vectors.
        assert_eq!(fnv1a_64(b""), 0xcbf29ce484222325);
        assert_eq!(fnv1a_64(b"a"), 0xaf63dc4c8601ec8c);
        assert_eq!(fnv1a_64(b"foobar"), 0x85944171f73967e8);
    }

    #[test]
    fn spot_rule_test_vector() {
        assert_eq!(fnv1a_64(b"m5.large/us-east-1a") % 1_000_000, 160_952);
        let spot = spot_price("m5.large", "us-east-1a", 0.096);
        // 0.096 × (0.30 + 0.40 × 0.160952) = 0.096 × 0.3643808 = 0.0349805568
        assert!((spot - 0.034_980_556_8).abs() < 1e-12, "{spot}");
    }

    #[test]
    fn spot_is_between_30_and_70_percent() {
        for zone in [
            "us-east-1a",
            "us-east-1b",
            "us-east-1c",
            "us-east-1d",
            "us-east-1f",
        ] {
            for it in ["m5.large", "c6g.xlarge", "p5.48xlarge", "t3.micro"] {
                let s = spot_price(it, zone, 1.0);
                assert!((0.30..0.70).contains(&s), "{it} {zone} {s}");
            }
        }
        assert_ne!(
            spot_price("m5.large", "us-east-1a", 1.0),
            spot_price("m5.large", "us-east-1b", 1.0)
        );
    }
}
