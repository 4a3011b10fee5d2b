//! The latest change of each key (a node, a NodeClaim), by the index generation it happened
//! at: a consumer that remembers the generation it last looked at visits only what changed
//! since, and the log stays as large as the number of keys, however often they change.

use std::collections::BTreeMap;

/// Keys by the generation of their latest change, and the reverse map.
#[derive(Debug, Clone, Default)]
pub(crate) struct ChangeLog {
    by_generation: BTreeMap<u64, String>,
    latest: BTreeMap<String, u64>,
}

impl ChangeLog {
    /// Records that `key` changed at `generation`, replacing its earlier entry.
    pub(crate) fn note(&mut self, key: String, generation: u64) {
        if let Some(previous) = self.latest.insert(key.clone(), generation) {
            self.by_generation.remove(&previous);
        }
        self.by_generation.insert(generation, key);
    }

    /// The keys that changed after generation `after`, each once with the generation of its
    /// latest change, oldest first.
    pub(crate) fn after(&self, after: u64) -> impl Iterator<Item = (u64, &str)> + '_ {
        self.by_generation
            .range(after.saturating_add(1)..)
            .map(|(g, key)| (*g, key.as_str()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_key_is_listed_once_at_its_latest_change() {
        let mut log = ChangeLog::default();
        log.note("a".into(), 1);
        log.note("b".into(), 2);
        log.note("a".into(), 3);
        assert_eq!(log.after(0).collect::<Vec<_>>(), [(2, "b"), (3, "a")]);
        assert_eq!(log.after(2).collect::<Vec<_>>(), [(3, "a")]);
        assert!(log.after(3).next().is_none());
    }
}
