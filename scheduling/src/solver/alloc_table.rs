//! A template's allocatables packed for the two scans that run over every option of a claim:
//! the fit check of [`crate::solver::nodeclaim::Claim::filter`] and the bounds of a claim's
//! options (their element-wise maximum, and the minimum that lets the filter skip the fit
//! check when the claim's pods fit even its smallest option).
//!
//! Both used to read each option's [`Resources`], whose extended resources are a vector of
//! named amounts: the maximum merged them by name (a string comparison per entry per option,
//! a third of the greedy pass on the diverse mix). Here the names are numbered once per
//! template, so the scans compare integers only.

use crate::resources::Resources;
use crate::solver::arith::scalars;

/// The allocatables of a template's instance types, by the same index.
#[derive(Debug, Clone)]
pub(crate) struct AllocTable {
    /// cpu (millis), memory, ephemeral storage and pods of each option.
    scalars: Vec<[i64; 4]>,
    /// Whether an option's allocatable has a negative amount: such an option fits nothing,
    /// as [`crate::solver::arith::fits`] says.
    negative: Vec<bool>,
    /// Each option's extended resources as (index into `names`, amount).
    extended: Vec<Box<[(u32, i64)]>>,
    /// Every extended resource name of any option, sorted.
    names: Vec<String>,
}

impl AllocTable {
    /// Packs `allocs`.
    pub(crate) fn new(allocs: &[Resources]) -> Self {
        let mut names: Vec<String> = allocs
            .iter()
            .flat_map(|a| a.extended.iter().map(|(n, _)| n.clone()))
            .collect();
        names.sort_unstable();
        names.dedup();
        let index = |name: &str| {
            names
                .binary_search_by(|n| n.as_str().cmp(name))
                .expect("every name was collected") as u32
        };
        let extended = allocs
            .iter()
            .map(|a| a.extended.iter().map(|(n, v)| (index(n), *v)).collect())
            .collect();
        AllocTable {
            scalars: allocs.iter().map(scalars).collect(),
            negative: allocs.iter().map(Resources::any_negative).collect(),
            extended,
            names,
        }
    }

    /// Exactly [`crate::solver::arith::fits`]`(total, allocs[option])`.
    #[inline]
    pub(crate) fn fits(&self, total: &Resources, option: usize) -> bool {
        if self.negative[option] {
            return false;
        }
        let a = &self.scalars[option];
        if total.cpu_millis > a[0]
            || total.memory > a[1]
            || total.ephemeral_storage > a[2]
            || total.pods > a[3]
        {
            return false;
        }
        total.extended.is_empty() || self.fits_extended(total, option)
    }

    #[cold]
    fn fits_extended(&self, total: &Resources, option: usize) -> bool {
        total.extended.iter().all(|(name, v)| {
            let have = self
                .names
                .binary_search_by(|n| n.as_str().cmp(name))
                .ok()
                .and_then(|k| {
                    self.extended[option]
                        .iter()
                        .find(|(i, _)| *i as usize == k)
                        .map(|(_, v)| *v)
                })
                .unwrap_or(0);
            *v <= have
        })
    }

    /// The bounds of `allocs[options]`.
    pub(crate) fn bounds(&self, options: &[u32]) -> Bounds {
        let mut max = [0i64; 4];
        let mut min = [i64::MAX; 4];
        let mut negative = false;
        let mut ext = vec![0i64; self.names.len()];
        for &i in options {
            let i = i as usize;
            let s = &self.scalars[i];
            for k in 0..4 {
                max[k] = max[k].max(s[k]);
                min[k] = min[k].min(s[k]);
            }
            negative |= self.negative[i];
            for &(k, v) in self.extended[i].iter() {
                ext[k as usize] = ext[k as usize].max(v);
            }
        }
        Bounds {
            max: Resources {
                cpu_millis: max[0],
                memory: max[1],
                ephemeral_storage: max[2],
                pods: max[3],
                extended: self
                    .names
                    .iter()
                    .zip(ext)
                    .filter(|(_, v)| *v != 0)
                    .map(|(n, v)| (n.clone(), v))
                    .collect(),
            },
            floor: (!options.is_empty() && !negative).then_some(min),
        }
    }
}

/// What a claim keeps of its options' allocatables so that it need not scan them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Bounds {
    /// Exactly the fold of [`crate::solver::arith::max`] over the options' allocatables from
    /// zero: the element-wise largest, absent and negative amounts counting as zero, extended
    /// resources sorted and non-zero.
    pub max: Resources,
    /// The element-wise smallest cpu, memory, ephemeral storage and pods of the options, or
    /// `None` when there are none or one has a negative amount.
    floor: Option<[i64; 4]>,
}

impl Bounds {
    /// Whether `total` fits every option for certain, i.e. `arith::fits(total, a)` for each
    /// option's allocatable `a`. `false` says nothing: the options must then be checked one
    /// by one.
    pub(crate) fn all_fit(&self, total: &Resources) -> bool {
        self.floor.is_some_and(|m| {
            total.extended.is_empty()
                && total.cpu_millis <= m[0]
                && total.memory <= m[1]
                && total.ephemeral_storage <= m[2]
                && total.pods <= m[3]
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::solver::arith;
    use proptest::prelude::*;

    fn resources() -> impl Strategy<Value = Resources> {
        let amount = -2i64..6;
        let names = prop::sample::subsequence(vec!["a/x", "b/y", "c/z"], 0..=3);
        (
            amount.clone(),
            amount.clone(),
            amount.clone(),
            amount.clone(),
            names,
            prop::collection::vec(-2i64..6, 3),
        )
            .prop_map(|(cpu, mem, eph, pods, names, values)| Resources {
                cpu_millis: cpu,
                memory: mem,
                ephemeral_storage: eph,
                pods,
                extended: names
                    .into_iter()
                    .zip(values)
                    .filter(|(_, v)| *v != 0)
                    .map(|(n, v)| (n.to_string(), v))
                    .collect(),
            })
    }

    proptest! {
        #[test]
        fn the_table_answers_as_the_resources_do(
            allocs in prop::collection::vec(resources(), 1..8),
            total in resources(),
            picks in prop::collection::vec(any::<prop::sample::Index>(), 0..10),
        ) {
            let table = AllocTable::new(&allocs);
            for (i, a) in allocs.iter().enumerate() {
                prop_assert_eq!(table.fits(&total, i), arith::fits(&total, a), "option {}", i);
            }
            let options: Vec<u32> = picks.iter().map(|p| p.index(allocs.len()) as u32).collect();
            let expected = options
                .iter()
                .fold(Resources::default(), |acc, &i| arith::max(&acc, &allocs[i as usize]));
            let bounds = table.bounds(&options);
            prop_assert_eq!(&bounds.max, &expected);
            // Without extended requests the floor is exact: it answers for every option.
            let every = !options.is_empty()
                && options.iter().all(|&i| arith::fits(&total, &allocs[i as usize]));
            prop_assert_eq!(bounds.all_fit(&total), every && total.extended.is_empty());
        }
    }
}
