//! Delay distributions: how long a `delay` rule holds a request.

use std::fmt;
use std::time::Duration;

use rand::Rng;
use rand_distr::{Distribution, LogNormal, Normal};

use crate::units::{parse_duration, DisplayDuration};

/// How a delay is drawn.
#[derive(Debug, Clone, PartialEq)]
pub enum DelayDist {
    /// Always the same delay: `20ms`.
    Fixed(Duration),
    /// Uniform between two bounds, inclusive: `5ms..20ms`.
    Uniform(Duration, Duration),
    /// Normal, clamped at zero: `normal(MEAN,SD)`.
    Normal {
        /// Mean of the distribution.
        mean: Duration,
        /// Standard deviation.
        sd: Duration,
    },
    /// Log-normal: `lognormal(MEDIAN,SIGMA)`, where `ln(delay)` is normal with
    /// mean `ln(MEDIAN)` and standard deviation `SIGMA`. A heavy right tail.
    LogNormal {
        /// Median delay.
        median: Duration,
        /// Standard deviation of `ln(delay)`.
        sigma: f64,
    },
}

impl DelayDist {
    /// Draws one delay.
    pub fn sample<R: Rng + ?Sized>(&self, rng: &mut R) -> Duration {
        match *self {
            DelayDist::Fixed(d) => d,
            DelayDist::Uniform(lo, hi) => {
                Duration::from_nanos(rng.gen_range(lo.as_nanos() as u64..=hi.as_nanos() as u64))
            }
            DelayDist::Normal { mean, sd } => {
                let dist = Normal::new(mean.as_secs_f64(), sd.as_secs_f64())
                    .expect("sd is finite and non-negative by construction");
                secs(dist.sample(rng))
            }
            DelayDist::LogNormal { median, sigma } => {
                let dist = LogNormal::new(median.as_secs_f64().ln(), sigma)
                    .expect("sigma is finite and non-negative by construction");
                secs(dist.sample(rng))
            }
        }
    }

    /// Parses `20ms`, `5ms..20ms`, `normal(10ms,2ms)` or `lognormal(2ms,0.5)`;
    /// every duration in it is at most a day ([`rule_duration`]).
    pub fn parse(text: &str) -> Result<DelayDist, String> {
        Self::parse_unchecked(text)
    }

    fn parse_unchecked(text: &str) -> Result<DelayDist, String> {
        if let Some(args) = call_args(text, "normal") {
            let [mean, sd] = two_args(args, "normal(MEAN,SD)")?;
            return Ok(DelayDist::Normal {
                mean: rule_duration(mean)?,
                sd: rule_duration(sd)?,
            });
        }
        if let Some(args) = call_args(text, "lognormal") {
            let [median, sigma] = two_args(args, "lognormal(MEDIAN,SIGMA)")?;
            let median = rule_duration(median)?;
            if median.is_zero() {
                return Err("lognormal needs a median above zero".into());
            }
            let sigma_text = sigma;
            let sigma: f64 = sigma.parse().map_err(|_| {
                format!("lognormal's SIGMA is a plain number like 0.5, found '{sigma}'")
            })?;
            if !(sigma.is_finite() && (0.0..=MAX_SIGMA).contains(&sigma)) {
                return Err(format!(
                    "lognormal's SIGMA is between 0 and {MAX_SIGMA}, found {sigma_text} (at 0.5 the \
                     99th percentile is 3.2x the median; at {MAX_SIGMA}, 11,000x)"
                ));
            }
            return Ok(DelayDist::LogNormal { median, sigma });
        }
        if let Some((lo, hi)) = text.split_once("..") {
            let (lo, hi) = (rule_duration(lo)?, rule_duration(hi)?);
            if lo > hi {
                return Err(format!(
                    "range '{text}' runs backwards (write the smaller bound first)"
                ));
            }
            return Ok(DelayDist::Uniform(lo, hi));
        }
        if text.contains('(') {
            return Err(format!(
                "unknown distribution '{text}' (use normal(MEAN,SD) or lognormal(MEDIAN,SIGMA))"
            ));
        }
        rule_duration(text).map(DelayDist::Fixed)
    }
}

/// The largest lognormal SIGMA accepted.
const MAX_SIGMA: f64 = 3.0;
/// The longest duration a rule may name (a delay, a spike, a hang's timeout).
const MAX_DELAY: Duration = Duration::from_secs(86_400);

/// A duration written in a rule: every duration field has the same bounds,
/// 0 to a day.
pub(crate) fn rule_duration(text: &str) -> Result<Duration, String> {
    let duration = parse_duration(text)?;
    if duration > MAX_DELAY {
        return Err(format!(
            "'{text}' is longer than a day, the longest a rule may name (for a request \
             that never ends, use hang without a timeout)"
        ));
    }
    Ok(duration)
}

fn secs(value: f64) -> Duration {
    Duration::try_from_secs_f64(value.max(0.0)).unwrap_or(Duration::MAX)
}

fn call_args<'a>(text: &'a str, name: &str) -> Option<&'a str> {
    text.strip_prefix(name)?
        .strip_prefix('(')?
        .strip_suffix(')')
}

fn two_args<'a>(args: &'a str, form: &str) -> Result<[&'a str; 2], String> {
    match args.split(',').map(str::trim).collect::<Vec<_>>()[..] {
        [a, b] if !a.is_empty() && !b.is_empty() => Ok([a, b]),
        _ => Err(format!("expected {form}, found '({args})'")),
    }
}

impl fmt::Display for DelayDist {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            DelayDist::Fixed(d) => write!(f, "{}", DisplayDuration(d)),
            DelayDist::Uniform(lo, hi) => {
                write!(f, "{}..{}", DisplayDuration(lo), DisplayDuration(hi))
            }
            DelayDist::Normal { mean, sd } => {
                write!(
                    f,
                    "normal({},{})",
                    DisplayDuration(mean),
                    DisplayDuration(sd)
                )
            }
            DelayDist::LogNormal { median, sigma } => {
                write!(f, "lognormal({},{sigma})", DisplayDuration(median))
            }
        }
    }
}

/// A rare extra delay on top of the usual one: `spike=P:DURATION`.
#[derive(Debug, Clone, PartialEq)]
pub struct Spike {
    /// Chance that a request gets the spike.
    pub p: f64,
    /// The extra delay.
    pub extra: Duration,
}

impl Spike {
    /// Parses `0.001:200ms`.
    pub fn parse(text: &str) -> Result<Spike, String> {
        let (p, extra) = text.split_once(':').ok_or_else(|| {
            format!("expected spike=P:DURATION like spike=0.001:200ms, found '{text}'")
        })?;
        Ok(Spike {
            p: crate::units::probability(p)?,
            extra: rule_duration(extra)?,
        })
    }
}

impl fmt::Display for Spike {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.p, DisplayDuration(self.extra))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;

    fn mean_and_median(dist: &DelayDist, n: usize) -> (f64, f64) {
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        let mut samples: Vec<f64> = (0..n)
            .map(|_| dist.sample(&mut rng).as_secs_f64() * 1e3)
            .collect();
        samples.sort_by(f64::total_cmp);
        let mean = samples.iter().sum::<f64>() / n as f64;
        (mean, samples[n / 2])
    }

    #[test]
    fn uniform_stays_in_bounds_and_centres() {
        let dist = DelayDist::parse("5ms..20ms").unwrap();
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        for _ in 0..10_000 {
            let d = dist.sample(&mut rng);
            assert!(d >= Duration::from_millis(5) && d <= Duration::from_millis(20));
        }
        let (mean, _) = mean_and_median(&dist, 20_000);
        assert!((mean - 12.5).abs() < 0.2, "mean {mean}");
    }

    #[test]
    fn normal_has_its_mean() {
        let (mean, _) = mean_and_median(&DelayDist::parse("normal(10ms,2ms)").unwrap(), 20_000);
        assert!((mean - 10.0).abs() < 0.1, "mean {mean}");
    }

    #[test]
    fn lognormal_has_its_median_and_a_heavy_tail() {
        let dist = DelayDist::parse("lognormal(2ms,0.8)").unwrap();
        let (mean, median) = mean_and_median(&dist, 20_000);
        assert!((median - 2.0).abs() < 0.1, "median {median}");
        // E[X] = median * exp(sigma^2 / 2) = 2 * 1.377
        assert!((mean - 2.754).abs() < 0.1, "mean {mean}");
    }

    #[test]
    fn bad_forms_say_what_was_expected() {
        assert!(DelayDist::parse("20ms..5ms")
            .unwrap_err()
            .contains("backwards"));
        assert!(DelayDist::parse("normal(1ms)")
            .unwrap_err()
            .contains("normal(MEAN,SD)"));
        assert!(DelayDist::parse("gamma(1,2)")
            .unwrap_err()
            .contains("unknown distribution"));
    }
}
