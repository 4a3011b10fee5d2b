//! Snapshots: the solver's whole input.

use crate::instance_types::InstanceTypeBuilder;
use crate::pods::{labeled, pod, spread};
use crate::pools::pool;
use crate::resources::MI;
use karpenter_scheduling::Snapshot;
use karpenter_scheduling::labels::ZONE;
use karpenter_scheduling::model::{NodePool, Pod, WhenUnsatisfiable};

/// `pending` pods and `pools`, with no node, bound pod, DaemonSet or PDB.
pub fn snapshot(pending: Vec<Pod>, pools: Vec<NodePool>) -> Snapshot {
    Snapshot {
        pending_pods: pending,
        node_pools: pools,
        ..Snapshot::default()
    }
}

/// A synthetic cluster for timing probes: one pool `default` over 400 instance types (2–64
/// cores, 2–4 GiB per core, a quarter without spot at 40 %), `pods` pending pods over ten
/// apps with 100m–2 cpu and 128–1088 MiB, and every `spread_every`-th pod (none when 0)
/// carrying a zonal DoNotSchedule spread of maxSkew 1 over app `a0`.
pub fn synthetic_snapshot(pods: usize, spread_every: usize) -> Snapshot {
    let types = (0..400i64)
        .map(|i| {
            let cores = 2 << (i % 6);
            let price = 0.05 * cores as f64 + 0.001 * i as f64;
            let it = InstanceTypeBuilder::new(&format!("it-{i:03}"), cores, cores * (2 + i % 3))
                .on_demand(price);
            if i % 4 != 0 { it.spot_at(0.4) } else { it }.build()
        })
        .collect();
    let mut p = pool("default");
    p.instance_types = types;
    let pending = (0..pods)
        .map(|i| {
            let mut p = labeled(
                pod(
                    &format!("p{i:05}"),
                    100 * (1 + (i as i64 % 20)),
                    (128 + 64 * (i as i64 % 16)) * MI,
                ),
                &[("app", &format!("a{}", i % 10))],
            );
            if spread_every > 0 && i % spread_every == 0 {
                p.topology_spread_constraints = vec![spread(
                    ZONE,
                    1,
                    &[("app", "a0")],
                    WhenUnsatisfiable::DoNotSchedule,
                )];
            }
            p
        })
        .collect();
    snapshot(pending, vec![p])
}
