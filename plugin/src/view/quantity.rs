//! Resource quantities as Kubernetes writes them (`1500m`, `16Gi`, `4`),
//! read well enough to add up the room a worker reported across its node
//! pools and write the sum back for a person.

/// The amount `text` stands for (cores, bytes, devices); `None` when it is
/// not a quantity.
pub fn parse(text: &str) -> Option<f64> {
    const SUFFIXES: [(&str, f64); 13] = [
        ("Ki", 1024.0),
        ("Mi", 1024.0 * 1024.0),
        ("Gi", 1024.0 * 1024.0 * 1024.0),
        ("Ti", 1024.0 * 1024.0 * 1024.0 * 1024.0),
        ("Pi", 1024.0 * 1024.0 * 1024.0 * 1024.0 * 1024.0),
        ("Ei", 1024.0 * 1024.0 * 1024.0 * 1024.0 * 1024.0 * 1024.0),
        ("n", 1e-9),
        ("u", 1e-6),
        ("m", 1e-3),
        ("k", 1e3),
        ("M", 1e6),
        ("G", 1e9),
        ("T", 1e12),
    ];
    let text = text.trim();
    let (number, scale) = SUFFIXES
        .iter()
        .find_map(|(suffix, scale)| text.strip_suffix(suffix).map(|n| (n, *scale)))
        .or_else(|| text.strip_suffix('P').map(|n| (n, 1e15)))
        .or_else(|| text.strip_suffix('E').map(|n| (n, 1e18)))
        .unwrap_or((text, 1.0));
    if number.is_empty() || !number.starts_with(|c: char| c.is_ascii_digit() || c == '.') {
        return None;
    }
    let value: f64 = number.parse().ok()?;
    Some(value * scale).filter(|v| v.is_finite() && *v >= 0.0)
}

/// `amount` of `resource` for a person: CPU in cores (`12`, `1500m`), sizes
/// (memory, storage, huge pages) in binary units (`47.5Gi`), anything else
/// as a number.
pub fn show(resource: &str, amount: f64) -> String {
    if resource == "cpu" {
        return match amount.fract() == 0.0 {
            true => format!("{amount}"),
            false => format!("{}m", (amount * 1000.0).round()),
        };
    }
    let sized = resource.contains("memory")
        || resource.contains("storage")
        || resource.starts_with("hugepages-");
    if sized {
        let units = ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"];
        let mut value = amount;
        let mut unit = 0;
        while value >= 1024.0 && unit + 1 < units.len() {
            value /= 1024.0;
            unit += 1;
        }
        return format!("{}{}", one_decimal(value), units[unit]);
    }
    one_decimal(amount)
}

fn one_decimal(value: f64) -> String {
    let rounded = (value * 10.0).round() / 10.0;
    format!("{rounded}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantities_read_as_kubernetes_writes_them() {
        let cases = [
            ("4", Some(4.0)),
            ("1500m", Some(1.5)),
            ("16Gi", Some(16.0 * 1024.0 * 1024.0 * 1024.0)),
            ("512Mi", Some(512.0 * 1024.0 * 1024.0)),
            ("2k", Some(2000.0)),
            ("1e3", Some(1000.0)),
            ("0.5", Some(0.5)),
            ("1P", Some(1e15)),
            ("", None),
            ("Gi", None),
            ("-1", None),
            ("lots", None),
        ];
        for (text, amount) in cases {
            assert_eq!(parse(text), amount, "{text:?}");
        }
    }

    #[test]
    fn sums_are_written_for_a_person() {
        let gib = 1024.0 * 1024.0 * 1024.0;
        let cases = [
            ("cpu", 12.0, "12"),
            ("cpu", 1.5, "1500m"),
            ("memory", 47.5 * gib, "47.5Gi"),
            ("memory", 512.0, "512"),
            ("ephemeral-storage", 100.0 * gib * 1024.0, "100Ti"),
            ("nvidia.com/gpu", 4.0, "4"),
        ];
        for (resource, amount, shown) in cases {
            assert_eq!(show(resource, amount), shown, "{resource} {amount}");
        }
    }
}
