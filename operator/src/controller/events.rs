//! Kubernetes events on pods, nodes and NodeClaims. Reconcilers hand events to an
//! [`EventSink`] and never wait for them: a failed event write must not fail a reconcile.

use k8s_openapi::api::core::v1::ObjectReference;
use kube::Resource;
use kube::runtime::events::{Event, EventType, Recorder};
use tokio::sync::mpsc;

/// One event to publish.
#[derive(Debug, Clone, PartialEq)]
pub struct Published {
    /// The object it is about.
    pub regarding: ObjectReference,
    /// `Normal` (true) or `Warning` (false).
    pub normal: bool,
    /// CamelCase reason (`Nominated`, `DisruptionBlocked` …).
    pub reason: String,
    /// Human-readable message.
    pub message: String,
}

/// Where reconcilers send events. Cheap to clone.
#[derive(Debug, Clone)]
pub struct EventSink {
    tx: mpsc::UnboundedSender<Published>,
}

impl EventSink {
    /// A sink and the receiving end (for [`publish_loop`] or a test).
    pub fn channel() -> (Self, mpsc::UnboundedReceiver<Published>) {
        let (tx, rx) = mpsc::unbounded_channel();
        (Self { tx }, rx)
    }

    /// Queues a `Normal` event about `obj`.
    pub fn normal<K: Resource<DynamicType = ()>>(&self, obj: &K, reason: &str, message: String) {
        self.send(obj, true, reason, message);
    }

    /// Queues a `Warning` event about `obj`.
    pub fn warning<K: Resource<DynamicType = ()>>(&self, obj: &K, reason: &str, message: String) {
        self.send(obj, false, reason, message);
    }

    fn send<K: Resource<DynamicType = ()>>(
        &self,
        obj: &K,
        normal: bool,
        reason: &str,
        message: String,
    ) {
        // The receiver only goes away at shutdown, when losing an event is fine.
        let _ = self.tx.send(Published {
            regarding: obj.object_ref(&()),
            normal,
            reason: reason.to_owned(),
            message,
        });
    }
}

/// Publishes queued events through `recorder` until every sink is dropped.
pub async fn publish_loop(recorder: Recorder, mut rx: mpsc::UnboundedReceiver<Published>) {
    while let Some(p) = rx.recv().await {
        let ev = Event {
            type_: if p.normal {
                EventType::Normal
            } else {
                EventType::Warning
            },
            reason: p.reason.clone(),
            note: Some(truncate(&p.message, 1000)),
            action: p.reason,
            secondary: None,
        };
        if let Err(e) = recorder.publish(&ev, &p.regarding).await {
            tracing::debug!(error = %e, "publishing event failed");
        }
    }
}

fn truncate(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_owned();
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    s[..end].to_owned()
}
