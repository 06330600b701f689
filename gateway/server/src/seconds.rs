//! Seconds as users give them (`--duration 2.5`, `"duration_s": 60`):
//! finite, positive and bounded, so that turning them into a `Duration` or
//! adding them to an `Instant` cannot panic, whatever was typed.

/// The longest span accepted: ten years.
pub(crate) const MAX: f64 = 10.0 * 365.0 * 86_400.0;

/// The shortest status interval: ten lines a second.
pub(crate) const MIN_STATUS_INTERVAL: f64 = 0.1;

/// Why `value` is not a usable span of at least `min` seconds, if it is not.
pub(crate) fn check(value: f64, min: f64) -> Result<f64, String> {
    if value.is_finite() && value >= min && value > 0.0 && value <= MAX {
        return Ok(value);
    }
    let low = if min > 0.0 { format!("at least {min}") } else { "above 0".to_owned() };
    Err(format!("{value:?} is not a number of seconds {low} and at most {MAX} (ten years)"))
}

fn parse(text: &str, min: f64) -> Result<f64, String> {
    let value: f64 = text.parse().map_err(|e| format!("{text:?} is not a number: {e}"))?;
    check(value, min)
}

/// A clap value parser for a positive span of seconds.
pub(crate) fn positive(text: &str) -> Result<f64, String> {
    parse(text, 0.0)
}

/// A clap value parser for `--status-interval`.
pub(crate) fn status_interval(text: &str) -> Result<f64, String> {
    parse(text, MIN_STATUS_INTERVAL)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_that_would_panic_or_flood_are_refused_with_the_range() {
        for bad in ["nan", "inf", "-1", "0", "1e30", "1e300", "x"] {
            let error = positive(bad).unwrap_err();
            assert!(error.contains(bad) || error.contains("not a number"), "{bad}: {error}");
        }
        assert!(positive("1e30").unwrap_err().contains("at most 315360000"));
        assert!(status_interval("1e-300").unwrap_err().contains("at least 0.1"));
        assert_eq!((positive("2.5"), status_interval("0.1")), (Ok(2.5), Ok(0.1)));
        let span = std::time::Duration::from_secs_f64(check(MAX, 0.0).unwrap());
        let _ = std::time::Instant::now() + span; // the largest accepted span adds without overflow
    }
}
