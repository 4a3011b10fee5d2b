//! What a conversion tells its user: one [`Issue`] per rename, move, default, placeholder or
//! loss, naming the object, the field (its path in the input) and why.

use std::fmt;

/// How much an issue matters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Severity {
    /// A rename, move or default the migration guides prescribe; the output means what the
    /// input meant.
    Info,
    /// The output means what the input meant, but the user has something to check or fill
    /// in (a placeholder, a class split for kubelet settings, a changed default kept).
    Warning,
    /// v1 cannot express the field: it is dropped or changed, and the output does not
    /// behave as the input did.
    Lossy,
    /// The input is not a valid object of its API version (or the converted object is not a
    /// valid v1 object); the user must fix the input.
    Error,
}

impl Severity {
    /// The word the report prints.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Info => "info",
            Self::Warning => "warning",
            Self::Lossy => "lossy",
            Self::Error => "error",
        }
    }
}

impl fmt::Display for Severity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One thing the user should know about a conversion.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Issue {
    /// How much it matters.
    pub severity: Severity,
    /// The input object: file, document, kind and name (`a.yaml (document 2, Provisioner
    /// default)`).
    pub object: String,
    /// Path of the field in the input object (`spec.ttlSecondsAfterEmpty`), or `(object)`
    /// when the issue is about the whole object.
    pub field: String,
    /// What happened and why.
    pub message: String,
}

impl fmt::Display for Issue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:<7} {}: {}: {}",
            self.severity.as_str(),
            self.object,
            self.field,
            self.message
        )
    }
}

/// Collects the issues of one input object.
pub(crate) struct Reporter<'a> {
    object: String,
    issues: &'a mut Vec<Issue>,
}

impl<'a> Reporter<'a> {
    pub(crate) fn new(object: impl Into<String>, issues: &'a mut Vec<Issue>) -> Self {
        Self {
            object: object.into(),
            issues,
        }
    }

    pub(crate) fn push(&mut self, severity: Severity, field: &str, message: impl Into<String>) {
        self.issues.push(Issue {
            severity,
            object: self.object.clone(),
            field: field.to_owned(),
            message: message.into(),
        });
    }

    pub(crate) fn info(&mut self, field: &str, message: impl Into<String>) {
        self.push(Severity::Info, field, message);
    }

    pub(crate) fn warning(&mut self, field: &str, message: impl Into<String>) {
        self.push(Severity::Warning, field, message);
    }

    pub(crate) fn lossy(&mut self, field: &str, message: impl Into<String>) {
        self.push(Severity::Lossy, field, message);
    }

    pub(crate) fn error(&mut self, field: &str, message: impl Into<String>) {
        self.push(Severity::Error, field, message);
    }
}

/// The field path `parent.key` (or `key` at the root).
pub(crate) fn join(parent: &str, key: &str) -> String {
    if parent.is_empty() {
        key.to_owned()
    } else {
        format!("{parent}.{key}")
    }
}

/// The field path `parent[index]`.
pub(crate) fn index(parent: &str, i: usize) -> String {
    format!("{parent}[{i}]")
}

/// A JSON value on one line, for messages (`{"maxPods":20}`).
pub(crate) fn compact(value: &serde_json::Value) -> String {
    value.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn issues_print_severity_object_field_and_message() {
        let mut issues = Vec::new();
        let mut r = Reporter::new("a.yaml (document 1, Provisioner default)", &mut issues);
        r.lossy("spec.provider.launchTemplate", "dropped");
        assert_eq!(
            issues[0].to_string(),
            "lossy   a.yaml (document 1, Provisioner default): spec.provider.launchTemplate: dropped"
        );
        assert!(Severity::Error > Severity::Lossy && Severity::Lossy > Severity::Warning);
        assert_eq!(join("", "spec"), "spec");
        assert_eq!(index(&join("spec", "taints"), 2), "spec.taints[2]");
    }
}
