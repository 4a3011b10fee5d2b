//! Go-compatible durations: [`Duration`] (like `metav1.Duration`) and [`NillableDuration`]
//! (Karpenter's duration that may also be `Never`).
//!
//! Parsing follows Go's `time.ParseDuration` exactly (units `ns`, `us`, `µs`, `μs`, `ms`, `s`,
//! `m`, `h`; decimal fractions; an optional sign; `0` alone), so `1d` is rejected as Go rejects
//! it. The text a user wrote is kept and written back unchanged, so tools that diff manifests
//! (Flux, Argo CD) see no change after a round trip.

use schemars::JsonSchema;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::borrow::Cow;
use std::fmt;

/// The text that disables a [`NillableDuration`].
pub const NEVER: &str = "Never";

const NANOS_PER_MICRO: u64 = 1_000;
const NANOS_PER_MILLI: u64 = 1_000_000;
const NANOS_PER_SECOND: u64 = 1_000_000_000;
const NANOS_PER_MINUTE: u64 = 60 * NANOS_PER_SECOND;
const NANOS_PER_HOUR: u64 = 60 * NANOS_PER_MINUTE;

/// Text that is not a Go duration.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("time: {reason} {text:?}")]
pub struct DurationError {
    /// The text as given.
    pub text: String,
    /// What is wrong, in Go's words (`invalid duration`, `unknown unit "d" in duration` …).
    pub reason: String,
}

impl DurationError {
    fn new(text: &str, reason: impl Into<String>) -> Self {
        Self {
            text: text.to_owned(),
            reason: reason.into(),
        }
    }
}

fn unit_nanos(unit: &str) -> Option<u64> {
    Some(match unit {
        "ns" => 1,
        // Go accepts the ASCII spelling, the micro sign (U+00B5) and the Greek mu (U+03BC).
        "us" | "\u{b5}s" | "\u{3bc}s" => NANOS_PER_MICRO,
        "ms" => NANOS_PER_MILLI,
        "s" => NANOS_PER_SECOND,
        "m" => NANOS_PER_MINUTE,
        "h" => NANOS_PER_HOUR,
        _ => return None,
    })
}

/// Parses a Go duration into signed nanoseconds, with Go's overflow rules (|d| ≤ 2^63-1 ns,
/// except that exactly -2^63 is allowed).
pub fn parse_go_duration(text: &str) -> Result<i64, DurationError> {
    let invalid = || DurationError::new(text, "invalid duration");
    let overflow = || DurationError::new(text, "invalid duration");
    let mut s = text;
    let mut negative = false;
    if let Some(rest) = s.strip_prefix('-') {
        negative = true;
        s = rest;
    } else if let Some(rest) = s.strip_prefix('+') {
        s = rest;
    }
    if s == "0" {
        return Ok(0);
    }
    if s.is_empty() {
        return Err(invalid());
    }
    const LIMIT: u64 = 1 << 63;
    let mut total: u64 = 0;
    while !s.is_empty() {
        let bytes = s.as_bytes();
        if !(bytes[0] == b'.' || bytes[0].is_ascii_digit()) {
            return Err(invalid());
        }
        // Integer part.
        let int_len = bytes.iter().take_while(|b| b.is_ascii_digit()).count();
        let mut whole: u64 = 0;
        for &b in &bytes[..int_len] {
            whole = whole
                .checked_mul(10)
                .and_then(|v| v.checked_add(u64::from(b - b'0')))
                .filter(|v| *v <= LIMIT)
                .ok_or_else(overflow)?;
        }
        s = &s[int_len..];
        // Fraction part: digits beyond what fits are consumed but ignored, as Go does.
        let mut frac: u64 = 0;
        let mut scale: f64 = 1.0;
        let mut frac_len = 0;
        if let Some(rest) = s.strip_prefix('.') {
            s = rest;
            frac_len = s.bytes().take_while(u8::is_ascii_digit).count();
            let mut saturated = false;
            for b in s[..frac_len].bytes() {
                if saturated {
                    continue;
                }
                if frac > (i64::MAX as u64) / 10 {
                    saturated = true;
                    continue;
                }
                frac = frac * 10 + u64::from(b - b'0');
                scale *= 10.0;
            }
            s = &s[frac_len..];
        }
        if int_len == 0 && frac_len == 0 {
            return Err(invalid());
        }
        let unit_len = s
            .find(|c: char| c == '.' || c.is_ascii_digit())
            .unwrap_or(s.len());
        if unit_len == 0 {
            return Err(DurationError::new(text, "missing unit in duration"));
        }
        let unit = &s[..unit_len];
        s = &s[unit_len..];
        let per = unit_nanos(unit).ok_or_else(|| {
            DurationError::new(text, format!("unknown unit {unit:?} in duration"))
        })?;
        if whole > LIMIT / per {
            return Err(overflow());
        }
        let mut value = whole * per;
        if frac > 0 {
            // Go computes the fractional contribution in float64 and truncates.
            value += (frac as f64 * (per as f64 / scale)) as u64;
            if value > LIMIT {
                return Err(overflow());
            }
        }
        total = total
            .checked_add(value)
            .filter(|v| *v <= LIMIT)
            .ok_or_else(overflow)?;
    }
    if negative {
        return Ok((total as i128).wrapping_neg() as i64);
    }
    if total > i64::MAX as u64 {
        return Err(overflow());
    }
    Ok(total as i64)
}

/// Appends the fraction `v % 10^prec` without trailing zeros (and without the dot when it is
/// zero), returning `v / 10^prec`; Go's `fmtFrac`.
fn push_frac(out: &mut Vec<u8>, mut v: u64, prec: usize) -> u64 {
    let mut digits = Vec::with_capacity(prec + 1);
    let mut printing = false;
    for _ in 0..prec {
        let d = (v % 10) as u8;
        printing = printing || d != 0;
        if printing {
            digits.push(b'0' + d);
        }
        v /= 10;
    }
    if printing {
        digits.push(b'.');
    }
    // Built backwards because the digits come least significant first.
    out.extend(digits.iter());
    v
}

/// Formats nanoseconds as Go's `time.Duration.String` does (`720h0m0s`, `1.5s`, `300ms`).
pub fn format_go_duration(nanos: i64) -> String {
    // Assemble in reverse, then flip: mirrors Go's right-to-left buffer without its indices.
    let mut rev: Vec<u8> = Vec::with_capacity(32);
    let negative = nanos < 0;
    let mut u = nanos.unsigned_abs();
    if u < NANOS_PER_SECOND {
        rev.push(b's');
        let prec = if u == 0 {
            return "0s".to_owned();
        } else if u < NANOS_PER_MICRO {
            rev.push(b'n');
            0
        } else if u < NANOS_PER_MILLI {
            // "µ" (U+00B5) reversed byte-wise.
            rev.extend([0xb5, 0xc2]);
            3
        } else {
            rev.push(b'm');
            6
        };
        u = push_frac(&mut rev, u, prec);
        push_int_rev(&mut rev, u);
    } else {
        rev.push(b's');
        u = push_frac(&mut rev, u, 9);
        push_int_rev(&mut rev, u % 60);
        u /= 60;
        if u > 0 {
            rev.push(b'm');
            push_int_rev(&mut rev, u % 60);
            u /= 60;
            if u > 0 {
                rev.push(b'h');
                push_int_rev(&mut rev, u);
            }
        }
    }
    if negative {
        rev.push(b'-');
    }
    rev.reverse();
    String::from_utf8(rev).unwrap_or_default()
}

fn push_int_rev(out: &mut Vec<u8>, mut v: u64) {
    if v == 0 {
        out.push(b'0');
        return;
    }
    while v > 0 {
        out.push(b'0' + (v % 10) as u8);
        v /= 10;
    }
}

/// A Go duration that remembers the text it was parsed from (like `metav1.Duration`, but the
/// text round-trips unchanged). Equality compares the length of time, not the spelling.
#[derive(Clone)]
pub struct Duration {
    nanos: i64,
    text: String,
}

impl Duration {
    /// Parses Go duration text (`30s`, `720h`, `1h30m`, `1.5h`, `300ms`).
    pub fn parse(text: &str) -> Result<Self, DurationError> {
        Ok(Self {
            nanos: parse_go_duration(text)?,
            text: text.to_owned(),
        })
    }

    /// A duration of `nanos` nanoseconds, written as Go writes it (`1h0m0s`).
    pub fn from_nanos(nanos: i64) -> Self {
        Self {
            nanos,
            text: format_go_duration(nanos),
        }
    }

    /// A duration of whole seconds (saturating), written as Go writes it.
    pub fn from_secs(secs: i64) -> Self {
        Self::from_nanos(secs.saturating_mul(NANOS_PER_SECOND as i64))
    }

    /// Signed nanoseconds.
    pub fn nanos(&self) -> i64 {
        self.nanos
    }

    /// Whole milliseconds (truncated toward zero), the unit the pure crates use for time.
    pub fn millis(&self) -> i64 {
        self.nanos / NANOS_PER_MILLI as i64
    }

    /// As a `std::time::Duration`, or `None` when negative.
    pub fn to_std(&self) -> Option<std::time::Duration> {
        u64::try_from(self.nanos)
            .ok()
            .map(std::time::Duration::from_nanos)
    }

    /// The text as written (or as Go would write it, for a constructed value).
    pub fn as_str(&self) -> &str {
        &self.text
    }
}

impl PartialEq for Duration {
    fn eq(&self, other: &Self) -> bool {
        self.nanos == other.nanos
    }
}
impl Eq for Duration {}

impl std::hash::Hash for Duration {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.nanos.hash(state);
    }
}

impl fmt::Debug for Duration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Duration({:?})", self.text)
    }
}

impl fmt::Display for Duration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl std::str::FromStr for Duration {
    type Err = DurationError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

impl Serialize for Duration {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.text)
    }
}

impl<'de> Deserialize<'de> for Duration {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        Self::parse(&text).map_err(serde::de::Error::custom)
    }
}

impl JsonSchema for Duration {
    fn schema_name() -> Cow<'static, str> {
        "Duration".into()
    }
    fn inline_schema() -> bool {
        true
    }
    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({ "type": "string" })
    }
}

/// A duration that may be `Never` (Karpenter's `NillableDuration`): `None` inside means
/// disabled. Serialises back to the text it was read from, or `Never`.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct NillableDuration(pub Option<Duration>);

impl NillableDuration {
    /// `Never`.
    pub const fn never() -> Self {
        Self(None)
    }

    /// A set duration.
    pub fn of(d: Duration) -> Self {
        Self(Some(d))
    }

    /// Parses Go duration text or `Never` (case-sensitive, as upstream).
    pub fn parse(text: &str) -> Result<Self, DurationError> {
        if text == NEVER {
            Ok(Self(None))
        } else {
            Duration::parse(text).map(|d| Self(Some(d)))
        }
    }

    /// Whether it is `Never`.
    pub fn is_never(&self) -> bool {
        self.0.is_none()
    }

    /// The duration, `None` for `Never`.
    pub fn duration(&self) -> Option<&Duration> {
        self.0.as_ref()
    }

    /// The text it serialises to.
    pub fn as_str(&self) -> &str {
        self.0.as_ref().map_or(NEVER, Duration::as_str)
    }
}

impl fmt::Debug for NillableDuration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "NillableDuration({:?})", self.as_str())
    }
}

impl fmt::Display for NillableDuration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for NillableDuration {
    type Err = DurationError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

impl Serialize for NillableDuration {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for NillableDuration {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        Self::parse(&text).map_err(serde::de::Error::custom)
    }
}

impl JsonSchema for NillableDuration {
    fn schema_name() -> Cow<'static, str> {
        "NillableDuration".into()
    }
    fn inline_schema() -> bool {
        true
    }
    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({ "type": "string" })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const H: i64 = NANOS_PER_HOUR as i64;
    const M: i64 = NANOS_PER_MINUTE as i64;
    const S: i64 = NANOS_PER_SECOND as i64;

    #[test]
    fn parses_like_go() {
        // Cases from Go's time package tests.
        let cases: &[(&str, i64)] = &[
            ("0", 0),
            ("5s", 5 * S),
            ("30s", 30 * S),
            ("1478s", 1478 * S),
            ("-5s", -5 * S),
            ("+5s", 5 * S),
            ("-0", 0),
            ("+0", 0),
            ("5.0s", 5 * S),
            ("5.6s", 5 * S + 600_000_000),
            ("5.s", 5 * S),
            (".5s", 500_000_000),
            ("1.0s", S),
            ("1.00s", S),
            ("1.004s", S + 4_000_000),
            ("100.00100s", 100 * S + 1_000_000),
            ("10ns", 10),
            ("11us", 11_000),
            ("12µs", 12_000),
            ("12μs", 12_000),
            ("13ms", 13_000_000),
            ("300ms", 300_000_000),
            ("14s", 14 * S),
            ("15m", 15 * M),
            ("16h", 16 * H),
            ("720h", 720 * H),
            ("3h30m", 3 * H + 30 * M),
            ("1h30m", H + 30 * M),
            ("1.5h", H + 30 * M),
            ("10.5s4m", 4 * M + 10 * S + 500_000_000),
            ("-2m3.4s", -(2 * M + 3 * S + 400_000_000)),
            ("1h2m3s4ms5us6ns", H + 2 * M + 3 * S + 4_000_000 + 5_000 + 6),
            ("39h9m14.425s", 39 * H + 9 * M + 14 * S + 425_000_000),
            ("52763797000ns", 52_763_797_000),
            ("0.3333333333333333333h", 20 * M),
            ("9007199254740993ns", 9_007_199_254_740_993),
            ("9223372036854775807ns", i64::MAX),
            ("9223372036854775.807us", i64::MAX),
            ("-9223372036854775808ns", i64::MIN),
            ("0.100000000000000000000h", 6 * M),
        ];
        for (text, want) in cases {
            assert_eq!(parse_go_duration(text), Ok(*want), "{text}");
        }
    }

    #[test]
    fn rejects_what_go_rejects() {
        for text in [
            "",
            "3",
            "-",
            "s",
            ".",
            "-.",
            ".s",
            "+.s",
            "1d",
            "3000000h",
            "1w",
            "9223372036854775808ns",
            "9223372036854775.808us",
            "-9223372036854775809ns",
            "Never ",
            "never",
            "1h ",
            " 1h",
        ] {
            assert!(
                parse_go_duration(text).is_err(),
                "{text:?} should be rejected"
            );
        }
        assert_eq!(
            parse_go_duration("1d").unwrap_err().to_string(),
            "time: unknown unit \"d\" in duration \"1d\""
        );
        assert_eq!(
            parse_go_duration("3").unwrap_err().to_string(),
            "time: missing unit in duration \"3\""
        );
    }

    #[test]
    fn formats_like_go() {
        let cases: &[(i64, &str)] = &[
            (0, "0s"),
            (1, "1ns"),
            (1_100, "1.1µs"),
            (2_200_000, "2.2ms"),
            (300_000_000, "300ms"),
            (3_300_000_000, "3.3s"),
            (4 * M + 5 * S, "4m5s"),
            (4 * M + 5 * S + 1_000_000, "4m5.001s"),
            (5 * H + 6 * M + 7 * S + 1_000_000, "5h6m7.001s"),
            (8 * M + 1, "8m0.000000001s"),
            (720 * H, "720h0m0s"),
            (i64::MAX, "2562047h47m16.854775807s"),
            (i64::MIN, "-2562047h47m16.854775808s"),
            (-S, "-1s"),
        ];
        for (nanos, want) in cases {
            assert_eq!(format_go_duration(*nanos), *want, "{nanos}");
            assert_eq!(parse_go_duration(want), Ok(*nanos), "round trip {want}");
        }
    }

    #[test]
    fn duration_keeps_its_text() {
        let d: Duration = serde_json::from_str("\"1h30m\"").unwrap();
        assert_eq!(d.nanos(), H + 30 * M);
        assert_eq!(serde_json::to_string(&d).unwrap(), "\"1h30m\"");
        assert_eq!(
            d,
            Duration::parse("90m").unwrap(),
            "equality is by length of time"
        );
        assert_eq!(Duration::from_secs(3600).as_str(), "1h0m0s");
        assert_eq!(d.to_std(), Some(std::time::Duration::from_secs(5400)));
        assert_eq!(Duration::parse("-1s").unwrap().to_std(), None);
        assert_eq!(d.millis(), 5_400_000);
    }

    #[test]
    fn nillable_duration_accepts_never() {
        let n: NillableDuration = serde_json::from_str("\"Never\"").unwrap();
        assert!(n.is_never());
        assert_eq!(serde_json::to_string(&n).unwrap(), "\"Never\"");
        let d: NillableDuration = serde_json::from_str("\"720h\"").unwrap();
        assert_eq!(d.duration().map(Duration::nanos), Some(720 * H));
        assert_eq!(serde_json::to_string(&d).unwrap(), "\"720h\"");
        assert!(serde_json::from_str::<NillableDuration>("\"1d\"").is_err());
        assert!(serde_json::from_str::<NillableDuration>("\"never\"").is_err());
        assert!(serde_json::from_str::<NillableDuration>("30").is_err());
    }
}
