//! Cron schedules, as `cron_schedule` of an action's trigger writes them:
//! five fields (minute, hour, day of month, month, day of week) in UTC,
//! each `*`, a number, a name (`jan`, `mon`), a range `a-b`, a step
//! `*/n` or `a-b/n`, or a list of those; or one of `@hourly`, `@daily`
//! (`@midnight`), `@weekly`, `@monthly`, `@yearly` (`@annually`). As in
//! Vixie cron, when both the day of month and the day of week are
//! restricted, a day matching either fires, and 7 is Sunday too.

use crate::template::time::{civil, days_from_civil};

/// A parsed schedule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Schedule {
    minutes: u64,
    hours: u64,
    days: u64,
    months: u64,
    weekdays: u64,
    /// The day of month field was `*` (or `*/1`).
    any_day: bool,
    /// The day of week field was `*`.
    any_weekday: bool,
}

const MONTHS: [&str; 12] = [
    "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec",
];
const WEEKDAYS: [&str; 7] = ["sun", "mon", "tue", "wed", "thu", "fri", "sat"];

/// How far back [`Schedule::latest_at_or_before`] looks, in steps: a
/// schedule that never fires (`0 0 30 2 *`) ends there.
const MAX_STEPS: usize = 50_000;

impl std::str::FromStr for Schedule {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        let expanded = match text.trim() {
            "@hourly" => "0 * * * *",
            "@daily" | "@midnight" => "0 0 * * *",
            "@weekly" => "0 0 * * 0",
            "@monthly" => "0 0 1 * *",
            "@yearly" | "@annually" => "0 0 1 1 *",
            t if t.starts_with('@') => {
                return Err(format!(
                    "{t:?} is not a cron macro (@hourly, @daily, @weekly, @monthly, @yearly)"
                ));
            }
            t => t,
        };
        let fields: Vec<&str> = expanded.split_whitespace().collect();
        let [min, hour, dom, month, dow] = fields[..] else {
            return Err(format!(
                "{text:?} must have five fields (minute hour day month weekday), not {}",
                fields.len()
            ));
        };
        let weekdays = field(dow, "day of week", 0, 7, &WEEKDAYS)?;
        // 7 is Sunday too.
        let weekdays = (weekdays | (weekdays >> 7)) & 0x7f;
        Ok(Schedule {
            minutes: field(min, "minute", 0, 59, &[])?,
            hours: field(hour, "hour", 0, 23, &[])?,
            days: field(dom, "day of month", 1, 31, &[])?,
            months: field(month, "month", 1, 12, &MONTHS)?,
            weekdays,
            any_day: dom == "*" || dom == "*/1",
            any_weekday: dow == "*" || dow == "*/1",
        })
    }
}

/// One field as a bit set of the values it allows.
fn field(text: &str, what: &str, lo: u32, hi: u32, names: &[&str]) -> Result<u64, String> {
    let value = |v: &str| -> Result<u32, String> {
        let by_name = names
            .iter()
            .position(|n| n.eq_ignore_ascii_case(v))
            // Months are named from 1, weekdays from 0.
            .map(|i| i as u32 + if names.len() == 12 { 1 } else { 0 });
        let n = match by_name {
            Some(n) => n,
            None => v
                .parse::<u32>()
                .map_err(|_| format!("{what} {v:?} is not a number{}", name_hint(names)))?,
        };
        if n < lo || n > hi {
            return Err(format!("{what} {n} is out of range ({lo}-{hi})"));
        }
        Ok(n)
    };
    let mut bits = 0u64;
    for part in text.split(',') {
        let (range, step) = match part.split_once('/') {
            Some((r, s)) => {
                let step: u32 = s
                    .parse()
                    .ok()
                    .filter(|s| *s > 0)
                    .ok_or_else(|| format!("{what} step {s:?} is not a positive number"))?;
                (r, step)
            }
            None => (part, 1),
        };
        let (a, b) = match range {
            "*" => (lo, hi),
            r => match r.split_once('-') {
                Some((a, b)) => (value(a)?, value(b)?),
                // `a/n` runs from a to the end.
                None if step > 1 => (value(r)?, hi),
                None => {
                    let v = value(r)?;
                    (v, v)
                }
            },
        };
        if a > b {
            return Err(format!("{what} range {range:?} runs backwards"));
        }
        let mut v = a;
        while v <= b {
            bits |= 1 << v;
            v += step;
        }
    }
    Ok(bits)
}

fn name_hint(names: &[&str]) -> String {
    if names.is_empty() {
        String::new()
    } else {
        format!(" or a name ({})", names.join(", "))
    }
}

const MINUTE_MS: i64 = 60_000;

impl Schedule {
    fn day_matches(&self, day: u32, weekday: u32) -> bool {
        let d = self.days & (1 << day) != 0;
        let w = self.weekdays & (1 << weekday) != 0;
        match (self.any_day, self.any_weekday) {
            (true, true) => true,
            (false, true) => d,
            (true, false) => w,
            (false, false) => d || w,
        }
    }

    /// The first unit, largest first, in which `c` does not match.
    fn mismatch(&self, c: &crate::template::time::Civil) -> Option<Unit> {
        if self.months & (1 << c.month) == 0 {
            Some(Unit::Month)
        } else if !self.day_matches(c.day, c.weekday) {
            Some(Unit::Day)
        } else if self.hours & (1 << c.hour) == 0 {
            Some(Unit::Hour)
        } else if self.minutes & (1 << c.min) == 0 {
            Some(Unit::Minute)
        } else {
            None
        }
    }

    /// The latest time at or before `at_ms` (Unix milliseconds) the
    /// schedule fires, to the minute; `None` if it has not fired in years.
    pub fn latest_at_or_before(&self, at_ms: i64) -> Option<i64> {
        let mut minute = at_ms.div_euclid(MINUTE_MS);
        for _ in 0..MAX_STEPS {
            let c = civil(i128::from(minute) * 60_000_000_000);
            let day_start = days_from_civil(c.year, c.month, c.day) * 1440;
            // Back to the last minute before the unit that does not match.
            minute = match self.mismatch(&c) {
                None => return Some(minute * MINUTE_MS),
                Some(Unit::Month) => days_from_civil(c.year, c.month, 1) * 1440 - 1,
                Some(Unit::Day) => day_start - 1,
                Some(Unit::Hour) => day_start + i64::from(c.hour) * 60 - 1,
                Some(Unit::Minute) => minute - 1,
            };
        }
        None
    }

    /// The first time after `at_ms` the schedule fires, to the minute.
    pub fn next_after(&self, at_ms: i64) -> Option<i64> {
        let mut minute = at_ms.div_euclid(MINUTE_MS) + 1;
        for _ in 0..MAX_STEPS {
            let c = civil(i128::from(minute) * 60_000_000_000);
            let day_start = days_from_civil(c.year, c.month, c.day) * 1440;
            // On to the first minute after the unit that does not match.
            minute = match self.mismatch(&c) {
                None => return Some(minute * MINUTE_MS),
                Some(Unit::Month) => {
                    let (y, m) = if c.month == 12 {
                        (c.year + 1, 1)
                    } else {
                        (c.year, c.month + 1)
                    };
                    days_from_civil(y, m, 1) * 1440
                }
                Some(Unit::Day) => day_start + 1440,
                Some(Unit::Hour) => day_start + i64::from(c.hour + 1) * 60,
                Some(Unit::Minute) => minute + 1,
            };
        }
        None
    }
}

/// A unit of a civil time a schedule may not match.
enum Unit {
    Month,
    Day,
    Hour,
    Minute,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Unix ms of a UTC time.
    fn at(y: i64, mo: u32, d: u32, h: i64, mi: i64) -> i64 {
        (days_from_civil(y, mo, d) * 1440 + h * 60 + mi) * MINUTE_MS
    }

    fn s(text: &str) -> Schedule {
        text.parse().unwrap()
    }

    #[test]
    fn latest_and_next_fire() {
        // 2026-11-25 is a Wednesday.
        let now = at(2026, 11, 25, 19, 37) + 12_345;
        let cases: &[(&str, i64, i64)] = &[
            (
                "* * * * *",
                at(2026, 11, 25, 19, 37),
                at(2026, 11, 25, 19, 38),
            ),
            (
                "0 * * * *",
                at(2026, 11, 25, 19, 0),
                at(2026, 11, 25, 20, 0),
            ),
            (
                "*/15 * * * *",
                at(2026, 11, 25, 19, 30),
                at(2026, 11, 25, 19, 45),
            ),
            (
                "30 2 * * *",
                at(2026, 11, 25, 2, 30),
                at(2026, 11, 26, 2, 30),
            ),
            ("@daily", at(2026, 11, 25, 0, 0), at(2026, 11, 26, 0, 0)),
            (
                "0 9 * * mon-fri",
                at(2026, 11, 25, 9, 0),
                at(2026, 11, 26, 9, 0),
            ),
            ("0 0 * * 0", at(2026, 11, 22, 0, 0), at(2026, 11, 29, 0, 0)),
            ("0 0 * * 7", at(2026, 11, 22, 0, 0), at(2026, 11, 29, 0, 0)),
            ("0 0 1 * *", at(2026, 11, 1, 0, 0), at(2026, 12, 1, 0, 0)),
            ("0 0 29 2 *", at(2024, 2, 29, 0, 0), at(2028, 2, 29, 0, 0)),
            (
                "0 12 1 jan,jul *",
                at(2026, 7, 1, 12, 0),
                at(2027, 1, 1, 12, 0),
            ),
            // Day of month or day of week, when both are restricted.
            (
                "0 0 13 * fri",
                at(2026, 11, 20, 0, 0),
                at(2026, 11, 27, 0, 0),
            ),
            (
                "5-10/5 1 * * *",
                at(2026, 11, 25, 1, 10),
                at(2026, 11, 26, 1, 5),
            ),
            (
                "7/20 * * * *",
                at(2026, 11, 25, 19, 27),
                at(2026, 11, 25, 19, 47),
            ),
        ];
        for (text, latest, next) in cases {
            let sc = s(text);
            assert_eq!(
                sc.latest_at_or_before(now),
                Some(*latest),
                "latest of {text}"
            );
            assert_eq!(sc.next_after(now), Some(*next), "next of {text}");
        }
        // On the minute it fires, that minute is the latest.
        assert_eq!(
            s("37 19 * * *").latest_at_or_before(at(2026, 11, 25, 19, 37)),
            Some(at(2026, 11, 25, 19, 37))
        );
        // Never (February 30th).
        assert_eq!(s("0 0 30 2 *").latest_at_or_before(now), None);
    }

    #[test]
    fn bad_schedules_say_what_is_wrong() {
        for (text, want) in [
            ("every hour", "must have five fields"),
            ("60 * * * *", "minute 60 is out of range (0-59)"),
            ("* 24 * * *", "hour 24 is out of range (0-23)"),
            ("* * 0 * *", "day of month 0 is out of range (1-31)"),
            ("* * * 13 *", "month 13 is out of range (1-12)"),
            ("* * * * 8", "day of week 8 is out of range (0-7)"),
            ("*/0 * * * *", "step \"0\" is not a positive number"),
            ("5-1 * * * *", "runs backwards"),
            ("* * * foo *", "month \"foo\" is not a number or a name"),
            ("@often", "is not a cron macro"),
        ] {
            let e = text.parse::<Schedule>().unwrap_err();
            assert!(e.contains(want), "{text}: {e}");
        }
    }
}
