//! Install labels and label selectors, as Kubernetes writes them.
//!
//! A label is `KEY=VALUE`: the key an optional DNS-subdomain prefix and `/`,
//! then a name of at most 63 characters (letters, digits, `-`, `_`, `.`,
//! starting and ending with a letter or digit); the value at most 63 such
//! characters, or empty. A selector is a comma-separated list of
//! requirements that all must hold: `k=v` (also `k==v`), `k!=v` (true
//! where `k` is absent too), `k in (a,b)`, `k notin (a,b)`, `k` (present)
//! and `!k` (absent). The empty selector matches every install.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// An install's labels.
pub type Labels = BTreeMap<String, String>;

fn name_ok(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
        && s.as_bytes()[0].is_ascii_alphanumeric()
        && s.as_bytes()[s.len() - 1].is_ascii_alphanumeric()
}

/// Checks a label key: `[prefix/]name`.
pub fn check_key(key: &str) -> Result<(), String> {
    let (prefix, name) = match key.rsplit_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, key),
    };
    if let Some(p) = prefix {
        let ok = !p.is_empty()
            && p.len() <= 253
            && p.split('.').all(|part| {
                let b = part.as_bytes();
                !b.is_empty()
                    && b.len() <= 63
                    && b[0].is_ascii_alphanumeric()
                    && b[b.len() - 1].is_ascii_alphanumeric()
                    && b.iter()
                        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
            });
        if !ok {
            return Err(format!(
                "label key {key:?}: the prefix before '/' must be a DNS subdomain (lowercase letters, digits, '-' and '.')"
            ));
        }
    }
    if !name_ok(name) {
        return Err(format!(
            "label key {key:?}: the name must be 1 to 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit"
        ));
    }
    Ok(())
}

/// Checks a label value: empty, or as a key's name.
pub fn check_value(key: &str, value: &str) -> Result<(), String> {
    if value.is_empty() || name_ok(value) {
        Ok(())
    } else {
        Err(format!(
            "label {key}={value:?}: a value is at most 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit (or empty)"
        ))
    }
}

/// Checks a whole set of labels.
pub fn check_labels(labels: &Labels) -> Result<(), String> {
    if labels.len() > 64 {
        return Err(format!(
            "an install has at most 64 labels, not {}",
            labels.len()
        ));
    }
    for (k, v) in labels {
        check_key(k)?;
        check_value(k, v)?;
    }
    Ok(())
}

/// `KEY=VALUE`, checked.
pub fn parse_label(text: &str) -> Result<(String, String), String> {
    let (k, v) = text
        .split_once('=')
        .ok_or_else(|| format!("{text:?} is not a label: expected KEY=VALUE"))?;
    let (k, v) = (k.trim(), v.trim());
    check_key(k)?;
    check_value(k, v)?;
    Ok((k.to_owned(), v.to_owned()))
}

/// One requirement of a selector, on one label key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Requirement {
    /// `key=value`: the label is there with this value.
    Equals(String, String),
    /// `key!=value`: the label is not there with this value (absent
    /// passes).
    NotEquals(String, String),
    /// `key in (a,b)`: the label is there with one of these values.
    In(String, Vec<String>),
    /// `key notin (a,b)`: the label is not there with any of these values
    /// (absent passes).
    NotIn(String, Vec<String>),
    /// `key`: the label is there.
    Exists(String),
    /// `!key`: the label is not there.
    Absent(String),
}

impl Requirement {
    /// Whether `labels` satisfy it.
    pub fn matches(&self, labels: &Labels) -> bool {
        match self {
            Requirement::Equals(k, v) => labels.get(k) == Some(v),
            Requirement::NotEquals(k, v) => labels.get(k) != Some(v),
            Requirement::In(k, vs) => labels.get(k).is_some_and(|x| vs.contains(x)),
            Requirement::NotIn(k, vs) => !labels.get(k).is_some_and(|x| vs.contains(x)),
            Requirement::Exists(k) => labels.contains_key(k),
            Requirement::Absent(k) => !labels.contains_key(k),
        }
    }
}

impl fmt::Display for Requirement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Requirement::Equals(k, v) => write!(f, "{k}={v}"),
            Requirement::NotEquals(k, v) => write!(f, "{k}!={v}"),
            Requirement::In(k, vs) => write!(f, "{k} in ({})", vs.join(",")),
            Requirement::NotIn(k, vs) => write!(f, "{k} notin ({})", vs.join(",")),
            Requirement::Exists(k) => write!(f, "{k}"),
            Requirement::Absent(k) => write!(f, "!{k}"),
        }
    }
}

/// The longest selector text taken: a rollout's selector is matched against
/// every install of the fleet, so its work is bounded by its size.
pub const MAX_SELECTOR_BYTES: usize = 4096;
/// The most values an `in` or `notin` list holds.
pub const MAX_SELECTOR_VALUES: usize = 256;

/// A label selector: every requirement must hold.
#[derive(Debug, Clone, Default, PartialEq, Eq, JsonSchema)]
#[schemars(with = "String")]
pub struct Selector(Vec<Requirement>);

impl Selector {
    /// Whether `labels` satisfy every requirement.
    pub fn matches(&self, labels: &Labels) -> bool {
        self.0.iter().all(|r| r.matches(labels))
    }

    /// Whether it selects every install.
    pub fn is_everything(&self) -> bool {
        self.0.is_empty()
    }

    /// Its requirements, every one of which must hold.
    pub fn requirements(&self) -> &[Requirement] {
        &self.0
    }
}

/// Splits at commas outside parentheses.
fn split_top(text: &str) -> Result<Vec<&str>, String> {
    let mut out = Vec::new();
    let (mut depth, mut start) = (0i32, 0);
    for (i, c) in text.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => {
                depth -= 1;
                if depth < 0 {
                    return Err(format!("selector {text:?}: a ')' without its '('"));
                }
            }
            ',' if depth == 0 => {
                out.push(&text[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    if depth != 0 {
        return Err(format!("selector {text:?}: a '(' without its ')'"));
    }
    out.push(&text[start..]);
    Ok(out)
}

fn set_of(key: &str, op: &str, rest: &str, whole: &str) -> Result<Vec<String>, String> {
    let inner = rest
        .trim()
        .strip_prefix('(')
        .and_then(|r| r.strip_suffix(')'))
        .ok_or_else(|| {
            format!("selector {whole:?}: after `{key} {op}` comes a list in parentheses, as in `{key} {op} (a,b)`")
        })?;
    let values: Vec<String> = inner.split(',').map(|v| v.trim().to_owned()).collect();
    if values.len() > MAX_SELECTOR_VALUES {
        return Err(format!(
            "selector: `{key} {op}` lists {} values, more than {MAX_SELECTOR_VALUES}: label the installs you mean and select that label",
            values.len()
        ));
    }
    for v in &values {
        check_value(key, v)?;
    }
    Ok(values)
}

impl FromStr for Selector {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        if text.trim().is_empty() {
            return Ok(Selector::default());
        }
        if text.len() > MAX_SELECTOR_BYTES {
            return Err(format!(
                "the selector is {} bytes, longer than {MAX_SELECTOR_BYTES}: select by a label the installs share instead of listing them",
                text.len()
            ));
        }
        let mut reqs = Vec::new();
        for part in split_top(text)? {
            let p = part.trim();
            if p.is_empty() {
                return Err(format!(
                    "selector {text:?}: an empty requirement between commas"
                ));
            }
            let in_selector = |e: String| {
                format!(
                    "selector {text:?}: {e} (requirements are k=v, k!=v, k in (a,b), k notin (a,b), k or !k)"
                )
            };
            // `KEY in (..)` / `KEY notin (..)`: the operator a word of its own.
            let set_op = |op: &str| -> Option<(&str, &str)> {
                let (key, rest) = p.split_once(char::is_whitespace)?;
                let after = rest.trim_start().strip_prefix(op)?;
                (after.is_empty() || after.starts_with([' ', '\t', '('])).then_some((key, after))
            };
            // `tier==` with nothing after it: a value left out, which
            // would silently select nothing. (`tier=` keeps Kubernetes'
            // meaning, the label with an empty value, as saved groups may
            // hold it.)
            let no_value = |k: &str, op: &str| {
                in_selector(format!(
                    "`{k}{op}` has no value: give one (`{k}{op}prod`), or select installs with the label by `{k}`, without it by `!{k}`"
                ))
            };
            // A key never holds '=', so any '=' makes an equality.
            let req = if let Some((k, v)) = p.split_once("!=") {
                let (k, v) = (k.trim(), v.trim());
                check_key(k).map_err(in_selector)?;
                check_value(k, v).map_err(in_selector)?;
                Requirement::NotEquals(k.into(), v.into())
            } else if let Some((k, v)) = p.split_once("==").or_else(|| p.split_once('=')) {
                let (k, v) = (k.trim(), v.trim());
                if v.is_empty() && p.contains("==") {
                    return Err(no_value(k, "=="));
                }
                check_key(k).map_err(in_selector)?;
                check_value(k, v).map_err(in_selector)?;
                Requirement::Equals(k.into(), v.into())
            } else if let Some((key, set)) = set_op("notin") {
                check_key(key).map_err(in_selector)?;
                Requirement::NotIn(key.into(), set_of(key, "notin", set, text)?)
            } else if let Some((key, set)) = set_op("in") {
                check_key(key).map_err(in_selector)?;
                Requirement::In(key.into(), set_of(key, "in", set, text)?)
            } else if let Some(k) = p.strip_prefix('!') {
                check_key(k.trim()).map_err(in_selector)?;
                Requirement::Absent(k.trim().into())
            } else {
                check_key(p).map_err(in_selector)?;
                Requirement::Exists(p.into())
            };
            reqs.push(req);
        }
        Ok(Selector(reqs))
    }
}

impl fmt::Display for Selector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: Vec<String> = self.0.iter().map(ToString::to_string).collect();
        f.write_str(&parts.join(","))
    }
}

impl Serialize for Selector {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_string())
    }
}

impl<'de> Deserialize<'de> for Selector {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_selector_is_bounded_in_size_and_in_its_lists() {
        let long: String = (0..MAX_SELECTOR_VALUES + 1)
            .map(|i| format!("v{i}"))
            .collect::<Vec<_>>()
            .join(",");
        let e = format!("env in ({long})").parse::<Selector>().unwrap_err();
        assert!(e.contains("more than 256"), "{e}");
        let e = "a=b,".repeat(2000).parse::<Selector>().unwrap_err();
        assert!(e.contains("longer than 4096"), "{e}");
        assert!(e.len() < 300, "the error repeats the selector: {e}");
        let most: String = (0..MAX_SELECTOR_VALUES)
            .map(|i| format!("v{i}"))
            .collect::<Vec<_>>()
            .join(",");
        format!("env in ({most})").parse::<Selector>().unwrap();
    }

    fn labels(pairs: &[(&str, &str)]) -> Labels {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn selectors_match_as_kubernetes_does() {
        let prod_eu = labels(&[("tier", "prod"), ("region", "eu")]);
        let trial = labels(&[("tier", "trial"), ("region", "eu")]);
        let bare = labels(&[]);
        let cases: &[(&str, [bool; 3])] = &[
            ("", [true, true, true]),
            ("tier=prod", [true, false, false]),
            ("tier==prod", [true, false, false]),
            ("region=eu,tier!=trial", [true, false, false]),
            ("tier!=trial", [true, false, true]),
            ("tier in (prod, staging)", [true, false, false]),
            ("tier notin (trial)", [true, false, true]),
            ("region", [true, true, false]),
            ("!region", [false, false, true]),
            ("region=eu, tier in (prod,trial)", [true, true, false]),
            // A value may start with `in`; a key may hold `in`.
            ("tier= internal", [false, false, false]),
            ("tier!= inactive", [true, true, true]),
            ("tier in(prod)", [true, false, false]),
        ];
        for (text, want) in cases {
            let s: Selector = text.parse().unwrap();
            let got = [s.matches(&prod_eu), s.matches(&trial), s.matches(&bare)];
            assert_eq!(&got, want, "{text}");
            // What it prints parses back to the same selector.
            assert_eq!(s.to_string().parse::<Selector>().unwrap(), s, "{text}");
        }
    }

    #[test]
    fn bad_selectors_and_labels_say_what_is_wrong() {
        for (text, says) in [
            ("tier=", ""),
            ("tier==", "`tier==` has no value"),
            ("tier in prod", "list in parentheses"),
            ("tier in (prod", "without its ')'"),
            ("a,,b", "empty requirement"),
            ("-bad", "name must be"),
            ("Ex.com/x=1", "DNS subdomain"),
            ("-a.com/x=1", "DNS subdomain"),
            ("a-.b/x=1", "DNS subdomain"),
            ("tier notin prod", "after `tier notin`"),
        ] {
            // `tier==` with no value is refused (it selected nothing,
            // silently); `tier=` selects tier="" as Kubernetes does.
            if says.is_empty() {
                assert!(text.parse::<Selector>().is_ok(), "{text}");
                continue;
            }
            let err = text.parse::<Selector>().err().unwrap_or_default();
            assert!(err.contains(says), "{text}: {err}");
        }
        assert!(parse_label("tier=prod").is_ok());
        assert!(parse_label("example.com/team=core").is_ok());
        assert!(parse_label("tier").unwrap_err().contains("KEY=VALUE"));
        assert!(
            parse_label("tier=pro d")
                .unwrap_err()
                .contains("at most 63")
        );
        assert!(parse_label(&format!("k={}", "x".repeat(64))).is_err());
    }
}
