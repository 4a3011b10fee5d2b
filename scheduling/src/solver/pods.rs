//! Per-pod data computed once per (relaxed) pod: requests, requirements and the strict
//! (preference-free) requirements, volume requirements and host ports — Karpenter's `PodData`.

use crate::devices::{CompiledClaim, compile_claims};
use crate::model::{NodeSelectorTerm, Pod};
use crate::requirements::{Requirement, Requirements};
use crate::resources::Resources;
use crate::solver::preferences::Relaxed;

/// What the solver needs of a pod in its current relaxation state.
#[derive(Debug, Clone)]
pub(crate) struct PodData {
    /// Requests, with `pods: 1` as `RequestsForPods` sets it.
    pub requests: Resources,
    /// nodeSelector ∩ heaviest preferred node-affinity term ∩ first required term.
    pub requirements: Requirements,
    /// nodeSelector ∩ first required term (no preferences).
    pub strict: Requirements,
    /// Requirements from the pod's volumes, added to a node's requirements after the
    /// compatibility check, as upstream's volume topology does.
    pub volume: Requirements,
    /// Whether PreferNoSchedule taints are tolerated.
    pub tolerate_pns: bool,
    /// The pod's ResourceClaims, compiled (empty unless DRA requests are simulated).
    pub devices: Vec<CompiledClaim>,
}

fn add_term(reqs: &mut Requirements, term: &NodeSelectorTerm) -> Result<(), String> {
    for e in &term.match_expressions {
        let r = Requirement::from_node_selector(e)
            .map_err(|err| format!("invalid node affinity expression: {err}"))?;
        reqs.add(r);
    }
    Ok(())
}

impl PodData {
    /// Computes the data; an invalid expression is an error naming it.
    pub(crate) fn new(r: &Relaxed<'_>) -> Result<Self, String> {
        let pod: &Pod = r.pod;
        let mut strict = Requirements::from_labels(pod.node_selector.iter());
        if let Some(term) = r.required_terms.first() {
            add_term(&mut strict, term)?;
        }
        let requirements = match r.preferred_node.first() {
            Some(p) => {
                let mut all = Requirements::from_labels(pod.node_selector.iter());
                add_term(&mut all, &p.preference)?;
                if let Some(term) = r.required_terms.first() {
                    add_term(&mut all, term)?;
                }
                all
            }
            None => strict.clone(),
        };
        let volume = Requirements::from_node_selector(&pod.volume_requirements)
            .map_err(|err| format!("invalid volume requirement: {err}"))?;
        let mut requests = pod.requests.clone();
        requests.pods = 1;
        let devices = compile_claims(&pod.device_claims)?;
        Ok(PodData {
            requests,
            requirements,
            strict,
            volume,
            tolerate_pns: r.tolerates_prefer_no_schedule(),
            devices,
        })
    }
}
