//! The stable equivalents of the `quantity`, `requirements` and `label_selector` fuzz
//! targets: every committed corpus file and crash replayed through the targets' entry
//! functions, and proptests that drive the same checks from generators near the grammar
//! (with the `k8s` feature, the entry functions also decode the inputs as manifest JSON).

use karpenter_scheduling::Quantity;
use karpenter_scheduling::fuzzing;
use karpenter_scheduling::requirements::NodeSelectorRequirement;
use karpenter_scheduling::selector::{LabelSelector, LabelSelectorRequirement, SelectorOperator};
use karpenter_testing::fuzz::replay_corpus;
use proptest::prelude::*;
use std::collections::BTreeMap;

#[test]
fn quantity_corpus() {
    replay_corpus("quantity", fuzzing::quantity);
}

#[test]
fn requirements_corpus() {
    replay_corpus("requirements", fuzzing::requirements);
}

#[test]
fn label_selector_corpus() {
    replay_corpus("label_selector", fuzzing::label_selector);
}

/// Text shaped like a quantity: sign, digits, fraction, and a suffix or an exponent, huge
/// ones included.
fn quantity_text() -> impl Strategy<Value = String> {
    let suffix = prop_oneof![
        Just(String::new()),
        prop::sample::select(vec![
            "n", "u", "m", "k", "M", "G", "T", "P", "E", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei", "e",
            "i", "KI", "mi",
        ])
        .prop_map(str::to_owned),
        ("[eE]", "[+-]?", "[0-9]{1,21}").prop_map(|(e, s, d)| format!("{e}{s}{d}")),
    ];
    (
        "[+-]?",
        "[0-9]{0,40}",
        prop::option::of("[0-9]{0,20}"),
        suffix,
        "[ ]{0,2}",
    )
        .prop_map(|(sign, int, frac, suffix, pad)| {
            let frac = frac.map(|f| format!(".{f}")).unwrap_or_default();
            format!("{pad}{sign}{int}{frac}{suffix}{pad}")
        })
}

fn requirement() -> impl Strategy<Value = NodeSelectorRequirement> {
    let key = prop::sample::select(vec![
        "topology.kubernetes.io/zone",
        "failure-domain.beta.kubernetes.io/zone",
        "karpenter.k8s.aws/instance-cpu",
        "app",
    ]);
    let operator = prop::sample::select(fuzzing::OPERATORS);
    let value = prop_oneof![
        "[a-c]",
        (-3i64..12).prop_map(|n| n.to_string()),
        any::<i64>().prop_map(|n| n.to_string()),
    ];
    (
        key,
        operator,
        prop::collection::vec(value, 0..4),
        prop::option::of(0u32..4),
    )
        .prop_map(
            |(key, operator, values, min_values)| NodeSelectorRequirement {
                key: key.to_owned(),
                operator,
                values,
                min_values,
            },
        )
}

fn labels() -> impl Strategy<Value = BTreeMap<String, String>> {
    prop::collection::btree_map(
        prop::sample::select(vec![
            "topology.kubernetes.io/zone",
            "karpenter.k8s.aws/instance-cpu",
            "app",
        ])
        .prop_map(str::to_owned),
        prop_oneof!["[a-c]", (-3i64..12).prop_map(|n| n.to_string())],
        0..4,
    )
}

fn selector() -> impl Strategy<Value = LabelSelector> {
    let operator = prop::sample::select(vec![
        SelectorOperator::In,
        SelectorOperator::NotIn,
        SelectorOperator::Exists,
        SelectorOperator::DoesNotExist,
    ]);
    let expression = ("app|tier|", operator, prop::collection::vec("[a-c]", 0..3)).prop_map(
        |(key, operator, values)| LabelSelectorRequirement {
            key,
            operator,
            values,
        },
    );
    (
        prop::collection::btree_map("app|tier", "[a-c]", 0..2),
        prop::collection::vec(expression, 0..4),
    )
        .prop_map(|(match_labels, match_expressions)| LabelSelector {
            match_labels,
            match_expressions,
        })
}

proptest! {
    #[test]
    fn quantities_near_the_grammar(text in quantity_text()) {
        fuzzing::check_quantity_text(&text);
    }

    #[test]
    fn quantities_from_any_bytes(data in prop::collection::vec(any::<u8>(), 0..48)) {
        fuzzing::quantity(&data);
    }

    #[test]
    fn quantities_from_any_text(text in "\\PC{0,24}") {
        fuzzing::check_quantity_text(&text);
    }

    /// Every value the parser can produce prints and parses back to itself, in every format
    /// (BinarySI up to its cap of 2⁶³-1 units, which `scale <= 9` keeps).
    #[test]
    fn quantity_values_round_trip(nanos in any::<i64>(), scale in 0u32..20) {
        use karpenter_scheduling::quantity::QuantityFormat::{BinarySI, DecimalExponent, DecimalSI};
        let nanos = i128::from(nanos) * 10i128.pow(scale);
        let formats: &[_] = if scale <= 9 {
            &[DecimalSI, BinarySI, DecimalExponent]
        } else {
            &[DecimalSI, DecimalExponent]
        };
        for &format in formats {
            let q = Quantity::from_nanos(nanos, format);
            let text = q.to_string();
            let back = Quantity::parse(&text);
            prop_assert_eq!(back.as_ref().map(Quantity::nanos).ok(), Some(nanos), "{}", text);
        }
    }

    #[test]
    fn requirement_algebra(
        a in prop::collection::vec(requirement(), 0..5),
        b in prop::collection::vec(requirement(), 0..5),
        labels in labels(),
    ) {
        fuzzing::check_requirements(&a, &b, &labels);
    }

    #[test]
    fn requirements_from_any_bytes(data in prop::collection::vec(any::<u8>(), 0..96)) {
        fuzzing::requirements(&data);
    }

    #[test]
    fn label_selectors(selector in selector(), labels in prop::collection::btree_map("app|tier", "[a-c]", 0..3)) {
        fuzzing::check_label_selector(&selector, &labels);
    }

    #[test]
    fn label_selectors_from_any_bytes(data in prop::collection::vec(any::<u8>(), 0..96)) {
        fuzzing::label_selector(&data);
    }
}
