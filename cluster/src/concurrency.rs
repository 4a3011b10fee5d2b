//! Which of a pass's actions may run at the same time.
//!
//! Launches and instance terminations wait on the cloud provider (whose batchers merge
//! concurrent calls, and wait for more for a short window), so running them one after
//! another would make each wait alone and nothing would ever batch. A NodeClaim's lifecycle
//! writes (its finalizer, registration, initialization, conditions and pod-event stamp) are
//! one or two API requests each about that claim and its own Node; at a thousand nodes a
//! pass has hundreds of them, and one request after another they held a pass for tens of
//! seconds. All of these run together. Everything else (taints, drains, deletions, repair)
//! runs one at a time in the reconciler's order, and no two actions on the same object ever
//! run out of their order.

use crate::{Action, ObjectKey};
use std::collections::BTreeSet;

/// How many actions of one group run at once at most.
pub const MAX_CONCURRENT: usize = 100;

/// One step of a pass: an action alone, or a group of actions to run concurrently
/// (indices into the pass's actions).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Run this action, then the next step.
    One(usize),
    /// Run these actions together (at most [`MAX_CONCURRENT`] at once), then the next step.
    Together(Vec<usize>),
}

/// Whether `action` touches nothing but its own NodeClaim (and, for registration and
/// initialization, that claim's Node), so it may run beside others of its kind.
pub fn runs_concurrently(action: &Action) -> bool {
    matches!(
        action,
        Action::LaunchNodeClaim { .. }
            | Action::LaunchInstance { .. }
            | Action::TerminateInstance { .. }
            | Action::AddTerminationFinalizer { .. }
            | Action::RegisterNode { .. }
            | Action::InitializeNode { .. }
            | Action::SetClaimConditions { .. }
            | Action::StampPodEvent { .. }
    )
}

/// Every object `action` writes: its own, and the Node of a registration or initialization.
fn touched(action: &Action) -> Vec<ObjectKey> {
    let mut out = vec![action.object()];
    if let Action::RegisterNode { node, .. } | Action::InitializeNode { node, .. } = action {
        out.push(ObjectKey::Node(node.clone()));
    }
    out
}

/// The steps that carry out `actions`. The other actions run one at a time in their order;
/// concurrent ones gather into a group that runs when an action on one of its objects comes
/// (so every object's actions keep their order) or at the end of the pass. Every action
/// appears in exactly one step.
pub fn steps(actions: &[Action]) -> Vec<Step> {
    let mut out = Vec::new();
    let mut group: Vec<usize> = Vec::new();
    let mut objects: BTreeSet<ObjectKey> = BTreeSet::new();
    let flush = |out: &mut Vec<Step>, group: &mut Vec<usize>, objects: &mut BTreeSet<ObjectKey>| {
        if !group.is_empty() {
            out.push(Step::Together(std::mem::take(group)));
            objects.clear();
        }
    };
    for (i, action) in actions.iter().enumerate() {
        let keys = touched(action);
        if keys.iter().any(|k| objects.contains(k)) {
            flush(&mut out, &mut group, &mut objects);
        }
        if runs_concurrently(action) {
            objects.extend(keys);
            group.push(i);
        } else {
            out.push(Step::One(i));
        }
    }
    flush(&mut out, &mut group, &mut objects);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn launch(c: &str) -> Action {
        Action::LaunchInstance {
            node_claim: c.into(),
        }
    }
    fn terminate(c: &str) -> Action {
        Action::TerminateInstance {
            node_claim: c.into(),
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

    #[test]
    fn launches_and_terminations_of_a_pass_run_together() {
        let actions = [
            launch("a"),
            finalizer("b"),
            launch("c"),
            taint("n"),
            terminate("d"),
        ];
        assert_eq!(
            steps(&actions),
            vec![Step::One(3), Step::Together(vec![0, 1, 2, 4])]
        );
    }

    #[test]
    fn an_objects_actions_keep_their_order() {
        // The finalizer of `a` must not run before `a`'s launch, nor `c`'s second
        // termination together with its first.
        let actions = [
            launch("a"),
            launch("b"),
            finalizer("a"),
            terminate("c"),
            terminate("c"),
        ];
        assert_eq!(
            steps(&actions),
            vec![
                Step::Together(vec![0, 1]),
                Step::Together(vec![2, 3]),
                Step::Together(vec![4]),
            ]
        );
    }

    #[test]
    fn a_nodes_lifecycle_writes_keep_their_order_with_its_taints() {
        let init = |c: &str, n: &str| Action::InitializeNode {
            node_claim: c.into(),
            node: n.into(),
        };
        // Initialization writes the Node too: a taint of that Node waits for it, and one
        // before it runs first; another node's taint does not wait.
        let actions = [init("a", "n"), taint("m"), taint("n"), init("b", "o")];
        assert_eq!(
            steps(&actions),
            vec![
                Step::One(1),
                Step::Together(vec![0]),
                Step::One(2),
                Step::Together(vec![3]),
            ]
        );
    }

    #[test]
    fn sequential_actions_keep_the_reconcilers_order() {
        let untaint = |n: &str| Action::UntaintDisrupted { node: n.into() };
        let actions = [taint("n"), untaint("m"), taint("o")];
        assert_eq!(
            steps(&actions),
            vec![Step::One(0), Step::One(1), Step::One(2)]
        );
    }
}
