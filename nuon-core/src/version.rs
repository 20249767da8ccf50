//! Versions and version constraints in Terraform's syntax, for
//! `terraform_version` in app configs: `1.11.3`, `>= 1.5`, `~> 1.9`,
//! `>= 1.5, < 2.0`, `!= 1.10.1`.
//!
//! `~>` allows the rightmost given part to grow: `~> 1.9` is `>= 1.9, < 2.0`
//! and `~> 1.9.3` is `>= 1.9.3, < 1.10`. A pre-release (`1.12.0-beta1`)
//! matches only a constraint that names a pre-release, as in Terraform.

use std::cmp::Ordering;
use std::fmt;
use std::str::FromStr;

/// A version: `MAJOR.MINOR.PATCH` with an optional pre-release.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Version {
    /// The parts, missing ones as 0.
    pub parts: [u64; 3],
    /// How many parts were written (for `~>`).
    pub given: usize,
    /// `beta1` of `1.12.0-beta1`.
    pub pre: Option<String>,
}

impl Version {
    /// Orders releases as Terraform does: by the parts, a pre-release
    /// before its release.
    pub fn cmp_release(&self, other: &Version) -> Ordering {
        self.parts
            .cmp(&other.parts)
            .then_with(|| match (&self.pre, &other.pre) {
                (None, None) => Ordering::Equal,
                (None, Some(_)) => Ordering::Greater,
                (Some(_), None) => Ordering::Less,
                (Some(a), Some(b)) => a.cmp(b),
            })
    }
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let [a, b, c] = self.parts;
        write!(f, "{a}.{b}.{c}")?;
        if let Some(p) = &self.pre {
            write!(f, "-{p}")?;
        }
        Ok(())
    }
}

impl FromStr for Version {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let t = s.trim();
        let t = t.strip_prefix('v').unwrap_or(t);
        let (core, pre) = match t.split_once('-') {
            Some((c, p)) if !p.is_empty() => (c, Some(p.to_owned())),
            Some(_) => return Err(format!("{s:?} is not a version")),
            None => (t, None),
        };
        let nums: Vec<&str> = core.split('.').collect();
        if nums.is_empty() || nums.len() > 3 {
            return Err(format!("{s:?} is not a version like 1.9.0"));
        }
        let mut parts = [0u64; 3];
        for (i, n) in nums.iter().enumerate() {
            parts[i] = n
                .parse()
                .map_err(|_| format!("{s:?} is not a version like 1.9.0"))?;
        }
        Ok(Version {
            parts,
            given: nums.len(),
            pre,
        })
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Eq,
    Ne,
    Gt,
    Ge,
    Lt,
    Le,
    Pessimistic,
}

/// A version constraint: every one of its comma-separated parts must hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Constraint {
    parts: Vec<(Op, Version)>,
    text: String,
}

impl fmt::Display for Constraint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl FromStr for Constraint {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let mut parts = Vec::new();
        for raw in s.split(',') {
            let raw = raw.trim();
            let (op, rest) = [
                ("~>", Op::Pessimistic),
                (">=", Op::Ge),
                ("<=", Op::Le),
                ("!=", Op::Ne),
                (">", Op::Gt),
                ("<", Op::Lt),
                ("=", Op::Eq),
            ]
            .iter()
            .find_map(|(p, op)| raw.strip_prefix(p).map(|r| (*op, r)))
            .unwrap_or((Op::Eq, raw));
            if rest.trim().is_empty() {
                return Err(format!(
                    "version constraint {s:?} has an empty part: write e.g. \">= 1.5\" or \"~> 1.9\""
                ));
            }
            let v: Version = rest.parse().map_err(|e| {
                format!("version constraint {s:?}: {e} (write e.g. \">= 1.5\" or \"~> 1.9\")")
            })?;
            if op == Op::Pessimistic && v.given < 2 {
                return Err(format!(
                    "version constraint {s:?}: ~> needs at least MAJOR.MINOR (e.g. \"~> 1.9\")"
                ));
            }
            parts.push((op, v));
        }
        Ok(Constraint {
            parts,
            text: s.trim().to_owned(),
        })
    }
}

impl Constraint {
    /// The one version the constraint allows, when it names it exactly
    /// (`1.11.3`, `= 1.11.3`) with all three parts.
    pub fn exact(&self) -> Option<&Version> {
        match &self.parts[..] {
            [(Op::Eq, v)] if v.given == 3 => Some(v),
            _ => None,
        }
    }

    /// Whether `v` satisfies every part.
    pub fn matches(&self, v: &Version) -> bool {
        // A pre-release matches only when a part names one.
        if v.pre.is_some() && !self.parts.iter().any(|(_, p)| p.pre.is_some()) {
            return false;
        }
        self.parts.iter().all(|(op, want)| {
            let c = v.cmp_release(want);
            match op {
                Op::Eq => c == Ordering::Equal,
                Op::Ne => c != Ordering::Equal,
                Op::Gt => c == Ordering::Greater,
                Op::Ge => c != Ordering::Less,
                Op::Lt => c == Ordering::Less,
                Op::Le => c != Ordering::Greater,
                Op::Pessimistic => {
                    if c == Ordering::Less {
                        return false;
                    }
                    // The parts before the last given one must stay equal.
                    let fixed = want.given - 1;
                    v.parts[..fixed] == want.parts[..fixed]
                }
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(c: &str, v: &str) -> bool {
        c.parse::<Constraint>()
            .unwrap()
            .matches(&v.parse().unwrap())
    }

    #[test]
    fn constraints_match_as_terraform_does() {
        assert!(ok("1.11.3", "1.11.3"));
        assert!(!ok("1.11.3", "1.11.4"));
        assert!(ok(">= 1.5", "1.11.4"));
        assert!(!ok(">= 1.5", "1.4.9"));
        assert!(ok("~> 1.9", "1.11.4"));
        assert!(!ok("~> 1.9", "2.0.0"));
        assert!(ok("~> 1.9.3", "1.9.7"));
        assert!(!ok("~> 1.9.3", "1.10.0"));
        assert!(!ok("~> 1.9.3", "1.9.2"));
        assert!(ok(">= 1.5, < 2.0", "1.11.4"));
        assert!(!ok(">= 1.5, < 2.0", "2.0.0"));
        assert!(!ok("!= 1.10.1", "1.10.1"));
        assert!(ok("v1.11.4", "1.11.4"));
        assert!(
            !ok(">= 1.5", "1.12.0-beta1"),
            "pre-releases need asking for"
        );
        assert!(ok(">= 1.12.0-alpha1", "1.12.0-beta1"));
        let exact = |c: &str| {
            c.parse::<Constraint>()
                .unwrap()
                .exact()
                .map(|v| v.to_string())
        };
        assert_eq!(exact("1.11.3").as_deref(), Some("1.11.3"));
        assert_eq!(exact("= v1.11.3").as_deref(), Some("1.11.3"));
        assert_eq!(exact("1.11"), None, "a version range, not one version");
        assert_eq!(exact(">= 1.11.3"), None);
    }

    #[test]
    fn bad_constraints_say_how_to_write_them() {
        for bad in ["", ">=", "latest", "1.x", "~> 1", ">= 1.5,", "1.2.3.4"] {
            let e = bad.parse::<Constraint>().unwrap_err();
            assert!(e.contains("e.g.") || e.contains("version"), "{bad}: {e}");
        }
    }
}
