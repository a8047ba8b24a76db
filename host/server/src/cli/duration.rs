//! Human durations on the command line: `500ms`, `30s`, `5m`, `2h`, `1d`.

use std::time::Duration;

/// What is wrong with a duration given on the command line.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum DurationError {
    /// Not a duration in humantime's syntax (no unit, unknown unit, no number, overflow).
    #[error("{text:?} is not a duration ({source}); write e.g. 500ms, 30s, 5m, 2h or 1d")]
    Invalid {
        /// The text given.
        text: String,
        /// What the parser found.
        source: humantime::DurationError,
    },
    /// Finer than ebb's resolution of whole milliseconds (`1500us`).
    #[error("{text:?} is not a whole number of milliseconds; ebb counts durations in ms")]
    SubMillisecond {
        /// The text given.
        text: String,
    },
    /// Zero where a positive duration is needed.
    #[error("{text:?} is zero; give at least 1ms")]
    Zero {
        /// The text given.
        text: String,
    },
}

/// Parse a duration with the `humantime` crate: a number and a unit (`ms`,
/// `s`, `m`, `h`, `d`, and their longer spellings such as `sec` or `min`),
/// optionally several (`1h 30m`). Fails on a missing or unknown unit and on
/// a duration that is not a whole number of milliseconds.
pub fn parse_duration(text: &str) -> Result<Duration, DurationError> {
    let duration =
        humantime::parse_duration(text.trim()).map_err(|source| DurationError::Invalid {
            text: text.to_string(),
            source,
        })?;
    if duration.subsec_nanos() % 1_000_000 != 0 {
        return Err(DurationError::SubMillisecond {
            text: text.to_string(),
        });
    }
    Ok(duration)
}

/// A duration flag whose default shows (and parses) like what a user types:
/// `10s`, `500ms`, `2h`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HumanDuration(pub Duration);

impl std::fmt::Display for HumanDuration {
    /// The largest unit that writes the duration exactly (sub-millisecond
    /// parts are dropped), so `60s` shows as `1m` and `1500ms` stays one
    /// number.
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
    type Err = DurationError;

    fn from_str(text: &str) -> Result<Self, DurationError> {
        parse_duration(text).map(Self)
    }
}

/// [`parse_duration`], refusing zero.
pub fn positive_duration(text: &str) -> Result<HumanDuration, DurationError> {
    match parse_duration(text)? {
        Duration::ZERO => Err(DurationError::Zero {
            text: text.to_string(),
        }),
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
        let zero = positive_duration("0s").unwrap_err();
        assert!(matches!(zero, DurationError::Zero { .. }));
        assert!(zero.to_string().contains("at least 1ms"), "{zero}");
        assert_eq!(
            positive_duration("5s"),
            Ok(HumanDuration(Duration::from_secs(5)))
        );
    }

    #[test]
    fn the_documented_units_parse() {
        for (text, expected) in [
            ("500ms", Duration::from_millis(500)),
            ("30s", Duration::from_secs(30)),
            ("5m", Duration::from_secs(300)),
            ("2h", Duration::from_secs(7200)),
            ("1d", Duration::from_secs(86_400)),
            (" 30s ", Duration::from_secs(30)),
            ("1h 30m", Duration::from_secs(5400)),
            ("2min", Duration::from_secs(120)),
        ] {
            assert_eq!(parse_duration(text), Ok(expected), "{text}");
        }
    }

    #[test]
    fn bad_durations_say_what_is_wrong_and_what_to_write() {
        for (text, expected) in [
            ("30", "unit"),
            ("3x", "unknown time unit \"x\""),
            ("ms", "expected number"),
            ("", "empty"),
            ("99999999999999999999s", "too large"),
        ] {
            let error = parse_duration(text).unwrap_err();
            let message = error.to_string();
            assert!(
                matches!(error, DurationError::Invalid { .. }),
                "{text:?}: {message}"
            );
            assert!(message.contains(expected), "{text:?}: {message}");
            assert!(message.contains("write e.g. 500ms"), "{message}");
        }
        let fine = parse_duration("1500us").unwrap_err();
        assert_eq!(
            fine,
            DurationError::SubMillisecond {
                text: "1500us".into()
            }
        );
    }
}
