//! Kubernetes resource quantities, parsed and formatted exactly like apimachinery's
//! `resource.Quantity`.

use serde::de::{self, Visitor};
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
    ///
    /// Values are exact up to the `i128` nano representation: a magnitude of at most
    /// `i128::MAX` nanos (about 1.7 × 10²⁹ units) — far beyond any real resource, but smaller
    /// than what apimachinery's arbitrary-precision fallback accepts (`1e100` is an error here).
    /// BinarySI values are capped at `2⁶³-1` units exactly as upstream caps them (`9Ei`).
    ///
    /// Two deliberate differences from upstream: text without any digit (`Mi`, `k`, `.`),
    /// which apimachinery silently reads as zero, is rejected; and a decimal exponent beyond the
    /// 32-bit range, which upstream truncates to 32 bits, is applied as written (so it is either
    /// too large or rounds up to `1n`).
    ///
    /// # Examples
    ///
    /// ```
    /// use karpenter_scheduling::Quantity;
    ///
    /// let cpu = Quantity::parse("1500m")?;
    /// assert_eq!(cpu.milli_value(), 1500);
    /// assert_eq!(cpu.value(), 2); // whole units round up
    /// let memory: Quantity = "512Mi".parse()?;
    /// assert_eq!(memory.value(), 512 * 1024 * 1024);
    /// assert_eq!(memory.to_string(), "512Mi");
    /// // Equal values compare equal whatever their format.
    /// assert_eq!(Quantity::parse("1k")?, Quantity::parse("1000")?);
    /// assert!(Quantity::parse("1.5.0").is_err());
    /// # Ok::<(), karpenter_scheduling::quantity::QuantityError>(())
    /// ```
    pub fn parse(text: &str) -> Result<Self, QuantityError> {
        let fail = |reason: String| QuantityError {
            text: text.to_owned(),
            reason,
        };
        if text.is_empty() {
            return Err(fail("empty quantity".to_owned()));
        }
        let bytes = text.as_bytes();
        let (negative, mut pos) = match bytes[0] {
            b'-' => (true, 1),
            b'+' => (false, 1),
            _ => (false, 0),
        };
        let int_start = pos;
        while pos < bytes.len() && bytes[pos].is_ascii_digit() {
            pos += 1;
        }
        let int_part = &bytes[int_start..pos];
        let mut frac_part: &[u8] = &[];
        if pos < bytes.len() && bytes[pos] == b'.' {
            pos += 1;
            let frac_start = pos;
            while pos < bytes.len() && bytes[pos].is_ascii_digit() {
                pos += 1;
            }
            frac_part = &bytes[frac_start..pos];
        }
        if int_part.is_empty() && frac_part.is_empty() {
            return Err(fail("no digits in the number".to_owned()));
        }
        // Everything consumed so far is ASCII, so `pos` is a char boundary.
        let suffix = &text[pos..];
        let (pow2, pow10, mut format) = interpret_suffix(suffix)
            .ok_or_else(|| fail(format!("unknown or malformed suffix {suffix:?}")))?;

        // Little-endian decimal digits of the unscaled number, leading zeros removed.
        let mut digits: Vec<u8> = int_part
            .iter()
            .chain(frac_part)
            .rev()
            .map(|b| b - b'0')
            .collect();
        while digits.last() == Some(&0) {
            digits.pop();
        }
        if digits.is_empty() {
            return Ok(Self { nanos: 0, format });
        }
        for _ in 0..pow2 / 10 {
            multiply_digits(&mut digits, 1024);
        }

        // value = digits × 10^(pow10 - frac_len); nanos = value × 10^9. i128 cannot overflow
        // here: pow10 is an i64 and the fraction length a usize.
        let nanos_exp = i128::from(pow10) - frac_part.len() as i128 + 9;
        let magnitude = if nanos_exp >= 0 {
            digits_to_u128(&digits)
                .and_then(|v| checked_scale_up(v, nanos_exp))
                .ok_or_else(|| fail(TOO_LARGE.to_owned()))?
        } else {
            // Round away from zero to the nearest nano, as ParseQuantity does, so a tiny
            // non-zero request never becomes zero.
            let drop = usize::try_from(-nanos_exp).unwrap_or(usize::MAX);
            if drop >= digits.len() {
                1
            } else {
                let round_up = digits[..drop].iter().any(|d| *d != 0);
                digits_to_u128(&digits[drop..])
                    .and_then(|v| v.checked_add(u128::from(round_up)))
                    .ok_or_else(|| fail(TOO_LARGE.to_owned()))?
            }
        };
        let Ok(mut magnitude) = i128::try_from(magnitude) else {
            return Err(fail(TOO_LARGE.to_owned()));
        };
        if format == QuantityFormat::BinarySI {
            magnitude = magnitude.min(BINARY_CAP_NANOS);
            if magnitude < NANOS_PER_UNIT {
                // Upstream switches sub-unit binary values to DecimalSI so they print as `512m`
                // rather than being rounded to a whole binary unit.
                format = QuantityFormat::DecimalSI;
            }
        }
        Ok(Self {
            nanos: if negative { -magnitude } else { magnitude },
            format,
        })
    }

    /// A quantity of exactly `nanos` billionths in the given format (no rounding, no cap).
    pub fn from_nanos(nanos: i128, format: QuantityFormat) -> Self {
        Self { nanos, format }
    }

    /// A quantity of `millis` thousandths in the given format (cpu is usually DecimalSI).
    pub fn from_milli(millis: i64, format: QuantityFormat) -> Self {
        Self {
            nanos: i128::from(millis) * 1_000_000,
            format,
        }
    }

    /// A quantity of whole `units` in the given format (memory is usually BinarySI).
    pub fn from_value(units: i64, format: QuantityFormat) -> Self {
        Self {
            nanos: i128::from(units) * 1_000_000_000,
            format,
        }
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
    ///
    /// Negative values round away from zero (`-1.5m` gives `-2`), as apimachinery's `int64`
    /// representation does.
    pub fn milli_value(&self) -> i64 {
        saturate(div_away_from_zero(self.nanos, 1_000_000))
    }

    /// The value in whole units, rounded up like `Quantity.Value`; saturates at the `i64`
    /// range.
    ///
    /// Negative values round away from zero (`-1.5` gives `-2`).
    pub fn value(&self) -> i64 {
        saturate(div_away_from_zero(self.nanos, NANOS_PER_UNIT))
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
    /// The canonical form apimachinery's `Quantity.String` produces: no fractional digits,
    /// the largest suffix of the quantity's format that keeps the value exact, and the sign
    /// only when negative.
    ///
    /// Differences from upstream, both on inputs upstream mishandles: apimachinery echoes a
    /// few non-canonical parsed texts verbatim (`+1`, `01`, `1E3`, `1.500`), while this always
    /// prints the canonical form (`1`, `1`, `1e3`, `1500m`); and a DecimalSI value of 10²¹ or
    /// more, for which upstream has no suffix and drops the exponent, keeps the `E` suffix
    /// (`1000E`) so the text parses back to the same value.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(&self.canonical())
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
    ///
    /// Strings are trimmed of surrounding whitespace (as `UnmarshalJSON` does); a number is
    /// written back as decimal text and parsed, so `1.5` gives `1500m`. `null` is zero, as
    /// upstream. A JSON number in exponent form (`1e3`) arrives as a float and keeps the
    /// DecimalSI format, because serde does not expose the number's original text.
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(QuantityVisitor)
    }
}

struct QuantityVisitor;

impl<'de> Visitor<'de> for QuantityVisitor {
    type Value = Quantity;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a Kubernetes quantity (a string such as \"500m\" or \"1Gi\", or a number)")
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Quantity, E> {
        Quantity::parse(v.trim()).map_err(E::custom)
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Quantity, E> {
        Quantity::parse(&v.to_string()).map_err(E::custom)
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Quantity, E> {
        Quantity::parse(&v.to_string()).map_err(E::custom)
    }

    fn visit_i128<E: de::Error>(self, v: i128) -> Result<Quantity, E> {
        Quantity::parse(&v.to_string()).map_err(E::custom)
    }

    fn visit_u128<E: de::Error>(self, v: u128) -> Result<Quantity, E> {
        Quantity::parse(&v.to_string()).map_err(E::custom)
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Quantity, E> {
        // Rust prints finite floats as plain decimals (never in exponent form), which the
        // parser reads exactly; NaN and infinities print as text it rejects.
        Quantity::parse(&v.to_string()).map_err(E::custom)
    }

    fn visit_unit<E: de::Error>(self) -> Result<Quantity, E> {
        Ok(Quantity::from_nanos(0, QuantityFormat::DecimalSI))
    }

    fn visit_none<E: de::Error>(self) -> Result<Quantity, E> {
        self.visit_unit()
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<Quantity, D::Error> {
        deserializer.deserialize_any(self)
    }
}

const NANOS_PER_UNIT: i128 = 1_000_000_000;
/// apimachinery caps BinarySI magnitudes at `2⁶³-1` units.
const BINARY_CAP_NANOS: i128 = i64::MAX as i128 * NANOS_PER_UNIT;
const TOO_LARGE: &str = "value too large (the limit is i128::MAX nano units, about 1.7e29)";
const BINARY_SUFFIXES: [&str; 7] = ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"];

/// The binary power, decimal power and format a suffix stands for, or `None` when it is not
/// one apimachinery accepts.
fn interpret_suffix(suffix: &str) -> Option<(u32, i64, QuantityFormat)> {
    use QuantityFormat::{BinarySI, DecimalExponent, DecimalSI};
    Some(match suffix {
        "" => (0, 0, DecimalSI),
        "n" => (0, -9, DecimalSI),
        "u" => (0, -6, DecimalSI),
        "m" => (0, -3, DecimalSI),
        "k" => (0, 3, DecimalSI),
        "M" => (0, 6, DecimalSI),
        "G" => (0, 9, DecimalSI),
        "T" => (0, 12, DecimalSI),
        "P" => (0, 15, DecimalSI),
        "E" => (0, 18, DecimalSI),
        "Ki" => (10, 0, BinarySI),
        "Mi" => (20, 0, BinarySI),
        "Gi" => (30, 0, BinarySI),
        "Ti" => (40, 0, BinarySI),
        "Pi" => (50, 0, BinarySI),
        "Ei" => (60, 0, BinarySI),
        _ => {
            let exponent = suffix.strip_prefix(['e', 'E'])?;
            // Go's ParseInt grammar: an optional sign, then at least one ASCII digit.
            let unsigned = exponent.strip_prefix(['+', '-']).unwrap_or(exponent);
            if unsigned.is_empty() || !unsigned.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            (0, exponent.parse::<i64>().ok()?, DecimalExponent)
        }
    })
}

/// Multiplies little-endian decimal digits by `factor` in place.
fn multiply_digits(digits: &mut Vec<u8>, factor: u64) {
    let mut carry = 0u64;
    for d in digits.iter_mut() {
        let v = u64::from(*d) * factor + carry;
        *d = (v % 10) as u8;
        carry = v / 10;
    }
    while carry > 0 {
        digits.push((carry % 10) as u8);
        carry /= 10;
    }
}

/// The value of little-endian decimal digits, or `None` when it exceeds `u128`.
fn digits_to_u128(digits: &[u8]) -> Option<u128> {
    digits.iter().rev().try_fold(0u128, |acc, d| {
        acc.checked_mul(10)?.checked_add(u128::from(*d))
    })
}

/// `value × 10^exp`, or `None` on overflow.
fn checked_scale_up(value: u128, exp: i128) -> Option<u128> {
    if value == 0 {
        return Some(0);
    }
    let exp = u32::try_from(exp).ok()?;
    value.checked_mul(10u128.checked_pow(exp)?)
}

fn div_away_from_zero(n: i128, d: i128) -> i128 {
    let q = n / d;
    match n % d {
        0 => q,
        _ if n > 0 => q + 1,
        _ => q - 1,
    }
}

fn saturate(v: i128) -> i64 {
    i64::try_from(v).unwrap_or(if v < 0 { i64::MIN } else { i64::MAX })
}

fn decimal_suffix(exponent: i32) -> &'static str {
    match exponent {
        -9 => "n",
        -6 => "u",
        -3 => "m",
        3 => "k",
        6 => "M",
        9 => "G",
        12 => "T",
        15 => "P",
        18 => "E",
        _ => "",
    }
}

impl Quantity {
    /// The canonical text (see the `Display` impl).
    fn canonical(&self) -> String {
        if self.nanos == 0 {
            return "0".to_owned();
        }
        let mut format = self.format;
        if format == QuantityFormat::BinarySI {
            let bound = 1024 * NANOS_PER_UNIT;
            let small = self.nanos > -bound && self.nanos < bound;
            // A fractional binary value would need rounding to print with an IEC suffix;
            // upstream keeps the exact value by printing it as DecimalSI instead.
            if small || self.nanos % NANOS_PER_UNIT != 0 {
                format = QuantityFormat::DecimalSI;
            }
        }
        if format == QuantityFormat::BinarySI {
            let mut value = self.nanos / NANOS_PER_UNIT;
            let mut power = 0;
            while power < BINARY_SUFFIXES.len() - 1 && value % 1024 == 0 {
                value /= 1024;
                power += 1;
            }
            return format!("{value}{}", BINARY_SUFFIXES[power]);
        }
        // Move every factor of ten into the exponent, then back off to a multiple of three.
        // The exponent never drops below -9, so the mantissa never exceeds |nanos|.
        let mut mantissa = self.nanos;
        let mut exponent: i32 = -9;
        while mantissa % 10 == 0 {
            mantissa /= 10;
            exponent += 1;
        }
        while exponent.rem_euclid(3) != 0 {
            mantissa *= 10;
            exponent -= 1;
        }
        if format == QuantityFormat::DecimalExponent {
            return if exponent == 0 {
                mantissa.to_string()
            } else {
                format!("{mantissa}e{exponent}")
            };
        }
        while exponent > 18 {
            mantissa *= 10;
            exponent -= 1;
        }
        format!("{mantissa}{}", decimal_suffix(exponent))
    }
}

#[cfg(test)]
mod tests {
    use super::QuantityFormat::{BinarySI, DecimalExponent, DecimalSI};
    use super::*;

    /// `mantissa × 10^exponent` in nanos, the shape of upstream's `decQuantity` helper.
    fn dec(mantissa: i128, exponent: i32) -> i128 {
        let shift = exponent + 9;
        assert!(shift >= 0, "test helper only covers nano precision");
        mantissa * 10i128.pow(shift as u32)
    }

    fn q(text: &str) -> Quantity {
        Quantity::parse(text).unwrap_or_else(|e| panic!("{text}: {e}"))
    }

    /// TestQuantityParse: input, expected value (mantissa, exponent) and format.
    const PARSE_TABLE: &[(&str, i128, i32, QuantityFormat)] = &[
        ("0", 0, 0, DecimalSI),
        ("0n", 0, 0, DecimalSI),
        ("0u", 0, 0, DecimalSI),
        ("0m", 0, 0, DecimalSI),
        ("0Ki", 0, 0, BinarySI),
        ("0k", 0, 0, DecimalSI),
        ("0Mi", 0, 0, BinarySI),
        ("0M", 0, 0, DecimalSI),
        ("0Gi", 0, 0, BinarySI),
        ("0G", 0, 0, DecimalSI),
        ("0Ti", 0, 0, BinarySI),
        ("0T", 0, 0, DecimalSI),
        ("1", 1, 0, DecimalSI),
        ("1Ki", 1024, 0, BinarySI),
        ("8Ki", 8 * 1024, 0, BinarySI),
        ("7Mi", 7 * 1024 * 1024, 0, BinarySI),
        ("6Gi", 6 * (1 << 30), 0, BinarySI),
        ("5Ti", 5 * (1 << 40), 0, BinarySI),
        ("4Pi", 4 * (1 << 50), 0, BinarySI),
        ("3Ei", 3 * (1 << 60), 0, BinarySI),
        ("10Ti", 10 * (1 << 40), 0, BinarySI),
        ("100Ti", 100 * (1 << 40), 0, BinarySI),
        ("5n", 5, -9, DecimalSI),
        ("4u", 4, -6, DecimalSI),
        ("3m", 3, -3, DecimalSI),
        ("9", 9, 0, DecimalSI),
        ("8k", 8, 3, DecimalSI),
        ("50k", 5, 4, DecimalSI),
        ("7M", 7, 6, DecimalSI),
        ("6G", 6, 9, DecimalSI),
        ("5T", 5, 12, DecimalSI),
        ("40T", 4, 13, DecimalSI),
        ("300T", 3, 14, DecimalSI),
        ("2P", 2, 15, DecimalSI),
        ("1E", 1, 18, DecimalSI),
        ("1E-3", 1, -3, DecimalExponent),
        ("1e3", 1, 3, DecimalExponent),
        ("1E6", 1, 6, DecimalExponent),
        ("1e9", 1, 9, DecimalExponent),
        ("1E12", 1, 12, DecimalExponent),
        ("1e15", 1, 15, DecimalExponent),
        ("1E18", 1, 18, DecimalExponent),
        ("1e14", 1, 14, DecimalExponent),
        ("1e13", 1, 13, DecimalExponent),
        ("100.035k", 100035, 0, DecimalSI),
        ("0.001", 1, -3, DecimalSI),
        ("0.0005k", 5, -1, DecimalSI),
        ("0.005", 5, -3, DecimalSI),
        ("0.05", 5, -2, DecimalSI),
        ("0.5", 5, -1, DecimalSI),
        ("0.00050k", 5, -1, DecimalSI),
        ("0.00500", 5, -3, DecimalSI),
        ("0.05000", 5, -2, DecimalSI),
        ("0.50000", 5, -1, DecimalSI),
        ("0.5e0", 5, -1, DecimalExponent),
        ("0.5e-1", 5, -2, DecimalExponent),
        ("0.5e-2", 5, -3, DecimalExponent),
        ("10.035M", 10035, 3, DecimalSI),
        ("1.2e3", 12, 2, DecimalExponent),
        ("1.3E+6", 13, 5, DecimalExponent),
        ("1.40e9", 14, 8, DecimalExponent),
        ("1.53E12", 153, 10, DecimalExponent),
        ("1.6e15", 16, 14, DecimalExponent),
        ("1.7E18", 17, 17, DecimalExponent),
        ("9.01", 901, -2, DecimalSI),
        ("8.1k", 81, 2, DecimalSI),
        ("7.123456M", 7123456, 0, DecimalSI),
        ("6.987654321G", 6987654321, 0, DecimalSI),
        ("5.444T", 5444, 9, DecimalSI),
        ("40.1T", 401, 11, DecimalSI),
        ("300.2T", 3002, 11, DecimalSI),
        ("2.5P", 25, 14, DecimalSI),
        ("1.01E", 101, 16, DecimalSI),
        // Rounded up to the nearest nano.
        ("3.001n", 4, -9, DecimalSI),
        ("1.1E-9", 2, -9, DecimalExponent),
        ("0.0000000001", 1, -9, DecimalSI),
        ("0.0000000005", 1, -9, DecimalSI),
        ("0.00000000050", 1, -9, DecimalSI),
        ("0.5e-9", 1, -9, DecimalExponent),
        ("0.9n", 1, -9, DecimalSI),
        ("0.00000012345", 124, -9, DecimalSI),
        ("0.00000012354", 124, -9, DecimalSI),
        // BinarySI is capped at 2^63-1.
        ("9Ei", i64::MAX as i128, 0, BinarySI),
        ("9223372036854775807Ki", i64::MAX as i128, 0, BinarySI),
        ("12E", 12, 18, DecimalSI),
        ("100.035Ki", 10243584, -2, BinarySI),
        ("0.5Mi", 512 * 1024, 0, BinarySI),
        ("0.05Gi", 536870912, -1, BinarySI),
        ("0.025Ti", 274877906944, -1, BinarySI),
        // Sub-unit binary values round up and switch to DecimalSI.
        ("0.000000000001Ki", 2, -9, DecimalSI),
        (".001", 1, -3, DecimalSI),
        (".0001k", 100, -3, DecimalSI),
        ("1.", 1, 0, DecimalSI),
        ("1.G", 1, 9, DecimalSI),
    ];

    #[test]
    fn parse_table_from_upstream() {
        for &(input, mantissa, exponent, format) in PARSE_TABLE {
            let want = dec(mantissa, exponent);
            let got = q(input);
            assert_eq!(got.nanos(), want, "{input}");
            assert_eq!(got.format(), format, "{input} format");
            // Upstream checks every entry with an explicit sign as well.
            let neg = q(&format!("-{input}"));
            assert_eq!(neg.nanos(), -want, "-{input}");
            assert_eq!(neg.format(), format, "-{input} format");
            let pos = q(&format!("+{input}"));
            assert_eq!(pos.nanos(), want, "+{input}");
            assert_eq!(pos.format(), format, "+{input} format");
        }
    }

    #[test]
    fn invalid_inputs_are_errors_naming_the_text() {
        let invalid = [
            // upstream TestQuantityParse
            "1.1.M",
            "1+1.0M",
            "0.1mi",
            "0.1am",
            "aoeu",
            ".5i",
            "1i",
            "-3.01i",
            "-3.01e-",
            " 1",
            "1 ", // the brief's list
            "",
            "1.2.3",
            "Mi",
            "1 Mi",
            "1mi",
            "--1",
            "1e",
            "1KiB",
            "Non-Numeric",
            "k",
            ".",
            "-.",
            "+",
            "1E+",
            "1e1.5",
            "1ee3",
            "1Ee3",
            "1k3",
            "1Ki1",
            "0x10",
            "1_000",
            "1e99999999999999999999",
            "٣",
            "1µ",
        ];
        for text in invalid {
            let err = Quantity::parse(text).expect_err(text);
            assert_eq!(err.text, text);
            assert!(err.to_string().contains(&format!("{text:?}")), "{err}");
        }
    }

    #[test]
    fn values_beyond_i128_nanos_are_errors() {
        for text in ["1e100", "1e30", "1000000000000000000000000000000", "-1e30"] {
            let err = Quantity::parse(text).expect_err(text);
            assert!(err.reason.contains("too large"), "{text}: {err}");
        }
        // The largest decimal exponents that still fit.
        assert_eq!(q("1e29").nanos(), 10i128.pow(38));
        assert_eq!(q("100000000000E").to_string(), "100000000000E");
        // Tiny values never fail: they round up to one nano.
        assert_eq!(q("1e-99999").nanos(), 1);
        assert_eq!(q("-1e-99999").nanos(), -1);
        assert_eq!(
            q("0.000000000000000000000000000000000000000000001").nanos(),
            1
        );
    }

    /// TestQuantityString: (value, format) → canonical text, plus an alternate spelling that
    /// must canonicalise to the same text.
    #[test]
    fn string_table_from_upstream() {
        let table: &[(i128, QuantityFormat, &str, &str)] = &[
            (dec(1 << 30, 0), BinarySI, "1Gi", "1024Mi"),
            (dec(300 << 20, 0), BinarySI, "300Mi", "307200Ki"),
            (dec(6 * 1024, 0), BinarySI, "6Ki", ""),
            (dec(1001 << 30, 0), BinarySI, "1001Gi", "1025024Mi"),
            (dec(1 << 40, 0), BinarySI, "1Ti", "1024Gi"),
            (dec(5, 0), BinarySI, "5", "5000m"),
            (dec(500, -3), BinarySI, "500m", "0.5"),
            (dec(1, 9), DecimalSI, "1G", "1000M"),
            (dec(1000, 6), DecimalSI, "1G", "0.001T"),
            (dec(1000000, 3), DecimalSI, "1G", ""),
            (dec(1000000000, 0), DecimalSI, "1G", ""),
            (dec(1, -3), DecimalSI, "1m", "1000u"),
            (dec(80, -3), DecimalSI, "80m", ""),
            (dec(1080, -3), DecimalSI, "1080m", "1.08"),
            (dec(108, -2), DecimalSI, "1080m", "1080000000n"),
            (dec(300, 6), DecimalSI, "300M", ""),
            (dec(1, 12), DecimalSI, "1T", ""),
            (dec(1234567, 6), DecimalSI, "1234567M", ""),
            (dec(1234567, -3), BinarySI, "1234567m", ""),
            (dec(3, 3), DecimalSI, "3k", ""),
            (dec(1025, 0), BinarySI, "1025", ""),
            (0, DecimalSI, "0", ""),
            (0, BinarySI, "0", ""),
            (dec(1, 9), DecimalExponent, "1e9", ".001e12"),
            (dec(1, -3), DecimalExponent, "1e-3", "0.001e0"),
            (dec(1, -9), DecimalExponent, "1e-9", "1000e-12"),
            (dec(80, -3), DecimalExponent, "80e-3", ""),
            (dec(300, 6), DecimalExponent, "300e6", ""),
            (dec(1, 12), DecimalExponent, "1e12", ""),
            (dec(1, 3), DecimalExponent, "1e3", ""),
            (dec(3, 3), DecimalExponent, "3e3", ""),
            (0, DecimalExponent, "0", "00"),
            (dec(1, -9), DecimalSI, "1n", ""),
            (dec(80, -9), DecimalSI, "80n", ""),
            (dec(1080, -9), DecimalSI, "1080n", ""),
            (dec(108, -8), DecimalSI, "1080n", ""),
            (1080, DecimalSI, "1080n", ""),
            (dec(1, -6), DecimalSI, "1u", ""),
            (dec(80, -6), DecimalSI, "80u", ""),
            (dec(1080, -6), DecimalSI, "1080u", ""),
        ];
        for &(nanos, format, expect, alternate) in table {
            let value = Quantity::from_nanos(nanos, format);
            assert_eq!(value.to_string(), expect, "{nanos} {format:?}");
            assert_eq!(
                q(expect).to_string(),
                expect,
                "canonical text re-parses to itself"
            );
            assert_eq!(q(expect), value);
            if !alternate.is_empty() {
                assert_eq!(q(alternate).to_string(), expect, "alternate {alternate}");
            }
            if nanos != 0 {
                let negated = Quantity::from_nanos(-nanos, format);
                assert_eq!(negated.to_string(), format!("-{expect}"));
            }
        }
    }

    /// TestQuantityParseEmit, plus the brief's examples.
    #[test]
    fn parse_then_emit() {
        let table = [
            ("1Ki", "1Ki"),
            ("1Mi", "1Mi"),
            ("1Gi", "1Gi"),
            ("1024Mi", "1Gi"),
            ("1000M", "1G"),
            (".001Ki", "1024m"),
            (".000001Ki", "1024u"),
            (".000000001Ki", "1024n"),
            (".000000000001Ki", "2n"),
            ("1.5", "1500m"),
            ("0.1Ki", "102400m"),
            ("1e3", "1e3"),
            ("1E3", "1e3"),
            ("1536Mi", "1536Mi"),
            ("1.5Gi", "1536Mi"),
            ("0", "0"),
            ("-0", "0"),
            ("0.0Ki", "0"),
            ("100m", "100m"),
            ("+1", "1"),
            ("-2", "-2"),
            (".5", "500m"),
            ("5.", "5"),
            ("512Mi", "512Mi"),
            ("1G", "1G"),
            ("1.5e3", "1500"),
            ("1.5k", "1500"),
            ("0.5Ki", "512"),
            ("1023Ki", "1023Ki"),
            ("1.1Ki", "1126400m"),
            ("1000E", "1000E"),
            ("1200E", "1200E"),
            ("1e21", "1e21"),
            ("10000T", "10P"),
            ("01", "1"),
            ("1.500", "1500m"),
        ];
        for (input, expect) in table {
            assert_eq!(q(input).to_string(), expect, "{input}");
            if q(input).nanos() != 0 && !input.starts_with(['+', '-']) {
                assert_eq!(
                    q(&format!("-{input}")).to_string(),
                    format!("-{expect}"),
                    "-{input}"
                );
            }
            // Canonical text is a fixed point.
            assert_eq!(q(expect).to_string(), expect);
            assert_eq!(q(expect), q(input));
        }
    }

    /// TestParseQuantity: 18–20 digit boundaries around i64.
    #[test]
    fn large_values_from_upstream() {
        let table = [
            ("999999999999999999", ""),
            ("999999999999999999.0", "999999999999999999"),
            ("999999999999999999.1", "999999999999999999100m"),
            ("9999999999999999999", ""),
            ("1E", ""),
            ("1000000000000000000", "1E"),
            ("9999999999999999999.0", "9999999999999999999"),
            ("1.0E", "1E"),
            ("1000000000000000000.0", "1E"),
            ("9999999999999999999000m", "9999999999999999999"),
            ("9999999999999999999.1", "9999999999999999999100m"),
            ("1.0000000000000000001E", "1000000000000000000100m"),
            ("1000000000000000000.1", "1000000000000000000100m"),
            ("1.000000000000000001E", "1000000000000000001"),
            ("1000000000000000001", ""),
            ("10E", ""),
            ("10000000000000000000", "10E"),
            ("10.0E", "10E"),
            ("10000000000000000000.0", "10E"),
            ("10000000000000000000000m", "10E"),
            ("10.0000000000000000001E", "10000000000000000000100m"),
            ("10000000000000000000.1", "10000000000000000000100m"),
            ("10.000000000000000001E", "10000000000000000001"),
            ("10000000000000000001", ""),
            ("9223372036854775806", ""),
            ("9223372036854775806.0", "9223372036854775806"),
            ("9223372036854775806000m", "9223372036854775806"),
            ("9223372036854775806.1", "9223372036854775806100m"),
            ("9223372036854775807", ""),
            ("9223372036854775807.0", "9223372036854775807"),
            ("9223372036854775807000m", "9223372036854775807"),
            ("9223372036854775807.1", "9223372036854775807100m"),
            ("9223372036854775808", ""),
            ("9223372036854775808.0", "9223372036854775808"),
            ("9223372036854775808000m", "9223372036854775808"),
            ("9223372036854775808.1", "9223372036854775808100m"),
            ("9223372036854775809", ""),
            ("9223372036854775809.1", "9223372036854775809100m"),
        ];
        for (input, canonical) in table {
            let expect = if canonical.is_empty() {
                input
            } else {
                canonical
            };
            assert_eq!(q(input).to_string(), expect, "{input}");
            assert_eq!(
                q(&format!("-{input}")).to_string(),
                format!("-{expect}"),
                "-{input}"
            );
        }
    }

    #[test]
    fn milli_value_and_value_round_up_and_saturate() {
        let table: &[(&str, i64, i64)] = &[
            ("0", 0, 0),
            ("1", 1000, 1),
            ("100m", 100, 1),
            ("1.5", 1500, 2),
            ("0.1m", 1, 1),
            ("1n", 1, 1),
            ("1Ki", 1_024_000, 1024),
            ("1.0001", 1001, 2),
            ("-1.5", -1500, -2),
            ("-0.1m", -1, -1),
            ("1E", i64::MAX, 1_000_000_000_000_000_000),
            ("10E", i64::MAX, i64::MAX),
            ("-10E", i64::MIN, i64::MIN),
            ("9Ei", i64::MAX, i64::MAX),
        ];
        for &(input, milli, value) in table {
            assert_eq!(q(input).milli_value(), milli, "{input} milli");
            assert_eq!(q(input).value(), value, "{input} value");
        }
        assert_eq!(Quantity::from_milli(1500, DecimalSI).to_string(), "1500m");
        assert_eq!(Quantity::from_milli(2000, DecimalSI).to_string(), "2");
        assert_eq!(Quantity::from_value(1 << 30, BinarySI).to_string(), "1Gi");
        // Below 1024 a binary value prints as DecimalSI, as upstream.
        assert_eq!(Quantity::from_value(1000, BinarySI).to_string(), "1k");
        assert_eq!(Quantity::from_value(i64::MAX, BinarySI).value(), i64::MAX);
    }

    #[test]
    fn ordering_and_equality_ignore_format() {
        assert_eq!(q("1Ki"), q("1024"));
        assert_eq!(q("1e3"), q("1k"));
        assert!(q("999m") < q("1"));
        assert!(q("-1") < q("0"));
        assert!(q("1Gi") > q("1G"));
        assert!(q("0").is_zero());
        assert!(q("0Mi").is_zero());
        assert!(!q("1n").is_zero());
    }

    #[test]
    fn serde_serializes_canonical_text() {
        assert_eq!(serde_json::to_string(&q("1.5")).unwrap(), "\"1500m\"");
        assert_eq!(serde_json::to_string(&q("1024Mi")).unwrap(), "\"1Gi\"");
        assert_eq!(format!("{:>6}", q("1Ki")), "   1Ki");
    }

    #[test]
    fn serde_deserializes_strings_and_numbers() {
        let table = [
            ("\"500m\"", "500m", DecimalSI),
            ("\" 1Gi \"", "1Gi", BinarySI),
            ("\"1e3\"", "1e3", DecimalExponent),
            ("1", "1", DecimalSI),
            ("-3", "-3", DecimalSI),
            ("18446744073709551615", "18446744073709551615", DecimalSI),
            ("1.5", "1500m", DecimalSI),
            ("0.1", "100m", DecimalSI),
            ("1e3", "1k", DecimalSI),
            ("2.5e-3", "2500u", DecimalSI),
            ("null", "0", DecimalSI),
        ];
        for (json, expect, format) in table {
            let got: Quantity =
                serde_json::from_str(json).unwrap_or_else(|e| panic!("{json}: {e}"));
            assert_eq!(got.to_string(), expect, "{json}");
            assert_eq!(got.format(), format, "{json}");
        }
        for json in ["\"1Mi B\"", "\"\"", "true", "[1]", "{}", "1e400"] {
            assert!(serde_json::from_str::<Quantity>(json).is_err(), "{json}");
        }
        let err = serde_json::from_str::<Quantity>("\"12x\"").unwrap_err();
        assert!(err.to_string().contains("\"12x\""), "{err}");
    }

    #[test]
    fn serde_round_trip_in_a_map() {
        let json = r#"{"cpu":"1.5","memory":"1536Mi","pods":110}"#;
        let map: std::collections::BTreeMap<String, Quantity> = serde_json::from_str(json).unwrap();
        assert_eq!(
            serde_json::to_string(&map).unwrap(),
            r#"{"cpu":"1500m","memory":"1536Mi","pods":"110"}"#
        );
    }

    mod props {
        use super::*;
        use proptest::prelude::*;

        fn any_format() -> impl Strategy<Value = QuantityFormat> {
            prop_oneof![Just(DecimalSI), Just(BinarySI), Just(DecimalExponent)]
        }

        proptest! {
            /// Canonical text always parses back to the same value and prints identically.
            #[test]
            fn canonical_text_round_trips(nanos in -(1i128 << 100)..(1i128 << 100), format in any_format()) {
                let value = Quantity::from_nanos(nanos, format);
                let text = value.to_string();
                let parsed = Quantity::parse(&text).unwrap();
                prop_assert_eq!(parsed, value, "{}", text);
                prop_assert_eq!(parsed.to_string(), text);
            }

            /// Canonical text never has a fractional part or a `+` sign.
            #[test]
            fn canonical_text_is_integral(units in any::<i64>(), millis in 0i64..1000, format in any_format()) {
                let value = Quantity::from_nanos(i128::from(units) * 1_000_000_000 + i128::from(millis) * 1_000_000, format);
                let text = value.to_string();
                prop_assert!(!text.contains('.') && !text.contains('+'), "{}", text);
            }

            /// Parsing a plain decimal agrees with integer arithmetic.
            #[test]
            fn decimal_text_matches_arithmetic(units in 0i64..1_000_000_000_000, frac in 0u32..1_000_000_000) {
                let text = format!("{units}.{frac:09}");
                prop_assert_eq!(Quantity::parse(&text).unwrap().nanos(), i128::from(units) * 1_000_000_000 + i128::from(frac));
            }
        }
    }
}
