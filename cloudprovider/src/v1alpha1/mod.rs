//! The `karpenter.sh/v1alpha1` API: [`NodeOverlay`], field for field as Karpenter defines it,
//! so existing manifests deserialise unchanged.

pub mod nodeoverlay;

pub use nodeoverlay::*;
