//! # karpenter-cloudprovider-fake
//!
//! An in-memory cloud provider, good enough to simulate an EKS cluster: by default it offers
//! the real EC2 catalogue of [`karpenter_catalog`] (instance types with the capacity,
//! overhead, labels and prices Karpenter's AWS provider would compute), and it launches, lists
//! and deletes "instances" without any I/O, clock or randomness.
//!
//! - [`FakeCloudProvider`]: the `CloudProvider` over the embedded catalogue
//!   ([`FakeCloudProvider::default`]), a catalogue built with options
//!   ([`FakeCloudProvider::from_catalogue`]) or any instance types
//!   ([`FakeCloudProvider::new`]), with failure injection and a call log.
//! - [`node_instances`]: fake instances kept as Node objects (the operator's
//!   `--cloud-provider fake` on a real cluster), and their conversions from and to NodeClaims.
//! - [`devices`]: the DRA devices GPU types publish (driver `gpu.fake.karpenter.sh`).
//! - [`kubelet`]: what those instances' kubelet would post (Ready, Lease, running pods).
//! - [`launch_faults`]: offerings that fail with insufficient capacity and slow launches
//!   (`--fake-insufficient-capacity`, `--fake-launch-delay`).
//! - [`reservations`]: capacity reservations ([`FakeReservation`]) the provider offers as
//!   `reserved` capacity and launches into, as Karpenter's AWS provider does.
//!
//! The catalogue format, the allocatable arithmetic and the spot-price rule are documented in
//! [`karpenter_catalog`].
#![forbid(unsafe_code)]

pub mod devices;
pub mod kubelet;
pub mod launch_faults;
pub mod node_instances;
pub mod provider;
pub mod reservations;

pub use provider::{FakeCloudProvider, ProviderCall};
pub use reservations::{FakeReservation, ReservationError};
