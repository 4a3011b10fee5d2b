//! `--fake-insufficient-capacity` and `--fake-launch-delay`: the fake provider's launch
//! faults, parsed and checked against the catalogue it launches from.

use crate::SettingsError;
use crate::values::duration;
use karpenter_cloudprovider_fake::launch_faults::{LaunchFaults, OfferingPattern};
use std::time::Duration;

/// `--fake-insufficient-capacity`'s flag and variable.
pub const INSUFFICIENT_CAPACITY: (&str, &str) =
    ("fake-insufficient-capacity", "FAKE_INSUFFICIENT_CAPACITY");
/// `--fake-launch-delay`'s flag and variable.
pub const LAUNCH_DELAY: (&str, &str) = ("fake-launch-delay", "FAKE_LAUNCH_DELAY");

fn error((flag, env): (&'static str, &'static str), message: String) -> SettingsError {
    SettingsError::Fake { flag, env, message }
}

fn entries(text: &str) -> impl Iterator<Item = &str> {
    text.split(',').map(str::trim).filter(|e| !e.is_empty())
}

/// Parses the two flags: `insufficient` is a comma-separated list of offering patterns;
/// `delays` is one Go duration for every launch, or a comma-separated list of
/// `<offering pattern>=<duration>` (the first entry that matches a launch applies). Every
/// pattern must name an offering of the embedded catalogue.
///
/// # Errors
/// A malformed pattern or duration, or a pattern that names no offering, naming the flag.
pub fn parse(insufficient: &str, delays: &str) -> Result<LaunchFaults, SettingsError> {
    let ice = entries(insufficient)
        .map(OfferingPattern::parse)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| error(INSUFFICIENT_CAPACITY, e.to_string()))?;
    let mut delay_entries = Vec::new();
    let listed: Vec<&str> = entries(delays).collect();
    for entry in &listed {
        let (pattern, text) = match entry.split_once('=') {
            Some((p, d)) => (p.trim(), d.trim()),
            None if listed.len() == 1 => ("*", *entry),
            None => {
                return Err(error(
                    LAUNCH_DELAY,
                    format!("entry {entry:?}: a list takes <offering>=<duration> entries"),
                ));
            }
        };
        let pattern = OfferingPattern::parse(pattern)
            .map_err(|e| error(LAUNCH_DELAY, format!("entry {entry:?}: {e}")))?;
        let (flag, env) = LAUNCH_DELAY;
        let delay: Duration = duration(flag, env, text)?;
        delay_entries.push((pattern, delay));
    }
    let types = karpenter_catalog::default_instance_types();
    let faults = LaunchFaults {
        insufficient_capacity: ice,
        delays: Vec::new(),
    };
    faults
        .validate(types)
        .map_err(|e| error(INSUFFICIENT_CAPACITY, e.to_string()))?;
    let faults = LaunchFaults {
        delays: delay_entries,
        ..faults
    };
    let delays_only = LaunchFaults {
        insufficient_capacity: Vec::new(),
        delays: faults.delays.clone(),
    };
    delays_only
        .validate(types)
        .map_err(|e| error(LAUNCH_DELAY, e.to_string()))?;
    Ok(faults)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flag_of(e: SettingsError) -> &'static str {
        match e {
            SettingsError::Fake { flag, .. } | SettingsError::Duration { flag, .. } => flag,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn empty_flags_are_no_faults() {
        assert_eq!(parse("", ""), Ok(LaunchFaults::default()));
    }

    #[test]
    fn lists_parse_and_one_duration_means_every_launch() {
        let f = parse("m5.large/us-east-1a, c5.large/*/spot", "3s").unwrap();
        assert_eq!(f.insufficient_capacity.len(), 2);
        assert_eq!(f.delays.len(), 1);
        assert_eq!(f.delays[0].0.to_string(), "*/*/*");
        assert_eq!(f.delays[0].1, Duration::from_secs(3));
        let f = parse("", "m5.large=10s,*/us-east-1b=1m30s").unwrap();
        assert_eq!(f.delays[1].1, Duration::from_secs(90));
    }

    #[test]
    fn bad_entries_name_their_flag() {
        let e = parse("m5.lrage", "").unwrap_err();
        assert!(e.to_string().contains("m5.lrage"), "{e}");
        assert_eq!(flag_of(e), "fake-insufficient-capacity");
        assert_eq!(
            flag_of(parse("m5.large/a/b/c", "").unwrap_err()),
            "fake-insufficient-capacity"
        );
        assert_eq!(
            flag_of(parse("", "m5.large=10").unwrap_err()),
            "fake-launch-delay"
        );
        assert_eq!(
            flag_of(parse("", "1s,2s").unwrap_err()),
            "fake-launch-delay"
        );
        assert_eq!(
            flag_of(parse("", "x9.huge=1s").unwrap_err()),
            "fake-launch-delay"
        );
        assert_eq!(
            flag_of(parse("", "m5.large=0s").unwrap_err()),
            "fake-launch-delay"
        );
        let e = parse("", "m5.large/x/cheap=1s").unwrap_err().to_string();
        assert!(e.contains("--fake-launch-delay (FAKE_LAUNCH_DELAY)"), "{e}");
    }
}
