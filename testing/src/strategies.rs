//! Proptest strategies for pending pods, NodePools and instance types: plain data specs
//! (which shrink well and print readably) and the functions that turn them into model
//! objects.

use crate::instance_types::{InstanceTypeBuilder, ZONES};
use crate::pods::{daemon, labeled, pod, spread, taint, term, toleration};
use crate::pools::pool;
use crate::resources::MI;
use crate::snapshots::snapshot;
use karpenter_scheduling::Snapshot;
use karpenter_scheduling::labels::{HOSTNAME, ZONE};
use karpenter_scheduling::model::{HostPort, InstanceType, NodePool, Pod, WhenUnsatisfiable};
use karpenter_scheduling::quantity::Quantity;
use karpenter_scheduling::taints::TaintEffect;
use proptest::prelude::*;
use proptest::strategy::Union;
use std::collections::BTreeMap;
use std::ops::Range;
use std::sync::Arc;

/// The taint of the `tainted` pool of [`SnapshotSpec::snapshot`], which pods with
/// [`PodSpec::tolerates`] tolerate: `team=x:NoSchedule`.
pub const TEAM_TAINT: (&str, &str) = ("team", "x");

/// The host port of pods with [`PodSpec::host_port`].
pub const HOST_PORT: i32 = 8080;

/// The ranges and odds [`pod_spec`] draws from.
#[derive(Debug, Clone, PartialEq)]
pub struct PodMix {
    /// Cpu requests in millicores: one range is picked uniformly, then a value in it (two
    /// ranges of different widths skew the mix towards the narrower one).
    pub cpu_millis: Vec<Range<i64>>,
    /// Memory requests in MiB.
    pub memory_mib: Range<i64>,
    /// Odds of required hostname anti-affinity against the pod's own app.
    pub anti_affinity: f64,
    /// Odds of a zonal DoNotSchedule spread of maxSkew 1 (such a pod has no zone selector
    /// and no anti-affinity).
    pub zone_spread: f64,
    /// Odds of requesting [`HOST_PORT`].
    pub host_port: f64,
    /// Odds of requesting one `nvidia.com/gpu`.
    pub gpu: f64,
}

impl Default for PodMix {
    /// Cpu 100m–6 cores, memory 64 MiB–8 GiB, half with anti-affinity, a fifth spread, no
    /// host port or GPU.
    #[expect(
        clippy::single_range_in_vec_init,
        reason = "a list of one range is meant: a single uniform draw"
    )]
    fn default() -> Self {
        Self {
            cpu_millis: vec![100..6000],
            memory_mib: 64..8192,
            anti_affinity: 0.5,
            zone_spread: 0.2,
            host_port: 0.0,
            gpu: 0.0,
        }
    }
}

/// One generated pending pod; [`PodSpec::pod`] builds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodSpec {
    /// Cpu request in millicores.
    pub cpu_millis: i64,
    /// Memory request in MiB.
    pub memory_mib: i64,
    /// A zone selector on `ZONES[zone]` (ignored for spread pods).
    pub zone: Option<usize>,
    /// The pod's app label is `app{app}`.
    pub app: u8,
    /// Required hostname anti-affinity against its own app (ignored for spread pods).
    pub anti_affinity: bool,
    /// Labelled `app=spread` and spread over zones with the other spread pods.
    pub zone_spread: bool,
    /// Tolerates [`TEAM_TAINT`].
    pub tolerates: bool,
    /// Requests host port [`HOST_PORT`].
    pub host_port: bool,
    /// Requests one `nvidia.com/gpu`.
    pub gpu: bool,
}

impl PodSpec {
    /// The pod `p{index:03}` this spec describes: labelled `app=app{app}` (or `app=spread`),
    /// with exactly the constraints its flags name.
    pub fn pod(&self, index: usize) -> Pod {
        let app = if self.zone_spread {
            "spread".to_string()
        } else {
            format!("app{}", self.app)
        };
        let mut p = labeled(
            pod(
                &format!("p{index:03}"),
                self.cpu_millis,
                self.memory_mib * MI,
            ),
            &[("app", &app)],
        );
        if self.zone_spread {
            p.topology_spread_constraints = vec![spread(
                ZONE,
                1,
                &[("app", "spread")],
                WhenUnsatisfiable::DoNotSchedule,
            )];
        } else {
            if let Some(z) = self.zone {
                p.node_selector.insert(ZONE.into(), ZONES[z].into());
            }
            if self.anti_affinity {
                p.affinity.pod_anti_affinity.required = vec![term(HOSTNAME, &[("app", &app)])];
            }
        }
        if self.tolerates {
            p.tolerations = vec![toleration(TEAM_TAINT.0, TEAM_TAINT.1)];
        }
        if self.host_port {
            p.host_ports = vec![HostPort {
                port: HOST_PORT,
                protocol: "TCP".into(),
                host_ip: String::new(),
            }];
        }
        if self.gpu {
            p.requests.extended = vec![("nvidia.com/gpu".into(), 1)];
        }
        p
    }
}

/// Pod specs drawn from `mix`: a zone selector half of the time, one of three apps, and
/// tolerating [`TEAM_TAINT`] half of the time.
pub fn pod_spec(mix: &PodMix) -> impl Strategy<Value = PodSpec> + use<> {
    (
        (
            Union::new(mix.cpu_millis.clone()),
            mix.memory_mib.clone(),
            prop::option::of(0..ZONES.len()),
            0u8..3,
        ),
        (
            prop::bool::weighted(mix.anti_affinity),
            prop::bool::weighted(mix.zone_spread),
            any::<bool>(),
            prop::bool::weighted(mix.host_port),
            prop::bool::weighted(mix.gpu),
        ),
    )
        .prop_map(
            |((cpu_millis, memory_mib, zone, app), (anti, spread, tolerates, port, gpu))| PodSpec {
                cpu_millis,
                memory_mib,
                zone,
                app,
                anti_affinity: anti,
                zone_spread: spread,
                tolerates,
                host_port: port,
                gpu,
            },
        )
}

/// The ranges [`snapshot_spec`] draws from.
#[derive(Debug, Clone, PartialEq)]
pub struct SnapshotMix {
    /// The pods.
    pub pods: PodMix,
    /// How many pods.
    pub pod_count: Range<usize>,
    /// When set, half of the snapshots have a DaemonSet requesting this many millicores.
    pub daemon_cpu_millis: Option<Range<i64>>,
    /// When set, the pool `default` has a cpu limit of this many cores half of the time.
    pub cpu_limit_cores: Option<Range<i64>>,
}

impl Default for SnapshotMix {
    /// The default [`PodMix`], 1 to 39 pods, no DaemonSet, no limit.
    fn default() -> Self {
        Self {
            pods: PodMix::default(),
            pod_count: 1..40,
            daemon_cpu_millis: None,
            cpu_limit_cores: None,
        }
    }
}

impl SnapshotMix {
    /// `pod_count` pods skewed towards small cpu requests, some with hostname
    /// anti-affinity, zone spread, host ports or a GPU; half of the snapshots with a
    /// DaemonSet, half with a cpu limit on the pool `default`: the mix the optimiser's and
    /// the reservations' property tests draw from.
    pub fn constrained(pod_count: Range<usize>) -> Self {
        Self {
            pods: PodMix {
                cpu_millis: vec![100..1000, 1000..7000],
                memory_mib: 64..12_000,
                anti_affinity: 0.15,
                zone_spread: 0.15,
                host_port: 0.1,
                gpu: 0.05,
            },
            pod_count,
            daemon_cpu_millis: Some(50..600),
            cpu_limit_cores: Some(8..80),
        }
    }
}

/// One generated scheduling problem; [`SnapshotSpec::snapshot`] builds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SnapshotSpec {
    /// The pending pods, `p000` onwards.
    pub pods: Vec<PodSpec>,
    /// Whether the `tainted` pool outweighs `default`.
    pub tainted_first: bool,
    /// A DaemonSet `agent` requesting this many millicores.
    pub daemon_cpu_millis: Option<i64>,
    /// The cpu limit of the pool `default`, in cores.
    pub cpu_limit_cores: Option<i64>,
}

impl SnapshotSpec {
    /// The pods as pending pods and two pools over the small [`catalogue`]: `default`
    /// (with the cpu limit, if any) and `tainted`, tainted with [`TEAM_TAINT`] and weighted
    /// 10 when `tainted_first` (else 0); plus the DaemonSet, if any.
    ///
    /// [`catalogue`]: crate::instance_types::catalogue
    pub fn snapshot(&self) -> Snapshot {
        let pods = self
            .pods
            .iter()
            .enumerate()
            .map(|(i, s)| s.pod(i))
            .collect();
        let mut default = pool("default");
        if let Some(cores) = self.cpu_limit_cores {
            default.limits = BTreeMap::from([(
                "cpu".to_string(),
                Quantity::parse(&cores.to_string()).expect("quantity"),
            )]);
        }
        let mut s = snapshot(pods, vec![default, tainted_pool(self.tainted_first)]);
        if let Some(cpu) = self.daemon_cpu_millis {
            s.daemon_sets = vec![daemon("agent", cpu)];
        }
        s
    }
}

fn tainted_pool(first: bool) -> NodePool {
    let mut tainted = pool("tainted");
    tainted.weight = if first { 10 } else { 0 };
    tainted.taints = vec![taint(TEAM_TAINT.0, TEAM_TAINT.1, TaintEffect::NoSchedule)];
    tainted
}

fn optional(range: Option<Range<i64>>) -> BoxedStrategy<Option<i64>> {
    match range {
        Some(r) => prop::option::of(r).boxed(),
        None => Just(None).boxed(),
    }
}

/// Scheduling problems drawn from `mix`.
pub fn snapshot_spec(mix: &SnapshotMix) -> impl Strategy<Value = SnapshotSpec> + use<> {
    (
        prop::collection::vec(pod_spec(&mix.pods), mix.pod_count.clone()),
        any::<bool>(),
        optional(mix.daemon_cpu_millis.clone()),
        optional(mix.cpu_limit_cores.clone()),
    )
        .prop_map(
            |(pods, tainted_first, daemon_cpu_millis, cpu_limit_cores)| SnapshotSpec {
                pods,
                tainted_first,
                daemon_cpu_millis,
                cpu_limit_cores,
            },
        )
}

/// One generated instance type; [`InstanceTypeSpec::build`] builds it.
#[derive(Debug, Clone, PartialEq)]
pub struct InstanceTypeSpec {
    /// Whole cores, a power of two from 1 to 64.
    pub cores: i64,
    /// GiB per core: 2, 4 or 8.
    pub gib_per_core: i64,
    /// On-demand price per core and hour.
    pub price_per_core: f64,
    /// Also offered as spot at this fraction of the on-demand price.
    pub spot_fraction: Option<f64>,
}

impl InstanceTypeSpec {
    /// The type `name` in every zone of [`ZONES`] (see [`InstanceTypeBuilder`] for what
    /// it guarantees).
    pub fn build(&self, name: &str) -> Arc<InstanceType> {
        let it = InstanceTypeBuilder::new(name, self.cores, self.cores * self.gib_per_core)
            .on_demand(self.price_per_core * self.cores as f64);
        match self.spot_fraction {
            Some(f) => it.spot_at(f),
            None => it,
        }
        .build()
    }
}

/// Instance types of EC2-like shapes and prices.
pub fn instance_type_spec() -> impl Strategy<Value = InstanceTypeSpec> {
    (
        0u32..7,
        prop::sample::select(vec![2i64, 4, 8]),
        0.02f64..0.08,
        prop::option::of(0.3f64..0.7),
    )
        .prop_map(
            |(log2_cores, gib_per_core, price_per_core, spot_fraction)| InstanceTypeSpec {
                cores: 1 << log2_cores,
                gib_per_core,
                price_per_core,
                spot_fraction,
            },
        )
}

/// Catalogues of 1 to `max_types` types from [`instance_type_spec`], named `t0`, `t1` ….
pub fn catalogue(max_types: usize) -> impl Strategy<Value = Vec<Arc<InstanceType>>> {
    prop::collection::vec(instance_type_spec(), 1..max_types.max(2)).prop_map(|specs| {
        specs
            .iter()
            .enumerate()
            .map(|(i, s)| s.build(&format!("t{i}")))
            .collect()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use karpenter_scheduling::labels::CAPACITY_TYPE;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(32))]

        #[test]
        fn pods_carry_exactly_the_constraints_their_spec_names(spec in pod_spec(&PodMix {
            host_port: 0.5,
            gpu: 0.5,
            ..PodMix::default()
        })) {
            let p = spec.pod(7);
            prop_assert_eq!(p.name.as_str(), "p007");
            prop_assert_eq!(p.requests.cpu_millis, spec.cpu_millis);
            prop_assert_eq!(p.requests.memory, spec.memory_mib * MI);
            prop_assert_eq!(p.topology_spread_constraints.len(), usize::from(spec.zone_spread));
            prop_assert_eq!(
                p.affinity.pod_anti_affinity.required.len(),
                usize::from(spec.anti_affinity && !spec.zone_spread)
            );
            prop_assert_eq!(
                p.node_selector.contains_key(ZONE),
                spec.zone.is_some() && !spec.zone_spread
            );
            prop_assert_eq!(p.tolerations.len(), usize::from(spec.tolerates));
            prop_assert_eq!(p.host_ports.len(), usize::from(spec.host_port));
            prop_assert_eq!(p.requests.extended.len(), usize::from(spec.gpu));
        }

        #[test]
        fn snapshots_have_the_two_pools_and_every_pod(spec in snapshot_spec(&SnapshotMix {
            daemon_cpu_millis: Some(50..600),
            cpu_limit_cores: Some(8..80),
            ..SnapshotMix::default()
        })) {
            let s = spec.snapshot();
            prop_assert_eq!(s.pending_pods.len(), spec.pods.len());
            prop_assert_eq!(s.node_pools.len(), 2);
            prop_assert_eq!(s.node_pools[0].limits.is_empty(), spec.cpu_limit_cores.is_none());
            prop_assert_eq!(s.daemon_sets.len(), usize::from(spec.daemon_cpu_millis.is_some()));
            prop_assert!(s.node_pools[1].taints.len() == 1);
        }

        #[test]
        fn generated_types_are_consistent(types in catalogue(6)) {
            for it in &types {
                prop_assert_eq!(it.allocatable(), it.capacity.clone());
                prop_assert!(it.capacity.cpu_millis >= 1000);
                let cts = it.requirements.get(CAPACITY_TYPE).expect("capacity type");
                for o in &it.offerings {
                    prop_assert!(o.available && o.price > 0.0);
                    prop_assert!(cts.has(&o.capacity_type));
                    prop_assert!(it.requirements.get(ZONE).expect("zone").has(&o.zone));
                }
            }
        }
    }
}
