//! Leader election by a `coordination.k8s.io/v1` Lease (kube-lease-manager). Only the
//! replica holding the Lease reconciles; the others keep their caches warm so a failover
//! starts acting at once, from the objects' state.

use kube::Client;
use kube_lease_manager::LeaseManagerBuilder;
use tokio::sync::watch;

/// Seconds a Lease stays valid without renewal (controller-runtime's default).
pub const LEASE_DURATION_SECS: u64 = 15;
/// Seconds before expiry at which the holder renews.
pub const LEASE_GRACE_SECS: u64 = 5;

/// Whether this replica may act. Cheap to clone; all clones see the same state.
#[derive(Debug, Clone)]
pub struct LeaderGate {
    rx: watch::Receiver<bool>,
}

impl LeaderGate {
    /// A gate that is always open (leader election disabled).
    pub fn always() -> Self {
        let (tx, rx) = watch::channel(true);
        // Keep the value forever: a dropped sender leaves the last value readable.
        drop(tx);
        Self { rx }
    }

    /// A gate driven by `rx`.
    pub fn from_receiver(rx: watch::Receiver<bool>) -> Self {
        Self { rx }
    }

    /// Whether this replica currently holds the Lease.
    pub fn is_leader(&self) -> bool {
        *self.rx.borrow()
    }

    /// Waits until this replica is leader.
    pub async fn wait_for_leadership(&mut self) {
        // An error means the sender is gone and the value is final.
        let _ = self.rx.wait_for(|v| *v).await;
    }

    /// Waits until leadership is lost (returns at once if not leader).
    pub async fn lost(&mut self) {
        let _ = self.rx.wait_for(|v| !*v).await;
    }
}

/// Errors starting leader election.
#[derive(Debug, thiserror::Error)]
#[error("leader election Lease {namespace}/{name}: {source}")]
pub struct LeaderError {
    /// Lease namespace.
    pub namespace: String,
    /// Lease name.
    pub name: String,
    /// The manager's error.
    #[source]
    pub source: kube_lease_manager::LeaseManagerError,
}

/// Starts competing for `namespace/name` as `identity`; the gate opens while this replica
/// holds the Lease. The task ends (and the gate closes) when the returned sender-side task
/// is aborted.
///
/// # Errors
/// The Lease cannot be created or read.
pub async fn elect(
    client: Client,
    namespace: &str,
    name: &str,
    identity: &str,
) -> Result<(LeaderGate, tokio::task::JoinHandle<()>), LeaderError> {
    let err = |source| LeaderError {
        namespace: namespace.to_owned(),
        name: name.to_owned(),
        source,
    };
    let manager = LeaseManagerBuilder::new(client, name)
        .with_namespace(namespace)
        .with_identity(identity)
        .with_duration(LEASE_DURATION_SECS)
        .with_grace(LEASE_GRACE_SECS)
        .with_field_manager(format!("karpenter-{identity}"))
        .build()
        .await
        .map_err(err)?;
    let (rx, task) = manager.watch().await;
    let handle = tokio::spawn(async move {
        match task.await {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => tracing::error!(error = %e, "leader election stopped"),
            Err(e) => tracing::error!(error = %e, "leader election task failed"),
        }
    });
    Ok((LeaderGate::from_receiver(rx), handle))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn gate_follows_channel() {
        let (tx, rx) = watch::channel(false);
        let mut gate = LeaderGate::from_receiver(rx);
        assert!(!gate.is_leader());
        tx.send(true).unwrap();
        gate.wait_for_leadership().await;
        assert!(gate.is_leader());
        tx.send(false).unwrap();
        gate.lost().await;
        assert!(!gate.is_leader());
        assert!(LeaderGate::always().is_leader());
    }
}
