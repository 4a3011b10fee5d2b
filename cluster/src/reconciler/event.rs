//! What a tick reports besides its actions: the controller turns these into log lines,
//! Kubernetes events and metrics, the simulator into its log and report.

use crate::capacity_buffer::{BufferKey, Placement};
use crate::orchestration::Outcome;
use karpenter_disruption::{Command, PassResult};
use karpenter_scheduling::Plan;
use karpenter_scheduling::model::PodKey;

/// Something the reconciler decided or observed.
#[derive(Debug, Clone)]
pub enum Event {
    /// A batch of provisionable pods was planned.
    Planned {
        /// How many pods the batch held.
        pods: usize,
        /// The plan.
        plan: Box<Plan>,
        /// How long the solve took on the caller's clock.
        seconds: f64,
        /// The tick's `now`: when these scheduling decisions were made.
        at: karpenter_scheduling::model::Millis,
    },
    /// A pending pod will schedule on an existing (or in-flight) node; reported once per
    /// pod and node.
    Nominated {
        /// The pod.
        pod: PodKey,
        /// The node.
        node: String,
    },
    /// The plan could not place a pod; reported once per pod and reason.
    FailedScheduling {
        /// The pod.
        pod: PodKey,
        /// Why, as the solver explains it.
        reason: String,
    },
    /// A disruption pass ran.
    DisruptionPass {
        /// Drifted NodeClaims (name to reason), for their `Drifted` condition.
        drifted: std::collections::BTreeMap<String, String>,
        /// Its result (commands, explanations, eligible counts).
        result: Box<PassResult>,
        /// How long it took on the caller's clock.
        seconds: f64,
    },
    /// A pass's command was accepted: forceful commands act at once, graceful ones wait for
    /// validation (their start is reported as [`Outcome::Started`]).
    DisruptionDecided(Box<Command>),
    /// A queued command moved on.
    Disruption(Outcome),
    /// A NodeClaim is given up: it did not launch, or its Node did not register, in time
    /// (it is deleted by the accompanying action).
    LifecycleTimeout {
        /// The NodeClaim.
        node_claim: String,
        /// `LaunchTimeout` or `RegistrationTimeout`.
        reason: &'static str,
        /// What happened, for the event.
        message: String,
    },
    /// An unhealthy node is due for repair, but more than
    /// [`crate::repair::ALLOWED_UNHEALTHY_PERCENT`] of its pool (or of the cluster) is
    /// unhealthy; reported again every [`super::BLOCKED_REPORT_INTERVAL_MS`] while it lasts.
    RepairBlocked {
        /// The Node.
        node: String,
        /// Its NodeClaim.
        node_claim: String,
        /// Its NodePool, empty for a claim without one (the cluster-wide limit applied).
        node_pool: String,
    },
    /// A static NodePool (`spec.replicas`) does not have the NodeClaims it wants, and what
    /// the reconciler does about it (upstream's `static.provisioning` and
    /// `static.deprovisioning` controllers).
    StaticCapacity {
        /// The NodePool.
        node_pool: String,
        /// Its active NodeClaims (neither deleting nor being replaced).
        current: i64,
        /// `spec.replicas`.
        desired: i64,
        /// What is done.
        change: StaticChange,
    },
    /// A node tainted `karpenter.sh/disrupted` that no command holds (left by an earlier
    /// leader) is being untainted.
    OrphanTaint {
        /// The node.
        node: String,
    },
    /// A plan placed a CapacityBuffer's virtual pods differently enough to change its
    /// `Provisioning` condition (or placed them for the first time).
    CapacityBuffer {
        /// The buffer.
        buffer: BufferKey,
        /// How many chunks it keeps.
        replicas: i32,
        /// Where its virtual pods went.
        placement: Placement,
    },
}

/// What the reconciler does for a static NodePool that is short of or over its replicas.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StaticChange {
    /// These NodeClaims are created.
    Provision(Vec<String>),
    /// These NodeClaims are deleted (drained and terminated like any deleted claim).
    Deprovision(Vec<String>),
    /// Short of replicas, but `limits.nodes` leaves room for no new NodeClaim.
    LimitReached,
}

/// A short description of a plan, for one log line.
#[derive(Debug, Clone, PartialEq)]
pub struct PlanSummary {
    /// New NodeClaims.
    pub node_claims: usize,
    /// Pods placed on them.
    pub pods: usize,
    /// Distinct instance-type options, first-seen order, at most `shown`.
    pub options: Vec<String>,
    /// How many more options there are.
    pub more_options: usize,
}

impl PlanSummary {
    /// Summarises `plan`'s new claims, listing at most `shown` options.
    pub fn of(plan: &Plan, shown: usize) -> Self {
        let mut options: Vec<String> = Vec::new();
        let mut seen = std::collections::HashSet::new();
        let mut total = 0;
        for c in &plan.new_node_claims {
            for o in c.instance_type_options.iter() {
                if seen.insert(&*o.name) {
                    total += 1;
                    if options.len() < shown {
                        options.push(o.name.to_string());
                    }
                }
            }
        }
        Self {
            node_claims: plan.new_node_claims.len(),
            pods: plan.new_node_claims.iter().map(|c| c.pods.len()).sum(),
            more_options: total - options.len(),
            options,
        }
    }
}
