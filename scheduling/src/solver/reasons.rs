//! Unschedulable reasons in words a person can act on.

use crate::taints::Taint;

/// `key=value:Effect` (or `key:Effect` without a value), as `kubectl` prints taints.
pub(crate) fn taint(t: &Taint) -> String {
    if t.value.is_empty() {
        format!("{}:{:?}", t.key, t.effect)
    } else {
        format!("{}={}:{:?}", t.key, t.value, t.effect)
    }
}

/// One line per NodePool: `NodePool "a": why; NodePool "b": why`.
pub(crate) fn per_pool(rejections: &[(String, String)]) -> String {
    if rejections.is_empty() {
        return "no NodePool can launch nodes (none exists or every one filters out all its instance types)".to_string();
    }
    let parts: Vec<String> = rejections
        .iter()
        .map(|(pool, why)| format!("NodePool {pool:?}: {why}"))
        .collect();
    format!("no NodePool can take the pod: {}", parts.join("; "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::taints::TaintEffect;

    #[test]
    fn formats_taints_and_pools() {
        assert_eq!(
            taint(&Taint::new("gpu", "true", TaintEffect::NoSchedule)),
            "gpu=true:NoSchedule"
        );
        assert_eq!(
            taint(&Taint::new("dedicated", "", TaintEffect::NoExecute)),
            "dedicated:NoExecute"
        );
        assert_eq!(
            per_pool(&[("a".into(), "x".into()), ("b".into(), "y".into())]),
            "no NodePool can take the pod: NodePool \"a\": x; NodePool \"b\": y"
        );
    }
}
