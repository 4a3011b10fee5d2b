//! Shared workloads for the karpenter-rs benchmarks.
#![forbid(unsafe_code)]
