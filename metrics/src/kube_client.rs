//! `client_go_request_total` and `client_go_request_duration_seconds` for the Kubernetes
//! client, as operatorpkg registers them for upstream's client-go: a [`tower::Layer`] that
//! wraps the client's HTTP service, so every request the controller sends to the API server
//! (watches, lists, gets, patches, evictions) is counted by status code and method, and
//! timed to its response headers by verb, group, version, kind and subresource.

use crate::Metrics;
use http::{Request, Response};
use prometheus_client::encoding::EncodeLabelSet;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Instant;

/// `{code, method}` of `client_go_request_total`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct RequestLabels {
    /// The HTTP status code, `<error>` when no response came back.
    pub code: String,
    /// The HTTP method.
    pub method: String,
}

/// `{verb, group, version, kind, subresource}` of `client_go_request_duration_seconds`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct LatencyLabels {
    /// `CREATE`, `LIST`, `UPDATE`, or the HTTP method (`GET` of one object, `PATCH`,
    /// `DELETE`).
    pub verb: String,
    /// API group, empty for the core group.
    pub group: String,
    /// API version.
    pub version: String,
    /// The resource (`pods`, `nodeclaims`).
    pub kind: String,
    /// The subresource (`status`, `eviction`), if any.
    pub subresource: String,
}

/// What a request path names, as operatorpkg parses client-go's URLs; `None` for paths
/// outside `/api` and `/apis` or too short to name a resource. `named` is whether the path
/// names one object (client-go's `{name}`).
fn parse_path(path: &str) -> Option<(LatencyLabels, bool)> {
    let parts: Vec<&str> = path.split('/').skip(1).collect();
    let group_idx = match *parts.first()? {
        "api" => 0,
        "apis" => 1,
        _ => return None,
    };
    if parts.len() < group_idx + 3 {
        return None;
    }
    let version_idx = group_idx + 1;
    let kind_idx = if parts[group_idx + 2] == "namespaces" && parts.len() > group_idx + 4 {
        version_idx + 3
    } else {
        version_idx + 1
    };
    let labels = LatencyLabels {
        verb: String::new(),
        group: if group_idx == 0 {
            String::new()
        } else {
            parts[group_idx].to_owned()
        },
        version: parts[version_idx].to_owned(),
        kind: parts[kind_idx].to_owned(),
        subresource: if parts.len() == kind_idx + 3 {
            parts[kind_idx + 2].to_owned()
        } else {
            String::new()
        },
    };
    Some((labels, parts.len() > kind_idx + 1))
}

/// operatorpkg's verb for a request: `POST` creates, `GET` without a name lists (and
/// watches), `PUT` updates a named object or creates.
fn verb(method: &http::Method, named: bool) -> String {
    match (method.as_str(), named) {
        ("POST", _) | ("PUT", false) => "CREATE".into(),
        ("GET", false) => "LIST".into(),
        ("PUT", true) => "UPDATE".into(),
        (other, _) => other.to_owned(),
    }
}

/// The layer; `kube::client::ClientBuilder::with_layer(&metrics.kube_client_layer())`.
#[derive(Clone)]
pub struct KubeClientLayer {
    metrics: Metrics,
}

impl Metrics {
    /// A layer recording the client families for every request through the service it wraps.
    pub fn kube_client_layer(&self) -> KubeClientLayer {
        KubeClientLayer {
            metrics: self.clone(),
        }
    }

    fn record_request(&self, method: &http::Method, path: &str, code: String, seconds: f64) {
        self.client_requests
            .get_or_create(&RequestLabels {
                code,
                method: method.as_str().to_owned(),
            })
            .inc();
        if let Some((mut labels, named)) = parse_path(path) {
            labels.verb = verb(method, named);
            self.client_request_duration
                .get_or_create(&labels)
                .observe(seconds);
        }
    }
}

impl<S> tower::Layer<S> for KubeClientLayer {
    type Service = KubeClientService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        KubeClientService {
            inner,
            metrics: self.metrics.clone(),
        }
    }
}

/// The service [`KubeClientLayer`] wraps around the client's.
#[derive(Clone)]
pub struct KubeClientService<S> {
    inner: S,
    metrics: Metrics,
}

impl<S, ReqBody, ResBody> tower::Service<Request<ReqBody>> for KubeClientService<S>
where
    S: tower::Service<Request<ReqBody>, Response = Response<ResBody>>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<S::Response, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<ReqBody>) -> Self::Future {
        let method = request.method().clone();
        let path = request.uri().path().to_owned();
        let metrics = self.metrics.clone();
        let started = Instant::now();
        let response = self.inner.call(request);
        Box::pin(async move {
            let result = response.await;
            let code = match &result {
                Ok(r) => r.status().as_u16().to_string(),
                Err(_) => "<error>".to_owned(),
            };
            let seconds = started.elapsed().as_secs_f64();
            metrics.record_request(&method, &path, code, seconds);
            result
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tests::lines;
    use tower::{Layer, ServiceExt};

    #[test]
    fn paths_are_parsed_as_operatorpkg_parses_them() {
        let parse =
            |p| parse_path(p).map(|(l, named)| (l.group, l.version, l.kind, l.subresource, named));
        let s = |v: &str| v.to_owned();
        assert_eq!(
            parse("/api/v1/namespaces/default/pods/web/eviction"),
            Some((s(""), s("v1"), s("pods"), s("eviction"), true))
        );
        assert_eq!(
            parse("/apis/karpenter.sh/v1/nodeclaims"),
            Some((s("karpenter.sh"), s("v1"), s("nodeclaims"), s(""), false))
        );
        assert_eq!(
            parse("/apis/karpenter.sh/v1/nodeclaims/c1/status"),
            Some((
                s("karpenter.sh"),
                s("v1"),
                s("nodeclaims"),
                s("status"),
                true
            ))
        );
        assert_eq!(
            parse("/api/v1/namespaces/kube-system"),
            Some((s(""), s("v1"), s("namespaces"), s(""), true))
        );
        assert_eq!(parse("/version"), None);
        assert_eq!(verb(&http::Method::GET, false), "LIST");
        assert_eq!(verb(&http::Method::GET, true), "GET");
        assert_eq!(verb(&http::Method::POST, true), "CREATE");
        assert_eq!(verb(&http::Method::PUT, true), "UPDATE");
        assert_eq!(verb(&http::Method::PATCH, true), "PATCH");
    }

    #[tokio::test]
    async fn every_request_through_the_layer_is_counted_and_timed() {
        let m = Metrics::new();
        let api = tower::service_fn(|req: Request<()>| async move {
            let status = if req.uri().path().ends_with("/missing") {
                404
            } else {
                200
            };
            Ok::<_, std::convert::Infallible>(Response::builder().status(status).body(()).unwrap())
        });
        let svc = m.kube_client_layer().layer(api);
        for (method, path) in [
            (
                http::Method::GET,
                "/apis/karpenter.sh/v1/nodeclaims?watch=true",
            ),
            (
                http::Method::PATCH,
                "/apis/karpenter.sh/v1/nodeclaims/c1/status",
            ),
            (http::Method::GET, "/api/v1/nodes/missing"),
        ] {
            let req = Request::builder()
                .method(method)
                .uri(path)
                .body(())
                .unwrap();
            svc.clone().oneshot(req).await.unwrap();
        }
        let mut totals = lines(&m, "client_go_request_total");
        totals.sort();
        assert_eq!(
            totals,
            [
                r#"client_go_request_total{code="200",method="GET"} 1"#,
                r#"client_go_request_total{code="200",method="PATCH"} 1"#,
                r#"client_go_request_total{code="404",method="GET"} 1"#,
            ]
        );
        let counts = lines(&m, "client_go_request_duration_seconds_count");
        for want in [
            r#"{verb="LIST",group="karpenter.sh",version="v1",kind="nodeclaims",subresource=""} 1"#,
            r#"{verb="PATCH",group="karpenter.sh",version="v1",kind="nodeclaims",subresource="status"} 1"#,
            r#"{verb="GET",group="",version="v1",kind="nodes",subresource=""} 1"#,
        ] {
            assert!(
                counts.iter().any(|l| l.ends_with(want)),
                "{want} in {counts:?}"
            );
        }
    }
}
