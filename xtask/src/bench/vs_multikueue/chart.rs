//! The side-by-side chart of `bench --vs-multikueue`: for each measured
//! step, the latency distribution (share of Jobs done by a given latency)
//! of every system as one line, rendered to SVG with plotters.

use std::path::Path;

use plotters::prelude::*;

/// One system's latencies of one step, in seconds; `colour` numbers the
/// system, so it keeps its colour in every panel.
pub struct Series<'a> {
    pub system: &'a str,
    pub colour: usize,
    pub seconds: Vec<f64>,
}

/// One panel: a step and every system's latencies for it.
pub struct Panel<'a> {
    pub title: &'a str,
    pub series: Vec<Series<'a>>,
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
pub fn render(path: &Path, caption: &str, panels: &[Panel]) -> anyhow::Result<()> {
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
            .flat_map(|s| s.seconds.iter().copied())
            .fold(0.0_f64, f64::max)
            .max(0.001)
            * 1.05;
        let mut chart = ChartBuilder::on(&area)
            .caption(panel.title, ("sans-serif", 15))
            .margin(12)
            .x_label_area_size(36)
            .y_label_area_size(44)
            .build_cartesian_2d(0.0..longest, 0.0..1.0)
            .map_err(draw_error)?;
        chart
            .configure_mesh()
            .x_desc("latency (s)")
            .y_desc("share of Jobs")
            .draw()
            .map_err(draw_error)?;
        for series in &panel.series {
            let colour = COLOURS[series.colour % COLOURS.len()];
            chart
                .draw_series(LineSeries::new(
                    cumulative(&series.seconds),
                    colour.stroke_width(2),
                ))
                .map_err(draw_error)?
                .label(series.system)
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 16, y)], colour.stroke_width(2))
                });
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::LowerRight)
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
    fn renders_one_line_per_system_in_each_panel() {
        let dir = std::env::temp_dir().join(format!("jobrelay-chart-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("chart.svg");
        let panels = [Panel {
            title: "created -> Pod running",
            series: vec![
                Series {
                    system: "jobrelay",
                    colour: 0,
                    seconds: vec![0.5, 1.0, 1.5],
                },
                Series {
                    system: "MultiKueue",
                    colour: 1,
                    seconds: vec![2.0, 4.0],
                },
            ],
        }];
        render(&path, "test", &panels).unwrap();
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
