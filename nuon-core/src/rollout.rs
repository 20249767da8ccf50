//! Waves of a rollout: `1,10%,50%,100%` says how many installs have the
//! release after each wave, as a count or a share of all the installs
//! the rollout selects (rounded up, so 10% of 8 is 1, never 0). Each wave
//! deploys the installs that bring the total to its size; a wave that adds
//! nobody is left out. The last wave must reach every install.

use std::fmt;
use std::str::FromStr;

/// How many installs have the release once a wave is done.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WaveSize {
    /// This many installs (or all, when there are fewer).
    Count(u32),
    /// This share of the installs, in percent (1 to 100), rounded up.
    Percent(u32),
}

impl WaveSize {
    /// How many of `total` installs have the release after the wave.
    pub fn of(self, total: usize) -> usize {
        match self {
            WaveSize::Count(n) => (n as usize).min(total),
            WaveSize::Percent(p) => (total * p as usize).div_ceil(100).min(total),
        }
    }
}

impl fmt::Display for WaveSize {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WaveSize::Count(n) => write!(f, "{n}"),
            WaveSize::Percent(p) => write!(f, "{p}%"),
        }
    }
}

/// The waves of a rollout, checked: sizes that never shrink, the last
/// 100%.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Waves(Vec<WaveSize>);

impl Waves {
    /// The sizes, in order.
    pub fn sizes(&self) -> &[WaveSize] {
        &self.0
    }

    /// `installs` (in the order given) split into waves: the installs
    /// each wave deploys. Waves that add nobody are left out.
    pub fn plan<T: Clone>(&self, installs: &[T]) -> Vec<Vec<T>> {
        let mut out = Vec::new();
        let mut done = 0;
        for size in &self.0 {
            let upto = size.of(installs.len()).max(done);
            if upto > done {
                out.push(installs[done..upto].to_vec());
                done = upto;
            }
        }
        out
    }
}

impl FromStr for Waves {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        let mut sizes = Vec::new();
        for part in text.split(',') {
            let p = part.trim();
            let size = if let Some(pct) = p.strip_suffix('%') {
                match pct.trim().parse::<u32>() {
                    Ok(n) if (1..=100).contains(&n) => WaveSize::Percent(n),
                    _ => {
                        return Err(format!(
                            "waves {text:?}: {p:?} is not a share from 1% to 100%"
                        ));
                    }
                }
            } else {
                match p.parse::<u32>() {
                    Ok(n) if n > 0 => WaveSize::Count(n),
                    _ => {
                        return Err(format!(
                            "waves {text:?}: {p:?} is neither a number of installs (1 or more) nor a share like 10%"
                        ));
                    }
                }
            };
            sizes.push(size);
        }
        // Shares never shrink, counts never shrink; a count after a share
        // (or the other way) cannot be compared before the installs are
        // known, and is allowed: the plan never goes back.
        for pair in sizes.windows(2) {
            let shrinks = match (pair[0], pair[1]) {
                (WaveSize::Count(a), WaveSize::Count(b)) => b < a,
                (WaveSize::Percent(a), WaveSize::Percent(b)) => b < a,
                _ => false,
            };
            if shrinks {
                return Err(format!(
                    "waves {text:?}: {} after {}: each wave says how many have the release once it is done, so sizes never shrink",
                    pair[1], pair[0]
                ));
            }
        }
        if sizes.last() != Some(&WaveSize::Percent(100)) {
            return Err(format!(
                "waves {text:?}: the last wave must be 100% (every install the rollout selects), as in 1,10%,100%"
            ));
        }
        Ok(Waves(sizes))
    }
}

impl fmt::Display for Waves {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: Vec<String> = self.0.iter().map(ToString::to_string).collect();
        f.write_str(&parts.join(","))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sizes(waves: &str, n: usize) -> Vec<usize> {
        let all: Vec<usize> = (0..n).collect();
        waves
            .parse::<Waves>()
            .unwrap()
            .plan(&all)
            .iter()
            .map(Vec::len)
            .collect()
    }

    #[test]
    fn waves_split_the_installs_cumulatively_rounding_up() {
        // The issue's own example: 8 prod installs in waves 1, 25%, 100%.
        assert_eq!(sizes("1,25%,100%", 8), [1, 1, 6]);
        assert_eq!(sizes("1,10%,50%,100%", 1000), [1, 99, 400, 500]);
        // 10% of 8 rounds up to 1: the same as the first wave, left out.
        assert_eq!(sizes("1,10%,100%", 8), [1, 7]);
        assert_eq!(sizes("100%", 3), [3]);
        assert_eq!(sizes("5,100%", 3), [3]);
        assert_eq!(sizes("1,100%", 0), Vec::<usize>::new());
        // A count after a larger share never goes back.
        assert_eq!(sizes("50%,2,100%", 10), [5, 5]);
        let all: Vec<&str> = vec!["a", "b", "c", "d"];
        let plan = "1,50%,100%".parse::<Waves>().unwrap().plan(&all);
        assert_eq!(plan, vec![vec!["a"], vec!["b"], vec!["c", "d"]]);
        assert_eq!(
            "1,10%,100%".parse::<Waves>().unwrap().to_string(),
            "1,10%,100%"
        );
    }

    #[test]
    fn bad_waves_say_what_is_wrong() {
        for (text, says) in [
            ("1,10%", "last wave must be 100%"),
            ("0,100%", "neither a number"),
            ("1,150%", "from 1% to 100%"),
            ("50%,10%,100%", "never shrink"),
            ("5,2,100%", "never shrink"),
            ("", "neither a number"),
            ("1,,100%", "neither a number"),
        ] {
            let err = text.parse::<Waves>().unwrap_err();
            assert!(err.contains(says), "{text}: {err}");
        }
    }
}
