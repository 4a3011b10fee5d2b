//! Compares the families karpenter-rs exports with Karpenter v1.15.1's
//! (`upstream/karpenter-v1.15.1.txt`): name, type, label names and histogram buckets. Every
//! difference must be listed in `upstream/gaps.txt`, and every listed difference must still
//! exist, so the list only shrinks as families reach parity. `UPDATE_GAPS=1` rewrites it.

use k8s_openapi::api::core::v1::{Container, ResourceRequirements};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use karpenter_cluster::{ClusterState, Object};
use karpenter_metrics::Metrics;
use karpenter_metrics::index::IndexMetrics;
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

/// One family as exported or as upstream defines it.
#[derive(Debug, Default)]
struct Family {
    kind: String,
    /// `None` where upstream's labels are defined by a library.
    labels: Option<BTreeSet<String>>,
    buckets: Vec<f64>,
}

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("upstream")
}

const DURATION: [f64; 45] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7, 0.8, 0.9,
    1.0, 1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 15.0, 20.0,
    25.0, 30.0, 40.0, 50.0, 60.0, 120.0, 150.0, 300.0, 450.0, 600.0,
];
const DEFAULT: [f64; 11] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

fn buckets(spec: &str) -> Vec<f64> {
    match spec {
        "duration" => DURATION.to_vec(),
        "default" => DEFAULT.to_vec(),
        s if s.starts_with("exp(") => {
            let args: Vec<f64> = s[4..s.len() - 1]
                .split(',')
                .map(|a| a.parse().unwrap())
                .collect();
            (0..args[2] as i32)
                .map(|i| args[0] * args[1].powi(i))
                .collect()
        }
        s => s.split(',').map(|b| b.parse().unwrap()).collect(),
    }
}

fn upstream() -> BTreeMap<String, Family> {
    let text = std::fs::read_to_string(dir().join("karpenter-v1.15.1.txt")).unwrap();
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| {
            let cols: Vec<&str> = l.split_whitespace().collect();
            let labels = match cols[2] {
                "?" => None,
                "-" => Some(BTreeSet::new()),
                ls => Some(ls.split(',').map(str::to_owned).collect()),
            };
            let family = Family {
                kind: cols[1].to_owned(),
                labels,
                buckets: cols.get(3).map(|b| buckets(b)).unwrap_or_default(),
            };
            (cols[0].to_owned(), family)
        })
        .collect()
}

/// One series in every labelled family, so that its label names show in the exposition: the
/// node families through a real refresh from an index holding one node.
fn fill(m: &Metrics) {
    drop(m.nodeclaims_created.get_or_create(&Default::default()));
    drop(m.nodeclaims_terminated.get_or_create(&Default::default()));
    drop(m.nodeclaims_disrupted.get_or_create(&Default::default()));
    drop(
        m.pods_disruption_initiated
            .get_or_create(&Default::default()),
    );
    drop(m.nodes_created.get_or_create(&Default::default()));
    drop(m.nodes_terminated.get_or_create(&Default::default()));
    drop(
        m.nodeclaims_termination_duration
            .get_or_create(&Default::default()),
    );
    drop(m.pods_state.get_or_create(&Default::default()));
    drop(m.scheduling_duration.get_or_create(&Default::default()));
    drop(m.pods_unbound_time.get_or_create(&Default::default()));
    drop(m.pods_bound_duration.get_or_create(&Default::default()));
    drop(
        m.pods_provisioning_bound_duration
            .get_or_create(&Default::default()),
    );
    drop(m.pods_unstarted_time.get_or_create(&Default::default()));
    drop(
        m.pods_provisioning_unbound_time
            .get_or_create(&Default::default()),
    );
    drop(
        m.pods_provisioning_unstarted_time
            .get_or_create(&Default::default()),
    );
    drop(
        m.pods_scheduling_undecided_time
            .get_or_create(&Default::default()),
    );
    // A summary prints once it has an observation.
    m.pods_startup_duration.observe(&[], 1.0);
    // A simulation in progress: its unfinished work and queue depth, with its id.
    m.solve_tracker()
        .report(karpenter_cluster::reconciler::SolveProgress::Started { pods: 1 });
    drop(
        m.scheduler_pending_by_zone
            .get_or_create(&Default::default()),
    );
    drop(
        m.disruption_evaluation_duration
            .get_or_create(&Default::default()),
    );
    drop(
        m.nodeclaims_instance_termination_duration
            .get_or_create(&Default::default()),
    );
    drop(m.disruption_decisions.get_or_create(&Default::default()));
    drop(
        m.disruption_eligible_nodes
            .get_or_create(&Default::default()),
    );
    drop(m.consolidation_moves.get_or_create(&Default::default()));
    drop(m.consolidation_score.get_or_create(&Default::default()));
    drop(m.nodepools_usage.get_or_create(&Default::default()));
    drop(m.nodepools_limit.get_or_create(&Default::default()));
    drop(m.cluster_utilization.get_or_create(&Default::default()));
    drop(m.interruption_received.get_or_create(&Default::default()));
    drop(m.dry_run_decisions.get_or_create(&Default::default()));
    drop(
        m.dry_run_provisioning_price
            .get_or_create(&Default::default()),
    );
    drop(
        m.dry_run_disruption_savings
            .get_or_create(&Default::default()),
    );
    drop(m.cloudprovider.duration.get_or_create(&Default::default()));
    drop(m.cloudprovider.errors.get_or_create(&Default::default()));
    drop(m.aws.launch_failures.get_or_create(&Default::default()));
    drop(
        m.aws
            .termination_failures
            .get_or_create(&Default::default()),
    );
    drop(m.aws.userdata_bytes.get_or_create(&Default::default()));
    drop(m.aws.sdk_requests.get_or_create(&Default::default()));
    drop(m.aws.sdk_attempts.get_or_create(&Default::default()));
    drop(m.aws.sdk_duration.get_or_create(&Default::default()));
    drop(
        m.aws
            .sdk_attempt_duration
            .get_or_create(&Default::default()),
    );
    drop(m.aws.sdk_retries.get_or_create(&Default::default()));
    drop(
        m.aws
            .instance_status_unhealthy
            .get_or_create(&Default::default()),
    );
    drop(m.aws.batch_size.get_or_create(&Default::default()));
    drop(m.aws.batch_time.get_or_create(&Default::default()));
    drop(
        m.scheduler_unschedulable_pods
            .get_or_create(&Default::default()),
    );
    drop(m.nodes_lifetime_duration.get_or_create(&Default::default()));
    drop(m.leader.get_or_create(&Default::default()));
    // controller-runtime's families: a started stage, a work queue and a slow-path renewal.
    m.runtime.start_controller("provisioner");
    m.runtime
        .begin("provisioner")
        .finish(karpenter_metrics::runtime::ReconcileResult::Success);
    drop(m.runtime.work_queue::<u32>("stores"));
    m.runtime.leader_slow_path("karpenter-leader-election");
    drop(
        m.disruption_decisions_by_nodepool
            .get_or_create(&Default::default()),
    );
    let mut state = ClusterState::new();
    let mut node = karpenter_testing::api::ready(karpenter_testing::api::registering_node(
        "n1",
        "fake://z/n1",
    ));
    let status = node.status.get_or_insert_with(Default::default);
    status.capacity = Some(BTreeMap::from([("cpu".into(), Quantity("2".into()))]));
    status.allocatable = Some(BTreeMap::from([("cpu".into(), Quantity("1".into()))]));
    let record = karpenter_cluster::api_objects::node_record(&node, None).unwrap();
    state.apply(Object::Node(Box::new(record)));
    let mut daemon = karpenter_testing::api::pod_with_conditions(Some("n1"), Some(0), Some(0));
    daemon.metadata.owner_references = Some(vec![OwnerReference {
        kind: "DaemonSet".into(),
        name: "agent".into(),
        controller: Some(true),
        ..OwnerReference::default()
    }]);
    daemon.spec.as_mut().unwrap().containers = vec![Container {
        name: "agent".into(),
        resources: Some(ResourceRequirements {
            requests: Some(BTreeMap::from([("cpu".into(), Quantity("100m".into()))])),
            ..ResourceRequirements::default()
        }),
        ..Container::default()
    }];
    let record = karpenter_cluster::api_objects::pod_record(&daemon)
        .unwrap()
        .unwrap();
    let key = record.pod.key();
    state.apply(Object::Pod(Box::new(record)));
    let daemon = std::sync::Arc::new(daemon);
    let mut pods = karpenter_metrics::pods::PodMetrics::default();
    let touched = [karpenter_cluster::ObjectKey::Pod(key)];
    pods.record(&touched, false, |_| Some(daemon.clone()), &state, 0, m);
    status_conditions(m, &mut state);
    kube_requests(m);
    let mut result = karpenter_disruption::PassResult::default();
    (result.consolidation_timeouts).push(karpenter_disruption::ConsolidationMethod::MultiNode);
    result.budgets.push(karpenter_disruption::PoolBudget {
        node_pool: "default".into(),
        reason: karpenter_cloudprovider::v1::DisruptionReason::Empty,
        allowed: 1,
        disrupting: 0,
    });
    let command = karpenter_disruption::Command {
        reason: karpenter_disruption::Reason::UNDERUTILIZED,
        decision: karpenter_disruption::Decision::Replace,
        candidates: Vec::new(),
        replacements: Vec::new(),
        savings: 0.0,
        explanation: String::new(),
        created_at: 0,
        forceful: false,
        consolidation: Some(karpenter_disruption::ConsolidationMethod::SingleNode),
        repair: None,
    };
    for outcome in [
        karpenter_cluster::orchestration::Outcome::Invalidated {
            command: Box::new(command.clone()),
            reason: String::new(),
        },
        karpenter_cluster::orchestration::Outcome::Abandoned {
            command: Box::new(command),
            node_claim: String::new(),
        },
    ] {
        m.observe(&karpenter_cluster::reconciler::Event::Disruption(outcome));
    }
    m.observe(&karpenter_cluster::reconciler::Event::DisruptionPass {
        drifted: BTreeMap::new(),
        result: Box::new(result),
        seconds: 0.1,
    });
    let mut claim = karpenter_testing::api::node_claim("c1");
    claim.status.get_or_insert_with(Default::default).node_name = "n1".into();
    m.record_repair(&claim, "Ready", 1, "graceful");
    m.record_eviction("200", "n1", &[std::sync::Arc::new(claim)]);
    // A launched claim of a NodePool the index does not have: a cost-tracking error.
    let mut claim = karpenter_testing::api::node_claim("untracked");
    let labels = claim.metadata.labels.get_or_insert_with(Default::default);
    for (k, v) in [
        ("karpenter.sh/nodepool", "nowhere"),
        ("node.kubernetes.io/instance-type", "m5.large"),
        ("topology.kubernetes.io/zone", "z"),
        ("karpenter.sh/capacity-type", "on-demand"),
    ] {
        labels.insert(k.into(), v.into());
    }
    state.apply(Object::NodeClaim(Box::new(claim)));
    let mut index = IndexMetrics::default();
    index.record_nodes(&state, 0, m);
    let types = BTreeMap::from([(
        "default".to_owned(),
        karpenter_testing::instance_types::catalogue(),
    )]);
    index.record_instance_types(&types, 1, m);
}

/// Every kind's status families through real observations: a condition that transitions
/// and an object that terminates, for the index's kinds and an EC2NodeClass.
fn status_conditions(m: &Metrics, state: &mut ClusterState) {
    use karpenter_cloudprovider::v1::StatusConditions;
    use karpenter_cluster::provisioner::time;
    use karpenter_metrics::conditions::{ObjectStatus, StatusKind};
    let mut claim = karpenter_testing::api::node_claim("c1");
    claim.set_false("Launched", "Pending", "", time(0));
    claim.metadata.deletion_timestamp = Some(time(0));
    let pool: karpenter_cloudprovider::v1::NodePool = serde_json::from_value(serde_json::json!({
        "apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "p1"},
        "spec": {"template": {"spec": {"requirements": [], "nodeClassRef":
            {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}}}}
    }))
    .unwrap();
    let mut node = karpenter_testing::api::ready(karpenter_testing::api::registering_node(
        "sn",
        "fake://z/sn",
    ));
    node.metadata.deletion_timestamp = Some(time(0));
    node.metadata.labels = Some([("karpenter.sh/nodepool".into(), "p1".into())].into());
    let record = karpenter_cluster::api_objects::node_record(&node, None).unwrap();
    state.apply(Object::Node(Box::new(record)));
    let node = std::sync::Arc::new(node);
    let lookup = |n: &str| (n == "sn").then(|| node.clone());
    let mut pool = pool;
    pool.set_false("NodeClassReady", "NotFound", "", time(0));
    let mut terminating_pool = pool.clone();
    terminating_pool.metadata.name = Some("p2".into());
    terminating_pool.metadata.deletion_timestamp = Some(time(0));
    for p in [pool, terminating_pool] {
        state.apply(Object::NodePool(Box::new(p)));
    }
    state.apply(Object::NodeClaim(Box::new(claim.clone())));
    m.record_status(&[], true, lookup, state, 1_000);
    claim.set_true("Launched", time(2_000));
    claim.set_true("Drained", time(2_000));
    state.apply(Object::NodeClaim(Box::new(claim)));
    m.record_status(&[], true, lookup, state, 3_000);
    let mut ready = (*node).clone();
    ready.status.as_mut().unwrap().conditions.as_mut().unwrap()[0].status = "False".into();
    m.record_status(
        &[],
        true,
        |_| Some(std::sync::Arc::new(ready.clone())),
        state,
        4_000,
    );
    let mut pool = state.node_pools()["p2"].clone();
    pool.set_true("NodeClassReady", time(5_000));
    state.apply(Object::NodePool(Box::new(pool)));
    m.record_status(&[], true, lookup, state, 6_000);
    let class = |status| ObjectStatus {
        namespace: String::new(),
        name: "default".into(),
        labels: BTreeMap::new(),
        deleting_since: Some(0),
        conditions: vec![karpenter_metrics::conditions::ObservedCondition {
            type_: "Ready".into(),
            status,
            reason: String::new(),
            since: 0,
        }],
    };
    m.record_statuses(StatusKind::Ec2NodeClass, [class("False".into())], 1_000);
    m.record_statuses(StatusKind::Ec2NodeClass, [class("True".into())], 2_000);
    // The terminating objects go, and a second of each stays for the gauges.
    state.delete(&karpenter_cluster::ObjectKey::NodeClaim("c1".into()));
    state.delete(&karpenter_cluster::ObjectKey::NodePool("p2".into()));
    m.record_status(&[], true, |_| None, state, 7_000);
    m.record_status(&[], true, lookup, state, 8_000);
    m.record_statuses(StatusKind::Ec2NodeClass, [], 9_000);
    m.record_statuses(StatusKind::Ec2NodeClass, [class("True".into())], 9_000);
    let mut claim = karpenter_testing::api::node_claim("c2");
    claim.set_true("Launched", time(0));
    claim.metadata.deletion_timestamp = Some(time(0));
    let mut pool = state.node_pools()["p1"].clone();
    pool.metadata.deletion_timestamp = Some(time(0));
    pool.set_true("NodeClassReady", time(9_000));
    state.apply(Object::NodeClaim(Box::new(claim)));
    state.apply(Object::NodePool(Box::new(pool)));
    m.record_status(&[], true, lookup, state, 10_000);
}

/// One request through the Kubernetes client's layer.
fn kube_requests(m: &Metrics) {
    use tower::{Layer, ServiceExt};
    let api = tower::service_fn(|_: http::Request<()>| async {
        Ok::<_, std::convert::Infallible>(http::Response::new(()))
    });
    let request = http::Request::get("/api/v1/pods").body(()).unwrap();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let call = m.kube_client_layer().layer(api).oneshot(request);
    runtime.block_on(call).unwrap();
}

/// The families of `m`'s exposition, under upstream's names (counters with `_total`).
fn ours(m: &Metrics) -> BTreeMap<String, Family> {
    let text = m.encode();
    let mut families: BTreeMap<String, Family> = BTreeMap::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').unwrap();
            let family = Family {
                kind: kind.to_owned(),
                labels: Some(BTreeSet::new()),
                buckets: Vec::new(),
            };
            families.insert(name.to_owned(), family);
        }
    }
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let (series, _) = line.rsplit_once(' ').unwrap();
        let (sample, labels) = match series.split_once('{') {
            Some((s, l)) => (s, &l[..l.len() - 1]),
            None => (series, ""),
        };
        let Some(name) = families
            .keys()
            .filter(|f| sample.starts_with(f.as_str()))
            .max_by_key(|f| f.len())
            .cloned()
        else {
            continue;
        };
        let family = families.get_mut(&name).unwrap();
        for pair in labels.split(',').filter(|p| !p.is_empty()) {
            let (key, value) = pair.split_once('=').unwrap();
            match key {
                "le" if value != "\"+Inf\"" => family
                    .buckets
                    .push(value.trim_matches('"').parse().unwrap()),
                "le" | "quantile" => {}
                _ => {
                    family.labels.as_mut().unwrap().insert(key.to_owned());
                }
            }
        }
    }
    families
        .into_iter()
        .map(|(name, mut f)| {
            // Every series of a family repeats the same bounds.
            f.buckets.sort_by(f64::total_cmp);
            f.buckets.dedup();
            let name = if f.kind == "counter" {
                format!("{name}_total")
            } else {
                name
            };
            (name, f)
        })
        .collect()
}

fn gaps(upstream: &BTreeMap<String, Family>, ours: &BTreeMap<String, Family>) -> Vec<String> {
    let join = |s: &BTreeSet<String>| s.iter().cloned().collect::<Vec<_>>().join(",");
    let mut out = Vec::new();
    for (name, up) in upstream {
        let Some(our) = ours.get(name) else {
            out.push(format!("missing {name}"));
            continue;
        };
        if our.kind != up.kind {
            out.push(format!(
                "type {name} ours={} upstream={}",
                our.kind, up.kind
            ));
        }
        if let (Some(want), Some(have)) = (&up.labels, &our.labels)
            && want != have
        {
            let missing: BTreeSet<String> = want.difference(have).cloned().collect();
            let extra: BTreeSet<String> = have.difference(want).cloned().collect();
            out.push(format!(
                "labels {name} missing={} extra={}",
                join(&missing),
                join(&extra)
            ));
        }
        if up.kind == "histogram" && our.kind == "histogram" && our.buckets != up.buckets {
            out.push(format!("buckets {name}"));
        }
    }
    for name in ours.keys().filter(|n| !upstream.contains_key(*n)) {
        out.push(format!("extra {name}"));
    }
    out
}

#[test]
fn every_difference_from_karpenter_is_listed() {
    let m = Metrics::new();
    fill(&m);
    let found = gaps(&upstream(), &ours(&m));
    let path = dir().join("gaps.txt");
    if std::env::var_os("UPDATE_GAPS").is_some() {
        let mut text = String::from(
            "# Generated by tests/upstream_parity.rs (UPDATE_GAPS=1): how the exported families\n\
             # differ from karpenter-v1.15.1.txt. docs/operator.md (Metrics) explains them.\n",
        );
        for g in &found {
            text.push_str(g);
            text.push('\n');
        }
        std::fs::write(&path, text).unwrap();
    }
    let listed: Vec<String> = std::fs::read_to_string(&path)
        .unwrap_or_default()
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .map(str::to_owned)
        .collect();
    let new: Vec<&String> = found.iter().filter(|g| !listed.contains(g)).collect();
    let fixed: Vec<&String> = listed.iter().filter(|g| !found.contains(g)).collect();
    assert!(
        new.is_empty() && fixed.is_empty(),
        "differences not in gaps.txt: {new:#?}\nlisted but gone (remove them): {fixed:#?}"
    );
}

#[test]
fn the_upstream_list_is_complete() {
    let up = upstream();
    assert_eq!(
        up.len(),
        134,
        "v1.14.1's 126 documented families, the userdata gauge and v1.15's 7 new families"
    );
    let histograms_without_buckets: Vec<&String> = up
        .iter()
        .filter(|(_, f)| f.kind == "histogram" && f.labels.is_some() && f.buckets.is_empty())
        .map(|(n, _)| n)
        .collect();
    assert!(
        histograms_without_buckets.is_empty(),
        "{histograms_without_buckets:?}"
    );
}
