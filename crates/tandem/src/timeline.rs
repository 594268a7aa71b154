//! Failover timeline charts: throughput over time with the kill and the failover gap marked.
//!
//! `tandem demo` and `tandem bench failover` bucket the replies they see into a [`Timeline`];
//! [`render`] draws it as a PNG or an SVG file.

use std::path::Path;
use std::sync::OnceLock;

use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

/// What `tandem demo` and `tandem bench failover` measured, bucketed for a chart.
#[derive(Debug, Clone, Default)]
pub struct Timeline {
    /// The chart's title.
    pub title: String,
    /// The width of one bucket in milliseconds, e.g. 10.
    pub bucket_ms: u32,
    /// Replies released per bucket, bucket 0 starting at t = 0.
    pub replies: Vec<u64>,
    /// When the primary was killed (ms since t = 0).
    pub kill_ms: Option<f64>,
    /// The last reply from the old primary and the first from the new (ms since t = 0).
    pub gap_ms: Option<(f64, f64)>,
    /// A few summary lines drawn in a corner: "gap 7.3 ms", "lost 0", ...
    pub notes: Vec<String>,
}

/// The image width in pixels.
const WIDTH: u32 = 1200;
/// The image height in pixels.
const HEIGHT: u32 = 600;

/// The family every text style below asks for; [`register_font`] fills it in.
const FONT: &str = "sans-serif";

/// DejaVu Sans 2.37 (Bitstream Vera license, see `assets/DejaVuSans-LICENSE.txt`).
///
/// It is embedded so that PNG text never depends on the fonts installed where `tandem` runs.
static FONT_BYTES: &[u8] = include_bytes!("../assets/DejaVuSans.ttf");

const THROUGHPUT: RGBColor = RGBColor(31, 119, 180);
const KILL: RGBColor = RGBColor(214, 39, 40);
const GAP: RGBColor = RGBColor(255, 127, 14);
const GAP_TEXT: RGBColor = RGBColor(180, 80, 0);
const GRID: RGBColor = RGBColor(225, 225, 225);
const PANEL_BORDER: RGBColor = RGBColor(190, 190, 190);
const TEXT: RGBColor = RGBColor(40, 40, 40);

/// A gap narrower than this many pixels is widened to it so that it stays visible; its label
/// still gives the measured length.
const MIN_GAP_PX: f64 = 10.0;

/// Writes the chart to `path`: PNG if it ends in .png, SVG if .svg; anything else is an error
/// naming the path and the accepted extensions.
pub fn render(timeline: &Timeline, path: &Path) -> Result<(), String> {
    let fail = |err: String| format!("cannot draw the timeline to {}: {err}", path.display());
    let extension = path
        .extension()
        .and_then(|ext| ext.to_str())
        .map(str::to_ascii_lowercase);
    let png = match extension.as_deref() {
        Some("png") => true,
        Some("svg") => false,
        _ => {
            return Err(format!(
                "cannot draw the timeline to {}: the file name must end in .png or .svg",
                path.display()
            ));
        }
    };
    if timeline.bucket_ms == 0 {
        return Err(fail("the bucket width is 0 ms".to_string()));
    }
    register_font().clone().map_err(fail)?;
    if png {
        let root = BitMapBackend::new(path, (WIDTH, HEIGHT)).into_drawing_area();
        draw(&root, timeline)
            .and_then(|()| root.present())
            .map_err(|err| fail(err.to_string()))
    } else {
        let root = SVGBackend::new(path, (WIDTH, HEIGHT)).into_drawing_area();
        draw(&root, timeline)
            .and_then(|()| root.present())
            .map_err(|err| fail(err.to_string()))
    }
}

/// Registers the embedded font as [`FONT`] the first time it is called.
///
/// The bitmap backend draws text with `ab_glyph`, which only knows registered fonts: without
/// this every text fails with `FontUnavailable`. The SVG backend writes text as text, but it
/// measures it with the same font to lay out the labels.
fn register_font() -> &'static Result<(), String> {
    static REGISTERED: OnceLock<Result<(), String>> = OnceLock::new();
    REGISTERED.get_or_init(|| {
        plotters::style::register_font(FONT, FontStyle::Normal, FONT_BYTES)
            .map_err(|_| "the embedded font DejaVuSans.ttf does not parse".to_string())
    })
}

/// Draws the whole chart: the title, the throughput plot, and the legend and notes panel.
fn draw<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    timeline: &Timeline,
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    root.fill(&WHITE)?;
    let body = root
        .margin(8, 0, 0, 0)
        .titled(&timeline.title, (FONT, 28).into_font().color(&TEXT))?;
    let panel_width = panel_width(root, timeline)?;
    let (plot, panel) = body.split_horizontally(WIDTH - panel_width);
    draw_plot(&plot, timeline)?;
    draw_panel(&panel, timeline)
}

/// One line of the panel on the right: its text and, for a legend entry, the swatch before it.
struct PanelLine {
    swatch: Option<Swatch>,
    text: String,
}

/// The small sample of a series drawn before its legend entry.
#[derive(Clone, Copy)]
enum Swatch {
    Throughput,
    Kill,
    Gap,
}

const PANEL_FONT: u32 = 17;
const PANEL_LINE: i32 = 26;
const PANEL_PAD: i32 = 14;
const PANEL_RULE: i32 = 12;
const SWATCH_WIDTH: i32 = 28;

/// The legend entries for what the chart shows, then the notes.
fn panel_lines(timeline: &Timeline) -> Vec<PanelLine> {
    let mut lines = vec![PanelLine {
        swatch: Some(Swatch::Throughput),
        text: "throughput".to_string(),
    }];
    if timeline.kill_ms.is_some_and(f64::is_finite) {
        lines.push(PanelLine {
            swatch: Some(Swatch::Kill),
            text: "primary killed".to_string(),
        });
    }
    if gap(timeline).is_some() {
        lines.push(PanelLine {
            swatch: Some(Swatch::Gap),
            text: "failover gap".to_string(),
        });
    }
    for note in &timeline.notes {
        lines.push(PanelLine {
            swatch: None,
            text: note.clone(),
        });
    }
    lines
}

/// The panel is as wide as its longest line, within bounds that leave the plot most of the image.
fn panel_width<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    timeline: &Timeline,
) -> Result<u32, DrawingAreaErrorKind<DB::ErrorType>> {
    let style = TextStyle::from((FONT, PANEL_FONT).into_font());
    let mut widest = 0;
    for line in panel_lines(timeline) {
        let swatch = if line.swatch.is_some() {
            SWATCH_WIDTH as u32 + 10
        } else {
            0
        };
        widest = widest.max(root.estimate_text_size(&line.text, &style)?.0 + swatch);
    }
    Ok((widest + 3 * PANEL_PAD as u32).clamp(200, WIDTH * 2 / 5))
}

/// The gap with its ends in order, if it was measured.
fn gap(timeline: &Timeline) -> Option<(f64, f64)> {
    let (a, b) = timeline.gap_ms?;
    (a.is_finite() && b.is_finite()).then(|| (a.min(b), a.max(b)))
}

/// Draws the axes, the throughput, the gap band and the kill line.
fn draw_plot<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    timeline: &Timeline,
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    let bucket = f64::from(timeline.bucket_ms);
    let per_second = 1000.0 / bucket;
    let rates: Vec<f64> = timeline
        .replies
        .iter()
        .map(|&n| n as f64 * per_second)
        .collect();
    let kill = timeline.kill_ms.filter(|ms| ms.is_finite());
    let gap = gap(timeline);

    // The x axis covers every bucket and both markers; the y axis leaves the top fifth free
    // for the kill and gap labels.
    let mut x_end = rates.len() as f64 * bucket;
    for ms in kill.into_iter().chain(gap.map(|(_, end)| end)) {
        x_end = x_end.max(ms + bucket);
    }
    let x_end = if x_end > 0.0 { x_end } else { bucket };
    let peak = rates.iter().copied().fold(0.0, f64::max);
    let y_top = if peak > 0.0 { peak * 1.25 } else { 1.0 };

    let mut chart = ChartBuilder::on(area)
        .margin_left(10)
        .margin_right(20)
        .margin_top(10)
        .margin_bottom(10)
        .x_label_area_size(55)
        .y_label_area_size(85)
        .build_cartesian_2d(0.0..x_end, 0.0..y_top)?;
    chart
        .configure_mesh()
        .x_desc("time (ms)")
        .y_desc("tx/s")
        .axis_desc_style((FONT, 20).into_font().color(&TEXT))
        .label_style((FONT, 16).into_font().color(&TEXT))
        .x_label_formatter(&|ms| tick(*ms))
        .y_label_formatter(&|rate| compact(*rate))
        .x_labels(12)
        .y_labels(8)
        .bold_line_style(GRID)
        .max_light_lines(0)
        .draw()?;

    // Each bucket is drawn as a flat step over its whole width: the rate is an average over it.
    let mut steps = Vec::with_capacity(rates.len() * 2);
    for (i, &rate) in rates.iter().enumerate() {
        steps.push((i as f64 * bucket, rate));
        steps.push(((i + 1) as f64 * bucket, rate));
    }
    if !steps.is_empty() {
        let mut outline = Vec::with_capacity(steps.len() + 2);
        outline.push((0.0, 0.0));
        outline.extend(steps.iter().copied());
        outline.push((rates.len() as f64 * bucket, 0.0));
        chart.draw_series(std::iter::once(Polygon::new(
            outline,
            THROUGHPUT.mix(0.2).filled(),
        )))?;
        chart.draw_series(LineSeries::new(steps, THROUGHPUT.stroke_width(2)))?;
    }

    if let Some((start, end)) = gap {
        // The band goes over the throughput so that the dip stays tinted. A millisecond gap on a
        // seconds-long axis is narrower than a pixel: widen the band around its centre so that
        // it shows.
        let (pixels, _) = chart.plotting_area().get_pixel_range();
        let min_width = MIN_GAP_PX * x_end / f64::from((pixels.end - pixels.start).max(1));
        let widen = ((min_width - (end - start)) / 2.0).max(0.0);
        let (left, right) = (start - widen, end + widen);
        chart.draw_series(std::iter::once(Rectangle::new(
            [(left, 0.0), (right, y_top)],
            GAP.mix(0.3).filled(),
        )))?;
        for edge in [left, right] {
            chart.draw_series(std::iter::once(PathElement::new(
                vec![(edge, 0.0), (edge, y_top)],
                GAP.mix(0.8),
            )))?;
        }
    }

    if let Some(ms) = kill {
        chart.draw_series(std::iter::once(PathElement::new(
            vec![(ms, 0.0), (ms, y_top)],
            KILL.stroke_width(2),
        )))?;
    }

    // The labels sit in the free band at the top: right of their line, or left of it when the
    // line is in the last quarter of the axis.
    let label = |text: String, x_right: f64, x_left: f64, row: i32, color: RGBColor| {
        let flip = x_right > x_end * 0.75;
        let (x, dx, hpos) = if flip {
            (x_left, -8, HPos::Right)
        } else {
            (x_right, 8, HPos::Left)
        };
        let style = (FONT, 19)
            .into_font()
            .color(&color)
            .pos(Pos::new(hpos, VPos::Top));
        EmptyElement::at((x, y_top)) + Text::new(text, (dx, 8 + row * 28), style)
    };
    if let Some(ms) = kill {
        let text = format!("primary killed at {ms:.1} ms");
        chart.plotting_area().draw(&label(text, ms, ms, 0, KILL))?;
    }
    if let Some((start, end)) = gap {
        let text = format!("gap {}", duration(end - start));
        chart
            .plotting_area()
            .draw(&label(text, end, start, 1, GAP_TEXT))?;
    }
    Ok(())
}

/// Draws the legend and the notes, one per line, in a box at the top of the panel.
fn draw_panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    timeline: &Timeline,
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    let lines = panel_lines(timeline);
    let (width, _) = area.dim_in_pixel();
    let right = width as i32 - 12;
    let top = 10;
    // The notes follow the legend entries after a thin rule.
    let legend = lines
        .iter()
        .take_while(|line| line.swatch.is_some())
        .count();
    let rule = if legend < lines.len() { PANEL_RULE } else { 0 };
    let bottom = top + 2 * PANEL_PAD + PANEL_LINE * lines.len() as i32 + rule - 6;
    area.draw(&Rectangle::new(
        [(0, top), (right, bottom)],
        PANEL_BORDER.stroke_width(1),
    ))?;
    if rule > 0 {
        let y = top + PANEL_PAD + PANEL_LINE * legend as i32 + rule / 2 - 3;
        area.draw(&PathElement::new(
            vec![(PANEL_PAD, y), (right - PANEL_PAD, y)],
            PANEL_BORDER.stroke_width(1),
        ))?;
    }
    let style = (FONT, PANEL_FONT)
        .into_font()
        .color(&TEXT)
        .pos(Pos::new(HPos::Left, VPos::Center));
    for (i, line) in lines.iter().enumerate() {
        let below_rule = if i < legend { 0 } else { rule };
        let y = top + PANEL_PAD + PANEL_LINE * i as i32 + below_rule + PANEL_LINE / 2 - 3;
        let mut x = PANEL_PAD;
        if let Some(swatch) = line.swatch {
            let (left, right) = (x, x + SWATCH_WIDTH);
            match swatch {
                Swatch::Throughput => {
                    area.draw(&Rectangle::new(
                        [(left, y - 2), (right, y + 8)],
                        THROUGHPUT.mix(0.2).filled(),
                    ))?;
                    area.draw(&PathElement::new(
                        vec![(left, y - 2), (right, y - 2)],
                        THROUGHPUT.stroke_width(2),
                    ))?;
                }
                Swatch::Kill => {
                    area.draw(&PathElement::new(
                        vec![
                            (left + SWATCH_WIDTH / 2, y - 9),
                            (left + SWATCH_WIDTH / 2, y + 9),
                        ],
                        KILL.stroke_width(2),
                    ))?;
                }
                Swatch::Gap => {
                    area.draw(&Rectangle::new(
                        [(left + 6, y - 9), (right - 6, y + 9)],
                        GAP.mix(0.3).filled(),
                    ))?;
                }
            }
            x = right + 10;
        }
        area.draw(&Text::new(line.text.as_str(), (x, y), style.clone()))?;
    }
    Ok(())
}

/// An axis tick in ms: whole numbers without decimals, others with at most two.
fn tick(value: f64) -> String {
    if (value - value.round()).abs() < 1e-6 {
        format!("{value:.0}")
    } else {
        let text = format!("{value:.2}");
        text.trim_end_matches('0').trim_end_matches('.').to_string()
    }
}

/// A rate tick: 250000 becomes "250k" and 1500000 "1.5M" so that the labels stay short.
fn compact(value: f64) -> String {
    let (scaled, suffix) = if value >= 1e6 {
        (value / 1e6, "M")
    } else if value >= 1e3 {
        (value / 1e3, "k")
    } else {
        (value, "")
    };
    format!("{}{suffix}", tick(scaled))
}

/// A duration for a label: "7.3 ms", or "0.45 ms" below a millisecond.
fn duration(ms: f64) -> String {
    if ms < 1.0 {
        format!("{ms:.2} ms")
    } else {
        format!("{ms:.1} ms")
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;

    /// Two seconds at 10 ms buckets with a failover around t = 1000 ms.
    fn synthetic() -> Timeline {
        let replies = (0..200u64)
            .map(|i| match i {
                0..100 => 1200 + (i * 37) % 90,
                100 => 300,
                101 => 0,
                102 => 500,
                _ => 1100 + (i * 53) % 120,
            })
            .collect();
        Timeline {
            title: "failover: 3 nodes, primary killed".to_string(),
            bucket_ms: 10,
            replies,
            kill_ms: Some(1002.5),
            gap_ms: Some((1003.1, 1020.4)),
            notes: vec!["gap 17.3 ms".to_string(), "lost 0".to_string()],
        }
    }

    /// A fresh directory for one test's files.
    fn scratch_dir(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("tandem-timeline-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("create the test directory");
        dir
    }

    #[test]
    fn renders_png() {
        let dir = scratch_dir("png");
        let path = dir.join("timeline.png");
        render(&synthetic(), &path).expect("render the PNG");
        let bytes = std::fs::read(&path).expect("read the PNG");
        assert!(bytes.starts_with(b"\x89PNG\r\n\x1a\n"), "not a PNG");
        std::fs::remove_dir_all(&dir).expect("remove the test directory");
    }

    #[test]
    fn renders_svg() {
        let dir = scratch_dir("svg");
        let path = dir.join("timeline.SVG");
        render(&synthetic(), &path).expect("render the SVG");
        let text = std::fs::read_to_string(&path).expect("read the SVG");
        assert!(text.contains("<svg"), "not an SVG");
        assert!(text.contains("tx/s"), "no y axis label");
        std::fs::remove_dir_all(&dir).expect("remove the test directory");
    }

    #[test]
    fn renders_without_markers_or_data() {
        let dir = scratch_dir("empty");
        let empty = Timeline {
            title: "nothing".to_string(),
            bucket_ms: 10,
            ..Timeline::default()
        };
        render(&empty, &dir.join("empty.png")).expect("render an empty PNG");
        render(&empty, &dir.join("empty.svg")).expect("render an empty SVG");
        std::fs::remove_dir_all(&dir).expect("remove the test directory");
    }

    #[test]
    fn rejects_other_extensions() {
        let dir = scratch_dir("bad");
        for name in ["timeline.jpg", "timeline"] {
            let path = dir.join(name);
            let err = render(&synthetic(), &path).expect_err("only .png and .svg are accepted");
            assert!(err.contains(&path.display().to_string()), "{err}");
            assert!(err.contains(".png") && err.contains(".svg"), "{err}");
            assert!(!path.exists());
        }
        std::fs::remove_dir_all(&dir).expect("remove the test directory");
    }

    #[test]
    fn rejects_zero_width_buckets() {
        let timeline = Timeline {
            bucket_ms: 0,
            ..synthetic()
        };
        let err = render(&timeline, Path::new("unused.svg")).expect_err("a 0 ms bucket");
        assert!(err.contains("0 ms"), "{err}");
    }

    #[test]
    fn formats_ticks() {
        assert_eq!(tick(1000.0), "1000");
        assert_eq!(tick(2.5), "2.5");
        assert_eq!(compact(250_000.0), "250k");
        assert_eq!(compact(1_500_000.0), "1.5M");
        assert_eq!(compact(0.0), "0");
        assert_eq!(duration(7.3), "7.3 ms");
        assert_eq!(duration(0.45), "0.45 ms");
    }
}
