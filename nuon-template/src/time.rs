//! `time.Time` for sprig's date functions: UTC civil time from Unix
//! nanoseconds, and Go's reference-layout formatting (`2006-01-02`).

/// The civil date and time of Unix nanoseconds, in UTC.
pub struct Civil {
    /// The year.
    pub year: i64,
    /// 1 to 12.
    pub month: u32,
    /// 1 to 31.
    pub day: u32,
    /// 0 to 23.
    pub hour: u32,
    /// 0 to 59.
    pub min: u32,
    sec: u32,
    nanos: u32,
    /// 0 for Sunday.
    pub weekday: u32,
    yday: u32,
}

/// The UTC calendar time of `t` nanoseconds since the epoch.
pub fn civil(t: i128) -> Civil {
    let secs = t.div_euclid(1_000_000_000) as i64;
    let nanos = t.rem_euclid(1_000_000_000) as u32;
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400) as u32;
    // Howard Hinnant's days-to-civil.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    let leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
    const CUM: [u32; 12] = [0, 31, 59, 90, 120, 151, 181, 212, 243, 273, 304, 334];
    let yday = CUM[month as usize - 1] + day + u32::from(leap && month > 2);
    Civil {
        year,
        month,
        day,
        hour: rem / 3600,
        min: rem / 60 % 60,
        sec: rem % 60,
        nanos,
        weekday: (days + 4).rem_euclid(7) as u32,
        yday,
    }
}

const MONTHS: [&str; 12] = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
];
const DAYS: [&str; 7] = [
    "Sunday",
    "Monday",
    "Tuesday",
    "Wednesday",
    "Thursday",
    "Friday",
    "Saturday",
];

/// The elements of Go's reference layout, longest first where one is the
/// start of another.
const ELEMS: &[&str] = &[
    "January",
    "Jan",
    "Monday",
    "Mon",
    "MST",
    "2006",
    "-07:00:00",
    "-0700",
    "-07:00",
    "-07",
    "Z07:00:00",
    "Z0700",
    "Z07:00",
    "Z07",
    "002",
    "01",
    "02",
    "_2",
    "03",
    "04",
    "05",
    "06",
    "15",
    "PM",
    "pm",
    "1",
    "2",
    "3",
    "4",
    "5",
];

/// Go's `Time.String()` for a UTC time.
pub fn go_string(t: i128) -> String {
    format(t, "2006-01-02 15:04:05.999999999 -0700 MST")
}

/// RFC 3339 with nanoseconds, as `encoding/json` writes a time.
pub fn rfc3339_nano(t: i128) -> String {
    format(t, "2006-01-02T15:04:05.999999999Z07:00")
}

/// Formats `t` (UTC) with Go's reference layout.
pub fn format(t: i128, layout: &str) -> String {
    let c = civil(t);
    let mut out = String::new();
    let mut rest = layout;
    let hour12 = if c.hour.is_multiple_of(12) {
        12
    } else {
        c.hour % 12
    };
    while !rest.is_empty() {
        // Fractional seconds: .000 / ,000 (fixed) and .999 (trimmed).
        let b = rest.as_bytes();
        if (b[0] == b'.' || b[0] == b',') && b.len() > 1 && (b[1] == b'0' || b[1] == b'9') {
            let digit = b[1];
            let n = b[1..].iter().take_while(|&&x| x == digit).count();
            let next_is_digit = b.get(1 + n).is_some_and(|x| x.is_ascii_digit());
            if !next_is_digit {
                let frac = format!("{:09}", c.nanos);
                let frac = &frac[..n.min(9)];
                if digit == b'0' {
                    out.push(b[0] as char);
                    out.push_str(frac);
                } else {
                    let trimmed = frac.trim_end_matches('0');
                    if !trimmed.is_empty() {
                        out.push(b[0] as char);
                        out.push_str(trimmed);
                    }
                }
                rest = &rest[1 + n..];
                continue;
            }
        }
        if let Some(k) = ELEMS.iter().find(|k| rest.starts_with(**k)) {
            use std::fmt::Write as _;
            let month = MONTHS[c.month as usize - 1];
            let day = DAYS[c.weekday as usize];
            let _ = match *k {
                "January" => write!(out, "{month}"),
                "Jan" => write!(out, "{}", &month[..3]),
                "Monday" => write!(out, "{day}"),
                "Mon" => write!(out, "{}", &day[..3]),
                "MST" => write!(out, "UTC"),
                "2006" => write!(out, "{:04}", c.year),
                "-07:00:00" => write!(out, "+00:00:00"),
                "-0700" => write!(out, "+0000"),
                "-07:00" => write!(out, "+00:00"),
                "-07" => write!(out, "+00"),
                "Z07:00:00" | "Z0700" | "Z07:00" | "Z07" => write!(out, "Z"),
                "002" => write!(out, "{:03}", c.yday),
                "01" => write!(out, "{:02}", c.month),
                "02" => write!(out, "{:02}", c.day),
                "_2" => write!(out, "{:>2}", c.day),
                "03" => write!(out, "{hour12:02}"),
                "04" => write!(out, "{:02}", c.min),
                "05" => write!(out, "{:02}", c.sec),
                "06" => write!(out, "{:02}", c.year.rem_euclid(100)),
                "15" => write!(out, "{:02}", c.hour),
                "PM" => write!(out, "{}", if c.hour >= 12 { "PM" } else { "AM" }),
                "pm" => write!(out, "{}", if c.hour >= 12 { "pm" } else { "am" }),
                "1" => write!(out, "{}", c.month),
                "2" => write!(out, "{}", c.day),
                "3" => write!(out, "{hour12}"),
                "4" => write!(out, "{}", c.min),
                _ => write!(out, "{}", c.sec),
            };
            rest = &rest[k.len()..];
            continue;
        }
        let ch = rest.chars().next().unwrap_or(' ');
        out.push(ch);
        rest = &rest[ch.len_utf8()..];
    }
    out
}

/// Go's zero `time.Time` (January 1, year 1, UTC), in Unix nanoseconds.
pub const ZERO: i128 = -62_135_596_800 * 1_000_000_000;

/// Days since the Unix epoch of the proleptic Gregorian date `y`-`m`-`d`.
pub fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let mp = i64::from((m + 9) % 12);
    let doy = (153 * mp + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// Parses `value` with Go's reference `layout` (`time.Parse`), in UTC.
pub fn parse(layout: &str, value: &str) -> Result<i128, String> {
    let fail = |elem: &str, rest: &str| {
        format!("parsing time {value:?} as {layout:?}: cannot parse {rest:?} as {elem:?}")
    };
    let (mut year, mut month, mut day, mut hour, mut min, mut sec, mut nanos) =
        (1i64, 1u32, 1u32, 0u32, 0u32, 0u32, 0u32);
    let mut offset: i64 = 0;
    let mut pm: Option<bool> = None;
    let mut l = layout;
    let mut v = value;
    let digits = |v: &str, min: usize, max: usize| -> Option<(u32, usize)> {
        let n = v.bytes().take(max).take_while(u8::is_ascii_digit).count();
        if n < min {
            return None;
        }
        Some((v[..n].parse().ok()?, n))
    };
    while !l.is_empty() {
        let lb = l.as_bytes();
        if (lb[0] == b'.' || lb[0] == b',') && lb.len() > 1 && (lb[1] == b'0' || lb[1] == b'9') {
            let n = lb[1..].iter().take_while(|&&x| x == lb[1]).count();
            if !lb.get(1 + n).is_some_and(u8::is_ascii_digit) {
                let vb = v.as_bytes();
                if vb.first() == Some(&lb[0]) {
                    let k = vb[1..].iter().take_while(|b| b.is_ascii_digit()).count();
                    if lb[1] == b'0' && k != n {
                        return Err(fail(&l[..1 + n], v));
                    }
                    let frac = &v[1..1 + k];
                    let padded = format!("{frac:0<9}");
                    nanos = padded[..9].parse().map_err(|_| fail(&l[..1 + n], v))?;
                    v = &v[1 + k..];
                } else if lb[1] == b'0' {
                    return Err(fail(&l[..1 + n], v));
                }
                l = &l[1 + n..];
                continue;
            }
        }
        let Some(elem) = ELEMS.iter().find(|e| l.starts_with(**e)) else {
            let c = l.chars().next().unwrap_or(' ');
            if !v.starts_with(c) {
                return Err(fail(&l[..c.len_utf8()], v));
            }
            l = &l[c.len_utf8()..];
            v = &v[c.len_utf8()..];
            continue;
        };
        l = &l[elem.len()..];
        let bad = || fail(elem, v);
        let used = match *elem {
            "January" | "Jan" => {
                let found = MONTHS.iter().position(|m| {
                    let name = if *elem == "Jan" { &m[..3] } else { m };
                    v.starts_with(name)
                });
                let i = found.ok_or_else(bad)?;
                month = i as u32 + 1;
                if *elem == "Jan" { 3 } else { MONTHS[i].len() }
            }
            "Monday" | "Mon" => {
                let found = DAYS
                    .iter()
                    .find(|d| v.starts_with(if *elem == "Mon" { &d[..3] } else { d }));
                let d = found.ok_or_else(bad)?;
                if *elem == "Mon" { 3 } else { d.len() }
            }
            "MST" => {
                let n = v.bytes().take_while(u8::is_ascii_uppercase).count();
                if n < 3 {
                    return Err(bad());
                }
                n
            }
            "2006" => {
                let (y, n) = digits(v, 4, 4).ok_or_else(bad)?;
                year = i64::from(y);
                n
            }
            "06" => {
                let (y, n) = digits(v, 2, 2).ok_or_else(bad)?;
                year = i64::from(y) + if y >= 69 { 1900 } else { 2000 };
                n
            }
            "01" | "1" => {
                let (m, n) = digits(v, if *elem == "01" { 2 } else { 1 }, 2).ok_or_else(bad)?;
                if !(1..=12).contains(&m) {
                    return Err(format!("parsing time {value:?}: month out of range"));
                }
                month = m;
                n
            }
            "02" | "2" | "_2" => {
                let vv = if *elem == "_2" {
                    v.strip_prefix(' ').unwrap_or(v)
                } else {
                    v
                };
                let skipped = v.len() - vv.len();
                let (d, n) = digits(vv, if *elem == "02" { 2 } else { 1 }, 2).ok_or_else(bad)?;
                day = d;
                n + skipped
            }
            "002" => digits(v, 3, 3).ok_or_else(bad)?.1,
            "15" => {
                let (h, n) = digits(v, 2, 2).ok_or_else(bad)?;
                hour = h;
                n
            }
            "03" | "3" => {
                let (h, n) = digits(v, if *elem == "03" { 2 } else { 1 }, 2).ok_or_else(bad)?;
                hour = h % 12;
                n
            }
            "04" | "4" => {
                let (m, n) = digits(v, if *elem == "04" { 2 } else { 1 }, 2).ok_or_else(bad)?;
                min = m;
                n
            }
            "05" | "5" => {
                let (s, n) = digits(v, if *elem == "05" { 2 } else { 1 }, 2).ok_or_else(bad)?;
                sec = s;
                n
            }
            "PM" | "pm" => {
                let up = v.get(..2).map(str::to_ascii_uppercase).ok_or_else(bad)?;
                pm = Some(match up.as_str() {
                    "PM" => true,
                    "AM" => false,
                    _ => return Err(bad()),
                });
                2
            }
            zone => {
                if zone.starts_with('Z') && v.starts_with('Z') {
                    1
                } else {
                    let sign = match v.as_bytes().first() {
                        Some(b'+') => 1,
                        Some(b'-') => -1,
                        _ => return Err(bad()),
                    };
                    let body = &v[1..];
                    let colon = zone.contains(':');
                    let (h, _) = digits(body, 2, 2).ok_or_else(bad)?;
                    let mut used = 3;
                    let mut m = 0;
                    if zone.trim_start_matches(['Z', '-']).len() > 2 {
                        let rest = &body[2..];
                        let rest = if colon {
                            rest.strip_prefix(':').ok_or_else(bad)?
                        } else {
                            rest
                        };
                        m = digits(rest, 2, 2).ok_or_else(bad)?.0;
                        used += 2 + usize::from(colon);
                    }
                    offset = sign * (i64::from(h) * 3600 + i64::from(m) * 60);
                    used
                }
            }
        };
        v = &v[used.min(v.len())..];
    }
    if !v.is_empty() {
        return Err(format!("parsing time {value:?}: extra text: {v:?}"));
    }
    if pm == Some(true) {
        hour += 12;
    }
    let days = days_from_civil(year, month, day);
    let secs =
        days * 86_400 + i64::from(hour) * 3600 + i64::from(min) * 60 + i64::from(sec) - offset;
    Ok(i128::from(secs) * 1_000_000_000 + i128::from(nanos))
}

/// Go's `time.ParseDuration`, in nanoseconds.
pub fn parse_duration(t: &str) -> Result<i128, String> {
    let bad = || format!("time: invalid duration {:?}", t);
    let (neg, mut s) = match t.as_bytes().first() {
        Some(b'-') => (true, &t[1..]),
        Some(b'+') => (false, &t[1..]),
        _ => (false, t),
    };
    if s == "0" {
        return Ok(0);
    }
    if s.is_empty() {
        return Err(bad());
    }
    let mut total: f64 = 0.0;
    while !s.is_empty() {
        let n = s
            .bytes()
            .take_while(|b| b.is_ascii_digit() || *b == b'.')
            .count();
        if n == 0 {
            return Err(bad());
        }
        let num: f64 = s[..n].parse().map_err(|_| bad())?;
        s = &s[n..];
        let u = s
            .bytes()
            .take_while(|b| !b.is_ascii_digit() && *b != b'.')
            .count();
        let unit = match &s[..u] {
            "ns" => 1.0,
            "us" | "µs" | "μs" => 1e3,
            "ms" => 1e6,
            "s" => 1e9,
            "m" => 60e9,
            "h" => 3600e9,
            "" => return Err(format!("time: missing unit in duration {t:?}")),
            other => return Err(format!("time: unknown unit {other:?} in duration {t:?}")),
        };
        s = &s[u..];
        total += num * unit;
    }
    // Go's durations are int64 nanoseconds: past them it is invalid (2^63,
    // as near as a float says it).
    if total.round() > 9_223_372_036_854_775_808.0 {
        return Err(format!("time: invalid duration {t:?}"));
    }
    let d = total.round() as i128;
    Ok(if neg { -d } else { d })
}

/// Go's `time.Duration.String()`.
pub fn duration_string(d: i128) -> String {
    if d == 0 {
        return "0s".into();
    }
    let neg = d < 0;
    let u = d.unsigned_abs();
    let frac = |v: u128, digits: u32| -> String {
        let p = 10u128.pow(digits);
        let (w, f) = (v / p, v % p);
        if f == 0 {
            w.to_string()
        } else {
            let fs = format!("{f:0width$}", width = digits as usize);
            format!("{w}.{}", fs.trim_end_matches('0'))
        }
    };
    let body = if u < 1_000 {
        format!("{u}ns")
    } else if u < 1_000_000 {
        format!("{}µs", frac(u, 3))
    } else if u < 1_000_000_000 {
        format!("{}ms", frac(u, 6))
    } else {
        let secs = u / 1_000_000_000;
        let nanos = u % 1_000_000_000;
        let (h, m, s) = (secs / 3600, secs / 60 % 60, secs % 60);
        let s = frac(s * 1_000_000_000 + nanos, 9);
        if h > 0 {
            format!("{h}h{m}m{s}s")
        } else if m > 0 {
            format!("{m}m{s}s")
        } else {
            format!("{s}s")
        }
    };
    if neg { format!("-{body}") } else { body }
}

/// sprig's `durationRound`: the largest whole unit.
pub fn duration_round(d: i128) -> String {
    let u = d.unsigned_abs();
    let second = 1_000_000_000u128;
    let (minute, hour) = (60 * second, 3600 * second);
    let (day, month, year) = (24 * hour, 30 * 24 * hour, 365 * 24 * hour);
    for (unit, name) in [
        (year, "y"),
        (month, "mo"),
        (day, "d"),
        (hour, "h"),
        (minute, "m"),
        (second, "s"),
    ] {
        if u > unit {
            return format!("{}{name}", u / unit);
        }
    }
    "0s".into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layouts_format_as_go_does() {
        let t = 1_700_000_000_123_000_000i128; // 2023-11-14 22:13:20.123 UTC, a Tuesday
        assert_eq!(
            format(t, "2006-01-02T15:04:05Z07:00"),
            "2023-11-14T22:13:20Z"
        );
        assert_eq!(
            format(t, "Mon Jan _2 3:04PM .000"),
            "Tue Nov 14 10:13PM .123"
        );
        assert_eq!(go_string(t), "2023-11-14 22:13:20.123 +0000 UTC");
        assert_eq!(format(0, "2006-01-02 002"), "1970-01-01 001");
        assert_eq!(format(-86_400_000_000_000, "2006-01-02"), "1969-12-31");
    }
}
