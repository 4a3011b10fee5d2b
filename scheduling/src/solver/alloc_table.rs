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
    /// For each of the four scalars, the options in ascending order of that amount.
    ascending: [Box<[u32]>; 4],
    /// For each name of `names`, the options with a positive amount of it, largest first.
    descending_extended: Vec<Box<[u32]>>,
    /// The options with a negative amount.
    negatives: Box<[u32]>,
    /// The bounds of every option: each new claim starts with all of them.
    all: Bounds,
}

/// Below one option in this many of the table, folding the options' amounts costs less
/// than marking them and scanning the sorted orders for the extremes.
const SCAN_MIN_SHARE: usize = 4;

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
        let extended: Vec<Box<[(u32, i64)]>> = allocs
            .iter()
            .map(|a| a.extended.iter().map(|(n, v)| (index(n), *v)).collect())
            .collect();
        let scalars: Vec<[i64; 4]> = allocs.iter().map(scalars).collect();
        let indices = || 0..allocs.len() as u32;
        let ascending = [0, 1, 2, 3].map(|k| {
            let mut order: Vec<u32> = indices().collect();
            order.sort_by_key(|&i| scalars[i as usize][k]);
            order.into_boxed_slice()
        });
        let descending_extended = (0..names.len() as u32)
            .map(|k| {
                let amount = |i: u32| {
                    extended[i as usize]
                        .iter()
                        .find(|(n, _)| *n == k)
                        .map_or(0, |(_, v)| *v)
                };
                let mut order: Vec<u32> = indices().filter(|&i| amount(i) > 0).collect();
                order.sort_by_key(|&i| std::cmp::Reverse(amount(i)));
                order.into_boxed_slice()
            })
            .collect();
        let negative: Vec<bool> = allocs.iter().map(Resources::any_negative).collect();
        let mut table = AllocTable {
            negatives: indices().filter(|&i| negative[i as usize]).collect(),
            scalars,
            negative,
            extended,
            names,
            ascending,
            descending_extended,
            all: Bounds::default(),
        };
        let mut fold = table.fold();
        for i in 0..allocs.len() {
            fold.add(&table, i);
        }
        table.all = fold.finish(&table);
        table
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
        // Comparing indices costs a fraction of folding the allocatables they name.
        if options.len() == self.scalars.len()
            && options.iter().enumerate().all(|(k, &i)| i as usize == k)
        {
            return self.all.clone();
        }
        if options.len() * SCAN_MIN_SHARE < self.scalars.len() {
            return self.bounds_by_fold(options);
        }
        self.bounds_by_scan(options)
            .unwrap_or_else(|| self.bounds_by_fold(options))
    }

    /// [`AllocTable::bounds`] by visiting each option.
    fn bounds_by_fold(&self, options: &[u32]) -> Bounds {
        let mut fold = self.fold();
        for &i in options {
            fold.add(self, i as usize);
        }
        fold.finish(self)
    }

    /// [`AllocTable::bounds`] by marking the options and reading each amount's extremes off
    /// the table's sorted orders: a claim's options are most of its template's, and the ones
    /// it lost are mostly the smallest, so each scan stops after a few steps, where folding
    /// would read every option's amounts. `None` when there are no options.
    fn bounds_by_scan(&self, options: &[u32]) -> Option<Bounds> {
        let mut member = vec![0u64; self.scalars.len().div_ceil(64)];
        for &i in options {
            member[i as usize / 64] |= 1 << (i % 64);
        }
        let has = |i: &u32| member[*i as usize / 64] >> (i % 64) & 1 == 1;
        let mut max = [0i64; 4];
        let mut min = [0i64; 4];
        for (k, order) in self.ascending.iter().enumerate() {
            let low = order.iter().find(|i| has(i))?;
            let high = order.iter().rev().find(|i| has(i))?;
            min[k] = self.scalars[*low as usize][k];
            max[k] = self.scalars[*high as usize][k].max(0);
        }
        let extended = self
            .descending_extended
            .iter()
            .enumerate()
            .filter_map(|(k, order)| {
                let i = *order.iter().find(|i| has(i))?;
                let (_, amount) = self.extended[i as usize]
                    .iter()
                    .find(|(n, _)| *n as usize == k)?;
                Some((self.names[k].clone(), *amount))
            })
            .collect();
        let [cpu_millis, memory, ephemeral_storage, pods] = max;
        Some(Bounds {
            max: Resources {
                cpu_millis,
                memory,
                ephemeral_storage,
                pods,
                extended,
            },
            floor: (!self.negatives.iter().any(has)).then_some(min),
        })
    }

    /// An empty fold: [`BoundsFold::finish`] right away gives the bounds of no option.
    fn fold(&self) -> BoundsFold {
        BoundsFold {
            max: [0; 4],
            min: [i64::MAX; 4],
            negative: false,
            any: false,
            ext: vec![0; self.names.len()],
        }
    }
}

/// [`AllocTable::bounds`] one option at a time.
#[derive(Debug)]
struct BoundsFold {
    max: [i64; 4],
    min: [i64; 4],
    negative: bool,
    any: bool,
    /// The largest amount of each of the table's extended resources.
    ext: Vec<i64>,
}

impl BoundsFold {
    /// Adds option `i` of `table` (the table this fold came from).
    fn add(&mut self, table: &AllocTable, i: usize) {
        let s = &table.scalars[i];
        for (k, &v) in s.iter().enumerate() {
            self.max[k] = self.max[k].max(v);
            self.min[k] = self.min[k].min(v);
        }
        self.negative |= table.negative[i];
        self.any = true;
        for &(k, v) in table.extended[i].iter() {
            self.ext[k as usize] = self.ext[k as usize].max(v);
        }
    }

    /// The bounds of the options added, exactly as [`AllocTable::bounds`] gives them.
    fn finish(self, table: &AllocTable) -> Bounds {
        let [cpu_millis, memory, ephemeral_storage, pods] = self.max;
        Bounds {
            max: Resources {
                cpu_millis,
                memory,
                ephemeral_storage,
                pods,
                extended: table
                    .names
                    .iter()
                    .zip(self.ext)
                    .filter(|(_, v)| *v != 0)
                    .map(|(n, v)| (n.clone(), v))
                    .collect(),
            },
            floor: (self.any && !self.negative).then_some(self.min),
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
            // Both ways of reading the bounds agree, whatever share of the table is asked.
            prop_assert_eq!(table.bounds_by_fold(&options), bounds.clone());
            if !options.is_empty() {
                prop_assert_eq!(table.bounds_by_scan(&options), Some(bounds.clone()));
            }
            // Without extended requests the floor is exact: it answers for every option.
            let every = !options.is_empty()
                && options.iter().all(|&i| arith::fits(&total, &allocs[i as usize]));
            prop_assert_eq!(bounds.all_fit(&total), every && total.extended.is_empty());
            // Every option, in order, is answered from the table's own copy.
            let all: Vec<u32> = (0..allocs.len() as u32).collect();
            let whole = table.bounds(&all);
            let everything = allocs.iter().fold(Resources::default(), |acc, a| arith::max(&acc, a));
            prop_assert_eq!(&whole.max, &everything);
            let every_option = allocs.iter().all(|a| arith::fits(&total, a));
            prop_assert_eq!(whole.all_fit(&total), every_option && total.extended.is_empty());
        }
    }
}
