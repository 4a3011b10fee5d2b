//! Resource arithmetic the solver needs with the exact semantics of Karpenter's
//! `pkg/utils/resources`, written against the public fields of [`Resources`] so the hot loops
//! do no allocation.

use crate::resources::Resources;

/// `resources.Fits`: every requested amount is at most the available amount, and nothing in
/// `available` is negative (an overcommitted node takes nothing more).
pub(crate) fn fits(requests: &Resources, available: &Resources) -> bool {
    if available.any_negative() {
        return false;
    }
    if requests.cpu_millis > available.cpu_millis
        || requests.memory > available.memory
        || requests.ephemeral_storage > available.ephemeral_storage
        || requests.pods > available.pods
    {
        return false;
    }
    requests
        .extended
        .iter()
        .all(|(name, v)| *v <= extended(available, name))
}

/// The amount of an extended resource (0 when absent).
pub(crate) fn extended(r: &Resources, name: &str) -> i64 {
    r.extended
        .binary_search_by(|(n, _)| n.as_str().cmp(name))
        .map_or(0, |i| r.extended[i].1)
}

/// `a + b`, saturating, keeping extended entries sorted and non-zero.
pub(crate) fn sum(a: &Resources, b: &Resources) -> Resources {
    let mut out = a.clone();
    add_into(&mut out, b);
    out
}

/// `a += b`, saturating.
pub(crate) fn add_into(a: &mut Resources, b: &Resources) {
    a.cpu_millis = a.cpu_millis.saturating_add(b.cpu_millis);
    a.memory = a.memory.saturating_add(b.memory);
    a.ephemeral_storage = a.ephemeral_storage.saturating_add(b.ephemeral_storage);
    a.pods = a.pods.saturating_add(b.pods);
    merge_extended(a, b, i64::saturating_add);
}

/// `a -= b`, saturating (may go negative).
pub(crate) fn sub_from(a: &mut Resources, b: &Resources) {
    a.cpu_millis = a.cpu_millis.saturating_sub(b.cpu_millis);
    a.memory = a.memory.saturating_sub(b.memory);
    a.ephemeral_storage = a.ephemeral_storage.saturating_sub(b.ephemeral_storage);
    a.pods = a.pods.saturating_sub(b.pods);
    merge_extended(a, b, i64::saturating_sub);
}

/// cpu (millis), memory, ephemeral storage and pods, in that order: the amounts the hot
/// scans compare as a fixed array.
pub(crate) fn scalars(r: &Resources) -> [i64; 4] {
    [r.cpu_millis, r.memory, r.ephemeral_storage, r.pods]
}

/// Element-wise maximum (absent counts as 0).
pub(crate) fn max(a: &Resources, b: &Resources) -> Resources {
    combine(a, b, i64::max)
}

/// Element-wise minimum (absent counts as 0), like `resources.MinResources`.
pub(crate) fn min(a: &Resources, b: &Resources) -> Resources {
    combine(a, b, i64::min)
}

/// Element-wise maximum with zero: a negative amount (e.g. more daemons already running than
/// the node would need) becomes 0.
pub(crate) fn clamp_non_negative(r: &mut Resources) {
    r.cpu_millis = r.cpu_millis.max(0);
    r.memory = r.memory.max(0);
    r.ephemeral_storage = r.ephemeral_storage.max(0);
    r.pods = r.pods.max(0);
    r.extended.retain(|(_, v)| *v > 0);
}

fn combine(a: &Resources, b: &Resources, f: fn(i64, i64) -> i64) -> Resources {
    let mut out = Resources {
        cpu_millis: f(a.cpu_millis, b.cpu_millis),
        memory: f(a.memory, b.memory),
        ephemeral_storage: f(a.ephemeral_storage, b.ephemeral_storage),
        pods: f(a.pods, b.pods),
        extended: Vec::new(),
    };
    // The common case (no extended resources) needs no name merge.
    if a.extended.is_empty() && b.extended.is_empty() {
        return out;
    }
    let mut names: Vec<&str> = a
        .extended
        .iter()
        .chain(b.extended.iter())
        .map(|(n, _)| n.as_str())
        .collect();
    names.sort_unstable();
    names.dedup();
    for n in names {
        let v = f(extended(a, n), extended(b, n));
        if v != 0 {
            out.extended.push((n.to_string(), v));
        }
    }
    out
}

fn merge_extended(a: &mut Resources, b: &Resources, f: fn(i64, i64) -> i64) {
    for (name, v) in &b.extended {
        match a.extended.binary_search_by(|(n, _)| n.as_str().cmp(name)) {
            Ok(i) => a.extended[i].1 = f(a.extended[i].1, *v),
            Err(i) => a.extended.insert(i, (name.clone(), f(0, *v))),
        }
    }
    a.extended.retain(|(_, v)| *v != 0);
}

/// The amount of `name` in scheduler units, for the well-known names and extended resources.
pub(crate) fn get(r: &Resources, name: &str) -> i64 {
    match name {
        crate::resources::CPU => r.cpu_millis,
        crate::resources::MEMORY => r.memory,
        crate::resources::EPHEMERAL_STORAGE => r.ephemeral_storage,
        crate::resources::PODS => r.pods,
        other => extended(r, other),
    }
}

/// Every resource with a non-zero amount, in a stable order (cpu, memory, ephemeral-storage,
/// pods, then extended by name).
pub(crate) fn entries(r: &Resources) -> Vec<(&str, i64)> {
    let mut out = Vec::with_capacity(4 + r.extended.len());
    for (n, v) in [
        (crate::resources::CPU, r.cpu_millis),
        (crate::resources::MEMORY, r.memory),
        (crate::resources::EPHEMERAL_STORAGE, r.ephemeral_storage),
        (crate::resources::PODS, r.pods),
    ] {
        if v != 0 {
            out.push((n, v));
        }
    }
    out.extend(r.extended.iter().map(|(n, v)| (n.as_str(), *v)));
    out
}

/// A human-readable amount: cpu in cores (`64`, `1500m`), byte quantities with binary
/// suffixes when exact (`512Mi`), everything else as an integer.
pub(crate) fn format_amount(name: &str, v: i64) -> String {
    if name == crate::resources::CPU {
        return if v % 1000 == 0 {
            format!("{}", v / 1000)
        } else {
            format!("{v}m")
        };
    }
    if name == crate::resources::MEMORY || name == crate::resources::EPHEMERAL_STORAGE {
        for (suffix, unit) in [
            ("Ti", 1i64 << 40),
            ("Gi", 1 << 30),
            ("Mi", 1 << 20),
            ("Ki", 1 << 10),
        ] {
            if v != 0 && v % unit == 0 {
                return format!("{}{suffix}", v / unit);
            }
        }
    }
    v.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(cpu: i64, mem: i64, ext: &[(&str, i64)]) -> Resources {
        Resources {
            cpu_millis: cpu,
            memory: mem,
            extended: ext.iter().map(|(n, v)| (n.to_string(), *v)).collect(),
            ..Resources::default()
        }
    }

    #[test]
    fn fits_rejects_negative_available_and_missing_extended() {
        assert!(fits(&r(1000, 10, &[]), &r(1000, 10, &[])));
        assert!(!fits(&r(1001, 10, &[]), &r(1000, 10, &[])));
        assert!(!fits(&r(0, 0, &[]), &r(-1, 10, &[])));
        assert!(!fits(&r(0, 0, &[("nvidia.com/gpu", 1)]), &r(1000, 10, &[])));
        assert!(fits(
            &r(0, 0, &[("nvidia.com/gpu", 1)]),
            &r(0, 0, &[("nvidia.com/gpu", 2)])
        ));
    }

    #[test]
    fn arithmetic_keeps_extended_sorted_and_non_zero() {
        let mut a = r(1, 1, &[("b", 1)]);
        add_into(&mut a, &r(1, 1, &[("a", 2), ("b", 1)]));
        assert_eq!(a, r(2, 2, &[("a", 2), ("b", 2)]));
        sub_from(&mut a, &r(0, 0, &[("a", 2)]));
        assert_eq!(a, r(2, 2, &[("b", 2)]));
        assert_eq!(min(&r(1, 5, &[("x", 3)]), &r(2, 4, &[])), r(1, 4, &[]));
        assert_eq!(
            max(&r(1, 5, &[("x", 3)]), &r(2, 4, &[])),
            r(2, 5, &[("x", 3)])
        );
    }

    #[test]
    fn formats_amounts_for_people() {
        assert_eq!(format_amount("cpu", 64_000), "64");
        assert_eq!(format_amount("cpu", 1500), "1500m");
        assert_eq!(format_amount("memory", 512 << 20), "512Mi");
        assert_eq!(format_amount("memory", 1000), "1000");
        assert_eq!(format_amount("nvidia.com/gpu", 2), "2");
    }
}
