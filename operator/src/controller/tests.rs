//! Reconcile tests against a mocked API server (tower-test): each test scripts the API's
//! answers, runs a reconcile, and asserts on the requests the controller made.

use super::exec::{self, Executed};
use super::fake::ClusterFakeProvider;
use super::leader::LeaderGate;
use super::run::{Controller, Term, run_leader};
use super::state::Writers;
use super::testing::{MockApi, Reply, ctx, mock_client, node, put, status};
use karpenter_cloudprovider::v1::{ConditionType, StatusConditions, labels as v1labels};
use karpenter_cloudprovider::{
    CloudProvider, CloudProviderError, DriftReason, NodeClaim, NodePool, RepairPolicy,
};
use karpenter_cloudprovider_fake::FakeCloudProvider;
use karpenter_cluster::Action;
use karpenter_metrics::Metrics;
use karpenter_scheduling::model::InstanceType;
use karpenter_scheduling::model::PodKey;
use karpenter_testing::api::{node_claim, ready};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

fn fake_provider(client: &kube::Client) -> Arc<dyn CloudProvider> {
    Arc::new(ClusterFakeProvider::new(
        FakeCloudProvider::default(),
        kube::Api::all(client.clone()),
    ))
}

/// Annotation [`Annotating`] puts on every launched claim.
const LAUNCH_ANNOTATION: &str = "example.com/launched-with";

/// A provider whose launches come back annotated, as the aws provider's do (class hash,
/// instance profile); everything else is the inner provider's.
struct Annotating(Arc<dyn CloudProvider>);

#[async_trait::async_trait]
impl CloudProvider for Annotating {
    async fn create(&self, claim: &NodeClaim) -> Result<NodeClaim, CloudProviderError> {
        let mut launched = self.0.create(claim).await?;
        let annotations = launched
            .metadata
            .annotations
            .get_or_insert_with(Default::default);
        annotations.insert(LAUNCH_ANNOTATION.into(), "profile-a".into());
        Ok(launched)
    }
    async fn delete(&self, claim: &NodeClaim) -> Result<(), CloudProviderError> {
        self.0.delete(claim).await
    }
    async fn get(&self, provider_id: &str) -> Result<NodeClaim, CloudProviderError> {
        self.0.get(provider_id).await
    }
    async fn list(&self) -> Result<Vec<NodeClaim>, CloudProviderError> {
        self.0.list().await
    }
    async fn instance_types(
        &self,
        pool: &NodePool,
    ) -> Result<Vec<Arc<InstanceType>>, CloudProviderError> {
        self.0.instance_types(pool).await
    }
    async fn is_drifted(
        &self,
        claim: &NodeClaim,
    ) -> Result<Option<DriftReason>, CloudProviderError> {
        self.0.is_drifted(claim).await
    }
    fn repair_policies(&self) -> Vec<RepairPolicy> {
        self.0.repair_policies()
    }
    fn name(&self) -> &str {
        self.0.name()
    }
}

/// One tick of the shared reconciler over what the stores hold, with `repair_policies`;
/// the actions `keep` selects are carried out (and returned), as a controller pass does.
async fn reconcile_once(
    ctx: &super::Ctx,
    repair_policies: &[karpenter_cloudprovider::RepairPolicy],
    keep: impl Fn(&Action) -> bool,
) -> Vec<Action> {
    use karpenter_cluster::reconciler::{ProviderFacts, Reconciler, ReconcilerSettings};
    let mut state = karpenter_cluster::ClusterState::new();
    let objects = ctx.stores.api_objects();
    karpenter_cluster::feed::Feed::default().sync(
        &mut state,
        &objects.view(),
        &std::collections::BTreeMap::new(),
        0,
    );
    let mut reconciler = Reconciler::new(
        ReconcilerSettings::default(),
        karpenter_cluster::provisioner::NameGenerator::default(),
    );
    let drift = std::collections::BTreeMap::new();
    let facts = ProviderFacts {
        drift: &drift,
        version: 0,
        repair_policies,
        seconds: &|| 0.0,
        solving: &|_| {},
    };
    let actions: Vec<Action> = reconciler
        .tick(&state, &facts, ctx.now_ms())
        .actions
        .into_iter()
        .filter(|a| keep(a))
        .collect();
    for a in &actions {
        exec::execute(ctx, a).await.unwrap();
    }
    actions
}

/// The lifecycle steps of one tick, carried out.
async fn mature(ctx: &super::Ctx) -> Vec<Action> {
    reconcile_once(ctx, &[], Action::is_lifecycle).await
}

fn json<T: serde::Serialize>(v: &T) -> serde_json::Value {
    serde_json::to_value(v).unwrap()
}

#[tokio::test]
async fn launch_register_initialize() {
    let c = node_claim("default-abcde");
    let answer = json(&c);
    let created_node: Arc<Mutex<Option<serde_json::Value>>> = Arc::default();
    let cn = created_node.clone();
    let (client, api) = mock_client(move |req| match (req.method.as_str(), req.uri.as_str()) {
        ("GET", u) if u.starts_with("/api/v1/nodes/") => status(404, "NotFound"),
        ("POST", "/api/v1/nodes?") | ("POST", "/api/v1/nodes") => {
            *cn.lock().unwrap() = Some(req.body.clone());
            (201, req.body.clone())
        }
        ("PATCH", u) if u.contains("/nodes/") => (
            200,
            json(&node("default-abcde", "fake://us-east-1a/default-abcde")),
        ),
        ("PATCH", u) if u.contains("/nodeclaims/") => (200, answer.clone()),
        _ => status(500, "unexpected"),
    });
    let provider = Arc::new(Annotating(fake_provider(&client)));
    let (ctx, mut w, _events) = ctx(client, provider, 60_000);

    // Launch: the provider picks an offering and creates the Node; the claim gets labels
    // and the provider's annotations, then status with Launched=True.
    put(&mut w.node_claims, c.clone());
    assert!(matches!(
        &mature(&ctx).await[..],
        [Action::LaunchInstance { node_claim }] if node_claim == "default-abcde"
    ));
    let reqs = api.requests();
    let status_patch = reqs
        .iter()
        .find(|r| r.method == "PATCH" && r.uri.contains("/status"))
        .expect("status patched");
    let st = &status_patch.body["status"];
    let provider_id = st["providerID"].as_str().unwrap().to_owned();
    assert!(provider_id.starts_with("fake://"), "{provider_id}");
    assert!(st["allocatable"]["cpu"].is_string());
    assert!(
        st["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["type"] == "Launched" && c["status"] == "True")
    );
    assert_eq!(status_patch.body["metadata"]["resourceVersion"], "1");
    let label_patch = reqs
        .iter()
        .find(|r| r.method == "PATCH" && !r.uri.contains("/status"))
        .unwrap();
    assert_eq!(
        label_patch.body["metadata"]["labels"][v1labels::INSTANCE_TYPE],
        "m5.large"
    );
    assert_eq!(
        label_patch.body["metadata"]["annotations"][LAUNCH_ANNOTATION],
        "profile-a"
    );
    let n = created_node.lock().unwrap().clone().expect("node created");
    assert_eq!(n["spec"]["providerID"], provider_id.as_str());
    assert!(
        n["spec"]["taints"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["key"] == v1labels::UNREGISTERED_TAINT_KEY)
    );

    // Register: the Node with the claim's provider ID joined.
    let mut launched = c.clone();
    launched
        .status
        .get_or_insert_with(Default::default)
        .provider_id = provider_id.clone();
    launched.set_true("Launched", karpenter_cluster::provisioner::time(60_000));
    put(&mut w.node_claims, launched.clone());
    put(&mut w.nodes, node("default-abcde", &provider_id));
    let before = api.requests().len();
    assert!(matches!(
        &mature(&ctx).await[..],
        [Action::RegisterNode { node, .. }] if node == "default-abcde"
    ));
    let reqs = api.requests()[before..].to_vec();
    assert!(reqs[0].uri.starts_with("/api/v1/nodes/default-abcde"));
    assert_eq!(
        reqs[0].body["metadata"]["labels"][v1labels::NODE_REGISTERED],
        "true"
    );
    assert!(
        reqs[1].body["status"]["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["type"] == "Registered" && c["status"] == "True")
    );
    assert_eq!(reqs[1].body["status"]["nodeName"], "default-abcde");

    // Initialize: Ready, taints gone, resources reported.
    let mut registered = launched.clone();
    registered.set_true("Registered", karpenter_cluster::provisioner::time(60_000));
    put(&mut w.node_claims, registered.clone());
    let mut n = ready(node("default-abcde", &provider_id));
    n.spec.as_mut().unwrap().taints = None;
    n.status.as_mut().unwrap().allocatable =
        registered.status.as_ref().map(|s| s.allocatable.clone());
    put(&mut w.nodes, n);
    let before = api.requests().len();
    assert!(matches!(
        &mature(&ctx).await[..],
        [Action::InitializeNode { node, .. }] if node == "default-abcde"
    ));
    let reqs = api.requests()[before..].to_vec();
    assert_eq!(
        reqs[0].body["metadata"]["labels"][v1labels::NODE_INITIALIZED],
        "true"
    );
    assert!(
        reqs[1].body["status"]["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["type"] == "Initialized" && c["status"] == "True")
    );
}

#[tokio::test]
async fn insufficient_capacity_deletes_the_claim() {
    let mut c = node_claim("default-ice");
    // No instance type satisfies this requirement.
    c.spec.requirements[0].values = vec!["no-such-type".into()];
    let (client, api) = mock_client(move |req| match req.method.as_str() {
        "GET" => status(404, "NotFound"),
        "PATCH" => (200, json(&node_claim("default-ice"))),
        "DELETE" => (200, json(&node_claim("default-ice"))),
        _ => status(500, "unexpected"),
    });
    let provider = fake_provider(&client);
    let (ctx, mut w, mut events) = ctx(client, provider, 0);
    put(&mut w.node_claims, c.clone());
    mature(&ctx).await;
    let launch = Action::LaunchInstance {
        node_claim: "default-ice".into(),
    };
    assert_eq!(
        exec::execute(&ctx, &launch).await.unwrap(),
        Executed::NoCapacity,
        "the caller learns that offerings changed"
    );
    let reqs = api.requests();
    // As upstream: the claim is deleted, no Launched condition is written first.
    assert!(!reqs.iter().any(|r| r.method == "PATCH"), "{reqs:?}");
    assert!(
        reqs.iter()
            .any(|r| r.method == "DELETE" && r.uri.contains("/nodeclaims/default-ice"))
    );
    assert_eq!(events.try_recv().unwrap().reason, "InsufficientCapacity");
    let text = ctx.metrics.encode();
    assert!(
        // `mature` launched it once already: one count per failed launch.
        text.contains(r#"karpenter_nodeclaims_disrupted_total{reason="insufficient_capacity",nodepool="default",capacity_type="",consolidation_policy="",termination_mode="graceful"} 2"#),
        "{text}"
    );
}

/// A launch error that is neither capacity nor NodeClass keeps the claim: `Launched=Unknown`
/// with the provider's reason, and an error so the launch is retried (upstream's policy).
#[tokio::test]
async fn other_launch_errors_keep_the_claim_for_a_retry() {
    let mut c = node_claim("default-bad");
    c.spec.resources.requests.insert(
        "cpu".into(),
        k8s_openapi::apimachinery::pkg::api::resource::Quantity("lots".into()),
    );
    let (client, api) = mock_client(move |req| match req.method.as_str() {
        "GET" => status(404, "NotFound"),
        "PATCH" => (200, json(&node_claim("default-bad"))),
        _ => status(500, "unexpected"),
    });
    let provider = fake_provider(&client);
    let (ctx, mut w, mut events) = ctx(client, provider, 0);
    put(&mut w.node_claims, c.clone());
    let launch = Action::LaunchInstance {
        node_claim: "default-bad".into(),
    };
    assert!(exec::execute(&ctx, &launch).await.is_err(), "retried");
    let reqs = api.requests();
    assert!(!reqs.iter().any(|r| r.method == "DELETE"), "{reqs:?}");
    assert!(reqs.iter().any(|r| {
        r.method == "PATCH"
            && r.body["status"]["conditions"].as_array().is_some_and(|cs| {
                cs.iter().any(|c| {
                    c["type"] == "Launched"
                        && c["status"] == "Unknown"
                        && c["reason"] == "InvalidResourceRequests"
                })
            })
    }));
    assert_eq!(events.try_recv().unwrap().reason, "InvalidResourceRequests");
}

#[tokio::test]
async fn pdb_blocked_eviction_is_retried_until_allowed() {
    let calls = Arc::new(AtomicUsize::new(0));
    let n = calls.clone();
    let (client, api) = mock_client(move |req| {
        assert!(
            req.uri.ends_with("/pods/web-0/eviction") || req.uri.contains("/pods/web-0/eviction?")
        );
        if n.fetch_add(1, Ordering::SeqCst) < 2 {
            status(429, "TooManyRequests")
        } else {
            (
                201,
                serde_json::json!({"kind": "Status", "apiVersion": "v1", "status": "Success"}),
            )
        }
    });
    let provider = fake_provider(&client);
    let (ctx, _w, _events) = ctx(client, provider, 0);
    let pod = PodKey::new("default", "web-0");
    let action = Action::EvictPod {
        pod: pod.clone(),
        node: "n1".into(),
    };
    assert_eq!(
        exec::execute(&ctx, &action).await.unwrap(),
        Executed::Blocked
    );
    assert_eq!(
        exec::execute(&ctx, &action).await.unwrap(),
        Executed::Blocked
    );
    assert_eq!(exec::execute(&ctx, &action).await.unwrap(), Executed::Done);
    assert_eq!(api.requests().len(), 3);
    assert!(
        api.requests()
            .iter()
            .all(|r| r.method == "POST" && r.uri.contains("/eviction"))
    );
    let text = ctx.metrics.encode();
    assert!(
        text.contains("karpenter_pods_eviction_requests_total{code=\"429\"} 2"),
        "{text}"
    );
    assert!(
        text.contains("karpenter_pods_eviction_requests_total{code=\"201\"} 1")
            || text.contains("code=\"200\"} 1"),
        "{text}"
    );
}

fn deleting(mut c: NodeClaim) -> NodeClaim {
    c.metadata.deletion_timestamp = Some(karpenter_cluster::provisioner::time(1_000));
    c
}

#[tokio::test]
async fn termination_drains_then_terminates_and_removes_finalizers() {
    let provider_id = "fake://us-east-1a/default-term";
    let mut c = node_claim("default-term");
    c.status.get_or_insert_with(Default::default).provider_id = provider_id.into();
    c.set_true("Launched", karpenter_cluster::provisioner::time(0));
    c.set_true("Registered", karpenter_cluster::provisioner::time(0));
    let c = deleting(c);
    let mut n = ready(node("default-term", provider_id));
    n.metadata.finalizers = Some(vec![v1labels::TERMINATION_FINALIZER.into()]);
    n.metadata.deletion_timestamp = Some(karpenter_cluster::provisioner::time(1_500));
    let node_json = json(&n);
    let claim_json = json(&c);
    let (client, api) = mock_client(move |req| match (req.method.as_str(), req.uri.as_str()) {
        ("GET", u) if u.starts_with("/api/v1/nodes/default-term") => (200, node_json.clone()),
        ("PATCH", u) if u.starts_with("/api/v1/nodes/") => (200, node_json.clone()),
        ("PATCH", u) if u.contains("/nodeclaims/") => (200, claim_json.clone()),
        _ => status(500, "unexpected"),
    });
    let provider = fake_provider(&client);
    let (ctx, mut w, _events) = ctx(client, provider, 5_000);
    put(&mut w.node_claims, c.clone());
    put(&mut w.nodes, n);
    exec::terminate_instance(&ctx, "default-term")
        .await
        .unwrap();
    let reqs = api.requests();
    // VolumesDetached (no attachments), provider delete (the Node is already terminating),
    // then the Node's finalizer, then the claim's — in that order.
    let mut patches: Vec<_> = reqs.iter().filter(|r| r.method == "PATCH").collect();
    assert_eq!(patches.len(), 3, "{reqs:?}");
    let volumes = patches.remove(0);
    assert!(volumes.uri.contains("/nodeclaims/default-term/status"));
    assert!(
        volumes.body["status"]["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["type"] == "VolumesDetached" && c["status"] == "True"),
        "{}",
        volumes.body
    );
    assert!(patches[0].uri.starts_with("/api/v1/nodes/default-term"));
    assert_eq!(
        patches[0].body["metadata"]["finalizers"],
        serde_json::json!([])
    );
    assert!(patches[1].uri.contains("/nodeclaims/default-term"));
    assert_eq!(
        patches[1].body["metadata"]["finalizers"],
        serde_json::json!([])
    );
    assert_eq!(patches[1].body["metadata"]["resourceVersion"], "1");
    let text = ctx.metrics.encode();
    assert!(
        text.contains("karpenter_nodeclaims_terminated_total{nodepool=\"default\""),
        "{text}"
    );
}

#[tokio::test]
async fn volume_attachments_hold_termination() {
    use k8s_openapi::api::storage::v1::{
        VolumeAttachment, VolumeAttachmentSource, VolumeAttachmentSpec,
    };
    let provider_id = "fake://us-east-1a/default-vol";
    let mut c = node_claim("default-vol");
    c.status.get_or_insert_with(Default::default).provider_id = provider_id.into();
    let c = deleting(c);
    let echo = c.clone();
    let pv = serde_json::json!({"apiVersion": "v1", "kind": "PersistentVolume",
        "metadata": {"name": "pv-1"}, "spec": {"claimRef": {"namespace": "prod", "name": "data"}}});
    let (client, api) = mock_client(move |req| match req.method.as_str() {
        "PATCH" => (200, json(&echo)),
        "GET" if req.uri.contains("/persistentvolumes/pv-1") => (200, pv.clone()),
        _ => status(500, "unexpected"),
    });
    let provider = fake_provider(&client);
    let (ctx, mut w, _events) = ctx(client, provider, 5_000);
    put(&mut w.node_claims, c);
    put(&mut w.nodes, node("default-vol", provider_id));
    let attachment = |name: &str, pv: Option<&str>| VolumeAttachment {
        metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        },
        spec: VolumeAttachmentSpec {
            attacher: "ebs.csi.aws.com".into(),
            node_name: "default-vol".into(),
            source: VolumeAttachmentSource {
                persistent_volume_name: pv.map(str::to_owned),
                ..Default::default()
            },
        },
        status: None,
    };
    // An inline volume (no PersistentVolume) does not hold termination, as upstream.
    put(&mut w.volume_attachments, attachment("va-inline", None));
    assert_eq!(
        exec::pending_volume_attachments(&ctx, "default-vol").await,
        0
    );
    put(&mut w.volume_attachments, attachment("va-1", Some("pv-1")));
    // The volume of a pod that cannot be drained (it tolerates the disrupted taint) does
    // not hold termination either: nothing will detach it first.
    let pod_with_claim = |tolerant: bool| -> k8s_openapi::api::core::v1::Pod {
        let tolerations = if tolerant {
            serde_json::json!([{"operator": "Exists"}])
        } else {
            serde_json::json!([])
        };
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "db-0", "namespace": "prod"},
            "spec": {"nodeName": "default-vol", "containers": [], "tolerations": tolerations,
                     "volumes": [{"name": "d", "persistentVolumeClaim": {"claimName": "data"}}]}
        }))
        .unwrap()
    };
    put(&mut w.pods, pod_with_claim(true));
    assert_eq!(
        exec::pending_volume_attachments(&ctx, "default-vol").await,
        0
    );
    put(&mut w.pods, pod_with_claim(false));
    assert_eq!(
        exec::pending_volume_attachments(&ctx, "default-vol").await,
        1
    );
    let before = api.requests().len();
    exec::terminate_instance(&ctx, "default-vol").await.unwrap();
    let requests = api.requests().split_off(before);
    assert_eq!(
        requests.len(),
        1,
        "only the condition is written while volumes are attached"
    );
    let conditions = &requests[0].body["status"]["conditions"];
    let volumes = conditions
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == "VolumesDetached")
        .unwrap();
    assert_eq!(volumes["status"], "Unknown");
    assert_eq!(volumes["reason"], "AwaitingVolumeDetachment");
}

#[tokio::test]
async fn conflicts_and_server_errors_are_retried_without_loss() {
    // A 409 on the guarded taint patch fails this attempt (the next pass re-reads); a 500
    // and a 429 on the idempotent delete are retried in place.
    let calls = Arc::new(AtomicUsize::new(0));
    let n = calls.clone();
    let (client, api) = mock_client(move |req| {
        let i = n.fetch_add(1, Ordering::SeqCst);
        match (req.method.as_str(), i) {
            ("PATCH", 0) => status(409, "Conflict"),
            ("PATCH", _) => (200, json(&node("n1", "fake://z/n1"))),
            ("DELETE", 2) => status(500, "InternalError"),
            ("DELETE", 3) => status(429, "TooManyRequests"),
            ("DELETE", _) => (200, json(&node_claim("c1"))),
            _ => status(500, "unexpected"),
        }
    });
    let provider = fake_provider(&client);
    let (ctx, mut w, _events) = ctx(client, provider, 0);
    put(&mut w.nodes, node("n1", "fake://z/n1"));
    let err = exec::set_disrupted_taint(&ctx, "n1", true)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("n1"), "{err}");
    exec::set_disrupted_taint(&ctx, "n1", true).await.unwrap();
    let reqs = api.requests();
    assert!(
        reqs[1].body["spec"]["taints"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["key"] == v1labels::DISRUPTED_TAINT_KEY)
    );
    assert_eq!(reqs[1].body["metadata"]["resourceVersion"], "1");
    tokio::time::pause();
    exec::delete_node_claim(&ctx, "c1").await.unwrap();
    let deletes = api
        .requests()
        .iter()
        .filter(|r| r.method == "DELETE")
        .count();
    assert_eq!(deletes, 3);
}

#[tokio::test]
async fn permanent_errors_surface_and_name_the_object() {
    let (client, _api) = mock_client(|_| status(422, "Invalid"));
    let provider = fake_provider(&client);
    let (ctx, _w, _events) = ctx(client, provider, 0);
    let err = exec::delete_node_claim(&ctx, "bad-claim")
        .await
        .unwrap_err();
    assert!(err.to_string().contains("bad-claim"), "{err}");
}

#[tokio::test]
async fn a_replica_that_is_not_leader_writes_nothing_and_leadership_loss_stops_it() {
    let (client, api) = mock_client(|_| status(500, "unexpected"));
    let provider = fake_provider(&client);
    let (ctx, mut w, _events) = ctx(client, provider, 0);
    // A claim that would need a finalizer: a leader would patch it.
    let mut c = node_claim("default-x");
    c.metadata.finalizers = None;
    put(&mut w.node_claims, c);
    let (tx, rx) = tokio::sync::watch::channel(true);
    let mut gate = LeaderGate::from_receiver(rx);
    let mut controller = Controller::new(ctx);
    let changed = tokio::sync::Notify::new();
    tx.send(false).unwrap();
    let mut signal = std::pin::pin!(std::future::pending::<anyhow::Result<()>>());
    let result = tokio::time::timeout(
        std::time::Duration::from_secs(5),
        run_leader(&mut controller, &mut gate, &changed, &mut signal),
    )
    .await
    .expect("returns promptly");
    assert_eq!(result.unwrap(), Term::LostLeadership);
    assert!(
        api.requests().is_empty(),
        "no writes after leadership is lost"
    );
}

/// A controller with one NodeClaim that lacks its finalizer, over an API that answers
/// PATCHes with `patched` and lists nothing.
fn claim_without_finalizer(patched: Reply) -> (Controller, Writers, Metrics, MockApi) {
    let (client, api) = mock_client(move |req| match req.method.as_str() {
        "PATCH" => patched.clone(),
        "GET" => (
            200,
            serde_json::json!({"apiVersion": "v1", "kind": "NodeList", "metadata": {}, "items": []}),
        ),
        _ => status(404, "NotFound"),
    });
    let provider = fake_provider(&client);
    let (ctx, mut w, _events) = ctx(client, provider, 0);
    let mut c = node_claim("default-x");
    c.metadata.finalizers = None;
    put(&mut w.node_claims, c);
    let metrics = ctx.metrics.clone();
    (Controller::new(ctx), w, metrics, api)
}

#[tokio::test]
async fn leader_pass_adds_missing_finalizer() {
    let patched = (200, json(&node_claim("default-x")));
    let (mut controller, _w, metrics, api) = claim_without_finalizer(patched);
    controller.pass().await;
    // The disruption poll ran and reported what each method could act on.
    let text = metrics.encode();
    for reason in ["empty", "drifted", "underutilized"] {
        assert!(
            text.contains(&format!(
                "karpenter_voluntary_disruption_eligible_nodes{{reason=\"{reason}\"}} 0"
            )),
            "{text}"
        );
    }
    let reqs = api.requests();
    let patch = reqs
        .iter()
        .find(|r| r.method == "PATCH" && r.uri.contains("/nodeclaims/default-x"))
        .expect("finalizer patch");
    assert_eq!(
        patch.body["metadata"]["finalizers"][0],
        v1labels::TERMINATION_FINALIZER
    );
    assert_eq!(patch.body["metadata"]["resourceVersion"], "1");
    let _ = ConditionType::Launched;
}

#[tokio::test]
async fn a_pass_counts_its_stages_and_queues_the_object_of_a_failed_action_again() {
    use karpenter_cluster::ObjectKey;
    let failing = status(500, "InternalError");
    let (mut controller, w, metrics, _api) = claim_without_finalizer(failing);
    w.dirty.add(ObjectKey::NodeClaim("default-x".into()));
    controller.pass().await;
    let text = metrics.encode();
    for want in [
        // The finalizer patch failed: the tick's stage is an error, the claim is retried.
        "controller_runtime_reconcile_total{controller=\"reconciler\",result=\"error\"} 1",
        "controller_runtime_reconcile_errors_total{controller=\"reconciler\"} 1",
        "controller_runtime_reconcile_total{controller=\"state\",result=\"success\"} 1",
        "controller_runtime_reconcile_time_seconds_count{controller=\"nodeclaim.garbagecollection\"} 1",
        "workqueue_retries_total{name=\"state\",controller=\"state\"} 1",
        "workqueue_queue_duration_seconds_count{name=\"state\",controller=\"state\"} 1",
        "controller_runtime_active_workers{controller=\"reconciler\"} 0",
    ] {
        assert!(text.contains(want), "missing {want:?} in\n{text}");
    }
    let (_, again) = w.dirty.take();
    assert!(again.contains(&ObjectKey::NodeClaim("default-x".into())));
}

#[tokio::test]
async fn node_repair_annotates_and_deletes_the_unhealthy_claim() {
    use k8s_openapi::api::core::v1::NodeCondition;
    let (client, api) = mock_client(|req| match req.method.as_str() {
        "PATCH" | "DELETE" => (200, json(&node_claim("sick"))),
        _ => status(500, "unexpected"),
    });
    let provider = fake_provider(&client);
    // 31 minutes after the node went NotReady at 0 (the fake provider tolerates 30).
    let (ctx, mut w, _events) = ctx(client, provider, 31 * 60_000);
    for (name, ready_status) in [("sick", "False"), ("ok-1", "True"), ("ok-2", "True")] {
        let pid = format!("fake://us-east-1a/{name}");
        let mut c = node_claim(name);
        c.status.get_or_insert_with(Default::default).provider_id = pid.clone();
        put(&mut w.node_claims, c);
        let mut n = node(name, &pid);
        n.status.get_or_insert_with(Default::default).conditions = Some(vec![NodeCondition {
            type_: "Ready".into(),
            status: ready_status.into(),
            last_transition_time: Some(karpenter_cluster::provisioner::time(0)),
            ..NodeCondition::default()
        }]);
        put(&mut w.nodes, n);
    }
    let repairs = reconcile_once(&ctx, &ctx.provider.repair_policies(), |a| {
        matches!(a, Action::RepairNodeClaim { .. })
    })
    .await;
    assert!(
        matches!(&repairs[..], [Action::RepairNodeClaim { node_claim, condition, .. }] if node_claim == "sick" && condition == "Ready")
    );
    let reqs = api.requests();
    assert_eq!(reqs.len(), 2, "{reqs:?}");
    assert_eq!(reqs[0].method, "PATCH");
    assert!(reqs[0].uri.contains("/nodeclaims/sick"));
    assert_eq!(
        reqs[0].body["metadata"]["annotations"]
            [v1labels::NODECLAIM_TERMINATION_TIMESTAMP_ANNOTATION],
        "1970-01-01T00:31:00Z"
    );
    assert_eq!(reqs[1].method, "DELETE");
    assert!(reqs[1].uri.contains("/nodeclaims/sick"));
    assert!(
        ctx.metrics
            .encode()
            .contains(r#"karpenter_nodeclaims_disrupted_total{reason="unhealthy",nodepool="default",capacity_type="",consolidation_policy="",termination_mode="graceful"} 1"#)
    );
}

#[tokio::test]
async fn a_pod_that_fits_nowhere_gets_one_failed_scheduling_event_per_reason() {
    use std::sync::atomic::AtomicI64;
    let (client, _api) = mock_client(|req| match req.method.as_str() {
        "GET" => (
            200,
            serde_json::json!({"apiVersion": "v1", "kind": "List", "metadata": {}, "items": []}),
        ),
        _ => status(404, "NotFound"),
    });
    let provider = fake_provider(&client);
    let (mut ctx, mut w, mut events) = ctx(client, provider, 0);
    let now = Arc::new(AtomicI64::new(0));
    let clock = now.clone();
    ctx.clock =
        Arc::new(move || jiff::Timestamp::from_millisecond(clock.load(Ordering::SeqCst)).unwrap());
    let pod: k8s_openapi::api::core::v1::Pod = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "huge", "namespace": "default", "uid": "u-huge", "resourceVersion": "1"},
        "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "5000"}}}]},
        "status": {"conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]}
    }))
    .unwrap();
    put(&mut w.pods, pod);
    let mut controller = Controller::new(ctx);
    let failed = |events: &mut tokio::sync::mpsc::UnboundedReceiver<_>| {
        let mut out: Vec<super::events::Published> = Vec::new();
        while let Ok(e) = events.try_recv() {
            out.push(e);
        }
        out.into_iter()
            .filter(|e| e.reason == "FailedScheduling")
            .map(|e| (e.regarding.name.unwrap_or_default(), e.normal))
            .collect::<Vec<_>>()
    };
    controller.pass().await;
    assert!(failed(&mut events).is_empty(), "the batch is still open");
    now.store(2_000, Ordering::SeqCst);
    controller.pass().await;
    assert_eq!(failed(&mut events), vec![("huge".to_owned(), false)]);
    // Planned again after the re-plan period, for the same reason: no second event.
    for t in [35_000, 37_000] {
        now.store(t, Ordering::SeqCst);
        controller.pass().await;
    }
    assert!(failed(&mut events).is_empty());
}

#[test]
fn reported_keys_become_present_objects_or_deletions() {
    use karpenter_cluster::ObjectKey;
    let metrics = karpenter_metrics::Metrics::new();
    let (stores, mut w) = super::state::stores(metrics.runtime.work_queue("state"), false, false);
    put(&mut w.node_claims, node_claim("kept"));
    for key in [
        ObjectKey::NodeClaim("kept".into()),
        ObjectKey::NodeClaim("gone".into()),
        ObjectKey::Pod(PodKey::new("default", "gone")),
    ] {
        w.dirty.add(key);
    }
    let (relisted, keys) = stores.dirty.take();
    assert!(!relisted);
    let changes = stores.changes(&keys);
    let view = changes.view();
    assert_eq!(view.present.node_claims.len(), 1);
    assert_eq!(view.present.node_claims[0].name(), "kept");
    assert_eq!(
        view.deleted,
        &[
            ObjectKey::NodeClaim("gone".into()),
            ObjectKey::Pod(PodKey::new("default", "gone"))
        ]
    );
    assert!(stores.dirty.take().1.is_empty(), "taken once");
}

#[tokio::test]
async fn balanced_moves_are_counted_scored_and_approvals_told() {
    use karpenter_cloudprovider::v1::ConsolidationPolicy;
    use karpenter_disruption::{
        CandidateRef, ConsolidationMethod, Decision, PoolScore, PoolTotals, ScoreResult, ScoredMove,
    };
    let (client, _api) = mock_client(|_| status(500, "unexpected"));
    let provider = fake_provider(&client);
    let (ctx, mut w, mut events) = ctx(client, provider, 0);
    put(&mut w.nodes, node("n1", "fake://us-east-1a/n1"));
    put(&mut w.node_claims, node_claim("c1"));
    let pool: karpenter_cloudprovider::NodePool = serde_json::from_value(serde_json::json!({
        "apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "b"},
        "spec": {"template": {"spec": {"nodeClassRef": {"group": "karpenter.k8s.aws",
            "kind": "EC2NodeClass", "name": "default"}, "requirements": []}}}
    }))
    .unwrap();
    put(&mut w.node_pools, pool);
    let scored = |savings_fraction: f64| PoolScore {
        node_pool: "b".into(),
        policy: ConsolidationPolicy::Balanced,
        savings: 1.0,
        disruption_cost: 1.0,
        totals: PoolTotals {
            total_cost: 10.0,
            total_disruption_cost: 10.0,
        },
        score: Some(ScoreResult {
            savings_fraction,
            disruption_fraction: 0.1,
            k: 2,
        }),
    };
    let single = |savings_fraction: f64| ScoredMove {
        method: ConsolidationMethod::SingleNode,
        decision: Decision::Delete,
        candidates: vec![CandidateRef {
            node: "n1".into(),
            node_claim: "c1".into(),
            node_pool: "b".into(),
            price: 1.0,
            pods: Vec::new(),
        }],
        savings: 1.0,
        approved: savings_fraction >= 0.05,
        pools: vec![scored(savings_fraction)],
    };
    let multi = ScoredMove {
        method: ConsolidationMethod::MultiNode,
        pools: vec![scored(0.2)],
        ..single(0.2)
    };
    let moves = vec![single(0.1), single(0.01), multi];
    // The controller publishes the approvals and records every event's metrics.
    super::consolidation::publish(&ctx, &moves);
    ctx.metrics
        .observe(&karpenter_cluster::reconciler::Event::DisruptionPass {
            drifted: Default::default(),
            result: Box::new(karpenter_disruption::PassResult {
                scored_moves: moves,
                ..Default::default()
            }),
            seconds: 0.0,
        });
    let text = ctx.metrics.encode();
    assert!(
        text.contains(r#"karpenter_consolidation_moves_total{decision="approved",nodepool="b",policy="Balanced"} 2"#),
        "{text}"
    );
    assert!(text.contains(
        r#"karpenter_consolidation_moves_total{decision="rejected",nodepool="b",policy="Balanced"} 1"#
    ));
    assert!(text.contains(
        r#"karpenter_consolidation_score_bucket{le="0.5",decision="rejected",nodepool="b",policy="Balanced"} 1"#
    ), "the rejected single move scored 0.1: {text}");
    let mut told = Vec::new();
    while let Ok(e) = events.try_recv() {
        told.push((e.regarding.kind.unwrap_or_default(), e.reason, e.message));
    }
    assert_eq!(
        told.iter()
            .map(|(k, r, _)| (k.as_str(), r.as_str()))
            .collect::<Vec<_>>(),
        [
            ("Node", "ConsolidationApproved"),
            ("NodeClaim", "ConsolidationApproved"),
            ("NodePool", "ConsolidationApproved"),
        ],
        "approvals only, rejections are not told"
    );
    assert_eq!(
        told[0].2,
        "score 1.00 >= threshold 0.50 (k: 2, savings 10.0%, disruption 10.0%)"
    );
}

#[tokio::test]
async fn cluster_state_observability_can_be_turned_off() {
    for disabled in [false, true] {
        let patched = (200, json(&node_claim("default-x")));
        let (client, _api) = mock_client(move |req| match req.method.as_str() {
            "PATCH" => patched.clone(),
            _ => status(404, "NotFound"),
        });
        let provider = fake_provider(&client);
        let (mut ctx, mut w, _events) = ctx(client, provider, 0);
        ctx.settings.disable_cluster_state_observability = disabled;
        let mut claim = node_claim("default-x");
        claim.set_true("Launched", karpenter_cluster::provisioner::time(0));
        put(&mut w.node_claims, claim);
        let metrics = ctx.metrics.clone();
        Controller::new(ctx).pass().await;
        let text = metrics.encode();
        let exported = text
            .lines()
            .any(|l| l.starts_with("operator_nodeclaim_status_condition_count{"));
        assert_eq!(exported, !disabled, "disabled {disabled}:\n{text}");
        // The controller's own families stay.
        assert!(
            text.contains("controller_runtime_reconcile_total"),
            "{text}"
        );
    }
}
