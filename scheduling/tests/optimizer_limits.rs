//! NodePool limits that bind only on paper: Karpenter counts every new claim at its largest
//! option (`subtractMax`), so a pool whose pods need far less than its limit can still run
//! out. The optimiser places those pods, narrowing every claim's options until the largest
//! ones fit the limit again, so launching any option of every claim stays within it.

use karpenter_scheduling::labels::HOSTNAME;
use karpenter_scheduling::model::{InstanceType, NodePool, Pod};
use karpenter_scheduling::{Plan, Quantity, Snapshot, SolveOptions, solve};
use karpenter_testing::*;
use proptest::prelude::*;
use std::collections::BTreeSet;
use std::sync::Arc;

/// `pod` labelled `app=db`, one per node (required hostname anti-affinity).
fn db_pod(name: &str, cpu_millis: i64) -> Pod {
    let mut p = labeled(pod(name, cpu_millis, GI), &[("app", "db")]);
    p.affinity.pod_anti_affinity.required = vec![term(HOSTNAME, &[("app", "db")])];
    p
}

/// A pool of `types` with `limits` (resource, amount as written in a NodePool).
fn limited(types: Vec<Arc<InstanceType>>, limits: &[(&str, &str)]) -> NodePool {
    let mut p = pool("default");
    p.instance_types = types;
    p.limits = limits
        .iter()
        .map(|(k, v)| (k.to_string(), Quantity::parse(v).unwrap()))
        .collect();
    p
}

/// Small types and one large one: a claim that may still grow to the large type counts
/// 64 cpu against a limit.
fn with_a_large_type() -> Vec<Arc<InstanceType>> {
    on_demand_types(&[
        ("small", 2, 8, 0.11),
        ("mid", 4, 16, 0.20),
        ("large", 64, 256, 3.60),
    ])
}

/// What the plan's claims of `pool` could launch if each launched its largest option, per
/// resource (cpu in millicores, memory in bytes) and in nodes.
fn launchable(plan: &Plan, pool: &NodePool) -> (i64, i64, i64) {
    let mut total = (0, 0, 0);
    for c in plan
        .new_node_claims
        .iter()
        .filter(|c| c.node_pool == pool.name)
    {
        let capacity = |name: &str| {
            let it = pool.instance_types.iter().find(|it| *it.name == *name);
            it.expect("an option of the pool").capacity.clone()
        };
        let options = c.instance_type_options.iter().map(|o| capacity(&o.name));
        total.0 += options.clone().map(|r| r.cpu_millis).max().unwrap();
        total.1 += options.map(|r| r.memory).max().unwrap();
        total.2 += 1;
    }
    total
}

/// Thirty pods that need a node each and forty that fit anywhere ask for 81 cpu of a
/// 100-cpu limit. Karpenter's pass counts the first claim at 64 cpu (it may launch as the
/// large type) and the next ones at 4, so only ten claims open and twenty `db` pods are left
/// out. The plan places every pod, as the same pool without the limit would, and each claim
/// keeps only options that keep the pool within its limit whichever it launches.
#[test]
fn a_limit_binding_only_on_paper_leaves_no_pod_out() {
    let mut pods: Vec<Pod> = (0..30).map(|i| db_pod(&format!("db{i}"), 1500)).collect();
    pods.extend((0..40).map(|i| pod(&format!("web{i}"), 900, GI)));
    let p = limited(with_a_large_type(), &[("cpu", "100")]);
    let s = snapshot(pods.clone(), vec![p.clone()]);

    let greedy = solve_greedy(&s);
    assert_eq!(greedy.unschedulable.len(), 20, "{:?}", greedy.unschedulable);
    assert!(
        greedy.unschedulable[0]
            .reason
            .contains("limit of cpu reached"),
        "{}",
        greedy.unschedulable[0].reason
    );

    let plan = solve(&s, &SolveOptions::default());
    assert!(plan.unschedulable.is_empty(), "{:?}", plan.unschedulable);
    assert_eq!(plan.placed_pods(), 70);
    assert!(
        launchable(&plan, &p).0 <= 100_000,
        "{:?}",
        launchable(&plan, &p)
    );
    assert!(plan.total_price <= plan.greedy_price.unwrap() + 1e-9);

    let mut unlimited = p.clone();
    unlimited.limits.clear();
    let free = solve(&snapshot(pods, vec![unlimited]), &SolveOptions::default());
    assert!(
        (plan.total_price - free.total_price).abs() < 1e-9,
        "{} against {} without the limit",
        plan.total_price,
        free.total_price
    );
    // Every claim keeps its cheapest option, and so its price.
    for (a, b) in plan.new_node_claims.iter().zip(&free.new_node_claims) {
        assert_eq!(a.price, b.price);
        assert_eq!(a.pods, b.pods);
    }
}

/// Twelve pods that each need a node ask for 18 of 20 cpu, but twelve nodes of the
/// smallest type that holds one are 24 cpu: no plan places them all. Karpenter's pass
/// counts its first claim at 16 cpu and leaves nine out; counting each claim at the type it
/// is priced at places ten.
#[test]
fn a_limit_that_binds_for_real_still_places_what_fits() {
    let types = on_demand_types(&[("small", 2, 8, 0.11), ("mid", 16, 64, 0.80)]);
    let p = limited(types, &[("cpu", "20")]);
    let pods = (0..12).map(|i| db_pod(&format!("db{i}"), 1500)).collect();
    let s = snapshot(pods, vec![p.clone()]);
    let greedy = solve_greedy(&s);
    assert_eq!(greedy.placed_pods(), 3);
    let plan = solve(&s, &SolveOptions::default());
    assert_eq!(plan.placed_pods(), 10, "{:?}", plan.unschedulable);
    assert!(launchable(&plan, &p).0 <= 20_000);
    assert!(
        plan.unschedulable
            .iter()
            .all(|u| u.reason.contains("limit of cpu reached")),
        "{:?}",
        plan.unschedulable
    );
    assert!(plan.total_price <= plan.greedy_price.unwrap() + 1e-9);
}

/// minValues counts too: with `instance-type` minValues 2 a claim that holds one pod must
/// keep the 4-cpu type beside the 2-cpu one it is priced at, so it counts 4 cpu. Seven such
/// claims fit a 30-cpu limit (Karpenter's pass, counting its first claim at the 28-cpu type,
/// opens one); every claim keeps two types, and the pool stays within its cpu and memory
/// limits whichever options launch.
#[test]
fn narrowing_keeps_min_values_and_every_limited_resource() {
    let types = on_demand_types(&[
        ("small", 2, 8, 0.11),
        ("mid", 4, 16, 0.20),
        ("large", 28, 112, 1.60),
    ]);
    let mut p = limited(types, &[("cpu", "30"), ("memory", "240Gi")]);
    let mut two_types = nsr(
        karpenter_scheduling::labels::INSTANCE_TYPE,
        karpenter_scheduling::Operator::Exists,
        &[],
    );
    two_types.min_values = Some(2);
    p.requirements = reqs(&[two_types]);
    let pods = (0..10).map(|i| db_pod(&format!("db{i}"), 1500)).collect();
    let s = snapshot(pods, vec![p.clone()]);
    assert_eq!(solve_greedy(&s).placed_pods(), 1);
    let plan = solve(&s, &SolveOptions::default());
    assert_eq!(plan.placed_pods(), 7, "{:?}", plan.unschedulable);
    let (cpu, memory, _) = launchable(&plan, &p);
    assert!(cpu <= 30_000, "{cpu}");
    assert!(memory <= 240 * GI, "{memory}");
    for c in &plan.new_node_claims {
        let names: BTreeSet<&str> = c.instance_type_options.iter().map(|o| &*o.name).collect();
        assert!(names.len() >= 2, "minValues 2 broken: {names:?}");
    }
}

/// A pool's `nodes` limit is never narrowed away: each claim is a node whatever it launches.
#[test]
fn a_nodes_limit_is_kept() {
    let p = limited(with_a_large_type(), &[("cpu", "100"), ("nodes", "12")]);
    let pods = (0..30).map(|i| db_pod(&format!("db{i}"), 1500)).collect();
    let s = snapshot(pods, vec![p.clone()]);
    let plan = solve(&s, &SolveOptions::default());
    let (cpu, _, nodes) = launchable(&plan, &p);
    assert!(cpu <= 100_000);
    assert_eq!(nodes, 12);
    assert_eq!(plan.placed_pods(), 12);
}

/// Pods of a limited pool that need a node each or may share one.
#[derive(Debug, Clone)]
struct Case {
    pods: Vec<(i64, i64, bool)>,
    cpu_limit: i64,
    memory_limit_gib: Option<i64>,
}

fn case() -> impl Strategy<Value = Case> {
    (
        prop::collection::vec((100i64..3500, 1i64..6, any::<bool>()), 1..40),
        8i64..160,
        prop::option::of(32i64..640),
    )
        .prop_map(|(pods, cpu_limit, memory_limit_gib)| Case {
            pods,
            cpu_limit,
            memory_limit_gib,
        })
}

impl Case {
    fn pool(&self, limited: bool) -> NodePool {
        let mut limits = vec![("cpu", self.cpu_limit.to_string())];
        if let Some(gib) = self.memory_limit_gib {
            limits.push(("memory", format!("{gib}Gi")));
        }
        let limits: Vec<(&str, &str)> = limits.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let mut p = limited_pool(&limits);
        if !limited {
            p.limits.clear();
        }
        p
    }

    fn snapshot(&self, limited: bool) -> Snapshot {
        let pods = self
            .pods
            .iter()
            .enumerate()
            .map(|(i, &(cpu, gib, apart))| {
                let name = format!("p{i}");
                if apart {
                    let mut p = db_pod(&name, cpu);
                    p.requests.memory = gib * GI;
                    p
                } else {
                    pod(&name, cpu, gib * GI)
                }
            })
            .collect();
        snapshot(pods, vec![self.pool(limited)])
    }
}

fn limited_pool(limits: &[(&str, &str)]) -> NodePool {
    let mut types = with_a_large_type();
    types.extend(on_demand_types(&[("xlarge", 16, 64, 0.85)]));
    limited(types, limits)
}

/// The capacity of the cheapest option of each claim, summed (cpu, memory).
fn priced_capacity(plan: &Plan, pool: &NodePool) -> (i64, i64) {
    plan.new_node_claims
        .iter()
        .map(|c| {
            let name = &c.instance_type_options[0].name;
            let it = pool.instance_types.iter().find(|it| *it.name == **name);
            let cap = &it.unwrap().capacity;
            (cap.cpu_millis, cap.memory)
        })
        .fold((0, 0), |a, b| (a.0 + b.0, a.1 + b.1))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Whatever the pods and limits: every claim may launch as any of its options and the
    /// pool stays within each limit; the plan places at least the pods Karpenter's pass
    /// places, never costs more than the greedy plan of the pods it places, and keeps pods
    /// needing a node each apart. And whenever the plan of the same pool without limits
    /// would fit them once each claim kept only the type it is priced at, the limited plan
    /// is that plan: every pod placed, at the same price.
    #[test]
    fn narrowed_plans_never_exceed_a_limit(c in case()) {
        let s = c.snapshot(true);
        let p = &s.node_pools[0];
        let greedy = solve_greedy(&s);
        let plan = solve(&s, &SolveOptions::default());
        let (cpu, memory, _) = launchable(&plan, p);
        prop_assert!(cpu <= c.cpu_limit * 1000, "cpu {} over {}", cpu, c.cpu_limit);
        if let Some(gib) = c.memory_limit_gib {
            prop_assert!(memory <= gib * GI, "memory {} over {} GiB", memory, gib);
        }
        prop_assert!(plan.placed_pods() >= greedy.placed_pods());
        prop_assert!(plan.total_price <= plan.greedy_price.unwrap() + 1e-9);
        let by_name: std::collections::BTreeMap<&str, &Pod> =
            s.pending_pods.iter().map(|p| (p.name.as_str(), p)).collect();
        for claim in &plan.new_node_claims {
            let apart = claim.pods.iter().filter(|k| by_name[k.name.as_str()].labels.contains_key("app")).count();
            prop_assert!(apart <= 1, "{} db pods share a node", apart);
            let mut load = claim.daemon_overhead.clone();
            for k in &claim.pods {
                load.add_assign(&by_name[k.name.as_str()].requests);
            }
            for o in claim.instance_type_options.iter() {
                let it = p.instance_types.iter().find(|it| *it.name == *o.name).unwrap();
                prop_assert!(load.cpu_millis <= it.allocatable().cpu_millis);
                prop_assert!(load.memory <= it.allocatable().memory);
            }
        }

        let free = solve(&c.snapshot(false), &SolveOptions::default());
        let (free_cpu, free_memory) = priced_capacity(&free, &c.pool(false));
        let fits = free.unschedulable.is_empty()
            && free_cpu <= c.cpu_limit * 1000
            && c.memory_limit_gib.is_none_or(|gib| free_memory <= gib * GI);
        if fits {
            prop_assert!(plan.unschedulable.is_empty(), "{:?}", plan.unschedulable);
        }
        // The bound of a plan that places every pod ignores the limits, so it is never above
        // the plan without them: a narrowed plan that meets it is optimal with the limit too.
        if let Some(bound) = plan.lower_bound
            && plan.unschedulable.is_empty()
            && free.unschedulable.is_empty()
        {
            prop_assert!(
                bound <= free.total_price + 1e-6 * free.total_price.max(1.0),
                "bound {} above the unlimited plan {}", bound, free.total_price
            );
        }
    }
}
