//! The lower bound on the price of all the plan's new capacity (see [`super::bound`]), and
//! running it beside the re-packing.
//!
//! The bound only reports: nothing the re-packing decides depends on it. So its model is
//! built from the scheduler's state first (cheap, on the solving thread, which owns that
//! state), then solved on a second thread while the groups are re-packed, when the plan is
//! large enough for that to pay. Its budget is its own either way, so the bound and the
//! plan are the same whether it ran beside the packing or after it; only the wall time
//! differs.

use super::bound::{self, BoundClass, BoundColumn, BoundCount, BoundItem, Effort};
use super::budget::Budget;
use super::pack::{BinType, Class, Instance};
use super::{Dims, cover, pod_requests, tolerates};
use crate::labels::HOSTNAME;
use crate::model::{Pod, PodAffinityTerm};
use crate::requirements::Requirements;
use crate::solver::Scheduler;
use crate::solver::arith;
use crate::solver::nodeclaim::cheapest;
use crate::taints::Toleration;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};

/// Plans with fewer placed pods solve their bound on the solving thread: a thread costs
/// more than their bound takes.
const PARALLEL_MIN_PODS: usize = 200;

/// The bound's linear programs, built from the scheduler's state and owning all they need,
/// so they can be solved on another thread.
pub(super) struct Model {
    /// Resource dimensions.
    n: usize,
    /// Placed pods.
    pods: usize,
    /// Every (pool, instance type) some class may use, at the lowest price any of them
    /// could get it for.
    columns: Vec<BoundColumn>,
    /// The fluid LP's classes (merged into one when the model is too big).
    classes: Vec<BoundClass>,
    /// The nodes pods that may not share one force (see [`apart_terms`]).
    counts: Vec<BoundCount>,
    /// One item class per (class, request shape), for the configuration LP.
    items: Vec<BoundItem>,
    /// When every pod may go wherever the others may and the plan needs few nodes: the
    /// types and request shapes of the whole-node cover.
    whole: Option<(Vec<BinType>, Vec<Class>)>,
    /// How far the configuration LP goes.
    effort: Effort,
}

/// What there is to solve.
pub(super) enum Input {
    /// The bound is known without solving anything (no pod placed, or the budget ran out
    /// while building the model).
    Known(Option<f64>),
    /// A model to solve.
    Model(Model),
}

/// The bound and what solving it spent.
pub(super) struct Found {
    /// A valid lower bound on the price of the new capacity, when one was found.
    pub value: Option<f64>,
    /// Work units the solve spent.
    pub spent: u64,
    /// Whether the solve ran out of its units (or the deadline).
    pub exhausted: bool,
}

/// The required anti-affinity terms of `pod` that keep every pod of its namespace they
/// select, itself included, off its node: keyed on the hostname, selecting the pod's own
/// labels in its own namespace, with a selector that does not depend on the pod's labels
/// (no `matchLabelKeys` or `mismatchLabelKeys`). Pods of one namespace sharing such a term
/// pairwise exclude each other (the kube-scheduler checks anti-affinity both ways), so
/// every plan puts each on a node of its own.
pub(super) fn apart_terms(pod: &Pod) -> impl Iterator<Item = &PodAffinityTerm> {
    pod.affinity
        .pod_anti_affinity
        .required
        .iter()
        .filter(move |t| {
            t.topology_key == HOSTNAME
                && t.match_label_keys.is_empty()
                && t.mismatch_label_keys.is_empty()
                && t.namespace_selector.is_none()
                && term_selects(t, &pod.namespace, pod)
        })
}

/// Whether `term`, owned by a pod of namespace `owner_ns` and without a namespace
/// selector, selects pod `q`: `q` is in the term's namespaces (the owner's when it lists
/// none) and its labels match the term's selector (none matches no pod).
fn term_selects(term: &PodAffinityTerm, owner_ns: &str, q: &Pod) -> bool {
    let in_scope = if term.namespaces.is_empty() {
        q.namespace == owner_ns
    } else {
        term.namespaces.contains(&q.namespace)
    };
    in_scope
        && term
            .label_selector
            .as_ref()
            .is_some_and(|sel| sel.matches(&q.labels))
}

/// Distinct [`apart_terms`] terms past which [`modeled_apart`] checks none: each check
/// looks at every pending pod.
const MAX_APART_SETS: usize = 64;

/// For each pending pod, whether the only constraints on which pods may share its node are
/// [`apart_terms`] terms that the bound's node counts model exactly: every term it owns is
/// one, each selects no pending pod but those sharing the term, and it has no host ports,
/// spreads, pod affinity or preferred anti-affinity. The caller still checks that no other
/// pod's constraint counts it.
pub(super) fn modeled_apart(pods: &[Pod]) -> Vec<bool> {
    let mut sets: HashMap<(&str, &PodAffinityTerm), usize> = HashMap::new();
    for pod in pods {
        for term in apart_terms(pod) {
            *sets.entry((pod.namespace.as_str(), term)).or_default() += 1;
        }
    }
    if sets.len() > MAX_APART_SETS {
        return vec![false; pods.len()];
    }
    let exact: HashMap<(&str, &PodAffinityTerm), bool> = sets
        .iter()
        .map(|(&(ns, term), &members)| {
            let selected = pods.iter().filter(|q| term_selects(term, ns, q)).count();
            ((ns, term), selected == members)
        })
        .collect();
    pods.iter()
        .map(|pod| {
            let a = &pod.affinity;
            pod.host_ports.is_empty()
                && pod.device_claims.is_empty()
                && pod.topology_spread_constraints.is_empty()
                && a.pod_affinity.required.is_empty()
                && a.pod_affinity.preferred.is_empty()
                && a.pod_anti_affinity.preferred.is_empty()
                && !a.pod_anti_affinity.required.is_empty()
                && apart_terms(pod).count() == a.pod_anti_affinity.required.len()
                && apart_terms(pod).all(|t| exact[&(pod.namespace.as_str(), t)])
        })
        .collect()
}

/// Builds the bound's model over every pod the plan puts on new capacity. Pods are
/// classed by what limits where they may go in any plan: their node selector, volume
/// requirements and tolerations (preferences and alternative affinity terms can be
/// relaxed, so they are ignored — which only loosens the bound). Pods sharing an
/// [`apart_terms`] term need a node each: at least that many nodes of the types one of
/// them fits on.
///
/// With [`Effort::Proven`] the configuration LP's items also know which pods are kept apart
/// (a node holds one of each such set), which makes it the tightest bound here.
pub(super) fn model(s: &Scheduler<'_>, effort: Effort, budget: &mut Budget<'_>) -> Input {
    let placed: Vec<usize> = s
        .claims
        .iter()
        .flat_map(|c| c.pods.iter().copied())
        .collect();
    if placed.is_empty() {
        return Input::Known(Some(0.0));
    }
    let requests: Vec<_> = placed.iter().map(|&p| pod_requests(&s.pods[p])).collect();
    let dims = Dims::new(requests.iter());
    let n = dims.len();

    type Key<'p> = (Requirements, &'p [Toleration]);
    let mut class_of: HashMap<Key<'_>, usize> = HashMap::new();
    let mut keys: Vec<Key<'_>> = Vec::new();
    let mut shapes: Vec<Vec<Vec<i64>>> = Vec::new();
    let mut demand: Vec<Vec<f64>> = Vec::new();
    // Per set of pods kept apart: each member's class and request shape.
    type Apart<'p> = (&'p str, &'p PodAffinityTerm);
    let mut apart_of: HashMap<Apart<'_>, usize> = HashMap::new();
    let mut apart: Vec<Vec<(usize, Vec<i64>)>> = Vec::new();
    // Per placed pod: its class, request shape and the sets it is kept apart in.
    let mut placed_as: Vec<(usize, Vec<i64>, Vec<usize>)> = Vec::with_capacity(placed.len());
    for (idx, &p) in placed.iter().enumerate() {
        let pod = &s.pods[p];
        let mut r = Requirements::from_labels(pod.node_selector.iter());
        if !pod.volume_requirements.is_empty() {
            let Ok(v) = Requirements::from_node_selector(&pod.volume_requirements) else {
                return Input::Known(None);
            };
            r.add_all(&v);
        }
        let key = (r, pod.tolerations.as_slice());
        let k = *class_of.entry(key.clone()).or_insert_with(|| {
            keys.push(key);
            shapes.push(Vec::new());
            demand.push(vec![0.0; n]);
            keys.len() - 1
        });
        let v = dims.vector(&requests[idx]);
        for (d, &x) in demand[k].iter_mut().zip(&v) {
            *d += x as f64;
        }
        let mut sets = Vec::new();
        for term in apart_terms(pod) {
            let a = *apart_of
                .entry((pod.namespace.as_str(), term))
                .or_insert_with(|| {
                    apart.push(Vec::new());
                    apart.len() - 1
                });
            apart[a].push((k, v.clone()));
            sets.push(a);
        }
        placed_as.push((k, v.clone(), sets));
        shapes[k].push(v);
    }
    if !budget.spend((placed.len() * n) as u64) {
        return Input::Known(None);
    }
    let mut counted: Vec<Vec<(Vec<i64>, usize)>> = Vec::with_capacity(shapes.len());
    for sh in shapes.iter_mut() {
        sh.sort_unstable();
        let mut c: Vec<(Vec<i64>, usize)> = Vec::new();
        for v in sh.iter() {
            match c.last_mut() {
                Some((last, n)) if last == v => *n += 1,
                _ => c.push((v.clone(), 1)),
            }
        }
        counted.push(c);
        sh.dedup();
    }

    let mut column_of: HashMap<(usize, usize), usize> = HashMap::new();
    let mut columns: Vec<BoundColumn> = Vec::new();
    let mut classes: Vec<BoundClass> = Vec::new();
    for (k, (creqs, tolerations)) in keys.iter().enumerate() {
        let mut cols = Vec::new();
        for (ti, t) in s.templates.iter().enumerate() {
            if !tolerates(&t.pool.taints, tolerations) || t.reqs.compatible(creqs, true).is_err() {
                continue;
            }
            let mut merged = t.reqs.clone();
            merged.add_all(creqs);
            for (i, it) in t.its.iter().enumerate() {
                if !budget.spend((shapes[k].len() * n) as u64 + 4) {
                    return Input::Known(None);
                }
                let overhead = &t.groups[t.group_of[i]].overhead;
                if !arith::fits(overhead, &t.allocs[i])
                    || it.requirements.intersects(&merged).is_err()
                {
                    continue;
                }
                let Some(o) = cheapest(it, &merged) else {
                    continue;
                };
                let alloc = dims.vector(&t.allocs[i]);
                let over = dims.vector(overhead);
                let cap: Vec<i64> = alloc.iter().zip(&over).map(|(a, o)| a - o).collect();
                // A pod only uses a type it fits on by itself.
                if !shapes[k]
                    .iter()
                    .any(|sh| sh.iter().zip(&cap).all(|(r, c)| r <= c))
                {
                    continue;
                }
                let j = *column_of.entry((ti, i)).or_insert_with(|| {
                    columns.push(BoundColumn {
                        cap: cap.iter().map(|&c| c.max(0) as f64).collect(),
                        price: o.price,
                    });
                    columns.len() - 1
                });
                columns[j].price = columns[j].price.min(o.price);
                cols.push(j);
            }
        }
        classes.push(BoundClass {
            demand: demand[k].clone(),
            columns: cols,
        });
    }
    // The columns a pod of class `k` and request `shape` fits on by itself.
    let fitting = |k: usize, shape: &[i64]| -> Vec<usize> {
        classes[k]
            .columns
            .iter()
            .copied()
            .filter(|&j| {
                shape
                    .iter()
                    .zip(&columns[j].cap)
                    .all(|(&r, &cap)| r as f64 <= cap)
            })
            .collect()
    };
    // Pods stay whole: one item class per (class, set kept apart, request shape), on the
    // columns that shape fits by itself. A pod kept apart in several sets is an item of the
    // first: the configuration LP then keeps it from sharing a node with that set only,
    // a relaxation of the plan's constraints like the others.
    let mut item_counts: std::collections::BTreeMap<(usize, Option<usize>, &[i64]), usize> =
        std::collections::BTreeMap::new();
    for (k, shape, sets) in &placed_as {
        let set = sets
            .iter()
            .copied()
            .find(|&a| apart[a].len() > 1)
            .filter(|_| effort == Effort::Proven);
        *item_counts.entry((*k, set, shape.as_slice())).or_default() += 1;
    }
    let items: Vec<BoundItem> = item_counts
        .into_iter()
        .map(|((k, set, shape), count)| BoundItem {
            req: shape.iter().map(|&r| r as f64).collect(),
            count: count as f64,
            columns: fitting(k, shape),
            apart: set,
        })
        .collect();
    // A set of pods kept apart needs a node per pod, each of a type one of them fits on.
    // One pod alone forces nothing the resources do not. (A row per request shape, for the
    // members that fit only the types that shape fits, raised the benchmarks' bounds by
    // under 0.1 %.)
    let counts: Vec<BoundCount> = apart
        .iter()
        .filter(|members| members.len() > 1)
        .map(|members| {
            let mut kinds: Vec<(usize, &[i64])> = members
                .iter()
                .map(|(k, shape)| (*k, shape.as_slice()))
                .collect();
            kinds.sort_unstable();
            kinds.dedup();
            let mut used = vec![false; columns.len()];
            for &(k, shape) in &kinds {
                for j in fitting(k, shape) {
                    used[j] = true;
                }
            }
            BoundCount {
                nodes: members.len() as f64,
                columns: (0..used.len()).filter(|&j| used[j]).collect(),
            }
        })
        .collect();
    // When every pod may go wherever the others may, and the plan needs few nodes, the
    // cheapest whole-node cover of the total demand is a bound too, and with few nodes
    // the tightest: fractional nodes undercount by up to a node's price.
    let whole = (classes.len() == 1 && s.claims.len() <= cover::MAX_NODES).then(|| {
        let types = classes[0]
            .columns
            .iter()
            .map(|&j| BinType {
                cap: columns[j].cap.iter().map(|&c| c as i64).collect(),
                price: columns[j].price,
            })
            .collect();
        let shapes = counted[0]
            .iter()
            .map(|(shape, count)| Class {
                req: shape.clone(),
                count: u32::try_from(*count).unwrap_or(u32::MAX),
            })
            .collect();
        (types, shapes)
    });
    // Too big a model: one class that may use any column is still a relaxation.
    if classes.len() > 1 && bound::lp_cells(n, &classes, columns.len()) > bound::MAX_LP_CELLS {
        let mut all: Vec<usize> = classes.iter().flat_map(|c| c.columns.clone()).collect();
        all.sort_unstable();
        all.dedup();
        let mut total = vec![0.0; n];
        for c in &classes {
            for (t, d) in total.iter_mut().zip(&c.demand) {
                *t += d;
            }
        }
        classes = vec![BoundClass {
            demand: total,
            columns: all,
        }];
    }
    Input::Model(Model {
        n,
        pods: placed.len(),
        columns,
        classes,
        counts,
        items,
        whole,
        effort,
    })
}

/// Solves the model: the largest of the fluid LP, the configuration LP and the whole-node
/// cover that the budget allows.
fn solve(m: &Model, greedy: f64, budget: &mut Budget<'_>) -> Option<f64> {
    let fluid_lp = bound::lower_bound(m.n, &m.classes, &m.counts, &m.columns, budget);
    let fluid = fluid_lp.as_ref().map(|b| b.value);
    let whole = m.whole.as_ref().and_then(|(types, shapes)| {
        let zeros = vec![0.0; m.n];
        let values = vec![1.0; shapes.len()];
        let inst = Instance {
            types,
            classes: shapes,
            weights: &zeros,
            values: &values,
        };
        // The fluid prices hold for every column of the single class.
        let prices = fluid_lp
            .as_ref()
            .and_then(|b| b.prices.first())
            .map(Vec::as_slice);
        cover::cheapest_cover(&inst, prices, greedy, budget).map(|c| c * (1.0 - 1e-9))
    });
    // With a whole-node bound in hand the plan needs few nodes, where that bound is the
    // tighter one: the configuration LP would only spend the work the packing could use.
    let coupled = if whole.is_some() && m.effort == Effort::Budgeted {
        None
    } else {
        bound::coupled_bound(m.n, &m.items, &m.columns, m.effort, budget).map(|(b, _)| b)
    };
    [fluid, coupled, whole]
        .into_iter()
        .flatten()
        .reduce(f64::max)
}

/// Runs `work` on this thread and solves the bound with `units` of work, on a second
/// thread when the plan is large and the machine has a second core, after `work`
/// otherwise. Beside `work`, the bound stops early only when the caller's deadline has
/// passed by the time `work` is done.
pub(super) fn alongside<R>(
    input: Input,
    greedy: f64,
    units: u64,
    deadline: Option<&dyn Fn() -> bool>,
    work: impl FnOnce() -> R,
) -> (R, Found) {
    let model = match input {
        Input::Known(value) => {
            let found = Found {
                value,
                spent: 0,
                exhausted: false,
            };
            return (work(), found);
        }
        Input::Model(m) => m,
    };
    let parallel = model.pods >= PARALLEL_MIN_PODS
        && std::thread::available_parallelism().is_ok_and(|n| n.get() > 1);
    solve_beside(model, parallel, greedy, units, deadline, work)
}

/// [`alongside`] with the choice of thread made.
fn solve_beside<R>(
    model: Model,
    parallel: bool,
    greedy: f64,
    units: u64,
    deadline: Option<&dyn Fn() -> bool>,
    work: impl FnOnce() -> R,
) -> (R, Found) {
    let solve_with = |deadline: Option<&dyn Fn() -> bool>| {
        let mut budget = Budget::new(units, deadline);
        let value = solve(&model, greedy, &mut budget);
        Found {
            value,
            spent: budget.spent(),
            exhausted: budget.exhausted(),
        }
    };
    if !parallel {
        let r = work();
        return (r, solve_with(deadline));
    }
    let stop = AtomicBool::new(false);
    std::thread::scope(|scope| {
        let bound = scope.spawn(|| {
            let stopped = || stop.load(Ordering::Relaxed);
            solve_with(Some(&stopped))
        });
        let r = work();
        if deadline.is_some_and(|passed| passed()) {
            stop.store(true, Ordering::Relaxed);
        }
        // A panic in the bound goes on as it would have on this thread.
        let found = bound
            .join()
            .unwrap_or_else(|e| std::panic::resume_unwind(e));
        (r, found)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Three types over cpu and memory and two pod shapes on all of them: enough for the
    /// fluid and configuration LPs to have work to do.
    fn model() -> Model {
        let col = |cpu: f64, mem: f64, price: f64| BoundColumn {
            cap: vec![cpu, mem],
            price,
        };
        let item = |cpu: f64, mem: f64, count: f64| BoundItem {
            req: vec![cpu, mem],
            count,
            columns: vec![0, 1, 2],
            apart: None,
        };
        let items = vec![item(1500.0, 1.0, 7.0), item(300.0, 6.0, 11.0)];
        let demand = items.iter().fold(vec![0.0; 2], |d, i| {
            vec![d[0] + i.req[0] * i.count, d[1] + i.req[1] * i.count]
        });
        Model {
            n: 2,
            pods: 18,
            columns: vec![
                col(2000.0, 8.0, 0.1),
                col(4000.0, 16.0, 0.19),
                col(8000.0, 8.0, 0.3),
            ],
            classes: vec![BoundClass {
                demand,
                columns: vec![0, 1, 2],
            }],
            counts: vec![BoundCount {
                nodes: 3.0,
                columns: vec![0, 1, 2],
            }],
            items,
            whole: None,
            effort: Effort::Budgeted,
        }
    }

    #[test]
    fn the_bound_is_the_same_beside_the_work_and_after_it() {
        for units in [10, 1_000, 100_000, 10_000_000] {
            let ran = std::cell::Cell::new(false);
            let (_, after) = solve_beside(model(), false, 10.0, units, None, || ran.set(true));
            assert!(ran.get());
            let (r, beside) = solve_beside(model(), true, 10.0, units, None, || 42);
            assert_eq!(r, 42);
            assert_eq!(beside.value, after.value, "{units} units");
            assert_eq!(
                (beside.spent, beside.exhausted),
                (after.spent, after.exhausted),
                "{units} units"
            );
        }
        let (_, ample) = solve_beside(model(), true, 10.0, 10_000_000, None, || ());
        assert!(!ample.exhausted);
        assert!(ample.value.is_some_and(|v| v > 0.0));
    }
}
