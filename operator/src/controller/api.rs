//! Talking to the API server: error classes, retry with backoff, a client-side rate limit
//! (KUBE_CLIENT_QPS / KUBE_CLIENT_BURST), and small patch helpers every controller uses.

use karpenter_cluster::api_pacing::TokenBucket;
pub use karpenter_cluster::api_pacing::{ErrorClass, backoff};
use kube::api::{Api, Patch, PatchParams};
use serde::de::DeserializeOwned;
use std::fmt::Debug;
use std::sync::{Arc, Mutex, PoisonError};
use tokio::time::Instant;

/// Classifies a kube error.
pub fn classify(e: &kube::Error) -> ErrorClass {
    match e {
        kube::Error::Api(status) => ErrorClass::from_status(status.code),
        kube::Error::SerdeError(_) | kube::Error::BuildRequest(_) => ErrorClass::Permanent,
        _ => ErrorClass::Transient,
    }
}

/// Runs `op` until it succeeds, fails permanently, or `attempts` tries were made, sleeping
/// [`backoff`] between tries. `op` is called afresh every time, so an operation that reads
/// before it writes sees the state that won a conflict.
///
/// # Errors
/// The last error once attempts run out, or the first non-retryable one.
pub async fn retry<T, F, Fut>(attempts: u32, mut op: F) -> Result<T, kube::Error>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, kube::Error>>,
{
    let mut attempt = 0;
    loop {
        match op().await {
            Ok(v) => return Ok(v),
            Err(e) if classify(&e).is_retryable() && attempt + 1 < attempts => {
                tracing::debug!(error = %e, attempt, "retrying API call");
                tokio::time::sleep(backoff(attempt)).await;
                attempt += 1;
            }
            Err(e) => return Err(e),
        }
    }
}

/// The client-side rate limit: a [`TokenBucket`] shared by every clone.
#[derive(Debug, Clone)]
pub struct RateLimiter {
    bucket: Arc<Mutex<TokenBucket>>,
}

impl RateLimiter {
    /// A full bucket of `burst` tokens (at least `qps`), refilled at `qps` a second.
    pub fn new(qps: u32, burst: u32) -> Self {
        let bucket = TokenBucket::new(qps, burst, Instant::now().into_std());
        Self {
            bucket: Arc::new(Mutex::new(bucket)),
        }
    }

    /// Waits for one token.
    pub async fn acquire(&self) {
        loop {
            // The guard goes before the sleep (a temporary of this statement): other tasks
            // take tokens meanwhile.
            let now = Instant::now().into_std();
            let taken = self
                .bucket
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .take(now);
            match taken {
                Ok(()) => return,
                Err(wait) => tokio::time::sleep(wait).await,
            }
        }
    }
}

/// Merge-patches `name` with `patch` (a JSON merge patch).
///
/// # Errors
/// The API error.
pub async fn merge_patch<K>(
    api: &Api<K>,
    name: &str,
    patch: serde_json::Value,
) -> Result<K, kube::Error>
where
    K: Clone + DeserializeOwned + Debug,
{
    api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
}

/// Merge-patches the status of `name` with `patch` (a JSON merge patch).
///
/// # Errors
/// The API error.
pub async fn merge_patch_status<K>(
    api: &Api<K>,
    name: &str,
    patch: &serde_json::Value,
) -> Result<K, kube::Error>
where
    K: Clone + DeserializeOwned + Debug,
{
    api.patch_status(name, &PatchParams::default(), &Patch::Merge(patch))
        .await
}

/// Replaces the finalizer list of `name` with `finalizers`, guarded by `resource_version`
/// so a concurrent change turns into a 409 (and a retry from fresh state) rather than a lost
/// finalizer.
///
/// # Errors
/// The API error.
pub async fn set_finalizers<K>(
    api: &Api<K>,
    name: &str,
    resource_version: Option<&str>,
    finalizers: &[String],
) -> Result<K, kube::Error>
where
    K: Clone + DeserializeOwned + Debug,
{
    let mut meta = serde_json::json!({ "finalizers": finalizers });
    if let Some(rv) = resource_version {
        meta["resourceVersion"] = serde_json::Value::String(rv.to_owned());
    }
    merge_patch(api, name, serde_json::json!({ "metadata": meta })).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn api_error(code: u16) -> kube::Error {
        kube::Error::Api(Box::new(kube::core::Status {
            code,
            ..Default::default()
        }))
    }

    #[test]
    fn classes() {
        assert_eq!(classify(&api_error(404)), ErrorClass::NotFound);
        assert_eq!(classify(&api_error(409)), ErrorClass::Conflict);
        assert_eq!(classify(&api_error(429)), ErrorClass::TooManyRequests);
        assert_eq!(classify(&api_error(503)), ErrorClass::Transient);
        assert_eq!(classify(&api_error(422)), ErrorClass::Permanent);
        assert!(!ErrorClass::Permanent.is_retryable());
    }

    #[test]
    fn backoff_is_capped() {
        assert_eq!(backoff(0), Duration::from_millis(100));
        assert_eq!(backoff(3), Duration::from_millis(800));
        assert_eq!(backoff(30), Duration::from_millis(10_000));
    }

    #[tokio::test(start_paused = true)]
    async fn retry_stops_on_permanent_and_succeeds_after_transient() {
        let mut calls = 0;
        let r: Result<u32, _> = retry(5, || {
            calls += 1;
            let c = calls;
            async move {
                match c {
                    1 => Err(api_error(409)),
                    2 => Err(api_error(500)),
                    3 => Err(api_error(429)),
                    _ => Ok(7),
                }
            }
        })
        .await;
        assert_eq!(r.unwrap(), 7);
        assert_eq!(calls, 4);

        let mut calls = 0;
        let r: Result<u32, _> = retry(5, || {
            calls += 1;
            async { Err(api_error(403)) }
        })
        .await;
        assert!(r.is_err());
        assert_eq!(calls, 1);
    }

    #[tokio::test(start_paused = true)]
    async fn rate_limiter_spaces_requests_after_burst() {
        let rl = RateLimiter::new(10, 2);
        let start = Instant::now();
        for _ in 0..4 {
            rl.acquire().await;
        }
        // 10 requests/s with a burst of 10 (burst is raised to the qps): no waiting.
        assert!(start.elapsed() < Duration::from_millis(50));
        let rl = RateLimiter::new(1, 1);
        let start = Instant::now();
        rl.acquire().await;
        rl.acquire().await;
        rl.acquire().await;
        assert!(start.elapsed() >= Duration::from_millis(1900));
    }
}
