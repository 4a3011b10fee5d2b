//! One chart of the report page: an inline SVG over virtual time, with its axes, its series
//! (step lines, stacked step areas or stacked bars) and an HTML legend. Runs are told apart
//! by line style (the second run dashed, its bars hatched), categories by colour, so both runs
//! share one set of axes.

use super::axis::{self, Unit};
use super::escape::text;
use crate::timeline::ROUND_SPANS;
use karpenter_scheduling::model::Millis;
use std::fmt::Write;

/// The drawing's size in SVG units; the page scales it to its width.
const WIDTH: f64 = 640.0;
const HEIGHT: f64 = 240.0;
const LEFT: f64 = 56.0;
const RIGHT: f64 = 16.0;
const TOP: f64 = 12.0;
const BOTTOM: f64 = 44.0;

/// The most bars a bar chart has per run.
const MAX_BARS: i64 = 24;

/// How a chart draws its series.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// One step line per series.
    Lines,
    /// Step areas stacked in series order (one run only).
    Stacked,
    /// Per interval, one bar per run, stacked in series order.
    Bars,
}

/// Which span of time a sample's value covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// From its instant to the next sample (a state: nodes, cost).
    After,
    /// The interval since the previous sample (a peak or a count over the interval).
    Before,
}

impl Step {
    fn code(self) -> &'static str {
        match self {
            Step::After => "after",
            Step::Before => "before",
        }
    }
}

/// One series: a category (or the run itself) of one run.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    /// What the legend and the hover box call it.
    pub name: String,
    /// Index of its run (0: solid, 1: dashed or hatched).
    pub run: usize,
    /// Its colour.
    pub color: &'static str,
    /// One value per sample of the frame.
    pub values: Vec<f64>,
    /// A reference line rather than a run's (the hourly lower bound): drawn dotted, named
    /// alone in the hover box.
    pub reference: bool,
}

/// A legend entry: a colour for a category, or a line style for a run.
#[derive(Debug, Clone, PartialEq)]
pub struct Key {
    /// The entry's text.
    pub label: String,
    /// Its colour.
    pub color: &'static str,
    /// How it is drawn.
    pub swatch: Swatch,
}

/// How a legend entry is drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Swatch {
    /// A filled square (a category's colour).
    Box,
    /// A solid line (the first run).
    Line,
    /// A dashed line (the second run).
    Dashed,
    /// A hatched square (the second run's bars).
    Hatched,
    /// A dotted line (a reference line).
    Dotted,
}

/// The samples every chart of a page shares.
#[derive(Debug, Clone, PartialEq)]
pub struct Frame {
    /// Sample instants.
    pub at: Vec<Millis>,
    /// The end of the runs (the last sample).
    pub span: Millis,
    /// Milliseconds between two samples.
    pub interval: Millis,
}

impl Frame {
    fn x(&self, at: Millis) -> f64 {
        LEFT + (WIDTH - LEFT - RIGHT) * at as f64 / self.span.max(1) as f64
    }
}

/// A chart to draw.
#[derive(Debug, Clone, PartialEq)]
pub struct Chart {
    /// Its id on the page (`chart-{id}`) and in the page's data.
    pub id: &'static str,
    /// Its heading.
    pub title: String,
    /// A sentence under the heading: what a value means.
    pub note: String,
    /// What the values count.
    pub unit: Unit,
    /// The value axis' title.
    pub axis_title: &'static str,
    /// How the series are drawn.
    pub kind: Kind,
    /// Which span a value covers.
    pub step: Step,
    /// The series, drawn (and stacked) in order.
    pub series: Vec<Series>,
    /// The legend.
    pub legend: Vec<Key>,
    /// The run labels, by run index (the hover box and bars' tooltips name them).
    pub runs: Vec<String>,
}

/// A value axis mapping.
struct Scale {
    ticks: axis::ValueTicks,
}

impl Scale {
    fn y(&self, value: f64) -> f64 {
        HEIGHT - BOTTOM - (HEIGHT - TOP - BOTTOM) * value / self.ticks.top
    }
}

impl Chart {
    /// The chart as a `<figure>`: heading, legend, and the SVG with its axes and series.
    pub fn render(&self, frame: &Frame) -> String {
        let bars = (self.kind == Kind::Bars).then(|| Bars::new(self, frame));
        let max = match &bars {
            Some(b) => b.max(self),
            None => self.max(),
        };
        let scale = Scale {
            ticks: axis::value_ticks(max, self.unit),
        };
        let ticks = axis::time_ticks(frame.span);
        let mut svg = String::new();
        let _ = write!(
            svg,
            r#"<svg id="chart-{id}-svg" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" aria-label="{title}" data-x0="{LEFT}" data-x1="{x1}" data-top="{TOP}" data-bottom="{bottom}" data-span="{span}">"#,
            id = self.id,
            title = text(&self.title),
            x1 = WIDTH - RIGHT,
            bottom = HEIGHT - BOTTOM,
            span = frame.span as f64 / 1000.0,
        );
        self.axes(&mut svg, frame, &scale, &ticks);
        match &bars {
            Some(b) => b.render(&mut svg, self, frame, &scale),
            None if self.kind == Kind::Stacked => self.areas(&mut svg, frame, &scale),
            None => self.lines(&mut svg, frame, &scale),
        }
        // The page's script moves the cursor and fills the box under the pointer.
        let hover = self.kind != Kind::Bars;
        if hover {
            let _ = write!(
                svg,
                r#"<line class="cursor" x1="{LEFT}" x2="{LEFT}" y1="{TOP}" y2="{bottom}"/>"#,
                bottom = HEIGHT - BOTTOM,
            );
        }
        svg.push_str("</svg>");
        let mut out = String::new();
        let _ = write!(
            out,
            r#"<figure class="chart" id="chart-{id}" data-chart="{id}"><figcaption><h3>{title}</h3><p class="note">{note}</p>{legend}</figcaption>{svg}{tip}</figure>"#,
            id = self.id,
            title = text(&self.title),
            note = text(&self.note),
            legend = self.legend(),
            tip = if hover {
                r#"<div class="tip"></div>"#
            } else {
                ""
            },
        );
        out
    }

    /// The largest value drawn: of any series, or of the stack.
    fn max(&self) -> f64 {
        let len = self
            .series
            .iter()
            .map(|s| s.values.len())
            .max()
            .unwrap_or(0);
        if self.kind == Kind::Stacked {
            (0..len)
                .map(|k| self.series.iter().map(|s| value(s, k)).sum::<f64>())
                .fold(0.0, f64::max)
        } else {
            self.series
                .iter()
                .flat_map(|s| s.values.iter().copied())
                .fold(0.0, f64::max)
        }
    }

    fn axes(&self, svg: &mut String, frame: &Frame, scale: &Scale, ticks: &axis::TimeTicks) {
        let (x0, x1, bottom) = (LEFT, WIDTH - RIGHT, HEIGHT - BOTTOM);
        svg.push_str(r#"<g class="axis y-axis">"#);
        for &v in &scale.ticks.values {
            let y = scale.y(v);
            let _ = write!(
                svg,
                r#"<line class="grid" x1="{x0}" x2="{x1}" y1="{y:.1}" y2="{y:.1}"/><text x="{tx}" y="{ty:.1}" text-anchor="end">{label}</text>"#,
                tx = x0 - 6.0,
                ty = y + 4.0,
                label = axis::value_label(v, scale.ticks.step, self.unit),
            );
        }
        let _ = write!(
            svg,
            r#"<text class="axis-title" transform="translate(14 {my:.1}) rotate(-90)" text-anchor="middle">{title}</text></g>"#,
            my = (TOP + bottom) / 2.0,
            title = text(self.axis_title),
        );
        svg.push_str(r#"<g class="axis x-axis">"#);
        let _ = write!(
            svg,
            r#"<line class="baseline" x1="{x0}" x2="{x1}" y1="{bottom}" y2="{bottom}"/>"#
        );
        for &at in &ticks.at {
            let x = frame.x(at);
            let _ = write!(
                svg,
                r#"<line class="tick" x1="{x:.1}" x2="{x:.1}" y1="{bottom}" y2="{y2}"/><text x="{x:.1}" y="{ty}" text-anchor="middle">{label}</text>"#,
                y2 = bottom + 5.0,
                ty = bottom + 18.0,
                label = axis::time_label(at, ticks.style),
            );
        }
        let _ = write!(
            svg,
            r#"<text class="axis-title" x="{mx}" y="{ty}" text-anchor="middle">{title}</text></g>"#,
            mx = (x0 + x1) / 2.0,
            ty = HEIGHT - 6.0,
            title = ticks.style.title(),
        );
    }

    fn lines(&self, svg: &mut String, frame: &Frame, scale: &Scale) {
        svg.push_str(r#"<g class="series-group">"#);
        for s in &self.series {
            let points = step_points(frame, &s.values, self.step, scale);
            let _ = write!(
                svg,
                r#"<path class="series line{dash}" data-series="{name}" data-run="{run}" stroke="{color}" d="{d}"/>"#,
                dash = if s.reference {
                    " dotted"
                } else if s.run > 0 {
                    " dashed"
                } else {
                    ""
                },
                name = text(&s.name),
                run = text(if s.reference {
                    "reference"
                } else {
                    self.run_label(s.run)
                }),
                color = s.color,
                d = path(&points, false),
            );
        }
        svg.push_str("</g>");
    }

    fn areas(&self, svg: &mut String, frame: &Frame, scale: &Scale) {
        svg.push_str(r#"<g class="series-group">"#);
        let len = frame.at.len();
        let mut below = vec![0.0; len];
        for s in &self.series {
            let above: Vec<f64> = (0..len).map(|k| below[k] + value(s, k)).collect();
            let mut points = step_points(frame, &above, self.step, scale);
            let mut floor = step_points(frame, &below, self.step, scale);
            floor.reverse();
            points.extend(floor);
            let _ = write!(
                svg,
                r#"<path class="series area" data-series="{name}" data-run="{run}" fill="{color}" stroke="{color}" d="{d}"/>"#,
                name = text(&s.name),
                run = text(self.run_label(s.run)),
                color = s.color,
                d = path(&points, true),
            );
            below = above;
        }
        svg.push_str("</g>");
    }

    fn run_label(&self, run: usize) -> &str {
        self.runs.get(run).map(String::as_str).unwrap_or("")
    }

    fn legend(&self) -> String {
        let mut out = String::from(r#"<ul class="legend">"#);
        for key in &self.legend {
            let swatch = match key.swatch {
                Swatch::Box => format!(
                    r#"<rect x="2" y="1" width="12" height="12" fill="{}"/>"#,
                    key.color
                ),
                Swatch::Hatched => format!(
                    r#"<rect class="hatched" x="2" y="1" width="12" height="12" fill="{c}" stroke="{c}"/>"#,
                    c = key.color
                ),
                Swatch::Line => format!(
                    r#"<line x1="0" x2="24" y1="7" y2="7" stroke="{}" stroke-width="2.5"/>"#,
                    key.color
                ),
                Swatch::Dashed => format!(
                    r#"<line class="dashed" x1="0" x2="24" y1="7" y2="7" stroke="{}" stroke-width="2.5"/>"#,
                    key.color
                ),
                Swatch::Dotted => format!(
                    r#"<line class="dotted" x1="0" x2="24" y1="7" y2="7" stroke="{}" stroke-width="2.5"/>"#,
                    key.color
                ),
            };
            let _ = write!(
                out,
                r#"<li><svg class="swatch" width="24" height="14" viewBox="0 0 24 14" aria-hidden="true">{swatch}</svg>{}</li>"#,
                text(&key.label)
            );
        }
        out.push_str("</ul>");
        out
    }

    /// What the page's script needs to show values under the pointer.
    pub fn hover_data(&self) -> Option<serde_json::Value> {
        if self.kind == Kind::Bars {
            // Bars carry their values in their own tooltips.
            return None;
        }
        let series: Vec<serde_json::Value> = self
            .series
            .iter()
            .map(|s| {
                let name = if !s.reference && self.runs.len() > 1 && s.name != self.run_label(s.run)
                {
                    format!("{} · {}", self.run_label(s.run), s.name)
                } else {
                    s.name.clone()
                };
                serde_json::json!({"name": name, "color": s.color, "v": s.values})
            })
            .collect();
        Some(serde_json::json!({
            "step": self.step.code(),
            "unit": match self.unit { Unit::Dollars => "$", Unit::Count => "" },
            "series": series,
        }))
    }
}

fn value(series: &Series, k: usize) -> f64 {
    series.values.get(k).copied().unwrap_or(0.0)
}

/// The corners of a step line through `values`, in SVG units, without points that add
/// nothing (a run of equal values is one segment).
fn step_points(frame: &Frame, values: &[f64], step: Step, scale: &Scale) -> Vec<(f64, f64)> {
    let xs: Vec<f64> = frame.at.iter().map(|&at| frame.x(at)).collect();
    let ys: Vec<f64> = (0..xs.len())
        .map(|k| scale.y(values.get(k).copied().unwrap_or(0.0)))
        .collect();
    let mut corners = Vec::with_capacity(2 * xs.len());
    match step {
        Step::After => {
            for k in 0..xs.len() {
                corners.push((xs[k], ys[k]));
                if k + 1 < xs.len() {
                    corners.push((xs[k + 1], ys[k]));
                }
            }
        }
        Step::Before => {
            for k in 0..xs.len() {
                corners.push((xs[k.saturating_sub(1)], ys[k]));
                corners.push((xs[k], ys[k]));
            }
        }
    }
    simplify(corners)
}

/// Drops repeated points and the middle one of three on one horizontal or vertical line.
fn simplify(points: Vec<(f64, f64)>) -> Vec<(f64, f64)> {
    let mut out: Vec<(f64, f64)> = Vec::with_capacity(points.len());
    for p in points {
        if out.last() == Some(&p) {
            continue;
        }
        if let [.., a, b] = out.as_slice() {
            let same_row = a.1 == b.1 && b.1 == p.1;
            let same_column = a.0 == b.0 && b.0 == p.0;
            if same_row || same_column {
                out.pop();
            }
        }
        out.push(p);
    }
    out
}

/// SVG path data through `points` (closed when `close`), to a tenth of a unit.
fn path(points: &[(f64, f64)], close: bool) -> String {
    let mut d = String::with_capacity(points.len() * 12);
    for (i, (x, y)) in points.iter().enumerate() {
        let _ = write!(d, "{}{x:.1} {y:.1}", if i == 0 { "M" } else { "L" });
    }
    if close {
        d.push('Z');
    }
    d
}

/// The span of a bar: the shortest round span that is a whole number of samples and cuts
/// the run into at most [`MAX_BARS`].
pub fn bar_span(frame: &Frame) -> Millis {
    let interval = frame.interval.max(1);
    ROUND_SPANS
        .iter()
        .copied()
        .find(|&w| w % interval == 0 && (frame.span + w - 1) / w <= MAX_BARS)
        .unwrap_or_else(|| interval * (frame.span / interval / MAX_BARS + 1))
}

/// A bar chart's intervals: a round span of whole samples, at most [`MAX_BARS`] over the
/// run, each summing the samples whose interval it holds.
struct Bars {
    width: Millis,
    count: usize,
    /// Per series, per bar.
    sums: Vec<Vec<f64>>,
}

impl Bars {
    fn new(chart: &Chart, frame: &Frame) -> Self {
        let width = bar_span(frame);
        let count = usize::try_from((frame.span + width - 1) / width)
            .unwrap_or(1)
            .max(1);
        let sums = chart
            .series
            .iter()
            .map(|s| {
                let mut sums = vec![0.0; count];
                for (k, &at) in frame.at.iter().enumerate() {
                    // Sample k covers (previous sample, at]: bar j covers (j·width, (j+1)·width].
                    let bar = usize::try_from((at + width - 1) / width - 1).unwrap_or(0);
                    sums[bar.min(count - 1)] += value(s, k);
                }
                sums
            })
            .collect();
        Self { width, count, sums }
    }

    /// The tallest stack (each run stacks its own bar).
    fn max(&self, chart: &Chart) -> f64 {
        let runs = chart.series.iter().map(|s| s.run + 1).max().unwrap_or(0);
        (0..self.count)
            .flat_map(|j| {
                (0..runs).map(move |run| {
                    chart
                        .series
                        .iter()
                        .zip(&self.sums)
                        .filter(|(s, _)| s.run == run)
                        .map(|(_, sums)| sums[j])
                        .sum::<f64>()
                })
            })
            .fold(0.0, f64::max)
    }

    fn render(&self, svg: &mut String, chart: &Chart, frame: &Frame, scale: &Scale) {
        let runs = chart.runs.len().max(1);
        svg.push_str(r#"<g class="series-group">"#);
        let style = axis::time_ticks(frame.span).style;
        for j in 0..self.count {
            let start = j as Millis * self.width;
            let end = (start + self.width).min(frame.span);
            let (x0, x1) = (frame.x(start), frame.x(end));
            let slot = (x1 - x0) * 0.8 / runs as f64;
            for run in 0..runs {
                let x = x0 + (x1 - x0) * 0.1 + slot * run as f64;
                let mut base = 0.0;
                for (s, sums) in chart.series.iter().zip(&self.sums) {
                    let v = sums[j];
                    if s.run != run || v <= 0.0 {
                        continue;
                    }
                    let (top, bottom) = (scale.y(base + v), scale.y(base));
                    let _ = write!(
                        svg,
                        r#"<rect class="series bar{hatch}" data-series="{name}" data-run="{run_label}" x="{x:.1}" y="{top:.1}" width="{w:.1}" height="{h:.1}" fill="{color}" stroke="{color}"><title>{from}–{to} · {run_label} · {name}: {v}</title></rect>"#,
                        hatch = if run > 0 { " hatched" } else { "" },
                        name = text(&s.name),
                        run_label = text(chart.run_label(run)),
                        w = (slot - 1.0).max(0.5),
                        h = bottom - top,
                        color = s.color,
                        from = axis::time_label(start, style),
                        to = axis::time_label(end, style),
                    );
                    base += v;
                }
            }
        }
        svg.push_str("</g>");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(at: &[Millis]) -> Frame {
        Frame {
            at: at.to_vec(),
            span: *at.last().unwrap(),
            interval: at[1] - at[0],
        }
    }

    fn scale(top: f64) -> Scale {
        Scale {
            ticks: axis::value_ticks(top, Unit::Count),
        }
    }

    #[test]
    fn step_lines_keep_only_the_corners() {
        let f = frame(&[0, 1000, 2000, 3000, 4000]);
        let s = scale(5.0);
        let after = step_points(&f, &[0.0, 0.0, 5.0, 5.0, 5.0], Step::After, &s);
        let (x, y0, y5) = (|at| f.x(at), s.y(0.0), s.y(5.0));
        assert_eq!(
            after,
            [(x(0), y0), (x(2000), y0), (x(2000), y5), (x(4000), y5)]
        );
        // The interval before a sample: 5 over (1 s, 2 s].
        let before = step_points(&f, &[0.0, 0.0, 5.0, 0.0, 0.0], Step::Before, &s);
        assert_eq!(
            before,
            [
                (x(0), y0),
                (x(1000), y0),
                (x(1000), y5),
                (x(2000), y5),
                (x(2000), y0),
                (x(4000), y0)
            ]
        );
    }

    #[test]
    fn bars_sum_the_samples_of_their_interval() {
        // 2 hours in 2-minute samples: 10-minute bars, the first round span that is whole
        // samples and cuts the run into at most 24.
        let at: Vec<Millis> = (0..=60).map(|k| k * 120_000).collect();
        let f = frame(&at);
        let mut values = vec![0.0; 61];
        values[0] = 1.0; // at 0: the first bar
        values[15] = 2.0; // (28 min, 30 min]: the third bar, (20 min, 30 min]
        values[16] = 4.0; // (30 min, 32 min]: the fourth
        values[60] = 1.0; // the last
        let chart = Chart {
            id: "t",
            title: String::new(),
            note: String::new(),
            unit: Unit::Count,
            axis_title: "",
            kind: Kind::Bars,
            step: Step::Before,
            series: vec![
                Series {
                    name: "Empty".into(),
                    run: 0,
                    color: "#000",
                    values: values.clone(),
                    reference: false,
                },
                Series {
                    name: "Empty".into(),
                    run: 1,
                    color: "#000",
                    values,
                    reference: false,
                },
            ],
            legend: vec![],
            runs: vec!["a".into(), "b".into()],
        };
        let bars = Bars::new(&chart, &f);
        assert_eq!(bars.width, 10 * 60_000);
        assert_eq!(bars.count, 12);
        assert_eq!(bars.sums[0][..4], [1.0, 0.0, 2.0, 4.0]);
        assert_eq!(bars.sums[0][11], 1.0);
        // Each run's bar is its own stack: the two runs' 4 nodes do not add up.
        assert_eq!(bars.sums[1], bars.sums[0]);
        assert_eq!(bars.max(&chart), 4.0);
    }
}
