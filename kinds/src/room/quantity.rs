//! Kubernetes quantities (`500m`, `1.5Gi`, `2e3`) as whole numbers of a
//! resource's unit: millicores for `cpu`, whole units for every other.

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

/// Why a quantity could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} is not a Kubernetes quantity")]
pub struct NotAQuantity(pub String);

/// Which way an amount that is not whole in the unit is made whole: what a
/// Pod asks is rounded up, what a node has is rounded down, so room is never
/// overstated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Round {
    Up,
    Down,
}

/// `quantity` of `resource` in its unit (see the module), saturating at
/// `i64::MAX`; a negative quantity is refused.
pub fn amount(resource: &str, quantity: &Quantity, round: Round) -> Result<i64, NotAQuantity> {
    let scale = if resource == "cpu" { 1000 } else { 1 };
    let refused = || NotAQuantity(quantity.0.clone());
    let (numerator, denominator) = parse(quantity.0.trim()).ok_or_else(refused)?;
    let numerator = numerator.checked_mul(scale).ok_or_else(refused)?;
    let whole = match round {
        Round::Up => numerator.div_ceil(denominator),
        Round::Down => numerator / denominator,
    };
    Ok(i64::try_from(whole).unwrap_or(i64::MAX))
}

/// The quantity as a fraction `(numerator, denominator)`, both positive.
fn parse(text: &str) -> Option<(u128, u128)> {
    let text = text.strip_prefix('+').unwrap_or(text);
    let number_end = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let (number, suffix) = text.split_at(number_end);
    let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
    if whole.is_empty() && fraction.is_empty() || fraction.len() > 18 {
        return None;
    }
    let digits: u128 = format!("{whole}{fraction}").parse().ok()?;
    let mut denominator = 10u128.pow(u32::try_from(fraction.len()).ok()?);
    let mut numerator = digits;
    let (multiply, divide) = multiplier(suffix)?;
    numerator = numerator.checked_mul(multiply)?;
    denominator = denominator.checked_mul(divide)?;
    Some((numerator, denominator))
}

/// What a suffix multiplies by, as `(times, divided by)`.
fn multiplier(suffix: &str) -> Option<(u128, u128)> {
    let binary = |power: u32| Some((1u128 << power, 1));
    let decimal = |power: i32| {
        let ten = 10u128.checked_pow(power.unsigned_abs())?;
        Some(if power >= 0 { (ten, 1) } else { (1, ten) })
    };
    match suffix {
        "" => Some((1, 1)),
        "Ki" => binary(10),
        "Mi" => binary(20),
        "Gi" => binary(30),
        "Ti" => binary(40),
        "Pi" => binary(50),
        "Ei" => binary(60),
        "n" => decimal(-9),
        "u" => decimal(-6),
        "m" => decimal(-3),
        "k" => decimal(3),
        "M" => decimal(6),
        "G" => decimal(9),
        "T" => decimal(12),
        "P" => decimal(15),
        "E" => decimal(18),
        exponent => {
            let power = exponent.strip_prefix(['e', 'E'])?.parse::<i32>().ok()?;
            decimal(power.clamp(-38, 38))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn of(resource: &str, text: &str, round: Round) -> Result<i64, NotAQuantity> {
        amount(resource, &Quantity(text.into()), round)
    }

    #[test]
    fn cpu_is_read_in_millicores_and_everything_else_in_units() {
        assert_eq!(of("cpu", "2", Round::Up), Ok(2000));
        assert_eq!(of("cpu", "500m", Round::Up), Ok(500));
        assert_eq!(of("cpu", "0.25", Round::Up), Ok(250));
        assert_eq!(of("cpu", "1k", Round::Down), Ok(1_000_000));
        assert_eq!(of("memory", "1Gi", Round::Up), Ok(1 << 30));
        assert_eq!(of("memory", "1.5Ki", Round::Up), Ok(1536));
        assert_eq!(of("memory", "128M", Round::Up), Ok(128_000_000));
        assert_eq!(of("memory", "1Ti", Round::Down), Ok(1 << 40));
        assert_eq!(of("pods", "100k", Round::Down), Ok(100_000));
        assert_eq!(of("nvidia.com/gpu", "1", Round::Up), Ok(1));
        assert_eq!(of("memory", "2e3", Round::Up), Ok(2000));
        assert_eq!(of("memory", "+7", Round::Up), Ok(7));
    }

    #[test]
    fn a_fraction_of_a_unit_rounds_up_for_a_request_and_down_for_room() {
        assert_eq!(of("cpu", "1500u", Round::Up), Ok(2));
        assert_eq!(of("cpu", "1500u", Round::Down), Ok(1));
        assert_eq!(of("memory", "100m", Round::Up), Ok(1));
        assert_eq!(of("memory", "100m", Round::Down), Ok(0));
    }

    #[test]
    fn what_is_no_quantity_is_refused_by_its_text() {
        for text in ["", "-1", "1Xi", "abc", "1.2.3", "."] {
            assert_eq!(
                of("memory", text, Round::Up),
                Err(NotAQuantity(text.into())),
                "{text}"
            );
        }
        assert_eq!(of("memory", "8Ei", Round::Down), Ok(i64::MAX), "saturates");
    }
}
