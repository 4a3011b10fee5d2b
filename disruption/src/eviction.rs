//! The order in which termination evicts a node's pods (upstream terminator's
//! `groupPodsByPriority`, after the graceful node shutdown ordering): non-critical workload
//! pods first, then non-critical DaemonSet pods, then critical workload pods, then critical
//! DaemonSet pods — so logging, networking and other node agents outlive the workloads that
//! need them.

use karpenter_scheduling::model::{Pod, PodKey};

/// Priority of the `system-cluster-critical` PriorityClass; `system-node-critical` is higher.
/// The model carries the resolved priority rather than the class name, so a pod counts as
/// critical when its priority is at least this value (only the two system classes may use
/// priorities above one billion).
pub const SYSTEM_CRITICAL_PRIORITY: i32 = 2_000_000_000;

/// Whether the pod runs with a system-critical priority class.
pub fn is_critical(pod: &Pod) -> bool {
    pod.priority >= SYSTEM_CRITICAL_PRIORITY
}

/// The four eviction waves, in order: non-critical non-daemon, non-critical daemon,
/// critical non-daemon, critical daemon. Within a wave pods keep the order given; every pod
/// appears exactly once.
///
/// # Examples
///
/// ```
/// use karpenter_disruption::eviction_order;
/// use karpenter_disruption::eviction::SYSTEM_CRITICAL_PRIORITY;
/// use karpenter_scheduling::Pod;
/// use karpenter_scheduling::model::OwnerRef;
///
/// let pod = |name: &str, priority: i32, daemon: bool| Pod {
///     namespace: "default".into(),
///     name: name.into(),
///     priority,
///     owner: Some(OwnerRef {
///         kind: if daemon { "DaemonSet" } else { "ReplicaSet" }.into(),
///         name: name.into(),
///         uid: String::new(),
///     }),
///     ..Pod::default()
/// };
/// let on_node = [
///     pod("cni", SYSTEM_CRITICAL_PRIORITY + 1000, true),
///     pod("web", 0, false),
///     pod("log-shipper", 0, true),
///     pod("dns", SYSTEM_CRITICAL_PRIORITY, false),
///     pod("api", 100, false),
/// ];
/// let waves = eviction_order(&on_node);
/// let names: Vec<Vec<&str>> = waves
///     .iter()
///     .map(|wave| wave.iter().map(|k| k.name.as_str()).collect())
///     .collect();
/// assert_eq!(names, [vec!["web", "api"], vec!["log-shipper"], vec!["dns"], vec!["cni"]]);
/// ```
pub fn eviction_order<'a>(pods: impl IntoIterator<Item = &'a Pod>) -> [Vec<PodKey>; 4] {
    let mut waves: [Vec<PodKey>; 4] = Default::default();
    for pod in pods {
        let wave = match (is_critical(pod), pod.is_daemon()) {
            (false, false) => 0,
            (false, true) => 1,
            (true, false) => 2,
            (true, true) => 3,
        };
        waves[wave].push(pod.key());
    }
    waves
}

#[cfg(test)]
mod tests {
    use super::*;
    use karpenter_scheduling::model::OwnerRef;

    fn pod(name: &str, priority: i32, daemon: bool) -> Pod {
        Pod {
            namespace: "ns".into(),
            name: name.into(),
            priority,
            owner: daemon.then(|| OwnerRef {
                kind: "DaemonSet".into(),
                name: "ds".into(),
                uid: String::new(),
            }),
            ..Pod::default()
        }
    }

    #[test]
    fn waves_follow_upstream_tiers() {
        let pods = [
            pod("crit-ds", 2_000_001_000, true),
            pod("app", 0, false),
            pod("crit-app", 2_000_000_000, false),
            pod("ds", 100, true),
            pod("app2", 1_000_000_000, false),
        ];
        let [a, b, c, d] = eviction_order(&pods);
        let names = |v: &Vec<PodKey>| v.iter().map(|k| k.name.clone()).collect::<Vec<_>>();
        assert_eq!(names(&a), ["app", "app2"]);
        assert_eq!(names(&b), ["ds"]);
        assert_eq!(names(&c), ["crit-app"]);
        assert_eq!(names(&d), ["crit-ds"]);
    }
}
