use std::path::PathBuf;
use std::time::Duration;

use crate::error::{Error, Result};

/// Where and how to reach the control plane.
#[derive(Debug, Clone)]
pub struct ClientConfig {
    /// Base URL, e.g. `http://127.0.0.1:7400`.
    pub base_url: reqwest::Url,
    /// Bearer token (an API token, or a runner token for [`crate::RunnerClient`]).
    pub token: String,
    /// Extra PEM CA certificates to trust (a corporate CA, a self-signed control plane).
    pub ca_bundle: Option<PathBuf>,
    /// Timeout of ordinary requests (long polls add their own wait to it).
    pub request_timeout: Duration,
    /// Speak HTTP/2 without negotiation on `http://` URLs (h2c), so every call
    /// shares one connection. Off by default: plain proxies do not pass h2c.
    pub http2_prior_knowledge: bool,
    /// More base URLs of the same control plane (other replicas). After a
    /// request fails to connect, the next request goes to the next URL.
    pub fallback_urls: Vec<reqwest::Url>,
}

impl ClientConfig {
    /// A configuration for `base_url` with `token` and defaults for the rest.
    pub fn new(base_url: &str, token: &str) -> Result<Self> {
        let mut base_url = reqwest::Url::parse(base_url).map_err(|e| {
            Error::Config(format!(
                "control plane URL {base_url:?} is not a URL ({e}); expected e.g. http://127.0.0.1:7400"
            ))
        })?;
        if !matches!(base_url.scheme(), "http" | "https") {
            return Err(Error::Config(format!(
                "control plane URL {base_url} must start with http:// or https://"
            )));
        }
        base_url.set_path("");
        Ok(ClientConfig {
            base_url,
            token: token.trim().to_owned(),
            ca_bundle: None,
            request_timeout: Duration::from_secs(30),
            http2_prior_knowledge: false,
            fallback_urls: Vec::new(),
        })
    }

    /// A configuration for a comma-separated list of base URLs (replicas of
    /// one control plane): the first is used until it cannot be reached.
    pub fn with_replicas(urls: &str, token: &str) -> Result<Self> {
        let mut parts = urls.split(',').map(str::trim).filter(|u| !u.is_empty());
        let first = parts
            .next()
            .ok_or_else(|| Error::Config("no control plane URL given".into()))?;
        let mut config = ClientConfig::new(first, token)?;
        for url in parts {
            config
                .fallback_urls
                .push(ClientConfig::new(url, token)?.base_url);
        }
        Ok(config)
    }

    /// The base URLs that speak plain HTTP to another machine: anyone on
    /// the path reads the token and can serve altered or replayed answers.
    /// A runner refuses them unless told otherwise.
    pub fn plain_http_off_this_machine(&self) -> Vec<String> {
        self.bases()
            .into_iter()
            .filter(|u| u.scheme() == "http" && !is_loopback(u))
            .map(|u| u.to_string())
            .collect()
    }

    /// Every base URL, the primary first.
    pub(crate) fn bases(&self) -> Vec<reqwest::Url> {
        std::iter::once(self.base_url.clone())
            .chain(self.fallback_urls.iter().cloned())
            .collect()
    }

    pub(crate) fn build_http(&self) -> Result<reqwest::Client> {
        let mut builder = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            // Shorter than the control plane's idle timeout (75 s by
            // default), so a pooled connection is dropped here before the
            // server closes it under a request.
            .pool_idle_timeout(Duration::from_secs(60))
            // Longer than any long poll (claims are held up to 50 s): the
            // poll's own answer shows the connection lives, and keepalive
            // probes sent while a claim is parked went unanswered for many
            // of 10,000 parked connections in the fleet benchmark, each
            // then cut after 75 s (reqwest probes 3 times, 15 s apart).
            .tcp_keepalive(Duration::from_secs(60))
            .tcp_nodelay(true)
            .user_agent(concat!("nuon/", env!("CARGO_PKG_VERSION")));
        if self.http2_prior_knowledge {
            builder = builder.http2_prior_knowledge();
        }
        if let Some(path) = &self.ca_bundle {
            let pem = std::fs::read(path).map_err(|e| {
                Error::Config(format!("cannot read CA bundle {}: {e}", path.display()))
            })?;
            let certs = reqwest::Certificate::from_pem_bundle(&pem).map_err(|e| {
                Error::Config(format!(
                    "CA bundle {} is not PEM certificates: {e}",
                    path.display()
                ))
            })?;
            for cert in certs {
                builder = builder.add_root_certificate(cert);
            }
        }
        builder
            .build()
            .map_err(|e| Error::Config(format!("cannot build HTTP client: {e}")))
    }
}

/// Whether `url` names this machine (`localhost`, 127.0.0.0/8, `::1`).
fn is_loopback(url: &reqwest::Url) -> bool {
    let Some(host) = url.host_str() else {
        return false;
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    match host.parse::<std::net::IpAddr>() {
        Ok(ip) => ip.is_loopback(),
        Err(_) => {
            let host = host.to_ascii_lowercase();
            host == "localhost" || host.ends_with(".localhost")
        }
    }
}

#[cfg(test)]
mod plain_http_tests {
    use super::ClientConfig;

    #[test]
    fn plain_http_is_named_only_off_this_machine() {
        let off = |urls: &str| {
            ClientConfig::with_replicas(urls, "t")
                .unwrap()
                .plain_http_off_this_machine()
        };
        assert!(off("http://127.0.0.1:7401,http://localhost:1,http://[::1]:2").is_empty());
        assert!(off("https://cp.example.com,https://10.0.0.5").is_empty());
        assert_eq!(
            off("https://cp.example.com,http://10.0.0.5:7401"),
            ["http://10.0.0.5:7401/"]
        );
        assert_eq!(off("http://cp.example.com").len(), 1);
        assert_eq!(off("http://127.0.0.1.nip.io").len(), 1);
    }
}
