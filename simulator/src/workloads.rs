//! The workload controllers' objects (Deployments, ReplicaSets, StatefulSets, Jobs) as the
//! engine keeps them, with a version that lets the engine skip reconciling them when neither
//! they nor the cluster changed.

use karpenter_scheduling::model::{Millis, Pod};
use std::collections::BTreeMap;

/// The workload kinds the engine runs controllers for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Kind {
    Deployment,
    ReplicaSet,
    StatefulSet,
    Job,
}

impl Kind {
    pub(crate) fn parse(kind: &str) -> Option<Self> {
        match kind {
            "Deployment" => Some(Self::Deployment),
            "ReplicaSet" => Some(Self::ReplicaSet),
            "StatefulSet" => Some(Self::StatefulSet),
            "Job" => Some(Self::Job),
            _ => None,
        }
    }

    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::Deployment => "Deployment",
            Self::ReplicaSet => "ReplicaSet",
            Self::StatefulSet => "StatefulSet",
            Self::Job => "Job",
        }
    }
}

/// Kind, namespace, name.
pub(crate) type WorkloadKey = (Kind, String, String);

/// A workload controller's state.
#[derive(Debug, Clone)]
pub(crate) struct Workload {
    pub replicas: i32,
    pub proto: Pod,
    pub ordinal_start: i32,
    /// A StatefulSet with the `OrderedReady` pod management policy (Kubernetes' default):
    /// it creates one pod at a time, each once the lower ordinals are Running and Ready.
    pub ordered_ready: bool,
    pub completions: i32,
    pub succeeded: i32,
    pub run_time: Millis,
    pub counter: u64,
    pub complete: bool,
}

impl Workload {
    /// A workload of `replicas` pods like `proto` (a Job's parallelism), with nothing run yet.
    pub fn new(proto: Pod, replicas: i32) -> Self {
        Self {
            replicas,
            proto,
            ordinal_start: 0,
            ordered_ready: false,
            completions: 0,
            succeeded: 0,
            run_time: 0,
            counter: 0,
            complete: false,
        }
    }

    /// How many pods it wants now: its replicas, or for a Job its parallelism up to the
    /// completions still missing (none once complete).
    pub fn desired(&self, kind: Kind) -> usize {
        let n = match kind {
            Kind::Job if self.complete => 0,
            Kind::Job => self.replicas.min(self.completions - self.succeeded),
            _ => self.replicas,
        };
        usize::try_from(n).unwrap_or(0)
    }
}

/// Every workload, in key order. Each mutable access bumps [`Workloads::version`], so equal
/// versions mean the workloads are unchanged.
#[derive(Debug, Default)]
pub(crate) struct Workloads {
    map: BTreeMap<WorkloadKey, Workload>,
    version: u64,
}

impl Workloads {
    /// Bumped by every mutable access.
    pub fn version(&self) -> u64 {
        self.version
    }

    pub fn get(&self, key: &WorkloadKey) -> Option<&Workload> {
        self.map.get(key)
    }

    pub fn iter(&self) -> impl Iterator<Item = (&WorkloadKey, &Workload)> {
        self.map.iter()
    }

    pub fn get_mut(&mut self, key: &WorkloadKey) -> Option<&mut Workload> {
        self.version += 1;
        self.map.get_mut(key)
    }

    pub fn insert(&mut self, key: WorkloadKey, w: Workload) {
        self.version += 1;
        self.map.insert(key, w);
    }

    pub fn remove(&mut self, key: &WorkloadKey) -> Option<Workload> {
        self.version += 1;
        self.map.remove(key)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_mutable_access_bumps_the_version() {
        let mut ws = Workloads::default();
        let key = (Kind::Deployment, "ns".to_owned(), "web".to_owned());
        let w = Workload::new(Pod::default(), 1);
        let mut seen = vec![ws.version()];
        ws.insert(key.clone(), w);
        seen.push(ws.version());
        assert!(ws.get(&key).is_some());
        assert_eq!(ws.iter().count(), 1);
        assert_eq!(
            ws.version(),
            *seen.last().unwrap(),
            "reading changes nothing"
        );
        ws.get_mut(&key).unwrap().replicas = 2;
        seen.push(ws.version());
        ws.remove(&key);
        seen.push(ws.version());
        assert!(seen.windows(2).all(|v| v[0] < v[1]), "{seen:?}");
    }
}
