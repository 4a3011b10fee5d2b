//! # karpenter-cloudprovider-aws
//!
//! The AWS provider of karpenter-rs: the `karpenter.k8s.aws/v1` [`EC2NodeClass`], discovery
//! of subnets, security groups and AMIs (with the accelerator variant per instance type), instance types and prices from EC2, launches through
//! CreateFleet, the IAM instance profiles of classes that name a role, drift detection, the SQS interruption queue
//! and EC2's instance status checks.
#![forbid(unsafe_code)]

pub mod alias;
pub mod ami;
pub mod batcher;
pub mod cache;
pub mod capacity_reservation;
pub mod crd;
pub mod discovery;
pub mod error;
pub mod ignored;
pub mod instance;
pub mod instance_profile;
pub mod instance_status;
pub mod instancetype;
pub mod interruption;
pub mod kubelet;
pub mod kubelet_cel;
pub mod kubelet_resolve;
pub mod launch;
pub mod nodeclass;
pub mod observe;
pub mod pricing;
pub mod provider;
pub mod reservation_sync;
pub mod reserved_launch;
pub mod sdk_metrics;
pub mod settings;
pub mod tagging;
pub mod userdata;

pub use cache::{Clock, ManualClock, SystemClock, TtlCache, UnavailableOfferings};
pub use error::AwsError;
pub use interruption::{
    InterruptionEvent, InterruptionKind, InterruptionPoller, NodeClaimInterruption,
};
pub use nodeclass::{EC2NodeClass, EC2NodeClassSpec, EC2NodeClassStatus};
pub use provider::AwsCloudProvider;
pub use settings::{AwsClients, AwsSettings};
