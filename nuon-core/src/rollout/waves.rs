//! Waves: how many installs have the release after each wave of a
//! rollout, and which installs each wave adds.

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
