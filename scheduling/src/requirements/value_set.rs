//! The value set of one requirement: a sorted vector of distinct strings.
//!
//! Most requirements hold one to three values (an instance type's name, its architecture,
//! its zones), and the embedded catalogue alone holds some 27,000 of them. A `BTreeSet`
//! allocates a whole node (about 300 bytes) for each, however small; a sorted vector holds
//! exactly its values, clones with one allocation, and answers membership by binary search.
//! The catalogue's resident memory is what every `karpenter plan` pays for in page faults
//! before it reads a pod.

use serde::{Deserialize, Deserializer, Serialize};

/// Distinct strings in ascending order (the order a `BTreeSet<String>` iterates in, so
/// equality, hashing, serialisation and display are what they were with one).
#[derive(Clone, Default, PartialEq, Eq, Hash, Serialize)]
#[serde(transparent)]
pub(super) struct ValueSet(Vec<String>);

/// Shown as a set (`{"a", "b"}`), as the `BTreeSet` it replaced was.
impl std::fmt::Debug for ValueSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_set().entries(&self.0).finish()
    }
}

impl ValueSet {
    /// The empty set.
    pub(super) const fn new() -> Self {
        Self(Vec::new())
    }

    /// The set of one value.
    pub(super) fn one(value: String) -> Self {
        Self(vec![value])
    }

    /// Whether `value` is in the set.
    pub(super) fn contains(&self, value: &str) -> bool {
        self.0.binary_search_by(|v| v.as_str().cmp(value)).is_ok()
    }

    /// How many values the set holds.
    pub(super) fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether the set holds no value.
    pub(super) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The values in ascending order.
    pub(super) fn iter(&self) -> std::slice::Iter<'_, String> {
        self.0.iter()
    }

    /// The values of either set, ascending, each once.
    pub(super) fn union<'a>(&'a self, other: &'a Self) -> impl Iterator<Item = &'a String> {
        Union {
            a: self.0.as_slice(),
            b: other.0.as_slice(),
        }
    }

    /// The values of `self` not in `other`, ascending.
    pub(super) fn difference<'a>(&'a self, other: &'a Self) -> impl Iterator<Item = &'a String> {
        self.0.iter().filter(move |v| !other.contains(v))
    }

    /// The values in both sets, ascending.
    pub(super) fn intersection<'a>(&'a self, other: &'a Self) -> impl Iterator<Item = &'a String> {
        self.0.iter().filter(move |v| other.contains(v))
    }
}

impl FromIterator<String> for ValueSet {
    fn from_iter<I: IntoIterator<Item = String>>(iter: I) -> Self {
        let mut values: Vec<String> = iter.into_iter().collect();
        // Already-sorted input (every set operation above yields one) is checked in one pass.
        if !values.is_sorted_by(|a, b| a < b) {
            values.sort_unstable();
            values.dedup();
        }
        values.shrink_to_fit();
        Self(values)
    }
}

impl<'de> Deserialize<'de> for ValueSet {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Vec::<String>::deserialize(deserializer).map(Self::from_iter)
    }
}

/// Merges two ascending slices of distinct values into one ascending sequence without
/// repeats.
struct Union<'a> {
    a: &'a [String],
    b: &'a [String],
}

impl<'a> Iterator for Union<'a> {
    type Item = &'a String;

    fn next(&mut self) -> Option<&'a String> {
        match (self.a.split_first(), self.b.split_first()) {
            (Some((x, ra)), Some((y, rb))) => match x.cmp(y) {
                std::cmp::Ordering::Less => {
                    self.a = ra;
                    Some(x)
                }
                std::cmp::Ordering::Greater => {
                    self.b = rb;
                    Some(y)
                }
                std::cmp::Ordering::Equal => {
                    self.a = ra;
                    self.b = rb;
                    Some(x)
                }
            },
            (Some((x, ra)), None) => {
                self.a = ra;
                Some(x)
            }
            (None, Some((y, rb))) => {
                self.b = rb;
                Some(y)
            }
            (None, None) => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeSet;

    fn set(values: &[&str]) -> ValueSet {
        values.iter().map(|v| (*v).to_owned()).collect()
    }

    #[test]
    fn collecting_sorts_and_drops_repeats() {
        assert_eq!(set(&["b", "a", "b", "c", "a"]), set(&["a", "b", "c"]));
        let json = serde_json::to_string(&set(&["z", "a"])).unwrap();
        assert_eq!(json, r#"["a","z"]"#);
        let back: ValueSet = serde_json::from_str(r#"["q","b","q"]"#).unwrap();
        assert_eq!(back, set(&["b", "q"]));
        let btree: BTreeSet<&str> = ["q", "b"].into();
        assert_eq!(format!("{back:?}"), format!("{btree:?}"));
    }

    proptest! {
        /// Every operation agrees with `BTreeSet`'s, element for element and in order.
        #[test]
        fn operations_match_btreeset(
            a in proptest::collection::vec("[a-e]{0,2}", 0..8),
            b in proptest::collection::vec("[a-e]{0,2}", 0..8),
            probe in "[a-e]{0,2}",
        ) {
            let (sa, sb): (BTreeSet<String>, BTreeSet<String>) =
                (a.iter().cloned().collect(), b.iter().cloned().collect());
            let (va, vb): (ValueSet, ValueSet) =
                (a.iter().cloned().collect(), b.iter().cloned().collect());
            prop_assert_eq!(va.iter().collect::<Vec<_>>(), sa.iter().collect::<Vec<_>>());
            prop_assert_eq!(va.len(), sa.len());
            prop_assert_eq!(va.is_empty(), sa.is_empty());
            prop_assert_eq!(va.contains(&probe), sa.contains(&probe));
            prop_assert_eq!(
                va.union(&vb).collect::<Vec<_>>(),
                sa.union(&sb).collect::<Vec<_>>()
            );
            prop_assert_eq!(
                va.intersection(&vb).collect::<Vec<_>>(),
                sa.intersection(&sb).collect::<Vec<_>>()
            );
            prop_assert_eq!(
                va.difference(&vb).collect::<Vec<_>>(),
                sa.difference(&sb).collect::<Vec<_>>()
            );
        }
    }
}
