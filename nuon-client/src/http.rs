use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use nuon_core::endpoint::{Endpoint, Method, path_of};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::config::ClientConfig;
use crate::error::{Error, Result};

/// One HTTP client and the configuration it was built from.
#[derive(Debug, Clone)]
pub(crate) struct Http {
    pub(crate) client: reqwest::Client,
    pub(crate) config: ClientConfig,
    /// The replicas' base URLs, and which one requests go to now.
    bases: Arc<[reqwest::Url]>,
    current: Arc<AtomicUsize>,
    /// A header sent with every request (a runner's session).
    pub(crate) always: Option<(&'static str, reqwest::header::HeaderValue)>,
}

impl Http {
    pub(crate) fn new(config: ClientConfig) -> Result<Self> {
        Ok(Self::with_client(config.build_http()?, config))
    }

    /// Uses `client` (and its connection pool) instead of building one;
    /// `config`'s TLS and HTTP/2 settings are then the client's business.
    pub(crate) fn with_client(client: reqwest::Client, config: ClientConfig) -> Self {
        Http {
            client,
            bases: config.bases().into(),
            current: Arc::new(AtomicUsize::new(0)),
            config,
            always: None,
        }
    }

    /// The URL of `path` on the replica in use.
    pub(crate) fn url(&self, path: &str) -> reqwest::Url {
        let mut url = self.bases[self.current.load(Ordering::Relaxed) % self.bases.len()].clone();
        url.set_path(path);
        url
    }

    /// After a request to `failed` could not connect, later ones go to the
    /// next replica (unless another request moved on already).
    fn fail_over(&self, failed: &reqwest::Url) {
        if self.bases.len() < 2 {
            return;
        }
        let now = self.current.load(Ordering::Relaxed);
        let base = &self.bases[now % self.bases.len()];
        if failed.origin() == base.origin() {
            let next = (now + 1) % self.bases.len();
            if self
                .current
                .compare_exchange(now, next, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
            {
                tracing::warn!(from = %base, to = %self.bases[next], "control plane unreachable; trying another replica");
            }
        }
    }

    pub(crate) fn request(&self, method: reqwest::Method, path: &str) -> reqwest::RequestBuilder {
        let req = self
            .client
            .request(method, self.url(path))
            .bearer_auth(&self.config.token)
            .timeout(self.config.request_timeout);
        match &self.always {
            Some((name, value)) => req.header(*name, value.clone()),
            None => req,
        }
    }

    /// Sends a request and decodes a JSON answer, or the API's error body.
    pub(crate) async fn send<T: DeserializeOwned>(
        &self,
        req: reqwest::RequestBuilder,
    ) -> Result<T> {
        let resp = self.execute(req).await?;
        let url = resp.url().to_string();
        let bytes = resp.bytes().await.map_err(|source| Error::Connect {
            url: url.clone(),
            source,
        })?;
        serde_json::from_slice(&bytes).map_err(|e| Error::Protocol {
            url,
            message: format!("body is not the expected JSON: {e}"),
        })
    }

    /// Sends a request and returns the response when its status is a success.
    pub(crate) async fn execute(&self, req: reqwest::RequestBuilder) -> Result<reqwest::Response> {
        let req = req.build().map_err(|e| Error::Config(e.to_string()))?;
        let target = req.url().clone();
        let url = target.to_string();
        let resp = self.client.execute(req).await.map_err(|source| {
            if source.is_connect() || source.is_timeout() || source.is_request() {
                self.fail_over(&target);
            }
            Error::Connect {
                url: url.clone(),
                source,
            }
        })?;
        let status = resp.status();
        if status.is_success() {
            return Ok(resp);
        }
        let body = resp.bytes().await.unwrap_or_default();
        Err(Error::from_body(status.as_u16(), &body))
    }

    pub(crate) async fn post<B: Serialize + ?Sized, T: DeserializeOwned>(
        &self,
        path: &str,
        body: &B,
        extra_wait: Duration,
    ) -> Result<T> {
        let req = self
            .request(reqwest::Method::POST, path)
            .timeout(self.config.request_timeout + extra_wait)
            .json(body);
        self.send(req).await
    }

    pub(crate) async fn get<T: DeserializeOwned>(&self, path: &str) -> Result<T> {
        self.send(self.request(reqwest::Method::GET, path)).await
    }

    /// Calls the operation `E` with its path parameters (in order) and its
    /// request.
    pub(crate) async fn call<E: Endpoint>(
        &self,
        params: &[&str],
        req: &E::Request,
    ) -> Result<E::Response> {
        let method = match E::METHOD {
            Method::Get => reqwest::Method::GET,
            Method::Post => reqwest::Method::POST,
            Method::Put => reqwest::Method::PUT,
            Method::Patch => reqwest::Method::PATCH,
            Method::Delete => reqwest::Method::DELETE,
        };
        let builder = self.request(method, &path_of::<E>(params));
        let builder = if E::BODY { builder.json(req) } else { builder };
        self.send(builder).await
    }
}
