//! The three batchers over the real EC2 client.

use super::describe::{DescribeApi, DescribeExecutor, DescribeRequest};
use super::fleet::{FleetAnswer, FleetApi, FleetExecutor};
use super::terminate::{TerminateApi, TerminateExecutor};
use super::{BatchError, BatchOptions, Batcher, describe, fleet, terminate};
use crate::error::AwsError;
use crate::instance::Ec2Instance;
use crate::observe::ObserverSlot;
use aws_sdk_ec2::operation::create_fleet::builders::CreateFleetInputBuilder;
use aws_sdk_ec2::types::Filter;

/// The EC2 calls the batchers make, unbatched.
#[derive(Debug, Clone)]
pub struct Ec2Api {
    client: aws_sdk_ec2::Client,
    /// Whether the ReservedCapacity gate is on (how instances read their capacity type).
    reserved_capacity: bool,
}

impl Ec2Api {
    /// Calls through `client`.
    pub fn new(client: aws_sdk_ec2::Client, reserved_capacity: bool) -> Self {
        Self {
            client,
            reserved_capacity,
        }
    }
}

#[async_trait::async_trait]
impl DescribeApi for Ec2Api {
    async fn describe(
        &self,
        filters: &[Filter],
        ids: &[String],
    ) -> Result<Vec<Ec2Instance>, AwsError> {
        let mut out = Vec::new();
        let mut token = None;
        loop {
            let page = self
                .client
                .describe_instances()
                .set_filters((!filters.is_empty()).then(|| filters.to_vec()))
                .set_instance_ids((!ids.is_empty()).then(|| ids.to_vec()))
                .set_next_token(token)
                .send()
                .await
                .map_err(|e| AwsError::api("DescribeInstances", e))?;
            for r in page.reservations() {
                let gate = self.reserved_capacity;
                out.extend(
                    r.instances()
                        .iter()
                        .filter_map(|i| Ec2Instance::from_sdk(i, gate)),
                );
            }
            token = page
                .next_token()
                .filter(|t| !t.is_empty())
                .map(str::to_string);
            if token.is_none() {
                return Ok(out);
            }
        }
    }
}

#[async_trait::async_trait]
impl TerminateApi for Ec2Api {
    async fn terminate(&self, ids: &[String]) -> Result<Vec<(String, String)>, AwsError> {
        let out = self
            .client
            .terminate_instances()
            .set_instance_ids(Some(ids.to_vec()))
            .send()
            .await
            .map_err(|e| AwsError::api("TerminateInstances", e))?;
        Ok(out
            .terminating_instances()
            .iter()
            .map(|c| {
                let state = c.current_state().and_then(|s| s.name());
                (
                    c.instance_id().unwrap_or_default().to_string(),
                    state.map(|n| n.as_str().to_string()).unwrap_or_default(),
                )
            })
            .collect())
    }
}

#[async_trait::async_trait]
impl FleetApi for Ec2Api {
    async fn create_fleet(&self, i: CreateFleetInputBuilder) -> Result<FleetAnswer, AwsError> {
        // Every field of the input, so a merged call is the callers' call but for its size.
        let out = self
            .client
            .create_fleet()
            .set_dry_run(i.get_dry_run().to_owned())
            .set_client_token(i.get_client_token().to_owned())
            .set_spot_options(i.get_spot_options().to_owned())
            .set_on_demand_options(i.get_on_demand_options().to_owned())
            .set_reserved_capacity_options(i.get_reserved_capacity_options().to_owned())
            .set_excess_capacity_termination_policy(
                i.get_excess_capacity_termination_policy().to_owned(),
            )
            .set_launch_template_configs(i.get_launch_template_configs().to_owned())
            .set_target_capacity_specification(i.get_target_capacity_specification().to_owned())
            .set_terminate_instances_with_expiration(
                i.get_terminate_instances_with_expiration().to_owned(),
            )
            .set_type(i.get_type().to_owned())
            .set_valid_from(i.get_valid_from().to_owned())
            .set_valid_until(i.get_valid_until().to_owned())
            .set_replace_unhealthy_instances(i.get_replace_unhealthy_instances().to_owned())
            .set_tag_specifications(i.get_tag_specifications().to_owned())
            .set_context(i.get_context().to_owned())
            .send()
            .await
            .map_err(|e| AwsError::api("CreateFleet", e))?;
        Ok(FleetAnswer {
            instances: out.instances().to_vec(),
            errors: out.errors().to_vec(),
        })
    }
}

fn batch_err(operation: &'static str, e: BatchError) -> AwsError {
    AwsError::InvalidResponse {
        operation,
        message: e.to_string(),
    }
}

/// The windows of the provider's three EC2 batchers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchWindows {
    /// DescribeInstances.
    pub describe: BatchOptions,
    /// TerminateInstances.
    pub terminate: BatchOptions,
    /// CreateFleet.
    pub fleet: BatchOptions,
}

impl Default for BatchWindows {
    /// Upstream's windows.
    fn default() -> Self {
        Self {
            describe: describe::OPTIONS,
            terminate: terminate::OPTIONS,
            fleet: fleet::OPTIONS,
        }
    }
}

/// The provider's three EC2 batchers.
#[derive(Debug)]
pub struct Ec2Batchers {
    describe: Batcher<DescribeExecutor<Ec2Api>>,
    terminate: Batcher<TerminateExecutor<Ec2Api>>,
    fleet: Batcher<FleetExecutor<Ec2Api>>,
}

impl Ec2Batchers {
    /// Batchers over `api`, with `windows`, reporting to `observer`.
    pub fn new(api: Ec2Api, observer: ObserverSlot, windows: BatchWindows) -> Self {
        Self {
            describe: Batcher::new(
                windows.describe,
                DescribeExecutor(api.clone()),
                observer.clone(),
            ),
            terminate: Batcher::new(
                windows.terminate,
                TerminateExecutor(api.clone()),
                observer.clone(),
            ),
            fleet: Batcher::new(windows.fleet, FleetExecutor(api), observer),
        }
    }

    /// Describes one instance (batched with concurrent describes under equal filters); an
    /// empty answer when EC2 does not list it.
    pub async fn describe_instance(
        &self,
        filters: Vec<Filter>,
        id: String,
    ) -> Result<Vec<Ec2Instance>, AwsError> {
        let req = DescribeRequest { filters, id };
        let key = req.key();
        self.describe
            .add(key, req)
            .await
            .map_err(|e| batch_err("DescribeInstances", e))?
    }

    /// Terminates one instance (batched with concurrent terminations).
    pub async fn terminate_instance(&self, id: String) -> Result<(), AwsError> {
        self.terminate
            .add((), id)
            .await
            .map_err(|e| batch_err("TerminateInstances", e))?
    }

    /// Launches one instance with `input` (its total target capacity must be 1), batched
    /// with concurrent identical requests.
    pub async fn create_fleet(
        &self,
        input: CreateFleetInputBuilder,
    ) -> Result<FleetAnswer, AwsError> {
        let capacity = input
            .get_target_capacity_specification()
            .as_ref()
            .and_then(|t| t.total_target_capacity());
        if capacity != Some(1) {
            return Err(AwsError::Invalid {
                what: "CreateFleet target capacity".into(),
                message: format!("a batched request launches one instance, not {capacity:?}"),
            });
        }
        self.fleet
            .add(fleet::key(&input), input)
            .await
            .map_err(|e| batch_err("CreateFleet", e))?
    }
}
