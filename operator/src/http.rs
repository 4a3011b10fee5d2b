//! The controller's HTTP endpoints: `/metrics` on the metrics port, `/healthz` and `/readyz`
//! on the health-probe port.

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use karpenter_metrics::Metrics;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// Liveness and readiness as the probes see them. Cheap to clone; every clone shares state.
#[derive(Debug, Clone, Default)]
pub struct Health {
    ready: Arc<AtomicBool>,
    failed: Arc<AtomicBool>,
}

impl Health {
    /// Marks the controller ready (its watches have listed once): `/readyz` returns 200.
    pub fn set_ready(&self, ready: bool) {
        self.ready.store(ready, Ordering::SeqCst);
    }

    /// Whether `/readyz` returns 200.
    pub fn is_ready(&self) -> bool {
        self.ready.load(Ordering::SeqCst) && !self.failed.load(Ordering::SeqCst)
    }

    /// Marks the process broken beyond repair (a background task died): `/healthz` returns
    /// 500 so the kubelet restarts the container.
    pub fn set_failed(&self) {
        self.failed.store(true, Ordering::SeqCst);
    }

    /// Whether `/healthz` returns 200.
    pub fn is_live(&self) -> bool {
        !self.failed.load(Ordering::SeqCst)
    }
}

/// `GET /metrics`: the OpenMetrics text of `metrics`.
pub fn metrics_router(metrics: Metrics) -> Router {
    Router::new()
        .route("/metrics", get(serve_metrics))
        .with_state(metrics)
}

async fn serve_metrics(State(metrics): State<Metrics>) -> impl IntoResponse {
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        metrics.encode(),
    )
}

/// `GET /healthz` and `GET /readyz`.
pub fn health_router(health: Health) -> Router {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .with_state(health)
}

async fn healthz(State(h): State<Health>) -> (StatusCode, &'static str) {
    if h.is_live() {
        (StatusCode::OK, "ok")
    } else {
        (
            StatusCode::INTERNAL_SERVER_ERROR,
            "a controller task failed",
        )
    }
}

async fn readyz(State(h): State<Health>) -> (StatusCode, &'static str) {
    if h.is_ready() {
        (StatusCode::OK, "ok")
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, "caches not synced")
    }
}

/// Serves `router` on `0.0.0.0:port` until the task is dropped.
///
/// # Errors
/// The port cannot be bound or the server fails.
pub async fn serve(router: Router, port: u16) -> std::io::Result<()> {
    let listener = tokio::net::TcpListener::bind(SocketAddr::from(([0, 0, 0, 0], port))).await?;
    axum::serve(listener, router).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::body::Body;
    use axum::http::Request;
    use tower::ServiceExt;

    async fn get(router: Router, path: &str) -> (StatusCode, String) {
        let resp = router
            .oneshot(Request::get(path).body(Body::empty()).unwrap())
            .await
            .unwrap();
        let status = resp.status();
        let bytes = axum::body::to_bytes(resp.into_body(), 1 << 20)
            .await
            .unwrap();
        (status, String::from_utf8_lossy(&bytes).into_owned())
    }

    #[tokio::test]
    async fn probes_follow_state() {
        let h = Health::default();
        assert_eq!(
            get(health_router(h.clone()), "/healthz").await.0,
            StatusCode::OK
        );
        assert_eq!(
            get(health_router(h.clone()), "/readyz").await.0,
            StatusCode::SERVICE_UNAVAILABLE
        );
        h.set_ready(true);
        assert_eq!(
            get(health_router(h.clone()), "/readyz").await.0,
            StatusCode::OK
        );
        h.set_failed();
        assert_eq!(
            get(health_router(h.clone()), "/healthz").await.0,
            StatusCode::INTERNAL_SERVER_ERROR
        );
    }

    #[tokio::test]
    async fn metrics_endpoint_serves_registry() {
        let m = Metrics::new();
        m.cluster_state_synced.set(1);
        let (status, body) = get(metrics_router(m), "/metrics").await;
        assert_eq!(status, StatusCode::OK);
        assert!(body.contains("karpenter_cluster_state_synced 1"), "{body}");
    }
}
