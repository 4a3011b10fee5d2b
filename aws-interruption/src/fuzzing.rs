//! The entry point of the `sqs_message` fuzz target (`fuzz/`), also replayed over the
//! committed corpus by this crate's tests. Not part of the API.

use crate::{InterruptionKind, parse_message};
use std::time::{Duration, SystemTime};

/// Parses `data` (read as UTF-8, invalid sequences replaced, as an SQS body is text) as an
/// interruption message and checks what every accepted message guarantees: each event names
/// an instance, Health events name only `i-` ids, and parsing is deterministic. Panics only
/// when the parser breaks one of these guarantees (or panics itself).
pub fn sqs_message(data: &[u8]) {
    let body = String::from_utf8_lossy(data);
    // A receipt time no message is likely to carry, so a fallback is recognisable.
    let received = SystemTime::UNIX_EPOCH + Duration::from_secs(1_234_567);
    let parsed = parse_message(&body, received);
    assert_eq!(parsed, parse_message(&body, received), "not deterministic");
    let Ok(events) = parsed else { return };
    for event in &events {
        assert!(!event.instance_id.is_empty(), "event without an instance");
        if event.kind == InterruptionKind::ScheduledChange {
            assert!(event.instance_id.starts_with("i-"), "{event:?}");
        } else {
            assert_eq!(events.len(), 1, "an EC2 event names one instance");
        }
        let _ = (event.kind.as_str(), event.kind.triggers_replacement());
    }
}
