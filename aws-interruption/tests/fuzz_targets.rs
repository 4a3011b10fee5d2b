//! The stable equivalent of the `sqs_message` fuzz target: every committed corpus file and
//! crash replayed through its entry function, and proptests over arbitrary bodies and over
//! EventBridge envelopes built from the known sources, detail types and fields.

use karpenter_aws_interruption::{InterruptionKind, fuzzing, parse_message};
use karpenter_testing::fuzz::replay_corpus;
use proptest::prelude::*;
use serde_json::{Value, json};
use std::time::SystemTime;

#[test]
fn sqs_message_corpus() {
    replay_corpus("sqs_message", fuzzing::sqs_message);
}

/// A JSON value of any shape, for fields that may hold anything.
fn anything() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        "\\PC{0,12}".prop_map(Value::from),
        "i-[0-9a-f]{0,17}".prop_map(Value::from),
    ];
    leaf.prop_recursive(3, 16, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::from),
            prop::collection::btree_map("[a-z-]{1,8}|instance-id|state|entityValue", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

fn envelope() -> impl Strategy<Value = Value> {
    let source = prop::sample::select(vec!["aws.ec2", "aws.health", "aws.s3", ""]);
    let detail_type = prop::sample::select(vec![
        "EC2 Spot Instance Interruption Warning",
        "EC2 Instance Rebalance Recommendation",
        "EC2 Instance State-change Notification",
        "AWS Health Event",
        "Object Created",
    ]);
    let state = prop::sample::select(vec![
        "pending",
        "running",
        "stopping",
        "stopped",
        "shutting-down",
        "terminated",
    ]);
    let time = prop_oneof![
        Just(Value::from("2026-01-02T20:44:53Z")),
        Just(Value::from("-009999-01-01T00:00:00Z")),
        Just(Value::from("9999-12-31T23:59:59.999999999Z")),
        "[0-9T:.Z+-]{0,30}".prop_map(Value::from),
        anything(),
    ];
    let entities = prop::collection::vec(
        prop_oneof![
            "i-[0-9a-f]{1,17}".prop_map(|id| json!({"entityValue": id})),
            anything(),
        ],
        0..4,
    );
    (
        source,
        detail_type,
        "i-[0-9a-f]{0,17}",
        state,
        time,
        entities,
        any::<bool>(),
    )
        .prop_map(
            |(source, detail_type, id, state, time, entities, scheduled)| {
                json!({
                    "source": source,
                    "detail-type": detail_type,
                    "time": time,
                    "detail": {
                        "instance-id": id,
                        "state": state,
                        "service": "EC2",
                        "eventTypeCategory": if scheduled { "scheduledChange" } else { "issue" },
                        "affectedEntities": entities,
                    },
                })
            },
        )
}

proptest! {
    #[test]
    fn any_body(data in prop::collection::vec(any::<u8>(), 0..256)) {
        fuzzing::sqs_message(&data);
    }

    #[test]
    fn any_json(value in anything()) {
        fuzzing::sqs_message(value.to_string().as_bytes());
    }

    /// Well-formed envelopes parse to the kind their source and detail type name.
    #[test]
    fn envelopes(value in envelope()) {
        let body = value.to_string();
        fuzzing::sqs_message(body.as_bytes());
        let parsed = parse_message(&body, SystemTime::UNIX_EPOCH);
        let kind = match (value["source"].as_str(), value["detail-type"].as_str()) {
            (Some("aws.ec2"), Some("EC2 Spot Instance Interruption Warning")) => {
                Some(InterruptionKind::SpotInterruption)
            }
            (Some("aws.ec2"), Some("EC2 Instance Rebalance Recommendation")) => {
                Some(InterruptionKind::RebalanceRecommendation)
            }
            _ => None,
        };
        let id = value["detail"]["instance-id"].as_str().unwrap_or_default();
        if let (Some(kind), false) = (kind, id.is_empty()) {
            let events = parsed.expect("a well-formed EC2 event parses");
            prop_assert_eq!(events.len(), 1);
            prop_assert_eq!(events[0].kind, kind);
            prop_assert_eq!(events[0].instance_id.as_str(), id);
        }
    }
}
