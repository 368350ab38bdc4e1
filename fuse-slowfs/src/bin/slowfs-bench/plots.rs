//! The fidelity report as pictures (SVG): injected against observed delays,
//! and each delay distribution's configured and observed CDFs.

use std::path::{Path, PathBuf};

use anyhow::Context;
use plotters::prelude::*;

use crate::fidelity::{DistRow, Report};

/// Points of a CDF at most this many, however many samples.
const CDF_POINTS: usize = 400;

/// Writes `fidelity-delays.svg` and `fidelity-distributions.svg` into `dir`;
/// their paths.
pub fn write(report: &Report, dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let delays = dir.join("fidelity-delays.svg");
    let distributions = dir.join("fidelity-distributions.svg");
    fixed_delays(report, &delays).with_context(|| format!("drawing {}", delays.display()))?;
    delay_distributions(&report.distributions, &distributions)
        .with_context(|| format!("drawing {}", distributions.display()))?;
    Ok(vec![delays, distributions])
}

/// Injected delay against the caller's observed p50 and p99 (each minus the
/// same run's round trip), log-log, with the ideal diagonal.
fn fixed_delays(report: &Report, path: &Path) -> anyhow::Result<()> {
    let root = SVGBackend::new(path, (800, 520)).into_drawing_area();
    root.fill(&WHITE)?;
    let low = 10.0;
    let high = report
        .fixed
        .iter()
        .map(|r| r.delay_us.max(r.p99_us))
        .fold(1e4, f64::max)
        * 2.0;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            "Injected delay vs what the caller's read(2) saw (minus the round trip)",
            ("sans-serif", 18),
        )
        .margin(16)
        .x_label_area_size(44)
        .y_label_area_size(64)
        .build_cartesian_2d((low..high).log_scale(), (low..high).log_scale())?;
    chart
        .configure_mesh()
        .x_desc("injected delay")
        .y_desc("observed")
        .x_label_formatter(&|us| duration(*us))
        .y_label_formatter(&|us| duration(*us))
        .draw()?;
    chart
        .draw_series(LineSeries::new([(low, low), (high, high)], BLACK.mix(0.35)))?
        .label("ideal: observed = injected")
        .legend(|(x, y)| PathElement::new([(x, y), (x + 18, y)], BLACK.mix(0.35)));
    let series = [
        (1, "p50", BLUE),
        (1, "p99", RED),
        (1000, "p50", CYAN),
        (1000, "p99", MAGENTA),
    ];
    for (concurrency, which, colour) in series {
        let points: Vec<(f64, f64)> = report
            .fixed
            .iter()
            .filter(|r| r.concurrency == concurrency)
            .map(|r| {
                let y = if which == "p50" { r.p50_us } else { r.p99_us };
                (r.delay_us, y.max(low))
            })
            .collect();
        if points.is_empty() {
            continue;
        }
        let label = if concurrency == 1 {
            format!("{which}, one at a time (1,000 others parked)")
        } else {
            format!("{which}, 1,000 at once")
        };
        chart
            .draw_series(LineSeries::new(points.clone(), colour.stroke_width(2)))?
            .label(label)
            .legend(move |(x, y)| PathElement::new([(x, y), (x + 18, y)], colour.stroke_width(2)));
        chart.draw_series(
            points
                .into_iter()
                .map(|p| Circle::new(p, 3, colour.filled())),
        )?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.9))
        .border_style(BLACK)
        .draw()?;
    root.present()?;
    Ok(())
}

/// One panel per distribution: the CDF the rule configures, the same plus a
/// kernel sleep's overshoot (the best a sleeper can do here), and observed.
fn delay_distributions(rows: &[DistRow], path: &Path) -> anyhow::Result<()> {
    let width = 420 * rows.len().max(1) as u32;
    let root = SVGBackend::new(path, (width, 440)).into_drawing_area();
    root.fill(&WHITE)?;
    let panels = root.split_evenly((1, rows.len().max(1)));
    for (row, panel) in rows.iter().zip(panels.iter()) {
        let s = &row.samples_us;
        let high = quantile(&s.observed, 0.995).max(quantile(&s.configured, 0.995)) * 1.05;
        let mut chart = ChartBuilder::on(panel)
            .caption(
                format!("{} (KS {:.3})", row.rule, row.ks),
                ("sans-serif", 15),
            )
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(44)
            .build_cartesian_2d(0f64..high, 0f64..1f64)?;
        chart
            .configure_mesh()
            .x_desc("delay")
            .y_desc("fraction of reads")
            .x_labels(5)
            .x_label_formatter(&|us| duration(*us))
            .draw()?;
        let curves = [
            (&s.configured, "configured", BLUE),
            (
                &s.configured_and_sleep,
                "configured + a sleep's overshoot",
                GREEN,
            ),
            (&s.observed, "observed at the caller", RED),
        ];
        for (samples, label, colour) in curves {
            chart
                .draw_series(LineSeries::new(cdf(samples), colour.stroke_width(2)))?
                .label(label)
                .legend(move |(x, y)| {
                    PathElement::new([(x, y), (x + 18, y)], colour.stroke_width(2))
                });
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .background_style(WHITE.mix(0.9))
            .border_style(BLACK)
            .draw()?;
    }
    root.present()?;
    Ok(())
}

/// `us` microseconds as a rule spells a delay (`250us`, `3ms`, `1s`).
fn duration(us: f64) -> String {
    slowfs_faults::DisplayDuration(std::time::Duration::from_secs_f64(us.max(0.0) / 1e6))
        .to_string()
}

/// The empirical CDF of sorted `samples`, as at most [`CDF_POINTS`] points.
fn cdf(samples: &[f64]) -> Vec<(f64, f64)> {
    let n = samples.len();
    let step = n.div_ceil(CDF_POINTS).max(1);
    (0..n)
        .step_by(step)
        .chain(n.checked_sub(1))
        .map(|i| (samples[i], (i + 1) as f64 / n as f64))
        .collect()
}

/// The `q` quantile of sorted `samples` (0 when there are none).
fn quantile(samples: &[f64], q: f64) -> f64 {
    match samples.len() {
        0 => 0.0,
        n => samples[((n - 1) as f64 * q) as usize],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cdf_is_bounded_rises_and_ends_at_one() {
        let samples: Vec<f64> = (0..10_000).map(f64::from).collect();
        let points = cdf(&samples);
        assert!(points.len() <= CDF_POINTS + 1);
        assert!(points
            .windows(2)
            .all(|w| w[0].1 < w[1].1 && w[0].0 <= w[1].0));
        assert_eq!(points.last(), Some(&(9_999.0, 1.0)));
        assert!(cdf(&[]).is_empty());
    }
}
