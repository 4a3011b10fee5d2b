//! The `aws` provider's controller hooks against a mocked API server, and the interruption
//! queue end to end against the moto emulator (`scripts/aws-emulator.sh`, started by
//! `scripts/test.sh`): real EventBridge JSON in SQS ends as a notice for the index, whose
//! tick deletes the NodeClaim (`karpenter_cluster`'s and `interruptions`' tests).

use super::aws::{AwsHooks, InterruptionHandler, NODE_CLASS_FINALIZER};
use super::provider::ProviderHooks;
use super::testing::{Seen, ctx, mock_client, node, put, status};
use karpenter_cloudprovider::v1::labels as v1labels;
use karpenter_cloudprovider::{CloudProvider, NodeClaim};
use karpenter_cloudprovider_aws::capacity_reservation::Availability;
use karpenter_cloudprovider_aws::instance_profile::profile_name;
use karpenter_cloudprovider_aws::interruption::{InterruptionSink, samples};
use karpenter_cloudprovider_aws::nodeclass::from_yaml;
use karpenter_cloudprovider_aws::{
    AwsClients, AwsCloudProvider, AwsSettings, InterruptionEvent, InterruptionKind,
    InterruptionPoller, NodeClaimInterruption, SystemClock, UnavailableOfferings,
};
use karpenter_metrics::Metrics;
use karpenter_testing::api::node_claim;
use kube::runtime::reflector;
use std::sync::Arc;
use std::time::SystemTime;

const REGION: &str = "us-east-1";
const INSTANCE: &str = "i-0123456789abcdef0";

fn emulator(test: &str) -> Option<String> {
    match std::env::var("KARPENTER_AWS_TEST_ENDPOINT") {
        Ok(e) if !e.is_empty() => Some(e),
        // CI always runs the suite through scripts/test.sh, which starts the emulator; a
        // missing endpoint there means these tests silently stopped running.
        _ if std::env::var("CI").is_ok_and(|v| v == "true") => {
            panic!("{test}: KARPENTER_AWS_TEST_ENDPOINT is unset under CI")
        }
        _ => {
            eprintln!("SKIPPED {test}: KARPENTER_AWS_TEST_ENDPOINT is unset");
            None
        }
    }
}

/// A launched spot claim on `INSTANCE` with its labels.
fn spot_claim(name: &str) -> NodeClaim {
    let mut c = node_claim(name);
    c.status.get_or_insert_with(Default::default).provider_id =
        format!("aws:///us-east-1a/{INSTANCE}");
    let labels = c.metadata.labels.get_or_insert_with(Default::default);
    labels.insert(v1labels::INSTANCE_TYPE.into(), "m5.large".into());
    labels.insert(v1labels::ZONE.into(), "us-east-1a".into());
    labels.insert(v1labels::CAPACITY_TYPE.into(), "spot".into());
    c
}

fn event(kind: InterruptionKind) -> NodeClaimInterruption {
    NodeClaimInterruption {
        node_claim: "spot-a".into(),
        event: InterruptionEvent {
            instance_id: INSTANCE.into(),
            kind,
            time: SystemTime::now(),
        },
    }
}

/// The notices the handler handed towards the index, by NodeClaim.
fn notices(ctx: &super::Ctx) -> Vec<(String, InterruptionKind)> {
    let held = ctx.interruptions.notices();
    held.into_iter().map(|(c, n)| (c, n.kind)).collect()
}

fn unavailable() -> Arc<UnavailableOfferings> {
    Arc::new(UnavailableOfferings::new(Arc::new(SystemClock)))
}

/// The handler over `ctx` with fresh offering and reservation state.
fn handler(ctx: super::Ctx) -> InterruptionHandler {
    InterruptionHandler {
        ctx,
        unavailable: unavailable(),
        reservations: Arc::default(),
    }
}

fn provider_stub() -> Arc<dyn CloudProvider> {
    Arc::new(karpenter_cloudprovider_fake::FakeCloudProvider::default())
}

#[tokio::test]
async fn spot_interruption_marks_the_offering_and_hands_the_notice_to_the_index() {
    let (client, api) = mock_client(|_| status(500, "unexpected"));
    let (ctx, mut w, mut events) = ctx(client, provider_stub(), 60_000);
    put(&mut w.node_claims, spot_claim("spot-a"));
    put(
        &mut w.nodes,
        node("ip-10-0-0-1", &format!("aws:///us-east-1a/{INSTANCE}")),
    );
    let offerings = unavailable();
    let handler = InterruptionHandler {
        ctx: ctx.clone(),
        unavailable: offerings.clone(),
        reservations: Arc::default(),
    };

    assert_eq!(handler.node_claim_for(INSTANCE).as_deref(), Some("spot-a"));
    assert_eq!(handler.node_claim_for("i-0000000000000000f"), None);

    handler
        .deliver(event(InterruptionKind::SpotInterruption))
        .await
        .expect("handled");
    // The deletion is the tick's (disruption's forceful path), not the handler's.
    assert!(api.requests().is_empty(), "{:?}", api.requests());
    assert_eq!(
        notices(&ctx),
        [("spot-a".to_owned(), InterruptionKind::SpotInterruption)]
    );
    assert!(offerings.is_unavailable("m5.large", "us-east-1a", "spot"));
    assert!(!offerings.is_unavailable("m5.large", "us-east-1a", "on-demand"));
    let mut reasons = Vec::new();
    while let Ok(e) = events.try_recv() {
        reasons.push((e.regarding.kind.unwrap_or_default(), e.reason));
    }
    let on_receipt = [
        ("Node".to_owned(), "SpotInterrupted".to_owned()),
        ("NodeClaim".to_owned(), "SpotInterrupted".to_owned()),
    ];
    reasons.sort();
    assert_eq!(reasons, on_receipt);
    let text = ctx.metrics.encode();
    assert!(
        !text.contains("karpenter_nodeclaims_disrupted_total{"),
        "counted when deleted: {text}"
    );
}

#[tokio::test]
async fn rebalance_recommendation_only_records() {
    let (client, api) = mock_client(|_| status(500, "unexpected"));
    let (ctx, mut w, mut events) = ctx(client, provider_stub(), 60_000);
    put(&mut w.node_claims, spot_claim("spot-a"));
    let offerings = unavailable();
    let handler = InterruptionHandler {
        ctx: ctx.clone(),
        unavailable: offerings.clone(),
        reservations: Arc::default(),
    };
    handler
        .deliver(event(InterruptionKind::RebalanceRecommendation))
        .await
        .expect("handled");
    assert!(api.requests().is_empty(), "{:?}", api.requests());
    // Held in the index, where it replaces nothing.
    let rebalance = InterruptionKind::RebalanceRecommendation;
    assert_eq!(notices(&ctx), [("spot-a".to_owned(), rebalance)]);
    assert!(!offerings.is_unavailable("m5.large", "us-east-1a", "spot"));
    let e = events.try_recv().expect("an event");
    assert_eq!(e.reason, "SpotRebalanceRecommendation");
}

#[tokio::test]
async fn a_reservation_interruption_empties_the_reservation_and_hands_the_notice_on() {
    let (client, api) = mock_client(|_| status(500, "unexpected"));
    let (ctx, mut w, mut events) = ctx(client, provider_stub(), 60_000);
    let mut c = spot_claim("spot-a");
    let labels = c.metadata.labels.get_or_insert_with(Default::default);
    labels.insert(v1labels::CAPACITY_TYPE.into(), "reserved".into());
    labels.insert(
        karpenter_scheduling::labels::AWS_CAPACITY_RESERVATION_ID.into(),
        "cr-1".into(),
    );
    put(&mut w.node_claims, c);
    let reservations: Arc<Availability> = Arc::default();
    reservations.sync([("cr-1".to_owned(), 3)]);
    let handler = InterruptionHandler {
        ctx: ctx.clone(),
        unavailable: unavailable(),
        reservations: reservations.clone(),
    };
    let kind = InterruptionKind::CapacityReservationInterruption;
    handler.deliver(event(kind)).await.expect("handled");
    assert!(api.requests().is_empty(), "{:?}", api.requests());
    assert_eq!(notices(&ctx), [("spot-a".to_owned(), kind)]);
    assert_eq!(
        reservations.available("cr-1"),
        0,
        "no new claim goes into it"
    );
    let e = events.try_recv().expect("an event");
    assert_eq!(e.reason, "CapacityReservationInstanceInterrupted");
}

#[tokio::test]
async fn a_failed_stamp_is_reported_so_the_message_stays_queued() {
    let (client, api) = mock_client(|_| status(403, "Forbidden"));
    let (ctx, mut w, _events) = ctx(client, provider_stub(), 60_000);
    put(&mut w.node_claims, spot_claim("spot-a"));
    let handler = handler(ctx.clone());
    let err = handler
        .deliver(event(InterruptionKind::InstanceStatus))
        .await
        .expect_err("the stamp failed");
    assert_eq!(err.node_claim, "spot-a");
    assert!(err.message.contains("403") || err.message.contains("Forbidden"));
    assert_eq!(writes(&api.requests()).len(), 1);
    assert_eq!(notices(&ctx), [], "handed on once stamped");
}

#[tokio::test]
async fn claims_already_deleting_are_left_alone() {
    let (client, api) = mock_client(|_| status(500, "unexpected"));
    let (ctx, mut w, _events) = ctx(client, provider_stub(), 60_000);
    let mut c = spot_claim("spot-a");
    c.metadata.deletion_timestamp = Some(karpenter_cluster::provisioner::time(1_000));
    // Already stamped: a failed status check does not stamp it again.
    let key = v1labels::NODECLAIM_TERMINATION_TIMESTAMP_ANNOTATION;
    let annotations = c.metadata.annotations.get_or_insert_with(Default::default);
    annotations.insert(key.into(), "2026-01-01T00:00:00Z".into());
    put(&mut w.node_claims, c);
    let handler = handler(ctx);
    for kind in [
        InterruptionKind::ScheduledChange,
        InterruptionKind::InstanceStatus,
    ] {
        handler.deliver(event(kind)).await.expect("nothing to do");
    }
    assert_eq!(writes(&api.requests()), []);
}

/// The PATCHes and DELETEs sent for `spot-a`, in order.
fn writes(seen: &[Seen]) -> Vec<(String, serde_json::Value)> {
    seen.iter()
        .filter(|r| r.uri.contains("/nodeclaims/spot-a") && r.method != "GET")
        .map(|r| (r.method.clone(), r.body.clone()))
        .collect()
}

#[tokio::test]
async fn failed_status_checks_stamp_the_termination_time_on_receipt() {
    let (client, api) = mock_client(|req| match req.method.as_str() {
        "PATCH" => (200, serde_json::to_value(spot_claim("spot-a")).unwrap()),
        _ => status(500, "unexpected"),
    });
    let (ctx, mut w, _events) = ctx(client, provider_stub(), 60_000);
    put(&mut w.node_claims, spot_claim("spot-a"));
    let handler = handler(ctx.clone());
    handler
        .deliver(event(InterruptionKind::SystemStatus))
        .await
        .expect("handled");
    let key = v1labels::NODECLAIM_TERMINATION_TIMESTAMP_ANNOTATION;
    let sent = writes(&api.requests());
    assert_eq!(sent.len(), 1, "{sent:?}");
    assert_eq!(sent[0].0, "PATCH");
    let stamp = sent[0].1["metadata"]["annotations"][key].as_str().unwrap();
    assert!(stamp.parse::<jiff::Timestamp>().is_ok(), "{stamp}");
    let system = InterruptionKind::SystemStatus;
    assert_eq!(notices(&ctx), [("spot-a".to_owned(), system)]);

    // A scheduled event drains as usual: no stamp (and the first notice stands).
    handler
        .deliver(event(InterruptionKind::EventStatus))
        .await
        .expect("handled");
    assert_eq!(writes(&api.requests()).len(), 1);
    assert_eq!(notices(&ctx), [("spot-a".to_owned(), system)]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn interruption_queue_hands_the_notice_on_end_to_end() {
    let Some(ep) = emulator("interruption_queue_hands_the_notice_on_end_to_end") else {
        return;
    };
    let clients = AwsClients::for_endpoint(&ep, REGION).await;
    let queue = format!(
        "operator-interruption-{}",
        SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos())
    );
    let url = clients
        .sqs
        .create_queue()
        .queue_name(&queue)
        .send()
        .await
        .expect("CreateQueue")
        .queue_url()
        .expect("url")
        .to_string();
    let (client, api) = mock_client(|_| status(500, "unexpected"));
    let (ctx, mut w, _events) = ctx(client, provider_stub(), 60_000);
    put(&mut w.node_claims, spot_claim("spot-a"));
    let metrics: Metrics = ctx.metrics.clone();
    let handler = Arc::new(handler(ctx.clone()));
    let poller =
        InterruptionPoller::new(clients.sqs.clone(), &queue, handler, Arc::new(SystemClock))
            .await
            .expect("poller")
            .with_wait_time(1);
    for body in [
        samples::spot_interruption(INSTANCE),
        samples::rebalance_recommendation("i-0ffffffffffffffff"),
        "{not json".to_string(),
    ] {
        clients
            .sqs
            .send_message()
            .queue_url(&url)
            .message_body(body)
            .send()
            .await
            .expect("SendMessage");
    }
    let mut received = 0;
    for _ in 0..10 {
        received += poller.poll_once().await.expect("poll").received;
        if received >= 3 {
            break;
        }
    }
    assert_eq!(received, 3);
    assert!(api.requests().is_empty(), "{:?}", api.requests());
    let spot = InterruptionKind::SpotInterruption;
    assert_eq!(notices(&ctx), [("spot-a".to_owned(), spot)]);
    let text = metrics.encode();
    assert!(
        text.contains(
            r#"karpenter_interruption_received_messages_total{message_type="spot_interrupted"} 1"#
        ),
        "{text}"
    );
    assert!(
        text.contains("karpenter_interruption_deleted_messages_total 3"),
        "{text}"
    );
}

/// Hooks over `provider` with `nc` in their store, and an API server that answers every
/// PATCH with `nc`.
fn hooks_over(
    provider: &Arc<AwsCloudProvider>,
    nc: &karpenter_cloudprovider_aws::EC2NodeClass,
    clients: AwsClients,
) -> (AwsHooks, kube::Client, super::testing::MockApi) {
    let (store, mut writer) = reflector::store();
    put(&mut writer, nc.clone());
    let hooks = AwsHooks::new(provider.clone(), store, clients);
    let echo = serde_json::to_value(nc).unwrap();
    let (client, api) = mock_client(move |req| match req.method.as_str() {
        "PATCH" => (200, echo.clone()),
        _ => status(500, "unexpected"),
    });
    (hooks, client, api)
}

const NODE_CLASS: &str = r#"
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata:
  name: default
  uid: 6a3e0c52-operator-test
  generation: 1
  resourceVersion: "7"
spec:
  role: KarpenterNodeRole-nowhere
  amiSelectorTerms:
    - alias: al2023@latest
  subnetSelectorTerms:
    - tags:
        karpenter.sh/discovery: no-such-cluster
  securityGroupSelectorTerms:
    - tags:
        karpenter.sh/discovery: no-such-cluster
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_classes_get_a_finalizer_and_a_status() {
    let Some(ep) = emulator("node_classes_get_a_finalizer_and_a_status") else {
        return;
    };
    let clients = AwsClients::for_endpoint(&ep, REGION).await;
    let mut settings = AwsSettings::new("operator-test", REGION);
    settings.pricing_api = false;
    settings.ssm_prefix = "/operator-test".into();
    let provider = Arc::new(AwsCloudProvider::new(clients.clone(), settings));
    let nc = from_yaml(NODE_CLASS).expect("valid EC2NodeClass");
    // The node role exists (an earlier run may have made it already).
    let trust = r#"{"Statement":[{"Effect":"Allow","Principal":{"Service":"ec2.amazonaws.com"},"Action":"sts:AssumeRole"}]}"#;
    let role = clients
        .iam
        .create_role()
        .role_name("KarpenterNodeRole-nowhere");
    let _ = role.assume_role_policy_document(trust).send().await;
    let (hooks, client, api) = hooks_over(&provider, &nc, clients.clone());
    let (ctx, _w, _events) = ctx(client, provider_stub(), 60_000);
    hooks.reconcile(&ctx).await;
    let reqs = api.requests();
    let fin = reqs
        .iter()
        .find(|r| !r.uri.contains("/status"))
        .expect("finalizer patch");
    assert_eq!(
        fin.body["metadata"]["finalizers"],
        serde_json::json!([NODE_CLASS_FINALIZER])
    );
    assert_eq!(fin.body["metadata"]["resourceVersion"], "7");
    let st = reqs
        .iter()
        .find(|r| r.uri.contains("/ec2nodeclasses/default/status"))
        .expect("status patch");
    let conditions = st.body["status"]["conditions"]
        .as_array()
        .expect("conditions");
    let cond = |t: &str| {
        conditions
            .iter()
            .find(|c| c["type"] == t)
            .map(|c| c["status"].as_str().unwrap_or_default().to_owned())
    };
    assert_eq!(cond("SubnetsReady").as_deref(), Some("False"));
    assert_eq!(cond("Ready").as_deref(), Some("False"));
    assert_eq!(cond("InstanceProfileReady").as_deref(), Some("True"));
    let profile = profile_name(
        "operator-test",
        REGION,
        "default",
        "6a3e0c52-operator-test",
        "KarpenterNodeRole-nowhere",
    );
    assert_eq!(st.body["status"]["instanceProfile"], profile.as_str());
    assert!(provider.node_class("default").is_some());

    // Resolved a moment ago and unchanged: the next pass does not call AWS or the API.
    let before = api.requests().len();
    hooks.reconcile(&ctx).await;
    let again = api.requests()[before..].to_vec();
    assert!(
        again.iter().all(|r| !r.uri.contains("/status")),
        "{again:?}"
    );

    // Deleted with no NodeClaim left: the managed profile goes before the finalizer.
    let profiles = provider.instance_profiles();
    assert!(profiles.get(&profile).await.expect("get").is_some());
    let mut deleted = nc.clone();
    deleted.metadata.finalizers = Some(vec![NODE_CLASS_FINALIZER.into()]);
    deleted.metadata.deletion_timestamp = Some(karpenter_cluster::provisioner::time(1_000));
    let (hooks, client, api) = hooks_over(&provider, &deleted, clients.clone());
    let (ctx2, _w2, _events2) = super::testing::ctx(client, provider_stub(), 60_000);
    hooks.reconcile(&ctx2).await;
    let reqs = api.requests();
    assert_eq!(reqs.len(), 1, "{reqs:?}");
    assert_eq!(
        reqs[0].body["metadata"]["finalizers"],
        serde_json::json!([])
    );
    let gone = clients
        .iam
        .get_instance_profile()
        .instance_profile_name(&profile);
    assert!(
        gone.send().await.is_err(),
        "instance profile {profile} left behind"
    );
}

#[tokio::test]
async fn a_deleted_node_class_waits_for_its_nodeclaims() {
    let clients = AwsClients::for_endpoint("http://127.0.0.1:9", REGION).await;
    // Isolated: no IAM to clean up (the emulator-backed test above covers that path).
    let mut settings = AwsSettings::new("operator-test", REGION);
    settings.isolated_vpc = true;
    let provider = Arc::new(AwsCloudProvider::new(clients.clone(), settings));
    let mut nc = from_yaml(NODE_CLASS).expect("valid");
    nc.metadata.finalizers = Some(vec![NODE_CLASS_FINALIZER.into()]);
    nc.metadata.deletion_timestamp = Some(karpenter_cluster::provisioner::time(1_000));
    karpenter_cloudprovider::v1::StatusConditions::set_true(
        &mut nc,
        "SubnetsReady",
        karpenter_cluster::provisioner::time(0),
    );
    provider.apply_node_class(nc.clone());
    let (hooks, client, api) = hooks_over(&provider, &nc, clients);
    let (ctx, mut w, _events) = ctx(client, provider_stub(), 60_000);
    // `node_claim()` references EC2NodeClass "default".
    put(&mut w.node_claims, node_claim("default-x"));
    hooks.reconcile(&ctx).await;
    assert!(api.requests().is_empty(), "{:?}", api.requests());
    // The class's conditions and its termination reach operatorpkg's metric families.
    let text = ctx.metrics.encode();
    for family in [
        "operator_ec2nodeclass_status_condition_count{",
        "operator_ec2nodeclass_termination_current_time_seconds{",
    ] {
        assert!(text.contains(family), "{family} missing:\n{text}");
    }
    assert!(provider.node_class("default").is_some());

    w.node_claims
        .apply_watcher_event(&kube::runtime::watcher::Event::Delete(node_claim(
            "default-x",
        )));
    hooks.reconcile(&ctx).await;
    let reqs = api.requests();
    assert_eq!(reqs.len(), 1, "{reqs:?}");
    assert_eq!(
        reqs[0].body["metadata"]["finalizers"],
        serde_json::json!([])
    );
    assert!(provider.node_class("default").is_none());
}

#[tokio::test]
async fn the_tagger_reads_claims_from_the_stores_and_marks_them_through_the_api() {
    use karpenter_cloudprovider_aws::tagging::{
        ANNOTATION_CLUSTER_NAME_TAGGED, ANNOTATION_INSTANCE_TAGGED, TagTarget,
    };
    let (client, api) = mock_client(|req| match req.method.as_str() {
        "PATCH" => (200, serde_json::to_value(spot_claim("spot-a")).unwrap()),
        _ => status(500, "unexpected"),
    });
    let (ctx, mut w, _events) = ctx(client, provider_stub(), 60_000);
    put(&mut w.node_claims, spot_claim("spot-a"));
    let tagger = super::aws::ClaimTagger(ctx);
    let names: Vec<String> = tagger
        .claims()
        .iter()
        .map(|c| c.name().to_owned())
        .collect();
    assert_eq!(names, vec!["spot-a"]);
    tagger.mark_tagged("spot-a").await.expect("patched");
    let sent = writes(&api.requests());
    assert_eq!(sent.len(), 1, "{sent:?}");
    assert_eq!(sent[0].0, "PATCH");
    let annotations = &sent[0].1["metadata"]["annotations"];
    assert_eq!(annotations[ANNOTATION_INSTANCE_TAGGED], "true");
    assert_eq!(annotations[ANNOTATION_CLUSTER_NAME_TAGGED], "true");
}

/// A provider whose launches finish only once `Barrier` has seen them all: launches made
/// one after another never finish.
struct AllAtOnce(tokio::sync::Barrier, Arc<dyn CloudProvider>);

#[async_trait::async_trait]
impl CloudProvider for AllAtOnce {
    async fn create(
        &self,
        c: &NodeClaim,
    ) -> Result<NodeClaim, karpenter_cloudprovider::CloudProviderError> {
        self.0.wait().await;
        self.1.create(c).await
    }
    async fn delete(
        &self,
        c: &NodeClaim,
    ) -> Result<(), karpenter_cloudprovider::CloudProviderError> {
        self.1.delete(c).await
    }
    async fn get(
        &self,
        id: &str,
    ) -> Result<NodeClaim, karpenter_cloudprovider::CloudProviderError> {
        self.1.get(id).await
    }
    async fn list(&self) -> Result<Vec<NodeClaim>, karpenter_cloudprovider::CloudProviderError> {
        self.1.list().await
    }
    async fn instance_types(
        &self,
        p: &karpenter_cloudprovider::v1::NodePool,
    ) -> Result<
        Vec<Arc<karpenter_scheduling::model::InstanceType>>,
        karpenter_cloudprovider::CloudProviderError,
    > {
        self.1.instance_types(p).await
    }
    async fn is_drifted(
        &self,
        c: &NodeClaim,
    ) -> Result<
        Option<karpenter_cloudprovider::DriftReason>,
        karpenter_cloudprovider::CloudProviderError,
    > {
        self.1.is_drifted(c).await
    }
    fn repair_policies(&self) -> Vec<karpenter_cloudprovider::RepairPolicy> {
        self.1.repair_policies()
    }
    fn name(&self) -> &str {
        self.1.name()
    }
}

#[tokio::test]
async fn the_launches_of_a_pass_run_concurrently() {
    let (client, api) = mock_client(|req| match req.method.as_str() {
        "PATCH" => (200, serde_json::to_value(node_claim("default-a")).unwrap()),
        "GET" => (
            200,
            serde_json::json!({"apiVersion": "v1", "kind": "List", "metadata": {}, "items": []}),
        ),
        _ => status(404, "NotFound"),
    });
    let provider = Arc::new(AllAtOnce(tokio::sync::Barrier::new(3), provider_stub()));
    let (ctx, mut w, _events) = ctx(client, provider, 0);
    for name in ["default-a", "default-b", "default-c"] {
        put(&mut w.node_claims, node_claim(name));
    }
    let mut controller = super::run::Controller::new(ctx);
    tokio::time::timeout(std::time::Duration::from_secs(10), controller.pass())
        .await
        .expect("three launches waited for each other");
    let launched = api
        .requests()
        .iter()
        .filter(|r| r.method == "PATCH" && r.uri.contains("/nodeclaims/default-"))
        .count();
    assert!(launched >= 3, "{:?}", api.requests());
}
