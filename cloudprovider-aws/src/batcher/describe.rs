//! DescribeInstances batching (upstream's `describe_instances` batcher): requests for one
//! instance each, grouped by their filters, become one call for all their ids. An id the
//! merged answer lacks (eventual consistency, or one bad id failing the whole call) is
//! described again alone, so its caller gets EC2's own answer for it.

use super::{BatchExecutor, BatchOptions};
use crate::error::AwsError;
use crate::instance::Ec2Instance;
use aws_sdk_ec2::types::Filter;
use std::collections::BTreeMap;
use std::time::Duration;

/// Upstream's windows: 100 ms idle, 1 s at most, 500 requests.
pub const OPTIONS: BatchOptions = BatchOptions {
    name: "describe_instances",
    idle: Duration::from_millis(100),
    max: Duration::from_secs(1),
    max_items: 500,
};

/// The DescribeInstances call (every page) the executor makes.
#[async_trait::async_trait]
pub trait DescribeApi: Send + Sync + 'static {
    /// The instances with `ids` that match `filters`.
    async fn describe(
        &self,
        filters: &[Filter],
        ids: &[String],
    ) -> Result<Vec<Ec2Instance>, AwsError>;
}

/// One caller's request: one instance id under some filters.
#[derive(Debug, Clone, PartialEq)]
pub struct DescribeRequest {
    /// Filters of the call (requests with equal filters share a call).
    pub filters: Vec<Filter>,
    /// The instance.
    pub id: String,
}

impl DescribeRequest {
    /// The grouping key: the filters' text.
    pub fn key(&self) -> String {
        format!("{:?}", self.filters)
    }
}

/// Merges and splits DescribeInstances calls over `A`.
#[derive(Debug)]
pub struct DescribeExecutor<A>(pub A);

#[async_trait::async_trait]
impl<A: DescribeApi> BatchExecutor for DescribeExecutor<A> {
    type Key = String;
    type Input = DescribeRequest;
    type Output = Result<Vec<Ec2Instance>, AwsError>;

    async fn execute(&self, _key: &String, inputs: Vec<DescribeRequest>) -> Vec<Self::Output> {
        let Some(first) = inputs.first() else {
            return Vec::new();
        };
        let filters = first.filters.clone();
        let mut ids: Vec<String> = inputs.iter().map(|r| r.id.clone()).collect();
        ids.sort();
        ids.dedup();
        let mut answers: BTreeMap<String, Self::Output> = BTreeMap::new();
        match self.0.describe(&filters, &ids).await {
            Ok(found) => {
                for i in found {
                    answers.insert(i.id.clone(), Ok(vec![i]));
                }
            }
            // Every id is retried alone below, so each caller gets its own error.
            Err(e) => tracing::debug!(error = %e, "batched DescribeInstances failed"),
        }
        let missing: Vec<&String> = ids.iter().filter(|id| !answers.contains_key(*id)).collect();
        let alone = futures::future::join_all(missing.iter().map(|id| {
            let filters = &filters;
            async move {
                let one = std::slice::from_ref(*id);
                ((*id).clone(), self.0.describe(filters, one).await)
            }
        }))
        .await;
        answers.extend(alone);
        inputs
            .iter()
            .map(|r| {
                answers
                    .get(&r.id)
                    .cloned()
                    .unwrap_or_else(|| Ok(Vec::new()))
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    /// Knows some instances; fails any call naming `bad`; records the ids of each call.
    #[derive(Default)]
    struct Fake {
        known: Vec<&'static str>,
        bad: Option<&'static str>,
        calls: Mutex<Vec<Vec<String>>>,
    }

    fn instance(id: &str) -> Ec2Instance {
        Ec2Instance {
            id: id.into(),
            instance_type: "m5.large".into(),
            zone: "us-east-1a".into(),
            subnet_id: String::new(),
            image_id: String::new(),
            security_group_ids: Vec::new(),
            capacity_type: "on-demand".into(),
            capacity_reservation: None,
            state: "running".into(),
            launch_time: None,
            tags: BTreeMap::new(),
        }
    }

    #[async_trait::async_trait]
    impl DescribeApi for Fake {
        async fn describe(
            &self,
            _filters: &[Filter],
            ids: &[String],
        ) -> Result<Vec<Ec2Instance>, AwsError> {
            self.calls.lock().unwrap().push(ids.to_vec());
            if let Some(bad) = self.bad.filter(|b| ids.iter().any(|i| i == b)) {
                return Err(AwsError::Api {
                    operation: "DescribeInstances",
                    code: "InvalidInstanceID.NotFound".into(),
                    message: format!("{bad} does not exist"),
                });
            }
            Ok(ids
                .iter()
                .filter(|i| self.known.contains(&i.as_str()))
                .map(|i| instance(i))
                .collect())
        }
    }

    fn req(id: &str) -> DescribeRequest {
        DescribeRequest {
            filters: Vec::new(),
            id: id.into(),
        }
    }

    #[tokio::test]
    async fn one_call_answers_every_caller_with_its_own_instance() {
        let x = DescribeExecutor(Fake {
            known: vec!["i-1", "i-2"],
            ..Fake::default()
        });
        let out = x
            .execute(&String::new(), vec![req("i-2"), req("i-1"), req("i-2")])
            .await;
        let ids: Vec<Vec<String>> = out
            .into_iter()
            .map(|r| r.unwrap().into_iter().map(|i| i.id).collect())
            .collect();
        assert_eq!(ids, vec![vec!["i-2"], vec!["i-1"], vec!["i-2"]]);
        assert_eq!(*x.0.calls.lock().unwrap(), vec![vec!["i-1", "i-2"]]);
    }

    #[tokio::test]
    async fn a_failing_id_is_described_alone_and_only_its_caller_sees_the_error() {
        let x = DescribeExecutor(Fake {
            known: vec!["i-1", "i-2"],
            bad: Some("i-9"),
            ..Fake::default()
        });
        let out = x
            .execute(&String::new(), vec![req("i-1"), req("i-9"), req("i-2")])
            .await;
        assert_eq!(out[0].as_ref().unwrap()[0].id, "i-1");
        assert!(out[1].as_ref().unwrap_err().is_not_found(), "{out:?}");
        assert_eq!(out[2].as_ref().unwrap()[0].id, "i-2");
        let calls = x.0.calls.lock().unwrap();
        // The merged call, then each id alone.
        assert_eq!(calls.len(), 4, "{calls:?}");
    }

    #[tokio::test]
    async fn an_id_missing_from_the_merged_answer_is_asked_again() {
        let x = DescribeExecutor(Fake {
            known: vec!["i-1"],
            ..Fake::default()
        });
        let out = x
            .execute(&String::new(), vec![req("i-1"), req("i-5")])
            .await;
        assert_eq!(out[0].as_ref().unwrap().len(), 1);
        assert!(out[1].as_ref().unwrap().is_empty());
        assert_eq!(
            *x.0.calls.lock().unwrap(),
            vec![vec!["i-1".to_string(), "i-5".into()], vec!["i-5".into()]]
        );
    }

    #[test]
    fn requests_group_by_filters() {
        let f = |v: &str| Filter::builder().name("tag-key").values(v).build();
        let a = DescribeRequest {
            filters: vec![f("a")],
            id: "i-1".into(),
        };
        let b = DescribeRequest {
            id: "i-2".into(),
            ..a.clone()
        };
        let c = DescribeRequest {
            filters: vec![f("c")],
            ..a.clone()
        };
        assert_eq!(a.key(), b.key());
        assert_ne!(a.key(), c.key());
    }
}
