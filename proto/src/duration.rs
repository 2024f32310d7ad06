//! Durations as Kubernetes users write them: `90s`, `15m`, `1h30m`, `500ms`.
//! Both binaries parse their flags and configuration with this, so a bad value
//! is refused the same way everywhere; the WorkerCluster CRD and the chart's
//! values schema check the same grammar ([`PATTERN`], [`LONGEST_HOURS`]), so
//! no value is accepted by one and refused by another.

use std::time::Duration;

/// Why a duration was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DurationError {
    #[error("{0:?} is empty; write a duration such as 90s, 15m or 1h30m")]
    Empty(String),
    #[error("{0:?} is negative; a duration must be zero or more")]
    Negative(String),
    #[error(
        "{0:?} is not a duration; write a number and a unit (ms, s, m, h), such as 90s, 15m or 1h30m"
    )]
    Malformed(String),
    #[error("{0:?} is longer than a year, which is surely a mistake")]
    Absurd(String),
}

/// A duration field of a configuration file that was refused, by name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {source}")]
pub struct FieldError {
    /// The field as the file spells it, e.g. `retention.remoteAfterFinished`.
    pub field: &'static str,
    #[source]
    pub source: DurationError,
}

/// Parses an optional duration field of a configuration file.
pub fn parse_field(
    field: &'static str,
    value: Option<&str>,
) -> Result<Option<Duration>, FieldError> {
    value
        .map(|v| parse(v).map_err(|source| FieldError { field, source }))
        .transpose()
}

/// What [`parse`] accepts, as a regular expression for schemas: `0` alone,
/// or whole numbers each followed by a unit (`ms`, `s`, `m`, `h`).
pub const PATTERN: &str = "^(0|([0-9]+(ms|s|m|h))+)$";
/// The longest duration accepted, in hours (366 days): a longer one is
/// surely a mistake.
pub const LONGEST_HOURS: u64 = 366 * 24;

/// Values users write, right and wrong: the table the binaries' parser and
/// the schemas (the pattern here, the CRD on a real API server in the
/// end-to-end tests) are checked against, so they never disagree.
#[doc(hidden)]
pub const EXAMPLES: &[&str] = &[
    "0",
    "0s",
    "00",
    "0ms",
    "1ms",
    "500ms",
    "90s",
    "15m",
    "1h",
    "1h30m",
    "1h30m15s",
    "2h0m0s",
    "01s",
    "1h1h",
    "8784h",
    "8783h59m",
    "527040m",
    "8785h",
    "9000h",
    "99999999999999999999h",
    "1.5h",
    "1.0s",
    "5",
    "s",
    "ms",
    "5x",
    "1h30",
    "5µs",
    "5us",
    "5ns",
    "1d",
    "-5s",
    "+5s",
    "",
    " ",
    " 90s",
    "90s ",
    "9 0s",
    "1H",
    "5 m",
];

const UNITS: [(&str, u64); 4] = [("ms", 1), ("s", 1_000), ("m", 60_000), ("h", 3_600_000)];
const LONGEST: Duration = Duration::from_secs(LONGEST_HOURS * 3600);

/// Parses a Go-style duration (units `ms`, `s`, `m`, `h`; `0` alone is zero).
pub fn parse(text: &str) -> Result<Duration, DurationError> {
    // No trimming: a schema's pattern refuses blanks, and so does this.
    let trimmed = text;
    if trimmed.trim().is_empty() {
        return Err(DurationError::Empty(text.into()));
    }
    if trimmed.starts_with('-') {
        return Err(DurationError::Negative(text.into()));
    }
    if trimmed == "0" {
        return Ok(Duration::ZERO);
    }
    let malformed = || DurationError::Malformed(text.into());
    let mut rest = trimmed;
    let mut millis: u64 = 0;
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !c.is_ascii_digit())
            .ok_or_else(malformed)?;
        if digits == 0 {
            return Err(malformed());
        }
        // Only digits: the one failure left is a number too large.
        let number: u64 = rest[..digits]
            .parse()
            .map_err(|_| DurationError::Absurd(text.into()))?;
        rest = &rest[digits..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit())
            .unwrap_or(rest.len());
        let (_, scale) = UNITS
            .iter()
            .find(|(unit, _)| *unit == &rest[..unit_len])
            .ok_or_else(malformed)?;
        millis = number
            .checked_mul(*scale)
            .and_then(|m| millis.checked_add(m))
            .ok_or_else(|| DurationError::Absurd(text.into()))?;
        rest = &rest[unit_len..];
    }
    let duration = Duration::from_millis(millis);
    if duration > LONGEST {
        return Err(DurationError::Absurd(text.into()));
    }
    Ok(duration)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_schema_pattern_accepts_exactly_what_the_parser_reads() {
        let pattern = regex_lite::Regex::new(PATTERN).expect("PATTERN is a regex");
        for value in EXAMPLES {
            let parsed = parse(value);
            // Past the limit is refused by a rule of its own in the schemas
            // (CEL in the CRD), not by the pattern.
            let grammatical = matches!(parsed, Ok(_) | Err(DurationError::Absurd(_)));
            assert_eq!(
                pattern.is_match(value),
                grammatical,
                "{value:?}: parse says {parsed:?}"
            );
        }
    }

    #[test]
    fn reads_what_kubernetes_users_write() {
        assert_eq!(parse("90s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse("15m"), Ok(Duration::from_secs(900)));
        assert_eq!(parse("1h30m"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse("0"), Ok(Duration::ZERO));
        assert_eq!(parse("0s"), Ok(Duration::ZERO));
    }

    #[test]
    fn refuses_negative_unparseable_and_absurd_values_saying_why() {
        assert!(matches!(parse("-5s"), Err(DurationError::Negative(_))));
        assert!(matches!(parse(""), Err(DurationError::Empty(_))));
        for bad in ["5", "s", "5x", "1h30", "1.5h", "five minutes"] {
            assert!(
                matches!(parse(bad), Err(DurationError::Malformed(_))),
                "{bad}"
            );
        }
        assert!(matches!(parse("9000h"), Err(DurationError::Absurd(_))));
        assert!(matches!(
            parse("99999999999999999h"),
            Err(DurationError::Absurd(_))
        ));
        assert!(parse("5x").unwrap_err().to_string().contains("\"5x\""));
        let field = parse_field("retention.afterDeactivated", Some("-1h"))
            .unwrap_err()
            .to_string();
        assert!(
            field.starts_with("retention.afterDeactivated: \"-1h\" is negative"),
            "{field}"
        );
        assert_eq!(parse_field("x", None), Ok(None));
    }
}
