//! CreateFleet batching (upstream's `create_fleet` batcher): identical single-instance
//! requests (equal in every field) become one `instant` fleet whose total target capacity
//! is the number of callers. Each caller gets one launched instance; callers left without
//! one (a partly fulfilled fleet) get the fleet's errors instead.

use super::{BatchExecutor, BatchOptions};
use crate::error::AwsError;
use aws_sdk_ec2::operation::create_fleet::builders::CreateFleetInputBuilder;
use aws_sdk_ec2::types::{
    CreateFleetError, CreateFleetInstance, TargetCapacitySpecificationRequest,
};
use std::time::Duration;

/// Upstream's windows: 35 ms idle, 1 s at most, 1,000 requests.
pub const OPTIONS: BatchOptions = BatchOptions {
    name: "create_fleet",
    idle: Duration::from_millis(35),
    max: Duration::from_secs(1),
    max_items: 1_000,
};

/// What a CreateFleet call returned: the instances it launched and its errors.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct FleetAnswer {
    /// Launched instances (one entry may carry several ids).
    pub instances: Vec<CreateFleetInstance>,
    /// The errors of the offerings that launched nothing.
    pub errors: Vec<CreateFleetError>,
}

/// The CreateFleet call the executor makes.
#[async_trait::async_trait]
pub trait FleetApi: Send + Sync + 'static {
    /// Sends `input`.
    async fn create_fleet(&self, input: CreateFleetInputBuilder) -> Result<FleetAnswer, AwsError>;
}

/// The grouping key of a request: its whole text, so only identical requests merge.
pub fn key(input: &CreateFleetInputBuilder) -> String {
    format!("{input:?}")
}

/// `input` with its total target capacity set to `n` (the rest of its target kept).
pub fn with_capacity(input: CreateFleetInputBuilder, n: i32) -> CreateFleetInputBuilder {
    let target = input.get_target_capacity_specification().clone();
    let b = TargetCapacitySpecificationRequest::builder().total_target_capacity(n);
    let b = match target {
        Some(t) => b
            .set_on_demand_target_capacity(t.on_demand_target_capacity())
            .set_spot_target_capacity(t.spot_target_capacity())
            .set_default_target_capacity_type(t.default_target_capacity_type().cloned())
            .set_target_capacity_unit_type(t.target_capacity_unit_type().cloned()),
        None => b,
    };
    input.target_capacity_specification(b.build())
}

/// Merges and splits CreateFleet calls over `A`; each caller's answer holds at most one
/// instance (with one id).
#[derive(Debug)]
pub struct FleetExecutor<A>(pub A);

#[async_trait::async_trait]
impl<A: FleetApi> BatchExecutor for FleetExecutor<A> {
    type Key = String;
    type Input = CreateFleetInputBuilder;
    type Output = Result<FleetAnswer, AwsError>;

    async fn execute(&self, _key: &String, inputs: Vec<Self::Input>) -> Vec<Self::Output> {
        let n = inputs.len();
        let Some(first) = inputs.into_iter().next() else {
            return Vec::new();
        };
        let capacity = i32::try_from(n).unwrap_or(i32::MAX);
        let answer = match self.0.create_fleet(with_capacity(first, capacity)).await {
            Ok(a) => a,
            Err(e) => return vec![Err(e); n],
        };
        let mut out: Vec<Self::Output> = Vec::with_capacity(n);
        for fleet_instance in &answer.instances {
            for id in fleet_instance.instance_ids() {
                if out.len() == n {
                    tracing::error!(instance = %id, "CreateFleet launched more instances than requested; ignoring one");
                    continue;
                }
                let one = fleet_instance.clone().to_builder_with_id(id);
                out.push(Ok(FleetAnswer {
                    instances: vec![one],
                    errors: answer.errors.clone(),
                }));
            }
        }
        if out.len() < n {
            let mut errors = answer.errors.clone();
            // EC2 should say why; in case it does not, the callers still learn it.
            if errors.is_empty() {
                errors.push(
                    CreateFleetError::builder()
                        .error_code("too few instances returned")
                        .error_message("too few instances returned")
                        .build(),
                );
            }
            out.resize_with(n, || {
                Ok(FleetAnswer {
                    instances: Vec::new(),
                    errors: errors.clone(),
                })
            });
        }
        out
    }
}

/// A copy of a fleet instance entry carrying only `id`.
trait WithId {
    fn to_builder_with_id(self, id: &str) -> CreateFleetInstance;
}

impl WithId for CreateFleetInstance {
    fn to_builder_with_id(self, id: &str) -> CreateFleetInstance {
        CreateFleetInstance::builder()
            .set_launch_template_and_overrides(self.launch_template_and_overrides)
            .set_lifecycle(self.lifecycle)
            .set_instance_type(self.instance_type)
            .set_platform(self.platform)
            .instance_ids(id)
            .build()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_sdk_ec2::types::{FleetType, InstanceType};
    use std::sync::Mutex;

    /// Launches up to `limit` instances per call, and records each call's capacity.
    struct Fake {
        limit: i32,
        fail: bool,
        calls: Mutex<Vec<i32>>,
    }

    fn fake(limit: i32) -> Fake {
        Fake {
            limit,
            fail: false,
            calls: Mutex::new(Vec::new()),
        }
    }

    fn error() -> CreateFleetError {
        CreateFleetError::builder()
            .error_code("InsufficientInstanceCapacity")
            .error_message("none left")
            .build()
    }

    #[async_trait::async_trait]
    impl FleetApi for Fake {
        async fn create_fleet(
            &self,
            input: CreateFleetInputBuilder,
        ) -> Result<FleetAnswer, AwsError> {
            let n = input
                .get_target_capacity_specification()
                .as_ref()
                .and_then(|t| t.total_target_capacity())
                .unwrap();
            self.calls.lock().unwrap().push(n);
            if self.fail {
                return Err(AwsError::Api {
                    operation: "CreateFleet",
                    code: "UnauthorizedOperation".into(),
                    message: "no".into(),
                });
            }
            let launched = n.min(self.limit);
            let ids: Vec<String> = (0..launched).map(|i| format!("i-{i}")).collect();
            Ok(FleetAnswer {
                // Two ids in one entry, the rest in another, as EC2 groups them.
                instances: ids
                    .chunks(2)
                    .map(|c| {
                        CreateFleetInstance::builder()
                            .instance_type(InstanceType::M5Large)
                            .set_instance_ids(Some(c.to_vec()))
                            .build()
                    })
                    .collect(),
                errors: if launched < n {
                    vec![error()]
                } else {
                    Vec::new()
                },
            })
        }
    }

    fn input() -> CreateFleetInputBuilder {
        let i = CreateFleetInputBuilder::default().r#type(FleetType::Instant);
        with_capacity(i, 1)
    }

    #[tokio::test]
    async fn n_callers_share_one_fleet_of_capacity_n_and_each_gets_one_instance() {
        let x = FleetExecutor(fake(10));
        let out = x.execute(&key(&input()), vec![input(); 3]).await;
        assert_eq!(*x.0.calls.lock().unwrap(), vec![3]);
        let ids: Vec<Vec<String>> = out
            .iter()
            .map(|r| {
                let a = r.as_ref().unwrap();
                assert_eq!(a.instances.len(), 1);
                assert_eq!(a.instances[0].instance_type(), Some(&InstanceType::M5Large));
                a.instances[0].instance_ids().to_vec()
            })
            .collect();
        assert_eq!(ids, vec![vec!["i-0"], vec!["i-1"], vec!["i-2"]]);
    }

    #[tokio::test]
    async fn callers_a_partial_fleet_leaves_without_an_instance_get_its_errors() {
        let x = FleetExecutor(fake(1));
        let out = x.execute(&String::new(), vec![input(); 3]).await;
        let first = out[0].as_ref().unwrap();
        assert_eq!(first.instances.len(), 1);
        for r in &out[1..] {
            let a = r.as_ref().unwrap();
            assert!(a.instances.is_empty());
            assert_eq!(a.errors, vec![error()]);
        }
    }

    #[tokio::test]
    async fn a_failed_call_fails_every_caller() {
        let x = FleetExecutor(Fake {
            fail: true,
            ..fake(5)
        });
        let out = x.execute(&String::new(), vec![input(); 2]).await;
        assert!(
            out.iter()
                .all(|r| r.as_ref().unwrap_err().code() == Some("UnauthorizedOperation"))
        );
    }

    #[test]
    fn only_identical_requests_share_a_key() {
        let other = input().context("ctx");
        assert_eq!(key(&input()), key(&input()));
        assert_ne!(key(&input()), key(&other));
        let merged = with_capacity(input(), 7);
        let t = merged.get_target_capacity_specification().as_ref().unwrap();
        assert_eq!(t.total_target_capacity(), Some(7));
    }
}
