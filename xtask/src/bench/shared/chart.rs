//! The bench's charts: panels side by side, each with one line per series
//! (a system's latency distribution, a cluster's utilisation over time),
//! rendered to SVG with plotters.

use std::path::Path;

use plotters::prelude::*;

/// One line: its name in the legend, its points (x, y) in x order, and
/// `colour`, a number that keeps its colour the same in every panel.
pub struct Series<'a> {
    pub name: &'a str,
    pub colour: usize,
    pub points: Vec<(f64, f64)>,
}

/// One panel: its title and lines.
pub struct Panel<'a> {
    pub title: &'a str,
    pub series: Vec<Series<'a>>,
}

/// What every panel's axes say, and where the legend goes.
pub struct Axes<'a> {
    pub x: &'a str,
    pub y: &'a str,
    /// The top of the y axis (the x axis ends a little past the last point).
    pub y_max: f64,
    pub legend: SeriesLabelPosition,
}

/// The points of a cumulative distribution: (latency, share of Jobs with at
/// most that latency), sorted by latency.
pub fn cumulative(seconds: &[f64]) -> Vec<(f64, f64)> {
    let mut sorted: Vec<f64> = seconds.iter().copied().filter(|s| s.is_finite()).collect();
    sorted.sort_by(f64::total_cmp);
    let n = sorted.len() as f64;
    sorted
        .into_iter()
        .enumerate()
        .map(|(i, s)| (s, (i + 1) as f64 / n))
        .collect()
}

const COLOURS: [RGBColor; 5] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
];

/// Draws the panels side by side into an SVG file.
pub fn render(path: &Path, caption: &str, axes: &Axes, panels: &[Panel]) -> anyhow::Result<()> {
    let width = 480 * panels.len().max(1) as u32;
    let root = SVGBackend::new(path, (width, 420)).into_drawing_area();
    root.fill(&WHITE).map_err(draw_error)?;
    let root = root
        .titled(caption, ("sans-serif", 18))
        .map_err(draw_error)?;
    let areas = root.split_evenly((1, panels.len().max(1)));
    for (panel, area) in panels.iter().zip(areas) {
        let longest = panel
            .series
            .iter()
            .flat_map(|s| s.points.iter().map(|(x, _)| *x))
            .fold(0.0_f64, f64::max)
            .max(0.001)
            * 1.05;
        let mut chart = ChartBuilder::on(&area)
            .caption(panel.title, ("sans-serif", 15))
            .margin(12)
            .x_label_area_size(36)
            .y_label_area_size(44)
            .build_cartesian_2d(0.0..longest, 0.0..axes.y_max)
            .map_err(draw_error)?;
        chart
            .configure_mesh()
            .x_desc(axes.x)
            .y_desc(axes.y)
            .draw()
            .map_err(draw_error)?;
        for series in &panel.series {
            let colour = COLOURS[series.colour % COLOURS.len()];
            chart
                .draw_series(LineSeries::new(
                    series.points.iter().copied(),
                    colour.stroke_width(2),
                ))
                .map_err(draw_error)?
                .label(series.name)
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 16, y)], colour.stroke_width(2))
                });
        }
        chart
            .configure_series_labels()
            .position(axes.legend.clone())
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .draw()
            .map_err(draw_error)?;
    }
    root.present().map_err(draw_error)?;
    Ok(())
}

fn draw_error<E: std::fmt::Display>(error: E) -> anyhow::Error {
    anyhow::anyhow!("drawing the chart: {error}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_distribution_rises_to_every_job_at_the_slowest() {
        let points = cumulative(&[3.0, 1.0, 2.0, f64::NAN]);
        assert_eq!(points, [(1.0, 1.0 / 3.0), (2.0, 2.0 / 3.0), (3.0, 1.0)]);
        assert!(cumulative(&[]).is_empty());
    }

    #[test]
    fn renders_one_line_per_series_in_each_panel() {
        let dir = std::env::temp_dir().join(format!("jobrelay-chart-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("chart.svg");
        let panels = [Panel {
            title: "created -> Pod running",
            series: vec![
                Series {
                    name: "jobrelay",
                    colour: 0,
                    points: cumulative(&[0.5, 1.0, 1.5]),
                },
                Series {
                    name: "MultiKueue",
                    colour: 1,
                    points: cumulative(&[2.0, 4.0]),
                },
            ],
        }];
        let axes = Axes {
            x: "latency (s)",
            y: "share of Jobs",
            y_max: 1.0,
            legend: SeriesLabelPosition::LowerRight,
        };
        render(&path, "test", &axes, &panels).unwrap();
        let svg = std::fs::read_to_string(&path).unwrap();
        assert!(svg.starts_with("<svg"), "{}", &svg[..40.min(svg.len())]);
        assert!(svg.contains("jobrelay") && svg.contains("MultiKueue"));
        let upper = svg.to_uppercase();
        assert!(
            upper.contains("#1F77B4") && upper.contains("#FF7F0E"),
            "one colour per system"
        );
        std::fs::remove_dir_all(dir).unwrap();
    }
}
