//! TerminateInstances batching (upstream's `terminate_instances` batcher): requests for one
//! instance each share one call. An instance the merged answer does not report as
//! `shutting-down` or `terminated` (one protected or unknown id can fail the whole call) is
//! terminated again alone, so its caller gets EC2's own answer.

use super::{BatchExecutor, BatchOptions};
use crate::error::AwsError;
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

/// Upstream's windows: 100 ms idle, 1 s at most, 500 requests, all in one group.
pub const OPTIONS: BatchOptions = BatchOptions {
    name: "terminate_instances",
    idle: Duration::from_millis(100),
    max: Duration::from_secs(1),
    max_items: 500,
};

/// The TerminateInstances call the executor makes.
#[async_trait::async_trait]
pub trait TerminateApi: Send + Sync + 'static {
    /// Terminates `ids`; the answer lists `(instance id, its current state name)`.
    async fn terminate(&self, ids: &[String]) -> Result<Vec<(String, String)>, AwsError>;
}

/// Merges and splits TerminateInstances calls over `A` (the key is `()`: one group).
#[derive(Debug)]
pub struct TerminateExecutor<A>(pub A);

fn is_going(state: &str) -> bool {
    matches!(state, "shutting-down" | "terminated")
}

#[async_trait::async_trait]
impl<A: TerminateApi> BatchExecutor for TerminateExecutor<A> {
    type Key = ();
    type Input = String;
    type Output = Result<(), AwsError>;

    async fn execute(&self, _key: &(), inputs: Vec<String>) -> Vec<Self::Output> {
        let ids: Vec<String> = inputs
            .iter()
            .cloned()
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        let mut answers: BTreeMap<String, Self::Output> = BTreeMap::new();
        match self.0.terminate(&ids).await {
            Ok(changes) => {
                for (id, state) in changes {
                    if is_going(&state) {
                        answers.insert(id, Ok(()));
                    }
                }
            }
            // Every id is retried alone below, so each caller gets its own error.
            Err(e) => tracing::debug!(error = %e, "batched TerminateInstances failed"),
        }
        let left: Vec<&String> = ids.iter().filter(|id| !answers.contains_key(*id)).collect();
        let alone = futures::future::join_all(left.into_iter().map(|id| async move {
            let out = self.0.terminate(std::slice::from_ref(id)).await;
            (id.clone(), out.map(|_| ()))
        }))
        .await;
        answers.extend(alone);
        inputs
            .iter()
            .map(|id| answers.get(id).cloned().unwrap_or(Ok(())))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    /// Fails any call naming `bad`; reports `stuck` as still running; records each call.
    #[derive(Default)]
    struct Fake {
        bad: Option<&'static str>,
        stuck: Option<&'static str>,
        calls: Mutex<Vec<Vec<String>>>,
    }

    #[async_trait::async_trait]
    impl TerminateApi for Fake {
        async fn terminate(&self, ids: &[String]) -> Result<Vec<(String, String)>, AwsError> {
            self.calls.lock().unwrap().push(ids.to_vec());
            if let Some(bad) = self.bad.filter(|b| ids.iter().any(|i| i == b)) {
                return Err(AwsError::Api {
                    operation: "TerminateInstances",
                    code: "InvalidInstanceID.NotFound".into(),
                    message: format!("{bad} does not exist"),
                });
            }
            Ok(ids
                .iter()
                .map(|i| {
                    let state = if Some(i.as_str()) == self.stuck {
                        "running"
                    } else {
                        "shutting-down"
                    };
                    (i.clone(), state.to_string())
                })
                .collect())
        }
    }

    fn ids(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[tokio::test]
    async fn one_call_terminates_every_callers_instance() {
        let x = TerminateExecutor(Fake::default());
        let out = x.execute(&(), ids(&["i-2", "i-1", "i-2"])).await;
        assert_eq!(out, vec![Ok(()), Ok(()), Ok(())]);
        assert_eq!(*x.0.calls.lock().unwrap(), vec![ids(&["i-1", "i-2"])]);
    }

    #[tokio::test]
    async fn a_failing_call_is_split_and_only_the_bad_ids_caller_sees_the_error() {
        let x = TerminateExecutor(Fake {
            bad: Some("i-9"),
            ..Fake::default()
        });
        let out = x.execute(&(), ids(&["i-1", "i-9", "i-2"])).await;
        assert_eq!(out[0], Ok(()));
        assert!(out[1].as_ref().unwrap_err().is_not_found(), "{out:?}");
        assert_eq!(out[2], Ok(()));
        assert_eq!(x.0.calls.lock().unwrap().len(), 4);
    }

    #[tokio::test]
    async fn an_instance_not_shutting_down_is_retried_alone() {
        let x = TerminateExecutor(Fake {
            stuck: Some("i-2"),
            ..Fake::default()
        });
        let out = x.execute(&(), ids(&["i-1", "i-2"])).await;
        assert_eq!(out, vec![Ok(()), Ok(())]);
        assert_eq!(
            *x.0.calls.lock().unwrap(),
            vec![ids(&["i-1", "i-2"]), ids(&["i-2"])]
        );
    }
}
