//! The `quantity` target: Kubernetes resource quantities as text and as the numbers a
//! manifest may hold instead.

use crate::quantity::Quantity;
use serde::Deserialize;
use serde::de::value::{Error, F64Deserializer, I64Deserializer, StrDeserializer};

/// Parses `data` as a quantity (invalid UTF-8 replaced) and checks [`check_quantity_text`];
/// its first eight bytes are also read as an `f64` and an `i64` and decoded as the bare
/// numbers a manifest may hold (`cpu: 1.5`, `memory: 1073741824`).
pub fn quantity(data: &[u8]) {
    check_quantity_text(&String::from_utf8_lossy(data));
    if let Some(word) = data.first_chunk::<8>() {
        check_number(f64::from_le_bytes(*word));
        let n = i64::from_le_bytes(*word);
        let q = Quantity::deserialize(I64Deserializer::<Error>::new(n))
            .unwrap_or_else(|e| panic!("integer {n} rejected: {e}"));
        // Exact: every i64 is a whole number of units well inside the nano range.
        assert_eq!(q.value(), n);
        assert_eq!(q.nanos(), i128::from(n) * 1_000_000_000);
    }
}

/// What must hold for any text: parsing is deterministic, and a quantity that parses prints
/// as text that parses to the same value; that text, parsed, prints the same again (one
/// round may change the format as apimachinery's does: `62.5Ki` prints as `64000`, which
/// is DecimalSI and prints as `64k`); the serde path (which trims whitespace, as the API
/// server does) agrees with the parser; whole and milli values round away from zero.
pub fn check_quantity_text(text: &str) {
    let parsed = Quantity::parse(text);
    assert_eq!(
        parsed.as_ref().map(|q| q.nanos()),
        Quantity::parse(text).as_ref().map(|q| q.nanos()),
        "not deterministic"
    );
    let decoded = Quantity::deserialize(StrDeserializer::<Error>::new(text));
    let trimmed = Quantity::parse(text.trim());
    assert_eq!(
        decoded.as_ref().ok().map(Quantity::nanos),
        trimmed.as_ref().ok().map(Quantity::nanos),
        "serde and the parser disagree on {text:?}"
    );
    let Ok(q) = parsed else { return };
    let again = reprint(text, &q);
    let third = reprint(text, &again);
    assert_eq!(
        third.to_string(),
        again.to_string(),
        "{text:?}: printing is not stable"
    );
    let (nanos, milli, units) = (q.nanos(), q.milli_value(), q.value());
    if nanos >= 0 {
        assert!(i128::from(milli) * 1_000_000 >= nanos || milli == i64::MAX);
        assert!(i128::from(units) * 1_000_000_000 >= nanos || units == i64::MAX);
    } else {
        assert!(i128::from(milli) * 1_000_000 <= nanos || milli == i64::MIN);
        assert!(i128::from(units) * 1_000_000_000 <= nanos || units == i64::MIN);
    }
}

/// `q` printed and parsed again, which must give the same value.
fn reprint(text: &str, q: &Quantity) -> Quantity {
    let printed = q.to_string();
    let again = Quantity::parse(&printed)
        .unwrap_or_else(|e| panic!("{text:?} prints as {printed:?}, which does not parse: {e}"));
    assert_eq!(
        &again, q,
        "{text:?} prints as {printed:?}, a different value"
    );
    again
}

/// A bare number: finite values below 10²⁰ in magnitude are quantities (decoded exactly as
/// their decimal text), NaN and infinities are not.
fn check_number(x: f64) {
    let q = Quantity::deserialize(F64Deserializer::<Error>::new(x));
    if !x.is_finite() {
        assert!(q.is_err(), "{x} accepted");
    } else if x.abs() < 1e20 {
        let q = q.unwrap_or_else(|e| panic!("number {x} rejected: {e}"));
        assert_eq!(Some(q), Quantity::parse(&x.to_string()).ok());
    }
}
