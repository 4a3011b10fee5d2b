//! `karpenter plan`'s text output: a plan as tables of new nodes, placements on existing
//! nodes and unschedulable pods (with the reason each cannot be placed), then the totals and,
//! when the solver has one, the lower bound.

use crate::table::Table;
use karpenter_scheduling::{BoundGap, Plan};

/// The plan as tables: new nodes, placements on existing nodes, unschedulable pods, totals.
pub fn render_plan(plan: &Plan) -> String {
    let mut out = String::new();
    let mut nodes = Table::new(&[
        "NODE",
        "NODEPOOL",
        "INSTANCE TYPE",
        "ZONE",
        "CAPACITY",
        "$/HOUR",
        "PODS",
        "OPTIONS",
    ]);
    for (i, claim) in plan.new_node_claims.iter().enumerate() {
        let cheapest = claim.instance_type_options.first();
        nodes.row(vec![
            format!("new-{}", i + 1),
            claim.node_pool.clone(),
            cheapest.map(|o| o.name.to_string()).unwrap_or_default(),
            cheapest.map(|o| o.zone.to_string()).unwrap_or_default(),
            cheapest
                .map(|o| o.capacity_type.to_string())
                .unwrap_or_default(),
            format!("{:.4}", claim.price),
            claim.pods.len().to_string(),
            claim.instance_type_options.len().to_string(),
        ]);
    }
    if !nodes.is_empty() {
        out.push_str(&nodes.render());
    }
    if !plan.existing.is_empty() {
        let mut existing = Table::new(&["EXISTING NODE", "PODS"]);
        for p in &plan.existing {
            existing.row(vec![p.node.clone(), p.pods.len().to_string()]);
        }
        out.push('\n');
        out.push_str(&existing.render());
    }
    if !plan.unschedulable.is_empty() {
        let mut unschedulable = Table::new(&["UNSCHEDULABLE POD", "REASON"]);
        for u in &plan.unschedulable {
            unschedulable.row(vec![u.pod.to_string(), u.reason.clone()]);
        }
        out.push('\n');
        out.push_str(&unschedulable.render());
    }
    out.push_str(&format!(
        "\n{} new node(s), {:.4} $/hour; {} pod(s) placed, {} unschedulable",
        plan.new_node_claims.len(),
        plan.total_price,
        plan.placed_pods(),
        plan.unschedulable.len()
    ));
    if let (Some(bound), Some(gap)) = (plan.lower_bound, plan.bound_gap()) {
        out.push_str(&format!("; lower bound {bound:.4} $/hour"));
        match gap {
            BoundGap::Relative(gap) => out.push_str(&format!(" (gap {:.1}%)", gap * 100.0)),
            BoundGap::Loose { pods } => out.push_str(&format!(
                "; it leaves out the per-node constraints of {pods} pod(s), so no gap is \
                 given"
            )),
        }
    }
    out.push('\n');
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use karpenter_scheduling::model::PodKey;
    use karpenter_scheduling::plan::UnschedulablePod;

    #[test]
    fn an_empty_plan_has_totals_and_the_reasons_of_unplaced_pods() {
        let plan = Plan {
            unschedulable: vec![UnschedulablePod {
                pod: PodKey::new("default", "big"),
                reason: "no instance type has 512 cpu".into(),
                deferred: false,
            }],
            ..Plan::default()
        };
        let text = render_plan(&plan);
        assert!(text.contains("UNSCHEDULABLE POD"), "{text}");
        assert!(text.contains("default/big"), "{text}");
        assert!(text.contains("no instance type has 512 cpu"), "{text}");
        assert!(
            text.contains("0 new node(s), 0.0000 $/hour; 0 pod(s) placed, 1 unschedulable"),
            "{text}"
        );
        assert!(
            !text.contains("NODEPOOL"),
            "no new-node table without new nodes: {text}"
        );
    }
}
