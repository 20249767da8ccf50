//! sprig's date functions: times as Unix nanoseconds, Go's layouts and
//! durations (`crate::time`).

use super::*;

fn now_nanos() -> i128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as i128)
}

/// The time sprig's date functions read from a value: a time, or Unix
/// seconds as an integer; anything else is now.
fn time_of(v: &Value) -> i128 {
    match v {
        Value::Time(t) => *t,
        Value::Int(i, _) => i128::from(*i) * 1_000_000_000,
        _ => now_nanos(),
    }
}

/// Go falls back to UTC for a zone it does not know; a real zone this
/// I/O-free engine cannot convert to is an error rather than a wrong time.
fn check_zone(z: &str) -> Result<(), String> {
    const REGIONS: &[&str] = &[
        "Africa/",
        "America/",
        "Antarctica/",
        "Arctic/",
        "Asia/",
        "Atlantic/",
        "Australia/",
        "Brazil/",
        "Canada/",
        "Chile/",
        "Europe/",
        "Indian/",
        "Mexico/",
        "Pacific/",
        "US/",
    ];
    let real = REGIONS.iter().any(|r| z.starts_with(r))
        || matches!(
            z,
            "EST"
                | "MST"
                | "HST"
                | "EST5EDT"
                | "CST6CDT"
                | "MST7MDT"
                | "PST8PDT"
                | "CET"
                | "EET"
                | "WET"
                | "MET"
                | "Japan"
                | "Singapore"
                | "Hongkong"
                | "Israel"
                | "Turkey"
                | "Egypt"
                | "Iran"
                | "Cuba"
                | "Jamaica"
                | "Navajo"
                | "Poland"
                | "Portugal"
                | "PRC"
                | "ROC"
                | "ROK"
                | "NZ"
                | "Eire"
                | "GB"
                | "Iceland"
                | "Libya"
                | "Kwajalein"
        );
    if real && !z.ends_with("/UTC") {
        Err(format!(
            "time zone {z:?} is not available here: templates render in UTC"
        ))
    } else {
        Ok(())
    }
}

pub(super) fn register(m: &mut HashMap<&'static str, Func>) {
    add(m, "now", &[], None, |_, _| Ok(Value::Time(now_nanos())));
    add(m, "date", &[Ty::Str, Ty::Any], None, |_, a| {
        text(time::format(time_of(&a[1]), s(&a[0])))
    });
    for name in ["dateInZone", "date_in_zone"] {
        add(m, name, &[Ty::Str, Ty::Any, Ty::Str], None, |_, a| {
            check_zone(s(&a[2]))?;
            text(time::format(time_of(&a[1]), s(&a[0])))
        });
    }
    add(m, "htmlDate", ANY, None, |_, a| {
        text(time::format(time_of(&a[0]), "2006-01-02"))
    });
    add(m, "htmlDateInZone", &[Ty::Any, Ty::Str], None, |_, a| {
        check_zone(s(&a[1]))?;
        text(time::format(time_of(&a[0]), "2006-01-02"))
    });
    add(m, "toDate", STR2, None, |_, a| {
        Ok(Value::Time(
            time::parse(s(&a[0]), s(&a[1])).unwrap_or(time::ZERO),
        ))
    });
    add(m, "mustToDate", STR2, None, |_, a| {
        Ok(Value::Time(time::parse(s(&a[0]), s(&a[1]))?))
    });
    add(m, "unixEpoch", &[Ty::Time], None, |_, a| {
        text((time_of(&a[0]).div_euclid(1_000_000_000)).to_string())
    });
    for name in ["dateModify", "date_modify"] {
        add(m, name, &[Ty::Str, Ty::Time], None, |_, a| {
            Ok(Value::Time(
                time_of(&a[1]) + time::parse_duration(s(&a[0])).unwrap_or(0),
            ))
        });
    }
    for name in ["mustDateModify", "must_date_modify"] {
        add(m, name, &[Ty::Str, Ty::Time], None, |_, a| {
            Ok(Value::Time(
                time_of(&a[1]) + time::parse_duration(s(&a[0]))?,
            ))
        });
    }
    add(m, "duration", ANY, None, |_, a| {
        let n = match &a[0] {
            Value::Str(t) => t.parse::<i64>().unwrap_or(0),
            Value::Int(i, IntType::Int64) => *i,
            _ => 0,
        };
        text(time::duration_string(i128::from(n) * 1_000_000_000))
    });
    add(m, "durationRound", ANY, None, |_, a| {
        let d: i128 = match &a[0] {
            Value::Str(t) => time::parse_duration(t).unwrap_or(0),
            Value::Int(i, IntType::Int64) => i128::from(*i),
            Value::Time(t) => now_nanos().saturating_sub(*t),
            _ => 0,
        };
        text(time::duration_round(d))
    });
    add(m, "ago", ANY, None, |_, a| {
        let d = now_nanos().saturating_sub(time_of(&a[0]));
        let rounded = (d + 500_000_000).div_euclid(1_000_000_000) * 1_000_000_000;
        text(time::duration_string(rounded))
    });
}
