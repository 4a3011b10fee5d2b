//! Units and resource amounts in the scheduler's integer units (millicores, bytes).

use karpenter_scheduling::resources::Resources;

/// Bytes in a GiB.
pub const GI: i64 = 1 << 30;

/// Bytes in a MiB.
pub const MI: i64 = 1 << 20;

/// Requests of `cpu_millis` millicores and `memory` bytes; every other resource, pods
/// included, is zero.
pub fn res(cpu_millis: i64, memory: i64) -> Resources {
    Resources {
        cpu_millis,
        memory,
        ..Resources::default()
    }
}
