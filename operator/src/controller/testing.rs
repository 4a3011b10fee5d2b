//! Test helpers: the controller's own objects (API objects in general come from
//! `karpenter_testing::api`), and a scripted API server behind a `tower-test` mock service.

use super::events::{EventSink, Published};
use super::state::{Stores, Writers, stores};
use super::{Clock, Ctx};
use crate::settings::Settings;
use http::{Request, Response};
use k8s_openapi::api::core::v1::Node;
use karpenter_cloudprovider::CloudProvider;
use karpenter_metrics::Metrics;
use karpenter_testing::api::registering_node;
use kube::client::Body;
use kube::runtime::watcher::Event;
use std::sync::{Arc, Mutex};
use tokio::sync::mpsc;

/// A fresh Node as a kubelet registers it ([`registering_node`]), labelled as one of the fake
/// provider's nodes so that the fake kubelet manages it.
pub fn node(name: &str, provider_id: &str) -> Node {
    let mut n = registering_node(name, provider_id);
    n.metadata.labels = Some(
        [(
            karpenter_cloudprovider_fake::node_instances::FAKE_NODE_LABEL.to_owned(),
            "true".to_owned(),
        )]
        .into(),
    );
    n
}

/// One request the mock API server received.
#[derive(Debug, Clone)]
pub struct Seen {
    /// HTTP method.
    pub method: String,
    /// Path and query.
    pub uri: String,
    /// Body as JSON (Null when empty or not JSON).
    pub body: serde_json::Value,
}

/// A response the script gives: status code and JSON body.
pub type Reply = (u16, serde_json::Value);

/// A scripted API server. `script` sees every request and answers it.
pub struct MockApi {
    /// Every request, in order.
    pub seen: Arc<Mutex<Vec<Seen>>>,
    _task: tokio::task::JoinHandle<()>,
}

impl MockApi {
    /// Requests so far.
    pub fn requests(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }
}

/// A Kubernetes `Status` error body.
pub fn status(code: u16, reason: &str) -> Reply {
    (
        code,
        serde_json::json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": code, "reason": reason, "message": reason}),
    )
}

/// A client whose every request is answered by `script`.
pub fn mock_client<F>(mut script: F) -> (kube::Client, MockApi)
where
    F: FnMut(&Seen) -> Reply + Send + 'static,
{
    let (svc, mut handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    let task = tokio::spawn(async move {
        while let Some((req, send)) = handle.next_request().await {
            let (parts, body) = req.into_parts();
            let bytes = body.collect_bytes().await.unwrap_or_default();
            let s = Seen {
                method: parts.method.to_string(),
                uri: parts.uri.to_string(),
                body: serde_json::from_slice(&bytes).unwrap_or(serde_json::Value::Null),
            };
            let (code, json) = script(&s);
            log.lock().unwrap().push(s);
            let resp = Response::builder()
                .status(code)
                .header("content-type", "application/json")
                .body(Body::from(serde_json::to_vec(&json).unwrap()))
                .unwrap();
            send.send_response(resp);
        }
    });
    (
        kube::Client::new(svc, "default"),
        MockApi { seen, _task: task },
    )
}

/// A context over `client` with empty stores (fill them through the returned writers), a
/// fixed clock at `now_ms`, and the events receiver.
pub fn ctx(
    client: kube::Client,
    provider: Arc<dyn CloudProvider>,
    now_ms: i64,
) -> (Ctx, Writers, mpsc::UnboundedReceiver<Published>) {
    let metrics = Metrics::new();
    let (stores, writers): (Stores, Writers) =
        stores(metrics.runtime.work_queue("state"), false, false);
    let (events, rx) = EventSink::channel();
    let clock: Clock = Arc::new(move || {
        jiff::Timestamp::from_millisecond(now_ms).unwrap_or(jiff::Timestamp::UNIX_EPOCH)
    });
    let ctx = Ctx {
        client,
        provider,
        settings: Settings::default(),
        metrics,
        stores,
        events,
        limiter: super::api::RateLimiter::new(1000, 1000),
        clock,
        interruptions: super::interruptions::InterruptionInbox::new(Arc::default()),
    };
    (ctx, writers, rx)
}

/// Puts `obj` into a store through its writer.
pub fn put<K>(w: &mut kube::runtime::reflector::store::Writer<K>, obj: K)
where
    K: kube::Resource + Clone + 'static,
    K::DynamicType: Default + Eq + std::hash::Hash + Clone,
{
    w.apply_watcher_event(&Event::Apply(obj));
}
