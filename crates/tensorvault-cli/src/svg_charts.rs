//! Small SVG charts for `store report`, drawn with `plotters` (SVG backend only): a
//! stacked area chart, a line chart and a stacked bar chart. Each returns one `<svg>`
//! element as a string, ready to inline into HTML.

use plotters::coord::Shift;
use plotters::prelude::*;

/// Chart size in pixels.
const W: u32 = 760;
const H: u32 = 340;

/// One named series of a chart.
pub struct Series<'a> {
    /// Legend label.
    pub label: &'a str,
    /// Colour.
    pub color: RGBColor,
    /// One value per x (per category for bar charts).
    pub values: Vec<f64>,
}

/// Colours of tiers 0..3, hot to cold.
pub const TIER_COLORS: [RGBColor; 4] = [
    RGBColor(214, 39, 40),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(31, 119, 180),
];

fn plot_err<E: std::fmt::Debug>(e: E) -> String {
    format!("chart: {e:?}")
}

/// Render `draw` into an SVG string.
fn svg(
    draw: impl FnOnce(&DrawingArea<SVGBackend<'_>, Shift>) -> Result<(), String>,
) -> Result<String, String> {
    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, (W, H)).into_drawing_area();
        root.fill(&WHITE).map_err(plot_err)?;
        draw(&root)?;
        root.present().map_err(plot_err)?;
    }
    Ok(out)
}

/// An axis tick: whole numbers without decimals, others with up to two.
fn tick(v: &f64) -> String {
    if (v - v.round()).abs() < 1e-9 {
        format!("{v:.0}")
    } else {
        let t = format!("{v:.2}");
        t.trim_end_matches('0').trim_end_matches('.').to_owned()
    }
}

fn y_max(v: f64) -> f64 {
    if v > 0.0 {
        v * 1.08
    } else {
        1.0
    }
}

fn x_range(xs: &[f64]) -> std::ops::Range<f64> {
    let lo = xs.first().copied().unwrap_or(0.0);
    let hi = xs.last().copied().unwrap_or(1.0);
    if hi > lo {
        lo..hi
    } else {
        lo..lo + 1.0
    }
}

/// Stacked areas: series `i` is drawn on top of series `0..i`.
///
/// # Errors
/// A plotting error, as text.
pub fn stacked_area(
    title: &str,
    x_desc: &str,
    y_desc: &str,
    xs: &[f64],
    series: &[Series<'_>],
) -> Result<String, String> {
    let mut tops: Vec<Vec<f64>> = Vec::with_capacity(series.len());
    let mut acc = vec![0.0; xs.len()];
    for s in series {
        for (a, v) in acc.iter_mut().zip(&s.values) {
            *a += v;
        }
        tops.push(acc.clone());
    }
    let ymax = y_max(acc.iter().copied().fold(0.0, f64::max));
    svg(|root| {
        let mut chart = ChartBuilder::on(root)
            .caption(title, ("sans-serif", 18))
            .margin(12)
            .x_label_area_size(36)
            .y_label_area_size(64)
            .build_cartesian_2d(x_range(xs), 0.0..ymax)
            .map_err(plot_err)?;
        chart
            .configure_mesh()
            .x_desc(x_desc)
            .y_desc(y_desc)
            .x_label_formatter(&tick)
            .y_label_formatter(&tick)
            .light_line_style(WHITE.mix(0.0))
            .draw()
            .map_err(plot_err)?;
        for (i, s) in series.iter().enumerate() {
            let zero = vec![0.0; xs.len()];
            let below = if i == 0 { &zero } else { &tops[i - 1] };
            let mut pts: Vec<(f64, f64)> =
                xs.iter().copied().zip(tops[i].iter().copied()).collect();
            pts.extend(xs.iter().copied().zip(below.iter().copied()).rev());
            let color = s.color;
            chart
                .draw_series(std::iter::once(Polygon::new(pts, color.mix(0.75).filled())))
                .map_err(plot_err)?
                .label(s.label)
                .legend(move |(x, y)| {
                    Rectangle::new([(x, y - 5), (x + 12, y + 5)], color.filled())
                });
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK.mix(0.4))
            .draw()
            .map_err(plot_err)
    })
}

/// Lines, one per series.
///
/// # Errors
/// A plotting error, as text.
pub fn lines(
    title: &str,
    x_desc: &str,
    y_desc: &str,
    xs: &[f64],
    series: &[Series<'_>],
) -> Result<String, String> {
    let ymax = y_max(
        series
            .iter()
            .flat_map(|s| s.values.iter().copied())
            .fold(0.0, f64::max),
    );
    svg(|root| {
        let mut chart = ChartBuilder::on(root)
            .caption(title, ("sans-serif", 18))
            .margin(12)
            .x_label_area_size(36)
            .y_label_area_size(64)
            .build_cartesian_2d(x_range(xs), 0.0..ymax)
            .map_err(plot_err)?;
        chart
            .configure_mesh()
            .x_desc(x_desc)
            .y_desc(y_desc)
            .x_label_formatter(&tick)
            .y_label_formatter(&tick)
            .light_line_style(WHITE.mix(0.0))
            .draw()
            .map_err(plot_err)?;
        for s in series {
            let color = s.color;
            chart
                .draw_series(std::iter::once(PathElement::new(
                    xs.iter()
                        .copied()
                        .zip(s.values.iter().copied())
                        .collect::<Vec<_>>(),
                    color.stroke_width(2),
                )))
                .map_err(plot_err)?
                .label(s.label)
                .legend(move |(x, y)| {
                    PathElement::new([(x, y), (x + 14, y)], color.stroke_width(2))
                });
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK.mix(0.4))
            .draw()
            .map_err(plot_err)
    })
}

/// Stacked bars over named categories (a histogram when the categories are bins), with
/// a legend of the series when `legend`.
///
/// # Errors
/// A plotting error, as text.
pub fn stacked_bars(
    title: &str,
    x_desc: &str,
    y_desc: &str,
    categories: &[String],
    series: &[Series<'_>],
    legend: bool,
) -> Result<String, String> {
    let n = categories.len();
    let mut acc = vec![0.0; n];
    let mut bands = Vec::with_capacity(series.len());
    for s in series {
        let lo = acc.clone();
        for (a, v) in acc.iter_mut().zip(&s.values) {
            *a += v;
        }
        bands.push((lo, acc.clone()));
    }
    // Headroom for the legend in the upper right corner.
    let ymax = y_max(acc.iter().copied().fold(0.0, f64::max)) * if legend { 1.6 } else { 1.0 };
    svg(|root| {
        let mut chart = ChartBuilder::on(root)
            .caption(title, ("sans-serif", 18))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(64)
            // A segmented 0..m has m + 1 segments.
            .build_cartesian_2d((0..n.saturating_sub(1)).into_segmented(), 0.0..ymax)
            .map_err(plot_err)?;
        chart
            .configure_mesh()
            .x_desc(x_desc)
            .y_desc(y_desc)
            .x_labels(n)
            .x_label_formatter(&|v| match v {
                SegmentValue::CenterOf(i) => categories.get(*i).cloned().unwrap_or_default(),
                _ => String::new(),
            })
            .y_label_formatter(&tick)
            .light_line_style(WHITE.mix(0.0))
            .disable_x_mesh()
            .draw()
            .map_err(plot_err)?;
        for (s, (lo, hi)) in series.iter().zip(&bands) {
            let color = s.color;
            let bars = (0..n).filter(|&i| hi[i] > lo[i]).map(|i| {
                let mut r = Rectangle::new(
                    [
                        (SegmentValue::Exact(i), lo[i]),
                        (SegmentValue::Exact(i + 1), hi[i]),
                    ],
                    color.mix(0.8).filled(),
                );
                r.set_margin(0, 0, 4, 4);
                r
            });
            chart
                .draw_series(bars)
                .map_err(plot_err)?
                .label(s.label)
                .legend(move |(x, y)| {
                    Rectangle::new([(x, y - 5), (x + 12, y + 5)], color.filled())
                });
        }
        if !legend {
            return Ok(());
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperRight)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK.mix(0.4))
            .draw()
            .map_err(plot_err)
    })
}
