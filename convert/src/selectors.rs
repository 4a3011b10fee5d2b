//! v1alpha1 selector maps (`subnetSelector`, `securityGroupSelector`, `amiSelector`) as v1
//! selector terms, following the v1beta1 migration guide ("SubnetSelector,
//! SecurityGroupSelector, and AMISelector"): `aws::ids` (or `aws-ids`) become one `id` term
//! per ID, `aws::name` × `aws::owners` become `name`/`owner` terms, other keys are tags.
//!
//! A v1alpha1 selector ANDs all its keys, but a v1 `id` term takes no other filter; when a
//! selector has both, the IDs are kept (they are what the user named) and the other filters
//! are reported as lost.

use crate::report::{Reporter, join};
use serde_json::{Map, Value, json};

/// The ID keys v1alpha1 accepted.
const ID_KEYS: [&str; 2] = ["aws::ids", "aws-ids"];
const NAME_KEY: &str = "aws::name";
const OWNERS_KEY: &str = "aws::owners";

/// A comma-separated v1alpha1 value as its items, trimmed, empty ones left out.
fn split(value: &str) -> Vec<String> {
    value
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect()
}

/// The parts of a v1alpha1 selector.
#[derive(Default)]
struct Parts {
    ids: Vec<String>,
    names: Vec<String>,
    owners: Vec<String>,
    tags: Map<String, Value>,
}

fn parts(map: Map<String, Value>, ami: bool) -> Parts {
    let mut p = Parts::default();
    for (key, value) in map {
        let text = value.as_str().unwrap_or_default();
        if ID_KEYS.contains(&key.as_str()) {
            p.ids.extend(split(text));
        } else if ami && key == NAME_KEY {
            p.names = split(text);
        } else if ami && key == OWNERS_KEY {
            p.owners = split(text);
        } else {
            p.tags.insert(key, value);
        }
    }
    p
}

/// One `id` term per ID; the selector's other filters (named in `others`) are reported lost.
fn id_terms(
    ids: Vec<String>,
    others: &[&str],
    path: &str,
    report: &mut Reporter<'_>,
) -> Vec<Value> {
    if !others.is_empty() {
        report.lossy(
            path,
            format!(
                "v1 selects by id alone, so the {} this selector also required \
                 (v1alpha1 ANDed every key) are dropped",
                others.join(" and ")
            ),
        );
    }
    ids.into_iter().map(|id| json!({ "id": id })).collect()
}

/// `subnetSelector` or `securityGroupSelector` (a map of strings, at `path`) as terms.
pub(crate) fn network_terms(
    map: Map<String, Value>,
    path: &str,
    report: &mut Reporter<'_>,
) -> Vec<Value> {
    let p = parts(map, false);
    if !p.ids.is_empty() {
        let others: &[&str] = if p.tags.is_empty() { &[] } else { &["tags"] };
        return id_terms(p.ids, others, path, report);
    }
    if p.tags.is_empty() {
        return Vec::new();
    }
    vec![json!({ "tags": p.tags })]
}

/// `amiSelector` (a map of strings, at `path`) as `amiSelectorTerms`.
pub(crate) fn ami_terms(
    map: Map<String, Value>,
    path: &str,
    report: &mut Reporter<'_>,
) -> Vec<Value> {
    let p = parts(map, true);
    if !p.ids.is_empty() {
        let mut others = Vec::new();
        if !p.names.is_empty() {
            others.push(NAME_KEY);
        }
        if !p.owners.is_empty() {
            others.push(OWNERS_KEY);
        }
        if !p.tags.is_empty() {
            others.push("tags");
        }
        return id_terms(p.ids, &others, path, report);
    }
    let mut names: Vec<Option<String>> = p.names.into_iter().map(Some).collect();
    if names.is_empty() {
        if !p.owners.is_empty() && p.tags.is_empty() {
            // v1 needs a name or tags beside an owner; `*` selects all of the owner's AMIs,
            // which is what `aws::owners` alone did.
            report.info(
                &join(path, OWNERS_KEY),
                "owners without a name or tags: each becomes a term with name \"*\"",
            );
            names.push(Some("*".to_owned()));
        } else {
            names.push(None);
        }
    }
    let owners: Vec<Option<String>> = if p.owners.is_empty() {
        vec![None]
    } else {
        p.owners.into_iter().map(Some).collect()
    };
    let mut terms = Vec::new();
    // Owners outermost, as upstream's converter and the guide's example order them.
    for owner in &owners {
        for name in &names {
            let mut term = Map::new();
            if let Some(name) = name {
                term.insert("name".into(), Value::from(name.as_str()));
            }
            if let Some(owner) = owner {
                term.insert("owner".into(), Value::from(owner.as_str()));
            }
            if !p.tags.is_empty() {
                term.insert("tags".into(), Value::Object(p.tags.clone()));
            }
            if !term.is_empty() {
                terms.push(Value::Object(term));
            }
        }
    }
    terms
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::{Issue, Severity};

    fn run<T>(f: impl FnOnce(&mut Reporter<'_>) -> T) -> (T, Vec<Issue>) {
        let mut issues = Vec::new();
        let out = f(&mut Reporter::new("obj", &mut issues));
        (out, issues)
    }

    fn map(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap()
    }

    #[test]
    fn tags_become_one_tags_term() {
        let (terms, issues) = run(|r| {
            network_terms(
                map(json!({"karpenter.sh/discovery": "demo"})),
                "spec.subnetSelector",
                r,
            )
        });
        assert_eq!(terms, [json!({"tags": {"karpenter.sh/discovery": "demo"}})]);
        assert!(issues.is_empty());
    }

    #[test]
    fn comma_separated_ids_become_one_term_each() {
        // The guide's examples: `aws::ids: subnet-123,subnet-456` and `sg-123, sg-456`.
        let (terms, _) = run(|r| {
            network_terms(
                map(json!({"aws::ids": "subnet-123,subnet-456"})),
                "spec.subnetSelector",
                r,
            )
        });
        assert_eq!(
            terms,
            [json!({"id": "subnet-123"}), json!({"id": "subnet-456"})]
        );
        let (terms, _) = run(|r| {
            network_terms(
                map(json!({"aws-ids": "sg-123, sg-456"})),
                "spec.securityGroupSelector",
                r,
            )
        });
        assert_eq!(terms, [json!({"id": "sg-123"}), json!({"id": "sg-456"})]);
    }

    #[test]
    fn ids_with_tags_keep_the_ids_and_report_the_tags_lost() {
        let (terms, issues) = run(|r| {
            network_terms(
                map(json!({"aws-ids": "subnet-1", "Name": "private"})),
                "spec.subnetSelector",
                r,
            )
        });
        assert_eq!(terms, [json!({"id": "subnet-1"})]);
        assert_eq!(issues.len(), 1);
        assert_eq!(issues[0].severity, Severity::Lossy);
        assert_eq!(issues[0].field, "spec.subnetSelector");
    }

    #[test]
    fn ami_names_and_owners_multiply_owner_first() {
        // The guide's example: aws::name my-name1,my-name2 × aws::owners 123456789,amazon.
        let (terms, issues) = run(|r| {
            ami_terms(
                map(json!({"aws::name": "my-name1,my-name2", "aws::owners": "123456789,amazon"})),
                "spec.amiSelector",
                r,
            )
        });
        assert_eq!(
            terms,
            [
                json!({"name": "my-name1", "owner": "123456789"}),
                json!({"name": "my-name2", "owner": "123456789"}),
                json!({"name": "my-name1", "owner": "amazon"}),
                json!({"name": "my-name2", "owner": "amazon"}),
            ]
        );
        assert!(issues.is_empty());
    }

    #[test]
    fn ami_ids_tags_and_owner_only_selectors() {
        let (terms, _) = run(|r| {
            ami_terms(
                map(json!({"aws::ids": "ami-123,ami-456"})),
                "spec.amiSelector",
                r,
            )
        });
        assert_eq!(terms, [json!({"id": "ami-123"}), json!({"id": "ami-456"})]);
        let (terms, _) = run(|r| {
            ami_terms(
                map(json!({"karpenter.sh/discovery": "demo"})),
                "spec.amiSelector",
                r,
            )
        });
        assert_eq!(terms, [json!({"tags": {"karpenter.sh/discovery": "demo"}})]);
        let (terms, issues) =
            run(|r| ami_terms(map(json!({"aws::owners": "self"})), "spec.amiSelector", r));
        assert_eq!(terms, [json!({"name": "*", "owner": "self"})]);
        assert_eq!(issues[0].severity, Severity::Info);
        let (terms, issues) = run(|r| {
            ami_terms(
                map(json!({"aws::ids": "ami-1", "aws::owners": "self", "env": "x"})),
                "spec.amiSelector",
                r,
            )
        });
        assert_eq!(terms, [json!({"id": "ami-1"})]);
        assert!(issues[0].message.contains("aws::owners and tags"));
    }
}
