//! Request batching for EC2, as upstream's provider batches CreateFleet, DescribeInstances
//! and TerminateInstances: callers [`Batcher::add`] one request each and wait; a task per
//! batcher collects requests until none has arrived for the idle window, the first one is
//! older than the maximum window, or the size cap is reached, then runs one
//! [`BatchExecutor`] call per group of requests with equal keys and hands every caller its
//! own answer.
//!
//! Time comes from tokio (`tokio::time::pause` drives it in tests). The task is started by
//! the first request (so a batcher can be built outside a runtime) and again if its runtime
//! went away.

pub mod describe;
pub mod ec2;
pub mod fleet;
pub mod terminate;

use crate::observe::{NoObserver, ObserverSlot, ProviderObserver};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

/// How a batcher collects requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchOptions {
    /// The `batcher` label of its metrics (`create_fleet`).
    pub name: &'static str,
    /// A batch closes once no request arrived for this long.
    pub idle: Duration,
    /// A batch closes at the latest this long after its first request.
    pub max: Duration,
    /// A batch closes once it holds this many requests (over all its groups).
    pub max_items: usize,
}

/// Runs one group of batched requests. Implementations answer every input, in order.
#[async_trait::async_trait]
pub trait BatchExecutor: Send + Sync + 'static {
    /// What groups requests: only requests with equal keys share a call.
    type Key: Ord + Clone + Send + 'static;
    /// One caller's request.
    type Input: Send + 'static;
    /// One caller's answer.
    type Output: Send + 'static;

    /// The answers to `inputs` (all with key `key`), one per input and in their order.
    async fn execute(&self, key: &Self::Key, inputs: Vec<Self::Input>) -> Vec<Self::Output>;
}

/// Why a batched request got no answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BatchError {
    /// The batcher's task stopped (its runtime shut down) before answering.
    #[error("batcher {0}: stopped before answering")]
    Stopped(&'static str),
    /// The executor returned fewer answers than it was given requests.
    #[error("batcher {0}: no answer for this request in its batch")]
    Unanswered(&'static str),
}

type Request<X> = (
    <X as BatchExecutor>::Key,
    <X as BatchExecutor>::Input,
    oneshot::Sender<<X as BatchExecutor>::Output>,
);

/// A request in a batch with the channel its answer goes back on.
type Waiting<X> = (
    <X as BatchExecutor>::Input,
    oneshot::Sender<<X as BatchExecutor>::Output>,
);

/// A batcher over the executor `X`.
pub struct Batcher<X: BatchExecutor> {
    options: BatchOptions,
    executor: Arc<X>,
    observer: ObserverSlot,
    sender: Mutex<Option<mpsc::UnboundedSender<Request<X>>>>,
}

impl<X: BatchExecutor> std::fmt::Debug for Batcher<X> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Batcher")
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

impl<X: BatchExecutor> Batcher<X> {
    /// A batcher running `executor` with `options`, reporting its batch sizes and windows
    /// to the observer in `observer` (once one is set).
    pub fn new(options: BatchOptions, executor: X, observer: ObserverSlot) -> Self {
        Self {
            options,
            executor: Arc::new(executor),
            observer,
            sender: Mutex::new(None),
        }
    }

    /// The options.
    pub fn options(&self) -> &BatchOptions {
        &self.options
    }

    /// Adds `input` to the current batch under `key` and waits for its answer.
    pub async fn add(&self, key: X::Key, input: X::Input) -> Result<X::Output, BatchError> {
        let (tx, rx) = oneshot::channel();
        self.sender()
            .send((key, input, tx))
            .map_err(|_| BatchError::Stopped(self.options.name))?;
        rx.await
            .map_err(|_| BatchError::Unanswered(self.options.name))
    }

    /// The running task's queue, starting a task when there is none (or it stopped).
    fn sender(&self) -> mpsc::UnboundedSender<Request<X>> {
        let mut slot = self.sender.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(s) = slot.as_ref().filter(|s| !s.is_closed()) {
            return s.clone();
        }
        let (tx, rx) = mpsc::unbounded_channel();
        tokio::spawn(run(
            self.options,
            self.executor.clone(),
            self.observer.clone(),
            rx,
        ));
        *slot = Some(tx.clone());
        tx
    }
}

/// The batcher's task: one batch after another until every sender is gone.
async fn run<X: BatchExecutor>(
    options: BatchOptions,
    executor: Arc<X>,
    observer: ObserverSlot,
    mut rx: mpsc::UnboundedReceiver<Request<X>>,
) {
    while let Some(first) = rx.recv().await {
        let start = Instant::now();
        let mut groups: BTreeMap<X::Key, Vec<Waiting<X>>> = BTreeMap::new();
        let mut count = 1;
        groups.entry(first.0).or_default().push((first.1, first.2));
        let max_deadline = start + options.max;
        let mut idle_deadline = start + options.idle;
        while count < options.max_items {
            tokio::select! {
                next = rx.recv() => match next {
                    Some((key, input, tx)) => {
                        groups.entry(key).or_default().push((input, tx));
                        count += 1;
                        idle_deadline = Instant::now() + options.idle;
                    }
                    None => break,
                },
                () = tokio::time::sleep_until(idle_deadline.min(max_deadline)) => break,
            }
        }
        let observe = || -> Arc<dyn ProviderObserver> {
            observer
                .get()
                .cloned()
                .unwrap_or_else(|| Arc::new(NoObserver))
        };
        observe().batch_window(options.name, start.elapsed());
        for (key, requests) in groups {
            observe().batch_size(options.name, requests.len());
            let executor = executor.clone();
            // Groups run side by side; the next batch collects meanwhile.
            tokio::spawn(async move {
                let (inputs, replies): (Vec<_>, Vec<_>) = requests.into_iter().unzip();
                let outputs = executor.execute(&key, inputs).await;
                // A reply whose caller gave up is dropped; a caller without an output sees
                // its sender dropped (`BatchError::Unanswered`).
                for (reply, output) in replies.into_iter().zip(outputs) {
                    let _ = reply.send(output);
                }
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Echoes each input with the size of its call and the key, and records each call.
    #[derive(Default)]
    struct Echo {
        calls: Mutex<Vec<(u32, Vec<u32>)>>,
        short: bool,
    }

    #[async_trait::async_trait]
    impl BatchExecutor for Echo {
        type Key = u32;
        type Input = u32;
        type Output = (u32, usize);

        async fn execute(&self, key: &u32, inputs: Vec<u32>) -> Vec<(u32, usize)> {
            self.calls.lock().unwrap().push((*key, inputs.clone()));
            let n = inputs.len();
            let mut out: Vec<_> = inputs.into_iter().map(|i| (i, n)).collect();
            if self.short {
                out.pop();
            }
            out
        }
    }

    #[derive(Debug, Default)]
    struct Recorder {
        windows: Mutex<Vec<(&'static str, Duration)>>,
        sizes: Mutex<Vec<(&'static str, usize)>>,
    }

    impl ProviderObserver for Recorder {
        fn batch_window(&self, batcher: &'static str, elapsed: Duration) {
            self.windows.lock().unwrap().push((batcher, elapsed));
        }
        fn batch_size(&self, batcher: &'static str, size: usize) {
            self.sizes.lock().unwrap().push((batcher, size));
        }
    }

    const OPTS: BatchOptions = BatchOptions {
        name: "test",
        idle: Duration::from_millis(100),
        max: Duration::from_secs(1),
        max_items: 500,
    };

    fn batcher(options: BatchOptions, short: bool) -> (Arc<Batcher<Echo>>, Arc<Recorder>) {
        let slot = ObserverSlot::default();
        let rec = Arc::new(Recorder::default());
        slot.set(rec.clone()).unwrap();
        let echo = Echo {
            short,
            ..Echo::default()
        };
        (Arc::new(Batcher::new(options, echo, slot)), rec)
    }

    /// An answer and when it came.
    type Answered = (Result<(u32, usize), BatchError>, Duration);

    /// Adds `input` under `key` after `delay`, returning the answer and when it came.
    fn add_after(
        b: &Arc<Batcher<Echo>>,
        delay: Duration,
        key: u32,
        input: u32,
    ) -> tokio::task::JoinHandle<Answered> {
        let b = b.clone();
        let t0 = Instant::now();
        tokio::spawn(async move {
            tokio::time::sleep(delay).await;
            let out = b.add(key, input).await;
            (out, t0.elapsed())
        })
    }

    #[tokio::test(start_paused = true)]
    async fn requests_within_the_idle_window_share_one_call() {
        let (b, rec) = batcher(OPTS, false);
        let handles: Vec<_> = (0..5)
            .map(|i| add_after(&b, Duration::from_millis(50 * i), 0, i as u32))
            .collect();
        for (i, h) in handles.into_iter().enumerate() {
            let (out, at) = h.await.unwrap();
            assert_eq!(out, Ok((i as u32, 5)));
            // The last request came at 200 ms; the batch closed 100 ms later.
            assert_eq!(at, Duration::from_millis(300));
        }
        assert_eq!(b.executor.calls.lock().unwrap().len(), 1);
        assert_eq!(*rec.sizes.lock().unwrap(), vec![("test", 5)]);
        assert_eq!(
            *rec.windows.lock().unwrap(),
            vec![("test", Duration::from_millis(300))]
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_request_after_the_idle_window_starts_a_new_batch() {
        let (b, _) = batcher(OPTS, false);
        let a = add_after(&b, Duration::ZERO, 0, 1);
        let c = add_after(&b, Duration::from_millis(150), 0, 2);
        assert_eq!(a.await.unwrap().0, Ok((1, 1)));
        assert_eq!(c.await.unwrap().0, Ok((2, 1)));
        assert_eq!(b.executor.calls.lock().unwrap().len(), 2);
    }

    #[tokio::test(start_paused = true)]
    async fn the_maximum_window_closes_a_busy_batch() {
        let (b, rec) = batcher(OPTS, false);
        // One request every 90 ms never lets the idle window expire.
        let handles: Vec<_> = (0..15)
            .map(|i| add_after(&b, Duration::from_millis(90 * i), 0, i as u32))
            .collect();
        let mut sizes = Vec::new();
        for h in handles {
            sizes.push(h.await.unwrap().0.unwrap().1);
        }
        // 0, 90, …, 990 ms make the first batch (12); it closes at 1 s.
        assert_eq!(sizes.iter().filter(|&&n| n == 12).count(), 12);
        assert_eq!(rec.windows.lock().unwrap()[0].1, Duration::from_secs(1));
    }

    #[tokio::test(start_paused = true)]
    async fn the_size_cap_closes_a_batch_at_once() {
        let (b, _) = batcher(
            BatchOptions {
                max_items: 3,
                ..OPTS
            },
            false,
        );
        let handles: Vec<_> = (0..4)
            .map(|i| add_after(&b, Duration::ZERO, 0, i))
            .collect();
        let mut outs = Vec::new();
        for h in handles {
            outs.push(h.await.unwrap());
        }
        let full: Vec<_> = outs
            .iter()
            .filter(|(o, _)| o.as_ref().unwrap().1 == 3)
            .collect();
        assert_eq!(full.len(), 3);
        // The full batch did not wait for the idle window.
        assert!(full.iter().all(|(_, at)| *at == Duration::ZERO), "{outs:?}");
        assert_eq!(b.executor.calls.lock().unwrap().len(), 2);
    }

    #[tokio::test(start_paused = true)]
    async fn keys_split_a_batch_into_calls() {
        let (b, rec) = batcher(OPTS, false);
        let handles: Vec<_> = [(1, 10), (2, 20), (1, 11), (1, 12)]
            .into_iter()
            .map(|(k, i)| add_after(&b, Duration::ZERO, k, i))
            .collect();
        let mut outs = Vec::new();
        for h in handles {
            outs.push(h.await.unwrap().0.unwrap());
        }
        assert_eq!(outs, vec![(10, 3), (20, 1), (11, 3), (12, 3)]);
        let mut calls = b.executor.calls.lock().unwrap().clone();
        calls.sort();
        assert_eq!(calls, vec![(1, vec![10, 11, 12]), (2, vec![20])]);
        let mut sizes = rec.sizes.lock().unwrap().clone();
        sizes.sort();
        assert_eq!(sizes, vec![("test", 1), ("test", 3)]);
        assert_eq!(rec.windows.lock().unwrap().len(), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn a_request_the_executor_leaves_unanswered_gets_an_error() {
        let (b, _) = batcher(OPTS, true);
        let x = add_after(&b, Duration::ZERO, 0, 1);
        let y = add_after(&b, Duration::ZERO, 0, 2);
        assert_eq!(x.await.unwrap().0, Ok((1, 2)));
        assert_eq!(y.await.unwrap().0, Err(BatchError::Unanswered("test")));
    }

    #[test]
    fn a_batcher_restarts_its_task_in_a_new_runtime() {
        let (b, _) = batcher(OPTS, false);
        for _ in 0..2 {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_time()
                .start_paused(true)
                .build()
                .unwrap();
            let out = rt.block_on(b.add(0, 7));
            assert_eq!(out, Ok((7, 1)));
        }
        assert_eq!(b.executor.calls.lock().unwrap().len(), 2);
    }
}
