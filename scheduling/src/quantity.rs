//! Kubernetes resource quantities, parsed and formatted exactly like apimachinery's
//! `resource.Quantity`.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;
use std::str::FromStr;

/// How a quantity is written: apimachinery keeps the format of the parsed text and uses it
/// when the value is formatted again.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum QuantityFormat {
    /// Powers of ten with SI suffixes (`m`, `k`, `M`, `G` …) or no suffix.
    DecimalSI,
    /// Powers of two with IEC suffixes (`Ki`, `Mi`, `Gi` …).
    BinarySI,
    /// Scientific notation (`1e3`, `5E-3`).
    DecimalExponent,
}

/// A fixed-point quantity with nano (10⁻⁹) precision, like apimachinery's `Quantity`.
///
/// Values are rounded up (away from zero) to the nearest nano when parsed, exactly as
/// `resource.ParseQuantity` does. Equality and ordering compare the value only, never the
/// format, as `Quantity.Cmp` does.
#[derive(Debug, Clone, Copy)]
pub struct Quantity {
    nanos: i128,
    format: QuantityFormat,
}

/// A quantity text that apimachinery would reject.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("quantity {text:?}: {reason}")]
pub struct QuantityError {
    /// The text that failed to parse.
    pub text: String,
    /// Why it failed.
    pub reason: String,
}

impl Quantity {
    /// Parses a quantity exactly as `resource.ParseQuantity` does (`100m`, `1.5`, `512Mi`,
    /// `1G`, `1e3`, `0.1Ki`, `+1`, `-2`); malformed text is an error naming the text.
    pub fn parse(text: &str) -> Result<Self, QuantityError> {
        todo!("{text}")
    }

    /// A quantity of `millis` thousandths in the given format (cpu is usually DecimalSI).
    pub fn from_milli(millis: i64, format: QuantityFormat) -> Self {
        Self { nanos: i128::from(millis) * 1_000_000, format }
    }

    /// A quantity of whole `units` in the given format (memory is usually BinarySI).
    pub fn from_value(units: i64, format: QuantityFormat) -> Self {
        Self { nanos: i128::from(units) * 1_000_000_000, format }
    }

    /// The value in nano units, exact.
    pub fn nanos(&self) -> i128 {
        self.nanos
    }

    /// The format the quantity was parsed with or created in.
    pub fn format(&self) -> QuantityFormat {
        self.format
    }

    /// The value in thousandths, rounded up like `Quantity.MilliValue`; saturates at the
    /// `i64` range.
    pub fn milli_value(&self) -> i64 {
        todo!()
    }

    /// The value in whole units, rounded up like `Quantity.Value`; saturates at the `i64`
    /// range.
    pub fn value(&self) -> i64 {
        todo!()
    }

    /// Whether the value is zero.
    pub fn is_zero(&self) -> bool {
        self.nanos == 0
    }
}

impl PartialEq for Quantity {
    fn eq(&self, other: &Self) -> bool {
        self.nanos == other.nanos
    }
}
impl Eq for Quantity {}
impl PartialOrd for Quantity {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Quantity {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.nanos.cmp(&other.nanos)
    }
}

impl fmt::Display for Quantity {
    /// The canonical form apimachinery's `Quantity.String` produces.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let _ = f;
        todo!()
    }
}

impl FromStr for Quantity {
    type Err = QuantityError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

impl Serialize for Quantity {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Quantity {
    /// Accepts a string or a bare number, as the Kubernetes API does.
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let _ = deserializer;
        todo!()
    }
}
