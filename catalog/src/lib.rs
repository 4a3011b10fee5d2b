//! # karpenter-catalog
//!
//! The EC2 instance-type catalogue and the rules Karpenter's AWS provider applies to it, as a
//! pure library shared by the in-memory provider (`karpenter-cloudprovider-fake`) and the real
//! one (`karpenter-cloudprovider-aws`), so both compute the same capacity, overhead, labels and
//! prices for a given EC2 shape. It does no I/O, reads no clock and uses no randomness: the
//! same catalogue and options always give the same instance types.
//!
//! - [`Catalogue`]: the embedded us-east-1 catalogue ([`Catalogue::embedded`]) or a
//!   user-supplied one ([`Catalogue::from_json`]).
//! - [`Catalogue::instance_types`] / [`default_instance_types`] / [`build_instance_type`]:
//!   catalogue entries as [`karpenter_scheduling::InstanceType`]s, with [`CatalogueOptions`]
//!   for the kubelet settings an EC2NodeClass overrides.
//! - [`allocatable`]: Karpenter's capacity arithmetic (VM memory overhead, kube-reserved,
//!   eviction thresholds, pod density, the default root volume).
//! - [`pricing`]: the deterministic spot-price rule and the FNV-1a hash it uses.
//!
//! ## Catalogue format
//!
//! A JSON object with `region` (string) and `instance_types` (array). Other top-level keys
//! (such as `sources`) are ignored. Each entry is an object with these fields (unknown fields
//! are rejected so that typos are caught):
//!
//! | field | type | required | meaning |
//! |---|---|---|---|
//! | `name` | string | yes | EC2 instance type, unique (`m5.large`) |
//! | `family`, `size` | string | no | informational; default: the parts of `name` around the `.` |
//! | `vcpu` | integer ≥ 1 | yes | default vCPUs |
//! | `memory_mib` | integer ≥ 1 | yes | memory as EC2 reports it |
//! | `architecture` | `amd64` \| `arm64` | yes | |
//! | `cpu_manufacturer` | string \| null | no | `Intel`, `AMD`, `AWS` |
//! | `hypervisor` | string \| null | no | `nitro`, `xen`; null for bare metal |
//! | `bare_metal`, `burstable`, `current_generation` | bool | no | default false |
//! | `max_network_interfaces` | integer ≥ 1 | yes | ENIs of the default network card |
//! | `ipv4_per_interface` | integer ≥ 1 | yes | IPv4 addresses per ENI |
//! | `efa_supported` | bool | no | default false |
//! | `max_efa_interfaces` | integer \| null | no | default 1 when `efa_supported`, else 0 |
//! | `network_performance` | string \| null | no | informational |
//! | `local_storage_gb` | integer | no | instance store size (NVMe label); default 0 |
//! | `gpu` | object \| null | no | `{"count", "manufacturer", "name", "memory_mib"}` (memory per GPU) |
//! | `neuron_devices` | integer | no | AWS Inferentia/Trainium devices; default 0 |
//! | `usage_classes` | array of `on-demand` \| `spot` \| `capacity-block` | yes | `capacity-block` never becomes an offering |
//! | `on_demand_price_per_hour_usd` | number ≥ 0 | yes | |
//! | `zones` | array of strings, non-empty | yes | zones that offer the type |
//! | `source` | any | no | ignored provenance note |
//!
//! Example entry:
//!
//! ```json
//! {
//!   "name": "g4dn.xlarge", "family": "g4dn", "size": "xlarge",
//!   "vcpu": 4, "memory_mib": 16384, "architecture": "amd64",
//!   "cpu_manufacturer": "Intel", "hypervisor": "nitro",
//!   "bare_metal": false, "burstable": false, "current_generation": true,
//!   "max_network_interfaces": 3, "ipv4_per_interface": 10,
//!   "efa_supported": false, "network_performance": "Up to 25 Gigabit",
//!   "local_storage_gb": 125,
//!   "gpu": {"count": 1, "manufacturer": "NVIDIA", "name": "T4", "memory_mib": 16384},
//!   "neuron_devices": 0,
//!   "usage_classes": ["on-demand", "spot"],
//!   "on_demand_price_per_hour_usd": 0.526,
//!   "zones": ["us-east-1a", "us-east-1b"]
//! }
//! ```
//!
//! ## Offerings and prices
//!
//! Every zone of an entry has an on-demand offering at the catalogue price and, when
//! `usage_classes` contains `spot`, a spot offering priced by [`pricing::spot_price`]:
//! on-demand × (0.30 + 0.40 × f), f derived from an FNV-1a hash of `"{type}/{zone}"`.
#![forbid(unsafe_code)]

pub mod allocatable;
pub mod catalogue;
pub mod instance_types;
pub mod pricing;

pub use catalogue::{Catalogue, CatalogueEntry, CatalogueError, GpuInfo};
pub use instance_types::{CatalogueOptions, build_instance_type, default_instance_types};
