//! The `autoscaling.x-k8s.io` API group of SIG Autoscaling that Karpenter serves:
//! [`CapacityBuffer`](v1beta1::CapacityBuffer) at `v1beta1`, the version Karpenter v1.15
//! ships its CRD for (copied there from `k8s.io/autoscaler`'s capacitybuffer API).

pub mod v1beta1;
