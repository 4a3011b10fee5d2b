//! Which of a pass's actions may run at the same time.
//!
//! Every action is one or a few API requests (or a provider call) about its own object, and
//! at a thousand nodes a pass has hundreds of them: one request after another they held a
//! pass for tens of seconds, and launches and instance terminations, which wait on the
//! cloud provider's batchers, would each wait alone. So every action runs beside the others
//! of its pass, unless it must come after one of them:
//!
//! - no two actions on the same object ever run out of the reconciler's order;
//! - an action that depends on another object waits for the earlier writes of that object:
//!   a pod's eviction or deletion waits for its node's disrupted taint (or the pod could be
//!   scheduled straight back), and a later write of that node waits for those evictions;
//! - a registration or initialization writes the claim's Node too, and an instance's
//!   termination removes its Node's finalizer, so they are ordered with that Node's taints.
//!
//! Evictions need no order among themselves: the API server's Eviction API checks and
//! decrements a PodDisruptionBudget atomically, and the pass already spent each budget's
//! allowance once over all its evictions, so one refused beyond it is an HTTP 429 (blocked,
//! retried on a later pass), never a violated budget.

use crate::{Action, ObjectKey};
use std::collections::BTreeMap;

/// How many actions of one step run at once at most.
pub const MAX_CONCURRENT: usize = 100;

/// One step of a pass: the indices (into the pass's actions, ascending) of actions that run
/// together, at most [`MAX_CONCURRENT`] at once; the next step starts when all are done.
pub type Step = Vec<usize>;

/// How an action uses an object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Access {
    /// Changes it: runs after every earlier action that uses it.
    Writes,
    /// Depends on it: runs after its earlier writes, beside other readers.
    Reads,
}

/// The objects `action` writes or depends on: its own, and the Node it writes or acts on.
fn touched(action: &Action) -> Vec<(ObjectKey, Access)> {
    let mut out = vec![(action.object(), Access::Writes)];
    let node = |n: &String, access| (ObjectKey::Node(n.clone()), access);
    match action {
        Action::RegisterNode { node: n, .. }
        | Action::InitializeNode { node: n, .. }
        | Action::TerminateInstance { node: Some(n), .. } => out.push(node(n, Access::Writes)),
        Action::EvictPod { node: n, .. }
        | Action::DeletePod { node: n, .. }
        | Action::RepairNodeClaim { node: n, .. } => out.push(node(n, Access::Reads)),
        _ => {}
    }
    out
}

/// The last step that wrote an object and the last that read it.
#[derive(Default)]
struct Uses {
    written: Option<usize>,
    read: Option<usize>,
}

/// The steps that carry out `actions`: each action goes into the first step after every
/// earlier action it must follow (see the module's rules), so actions that need no order run
/// together however the reconciler interleaved them. Every action appears in exactly one
/// step; an empty pass has no steps.
pub fn steps(actions: &[Action]) -> Vec<Step> {
    let mut out: Vec<Step> = Vec::new();
    let mut uses: BTreeMap<ObjectKey, Uses> = BTreeMap::new();
    for (i, action) in actions.iter().enumerate() {
        let keys = touched(action);
        let after = keys.iter().filter_map(|(key, access)| {
            let u = uses.get(key)?;
            match access {
                Access::Writes => u.written.max(u.read),
                Access::Reads => u.written,
            }
        });
        let step = after.max().map_or(0, |s| s + 1);
        for (key, access) in keys {
            let u = uses.entry(key).or_default();
            let slot = match access {
                Access::Writes => &mut u.written,
                Access::Reads => &mut u.read,
            };
            *slot = (*slot).max(Some(step));
        }
        if step == out.len() {
            out.push(Vec::new());
        }
        out[step].push(i);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::DeletionCause;
    use karpenter_scheduling::model::PodKey;

    fn launch(c: &str) -> Action {
        Action::LaunchInstance {
            node_claim: c.into(),
        }
    }
    fn terminate(c: &str, node: Option<&str>) -> Action {
        Action::TerminateInstance {
            node_claim: c.into(),
            node: node.map(Into::into),
        }
    }
    fn finalizer(c: &str) -> Action {
        Action::AddTerminationFinalizer {
            node_claim: c.into(),
        }
    }
    fn taint(n: &str) -> Action {
        Action::TaintDisrupted { node: n.into() }
    }
    fn untaint(n: &str) -> Action {
        Action::UntaintDisrupted { node: n.into() }
    }
    fn evict(p: &str, n: &str) -> Action {
        Action::EvictPod {
            pod: PodKey::new("default", p),
            node: n.into(),
        }
    }
    fn delete_pod(p: &str, n: &str) -> Action {
        Action::DeletePod {
            pod: PodKey::new("default", p),
            node: n.into(),
        }
    }
    fn delete_claim(c: &str) -> Action {
        Action::DeleteNodeClaim {
            node_claim: c.into(),
            cause: DeletionCause::NodeDeleted,
        }
    }
    fn delete_node(n: &str) -> Action {
        Action::DeleteNode { node: n.into() }
    }
    fn init(c: &str, n: &str) -> Action {
        Action::InitializeNode {
            node_claim: c.into(),
            node: n.into(),
        }
    }

    #[test]
    fn launches_and_terminations_of_a_pass_run_together() {
        let actions = [
            launch("a"),
            finalizer("b"),
            launch("c"),
            taint("n"),
            terminate("d", None),
        ];
        assert_eq!(steps(&actions), vec![vec![0, 1, 2, 3, 4]]);
    }

    #[test]
    fn taints_and_deletions_of_different_objects_run_together() {
        let actions = [
            taint("n"),
            taint("m"),
            delete_claim("a"),
            delete_node("o"),
            untaint("p"),
            delete_claim("b"),
            delete_node("q"),
        ];
        assert_eq!(steps(&actions), vec![(0..7).collect::<Vec<_>>()]);
    }

    #[test]
    fn a_nodes_evictions_wait_for_its_taint_and_other_nodes_do_not() {
        // The drain of `n` and `m` as termination emits it: each node's taint, then its
        // evictions (or deletions, past the grace period). Both taints run first; every
        // eviction then runs together, whatever its node.
        let actions = [
            taint("n"),
            evict("p1", "n"),
            evict("p2", "n"),
            taint("m"),
            delete_pod("p3", "m"),
            evict("p4", "o"),
        ];
        assert_eq!(steps(&actions), vec![vec![0, 3, 5], vec![1, 2, 4]]);
    }

    #[test]
    fn evictions_on_different_nodes_batch_together() {
        let actions = [evict("p1", "n"), evict("p2", "m"), evict("p3", "n")];
        assert_eq!(steps(&actions), vec![vec![0, 1, 2]]);
    }

    #[test]
    fn a_nodes_write_after_its_evictions_waits_for_them() {
        let actions = [
            evict("p1", "n"),
            evict("p2", "n"),
            untaint("n"),
            evict("p3", "n"),
        ];
        assert_eq!(steps(&actions), vec![vec![0, 1], vec![2], vec![3]]);
    }

    #[test]
    fn an_objects_actions_keep_their_order() {
        // A NodeClaim's whole life in one pass, a Node's taint flapping, and a pod evicted
        // twice: each object's actions run one step after another, in their order.
        let actions = [
            launch("a"),
            taint("n"),
            finalizer("a"),
            untaint("n"),
            delete_claim("a"),
            evict("p", "m"),
            taint("n"),
            terminate("a", None),
            evict("p", "m"),
        ];
        assert_eq!(
            steps(&actions),
            vec![vec![0, 1, 5], vec![2, 3, 8], vec![4, 6], vec![7]]
        );
    }

    #[test]
    fn an_instances_termination_comes_after_its_nodes_taint() {
        // Termination removes the Node's finalizer: a taint of that Node emitted before it
        // runs first; a claim without a Node does not wait.
        let actions = [
            taint("n"),
            terminate("a", Some("n")),
            terminate("b", None),
            terminate("c", Some("m")),
        ];
        assert_eq!(steps(&actions), vec![vec![0, 2, 3], vec![1]]);
    }

    #[test]
    fn a_nodes_lifecycle_writes_keep_their_order_with_its_taints_and_evictions() {
        // Initialization writes the Node too: a taint of that Node waits for it, and an
        // eviction from it waits for the taint; another node's taint does not wait.
        let actions = [
            init("a", "n"),
            taint("m"),
            taint("n"),
            evict("p", "n"),
            init("b", "o"),
        ];
        assert_eq!(steps(&actions), vec![vec![0, 1, 4], vec![2], vec![3]]);
    }

    #[test]
    fn every_action_is_in_exactly_one_step_in_order_within_it() {
        let actions = [
            taint("n"),
            evict("p1", "n"),
            launch("a"),
            finalizer("a"),
            delete_node("n"),
            terminate("a", Some("n")),
        ];
        let steps = steps(&actions);
        let mut all: Vec<usize> = steps.iter().flatten().copied().collect();
        assert!(steps.iter().all(|s| s.is_sorted()), "{steps:?}");
        all.sort_unstable();
        assert_eq!(all, (0..actions.len()).collect::<Vec<_>>());
        assert!(super::steps(&[]).is_empty());
    }
}
