//! The end-to-end suite: `karpenter controller`, built the way the README builds it, against a
//! real Kubernetes control plane (etcd, kube-apiserver, kube-scheduler,
//! kube-controller-manager) on 127.0.0.1, with the fake provider. `scripts/test.sh` builds and
//! starts the control plane (`scripts/control-plane.sh`) and runs this suite with the rest;
//! under `CI=true` a missing control plane fails every test instead of skipping it.
//!
//! Each test takes the control plane alone, from a clean state (`harness::cluster`).
//! Measured times are appended to `target/e2e/timings.tsv`; controller logs are kept under
//! `target/e2e/<test>/`.

mod batching;
mod capacity_buffer;
mod consolidation;
mod dra;
mod drift;
mod equivalence;
mod faults;
mod harness;
mod install;
mod migration;
mod nodepools;
mod parity;
mod provisioning;
mod rbac;
mod repack;
mod resilience;
mod scheduler_config;
mod shadow;
mod termination;
mod validation;
