//! Resource lists (cpu, memory, ephemeral-storage, pods and extended resources) with checked
//! arithmetic, in the integer units the kube-scheduler uses.

use crate::quantity::{Quantity, QuantityFormat};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// `cpu`.
pub const CPU: &str = "cpu";
/// `memory`.
pub const MEMORY: &str = "memory";
/// `ephemeral-storage`.
pub const EPHEMERAL_STORAGE: &str = "ephemeral-storage";
/// `pods`.
pub const PODS: &str = "pods";

/// A resource list in the kube-scheduler's units: cpu in millicores (`MilliValue`), every
/// other resource in whole units (`Value`, rounded up).
///
/// Extended resources (`nvidia.com/gpu`, `vpc.amazonaws.com/efa` …) are kept sorted by name
/// with no zero entries, so two equal lists compare equal. Serialises as a map of resource
/// name to quantity text, like a Kubernetes `ResourceList`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Resources {
    /// Millicores.
    pub cpu_millis: i64,
    /// Bytes.
    pub memory: i64,
    /// Bytes.
    pub ephemeral_storage: i64,
    /// Pod count.
    pub pods: i64,
    /// Extended resources, sorted by name, values non-zero.
    pub extended: Vec<(String, i64)>,
}

/// A resource list that cannot be represented.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ResourceError {
    /// A negative quantity where Kubernetes requires a non-negative one.
    #[error("resource {name:?}: negative quantity {quantity}")]
    Negative {
        /// Resource name.
        name: String,
        /// The quantity as written.
        quantity: String,
    },
    /// A resource name Kubernetes would reject.
    #[error("resource name {name:?}: {reason}")]
    InvalidName {
        /// Resource name.
        name: String,
        /// Why it is invalid.
        reason: String,
    },
}

impl Resources {
    /// Builds a list from named quantities (a `ResourceList`); entries of the same name are
    /// summed. Negative quantities are rejected.
    ///
    /// Names must be Kubernetes qualified names (`cpu`, `nvidia.com/gpu`). Quantities are summed
    /// exactly before conversion, so two `0.5` entries give 1, not 2. Conversion follows the
    /// kube-scheduler: cpu is `MilliValue`, everything else `Value` (both rounded up), saturating
    /// at the `i64` range. Zero extended entries are dropped.
    pub fn from_quantities<'a, I>(items: I) -> Result<Self, ResourceError>
    where
        I: IntoIterator<Item = (&'a str, &'a Quantity)>,
    {
        let mut sums: BTreeMap<&'a str, i128> = BTreeMap::new();
        for (name, quantity) in items {
            if let Some(reason) = qualified_name_error(name) {
                return Err(ResourceError::InvalidName {
                    name: name.to_owned(),
                    reason,
                });
            }
            if quantity.nanos() < 0 {
                return Err(ResourceError::Negative {
                    name: name.to_owned(),
                    quantity: quantity.to_string(),
                });
            }
            let sum = sums.entry(name).or_insert(0);
            *sum = sum.saturating_add(quantity.nanos());
        }
        let mut out = Resources::default();
        for (name, nanos) in sums {
            let quantity = Quantity::from_nanos(nanos, QuantityFormat::DecimalSI);
            let amount = if name == CPU {
                quantity.milli_value()
            } else {
                quantity.value()
            };
            out.set(name, amount);
        }
        Ok(out)
    }

    /// Shorthand for tests and tools: a list from `(name, quantity text)` pairs.
    ///
    /// # Panics
    /// Never on valid text; malformed text is returned as an error message.
    ///
    /// # Examples
    ///
    /// ```
    /// use karpenter_scheduling::Resources;
    ///
    /// let r = Resources::parse(&[("cpu", "250m"), ("memory", "1Gi"), ("nvidia.com/gpu", "1")])?;
    /// assert_eq!(r.cpu_millis, 250);
    /// assert_eq!(r.memory, 1 << 30);
    /// assert_eq!(r.get("nvidia.com/gpu"), 1);
    /// let node = Resources::parse(&[("cpu", "2"), ("memory", "8Gi"), ("nvidia.com/gpu", "1")])?;
    /// assert!(r.fits(&node));
    /// assert!(Resources::parse(&[("cpu", "lots")]).is_err());
    /// # Ok::<(), String>(())
    /// ```
    pub fn parse(items: &[(&str, &str)]) -> Result<Self, String> {
        let parsed = items
            .iter()
            .map(|(name, text)| {
                Quantity::parse(text)
                    .map(|q| (*name, q))
                    .map_err(|e| format!("resource {name:?}: {e}"))
            })
            .collect::<Result<Vec<_>, _>>()?;
        Self::from_quantities(parsed.iter().map(|(name, q)| (*name, q))).map_err(|e| e.to_string())
    }

    /// The amount of `name` in scheduler units (0 when absent).
    pub fn get(&self, name: &str) -> i64 {
        match name {
            CPU => self.cpu_millis,
            MEMORY => self.memory,
            EPHEMERAL_STORAGE => self.ephemeral_storage,
            PODS => self.pods,
            _ => self
                .extended
                .binary_search_by(|(k, _)| k.as_str().cmp(name))
                .map_or(0, |i| self.extended[i].1),
        }
    }

    /// Sets the amount of `name` in scheduler units (removing an extended entry set to 0).
    pub fn set(&mut self, name: &str, value: i64) {
        match name {
            CPU => self.cpu_millis = value,
            MEMORY => self.memory = value,
            EPHEMERAL_STORAGE => self.ephemeral_storage = value,
            PODS => self.pods = value,
            _ => match self
                .extended
                .binary_search_by(|(k, _)| k.as_str().cmp(name))
            {
                Ok(i) if value == 0 => {
                    self.extended.remove(i);
                }
                Ok(i) => self.extended[i].1 = value,
                Err(_) if value == 0 => {}
                Err(i) => self.extended.insert(i, (name.to_owned(), value)),
            },
        }
    }

    /// Every resource with a non-zero amount, in a stable order (cpu, memory,
    /// ephemeral-storage, pods, then extended by name).
    pub fn iter(&self) -> impl Iterator<Item = (&str, i64)> + '_ {
        let core: [(&str, i64); 4] = [
            (CPU, self.cpu_millis),
            (MEMORY, self.memory),
            (EPHEMERAL_STORAGE, self.ephemeral_storage),
            (PODS, self.pods),
        ];
        core.into_iter()
            .chain(self.extended.iter().map(|(name, v)| (name.as_str(), *v)))
            .filter(|(_, v)| *v != 0)
    }

    /// `self + other`, or `None` on overflow.
    pub fn checked_add(&self, other: &Self) -> Option<Self> {
        self.combine(other, i64::checked_add)
    }

    /// `self - other` (may go negative), or `None` on overflow.
    pub fn checked_sub(&self, other: &Self) -> Option<Self> {
        self.combine(other, i64::checked_sub)
    }

    /// Adds `other` in place, saturating at the `i64` range.
    pub fn add_assign(&mut self, other: &Self) {
        if let Some(sum) = self.combine(other, |a, b| Some(a.saturating_add(b))) {
            *self = sum;
        }
    }

    /// Subtracts `other` in place, saturating at the `i64` range (may go negative).
    pub fn sub_assign(&mut self, other: &Self) {
        if let Some(difference) = self.combine(other, |a, b| Some(a.saturating_sub(b))) {
            *self = difference;
        }
    }

    /// Element-wise maximum (an absent resource counts as 0).
    pub fn max(&self, other: &Self) -> Self {
        self.combine(other, |a, b| Some(a.max(b)))
            .unwrap_or_else(|| self.clone())
    }

    /// Whether every requested amount is at most the available amount (a resource absent from
    /// `available` counts as 0), as the kube-scheduler's NodeResourcesFit filter decides.
    ///
    /// Like that filter, only positive requests are checked: a request of 0 (or a negative
    /// one) fits even a node whose available amount is negative.
    pub fn fits(&self, available: &Self) -> bool {
        self.iter()
            .all(|(name, requested)| requested <= 0 || requested <= available.get(name))
    }

    /// The names of the resources for which `self` exceeds `available`, in `iter` order.
    ///
    /// Empty exactly when [`fits`](Self::fits) is true.
    pub fn exceeding<'a>(&'a self, available: &'a Self) -> Vec<&'a str> {
        self.iter()
            .filter(|(name, requested)| *requested > 0 && *requested > available.get(name))
            .map(|(name, _)| name)
            .collect()
    }

    /// Whether every amount is zero.
    pub fn is_zero(&self) -> bool {
        self.cpu_millis == 0
            && self.memory == 0
            && self.ephemeral_storage == 0
            && self.pods == 0
            && self.extended.is_empty()
    }

    /// Whether any amount is negative.
    pub fn any_negative(&self) -> bool {
        self.cpu_millis < 0
            || self.memory < 0
            || self.ephemeral_storage < 0
            || self.pods < 0
            || self.extended.iter().any(|(_, v)| *v < 0)
    }

    /// The list as Kubernetes quantities (cpu DecimalSI millis, memory and storage BinarySI,
    /// others DecimalSI), omitting zero entries.
    pub fn to_quantities(&self) -> BTreeMap<String, Quantity> {
        self.iter()
            .map(|(name, amount)| {
                let quantity = match name {
                    CPU => Quantity::from_milli(amount, QuantityFormat::DecimalSI),
                    MEMORY | EPHEMERAL_STORAGE => {
                        Quantity::from_value(amount, QuantityFormat::BinarySI)
                    }
                    _ => Quantity::from_value(amount, QuantityFormat::DecimalSI),
                };
                (name.to_owned(), quantity)
            })
            .collect()
    }

    /// Applies `op` to every resource (absent ones count as 0), keeping `extended` sorted and
    /// free of zeros; `None` as soon as `op` does.
    fn combine(&self, other: &Self, op: impl Fn(i64, i64) -> Option<i64>) -> Option<Self> {
        let (a, b) = (&self.extended, &other.extended);
        let mut extended = Vec::with_capacity(a.len().max(b.len()));
        let (mut i, mut j) = (0, 0);
        while i < a.len() || j < b.len() {
            // Both lists are sorted: take the smaller name, pairing it when both hold it.
            let order = match (a.get(i), b.get(j)) {
                (Some((x, _)), Some((y, _))) => x.cmp(y),
                (Some(_), None) => std::cmp::Ordering::Less,
                _ => std::cmp::Ordering::Greater,
            };
            let (name, value) = match order {
                std::cmp::Ordering::Less => {
                    i += 1;
                    (&a[i - 1].0, op(a[i - 1].1, 0)?)
                }
                std::cmp::Ordering::Greater => {
                    j += 1;
                    (&b[j - 1].0, op(0, b[j - 1].1)?)
                }
                std::cmp::Ordering::Equal => {
                    i += 1;
                    j += 1;
                    (&a[i - 1].0, op(a[i - 1].1, b[j - 1].1)?)
                }
            };
            if value != 0 {
                extended.push((name.clone(), value));
            }
        }
        Some(Self {
            cpu_millis: op(self.cpu_millis, other.cpu_millis)?,
            memory: op(self.memory, other.memory)?,
            ephemeral_storage: op(self.ephemeral_storage, other.ephemeral_storage)?,
            pods: op(self.pods, other.pods)?,
            extended,
        })
    }
}

/// Why `name` is not a Kubernetes qualified name (`[prefix/]name`, as `IsQualifiedName`
/// checks resource names, label keys and taint keys), or `None` when it is one.
pub(crate) fn qualified_name_error(name: &str) -> Option<String> {
    let (prefix, local) = match name.split_once('/') {
        Some((prefix, local)) => (Some(prefix), local),
        None => (None, name),
    };
    if let Some(prefix) = prefix {
        if prefix.is_empty() {
            return Some("prefix part must be non-empty".to_owned());
        }
        if let Some(reason) = dns_subdomain_error(prefix) {
            return Some(format!("prefix part {reason}"));
        }
    }
    if local.is_empty() {
        return Some("name part must be non-empty".to_owned());
    }
    if local.len() > 63 {
        return Some("name part must be no more than 63 characters".to_owned());
    }
    let bytes = local.as_bytes();
    let inner_ok = bytes
        .iter()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'));
    if !inner_ok
        || !bytes[0].is_ascii_alphanumeric()
        || !bytes[bytes.len() - 1].is_ascii_alphanumeric()
    {
        return Some(
            "name part must consist of alphanumeric characters, '-', '_' or '.', and must start \
             and end with an alphanumeric character"
                .to_owned(),
        );
    }
    None
}

/// Why `text` is not an RFC 1123 DNS subdomain, or `None` when it is one.
fn dns_subdomain_error(text: &str) -> Option<String> {
    if text.len() > 253 {
        return Some("must be no more than 253 characters".to_owned());
    }
    let label_ok = |label: &str| {
        let b = label.as_bytes();
        !b.is_empty()
            && b.iter()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
            && b[0] != b'-'
            && b[b.len() - 1] != b'-'
    };
    if text.split('.').all(label_ok) {
        None
    } else {
        Some(
            "must be a lowercase RFC 1123 subdomain: lowercase alphanumeric characters, '-' or \
             '.', starting and ending with an alphanumeric character"
                .to_owned(),
        )
    }
}

impl Serialize for Resources {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.to_quantities().serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for Resources {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let map = BTreeMap::<String, Quantity>::deserialize(deserializer)?;
        Resources::from_quantities(map.iter().map(|(k, v)| (k.as_str(), v)))
            .map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn r(items: &[(&str, &str)]) -> Resources {
        Resources::parse(items).unwrap_or_else(|e| panic!("{items:?}: {e}"))
    }

    #[test]
    fn parse_uses_scheduler_units() {
        let got = r(&[
            ("cpu", "500m"),
            ("memory", "1Gi"),
            ("ephemeral-storage", "1.5Ki"),
            ("pods", "110"),
            ("nvidia.com/gpu", "2"),
            ("hugepages-2Mi", "0.1"),
        ]);
        assert_eq!(got.cpu_millis, 500);
        assert_eq!(got.memory, 1 << 30);
        assert_eq!(got.ephemeral_storage, 1536);
        assert_eq!(got.pods, 110);
        // Value() rounds up.
        assert_eq!(
            got.extended,
            vec![
                ("hugepages-2Mi".to_owned(), 1),
                ("nvidia.com/gpu".to_owned(), 2)
            ]
        );
        // MilliValue() rounds up too.
        assert_eq!(r(&[("cpu", "0.1m")]).cpu_millis, 1);
        assert_eq!(r(&[("memory", "100m")]).memory, 1);
    }

    #[test]
    fn duplicates_are_summed_exactly_before_rounding() {
        assert_eq!(r(&[("memory", "0.5"), ("memory", "0.5")]).memory, 1);
        assert_eq!(r(&[("cpu", "0.5m"), ("cpu", "0.5m")]).cpu_millis, 1);
        assert_eq!(
            r(&[("example.com/a", "1"), ("example.com/a", "2")]).get("example.com/a"),
            3
        );
    }

    #[test]
    fn zero_extended_entries_are_dropped() {
        let got = r(&[("example.com/zero", "0"), ("cpu", "0")]);
        assert!(got.extended.is_empty());
        assert!(got.is_zero());
        assert_eq!(got, Resources::default());
    }

    #[test]
    fn rejects_negative_and_bad_names() {
        let err = Resources::parse(&[("cpu", "-1")]).unwrap_err();
        assert!(err.contains("\"cpu\"") && err.contains("negative"), "{err}");
        let neg = Quantity::parse("-1Gi").unwrap();
        assert_eq!(
            Resources::from_quantities([("memory", &neg)]),
            Err(ResourceError::Negative {
                name: "memory".into(),
                quantity: "-1Gi".into()
            })
        );
        let err = Resources::parse(&[("cpu", "1x")]).unwrap_err();
        assert!(err.contains("\"1x\""), "{err}");
        let one = Quantity::parse("1").unwrap();
        for bad in [
            "",
            "-gpu",
            "gpu-",
            "a b",
            "/gpu",
            "nvidia.com/",
            "Nvidia.com/gpu",
            "a/b/c",
            "nvidia..com/gpu",
            "-x.com/gpu",
            &"x".repeat(64),
            &format!("{}/gpu", "a".repeat(254)),
        ] {
            match Resources::from_quantities([(bad, &one)]) {
                Err(ResourceError::InvalidName { name, .. }) => assert_eq!(name, bad),
                other => panic!("{bad:?}: {other:?}"),
            }
        }
        for good in [
            "cpu",
            "nvidia.com/gpu",
            "vpc.amazonaws.com/efa",
            "hugepages-1Gi",
            "a",
            "A_b.C-9",
            &"x".repeat(63),
            "example.com/A.b_c",
        ] {
            assert!(Resources::from_quantities([(good, &one)]).is_ok(), "{good}");
        }
    }

    #[test]
    fn get_set_keep_extended_sorted_without_zeros() {
        let mut res = Resources::default();
        res.set("z.com/b", 2);
        res.set("a.com/a", 1);
        res.set("m.com/m", 3);
        res.set("cpu", 7);
        assert_eq!(
            res.extended
                .iter()
                .map(|(k, _)| k.as_str())
                .collect::<Vec<_>>(),
            ["a.com/a", "m.com/m", "z.com/b"]
        );
        assert_eq!(res.get("m.com/m"), 3);
        assert_eq!(res.get("missing.com/x"), 0);
        assert_eq!(res.get("cpu"), 7);
        res.set("m.com/m", 0);
        res.set("absent.com/x", 0);
        assert_eq!(res.extended.len(), 2);
        res.set("a.com/a", 5);
        assert_eq!(res.get("a.com/a"), 5);
    }

    #[test]
    fn iter_yields_non_zero_in_stable_order() {
        let res = r(&[
            ("nvidia.com/gpu", "1"),
            ("pods", "3"),
            ("cpu", "1"),
            ("aws.amazon.com/neuron", "2"),
        ]);
        assert_eq!(
            res.iter().collect::<Vec<_>>(),
            [
                ("cpu", 1000),
                ("pods", 3),
                ("aws.amazon.com/neuron", 2),
                ("nvidia.com/gpu", 1)
            ]
        );
        assert_eq!(Resources::default().iter().count(), 0);
    }

    #[test]
    fn arithmetic() {
        let a = r(&[("cpu", "1"), ("memory", "1Gi"), ("a.com/x", "2")]);
        let b = r(&[("cpu", "500m"), ("b.com/y", "1"), ("a.com/x", "2")]);
        let sum = a.checked_add(&b).unwrap();
        assert_eq!(sum.cpu_millis, 1500);
        assert_eq!(sum.get("a.com/x"), 4);
        assert_eq!(sum.get("b.com/y"), 1);
        let diff = a.checked_sub(&b).unwrap();
        assert_eq!(diff.cpu_millis, 500);
        // Equal amounts cancel and the entry disappears.
        assert_eq!(diff.extended, vec![("b.com/y".to_owned(), -1)]);
        assert!(diff.any_negative());
        let max = a.max(&b);
        assert_eq!(max.cpu_millis, 1000);
        assert_eq!(max.memory, 1 << 30);
        assert_eq!(max.get("b.com/y"), 1);
        // max against an absent entry keeps only non-negative values.
        assert_eq!(diff.max(&Resources::default()).get("b.com/y"), 0);

        let big = Resources {
            cpu_millis: i64::MAX,
            ..Default::default()
        };
        assert_eq!(big.checked_add(&big), None);
        let mut sat = big.clone();
        sat.add_assign(&big);
        assert_eq!(sat.cpu_millis, i64::MAX);
        let low = Resources {
            memory: i64::MIN,
            ..Default::default()
        };
        assert_eq!(low.checked_sub(&r(&[("memory", "1")])), None);
        let mut sat = low.clone();
        sat.sub_assign(&r(&[("memory", "1")]));
        assert_eq!(sat.memory, i64::MIN);
        let ext = Resources {
            extended: vec![("a.com/x".into(), i64::MAX)],
            ..Default::default()
        };
        assert_eq!(ext.checked_add(&ext), None);
    }

    #[test]
    fn fits_edge_cases() {
        let node = r(&[
            ("cpu", "2"),
            ("memory", "4Gi"),
            ("pods", "10"),
            ("nvidia.com/gpu", "1"),
        ]);
        // (request, fits, exceeding)
        type Case<'a> = (&'a [(&'a str, &'a str)], bool, &'a [&'a str]);
        let table: &[Case] = &[
            (&[], true, &[]),
            (&[("cpu", "2")], true, &[]),
            (&[("cpu", "2001m")], false, &["cpu"]),
            (&[("memory", "4Gi"), ("cpu", "1")], true, &[]),
            (
                &[("memory", "4097Mi"), ("cpu", "3")],
                false,
                &["cpu", "memory"],
            ),
            (&[("nvidia.com/gpu", "1")], true, &[]),
            (&[("nvidia.com/gpu", "2")], false, &["nvidia.com/gpu"]),
            // Missing on the node means 0 available.
            (&[("example.com/fpga", "1")], false, &["example.com/fpga"]),
            (&[("ephemeral-storage", "1")], false, &["ephemeral-storage"]),
            // A zero request always fits.
            (
                &[("example.com/fpga", "0"), ("ephemeral-storage", "0")],
                true,
                &[],
            ),
        ];
        for (request, fits, exceeding) in table {
            let req = r(request);
            assert_eq!(req.fits(&node), *fits, "{request:?}");
            assert_eq!(req.exceeding(&node), *exceeding, "{request:?}");
        }
        // Even on an overcommitted node a zero request fits, but nothing positive does.
        let overcommitted = Resources {
            cpu_millis: -100,
            ..Default::default()
        };
        assert!(Resources::default().fits(&overcommitted));
        assert!(!r(&[("cpu", "1m")]).fits(&overcommitted));
    }

    #[test]
    fn to_quantities_formats() {
        let res = r(&[
            ("cpu", "1.5"),
            ("memory", "1536Mi"),
            ("ephemeral-storage", "20Gi"),
            ("pods", "110"),
            ("nvidia.com/gpu", "4"),
            ("example.com/zero", "0"),
        ]);
        let text: BTreeMap<String, String> = res
            .to_quantities()
            .into_iter()
            .map(|(k, v)| (k, v.to_string()))
            .collect();
        let expect: BTreeMap<String, String> = [
            ("cpu", "1500m"),
            ("memory", "1536Mi"),
            ("ephemeral-storage", "20Gi"),
            ("pods", "110"),
            ("nvidia.com/gpu", "4"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
        assert_eq!(text, expect);
    }

    #[test]
    fn serde_round_trip() {
        let res = r(&[
            ("cpu", "250m"),
            ("memory", "512Mi"),
            ("nvidia.com/gpu", "1"),
        ]);
        let json = serde_json::to_string(&res).unwrap();
        assert_eq!(
            json,
            r#"{"cpu":"250m","memory":"512Mi","nvidia.com/gpu":"1"}"#
        );
        assert_eq!(serde_json::from_str::<Resources>(&json).unwrap(), res);
        let from_numbers: Resources = serde_json::from_str(r#"{"cpu":0.5,"pods":3}"#).unwrap();
        assert_eq!(from_numbers, r(&[("cpu", "500m"), ("pods", "3")]));
        let err = serde_json::from_str::<Resources>(r#"{"cpu":"-1"}"#).unwrap_err();
        assert!(err.to_string().contains("negative"), "{err}");
        assert!(serde_json::from_str::<Resources>(r#"{"bad name":"1"}"#).is_err());
    }

    fn arb_resources() -> impl Strategy<Value = Resources> {
        let names = prop::sample::select(vec!["a.com/x", "b.com/y", "nvidia.com/gpu", "z"]);
        (
            -1_000_000i64..1_000_000,
            -(1i64 << 40)..(1i64 << 40),
            0i64..(1i64 << 40),
            0i64..250,
            prop::collection::vec((names, -8i64..8), 0..4),
        )
            .prop_map(|(cpu, mem, eph, pods, ext)| {
                let mut res = Resources {
                    cpu_millis: cpu,
                    memory: mem,
                    ephemeral_storage: eph,
                    pods,
                    extended: Vec::new(),
                };
                for (name, v) in ext {
                    res.set(name, v);
                }
                res
            })
    }

    fn well_formed(res: &Resources) -> bool {
        res.extended.windows(2).all(|w| w[0].0 < w[1].0)
            && res.extended.iter().all(|(_, v)| *v != 0)
    }

    proptest! {
        #[test]
        fn add_sub_round_trip(a in arb_resources(), b in arb_resources()) {
            let sum = a.checked_add(&b).unwrap();
            prop_assert!(well_formed(&sum));
            prop_assert_eq!(sum.checked_sub(&b).unwrap(), a.clone());
            prop_assert_eq!(&sum, &b.checked_add(&a).unwrap());
            let mut in_place = a.clone();
            in_place.add_assign(&b);
            prop_assert_eq!(&in_place, &sum);
            in_place.sub_assign(&b);
            prop_assert_eq!(&in_place, &a);
        }

        #[test]
        fn max_is_an_upper_bound(a in arb_resources(), b in arb_resources()) {
            let m = a.max(&b);
            prop_assert!(well_formed(&m));
            for name in ["cpu", "memory", "ephemeral-storage", "pods", "a.com/x", "b.com/y", "nvidia.com/gpu", "z"] {
                // `get` reports an absent resource as 0, which is what `max` compares with.
                prop_assert_eq!(m.get(name), a.get(name).max(b.get(name)));
            }
        }

        #[test]
        fn fits_matches_exceeding_and_sums(a in arb_resources(), b in arb_resources()) {
            prop_assert_eq!(a.fits(&b), a.exceeding(&b).is_empty());
            if !a.any_negative() && !b.any_negative() {
                // Anything fits in itself plus a non-negative extra.
                prop_assert!(a.fits(&a.checked_add(&b).unwrap()));
            }
        }

        #[test]
        fn quantities_round_trip(a in arb_resources()) {
            if !a.any_negative() {
                let q = a.to_quantities();
                let back = Resources::from_quantities(q.iter().map(|(k, v)| (k.as_str(), v))).unwrap();
                prop_assert_eq!(&back, &a);
                let json = serde_json::to_string(&a).unwrap();
                prop_assert_eq!(serde_json::from_str::<Resources>(&json).unwrap(), a);
            }
        }
    }
}
