//! How fast the kube-controller-manager's workload controllers create pods, so that a
//! simulated scale-up reaches the provisioner in the batches a real cluster's does.
//!
//! What is modelled, after Kubernetes v1.36 (`pkg/controller/replicaset`, `job`,
//! `statefulset`) and client-go:
//! - each controller (ReplicaSets, which Deployments scale; StatefulSets; Jobs) has its own
//!   API client, paced by `--kube-api-qps` / `--kube-api-burst` (20 / 30), which its pod
//!   creations, its events and its status updates share ([`RateLimiter`]);
//! - at most `--concurrent-*-syncs` (5) workloads of a controller sync at once; the others
//!   wait their turn in order;
//! - a sync creates what is missing (at most 500 pods, `BurstReplicas` /
//!   `MaxPodCreateDeletePerSync`) in slow-start batches of 1, 2, 4 … pods, each batch's
//!   requests reserved at once and the next batch started when the last of them is sent. So
//!   concurrent syncs interleave batch by batch and a workload's pods arrive in runs, as
//!   measured: 2,000 pods of 4 Deployments arrive over 99 s, 20 a second after a burst of 30;
//! - every created pod records a `SuccessfulCreate` event on its workload, filtered per
//!   workload (25, then one per 5 minutes); the one event broadcaster holds one reservation
//!   at a time, so its events slip in between batches;
//! - a sync ends with a status update; then a workload still missing pods (more than 500, or
//!   lost meanwhile) syncs again (its expectations are met as soon as its pods are seen);
//! - the Job controller syncs a Job 1 s after one of its pods changes (`SyncJobBatchPeriod`)
//!   and at once when the Job itself changes; a StatefulSet with the default
//!   `OrderedReady` policy creates one pod at a time, each once the previous ones are Running
//!   and Ready (the caller decides how many a sync may create).
//!
//! Deleting surplus pods is not paced (the simulator deletes at once).

use crate::rate_limiter::RateLimiter;
use crate::scenario::ControllerManagerSettings;
use crate::workloads::{Kind, WorkloadKey};
use karpenter_scheduling::model::Millis;
use std::collections::BTreeMap;

/// Pods one sync creates at most (`BurstReplicas`, `MaxPodCreateDeletePerSync`); a
/// StatefulSet's batches are capped at the same number (`MaxBatchSize`).
pub(crate) const MAX_PER_SYNC: u32 = 500;

/// The delay before the Job controller syncs a Job one of whose pods changed.
pub(crate) const JOB_SYNC_BATCH_PERIOD_MS: Millis = 1_000;

/// `SuccessfulCreate` events per workload before the spam filter holds them back.
const EVENT_SPAM_BURST: u32 = 25;
/// The spam filter's refill: one event per 5 minutes.
const EVENT_SPAM_QPS: f64 = 1.0 / 300.0;

/// The three workload controllers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Which {
    ReplicaSet,
    StatefulSet,
    Job,
}

impl Which {
    fn of(kind: Kind) -> Self {
        match kind {
            Kind::Deployment | Kind::ReplicaSet => Self::ReplicaSet,
            Kind::StatefulSet => Self::StatefulSet,
            Kind::Job => Self::Job,
        }
    }
}

/// One workload's sync in progress.
#[derive(Debug, Clone)]
struct Sync {
    /// Pods this sync has still to reserve.
    left: u32,
    /// The size of the batch in flight.
    batch: u32,
    /// When the batch in flight (or the closing status update) is sent.
    until: Millis,
    /// The closing status update is in flight.
    closing: bool,
    /// Created pods whose events are not recorded yet.
    unrecorded: u32,
}

/// One controller with its API client.
#[derive(Debug, Clone)]
struct Controller {
    client: RateLimiter,
    workers: usize,
    /// Workloads waiting for a worker, by when they may start and in order of arrival.
    queue: BTreeMap<(Millis, u64), WorkloadKey>,
    active: BTreeMap<WorkloadKey, Sync>,
    /// Per-workload event spam filters.
    spam: BTreeMap<WorkloadKey, RateLimiter>,
    /// Events recorded and not yet sent.
    events: u64,
    /// When the broadcaster's one reserved event is sent.
    sending: Option<Millis>,
}

impl Controller {
    fn new(qps: f64, burst: u32, workers: u32) -> Self {
        Self {
            client: RateLimiter::new(qps, burst),
            workers: workers.max(1) as usize,
            queue: BTreeMap::new(),
            active: BTreeMap::new(),
            spam: BTreeMap::new(),
            events: 0,
            sending: None,
        }
    }

    fn is_waiting(&self, key: &WorkloadKey) -> Option<(Millis, u64)> {
        self.queue
            .iter()
            .find(|(_, k)| *k == key)
            .map(|(slot, _)| *slot)
    }

    /// The earliest instant something of this controller happens.
    fn next(&self) -> Option<Millis> {
        let syncs = self.active.values().map(|s| s.until);
        let start = (self.active.len() < self.workers)
            .then(|| self.queue.keys().next().map(|(at, _)| *at))
            .flatten();
        syncs.chain(start).chain(self.sending).min()
    }

    /// Records the events of `n` pods of `key` created by `at`, through the spam filter.
    fn record_events(&mut self, key: &WorkloadKey, n: u32, at: Millis) {
        let filter = self
            .spam
            .entry(key.clone())
            .or_insert_with(|| RateLimiter::new(EVENT_SPAM_QPS, EVENT_SPAM_BURST));
        for _ in 0..n {
            if filter.try_take(at) {
                self.events += 1;
            }
        }
        if self.sending.is_none() && self.events > 0 {
            self.sending = Some(self.client.reserve(at));
        }
    }

    /// Reserves the next batch of `key`'s sync at `at`: its creations go to `out`.
    fn issue(&mut self, key: &WorkloadKey, at: Millis, out: &mut Vec<(Millis, WorkloadKey)>) {
        let Some(sync) = self.active.get_mut(key) else {
            return;
        };
        if sync.left == 0 {
            sync.closing = true;
            sync.until = self.client.reserve(at);
            return;
        }
        let size = sync.batch.min(sync.left).min(MAX_PER_SYNC);
        sync.batch = size;
        sync.left -= size;
        sync.unrecorded = size;
        let mut last = at;
        for _ in 0..size {
            last = self.client.reserve(at);
            out.push((last, key.clone()));
        }
        sync.until = last;
    }
}

/// The kube-controller-manager's workload controllers as API clients: which pods they create
/// when. The caller says which workloads miss pods ([`ControllerManager::request`]) and how
/// many a sync may create when it starts; [`ControllerManager::advance`] returns each
/// creation with the instant its request is sent, when the pod appears.
#[derive(Debug, Clone)]
pub(crate) struct ControllerManager {
    controllers: BTreeMap<Which, Controller>,
    arrivals: u64,
}

impl ControllerManager {
    /// The controllers with `settings`' rates and worker counts.
    pub(crate) fn new(settings: &ControllerManagerSettings) -> Self {
        let (qps, burst) = (settings.kube_api_qps, settings.kube_api_burst);
        let controllers = [
            (
                Which::ReplicaSet,
                Controller::new(qps, burst, settings.concurrent_replica_set_syncs),
            ),
            (
                Which::StatefulSet,
                Controller::new(qps, burst, settings.concurrent_stateful_set_syncs),
            ),
            (
                Which::Job,
                Controller::new(qps, burst, settings.concurrent_job_syncs),
            ),
        ]
        .into_iter()
        .collect();
        Self {
            controllers,
            arrivals: 0,
        }
    }

    fn controller(&mut self, kind: Kind) -> &mut Controller {
        self.controllers
            .get_mut(&Which::of(kind))
            .expect("every workload kind has a controller")
    }

    /// Whether `key` has a sync in progress or waiting.
    pub(crate) fn busy(&self, key: &WorkloadKey) -> bool {
        let c = &self.controllers[&Which::of(key.0)];
        c.active.contains_key(key) || c.is_waiting(key).is_some()
    }

    /// Asks for a sync of `key` at `at` (no earlier than a sync already asked for; nothing
    /// when one is in progress).
    pub(crate) fn request(&mut self, key: &WorkloadKey, at: Millis) {
        self.arrivals += 1;
        let arrival = self.arrivals;
        let c = self.controller(key.0);
        if c.active.contains_key(key) {
            return;
        }
        match c.is_waiting(key) {
            Some(slot) if slot.0 <= at => {}
            Some(slot) => {
                c.queue.remove(&slot);
                c.queue.insert((at, arrival), key.clone());
            }
            None => {
                c.queue.insert((at, arrival), key.clone());
            }
        }
    }

    /// Forgets `key` (its workload was deleted): its sync stops creating pods.
    pub(crate) fn forget(&mut self, key: &WorkloadKey) {
        let c = self.controller(key.0);
        if let Some(slot) = c.is_waiting(key) {
            c.queue.remove(&slot);
        }
        if let Some(sync) = c.active.get_mut(key) {
            sync.left = 0;
        }
        c.spam.remove(key);
    }

    /// When something next happens (a batch or status update sent, a sync starting, an
    /// event sent).
    pub(crate) fn next_wakeup(&self) -> Option<Millis> {
        self.controllers.values().filter_map(Controller::next).min()
    }

    /// Runs every controller up to `now`. A sync of `key` starting at `t` creates
    /// `missing(key, sent)` pods (at most [`MAX_PER_SYNC`]; none: it only updates status),
    /// where `sent` counts the creations of `key` this call has pushed to `out`. Each
    /// creation is pushed to `out` with the instant its request is sent (at or after the
    /// instant its batch started, which is at most `now`).
    pub(crate) fn advance(
        &mut self,
        now: Millis,
        missing: &mut dyn FnMut(&WorkloadKey, u32) -> u32,
        out: &mut Vec<(Millis, WorkloadKey)>,
    ) {
        for c in self.controllers.values_mut() {
            loop {
                // The earliest due happening of this controller, events first at a tie (the
                // broadcaster reserved before the batch that follows).
                if let Some(at) = c.sending.filter(|t| *t <= now)
                    && c.active.values().all(|s| s.until >= at)
                {
                    c.events = c.events.saturating_sub(1);
                    c.sending = (c.events > 0).then(|| c.client.reserve(at));
                    continue;
                }
                let due = c
                    .active
                    .iter()
                    .filter(|(_, s)| s.until <= now)
                    .min_by_key(|(k, s)| (s.until, (*k).clone()))
                    .map(|(k, s)| (k.clone(), s.until));
                if let Some((key, at)) = due {
                    let sync = c.active.get_mut(&key).expect("due sync");
                    if sync.closing {
                        c.active.remove(&key);
                        // Pods seen since the sync started requeued the workload: it syncs
                        // again at once if it still misses pods.
                        if missing(&key, sent_for(out, &key)) > 0 {
                            self.arrivals += 1;
                            c.queue.insert((at, self.arrivals), key);
                        }
                        continue;
                    }
                    let created = std::mem::take(&mut sync.unrecorded);
                    sync.batch = sync.batch.saturating_mul(2);
                    c.record_events(&key, created, at);
                    c.issue(&key, at, out);
                    continue;
                }
                let start = (c.active.len() < c.workers)
                    .then(|| c.queue.first_key_value().map(|(slot, _)| *slot))
                    .flatten()
                    .filter(|(at, _)| *at <= now);
                if let Some(slot) = start {
                    let key = c.queue.remove(&slot).expect("queued");
                    let left = missing(&key, sent_for(out, &key)).min(MAX_PER_SYNC);
                    c.active.insert(
                        key.clone(),
                        Sync {
                            left,
                            batch: 1,
                            until: slot.0,
                            closing: false,
                            unrecorded: 0,
                        },
                    );
                    c.issue(&key, slot.0, out);
                    continue;
                }
                break;
            }
        }
    }
}

/// The creations of `key` in `out`.
fn sent_for(out: &[(Millis, WorkloadKey)], key: &WorkloadKey) -> u32 {
    u32::try_from(out.iter().filter(|(_, k)| k == key).count()).unwrap_or(u32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(kind: Kind, name: &str) -> WorkloadKey {
        (kind, "default".to_owned(), name.to_owned())
    }

    fn settings() -> ControllerManagerSettings {
        ControllerManagerSettings::default()
    }

    /// Runs the controllers from 0 with `wanted` pods per workload (asked for in that order),
    /// stepping to each next wake-up as the engine does, and returns each creation.
    fn run(cm: &mut ControllerManager, wanted: &[(WorkloadKey, u32)]) -> Vec<(Millis, String)> {
        let left: BTreeMap<WorkloadKey, u32> = wanted.iter().cloned().collect();
        let mut in_flight: BTreeMap<WorkloadKey, u32> = BTreeMap::new();
        for (k, _) in wanted {
            cm.request(k, 0);
        }
        let mut created = Vec::new();
        let mut now = 0;
        loop {
            let mut out = Vec::new();
            cm.advance(
                now,
                &mut |k, sent| left[k] - in_flight.get(k).copied().unwrap_or(0) - sent,
                &mut out,
            );
            for (at, k) in out {
                *in_flight.entry(k.clone()).or_default() += 1;
                created.push((at, k.2.clone()));
            }
            match cm.next_wakeup() {
                Some(t) => now = t.max(now + 1),
                None => break,
            }
        }
        created.sort();
        created
    }

    #[test]
    fn one_deployment_takes_the_burst_then_twenty_pods_a_second_in_doubling_batches() {
        let mut cm = ControllerManager::new(&settings());
        let created = run(&mut cm, &[(key(Kind::Deployment, "web"), 300)]);
        assert_eq!(created.len(), 300);
        // The burst of 30 goes at once, shared with the first `SuccessfulCreate` events (the
        // broadcaster sends one between slow-start batches); then 20 a second, so the 300th
        // pod comes a little after (300 − 30) / 20 = 13.5 s.
        let at_once = created.iter().filter(|(at, _)| *at == 0).count();
        assert!((20..30).contains(&at_once), "{at_once}");
        let last = created.last().unwrap().0;
        assert!((13_500..=14_500).contains(&last), "{last}");
    }

    #[test]
    fn two_thousand_pods_of_four_deployments_arrive_as_measured() {
        // Measured on the real control plane (v1.36.3, defaults): 2,000 pods of 4
        // Deployments of 500, created over 99.4 s, 20 a second; the first Deployment's 500
        // pods by 25 s, then the others in runs of a few hundred.
        let mut cm = ControllerManager::new(&settings());
        let wanted: Vec<(WorkloadKey, u32)> = (1..=4)
            .map(|i| (key(Kind::Deployment, &format!("d{i}")), 500))
            .collect();
        let created = run(&mut cm, &wanted);
        assert_eq!(created.len(), 2_000);
        let last = created.last().unwrap().0;
        assert!((98_500..=101_000).contains(&last), "{last}");
        let d1_done = created
            .iter()
            .filter(|(_, n)| n == "d1")
            .map(|(at, _)| *at)
            .max()
            .unwrap();
        assert!((20_000..=30_000).contains(&d1_done), "{d1_done}");
        // Runs of one Deployment: a few dozen, the longest a batch of a couple of hundred.
        let mut runs: Vec<usize> = Vec::new();
        for pair in created.windows(2) {
            if pair[0].1 == pair[1].1 {
                *runs.last_mut().unwrap_or(&mut 0) += 1;
            } else {
                runs.push(1);
            }
        }
        let longest = runs.iter().max().copied().unwrap_or(0);
        assert!((200..=260).contains(&longest), "{runs:?}");
    }

    #[test]
    fn a_sync_creates_at_most_500_and_the_next_sync_the_rest() {
        let mut cm = ControllerManager::new(&settings());
        let created = run(&mut cm, &[(key(Kind::Deployment, "big"), 700)]);
        assert_eq!(created.len(), 700);
        // Two syncs: the second restarts the slow start, so nothing is lost but time.
        let last = created.last().unwrap().0;
        assert!((33_500..=35_000).contains(&last), "{last}");
    }

    #[test]
    fn workers_bound_concurrent_syncs_and_controllers_have_their_own_clients() {
        let mut one = ControllerManagerSettings {
            concurrent_replica_set_syncs: 1,
            ..settings()
        };
        one.kube_api_burst = 1_000;
        one.kube_api_qps = 1_000.0;
        let mut cm = ControllerManager::new(&one);
        let created = run(
            &mut cm,
            &[
                (key(Kind::Deployment, "a"), 20),
                (key(Kind::Deployment, "b"), 20),
            ],
        );
        // One worker: b's first pod only after a's sync (and its status update) ended.
        let a_last = created.iter().rfind(|(_, n)| n == "a").unwrap().0;
        let b_first = created.iter().find(|(_, n)| n == "b").unwrap().0;
        assert!(b_first >= a_last, "{created:?}");
        // A Job and a Deployment do not share a client: each gets its own burst.
        let mut cm = ControllerManager::new(&settings());
        let created = run(
            &mut cm,
            &[
                (key(Kind::Deployment, "web"), 30),
                (key(Kind::Job, "batch"), 30),
            ],
        );
        for name in ["web", "batch"] {
            let at_once = created
                .iter()
                .filter(|(at, n)| *at == 0 && n == name)
                .count();
            assert!(at_once >= 20, "{name}: {created:?}");
        }
    }

    #[test]
    fn a_forgotten_workload_creates_nothing_more() {
        let mut cm = ControllerManager::new(&settings());
        let k = key(Kind::Deployment, "gone");
        cm.request(&k, 0);
        let mut out = Vec::new();
        cm.advance(0, &mut |_, _| 200, &mut out);
        let first = out.len();
        assert!(first > 0 && first < 200, "{first}");
        cm.forget(&k);
        // The workload is gone: its controller sees nothing to create.
        let mut now = 0;
        while let Some(t) = cm.next_wakeup() {
            now = t.max(now + 1);
            cm.advance(now, &mut |_, _| 0, &mut out);
        }
        assert!(out.len() < 200, "{}", out.len());
        assert!(!cm.busy(&k));
    }
}
