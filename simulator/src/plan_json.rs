//! `karpenter plan -o json`: the plan as `serde_json::to_writer_pretty` writes it, with every
//! shared option list rendered once and, unless asked for all, each claim's list cut to the
//! options its NodeClaim would carry.
//!
//! A plan on a large catalogue lists about a thousand instance-type options per claim, and
//! claims with the same pool and requirements share one list (hundreds of claims, a few
//! dozen lists). Serialising each claim's copy was most of the time `-o json` took; here each
//! list is rendered once and its text is copied for every claim that holds it. Written in
//! full, those copies made the file 76 MB for 1,000 pods and over a gigabyte for 20,000,
//! although the controller puts only the cheapest
//! [`MAX_INSTANCE_TYPES`](karpenter_cluster::provisioner::MAX_INSTANCE_TYPES) of them on a
//! NodeClaim.

use karpenter_scheduling::Plan;
use karpenter_scheduling::plan::{InstanceTypeOption, NewNodeClaim};
use std::collections::HashMap;
use std::io::Write;
use std::sync::Arc;

/// The pretty printer's indentation of one level.
const INDENT: &str = "  ";

/// The key a claim whose option list was cut gets after `instanceTypeOptions`: how many
/// options fit it in all.
pub const OPTIONS_TOTAL_KEY: &str = "instanceTypeOptionsTotal";

/// Writes `plan` as pretty JSON (without a trailing newline). Each claim lists at most
/// `max_options` of its instance-type options, the cheapest (they are in price order); a
/// claim that has more also gets [`OPTIONS_TOTAL_KEY`] with their number. With no claim cut
/// (`None` lists all) the text is byte for byte what `serde_json::to_writer_pretty` writes,
/// and a cut plan still reads back as a [`Plan`] (with the shorter lists).
pub fn write_plan_json(
    plan: &Plan,
    max_options: Option<usize>,
    out: &mut dyn Write,
) -> std::io::Result<()> {
    // Everything but the claims, through serde; the claims are spliced in where their
    // empty array stands. A top-level key is the only text that follows a line break and
    // exactly one level of indentation (strings never hold a raw line break).
    let rest = Plan {
        existing: plan.existing.clone(),
        new_node_claims: Vec::new(),
        unschedulable: plan.unschedulable.clone(),
        total_price: plan.total_price,
        lower_bound: plan.lower_bound,
        greedy_price: plan.greedy_price,
        optimizer: plan.optimizer.clone(),
        pending_by_effective_zone: Default::default(),
    };
    let text = serde_json::to_string_pretty(&rest)?;
    let (head, tail) = split_at_empty(&text, "newNodeClaims", 1)?;
    out.write_all(head.as_bytes())?;
    if !plan.new_node_claims.is_empty() {
        let mut lists: HashMap<*const Vec<InstanceTypeOption>, String> = HashMap::new();
        out.write_all(b"[")?;
        for (i, claim) in plan.new_node_claims.iter().enumerate() {
            out.write_all(if i == 0 { b"\n" } else { b",\n" })?;
            out.write_all(INDENT.repeat(2).as_bytes())?;
            write_claim(claim, max_options, &mut lists, out)?;
        }
        out.write_all(b"\n")?;
        out.write_all(INDENT.as_bytes())?;
        out.write_all(b"]")?;
    } else {
        out.write_all(b"[]")?;
    }
    out.write_all(tail.as_bytes())
}

/// One claim as an element of the plan's `newNodeClaims` (two levels deep), its option list
/// (cut to `max_options`) rendered at most once per shared list.
fn write_claim(
    claim: &NewNodeClaim,
    max_options: Option<usize>,
    lists: &mut HashMap<*const Vec<InstanceTypeOption>, String>,
    out: &mut dyn Write,
) -> std::io::Result<()> {
    let bare = NewNodeClaim {
        instance_type_options: Arc::new(Vec::new()),
        ..claim.clone()
    };
    let text = indented(&serde_json::to_string_pretty(&bare)?, 2);
    // The claim's own keys sit one level in, and two more in the plan.
    let (head, tail) = split_at_empty(&text, "instanceTypeOptions", 3)?;
    out.write_all(head.as_bytes())?;
    let options = &claim.instance_type_options;
    let listed = max_options.map_or(options.len(), |max| max.min(options.len()));
    let list = match lists.entry(Arc::as_ptr(options)) {
        std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
        std::collections::hash_map::Entry::Vacant(e) => e.insert(indented(
            &serde_json::to_string_pretty(&options[..listed])?,
            3,
        )),
    };
    out.write_all(list.as_bytes())?;
    if listed < options.len() {
        write!(
            out,
            ",\n{}\"{OPTIONS_TOTAL_KEY}\": {}",
            INDENT.repeat(3),
            options.len()
        )?;
    }
    out.write_all(tail.as_bytes())
}

/// `text` with `levels` more indentation on every line but the first, as the pretty printer
/// writes a value that many levels deeper.
fn indented(text: &str, levels: usize) -> String {
    text.replace('\n', &format!("\n{}", INDENT.repeat(levels)))
}

/// `text` around the `[]` of the key `key` at indentation `level`: the text up to and
/// including `"key": `, and the text after the `[]`.
fn split_at_empty<'t>(
    text: &'t str,
    key: &str,
    level: usize,
) -> std::io::Result<(&'t str, &'t str)> {
    let marker = format!("\n{}\"{key}\": []", INDENT.repeat(level));
    let at = text
        .find(&marker)
        .ok_or_else(|| std::io::Error::other(format!("plan JSON without an empty {key} array")))?;
    let value = at + marker.len() - 2;
    Ok((&text[..value], &text[value + 2..]))
}

#[cfg(test)]
mod tests {
    use super::*;
    use karpenter_scheduling::model::PodKey;
    use karpenter_scheduling::plan::{NodePlacement, UnschedulablePod};
    use karpenter_scheduling::{OptimizerStats, Requirements, Resources};

    fn option(name: &str, price: f64) -> InstanceTypeOption {
        InstanceTypeOption {
            name: name.into(),
            price,
            zone: "us-east-1a".into(),
            capacity_type: "spot".into(),
        }
    }

    fn claim(options: &Arc<Vec<InstanceTypeOption>>, pod: &str) -> NewNodeClaim {
        let mut requirements = Requirements::new();
        requirements.add(
            karpenter_scheduling::Requirement::new(
                "topology.kubernetes.io/zone",
                karpenter_scheduling::Operator::In,
                ["us-east-1a"],
            )
            .unwrap(),
        );
        NewNodeClaim {
            node_pool: "default".into(),
            requirements,
            instance_type_options: Arc::clone(options),
            pods: vec![PodKey::new("default", pod)],
            requests: Resources {
                cpu_millis: 1500,
                memory: 1 << 30,
                ..Resources::default()
            },
            daemon_overhead: Resources::default(),
            price: options.first().map_or(0.0, |o| o.price),
        }
    }

    fn written(plan: &Plan) -> String {
        written_cut(plan, None)
    }

    fn written_cut(plan: &Plan, max_options: Option<usize>) -> String {
        let mut out = Vec::new();
        write_plan_json(plan, max_options, &mut out).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn long_lists_are_cut_to_the_cheapest_and_counted() {
        let long = Arc::new(vec![
            option("m5.large", 0.035),
            option("c5.large", 0.041),
            option("r5.large", 0.05),
        ]);
        let short = Arc::new(vec![option("t3.large", 0.03)]);
        let plan = Plan {
            new_node_claims: vec![claim(&long, "a"), claim(&short, "b"), claim(&long, "c")],
            total_price: 0.1,
            ..Plan::default()
        };
        let text = written_cut(&plan, Some(2));
        let value: serde_json::Value = serde_json::from_str(&text).unwrap();
        let claims = value["newNodeClaims"].as_array().unwrap();
        for i in [0, 2] {
            let names: Vec<&str> = claims[i]["instanceTypeOptions"]
                .as_array()
                .unwrap()
                .iter()
                .map(|o| o["name"].as_str().unwrap())
                .collect();
            assert_eq!(names, ["m5.large", "c5.large"]);
            assert_eq!(claims[i][OPTIONS_TOTAL_KEY], 3);
        }
        assert!(claims[1].get(OPTIONS_TOTAL_KEY).is_none(), "not cut");
        // It reads back as the plan with the shorter lists.
        let back: Plan = serde_json::from_str(&text).unwrap();
        let mut cut = plan.clone();
        for claim in &mut cut.new_node_claims {
            Arc::make_mut(&mut claim.instance_type_options).truncate(2);
        }
        assert_eq!(back, cut);
        // Without a cut, or with a limit no list reaches, it is serde's text.
        let full = serde_json::to_string_pretty(&plan).unwrap();
        assert_eq!(written_cut(&plan, Some(3)), full);
        assert_eq!(written(&plan), full);
    }

    #[test]
    fn writes_what_serde_writes() {
        let shared = Arc::new(vec![option("m5.large", 0.035), option("c5.large", 0.041)]);
        let own = Arc::new(vec![option("r5.large", 0.05)]);
        let empty = Arc::new(Vec::new());
        let plan = Plan {
            existing: vec![NodePlacement {
                node: "node-1".into(),
                pods: vec![PodKey::new("default", "on-node")],
            }],
            new_node_claims: vec![
                claim(&shared, "a"),
                claim(&own, "b \"quoted\"\nline"),
                claim(&shared, "c"),
                claim(&empty, "d"),
            ],
            unschedulable: vec![UnschedulablePod {
                pod: PodKey::new("default", "big"),
                reason: "no instance type has 512 cpu".into(),
                deferred: true,
            }],
            total_price: 0.12,
            lower_bound: Some(0.1),
            greedy_price: Some(0.2),
            optimizer: Some(OptimizerStats {
                groups: 1,
                work: 10,
                ..OptimizerStats::default()
            }),
            pending_by_effective_zone: [("zone-a".to_owned(), 1)].into(),
        };
        assert_eq!(written(&plan), serde_json::to_string_pretty(&plan).unwrap());
        let none = Plan::default();
        assert_eq!(written(&none), serde_json::to_string_pretty(&none).unwrap());
        let only_claims = Plan {
            new_node_claims: vec![claim(&own, "e")],
            ..Plan::default()
        };
        assert_eq!(
            written(&only_claims),
            serde_json::to_string_pretty(&only_claims).unwrap()
        );
    }
}
