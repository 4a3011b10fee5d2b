//! Leader election by a `coordination.k8s.io/v1` Lease, with client-go's rules: the holder
//! renews every retry period and steps down when it has not renewed for the renew deadline;
//! a candidate takes the Lease when it is free or when its record has not changed for a whole
//! lease duration as measured on the candidate's own clock (so clock skew between replicas
//! cannot shorten a lease). Only the replica holding the Lease reconciles; the others keep
//! their caches warm so a failover starts acting at once, from the objects' state.
//!
//! Unlike a plain poll, candidates also watch the Lease: when a holder shuts down it releases
//! the Lease and a standby takes it over within one round trip instead of a retry period.

use super::retry_log::{self, Routine as _};
use jiff::Timestamp;
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use karpenter_cluster::failure_streaks::FailureStreaks;
use karpenter_cluster::lease::{self, Change, RETRY_PERIOD_SECS, Standing};
use karpenter_metrics::runtime::RuntimeMetrics;
use kube::Client;
use kube::api::{Api, PostParams, WatchParams};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{Notify, watch};
use tokio::time::Instant;

/// Whether this replica may act. Cheap to clone; all clones see the same state.
#[derive(Debug, Clone)]
pub struct LeaderGate {
    rx: watch::Receiver<bool>,
    // Holds the sender of a gate that never changes, so `lost` waits forever instead of
    // seeing a closed channel.
    _fixed: Option<Arc<watch::Sender<bool>>>,
}

impl LeaderGate {
    /// A gate that is always open (leader election disabled): `lost` never returns.
    pub fn always() -> Self {
        let (tx, rx) = watch::channel(true);
        Self {
            rx,
            _fixed: Some(Arc::new(tx)),
        }
    }

    /// A gate driven by `rx`. When the sender is dropped the gate counts as lost.
    pub fn from_receiver(rx: watch::Receiver<bool>) -> Self {
        Self { rx, _fixed: None }
    }

    /// Whether this replica currently holds the Lease.
    pub fn is_leader(&self) -> bool {
        *self.rx.borrow() && self.rx.has_changed().is_ok()
    }

    /// Waits until this replica is leader; never returns if the election has ended.
    pub async fn wait_for_leadership(&mut self) {
        if self.rx.wait_for(|v| *v).await.is_err() {
            std::future::pending::<()>().await;
        }
    }

    /// Waits until leadership is lost, or the election behind this gate has ended.
    pub async fn lost(&mut self) {
        let _ = self.rx.wait_for(|v| !*v).await;
    }
}

/// Errors of leader election.
#[derive(Debug, thiserror::Error)]
#[error("leader election Lease {namespace}/{name}: {source}")]
pub struct LeaderError {
    /// Lease namespace.
    pub namespace: String,
    /// Lease name.
    pub name: String,
    /// The API error.
    #[source]
    pub source: kube::Error,
}

/// One replica's side of the election.
struct Elector {
    api: Api<Lease>,
    name: String,
    identity: String,
    observed: Option<lease::Observed>,
    /// The Lease as this replica last wrote it, while it holds it: renewals update this copy
    /// without reading first (client-go's fast path).
    cached: Option<Lease>,
    runtime: RuntimeMetrics,
}

impl Elector {
    fn spec(&self, previous: Option<&LeaseSpec>) -> LeaseSpec {
        lease::next_spec(previous, &self.identity, Timestamp::now())
    }

    /// Takes or renews the Lease. `Ok(false)` when another replica holds it or won a race.
    /// The holder (`leading`) first updates its cached copy, whose resourceVersion fails the
    /// update if anyone wrote since; only then does it read the Lease (the slow path).
    async fn try_acquire_or_renew(&mut self, leading: bool) -> Result<bool, kube::Error> {
        if let Some(mut next) = self.cached.take().filter(|_| leading) {
            next.spec = Some(self.spec(next.spec.as_ref()));
            let params = PostParams::default();
            match self.api.replace(&self.name, &params, &next).await {
                Ok(renewed) => return Ok(self.hold(renewed)),
                Err(e) => tracing::debug!(error = %e, "optimistic Lease renewal failed"),
            }
        }
        let Some(lease) = self.api.get_opt(&self.name).await? else {
            let lease = Lease {
                metadata: ObjectMeta {
                    name: Some(self.name.clone()),
                    ..ObjectMeta::default()
                },
                spec: Some(self.spec(None)),
            };
            return match self.api.create(&PostParams::default(), &lease).await {
                Ok(created) => Ok(self.hold(created)),
                Err(kube::Error::Api(e)) if e.code == 409 => Ok(false),
                Err(e) => Err(e),
            };
        };
        let now = std::time::Instant::now();
        if !lease::observe(&mut self.observed, &lease, now).may_take(&self.identity, now) {
            return Ok(false);
        }
        if leading {
            self.runtime.leader_slow_path(&self.name);
        }
        let mut next = lease.clone();
        next.spec = Some(self.spec(lease.spec.as_ref()));
        // The resourceVersion carried over makes this a compare-and-swap: of two candidates
        // racing for an expired Lease, one gets a conflict.
        match self
            .api
            .replace(&self.name, &PostParams::default(), &next)
            .await
        {
            Ok(replaced) => Ok(self.hold(replaced)),
            Err(kube::Error::Api(e)) if e.code == 409 => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// This replica wrote `lease` and holds it.
    fn hold(&mut self, lease: Lease) -> bool {
        lease::observe(&mut self.observed, &lease, std::time::Instant::now());
        self.cached = Some(lease);
        true
    }

    /// Gives the Lease up if this replica holds it, so a standby takes over at once.
    async fn release(&mut self) -> Result<(), kube::Error> {
        let Some(lease) = self.api.get_opt(&self.name).await? else {
            return Ok(());
        };
        let Some(lease) = lease::released(lease, &self.identity, Timestamp::now()) else {
            return Ok(());
        };
        self.api
            .replace(&self.name, &PostParams::default(), &lease)
            .await
            .map(|_| ())
    }
}

/// The running election: the gate follows it; [`Election::release`] ends it.
pub struct Election {
    stop: watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
}

impl Election {
    /// Stops renewing and releases the Lease if this replica holds it; waits at most a few
    /// seconds for the API server.
    pub async fn release(self) {
        let _ = self.stop.send(true);
        match tokio::time::timeout(Duration::from_secs(5), self.task).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => tracing::warn!(error = %e, "leader election task failed"),
            Err(_) => tracing::warn!("releasing the leader election Lease timed out"),
        }
    }
}

/// Wakes `notify` on every change of the Lease `name`, re-watching when a watch ends. Uses
/// only the `watch` verb (the chart's Role grants no `list` on Leases).
async fn watch_lease(api: Api<Lease>, name: String, notify: Arc<Notify>) {
    use futures::StreamExt as _;
    let params = WatchParams::default().fields(&format!("metadata.name={name}"));
    loop {
        match api.watch(&params, "0").await {
            Ok(stream) => {
                let mut stream = std::pin::pin!(stream);
                while let Some(event) = stream.next().await {
                    if event.is_err() {
                        break;
                    }
                    notify.notify_one();
                }
            }
            Err(e) => tracing::debug!(error = %e, "watching the leader election Lease failed"),
        }
        tokio::time::sleep(Duration::from_secs(RETRY_PERIOD_SECS)).await;
    }
}

/// Starts competing for `namespace/name` as `identity`; the gate opens while this replica
/// holds the Lease and closes for good when it loses it (it could not renew it for the renew
/// deadline, for example while the API server was unreachable): the process then exits and
/// comes back as a candidate.
///
/// # Errors
/// The first attempt to read or create the Lease failed (for example, no permission).
pub async fn elect(
    client: Client,
    namespace: &str,
    name: &str,
    identity: &str,
    runtime: RuntimeMetrics,
) -> Result<(LeaderGate, Election), LeaderError> {
    let api: Api<Lease> = Api::namespaced(client, namespace);
    let mut elector = Elector {
        api: api.clone(),
        name: name.to_owned(),
        identity: identity.to_owned(),
        observed: None,
        cached: None,
        runtime,
    };
    let first = elector
        .try_acquire_or_renew(false)
        .await
        .map_err(|source| LeaderError {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            source,
        })?;
    let (tx, rx) = watch::channel(first);
    let (stop, mut stopped) = watch::channel(false);
    let changed = Arc::new(Notify::new());
    let watcher = tokio::spawn(watch_lease(api, name.to_owned(), changed.clone()));
    let task = tokio::spawn(async move {
        let retry = Duration::from_secs(RETRY_PERIOD_SECS);
        let mut standing = Standing::new(first, Instant::now().into_std());
        let mut failures = FailureStreaks::default();
        loop {
            let leading = standing.leading();
            tokio::select! {
                _ = stopped.wait_for(|s| *s) => break,
                () = tokio::time::sleep(retry) => {}
                // A standby reacts to a released Lease at once; a holder only on its period.
                () = changed.notified(), if !leading => {}
            }
            // No deadline on the attempt: a frozen API server holds it until it answers, so a
            // freeze shorter than a lease duration does not end the process (with a deadline,
            // the holder would step down, and so exit, after the renew deadline).
            let held = match elector.try_acquire_or_renew(leading).await {
                Ok(held) => {
                    failures.succeeded(&());
                    held
                }
                Err(e) => {
                    let now = Instant::now().into_std();
                    let report = failures.failed(&(), e.is_routine(), now);
                    let what = "taking or renewing the leader election Lease failed";
                    retry_log::log(report, "leader election", what, &e);
                    false
                }
            };
            match standing.after_attempt(held, Instant::now().into_std()) {
                Change::Acquired => {
                    let _ = tx.send(true);
                }
                Change::SteppedDown => {
                    tracing::warn!(
                        renew_deadline_seconds = lease::RENEW_DEADLINE_SECS,
                        "could not renew the leader election Lease in time; stepping down"
                    );
                    let _ = tx.send(false);
                    break;
                }
                Change::None => {}
            }
        }
        watcher.abort();
        if let Err(e) = elector.release().await {
            tracing::warn!(error = %e, "releasing the leader election Lease failed");
        }
    });
    Ok((LeaderGate::from_receiver(rx), Election { stop, task }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controller::testing::{Reply, mock_client, status};
    use karpenter_metrics::Metrics;

    fn lease(resource_version: u32, holder: &str) -> Reply {
        let at = "2026-01-01T00:00:00.000000Z";
        let json = serde_json::json!({
            "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": "l", "namespace": "ns",
                "resourceVersion": resource_version.to_string()},
            "spec": {"holderIdentity": holder, "leaseDurationSeconds": 15,
                "acquireTime": at, "renewTime": at, "leaseTransitions": 0},
        });
        (200, json)
    }

    /// Creates the Lease as `me`, then renews it twice as its holder; `put` answers the
    /// updates given the resourceVersion they carry. Returns the requests' methods and
    /// resourceVersions, and the exposition.
    async fn renew_twice(
        mut put: impl FnMut(u32) -> Reply + Send + 'static,
        mut get: impl FnMut() -> Reply + Send + 'static,
    ) -> (Vec<(String, String)>, String) {
        let mut created = false;
        let (client, api) = mock_client(move |req| {
            let rv = &req.body["metadata"]["resourceVersion"];
            match req.method.as_str() {
                "GET" if !created => status(404, "NotFound"),
                "GET" => get(),
                "POST" => {
                    created = true;
                    (201, lease(1, "me").1)
                }
                _ => put(rv.as_str().unwrap_or("0").parse().unwrap()),
            }
        });
        let m = Metrics::new();
        let (name, identity, runtime) = ("l".into(), "me".into(), m.runtime.clone());
        let (observed, cached) = (None, None);
        let mut elector = Elector {
            api: Api::namespaced(client, "ns"),
            name,
            identity,
            observed,
            cached,
            runtime,
        };
        assert!(
            elector.try_acquire_or_renew(false).await.unwrap(),
            "created"
        );
        assert!(elector.try_acquire_or_renew(true).await.unwrap(), "renewed");
        assert!(elector.try_acquire_or_renew(true).await.unwrap(), "renewed");
        let requests = api.requests().into_iter().map(|r| {
            let rv = r.body["metadata"]["resourceVersion"].as_str().unwrap_or("");
            (r.method, rv.to_owned())
        });
        (requests.collect(), m.encode())
    }

    fn calls(calls: &[(&str, &str)]) -> Vec<(String, String)> {
        calls
            .iter()
            .map(|(m, rv)| (m.to_string(), rv.to_string()))
            .collect()
    }

    #[tokio::test]
    async fn the_holder_renews_its_cached_lease_without_reading_it() {
        let (requests, text) = renew_twice(|rv| lease(rv + 1, "me"), || lease(1, "me")).await;
        let want = [("GET", ""), ("POST", ""), ("PUT", "1"), ("PUT", "2")];
        assert_eq!(requests, calls(&want));
        assert!(!text.contains("leader_election_slowpath_total{"), "{text}");
    }

    #[tokio::test]
    async fn a_conflicting_renewal_reads_the_lease_and_counts_a_slow_path() {
        // Something else wrote the Lease (resourceVersion 5) after it was created.
        let put = |rv| match rv {
            1 => status(409, "Conflict"),
            rv => lease(rv + 1, "me"),
        };
        let (requests, text) = renew_twice(put, || lease(5, "me")).await;
        let want = [
            ("GET", ""),
            ("POST", ""),
            ("PUT", "1"),
            ("GET", ""),
            ("PUT", "5"),
            ("PUT", "6"),
        ];
        assert_eq!(requests, calls(&want));
        assert!(
            text.contains("leader_election_slowpath_total{name=\"l\"} 1"),
            "{text}"
        );
    }

    #[tokio::test]
    async fn gate_follows_channel() {
        let (tx, rx) = watch::channel(false);
        let mut gate = LeaderGate::from_receiver(rx);
        assert!(!gate.is_leader());
        tx.send(true).unwrap();
        gate.wait_for_leadership().await;
        assert!(gate.is_leader());
        tx.send(false).unwrap();
        gate.lost().await;
        assert!(!gate.is_leader());
    }

    #[tokio::test]
    async fn an_always_open_gate_is_never_lost() {
        let mut gate = LeaderGate::always();
        assert!(gate.is_leader());
        gate.wait_for_leadership().await;
        let lost = tokio::time::timeout(Duration::from_millis(50), gate.lost()).await;
        assert!(
            lost.is_err(),
            "an always-open gate reported leadership lost"
        );
        assert!(gate.is_leader());
    }

    #[tokio::test]
    async fn a_gate_whose_election_ended_is_lost_and_closed() {
        let (tx, rx) = watch::channel(true);
        let mut gate = LeaderGate::from_receiver(rx);
        drop(tx);
        tokio::time::timeout(Duration::from_millis(50), gate.lost())
            .await
            .expect("lost returns once the election is gone");
        assert!(!gate.is_leader());
    }
}
