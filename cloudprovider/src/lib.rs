//! # karpenter-cloudprovider
//!
//! The `karpenter.sh/v1` API types ([`NodePool`], [`NodeClaim`]), `karpenter.sh/v1alpha1`
//! [`NodeOverlay`] and `autoscaling.x-k8s.io/v1beta1` [`CapacityBuffer`] with Karpenter's
//! defaults, validation, template hash and CRDs; how
//! overlays change instance types ([`overlay`]); the [`CloudProvider`] contract every provider
//! implements. Metrics decorators live with the binary that exports them (the operator), so
//! this contract crate and its users do not depend on a metrics library.
#![forbid(unsafe_code)]

pub mod autoscaling;
pub mod convert;
pub mod crd;
pub mod duration;
pub mod hash;
pub mod ignored;
pub mod overlay;
pub mod poll;
pub mod provider;
pub mod reserved;
pub mod v1;
pub mod v1alpha1;
pub mod validation;

pub use autoscaling::v1beta1::CapacityBuffer;
pub use convert::ConversionError;
pub use crd::crds_yaml;
pub use duration::{Duration, NillableDuration};
pub use hash::{NODEPOOL_HASH_VERSION, template_hash};
pub use ignored::IgnoredField;
pub use provider::*;
pub use v1::{NodeClaim, NodePool};
pub use v1alpha1::NodeOverlay;
pub use validation::{ValidationError, ValidationErrors};
