//! WASM plugins: the `wasm` job, a plugin's manifest and the capabilities
//! it asks for and is granted.
//!
//! Three parties limit a plugin:
//!
//! - its **manifest** (`plugin.toml`, packaged with it) asks for
//!   capabilities: hosts, secrets, memory, time;
//! - the component's `[capabilities]` in the app config **grants** them;
//! - the runner's **policy** (set by the customer who runs it) caps them:
//!   plugins off altogether, or only some hosts.
//!
//! The runner refuses a plugin that asks for more than it is granted or
//! than the policy allows, and runs it with exactly what it asked for.

use std::collections::BTreeMap;
use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::job::{ArtifactRef, Job};

/// The artifact type of a packaged plugin.
pub const PLUGIN_ARTIFACT_TYPE: &str = "application/vnd.nuon.plugin.v1";
/// The media type of its config blob: the manifest, as JSON.
pub const PLUGIN_MANIFEST_MEDIA_TYPE: &str = "application/vnd.nuon.plugin.manifest.v1+json";
/// The media type of its one layer: the WebAssembly component.
pub const PLUGIN_COMPONENT_MEDIA_TYPE: &str = "application/vnd.nuon.plugin.component.v1+wasm";

/// Memory per call when nothing says otherwise.
pub const DEFAULT_MEMORY: u64 = 64 << 20;
/// Time per call when nothing says otherwise.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);
/// The most memory any grant may give a call.
pub const MAX_MEMORY: u64 = 4 << 30;

/// What a plugin may do. In a manifest: what it asks for; in a component's
/// config: what it is granted.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Capabilities {
    /// Hosts it may call over HTTP: `host` (any port) or `host:port`. In a
    /// grant, `*` allows any host.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allowed_hosts: Vec<String>,
    /// Secrets of the install it may read.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub secrets: Vec<String>,
    /// Memory per call (`64MiB`, `1GiB`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<String>,
    /// Time per call (`30s`, `5m`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<String>,
}

/// Capabilities with their limits read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// Bytes of linear memory per call, across all of the plugin's memories.
    pub memory: u64,
    /// Time per call.
    pub timeout: Duration,
}

impl Capabilities {
    /// Reads `[capabilities]` of a component config or a manifest (`what`
    /// names it in errors).
    pub fn from_value(v: &serde_json::Value, what: &str) -> Result<Self, String> {
        let c: Capabilities = serde_json::from_value(v.clone())
            .map_err(|e| format!("{what}: {e} (keys: allowed_hosts, secrets, memory, timeout)"))?;
        c.limits().map_err(|e| format!("{what}: {e}"))?;
        for h in &c.allowed_hosts {
            if h != "*" && !valid_host_pattern(h) {
                return Err(format!(
                    "{what}: allowed host {h:?} must be a host name or address, optionally with :PORT (no scheme, no path)"
                ));
            }
        }
        Ok(c)
    }

    /// The memory and time limits, defaults filled in.
    pub fn limits(&self) -> Result<Limits, String> {
        let memory = match &self.memory {
            Some(m) => parse_size(m)?,
            None => DEFAULT_MEMORY,
        };
        if memory > MAX_MEMORY {
            return Err(format!(
                "memory {} is more than the most a plugin may have ({} MiB)",
                self.memory.as_deref().unwrap_or_default(),
                MAX_MEMORY >> 20
            ));
        }
        let timeout = match &self.timeout {
            Some(t) => crate::parse_duration(t).map_err(|e| format!("timeout {t:?}: {e}"))?,
            None => DEFAULT_TIMEOUT,
        };
        Ok(Limits { memory, timeout })
    }

    /// Everything in `self` (asked for) that `grant` does not give, one
    /// line each; empty when the grant covers the request.
    pub fn beyond(&self, grant: &Capabilities) -> Vec<String> {
        let mut out = Vec::new();
        for h in &self.allowed_hosts {
            if !grant.allowed_hosts.iter().any(|g| covers(g, h)) {
                out.push(format!("host {h:?} is not among the granted allowed_hosts"));
            }
        }
        for s in &self.secrets {
            if !grant.secrets.contains(s) {
                out.push(format!("secret {s:?} is not among the granted secrets"));
            }
        }
        match (self.limits(), grant.limits()) {
            (Ok(want), Ok(have)) => {
                if want.memory > have.memory {
                    out.push(format!(
                        "memory {} MiB is more than the granted {} MiB",
                        want.memory >> 20,
                        have.memory >> 20
                    ));
                }
                if want.timeout > have.timeout {
                    out.push(format!(
                        "timeout {}s is longer than the granted {}s",
                        want.timeout.as_secs(),
                        have.timeout.as_secs()
                    ));
                }
            }
            (Err(e), _) | (_, Err(e)) => out.push(e),
        }
        out
    }
}

/// Whether grant pattern `grant` covers requested host `want`: `*` covers
/// everything, `host` covers `host` on any port, `host:port` only itself.
fn covers(grant: &str, want: &str) -> bool {
    if grant == "*" || grant.eq_ignore_ascii_case(want) {
        return true;
    }
    let want_host = split_port(want).0;
    split_port(grant).1.is_none() && grant.eq_ignore_ascii_case(want_host)
}

/// `host:port` split; IPv6 literals are written `[::1]:443`.
fn split_port(s: &str) -> (&str, Option<&str>) {
    if let Some(rest) = s.strip_prefix('[') {
        return match rest.split_once(']') {
            Some((h, p)) => (h, p.strip_prefix(':')),
            None => (s, None),
        };
    }
    match s.rsplit_once(':') {
        Some((h, p)) if !h.contains(':') => (h, Some(p)),
        _ => (s, None),
    }
}

fn valid_host_pattern(s: &str) -> bool {
    let (host, port) = split_port(s);
    !host.is_empty()
        && host
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b':'))
        && port.is_none_or(|p| p.parse::<u16>().is_ok())
}

/// Whether a request to `host` (and `port`) is allowed by `patterns` (as
/// [`Capabilities::allowed_hosts`]).
pub fn host_allowed(patterns: &[String], host: &str, port: u16) -> bool {
    let want = if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    };
    patterns.iter().any(|p| covers(p, &want))
}

/// Parses a size: `1024`, `512KiB`, `64MiB`, `1GiB` (also `KB`, `MB`, `GB`
/// and `K`, `M`, `G`, all powers of 1024).
pub fn parse_size(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: u64 = num
        .parse()
        .map_err(|_| format!("size {text:?} must be a number with an optional unit (64MiB)"))?;
    let shift = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "kb" | "ki" | "kib" => 10,
        "m" | "mb" | "mi" | "mib" => 20,
        "g" | "gb" | "gi" | "gib" => 30,
        u => {
            return Err(format!(
                "size {text:?}: unknown unit {u:?} (use KiB, MiB or GiB)"
            ));
        }
    };
    n.checked_mul(1 << shift)
        .ok_or_else(|| format!("size {text:?} is too large"))
}

/// A plugin's manifest: `plugin.toml` next to its component, packaged as
/// the config blob of its artifact.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PluginManifest {
    /// The plugin's name.
    pub name: String,
    /// Its version.
    pub version: String,
    /// The component file, relative to the manifest.
    pub wasm: String,
    /// What it asks for.
    #[serde(default)]
    pub capabilities: Capabilities,
}

impl PluginManifest {
    /// Reads a `plugin.toml` (`what` names it in errors).
    pub fn from_toml(text: &str, what: &str) -> Result<Self, String> {
        let m: PluginManifest = toml::from_str(text).map_err(|e| format!("{what}: {e}"))?;
        m.check(what)?;
        Ok(m)
    }

    /// Checks the fields beyond their types.
    pub fn check(&self, what: &str) -> Result<(), String> {
        if self.name.trim().is_empty() || self.version.trim().is_empty() {
            return Err(format!("{what}: name and version must not be empty"));
        }
        if self.wasm.starts_with('/') || self.wasm.split('/').any(|p| p == "..") {
            return Err(format!(
                "{what}: wasm {:?} must be a path inside the plugin's directory",
                self.wasm
            ));
        }
        let caps = serde_json::to_value(&self.capabilities).unwrap_or_default();
        Capabilities::from_value(&caps, &format!("{what} [capabilities]"))?;
        if self.capabilities.allowed_hosts.iter().any(|h| h == "*") {
            return Err(format!(
                "{what}: a plugin must name the hosts it calls; \"*\" is only for grants"
            ));
        }
        Ok(())
    }
}

/// What a `wasm` job does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum WasmAction {
    /// `validate`, then `plan` (deploy).
    Plan,
    /// `apply` of the plan its plan step made.
    Apply,
    /// `plan` (destroy).
    DestroyPlan,
    /// `destroy` of the plan its destroy plan step made.
    Destroy,
}

/// The `wasm` job: a vendor plugin from the install's store, by digest.
///
/// Its outputs: for plans `{"plan": PLAN, "changes": N}`; for an apply
/// `{"outputs": {...}, "state": STATE}`; for a destroy `{"state": null}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WasmJob {
    /// What to do.
    pub action: WasmAction,
    /// The plugin's artifact, in the install's store.
    pub plugin: ArtifactRef,
    /// The component's config, rendered (an object).
    pub config: serde_json::Value,
    /// What the component's config grants.
    #[serde(default)]
    pub grant: Capabilities,
    /// The state of the last apply.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<serde_json::Value>,
    /// For apply and destroy: the plan to carry out, as its plan step
    /// returned it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan: Option<serde_json::Value>,
    /// The values of the granted secrets (redacted from logs).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub secrets: BTreeMap<String, String>,
}

impl Job for WasmJob {
    const KIND: &'static str = "wasm";
}

#[cfg(test)]
mod tests {
    use super::*;

    fn caps(hosts: &[&str], secrets: &[&str], memory: Option<&str>) -> Capabilities {
        Capabilities {
            allowed_hosts: hosts.iter().map(|s| s.to_string()).collect(),
            secrets: secrets.iter().map(|s| s.to_string()).collect(),
            memory: memory.map(Into::into),
            timeout: None,
        }
    }

    #[test]
    fn grants_cover_requests() {
        let grant = caps(
            &["127.0.0.1", "api.example.com:443"],
            &["token"],
            Some("128MiB"),
        );
        assert!(
            caps(&["127.0.0.1:8080"], &["token"], Some("64MiB"))
                .beyond(&grant)
                .is_empty()
        );
        assert!(
            caps(&["api.example.com:443"], &[], None)
                .beyond(&grant)
                .is_empty()
        );
        let over = caps(
            &["api.example.com:80", "evil.test"],
            &["other"],
            Some("1GiB"),
        );
        let problems = over.beyond(&grant);
        assert_eq!(problems.len(), 4, "{problems:?}");
        assert!(
            caps(&["anything.test"], &[], None)
                .beyond(&caps(&["*"], &[], None))
                .is_empty()
        );
    }

    #[test]
    fn hosts_match_with_ports() {
        let p = vec!["127.0.0.1".to_string(), "api.test:443".to_string()];
        assert!(host_allowed(&p, "127.0.0.1", 9999));
        assert!(host_allowed(&p, "API.test", 443));
        assert!(!host_allowed(&p, "api.test", 80));
        assert!(!host_allowed(&p, "127.0.0.2", 80));
        assert!(host_allowed(&["[::1]:8080".into()], "::1", 8080));
    }

    #[test]
    fn sizes_and_manifests() {
        assert_eq!(parse_size("64MiB"), Ok(64 << 20));
        assert_eq!(parse_size("1G"), Ok(1 << 30));
        assert_eq!(parse_size("512"), Ok(512));
        assert!(parse_size("lots").is_err());
        assert!(parse_size("3 parsecs").is_err());
        let m = PluginManifest::from_toml(
            "name = \"r\"\nversion = \"1\"\nwasm = \"r.wasm\"\n[capabilities]\nallowed_hosts = [\"*\"]\n",
            "plugin.toml",
        );
        assert!(m.unwrap_err().contains("must name the hosts"));
        let m = PluginManifest::from_toml(
            "name = \"r\"\nversion = \"1\"\nwasm = \"../r.wasm\"\n",
            "plugin.toml",
        );
        assert!(m.unwrap_err().contains("inside the plugin's directory"));
        let m = PluginManifest::from_toml(
            "name = \"r\"\nversion = \"1\"\nwasm = \"r.wasm\"\n[capabilities]\nmemory = \"8GiB\"\n",
            "plugin.toml",
        );
        assert!(m.unwrap_err().contains("more than the most"));
    }
}
