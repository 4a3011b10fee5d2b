//! Axes of the report's charts: round ticks for values and for virtual time, and their
//! labels.

use crate::timeline::{DAY, MINUTE, ROUND_SPANS, SECOND};
use karpenter_scheduling::model::Millis;

/// What a value axis counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    /// Dollars (per hour): ticks may be fractions, labels read `$0.25`.
    Dollars,
    /// Whole things (nodes, pods): ticks are whole numbers.
    Count,
}

/// Ticks of a value axis from 0.
#[derive(Debug, Clone, PartialEq)]
pub struct ValueTicks {
    /// The top of the axis: a tick at or above the largest value.
    pub top: f64,
    /// The distance between ticks.
    pub step: f64,
    /// The ticks, 0 and `top` included.
    pub values: Vec<f64>,
}

/// Round ticks (1, 2 or 5 × a power of ten apart, at most 6 of them) from 0 to at least
/// `max`. An axis with nothing above 0 still spans one step.
pub fn value_ticks(max: f64, unit: Unit) -> ValueTicks {
    let max = if max.is_finite() && max > 0.0 {
        max
    } else {
        1.0
    };
    let raw = max / 5.0;
    let power = 10f64.powf(raw.log10().floor());
    let fraction = raw / power;
    let round = if fraction <= 1.0 {
        1.0
    } else if fraction <= 2.0 {
        2.0
    } else if fraction <= 5.0 {
        5.0
    } else {
        10.0
    };
    let mut step = round * power;
    if unit == Unit::Count {
        step = step.round().max(1.0);
    }
    let count = (max / step - 1e-9).ceil().max(1.0) as usize;
    let values = (0..=count).map(|k| k as f64 * step).collect();
    ValueTicks {
        top: count as f64 * step,
        step,
        values,
    }
}

/// A value axis label: `$0.25` (with as many decimals as the step needs, at least two) or a
/// whole number.
pub fn value_label(value: f64, step: f64, unit: Unit) -> String {
    match unit {
        Unit::Dollars => {
            let decimals = (-step.log10()).ceil().max(2.0) as usize;
            format!("${value:.decimals$}")
        }
        Unit::Count => format!("{value:.0}"),
    }
}

/// How instants are written on a time axis.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimeStyle {
    /// `HH:MM` (hours count on past 24).
    Clock,
    /// `HH:MM:SS`, for runs of a few minutes.
    ClockSeconds,
    /// `2d` on whole days, `2d 06:00` between them, for runs longer than a day.
    Days,
}

impl TimeStyle {
    /// How the axis says what its labels mean.
    pub fn title(self) -> &'static str {
        match self {
            TimeStyle::Clock => "time since start (hh:mm)",
            TimeStyle::ClockSeconds => "time since start (hh:mm:ss)",
            TimeStyle::Days => "time since start (days, hh:mm)",
        }
    }

    /// The name the page's script knows the style by.
    pub fn code(self) -> &'static str {
        match self {
            TimeStyle::Clock => "hm",
            TimeStyle::ClockSeconds => "hms",
            TimeStyle::Days => "d",
        }
    }
}

/// The ticks of a time axis and how to write them.
#[derive(Debug, Clone, PartialEq)]
pub struct TimeTicks {
    /// Ticks from 0, at most 9, the last at or before the end.
    pub at: Vec<Millis>,
    /// How they are written.
    pub style: TimeStyle,
}

/// Round time ticks over a run of `span`: at most 8 intervals.
pub fn time_ticks(span: Millis) -> TimeTicks {
    let span = span.max(SECOND);
    let step = ROUND_SPANS
        .iter()
        .copied()
        .find(|&s| span / s <= 8)
        .unwrap_or_else(|| (span / 8 / DAY + 1) * DAY);
    let style = if span > DAY {
        TimeStyle::Days
    } else if step < MINUTE {
        TimeStyle::ClockSeconds
    } else {
        TimeStyle::Clock
    };
    TimeTicks {
        at: (0..=span / step).map(|k| k * step).collect(),
        style,
    }
}

/// `at` written in `style`.
pub fn time_label(at: Millis, style: TimeStyle) -> String {
    let s = at / SECOND;
    let (h, m, sec) = (s / 3600, (s / 60) % 60, s % 60);
    match style {
        TimeStyle::Clock => format!("{h:02}:{m:02}"),
        TimeStyle::ClockSeconds => format!("{h:02}:{m:02}:{sec:02}"),
        TimeStyle::Days => {
            let (d, h) = (h / 24, h % 24);
            if at % DAY == 0 {
                format!("{d}d")
            } else {
                format!("{d}d {h:02}:{m:02}")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::timeline::HOUR;

    #[test]
    fn value_ticks_are_round_and_cover_the_maximum() {
        let t = value_ticks(0.6919, Unit::Dollars);
        assert_eq!(t.step, 0.2);
        assert!((t.top - 0.8).abs() < 1e-12, "{t:?}");
        assert_eq!(t.values.len(), 5);
        let t = value_ticks(13.0, Unit::Count);
        assert_eq!((t.step, t.top, t.values.len()), (5.0, 15.0, 4));
        let t = value_ticks(3.0, Unit::Count);
        assert_eq!((t.step, t.top), (1.0, 3.0));
        let t = value_ticks(0.0, Unit::Count);
        assert_eq!(t.values, [0.0, 1.0]);
        let t = value_ticks(100.0, Unit::Count);
        assert_eq!((t.step, t.top), (20.0, 100.0));
    }

    #[test]
    fn value_labels_carry_the_unit() {
        assert_eq!(value_label(0.4, 0.2, Unit::Dollars), "$0.40");
        assert_eq!(value_label(0.05, 0.05, Unit::Dollars), "$0.05");
        assert_eq!(value_label(0.005, 0.005, Unit::Dollars), "$0.005");
        assert_eq!(value_label(10.0, 5.0, Unit::Count), "10");
    }

    #[test]
    fn time_ticks_suit_the_span() {
        let day = time_ticks(DAY);
        assert_eq!(day.at.len(), 9);
        assert_eq!(day.at[1], 3 * HOUR);
        assert_eq!(day.style, TimeStyle::Clock);
        assert_eq!(time_label(day.at[8], day.style), "24:00");
        let short = time_ticks(2 * MINUTE);
        assert_eq!(short.at[1], 15 * SECOND);
        assert_eq!(short.style, TimeStyle::ClockSeconds);
        assert_eq!(time_label(short.at[1], short.style), "00:00:15");
        let week = time_ticks(7 * DAY);
        assert_eq!(week.at[1], DAY);
        assert_eq!(week.style, TimeStyle::Days);
        assert_eq!(time_label(week.at[3], week.style), "3d");
        assert_eq!(time_label(DAY + 6 * HOUR, TimeStyle::Days), "1d 06:00");
        assert_eq!(time_ticks(30 * MINUTE).at[1], 5 * MINUTE);
        assert!(time_ticks(400 * DAY).at.len() <= 9);
    }
}
