//! The benchmark's sequence: which Deployments exist at which size in each phase, the
//! NodePool both controllers get, and the thresholds upstream's own performance suite
//! (`test/suites/performance` in kubernetes-sigs/karpenter) asserts for the phases that
//! mirror its scenarios. The shapes and thresholds were read there; the code is ours.

use serde_json::{Value, json};
use std::time::Duration;

/// Label on every benchmark pod (the pods the measurements count).
pub const BENCH_LABEL: &str = "karpenter-rs.sh/peer-bench";
/// The NodePool's name.
pub const NODE_POOL: &str = "bench";

/// One Deployment of pause pods.
#[derive(Debug, Clone, PartialEq)]
pub struct Workload {
    pub name: String,
    pub cpu: String,
    pub memory: String,
    /// `topology.kubernetes.io/zone` spread, maxSkew 1, DoNotSchedule.
    pub zone_spread: bool,
    /// `kubernetes.io/hostname` spread, maxSkew 1, DoNotSchedule.
    pub hostname_spread: bool,
    /// Required anti-affinity to its own pods on `kubernetes.io/hostname`.
    pub anti_affinity: bool,
    /// `karpenter.sh/do-not-disrupt: "true"` on its pods.
    pub do_not_disrupt: bool,
}

impl Workload {
    fn new(name: &str, cpu: &str, memory: &str) -> Self {
        Self {
            name: name.to_owned(),
            cpu: cpu.to_owned(),
            memory: memory.to_owned(),
            zone_spread: false,
            hostname_spread: false,
            anti_affinity: false,
            do_not_disrupt: false,
        }
    }
    fn zone_spread(mut self) -> Self {
        self.zone_spread = true;
        self
    }
    fn hostname_spread(mut self) -> Self {
        self.hostname_spread = true;
        self
    }
    fn anti_affinity(mut self) -> Self {
        self.anti_affinity = true;
        self
    }
    fn do_not_disrupt(mut self) -> Self {
        self.do_not_disrupt = true;
        self
    }

    /// The Deployment at `replicas`, for server-side apply.
    pub fn deployment(&self, namespace: &str, replicas: u32) -> Value {
        let selector = json!({"matchLabels": {"app": self.name}});
        let mut spread = Vec::new();
        for (on, key) in [
            (self.zone_spread, "topology.kubernetes.io/zone"),
            (self.hostname_spread, "kubernetes.io/hostname"),
        ] {
            if on {
                spread.push(json!({
                    "maxSkew": 1,
                    "topologyKey": key,
                    "whenUnsatisfiable": "DoNotSchedule",
                    "labelSelector": selector,
                }));
            }
        }
        let mut spec = json!({
            // Pods go as soon as they are evicted, as kwok makes them go on the peer's nodes
            // whatever their grace period; the fake kubelet would otherwise wait it out.
            "terminationGracePeriodSeconds": 0,
            "containers": [{
                "name": "app",
                "image": "registry.k8s.io/pause:3.10",
                "resources": {"requests": {"cpu": self.cpu, "memory": self.memory}},
            }],
        });
        if !spread.is_empty() {
            spec["topologySpreadConstraints"] = Value::Array(spread);
        }
        if self.anti_affinity {
            spec["affinity"] = json!({"podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [{
                    "topologyKey": "kubernetes.io/hostname",
                    "labelSelector": selector,
                }]
            }});
        }
        let mut metadata = json!({"labels": {"app": self.name, BENCH_LABEL: "true"}});
        if self.do_not_disrupt {
            metadata["annotations"] = json!({"karpenter.sh/do-not-disrupt": "true"});
        }
        json!({
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": self.name, "namespace": namespace},
            "spec": {
                "replicas": replicas,
                "selector": selector,
                "template": {"metadata": metadata, "spec": spec},
            }
        })
    }
}

/// Which controller a NodePool is written for: only the NodeClass reference differs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Peer {
    /// Upstream Karpenter's kwok build (a KWOKNodeClass).
    Upstream,
    /// `karpenter controller --cloud-provider fake` (an EC2NodeClass name; the fake provider
    /// has no NodeClass).
    KarpenterRs,
}

/// The NodePool of the run: upstream's performance-suite pool (on-demand Linux, no limits,
/// `WhenEmptyOrUnderutilized` after 30 s, a 100 % budget), with the getting-started guide's
/// c/m/r generation > 2 amd64 requirements on our catalogue, and at most 31 vCPUs, which is
/// what the suite's `instance-size < 32` keeps of kwok's generic types. `drift` is written
/// into the template's annotations (changing it drifts every node). `max_cpu` caps the
/// vCPUs (exclusive).
pub fn node_pool(peer: Peer, drift: u32, max_cpu: u32) -> Value {
    let node_class = match peer {
        Peer::Upstream => {
            json!({"group": "karpenter.kwok.sh", "kind": "KWOKNodeClass", "name": "default"})
        }
        Peer::KarpenterRs => {
            json!({"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"})
        }
    };
    let req = |key: &str, op: &str, values: &[&str]| json!({"key": key, "operator": op, "values": values});
    let max_cpu = max_cpu.to_string();
    json!({
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": NODE_POOL},
        "spec": {
            "template": {
                "metadata": {"annotations": {"karpenter-rs.sh/peer-bench-drift": drift.to_string()}},
                "spec": {
                    "nodeClassRef": node_class,
                    "expireAfter": "Never",
                    "requirements": [
                        req("kubernetes.io/os", "In", &["linux"]),
                        req("kubernetes.io/arch", "In", &["amd64"]),
                        req("karpenter.sh/capacity-type", "In", &["on-demand"]),
                        req("karpenter.k8s.aws/instance-category", "In", &["c", "m", "r"]),
                        req("karpenter.k8s.aws/instance-generation", "Gt", &["2"]),
                        req("karpenter.k8s.aws/instance-cpu", "Lt", &[max_cpu.as_str()]),
                    ],
                }
            },
            "disruption": {
                "consolidationPolicy": "WhenEmptyOrUnderutilized",
                "consolidateAfter": "30s",
                "budgets": [{"nodes": "100%"}],
            },
        }
    })
}

/// Upstream's own bounds for a phase (its `thresholds.go` defaults for the scenario).
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Thresholds {
    /// Total time of the phase, as upstream's report measures it (for consolidation and
    /// drift: until no node was disrupting for a quiet window).
    pub total_secs: f64,
    /// P95 of the controller's memory (upstream bounds its live Go heap; we compare RSS,
    /// which is larger).
    pub memory_mb: f64,
    /// Average CPU of the controller over the phase, in cores.
    pub cpu_cores: f64,
}

const fn t(total_min: f64, memory_mb: f64, cpu_cores: f64) -> Option<Thresholds> {
    Some(Thresholds {
        total_secs: total_min * 60.0,
        memory_mb,
        cpu_cores,
    })
}

/// What a phase does before it is measured.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    /// Apply these Deployments at these sizes (0 deletes nothing: it scales to zero).
    Scale(Vec<(Workload, u32)>),
    /// Change the NodePool template (a new drift annotation value).
    Drift,
    /// Delete every Deployment and the NodePool, wait until no node is left, create the
    /// NodePool again: the next scenario starts from an empty cluster, as upstream's do.
    Reset,
}

/// What a phase waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Kind {
    /// More pods: done when they all run (and the nodes were quiet for a short while).
    ScaleOut,
    /// Fewer pods: done when the pods run and no node was disrupted for the quiet window.
    Consolidation,
    /// Template changed: done when every node of before is gone, the pods run and no node
    /// was disrupted for the quiet window.
    Drift,
    /// Between scenarios: not compared.
    Reset,
    /// Nothing changes for the phase's whole timeout: the controller at rest at this size.
    Hold,
}

/// One measured phase.
#[derive(Debug, Clone, PartialEq)]
pub struct Phase {
    pub name: String,
    pub kind: Kind,
    pub step: Step,
    /// Benchmark pods that must run at the end.
    pub pods: u32,
    pub thresholds: Option<Thresholds>,
    pub timeout: Duration,
}

/// Sizes for a full or a reduced (`--quick`) run.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Scale {
    /// Pod counts are multiplied by this (1 for the full run).
    pub factor: f64,
}

impl Scale {
    fn n(self, pods: u32) -> u32 {
        if pods == 0 {
            return 0;
        }
        // Rounded, at least one pod.
        ((f64::from(pods) * self.factor).round() as u32).max(1)
    }
}

/// The scenarios, in order. `only`, when not empty, keeps the scenarios whose name is in it.
pub fn plan(scale: Scale, only: &[String]) -> Vec<Phase> {
    let scenarios = [
        ("basic", basic(scale)),
        ("hostname-spread", hostname_spread(scale)),
        ("anti-affinity", anti_affinity(scale)),
        ("wide", wide(scale)),
        ("drift-600", drift_600(scale)),
        ("do-not-disrupt", do_not_disrupt(scale)),
        ("scale", fleet(scale)),
    ];
    let mut out = Vec::new();
    for (name, phases) in scenarios {
        if !only.is_empty() && !only.iter().any(|o| o == name) {
            continue;
        }
        out.extend(phases);
        out.push(reset(&format!("{name}: reset")));
    }
    out
}

/// The scenario names `plan` knows.
pub const SCENARIOS: [&str; 7] = [
    "basic",
    "hostname-spread",
    "anti-affinity",
    "wide",
    "drift-600",
    "do-not-disrupt",
    "scale",
];

fn reset(name: &str) -> Phase {
    Phase {
        name: name.to_owned(),
        kind: Kind::Reset,
        step: Step::Reset,
        pods: 0,
        thresholds: None,
        timeout: Duration::from_secs(20 * 60),
    }
}

fn phase(
    name: &str,
    kind: Kind,
    sizes: Vec<(Workload, u32)>,
    thresholds: Option<Thresholds>,
    timeout_min: u64,
) -> Phase {
    let pods = sizes.iter().map(|(_, n)| n).sum();
    Phase {
        name: name.to_owned(),
        kind,
        step: Step::Scale(sizes),
        pods,
        thresholds,
        timeout: Duration::from_secs(timeout_min * 60),
    }
}

fn small() -> Workload {
    Workload::new("small-resource-app", "900m", "3100Mi")
}
fn large() -> Workload {
    Workload::new("large-resource-app", "3500m", "28Gi")
}

/// Basic: 500 small + 500 large → 350 + 350.
fn basic(s: Scale) -> Vec<Phase> {
    vec![
        phase(
            "basic: 1,000 pods",
            Kind::ScaleOut,
            vec![(small(), s.n(500)), (large(), s.n(500))],
            t(2.0, 120.0, 0.50),
            20,
        ),
        phase(
            "basic: → 700",
            Kind::Consolidation,
            vec![(small(), s.n(350)), (large(), s.n(350))],
            t(20.0, 140.0, 0.25),
            40,
        ),
    ]
}

/// Hostname spread: 500 small spread over hostnames + 500 large → 350 + 350.
fn hostname_spread(s: Scale) -> Vec<Phase> {
    let spread = small().hostname_spread();
    vec![
        phase(
            "hostname spread: 1,000 pods",
            Kind::ScaleOut,
            vec![(spread.clone(), s.n(500)), (large(), s.n(500))],
            t(5.0, 360.0, 1.15),
            20,
        ),
        phase(
            "hostname spread: → 700",
            Kind::Consolidation,
            vec![(spread, s.n(350)), (large(), s.n(350))],
            // Upstream bounds only the time it waits (30 min), memory and CPU here.
            t(30.0, 350.0, 1.00),
            40,
        ),
    ]
}

/// Self anti-affinity: 500 small → small 250 + large 500 → small 400 + large 200.
fn anti_affinity(s: Scale) -> Vec<Phase> {
    let a = small().anti_affinity();
    let b = large().anti_affinity();
    vec![
        phase(
            "anti-affinity: 500 pods",
            Kind::ScaleOut,
            vec![(a.clone(), s.n(500))],
            t(5.0, 310.0, 0.90),
            20,
        ),
        phase(
            "anti-affinity: → 750",
            Kind::ScaleOut,
            vec![(a.clone(), s.n(250)), (b.clone(), s.n(500))],
            t(10.0, 590.0, 1.30),
            20,
        ),
        phase(
            "anti-affinity: → 600",
            Kind::Consolidation,
            vec![(a, s.n(400)), (b, s.n(200))],
            t(25.0, 540.0, 0.80),
            40,
        ),
    ]
}

/// The 30 "wide" Deployments: every one zone-spread; 1-3 with self anti-affinity, 4-6 also
/// hostname-spread; 1,000 pods → 700.
pub fn wide_workloads() -> Vec<(Workload, u32, u32)> {
    const CPU: [&str; 30] = [
        "240m", "450m", "650m", "900m", "1400m", "1900m", "2400m", "2800m", "3300m", "3700m",
        "2300m", "900m", "1300m", "2800m", "1800m", "1850m", "3300m", "3800m", "225m", "450m",
        "700m", "900m", "1300m", "1800m", "2400m", "2800m", "3400m", "3800m", "3300m", "2800m",
    ];
    const MEMORY: [&str; 30] = [
        "300Mi", "400Mi", "700Mi", "1Gi", "2Gi", "4Gi", "8Gi", "4Gi", "16Gi", "10Gi", "64Gi",
        "30Gi", "32Gi", "32Gi", "30Gi", "20Gi", "30Gi", "300Mi", "500Mi", "750Mi", "1Gi", "2Gi",
        "4Gi", "8Gi", "16Gi", "32Gi", "28Gi", "64Gi", "13Gi", "24Gi",
    ];
    (0..30)
        .map(|i| {
            let mut w = Workload::new(&format!("wide-deployment-{}", i + 1), CPU[i], MEMORY[i])
                .zone_spread();
            if i < 3 {
                w = w.anti_affinity();
            } else if i < 6 {
                w = w.hostname_spread();
            }
            let (up, down) = if i < 20 { (35, 25) } else { (30, 20) };
            (w, up, down)
        })
        .collect()
}

fn wide(s: Scale) -> Vec<Phase> {
    let all = wide_workloads();
    vec![
        phase(
            "wide: 30 deployments, 1,000 pods",
            Kind::ScaleOut,
            all.iter().map(|(w, up, _)| (w.clone(), s.n(*up))).collect(),
            t(5.0, 150.0, 0.70),
            20,
        ),
        phase(
            "wide: → 700",
            Kind::Consolidation,
            all.iter()
                .map(|(w, _, down)| (w.clone(), s.n(*down)))
                .collect(),
            t(40.0, 210.0, 0.30),
            50,
        ),
    ]
}

/// Drift of 600 pods: 300 hostname-spread + 300 standard, then a template change.
fn drift_600(s: Scale) -> Vec<Phase> {
    let spread = Workload::new("hostname-spread-app", "900m", "3100Mi").hostname_spread();
    let standard = Workload::new("standard-app", "3500m", "28Gi");
    let pods = s.n(300) * 2;
    vec![
        phase(
            "drift: 600 pods",
            Kind::ScaleOut,
            vec![(spread, s.n(300)), (standard, s.n(300))],
            t(5.0, 190.0, 0.70),
            20,
        ),
        Phase {
            name: "drift: template changed".into(),
            kind: Kind::Drift,
            step: Step::Drift,
            pods,
            thresholds: t(50.0, 250.0, 1.05),
            timeout: Duration::from_secs(60 * 60),
        },
    ]
}

/// Do-not-disrupt: 500 small hostname-spread + 500 large + 100 protected → 250 + 250 + 100.
fn do_not_disrupt(s: Scale) -> Vec<Phase> {
    let spread = small().hostname_spread();
    let protected = Workload::new("do-not-disrupt-app", "900m", "450Mi").do_not_disrupt();
    vec![
        phase(
            "do-not-disrupt: 1,100 pods",
            Kind::ScaleOut,
            vec![
                (spread.clone(), s.n(500)),
                (large(), s.n(500)),
                (protected.clone(), s.n(100)),
            ],
            t(4.0, 340.0, 1.10),
            20,
        ),
        phase(
            "do-not-disrupt: → 600",
            Kind::Consolidation,
            vec![
                (spread, s.n(250)),
                (large(), s.n(250)),
                (protected, s.n(100)),
            ],
            t(35.0, 320.0, 0.80),
            45,
        ),
    ]
}

/// The fleet: five Deployments of several shapes, one zone-spread and one with hostname
/// anti-affinity, in fixed shares of the total.
pub fn fleet_workloads() -> Vec<(Workload, f64)> {
    vec![
        (Workload::new("web", "250m", "512Mi"), 0.40),
        (Workload::new("api", "1", "2Gi").zone_spread(), 0.20),
        (Workload::new("worker", "2", "8Gi"), 0.15),
        (Workload::new("batch", "4", "4Gi"), 0.23),
        (Workload::new("cache", "500m", "4Gi").anti_affinity(), 0.02),
    ]
}

fn fleet_at(total: u32) -> Vec<(Workload, u32)> {
    let shares = fleet_workloads();
    let mut sizes: Vec<(Workload, u32)> = shares
        .iter()
        .map(|(w, share)| (w.clone(), (f64::from(total) * share).floor() as u32))
        .collect();
    // The first Deployment takes what rounding left, so the total is exact.
    let sum: u32 = sizes.iter().map(|(_, n)| n).sum();
    sizes[0].1 += total - sum;
    sizes
}

/// 500 → 2,000 → 5,000 pods, consolidation at 30 %, drift, then down in steps to zero.
fn fleet(s: Scale) -> Vec<Phase> {
    let mut out = Vec::new();
    for total in [500, 2000, 5000] {
        out.push(phase(
            &format!("scale: → {total} pods"),
            Kind::ScaleOut,
            fleet_at(s.n(total)),
            None,
            30,
        ));
    }
    out.push(phase(
        "scale: consolidation to 30 % (1,500)",
        Kind::Consolidation,
        fleet_at(s.n(1500)),
        None,
        60,
    ));
    out.push(Phase {
        name: "scale: drift".into(),
        kind: Kind::Drift,
        step: Step::Drift,
        pods: s.n(1500),
        thresholds: None,
        timeout: Duration::from_secs(90 * 60),
    });
    for total in [500, 0] {
        out.push(phase(
            &format!("scale: → {total} pods"),
            Kind::Consolidation,
            fleet_at(s.n(total)),
            None,
            40,
        ));
    }
    out
}

/// The controller's own scale (`--suite controller-scale`): 1,000 → 2,500 → 5,000 → 10,000
/// pods of about 0.7 vCPU on nodes of at most 8 vCPUs (about ten pods a node, so 1,000
/// nodes at the top), each size held for a minute at rest, then back to zero. `quick`
/// divides the pods by ten.
pub fn controller_scale(quick: bool) -> Vec<Phase> {
    let s = Scale {
        factor: if quick { 0.1 } else { 1.0 },
    };
    let svc = Workload::new("svc", "500m", "1Gi");
    let job = Workload::new("job", "1", "2Gi");
    let sizes = |total: u32| {
        let a = s.n(total) * 6 / 10;
        vec![(svc.clone(), a), (job.clone(), s.n(total) - a)]
    };
    let mut out = Vec::new();
    for total in [1000, 2500, 5000, 10_000] {
        out.push(phase(
            &format!("{total} pods"),
            Kind::ScaleOut,
            sizes(total),
            None,
            45,
        ));
        let mut hold = phase(
            &format!("{total} pods: at rest"),
            Kind::Hold,
            sizes(total),
            None,
            1,
        );
        hold.timeout = Duration::from_secs(60);
        out.push(hold);
    }
    out.push(phase("→ 0 pods", Kind::Consolidation, sizes(0), None, 60));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn upstream_shapes_are_kept() {
        let full = plan(Scale { factor: 1.0 }, &[]);
        let pods = |name: &str| full.iter().find(|p| p.name == name).map(|p| p.pods);
        assert_eq!(pods("basic: 1,000 pods"), Some(1000));
        assert_eq!(pods("basic: → 700"), Some(700));
        assert_eq!(pods("anti-affinity: → 750"), Some(750));
        assert_eq!(pods("anti-affinity: → 600"), Some(600));
        assert_eq!(pods("wide: 30 deployments, 1,000 pods"), Some(1000));
        assert_eq!(pods("wide: → 700"), Some(700));
        assert_eq!(pods("drift: template changed"), Some(600));
        assert_eq!(pods("do-not-disrupt: 1,100 pods"), Some(1100));
        assert_eq!(pods("do-not-disrupt: → 600"), Some(600));
        assert_eq!(pods("scale: → 5000 pods"), Some(5000));
        assert_eq!(pods("scale: consolidation to 30 % (1,500)"), Some(1500));
        assert_eq!(pods("scale: → 0 pods"), Some(0));
        // Every scenario ends with a reset, so the next starts from an empty cluster.
        let resets = full.iter().filter(|p| p.kind == Kind::Reset).count();
        assert_eq!(resets, SCENARIOS.len());
        // A reduced run keeps the sequence at a tenth of the pods.
        let quick = plan(Scale { factor: 0.1 }, &["basic".into()]);
        assert_eq!(quick.len(), 3);
        assert_eq!(quick[0].pods, 100);
    }

    #[test]
    fn wide_deployments_are_upstreams_thirty() {
        let wide = wide_workloads();
        assert_eq!(wide.len(), 30);
        assert_eq!(wide.iter().map(|(_, up, _)| up).sum::<u32>(), 1000);
        assert_eq!(wide.iter().map(|(_, _, down)| down).sum::<u32>(), 700);
        assert!(wide.iter().all(|(w, _, _)| w.zone_spread));
        assert_eq!(wide.iter().filter(|(w, _, _)| w.anti_affinity).count(), 3);
        assert_eq!(wide.iter().filter(|(w, _, _)| w.hostname_spread).count(), 3);
    }

    #[test]
    fn the_fleet_sums_to_its_total() {
        for total in [50, 500, 1500, 2000, 5000] {
            let sizes = fleet_at(total);
            assert_eq!(sizes.iter().map(|(_, n)| n).sum::<u32>(), total);
        }
    }

    #[test]
    fn deployments_carry_their_constraints() {
        let w = small().anti_affinity().hostname_spread().do_not_disrupt();
        let d = w.deployment("ns", 3);
        let spec = &d["spec"]["template"]["spec"];
        assert_eq!(d["spec"]["replicas"], 3);
        assert_eq!(spec["terminationGracePeriodSeconds"], 0);
        assert_eq!(
            spec["topologySpreadConstraints"][0]["topologyKey"],
            "kubernetes.io/hostname"
        );
        assert_eq!(
            spec["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
                [0]["labelSelector"]["matchLabels"]["app"],
            "small-resource-app"
        );
        assert_eq!(
            d["spec"]["template"]["metadata"]["annotations"]["karpenter.sh/do-not-disrupt"],
            "true"
        );
        let pool = node_pool(Peer::Upstream, 2, 32);
        assert_eq!(
            pool["spec"]["template"]["spec"]["nodeClassRef"]["kind"],
            "KWOKNodeClass"
        );
        assert_eq!(
            pool["spec"]["template"]["metadata"]["annotations"]["karpenter-rs.sh/peer-bench-drift"],
            "2"
        );
    }
}
