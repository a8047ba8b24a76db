//! Human durations on the command line: `500ms`, `30s`, `5m`, `2h`, `1d`.

use std::time::Duration;

/// Parse `<number><unit>` with unit `ms`, `s`, `m`, `h` or `d`.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .ok_or_else(|| format!("{text:?} has no unit; write e.g. 500ms, 30s, 5m, 2h or 1d"))?;
    let (number, unit) = text.split_at(split);
    let number: u64 = number
        .parse()
        .map_err(|_| format!("{text:?} does not start with a whole number"))?;
    let millis = match unit {
        "ms" => Some(number),
        "s" => number.checked_mul(1_000),
        "m" => number.checked_mul(60_000),
        "h" => number.checked_mul(3_600_000),
        "d" => number.checked_mul(86_400_000),
        _ => {
            return Err(format!(
                "unknown unit {unit:?} in {text:?}; use ms, s, m, h or d"
            ));
        }
    }
    .ok_or_else(|| format!("{text:?} is too long a duration"))?;
    Ok(Duration::from_millis(millis))
}

/// A duration flag whose default shows (and parses) like what a user types:
/// `10s`, `500ms`, `2h`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HumanDuration(pub Duration);

impl std::fmt::Display for HumanDuration {
    /// The largest unit that writes the duration exactly (sub-millisecond
    /// parts are dropped).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let millis = self.0.as_millis();
        let (count, unit) = [
            (86_400_000, "d"),
            (3_600_000, "h"),
            (60_000, "m"),
            (1_000, "s"),
        ]
        .into_iter()
        .find(|(size, _)| millis != 0 && millis.is_multiple_of(*size))
        .map_or((millis, "ms"), |(size, unit)| (millis / size, unit));
        write!(f, "{count}{unit}")
    }
}

impl std::str::FromStr for HumanDuration {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        parse_duration(text).map(Self)
    }
}

/// [`parse_duration`], refusing zero.
pub fn positive_duration(text: &str) -> Result<HumanDuration, String> {
    match parse_duration(text)? {
        Duration::ZERO => Err(format!("{text:?} is zero; give at least 1ms")),
        duration => Ok(HumanDuration(duration)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn human_durations_print_in_the_largest_exact_unit_and_parse_back() {
        for (millis, text) in [
            (10_000, "10s"),
            (1_500, "1500ms"),
            (120_000, "2m"),
            (86_400_000, "1d"),
            (0, "0ms"),
        ] {
            let duration = HumanDuration(Duration::from_millis(millis));
            assert_eq!(duration.to_string(), text);
            assert_eq!(text.parse::<HumanDuration>(), Ok(duration));
        }
        assert!(positive_duration("0s").unwrap_err().contains("zero"));
        assert_eq!(
            positive_duration("5s"),
            Ok(HumanDuration(Duration::from_secs(5)))
        );
    }

    #[test]
    fn units_and_errors() {
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("30s"), Ok(Duration::from_secs(30)));
        assert_eq!(parse_duration("5m"), Ok(Duration::from_secs(300)));
        assert_eq!(parse_duration("2h"), Ok(Duration::from_secs(7200)));
        assert_eq!(parse_duration("1d"), Ok(Duration::from_secs(86_400)));
        assert!(parse_duration("30").unwrap_err().contains("no unit"));
        assert!(parse_duration("3w").unwrap_err().contains("unknown unit"));
        assert!(parse_duration("ms").is_err());
    }
}
