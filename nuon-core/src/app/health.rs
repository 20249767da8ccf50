//! A component's `[health]`, as Nuon writes it: probes the runner runs
//! from inside the install after the component's apply, until its health
//! holds (or the stabilization window ends).
//!
//! ```toml
//! [health]
//! stabilization_window = "2m"   # default 3m, at most 1h; may be a template
//! block_deploy = true           # fail the deploy when health does not hold
//!
//! [[health.probes]]
//! type = "http"                 # http, tcp or exec
//! name = "api"                  # default: the url, or the command's program
//! url = "https://{{.nuon.components.web.outputs.host}}/healthz"
//!
//! [[health.probes]]
//! type = "exec"
//! command = ["/bin/check", "--quick"]   # argv, no shell
//!
//! required_checks = ["billing-ready"]   # pushed by the vendor's systems
//! ```
//!
//! Probe texts and the window are templates rendered when the health step
//! starts, after the apply: they may read the component's own outputs.

use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The window when none is given (Nuon's default).
pub const DEFAULT_WINDOW: &str = "3m";

/// The longest window a component may ask for (Nuon's limit).
pub const MAX_WINDOW: Duration = Duration::from_secs(3600);

/// `[health]` of a component.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ComponentHealth {
    /// How long the runner watches after the apply for health to hold
    /// (a duration, or a template rendering one).
    pub stabilization_window: String,
    /// Whether the deploy fails when health does not hold within the
    /// window; otherwise the step ends anyway and records what it saw.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub block_deploy: bool,
    /// The probes, each its own check of the install's health.
    pub probes: Vec<HealthProbe>,
    /// Checks the vendor's own systems push for the install (`nuon
    /// installs checks push`): the deploy waits, after its probes, until
    /// each is reported healthy.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub required_checks: Vec<String>,
}

impl ComponentHealth {
    /// Whether the component's deploy has a health step.
    pub fn watched(health: Option<&ComponentHealth>) -> bool {
        health.is_some_and(|h| !h.probes.is_empty())
    }

    /// The checks the component's deploy waits for.
    pub fn required(health: Option<&ComponentHealth>) -> &[String] {
        health.map_or(&[], |h| &h.required_checks)
    }
}

/// How a probe checks the component.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ProbeKind {
    /// A GET of `url`: any 2xx or 3xx is healthy.
    Http,
    /// A TCP connection to `url` (`host:port`, or a URL whose scheme
    /// implies the port).
    Tcp,
    /// `command` run without a shell: exit code 0 is healthy.
    Exec,
}

impl ProbeKind {
    /// The kind as the config spells it.
    pub const fn as_str(self) -> &'static str {
        match self {
            ProbeKind::Http => "http",
            ProbeKind::Tcp => "tcp",
            ProbeKind::Exec => "exec",
        }
    }

    /// The probe kind spelled `text` in a probe's `type`, if it is one.
    pub fn parse(text: &str) -> Option<Self> {
        match text.trim().to_ascii_lowercase().as_str() {
            "http" => Some(ProbeKind::Http),
            "tcp" => Some(ProbeKind::Tcp),
            "exec" => Some(ProbeKind::Exec),
            _ => None,
        }
    }
}

/// One probe of `[[health.probes]]`: in a config, its texts are
/// templates; in a health job, rendered.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HealthProbe {
    /// `http`, `tcp` or `exec`.
    #[serde(rename = "type")]
    pub kind: ProbeKind,
    /// What it is called in the workflow, the install's health and the
    /// dashboard.
    pub name: String,
    /// http and tcp: the target.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// exec: the program and its arguments.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub command: Vec<String>,
}

/// Checks a window once rendered: a duration of at most [`MAX_WINDOW`].
pub fn parse_window(text: &str) -> Result<Duration, String> {
    let d = crate::parse_duration(text)?;
    if d.is_zero() {
        return Err(format!(
            "stabilization_window {text:?} is zero: give how long health must hold, like 3m"
        ));
    }
    if d > MAX_WINDOW {
        return Err(format!(
            "stabilization_window {text:?} is longer than 1h, the most it may be"
        ));
    }
    Ok(d)
}

/// What a tcp probe's target connects to: `host:port`, or a URL whose port
/// (or scheme's port) says where.
pub fn tcp_address(target: &str) -> Result<String, String> {
    let t = target.trim();
    let Some((scheme, rest)) = t.split_once("://") else {
        return match t.rsplit_once(':') {
            Some((host, port)) if !host.is_empty() && port.parse::<u16>().is_ok() => {
                Ok(t.to_owned())
            }
            _ => Err(format!(
                "tcp probe target {t:?} is not host:port (like db.internal:5432) or a URL"
            )),
        };
    };
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    let authority = authority.rsplit_once('@').map_or(authority, |(_, a)| a);
    // `[::1]:8080`: the port follows the bracket.
    let port_part = match authority.rfind(']') {
        Some(end) => authority[end + 1..].strip_prefix(':'),
        None => authority.rsplit_once(':').map(|(_, p)| p),
    };
    let has_port = port_part.is_some_and(|p| p.parse::<u16>().is_ok());
    if authority.is_empty() {
        return Err(format!("tcp probe target {t:?} names no host"));
    }
    if has_port {
        return Ok(authority.to_owned());
    }
    let port = match scheme.to_ascii_lowercase().as_str() {
        "http" | "ws" => 80,
        "https" | "wss" => 443,
        "postgres" | "postgresql" => 5432,
        "mysql" => 3306,
        "redis" => 6379,
        "rediss" => 6380,
        "mongodb" => 27017,
        "amqp" => 5672,
        "amqps" => 5671,
        other => {
            return Err(format!(
                "tcp probe target {t:?}: the scheme {other:?} implies no port; give host:port"
            ));
        }
    };
    Ok(format!("{authority}:{port}"))
}

/// Checks an http probe's target: a full `http://` or `https://` URL.
pub fn http_url(target: &str) -> Result<(), String> {
    let t = target.trim();
    let rest = t
        .strip_prefix("http://")
        .or_else(|| t.strip_prefix("https://"))
        .ok_or_else(|| format!("http probe url {t:?} is not a full http:// or https:// URL"))?;
    if rest
        .split(['/', '?', '#'])
        .next()
        .unwrap_or_default()
        .is_empty()
    {
        return Err(format!("http probe url {t:?} names no host"));
    }
    Ok(())
}

/// Whether `name` may name a pushed check: 1 to 63 letters, digits, `-`,
/// `_` or `.`.
pub fn check_name(name: &str) -> Result<(), String> {
    let ok = !name.is_empty()
        && name.len() <= 63
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'));
    if ok {
        Ok(())
    } else {
        Err(format!(
            "check name {name:?}: give 1 to 63 letters, digits, '-', '_' or '.'"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tcp_targets() {
        assert_eq!(tcp_address("db.internal:5432").unwrap(), "db.internal:5432");
        assert_eq!(
            tcp_address("https://api.example.com/x").unwrap(),
            "api.example.com:443"
        );
        assert_eq!(
            tcp_address("http://127.0.0.1:8080/h").unwrap(),
            "127.0.0.1:8080"
        );
        assert_eq!(
            tcp_address("postgres://u:p@db:6000/app").unwrap(),
            "db:6000"
        );
        assert_eq!(tcp_address("postgres://u:p@db/app").unwrap(), "db:5432");
        assert!(
            tcp_address("db.internal")
                .unwrap_err()
                .contains("host:port")
        );
        assert!(
            tcp_address("foo://db")
                .unwrap_err()
                .contains("implies no port")
        );
        assert!(tcp_address("http:///x").unwrap_err().contains("no host"));
    }

    #[test]
    fn windows() {
        assert_eq!(parse_window("3m").unwrap(), Duration::from_secs(180));
        assert!(parse_window("0s").unwrap_err().contains("zero"));
        assert!(parse_window("2h").unwrap_err().contains("1h"));
        assert!(parse_window("soon").is_err());
    }

    #[test]
    fn http_urls() {
        assert!(http_url("https://x/healthz").is_ok());
        assert!(http_url("x/healthz").unwrap_err().contains("full http"));
        assert!(http_url("http:///").unwrap_err().contains("no host"));
    }
}
