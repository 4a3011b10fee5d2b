//! Which nodes to tell why they are not disrupted, and when. Karpenter publishes a
//! `DisruptionBlocked` or `Unconsolidatable` event for a node that is held; telling it again
//! only when its message changes keeps a steady state from sending one event per node every
//! disruption poll.

use crate::{Hold, NodeExplanation};
use std::collections::BTreeMap;

/// The last event told per node.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct HoldEvents {
    last: BTreeMap<String, String>,
}

/// One event to publish about a node: its reason (`DisruptionBlocked`, `Unconsolidatable`)
/// and message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HoldEvent<'a> {
    /// The node the event is about.
    pub node: &'a str,
    /// The event reason.
    pub reason: &'static str,
    /// The event message.
    pub message: String,
}

impl HoldEvents {
    /// The events of a pass's `explanations` to publish: each node's first tellable hold
    /// ([`Hold::event`]) when its reason or message differs from the last one told. Nodes no
    /// longer explained (disrupted, gone, or with nothing to tell) are forgotten, so a later
    /// hold is told again. Every returned event counts as told.
    pub fn changed<'a>(&mut self, explanations: &'a [NodeExplanation]) -> Vec<HoldEvent<'a>> {
        let mut seen = BTreeMap::new();
        let mut out = Vec::new();
        for e in explanations {
            let Some((reason, message)) = e.holds.iter().find_map(Hold::event) else {
                continue;
            };
            let key = format!("{reason}: {message}");
            if self.last.get(&e.node) != Some(&key) {
                out.push(HoldEvent {
                    node: &e.node,
                    reason,
                    message,
                });
            }
            seen.insert(e.node.clone(), key);
        }
        self.last = seen;
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn explained(node: &str, holds: Vec<Hold>) -> NodeExplanation {
        NodeExplanation {
            node: node.into(),
            holds,
        }
    }

    #[test]
    fn a_hold_is_told_once_until_it_changes_or_goes_away() {
        let mut told = HoldEvents::default();
        let blocked = [explained("a", vec![Hold::DoNotDisruptNode])];
        let events = told.changed(&blocked);
        assert_eq!(events.len(), 1);
        assert_eq!(
            (events[0].node, events[0].reason),
            ("a", "DisruptionBlocked")
        );
        assert!(
            told.changed(&blocked).is_empty(),
            "unchanged: not told again"
        );
        let cheaper = [explained("a", vec![Hold::NotCheaper])];
        let events = told.changed(&cheaper);
        assert_eq!(
            events[0].reason, "Unconsolidatable",
            "a new message is told"
        );
        assert!(told.changed(&[]).is_empty());
        assert_eq!(told.changed(&cheaper).len(), 1, "forgotten, so told again");
    }

    #[test]
    fn holds_not_worth_telling_are_skipped_for_the_first_tellable_one() {
        let mut told = HoldEvents::default();
        let quiet = [explained("a", vec![Hold::NotManaged])];
        assert!(told.changed(&quiet).is_empty());
        let both = [explained("b", vec![Hold::Nominated, Hold::NotCheaper])];
        let events = told.changed(&both);
        assert_eq!(events.len(), 1);
        assert_eq!(events[0].message, Hold::NotCheaper.to_string());
    }
}
