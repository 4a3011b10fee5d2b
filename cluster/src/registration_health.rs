//! NodePool `NodeRegistrationHealthy`, as upstream keeps it: each pool remembers the outcome
//! of its last [`WINDOW`] NodeClaims (registered, or given up by the launch or registration
//! timeout). The pool is unhealthy when at least half of that window failed.
//!
//! The condition moves only on an outcome: a failure that leaves the pool unhealthy sets it
//! `False` (with the launch failure's reason, or `RegistrationFailed`), a registration that
//! leaves it healthy sets it `True`; anything else leaves it as it was. When the pool's
//! generation or its NodeClass's generation changes, the window is cleared and the condition
//! goes back to `Unknown`. A fresh reconciler (a restart) seeds the window from the
//! condition it finds: one success for `True`, enough failures for `False`.

use karpenter_cloudprovider::NodePool;
use karpenter_cloudprovider::v1::{
    ConditionStatus, NODEPOOL_CONDITION_NODE_REGISTRATION_HEALTHY, StatusConditions,
};
use std::collections::{BTreeMap, VecDeque};

/// How many outcomes a pool remembers.
pub const WINDOW: usize = 4;

/// What the condition should be: status, reason and message.
pub type Verdict = (ConditionStatus, String, String);

/// The `Unknown` verdict written after a reset (operatorpkg's reason and message).
pub fn unknown() -> Verdict {
    (
        ConditionStatus::Unknown,
        "AwaitingReconciliation".to_owned(),
        "object is awaiting reconciliation".to_owned(),
    )
}

#[derive(Debug, Clone, Default)]
struct Tracker {
    /// The (pool, NodeClass) generations the window belongs to.
    generations: (i64, Option<i64>),
    outcomes: VecDeque<bool>,
    verdict: Option<Verdict>,
}

impl Tracker {
    fn push(&mut self, success: bool) {
        if self.outcomes.len() == WINDOW {
            self.outcomes.pop_front();
        }
        self.outcomes.push_back(success);
    }

    fn unhealthy(&self) -> bool {
        !self.outcomes.is_empty() && self.outcomes.iter().filter(|ok| !**ok).count() * 2 >= WINDOW
    }
}

/// One outcome: a claim of the pool registered, or lifecycle gave it up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The claim's Node registered.
    Registered,
    /// The claim timed out. `launch_failure` is the reason and message of its `Launched`
    /// condition when it never launched.
    Failed {
        /// Why the launch failed, when it did.
        launch_failure: Option<(String, String)>,
    },
}

/// Every pool's registration window, by pool UID.
#[derive(Debug, Clone, Default)]
pub struct RegistrationHealth {
    pools: BTreeMap<String, Tracker>,
}

fn uid(pool: &NodePool) -> String {
    pool.metadata.uid.clone().unwrap_or_default()
}

impl RegistrationHealth {
    /// Brings `pool`'s window in line with its generations: seeds it from the pool's
    /// condition the first time the pool is seen, clears it (verdict `Unknown`) when the
    /// pool or its NodeClass changed since.
    pub fn observe(&mut self, pool: &NodePool, node_class_generation: Option<i64>) {
        let generations = (
            pool.metadata.generation.unwrap_or_default(),
            node_class_generation,
        );
        match self.pools.get_mut(&uid(pool)) {
            Some(t) if t.generations == generations => {}
            Some(t) => {
                *t = Tracker {
                    generations,
                    outcomes: VecDeque::new(),
                    verdict: Some(unknown()),
                };
            }
            None => {
                let mut t = Tracker {
                    generations,
                    ..Tracker::default()
                };
                if stale(pool, node_class_generation) {
                    t.verdict = Some(unknown());
                } else if pool.is_true(NODEPOOL_CONDITION_NODE_REGISTRATION_HEALTHY) {
                    t.push(true);
                } else if pool.is_false(NODEPOOL_CONDITION_NODE_REGISTRATION_HEALTHY) {
                    for _ in 0..WINDOW / 2 {
                        t.push(false);
                    }
                }
                self.pools.insert(uid(pool), t);
            }
        }
    }

    /// Records one claim's outcome for the pool with `pool_uid` (observed before).
    pub fn record(&mut self, pool_uid: &str, outcome: &Outcome) {
        let Some(t) = self.pools.get_mut(pool_uid) else {
            return;
        };
        match outcome {
            Outcome::Registered => {
                t.push(true);
                if !t.unhealthy() {
                    t.verdict = Some((
                        ConditionStatus::True,
                        NODEPOOL_CONDITION_NODE_REGISTRATION_HEALTHY.to_owned(),
                        String::new(),
                    ));
                }
            }
            Outcome::Failed { launch_failure } => {
                t.push(false);
                let already_false = t
                    .verdict
                    .as_ref()
                    .is_some_and(|v| v.0 == ConditionStatus::False);
                if t.unhealthy() && !already_false {
                    let (reason, message) = launch_failure.clone().unwrap_or_else(|| {
                        (
                            "RegistrationFailed".to_owned(),
                            "Failed to register node".to_owned(),
                        )
                    });
                    t.verdict = Some((ConditionStatus::False, reason, message));
                }
            }
        }
    }

    /// Forgets pools that no longer exist.
    pub fn retain(&mut self, live: impl Fn(&str) -> bool) {
        self.pools.retain(|uid, _| live(uid));
    }

    /// What `pool`'s condition should be since its window last moved; `None` leaves it as
    /// it is.
    pub fn verdict(&self, pool: &NodePool) -> Option<&Verdict> {
        self.pools.get(&uid(pool)).and_then(|t| t.verdict.as_ref())
    }
}

/// Whether `pool`'s condition predates its current spec or NodeClass (or is missing), so
/// upstream resets it to `Unknown`.
pub fn stale(pool: &NodePool, node_class_generation: Option<i64>) -> bool {
    let Some(c) = pool.condition(NODEPOOL_CONDITION_NODE_REGISTRATION_HEALTHY) else {
        return true;
    };
    let observed_class = pool
        .status
        .as_ref()
        .and_then(|s| s.node_class_observed_generation);
    c.observed_generation != pool.metadata.generation
        || (node_class_generation.is_some() && observed_class != node_class_generation)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::provisioner::time;

    fn pool(generation: i64) -> NodePool {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodePool",
            "metadata": {"name": "default", "uid": "u1", "generation": generation},
            "spec": {"template": {"spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}, "requirements": []}}}
        }))
        .unwrap()
    }

    fn failed() -> Outcome {
        Outcome::Failed {
            launch_failure: None,
        }
    }

    fn status(h: &RegistrationHealth, p: &NodePool) -> Option<ConditionStatus> {
        h.verdict(p).map(|v| v.0)
    }

    #[test]
    fn half_the_window_failing_makes_the_pool_unhealthy_and_one_success_does_not_undo_it() {
        let p = pool(1);
        let mut h = RegistrationHealth::default();
        h.observe(&p, None);
        assert_eq!(
            status(&h, &p),
            Some(ConditionStatus::Unknown),
            "no condition yet"
        );
        h.record("u1", &failed());
        // One failure in four is still healthy, but only a success sets True.
        assert_eq!(status(&h, &p), Some(ConditionStatus::Unknown));
        h.record("u1", &Outcome::Registered);
        assert_eq!(status(&h, &p), Some(ConditionStatus::True));
        h.record("u1", &failed());
        let v = h.verdict(&p).unwrap();
        assert_eq!(
            (v.0, v.1.as_str()),
            (ConditionStatus::False, "RegistrationFailed")
        );
        // [F, T, F, T]: still half failed.
        h.record("u1", &Outcome::Registered);
        assert_eq!(status(&h, &p), Some(ConditionStatus::False));
        // [T, F, T, T]: healthy again.
        h.record("u1", &Outcome::Registered);
        assert_eq!(status(&h, &p), Some(ConditionStatus::True));
    }

    #[test]
    fn a_launch_failure_gives_its_reason() {
        let p = pool(1);
        let mut h = RegistrationHealth::default();
        h.observe(&p, None);
        let launch = Outcome::Failed {
            launch_failure: Some(("InsufficientCapacityError".into(), "no capacity".into())),
        };
        h.record("u1", &launch);
        h.record("u1", &launch);
        let v = h.verdict(&p).unwrap();
        assert_eq!(v.1, "InsufficientCapacityError");
        assert_eq!(v.2, "no capacity");
    }

    #[test]
    fn a_new_generation_of_the_pool_or_its_class_resets_the_window() {
        let p = pool(1);
        let mut h = RegistrationHealth::default();
        h.observe(&p, Some(7));
        h.record("u1", &failed());
        h.record("u1", &failed());
        assert_eq!(status(&h, &p), Some(ConditionStatus::False));
        h.observe(&p, Some(7));
        assert_eq!(status(&h, &p), Some(ConditionStatus::False), "unchanged");
        h.observe(&p, Some(8));
        assert_eq!(status(&h, &p), Some(ConditionStatus::Unknown));
        // The window is empty again: one failure is not enough.
        h.record("u1", &failed());
        assert_eq!(status(&h, &p), Some(ConditionStatus::Unknown));
        let p2 = pool(2);
        h.record("u1", &failed());
        assert_eq!(status(&h, &p), Some(ConditionStatus::False));
        h.observe(&p2, Some(8));
        assert_eq!(status(&h, &p2), Some(ConditionStatus::Unknown));
    }

    #[test]
    fn a_restart_seeds_the_window_from_the_condition() {
        let mut p = pool(1);
        p.set_false(
            NODEPOOL_CONDITION_NODE_REGISTRATION_HEALTHY,
            "RegistrationFailed",
            "Failed to register node",
            time(0),
        );
        let mut h = RegistrationHealth::default();
        h.observe(&p, None);
        assert_eq!(status(&h, &p), None, "left as it is");
        // Seeded with two failures: one success leaves it unhealthy, two do not.
        h.record("u1", &Outcome::Registered);
        assert_eq!(status(&h, &p), None);
        h.record("u1", &Outcome::Registered);
        h.record("u1", &Outcome::Registered);
        assert_eq!(status(&h, &p), Some(ConditionStatus::True));

        let mut healthy = pool(1);
        healthy.set_true(NODEPOOL_CONDITION_NODE_REGISTRATION_HEALTHY, time(0));
        let mut h = RegistrationHealth::default();
        h.observe(&healthy, None);
        h.record("u1", &failed());
        assert_eq!(status(&h, &healthy), None, "[T, F] is healthy");
        h.record("u1", &failed());
        assert_eq!(status(&h, &healthy), Some(ConditionStatus::False));
    }

    #[test]
    fn a_condition_from_an_older_generation_is_stale() {
        let mut p = pool(1);
        assert!(stale(&p, None), "missing");
        p.set_true(NODEPOOL_CONDITION_NODE_REGISTRATION_HEALTHY, time(0));
        assert!(!stale(&p, None));
        assert!(stale(&p, Some(3)), "class generation not observed");
        p.status.as_mut().unwrap().node_class_observed_generation = Some(3);
        assert!(!stale(&p, Some(3)));
        p.metadata.generation = Some(2);
        assert!(stale(&p, Some(3)));
    }
}
