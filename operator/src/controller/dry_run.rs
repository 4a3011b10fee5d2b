//! `--dry-run`, the shadow mode: the controller watches a cluster and runs the same
//! reconciler in [observe-only](karpenter_cluster::reconciler::ReconcilerSettings::observe_only)
//! mode, and reports what it would provision and disrupt (logs and `karpenter_dry_run_*`
//! metrics) instead of doing it. A team can run it beside Karpenter and compare decisions.
//!
//! Nothing is written: the paths that write (actions, events, NodePool status, drift
//! conditions, the fake kubelet, garbage collection, leader election, the interruption
//! queue) are not taken, and as a guarantee the API client itself refuses every request
//! but a read ([`client`]), so a path missed here fails loudly instead of writing.

use http::{Method, Request};
use karpenter_cluster::Action;
use karpenter_cluster::shadow::Shadow;
use karpenter_disruption::Command;
use karpenter_metrics::Metrics;
use karpenter_metrics::kube_client::KubeClientLayer;
use karpenter_scheduling::Plan;
use karpenter_scheduling::plan::InstanceTypeOption;
use kube::client::{Body, ClientBuilder};
use tower::BoxError;
use tower::filter::FilterLayer;

/// Only reads pass: GET covers get, list and watch. Anything else is a bug in the shadow
/// mode's wiring, reported as an error rather than sent.
fn read_only(req: Request<Body>) -> Result<Request<Body>, BoxError> {
    if req.method() == Method::GET {
        return Ok(req);
    }
    tracing::error!(method = %req.method(), uri = %req.uri(), "dry-run: refused a write");
    Err(format!("dry-run: refusing {} {}", req.method(), req.uri()).into())
}

/// A client from the usual configuration (in-cluster or KUBECONFIG) whose requests go
/// through `metrics` and, when `dry_run`, can only read. A request is sent once: kube's
/// own retry of 429, 503 and 504 answers is off.
///
/// # Errors
/// No configuration could be inferred.
pub async fn client(dry_run: bool, metrics: KubeClientLayer) -> anyhow::Result<kube::Client> {
    let mut config = kube::Config::infer().await?;
    // kube retries those answers inside the call, up to 15 times with a backoff growing to
    // minutes, without a log line: through an etcd restart one call can hold the whole pass
    // that long, and with it every other piece of work. (A CI run saw the controller silent
    // for 150 s after an etcd restart, mid-create.) The
    // controller retries failed work on its next pass instead (at debug while it is routine,
    // see `retry_log`), and the Lease has its own retry period.
    config.default_retry = false;
    let builder = ClientBuilder::try_from(config)?.with_layer(&metrics);
    Ok(match dry_run {
        true => builder.with_layer(&FilterLayer::new(read_only)).build(),
        false => builder.build(),
    })
}

/// Logs, at debug, the Kubernetes events the controller would have published.
pub async fn log_events(mut rx: tokio::sync::mpsc::UnboundedReceiver<super::events::Published>) {
    while let Some(p) = rx.recv().await {
        tracing::debug!(
            kind = p.regarding.kind.as_deref().unwrap_or_default(),
            name = p.regarding.name.as_deref().unwrap_or_default(),
            reason = %p.reason,
            message = %p.message,
            "dry-run: event not published"
        );
    }
}

/// Reports the shadow mode's decisions as logs and `karpenter_dry_run_*` metrics, each once
/// ([`karpenter_cluster::shadow::Shadow`] remembers which were reported).
#[derive(Debug, Default)]
pub struct Reporter {
    shadow: Shadow,
}

impl Reporter {
    /// A plan for the pending pods: the NodeClaims it would create.
    pub fn planned(&mut self, plan: &Plan, metrics: &Metrics) {
        let report = self.shadow.planned(plan);
        for claim in &report.new {
            let cheapest = claim.instance_type_options.first();
            let field = |f: fn(&InstanceTypeOption) -> String| cheapest.map(f).unwrap_or_default();
            tracing::info!(
                nodepool = %claim.node_pool,
                pods = claim.pods.len(),
                instance_type = field(|o| o.name.to_string()),
                zone = field(|o| o.zone.to_string()),
                capacity_type = field(|o| o.capacity_type.to_string()),
                options = claim.instance_type_options.len(),
                price_per_hour = claim.price,
                "dry-run: would create a nodeclaim"
            );
        }
        metrics.record_dry_run_plan(&report);
    }

    /// No pod is pending: nothing would be provisioned.
    pub fn nothing_pending(&mut self, metrics: &Metrics) {
        metrics.record_dry_run_prices(&self.shadow.nothing_pending());
    }

    /// A disruption command of the pass in progress.
    pub fn decided(&mut self, command: &Command, metrics: &Metrics) {
        if !self.shadow.decided(command) {
            return;
        }
        let reason = command.reason.as_str().to_lowercase();
        let decision = format!("{:?}", command.decision).to_lowercase();
        tracing::info!(
            reason = %reason,
            decision = %decision,
            nodes = ?command.node_names(),
            replacements = command.replacements.len(),
            savings_per_hour = command.savings,
            "dry-run: would disrupt: {}",
            command.explanation
        );
        metrics.record_dry_run_disruption(command);
    }

    /// The disruption pass ended: the savings gauges show its commands'.
    pub fn pass_done(&mut self, metrics: &Metrics) {
        metrics.record_dry_run_savings(self.shadow.pass_done());
    }

    /// An action of an observe-only tick. Only provisioning's launches are expected, and
    /// they were reported with their plan; anything else means the reconciler acted in
    /// shadow mode, which is logged as a bug and not carried out.
    pub fn action(action: &Action) {
        if !matches!(action, Action::LaunchNodeClaim { .. }) {
            tracing::error!(
                ?action,
                "dry-run: the reconciler asked for an action; not carried out"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use karpenter_scheduling::plan::NewNodeClaim;

    #[test]
    fn a_read_is_let_through_and_a_write_refused() {
        let get = Request::get("/api/v1/pods").body(Body::empty()).unwrap();
        assert!(read_only(get).is_ok());
        for method in [Method::POST, Method::PUT, Method::PATCH, Method::DELETE] {
            let req = Request::builder()
                .method(method.clone())
                .uri("/apis/karpenter.sh/v1/nodeclaims")
                .body(Body::empty())
                .unwrap();
            let err = read_only(req).expect_err("a write");
            assert!(err.to_string().contains(method.as_str()), "{err}");
        }
    }

    #[test]
    fn decisions_become_counters_and_gauges() {
        let m = Metrics::new();
        let mut r = Reporter::default();
        let plan = Plan {
            new_node_claims: vec![NewNodeClaim {
                node_pool: "default".into(),
                requirements: Default::default(),
                instance_type_options: Default::default(),
                pods: vec![karpenter_scheduling::model::PodKey::new("default", "a")],
                requests: Default::default(),
                daemon_overhead: Default::default(),
                price: 0.25,
            }],
            ..Plan::default()
        };
        r.planned(&plan, &m);
        r.planned(&plan, &m);
        let t = m.encode();
        assert!(t.contains("karpenter_dry_run_decisions_total{action=\"create\",reason=\"provisioning\",nodepool=\"default\"} 1"), "{t}");
        assert!(
            t.contains(
                "karpenter_dry_run_provisioning_price_dollars_per_hour{nodepool=\"default\"} 0.25"
            ),
            "{t}"
        );
        r.nothing_pending(&m);
        assert!(m.encode().contains(
            "karpenter_dry_run_provisioning_price_dollars_per_hour{nodepool=\"default\"} 0.0"
        ));
    }
}
