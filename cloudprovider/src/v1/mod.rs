//! The `karpenter.sh/v1` API: [`NodePool`] and [`NodeClaim`], field for field as Karpenter
//! defines them, so existing manifests deserialise unchanged.

pub mod common;
pub mod kubelet;
pub mod labels;
pub mod nodeclaim;
pub mod nodepool;

pub use common::*;
pub use nodeclaim::*;
pub use nodepool::*;
