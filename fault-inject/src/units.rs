//! Human units in rule strings: durations (`250ms`), sizes (`4KiB`) and rates (`10MiB/s`).

use std::fmt;
use std::time::Duration;

const DURATION_UNITS: &[(&str, u64)] = &[
    ("ns", 1),
    ("us", 1_000),
    ("µs", 1_000),
    ("ms", 1_000_000),
    ("s", 1_000_000_000),
    ("m", 60_000_000_000),
    ("min", 60_000_000_000),
    ("h", 3_600_000_000_000),
    ("d", 86_400_000_000_000),
];

/// The duration units, for error messages.
const DURATION_UNITS_HELP: &str = "units: ns, us, ms, s, m (minutes), h, d";

const SIZE_UNITS: &[(&str, u64)] = &[
    ("B", 1),
    ("KiB", 1 << 10),
    ("MiB", 1 << 20),
    ("GiB", 1 << 30),
    ("TiB", 1 << 40),
    ("K", 1_000),
    ("KB", 1_000),
    ("M", 1_000_000),
    ("MB", 1_000_000),
    ("G", 1_000_000_000),
    ("GB", 1_000_000_000),
];

/// Splits `12.5ms` into the number `12.5` and the unit `ms`.
fn split_number(text: &str) -> (&str, &str) {
    let end = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    text.split_at(end)
}

fn scaled(number: &str, scale: u64) -> Option<u64> {
    if number.is_empty() {
        return None;
    }
    if let Ok(whole) = number.parse::<u64>() {
        return whole.checked_mul(scale);
    }
    let value: f64 = number.parse().ok()?;
    let result = (value * scale as f64).round();
    (result.is_finite() && result >= 0.0 && result < u64::MAX as f64).then_some(result as u64)
}

/// Parses a duration such as `20ms`, `1.5s`, `250us` or `0`.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let (number, unit) = split_number(text);
    if unit.is_empty() && number.parse::<f64>().is_ok_and(|v| v == 0.0) {
        return Ok(Duration::ZERO);
    }
    let expected = || {
        format!(
            "expected a duration like 20ms, 1.5s or 250us ({DURATION_UNITS_HELP}), found '{text}'"
        )
    };
    let Some(&(_, scale)) = DURATION_UNITS.iter().find(|(name, _)| *name == unit) else {
        if unit.is_empty() {
            return Err(format!(
                "missing unit in '{text}' (write e.g. '{text}ms'; {DURATION_UNITS_HELP})"
            ));
        }
        return Err(expected());
    };
    scaled(number, scale)
        .map(Duration::from_nanos)
        .ok_or_else(expected)
}

/// Parses a byte count such as `4096`, `4KiB`, `64MiB` or `1G`.
pub fn parse_size(text: &str) -> Result<u64, String> {
    let (number, unit) = split_number(text);
    let scale = if unit.is_empty() {
        1
    } else {
        SIZE_UNITS
            .iter()
            .find(|(name, _)| *name == unit)
            .map(|&(_, scale)| scale)
            .ok_or_else(|| {
                format!("unknown size unit '{unit}' in '{text}' (use B, KiB, MiB, GiB, K, M, G)")
            })?
    };
    scaled(number, scale)
        .ok_or_else(|| format!("expected a size like 4096 or 64MiB, found '{text}'"))
}

/// Parses a rate in bytes per second such as `10MiB/s` (the `/s` is optional).
pub fn parse_rate(text: &str) -> Result<u64, String> {
    let bytes = parse_size(text.strip_suffix("/s").unwrap_or(text))?;
    if bytes == 0 {
        return Err(format!("a rate must be above zero, found '{text}'"));
    }
    Ok(bytes)
}

/// Displays a duration in the largest unit that keeps it exact, so it parses back unchanged.
pub struct DisplayDuration(pub Duration);

impl fmt::Display for DisplayDuration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let nanos = self.0.as_nanos();
        for (unit, scale) in [("s", 1_000_000_000u128), ("ms", 1_000_000), ("us", 1_000)] {
            if nanos != 0 && nanos % scale == 0 {
                return write!(f, "{}{unit}", nanos / scale);
            }
        }
        if nanos == 0 {
            return f.write_str("0ms");
        }
        write!(f, "{nanos}ns")
    }
}

/// Displays a byte count in the largest binary unit that keeps it exact.
pub struct DisplaySize(pub u64);

impl fmt::Display for DisplaySize {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (unit, scale) in [("GiB", 1u64 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)] {
            if self.0 != 0 && self.0 % scale == 0 {
                return write!(f, "{}{unit}", self.0 / scale);
            }
        }
        write!(f, "{}B", self.0)
    }
}

/// A probability: a number between 0 and 1 (`p=0.1`).
pub(crate) fn probability(text: &str) -> Result<f64, String> {
    let p: f64 = text
        .parse()
        .map_err(|_| format!("expected a probability like 0.1, found '{text}'"))?;
    if !(0.0..=1.0).contains(&p) {
        return Err(format!("a probability is between 0 and 1, found {p}"));
    }
    Ok(p)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("20ms"), Ok(Duration::from_millis(20)));
        assert_eq!(parse_duration("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_duration("250us"), Ok(Duration::from_micros(250)));
        assert_eq!(parse_duration("0"), Ok(Duration::ZERO));
        assert!(parse_duration("20").unwrap_err().contains("missing unit"));
        assert!(parse_duration("fast").is_err());
    }

    #[test]
    fn sizes_and_rates() {
        assert_eq!(parse_size("4KiB"), Ok(4096));
        assert_eq!(parse_size("1M"), Ok(1_000_000));
        assert_eq!(parse_rate("10MiB/s"), Ok(10 << 20));
        assert!(parse_rate("0/s").is_err());
        assert!(parse_size("3 parsecs").is_err());
    }

    proptest! {
        #[test]
        fn duration_display_round_trips(nanos in 0u64..10_000_000_000_000) {
            let d = Duration::from_nanos(nanos);
            prop_assert_eq!(parse_duration(&DisplayDuration(d).to_string()), Ok(d));
        }

        #[test]
        fn size_display_round_trips(bytes in 0u64..(1 << 50)) {
            prop_assert_eq!(parse_size(&DisplaySize(bytes).to_string()), Ok(bytes));
        }
    }
}
