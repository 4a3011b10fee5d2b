//! Faults the fake provider injects into launches, to try a controller against a cloud that
//! runs out of capacity and launches slowly: offerings whose every launch fails with
//! insufficient capacity, and launch delays by offering. The controller's
//! `--fake-insufficient-capacity` and `--fake-launch-delay` flags set them.
//!
//! Offerings are named by patterns `<instance type>[/<zone>[/<capacity type>]]`, where any
//! part may be `*` (any) and missing parts mean any: `m5.large` (every offering of the
//! type), `m5.large/us-east-1a/spot`, `*/us-east-1c`, `*/*/spot`.

use karpenter_cloudprovider::OfferingRef;
use karpenter_scheduling::InstanceType;
use karpenter_scheduling::labels;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

/// Why a pattern or a fault list cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LaunchFaultError {
    /// The pattern is not `<instance type>[/<zone>[/<capacity type>]]`.
    #[error(
        "offering {pattern:?}: {reason} (expected <instance type>[/<zone>[/<capacity type>]], any part `*`)"
    )]
    Pattern {
        /// The text given.
        pattern: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The pattern is well formed but names no offering of the catalogue.
    #[error("offering {pattern:?} matches no offering of the catalogue")]
    NoMatch {
        /// The pattern.
        pattern: String,
    },
}

/// A set of offerings, by instance type, zone and capacity type (`None`: any).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OfferingPattern {
    instance_type: Option<String>,
    zone: Option<String>,
    capacity_type: Option<String>,
}

impl OfferingPattern {
    /// Parses `<instance type>[/<zone>[/<capacity type>]]`.
    ///
    /// # Errors
    /// An empty part, more than three parts, or a capacity type other than `on-demand`,
    /// `spot`, `reserved` or `*`.
    pub fn parse(text: &str) -> Result<Self, LaunchFaultError> {
        let err = |reason: &str| LaunchFaultError::Pattern {
            pattern: text.to_owned(),
            reason: reason.to_owned(),
        };
        let parts: Vec<&str> = text.trim().split('/').map(str::trim).collect();
        if parts.len() > 3 {
            return Err(err("more than three parts"));
        }
        if parts.iter().any(|p| p.is_empty()) {
            return Err(err("an empty part"));
        }
        let any = |p: Option<&&str>| p.filter(|p| **p != "*").map(|p| (*p).to_owned());
        let capacity_type = any(parts.get(2));
        if let Some(ct) = &capacity_type
            && ![
                labels::CAPACITY_TYPE_ON_DEMAND,
                labels::CAPACITY_TYPE_SPOT,
                labels::CAPACITY_TYPE_RESERVED,
            ]
            .contains(&ct.as_str())
        {
            return Err(err("the capacity type is not on-demand, spot or reserved"));
        }
        Ok(Self {
            instance_type: any(parts.first()),
            zone: any(parts.get(1)),
            capacity_type,
        })
    }

    /// Whether `offering` is one of the set.
    pub fn matches(&self, offering: &OfferingRef) -> bool {
        part_matches(&self.instance_type, &offering.instance_type)
            && part_matches(&self.zone, &offering.zone)
            && part_matches(&self.capacity_type, &offering.capacity_type)
    }

    /// The offerings of `types` in the set, in catalogue order.
    pub fn offerings_in(&self, types: &[Arc<InstanceType>]) -> Vec<OfferingRef> {
        types
            .iter()
            .filter(|it| part_matches(&self.instance_type, &it.name))
            .flat_map(|it| {
                it.offerings.iter().map(|o| OfferingRef {
                    instance_type: it.name.clone(),
                    zone: o.zone.clone(),
                    capacity_type: o.capacity_type.clone(),
                })
            })
            .filter(|o| self.matches(o))
            .collect()
    }
}

fn part_matches(pattern: &Option<String>, value: &str) -> bool {
    pattern.as_deref().is_none_or(|p| p == value)
}

impl fmt::Display for OfferingPattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let part = |p: &Option<String>| p.clone().unwrap_or_else(|| "*".into());
        write!(
            f,
            "{}/{}/{}",
            part(&self.instance_type),
            part(&self.zone),
            part(&self.capacity_type)
        )
    }
}

/// The launch faults of a fake provider. Empty by default: every launch succeeds at once.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LaunchFaults {
    /// Offerings whose every launch fails with insufficient capacity.
    pub insufficient_capacity: Vec<OfferingPattern>,
    /// How long a launch takes, by offering: the first entry that matches applies.
    pub delays: Vec<(OfferingPattern, Duration)>,
}

impl LaunchFaults {
    /// Whether no fault is set.
    pub fn is_empty(&self) -> bool {
        self.insufficient_capacity.is_empty() && self.delays.is_empty()
    }

    /// Checks that every pattern names at least one offering of `types`, so a typo is an
    /// error and not a fault that silently never happens.
    ///
    /// # Errors
    /// The first pattern that matches nothing.
    pub fn validate(&self, types: &[Arc<InstanceType>]) -> Result<(), LaunchFaultError> {
        let patterns = self.delays.iter().map(|(p, _)| p);
        for pattern in self.insufficient_capacity.iter().chain(patterns) {
            if pattern.offerings_in(types).is_empty() {
                return Err(LaunchFaultError::NoMatch {
                    pattern: pattern.to_string(),
                });
            }
        }
        Ok(())
    }

    /// The offerings of `types` that have no capacity.
    pub fn insufficient_offerings(&self, types: &[Arc<InstanceType>]) -> Vec<OfferingRef> {
        let mut out: Vec<OfferingRef> = self
            .insufficient_capacity
            .iter()
            .flat_map(|p| p.offerings_in(types))
            .collect();
        out.sort();
        out.dedup();
        out
    }

    /// How long a launch on `offering` takes (zero when no entry matches).
    pub fn delay_of(&self, offering: &OfferingRef) -> Duration {
        self.delays
            .iter()
            .find(|(p, _)| p.matches(offering))
            .map_or(Duration::ZERO, |(_, d)| *d)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use karpenter_catalog::default_instance_types;

    fn offering(t: &str, z: &str, c: &str) -> OfferingRef {
        OfferingRef {
            instance_type: t.into(),
            zone: z.into(),
            capacity_type: c.into(),
        }
    }

    #[test]
    fn patterns_match_by_type_zone_and_capacity_type() {
        let p = OfferingPattern::parse("m5.large/us-east-1a/spot").unwrap();
        assert!(p.matches(&offering("m5.large", "us-east-1a", "spot")));
        assert!(!p.matches(&offering("m5.large", "us-east-1a", "on-demand")));
        assert!(!p.matches(&offering("m5.large", "us-east-1b", "spot")));
        let any_zone = OfferingPattern::parse("m5.large/*/spot").unwrap();
        assert!(any_zone.matches(&offering("m5.large", "us-east-1c", "spot")));
        let whole_type = OfferingPattern::parse("m5.large").unwrap();
        assert!(whole_type.matches(&offering("m5.large", "us-east-1c", "on-demand")));
        assert!(!whole_type.matches(&offering("m5.xlarge", "us-east-1c", "on-demand")));
        let zone = OfferingPattern::parse("*/us-east-1c").unwrap();
        assert!(zone.matches(&offering("c5.large", "us-east-1c", "spot")));
        assert_eq!(zone.to_string(), "*/us-east-1c/*");
    }

    #[test]
    fn malformed_patterns_say_what_is_wrong() {
        for (text, why) in [
            ("m5.large//spot", "an empty part"),
            ("", "an empty part"),
            ("a/b/spot/x", "more than three parts"),
            ("m5.large/us-east-1a/cheap", "capacity type"),
        ] {
            let e = OfferingPattern::parse(text).unwrap_err().to_string();
            assert!(e.contains(why) && e.contains(&format!("{text:?}")), "{e}");
        }
    }

    #[test]
    fn faults_are_checked_against_the_catalogue_and_expanded_to_offerings() {
        let types = default_instance_types();
        let faults = LaunchFaults {
            insufficient_capacity: vec![
                OfferingPattern::parse("m5.large/us-east-1a").unwrap(),
                OfferingPattern::parse("m5.large/*/spot").unwrap(),
            ],
            delays: vec![(
                OfferingPattern::parse("m5.large").unwrap(),
                Duration::from_secs(5),
            )],
        };
        assert_eq!(faults.validate(types), Ok(()));
        let ice = faults.insufficient_offerings(types);
        assert!(ice.contains(&offering("m5.large", "us-east-1a", "on-demand")));
        assert!(ice.contains(&offering("m5.large", "us-east-1a", "spot")));
        assert!(ice.contains(&offering("m5.large", "us-east-1b", "spot")));
        assert!(!ice.contains(&offering("m5.large", "us-east-1b", "on-demand")));
        assert!(ice.windows(2).all(|w| w[0] < w[1]), "sorted, no duplicate");
        let slow = offering("m5.large", "us-east-1b", "on-demand");
        assert_eq!(faults.delay_of(&slow), Duration::from_secs(5));
        assert_eq!(
            faults.delay_of(&offering("c5.large", "us-east-1b", "on-demand")),
            Duration::ZERO
        );
        let typo = LaunchFaults {
            insufficient_capacity: vec![OfferingPattern::parse("m5.lrage").unwrap()],
            ..LaunchFaults::default()
        };
        assert_eq!(
            typo.validate(types),
            Err(LaunchFaultError::NoMatch {
                pattern: "m5.lrage/*/*".into()
            })
        );
    }

    #[test]
    fn the_first_matching_delay_applies() {
        let faults = LaunchFaults {
            delays: vec![
                (
                    OfferingPattern::parse("m5.large/us-east-1a").unwrap(),
                    Duration::from_secs(1),
                ),
                (OfferingPattern::parse("*").unwrap(), Duration::from_secs(9)),
            ],
            ..LaunchFaults::default()
        };
        let a = offering("m5.large", "us-east-1a", "spot");
        let b = offering("m5.large", "us-east-1b", "spot");
        assert_eq!(faults.delay_of(&a), Duration::from_secs(1));
        assert_eq!(faults.delay_of(&b), Duration::from_secs(9));
    }
}
