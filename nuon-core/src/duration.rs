//! Human durations on command lines: `500ms`, `30s`, `10m`, `2h`, `1h30m`.

use std::time::Duration;

/// Parses `500ms`, `30s`, `10m`, `2h`, `1d` and sums like `1h30m`. A bare
/// number is seconds.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let bad = || {
        format!(
            "invalid duration {text:?}: expected a number with a unit, like 500ms, 30s, 10m, 2h or 1h30m"
        )
    };
    let s = text.trim();
    if s.is_empty() {
        return Err(bad());
    }
    if let Ok(secs) = s.parse::<u64>() {
        return Ok(Duration::from_secs(secs));
    }
    let mut total = Duration::ZERO;
    let mut rest = s;
    while !rest.is_empty() {
        let digits = rest.find(|c: char| !c.is_ascii_digit()).ok_or_else(bad)?;
        if digits == 0 {
            return Err(bad());
        }
        let n: u64 = rest[..digits].parse().map_err(|_| bad())?;
        rest = &rest[digits..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit())
            .unwrap_or(rest.len());
        let unit = &rest[..unit_len];
        rest = &rest[unit_len..];
        let part = match unit {
            "ms" => Duration::from_millis(n),
            "s" => Duration::from_secs(n),
            "m" => Duration::from_secs(n.checked_mul(60).ok_or_else(bad)?),
            "h" => Duration::from_secs(n.checked_mul(3600).ok_or_else(bad)?),
            "d" => Duration::from_secs(n.checked_mul(86_400).ok_or_else(bad)?),
            _ => return Err(bad()),
        };
        total = total.checked_add(part).ok_or_else(bad)?;
    }
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(input: &str, expected: Result<u64, ()>) {
        let got = parse_duration(input)
            .map(|d| d.as_millis() as u64)
            .map_err(|_| ());
        assert_eq!(got, expected, "{input:?}");
    }

    #[test]
    fn durations() {
        check("500ms", Ok(500));
        check("30s", Ok(30_000));
        check("10m", Ok(600_000));
        check("1h30m", Ok(5_400_000));
        check("7", Ok(7_000));
        check("", Err(()));
        check("10x", Err(()));
        check("m", Err(()));
        check("-1s", Err(()));
    }
}
