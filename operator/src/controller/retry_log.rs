//! Logging work that failed and is retried, at the level
//! [`FailureStreaks`](karpenter_cluster::failure_streaks) decides: a 409 conflict, throttling,
//! an object already gone or a brief API outage is debug, because the retry fixes it; work
//! that keeps failing for a minute, or fails in a way a retry does not fix (a forbidden or
//! invalid request, a refused launch), is a warning.

use super::ReconcileError;
use super::api::{ErrorClass, classify};
use karpenter_cloudprovider::CloudProviderError;
use karpenter_cluster::failure_streaks::{FailureStreaks, Report};
use std::fmt::Display;
use std::sync::{Mutex, PoisonError};

/// Whether a retry normally fixes an error.
pub trait Routine {
    /// A conflict, throttling, an object gone, a server or transport error.
    fn is_routine(&self) -> bool;
}

impl Routine for kube::Error {
    fn is_routine(&self) -> bool {
        let class = classify(self);
        class.is_retryable() || class == ErrorClass::NotFound
    }
}

impl Routine for CloudProviderError {
    /// The provider's API failing or an instance already gone; not a launch it refused or
    /// a NodeClass that is not ready, which someone must look at.
    fn is_routine(&self) -> bool {
        matches!(self, Self::Other(_) | Self::NotFound { .. })
    }
}

impl Routine for ReconcileError {
    fn is_routine(&self) -> bool {
        match self {
            Self::Api { source, .. } => source.is_routine(),
            Self::Provider { source, .. } => source.is_routine(),
        }
    }
}

impl Routine for kube::runtime::watcher::Error {
    /// Every watch error is retried by the watcher (with backoff); 410 Gone, a watch whose
    /// resourceVersion expired, is answered by a fresh list.
    fn is_routine(&self) -> bool {
        use kube::runtime::watcher::Error as E;
        match self {
            E::WatchError(status) => {
                status.code == 410 || ErrorClass::from_status(status.code).is_retryable()
            }
            E::InitialListFailed(e) | E::WatchStartFailed(e) | E::WatchFailed(e) => e.is_routine(),
            E::NoResourceVersion => false,
        }
    }
}

/// Logs one failure of `work` as `report` says.
pub fn log(report: Report, work: &str, message: &str, error: &dyn Display) {
    match report {
        Report::Debug => tracing::debug!(work, error = %error, "{message}"),
        Report::Warn { failing_for } => tracing::warn!(
            work,
            error = %error,
            failing_for_seconds = failing_for.as_secs(),
            "{message}"
        ),
    }
}

/// Failure streaks of the controller's work (actions by object, stages by name), shared by
/// the tasks of one pass.
#[derive(Debug, Default)]
pub struct RetryLog {
    streaks: Mutex<FailureStreaks<String>>,
}

impl RetryLog {
    fn streaks(&self) -> std::sync::MutexGuard<'_, FailureStreaks<String>> {
        // Every update is one map operation: a poisoned lock still holds a consistent map.
        self.streaks.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Logs a failure of `work` (debug or warning, see the module).
    pub fn failed(&self, work: &str, error: &(impl Routine + Display), message: &str) {
        let now = tokio::time::Instant::now().into_std();
        let report = self
            .streaks()
            .failed(&work.to_owned(), error.is_routine(), now);
        log(report, work, message, error);
    }

    /// Records that `work` succeeded, ending its streak.
    pub fn succeeded(&self, work: &str) {
        let mut streaks = self.streaks();
        if !streaks.is_empty() {
            streaks.succeeded(&work.to_owned());
        }
    }

    /// Forgets work that has stopped failing without a recorded success.
    pub fn forget_stale(&self) {
        let now = tokio::time::Instant::now().into_std();
        self.streaks().forget_stale(now);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::core::Status;

    fn api(code: u16) -> kube::Error {
        kube::Error::Api(Box::new(Status::failure("m", "r").with_code(code)))
    }

    #[test]
    fn conflicts_throttling_gone_and_server_errors_are_routine_others_are_not() {
        for code in [404, 409, 429, 500, 503] {
            assert!(api(code).is_routine(), "{code}");
        }
        for code in [400, 403, 422] {
            assert!(!api(code).is_routine(), "{code}");
        }
        let conflict = ReconcileError::api("removing NodeClaim finalizer", "c")(api(409));
        assert!(conflict.is_routine());
        let refused = ReconcileError::Provider {
            what: "creating instance",
            object: "c".into(),
            source: CloudProviderError::Create {
                reason: "InvalidParameter".into(),
                message: "m".into(),
            },
        };
        assert!(!refused.is_routine());
        assert!(CloudProviderError::Other("throttled".into()).is_routine());
    }

    #[test]
    fn expired_watches_are_routine_and_forbidden_ones_are_not() {
        use kube::runtime::watcher::Error as E;
        let status =
            |code| Box::new(Status::failure("too old resource version", "Expired").with_code(code));
        assert!(E::WatchError(status(410)).is_routine());
        assert!(E::WatchFailed(api(503)).is_routine());
        assert!(!E::InitialListFailed(api(403)).is_routine());
        assert!(!E::NoResourceVersion.is_routine());
    }
}
