//! What a conversion accumulates over the input: the output objects in input order, the
//! links between them that are settled after every object is converted (kubelet settings to
//! classes, NodeClaims to their NodePools), and the issues.

use crate::kubelet::PoolKubelet;
use crate::nodeclaim::ClaimLink;
use crate::report::Issue;
use serde_json::Value;

/// One output object.
pub(crate) struct Out {
    /// The object.
    pub value: Value,
    /// The input object it came from, for messages.
    pub object: String,
    /// Whether it was converted (rather than passed through as it was).
    pub converted: bool,
    /// Where it goes in the output: the input document's position, then its place among the
    /// objects made from that document.
    pub order: (usize, usize),
}

/// The conversion so far.
#[derive(Default)]
pub(crate) struct State {
    pub outs: Vec<Out>,
    pub pool_kubelets: Vec<PoolKubelet>,
    pub claims: Vec<ClaimLink>,
    pub issues: Vec<Issue>,
}

impl State {
    /// Adds an output object.
    pub(crate) fn push(
        &mut self,
        value: Value,
        object: &str,
        converted: bool,
        order: (usize, usize),
    ) -> usize {
        self.outs.push(Out {
            value,
            object: object.to_owned(),
            converted,
            order,
        });
        self.outs.len() - 1
    }

    /// The first output object of `api_version` and `kind` named `name`.
    pub(crate) fn find(&self, api_version: &str, kind: &str, name: &str) -> Option<usize> {
        self.outs.iter().position(|o| {
            o.value["apiVersion"] == api_version
                && o.value["kind"] == kind
                && o.value["metadata"]["name"] == name
        })
    }

    /// `base`, or `base-2`, `base-3` … whichever no output object of that type has.
    pub(crate) fn unique_name(&self, api_version: &str, kind: &str, base: &str) -> String {
        let mut name = base.to_owned();
        let mut n = 2;
        while self.find(api_version, kind, &name).is_some() {
            name = format!("{base}-{n}");
            n += 1;
        }
        name
    }
}
