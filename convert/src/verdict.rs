//! What a conversion's user gets: the objects only when they mean what the input meant (or
//! the user accepted losses), a one-line summary of the report, and why the conversion
//! fails, if it does.

use crate::{Conversion, Severity};

/// Why a conversion fails.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// The input had errors (invalid objects); nothing converts them.
    #[error("{0} error(s) in the input (see the report above): fix them and convert again")]
    Errors(usize),
    /// Fields v1 cannot express, and losses were not accepted: nothing was printed.
    #[error(
        "{0} field(s) cannot be expressed in v1 (see the report above); nothing was printed: rerun with --allow-lossy to print the conversion without them"
    )]
    Lossy(usize),
}

impl Conversion {
    /// Whether the objects are printed: nothing was lost and nothing was wrong, or
    /// `allow_lossy` accepts what was.
    pub fn printable(&self, allow_lossy: bool) -> bool {
        allow_lossy || self.count(Severity::Lossy) + self.count(Severity::Error) == 0
    }

    /// The report's last line: objects written and issues by severity.
    pub fn summary(&self, allow_lossy: bool) -> String {
        let written = if self.printable(allow_lossy) {
            self.objects.len()
        } else {
            0
        };
        format!(
            "{written} object(s) written; {} info, {} warning(s), {} lossy, {} error(s)",
            self.count(Severity::Info),
            self.count(Severity::Warning),
            self.count(Severity::Lossy),
            self.count(Severity::Error),
        )
    }

    /// Whether the conversion succeeds: errors in the input always fail it, and losses
    /// unless `allow_lossy`.
    ///
    /// # Errors
    /// The [`Refusal`], errors first.
    pub fn verdict(&self, allow_lossy: bool) -> Result<(), Refusal> {
        let (lossy, errors) = (self.count(Severity::Lossy), self.count(Severity::Error));
        if errors > 0 {
            return Err(Refusal::Errors(errors));
        }
        if lossy > 0 && !allow_lossy {
            return Err(Refusal::Lossy(lossy));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Issue;
    use serde_json::json;

    fn conversion(severities: &[Severity]) -> Conversion {
        let issue = |severity| Issue {
            severity,
            object: "a.yaml (document 1, NodePool default)".into(),
            field: "spec".into(),
            message: "test".into(),
        };
        Conversion {
            objects: vec![json!({"kind": "NodePool"}), json!({"kind": "EC2NodeClass"})],
            issues: severities.iter().copied().map(issue).collect(),
        }
    }

    #[test]
    fn a_complete_conversion_is_printed_and_succeeds() {
        let c = conversion(&[Severity::Info, Severity::Warning, Severity::Warning]);
        assert!(c.printable(false));
        assert_eq!(
            c.summary(false),
            "2 object(s) written; 1 info, 2 warning(s), 0 lossy, 0 error(s)"
        );
        assert_eq!(c.verdict(false), Ok(()));
    }

    #[test]
    fn losses_print_nothing_unless_allowed() {
        let c = conversion(&[Severity::Lossy, Severity::Lossy]);
        assert!(!c.printable(false));
        assert!(c.summary(false).starts_with("0 object(s) written;"));
        assert_eq!(c.verdict(false), Err(Refusal::Lossy(2)));
        assert!(c.printable(true));
        assert!(c.summary(true).starts_with("2 object(s) written;"));
        assert_eq!(c.verdict(true), Ok(()));
        let text = Refusal::Lossy(2).to_string();
        assert!(
            text.contains("nothing was printed: rerun with --allow-lossy"),
            "{text}"
        );
    }

    #[test]
    fn input_errors_fail_even_when_losses_are_allowed() {
        let c = conversion(&[Severity::Lossy, Severity::Error]);
        assert!(!c.printable(false));
        assert_eq!(c.verdict(true), Err(Refusal::Errors(1)));
        assert_eq!(c.verdict(false), Err(Refusal::Errors(1)));
    }
}
