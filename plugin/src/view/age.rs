//! How long ago something happened, in kubectl's words (`45s`, `3m20s`,
//! `5h`, `2d3h`), so the AGE and LAST HEARD columns read like `kubectl get`.

use k8s_openapi::jiff::Timestamp;

/// The time from `then` to `now` as kubectl prints an age; `<unknown>`
/// when there is no `then`.
pub fn since(then: Option<Timestamp>, now: Timestamp) -> String {
    match then {
        Some(then) => human(now.as_second() - then.as_second()),
        None => "<unknown>".into(),
    }
}

/// `seconds` as kubectl's `HumanDuration` writes it: the more time, the
/// coarser; a clock slightly ahead of ours reads as `0s`.
pub fn human(seconds: i64) -> String {
    if seconds < -1 {
        return "<invalid>".into();
    }
    if seconds < 0 {
        return "0s".into();
    }
    if seconds < 120 {
        return format!("{seconds}s");
    }
    let minutes = seconds / 60;
    if minutes < 10 {
        return with_rest(minutes, "m", seconds % 60, "s");
    }
    if minutes < 3 * 60 {
        return format!("{minutes}m");
    }
    let hours = minutes / 60;
    if hours < 8 {
        return with_rest(hours, "h", minutes % 60, "m");
    }
    if hours < 48 {
        return format!("{hours}h");
    }
    let days = hours / 24;
    if hours < 24 * 8 {
        return with_rest(days, "d", hours % 24, "h");
    }
    if hours < 24 * 365 * 2 {
        return format!("{days}d");
    }
    if hours < 24 * 365 * 8 {
        return with_rest(days / 365, "y", days % 365, "d");
    }
    format!("{}y", days / 365)
}

fn with_rest(whole: i64, unit: &str, rest: i64, rest_unit: &str) -> String {
    match rest {
        0 => format!("{whole}{unit}"),
        rest => format!("{whole}{unit}{rest}{rest_unit}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ages_read_as_kubectl_prints_them() {
        let cases = [
            (-5, "<invalid>"),
            (-1, "0s"),
            (0, "0s"),
            (45, "45s"),
            (119, "119s"),
            (120, "2m"),
            (200, "3m20s"),
            (600, "10m"),
            (179 * 60, "179m"),
            (3 * 3600, "3h"),
            (5 * 3600 + 30 * 60, "5h30m"),
            (30 * 3600, "30h"),
            (50 * 3600, "2d2h"),
            (3 * 86400, "3d"),
            (40 * 86400, "40d"),
            (800 * 86400, "2y70d"),
            (9 * 365 * 86400, "9y"),
        ];
        for (seconds, shown) in cases {
            assert_eq!(human(seconds), shown, "{seconds}s");
        }
    }

    #[test]
    fn an_age_is_counted_from_then_to_now() {
        let now: Timestamp = "2026-11-28T12:00:00Z".parse().expect("a time");
        let then: Timestamp = "2026-11-28T11:55:00Z".parse().expect("a time");
        assert_eq!(since(Some(then), now), "5m");
        assert_eq!(since(None, now), "<unknown>");
    }
}
