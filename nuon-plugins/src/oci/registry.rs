//! An OCI distribution registry (ECR, ACR, GAR, Harbor, `docker-registry`)
//! as an [`ArtifactStore`], over reqwest.
//!
//! - Blobs are uploaded in one streamed `PUT` after a `POST` that opens the
//!   upload (and settles authentication, since a streamed body cannot be
//!   sent twice); every byte is hashed on the way and checked against its
//!   digest, in both directions.
//! - Manifests are read and written as raw bytes with their media type,
//!   never re-serialized.
//! - Authentication: anonymous, HTTP basic, or bearer tokens from the
//!   registry's token service (with the basic credentials, when given),
//!   cached per scope; credentials may come from a docker `config.json`.
//!   Plain HTTP is for loopback registries; TLS takes extra CA certificates.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Mutex;

use async_trait::async_trait;
use futures_util::TryStreamExt;
use nuon_core::artifact::{
    ArtifactError, ArtifactStore, BlobReader, Descriptor, Digest, RawManifest, VerifyingReader,
};
use reqwest::header::{
    ACCEPT, AUTHORIZATION, CONTENT_LENGTH, CONTENT_TYPE, LOCATION, WWW_AUTHENTICATE,
};
use reqwest::{Method, RequestBuilder, Response, StatusCode};

use super::layout::check_repo;

/// The manifest media types a read accepts.
const MANIFEST_ACCEPT: &str = "application/vnd.oci.image.manifest.v1+json, \
    application/vnd.oci.image.index.v1+json, \
    application/vnd.docker.distribution.manifest.v2+json, \
    application/vnd.docker.distribution.manifest.list.v2+json";

/// Where a registry is and how to reach it.
#[derive(Debug, Clone, Default)]
pub struct RegistryConfig {
    /// `https://registry.example` or `http://127.0.0.1:5000` (plain HTTP
    /// only for loopback addresses).
    pub url: String,
    /// Basic credentials (also used to get bearer tokens).
    pub username: Option<String>,
    /// The password or access token.
    pub password: Option<String>,
    /// Extra PEM CA certificates to trust.
    pub ca_bundle: Option<std::path::PathBuf>,
    /// Blobs larger than this go up in chunks (`PATCH`es), so a dropped
    /// connection costs one chunk, not the blob. `None`: 512 MiB.
    pub chunk_threshold: Option<u64>,
    /// The size of those chunks. `None`: 64 MiB.
    pub chunk_size: Option<u64>,
}

impl RegistryConfig {
    /// A registry at `url`, anonymous.
    pub fn new(url: impl Into<String>) -> Self {
        RegistryConfig {
            url: url.into(),
            ..RegistryConfig::default()
        }
    }

    /// Takes credentials from the docker `config.json` in `$DOCKER_CONFIG`
    /// or `~/.docker`, when there is one.
    pub fn with_default_docker_config(self) -> Result<Self, ArtifactError> {
        let dir = std::env::var_os("DOCKER_CONFIG")
            .map(std::path::PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".docker")));
        match dir {
            Some(d) => self.with_docker_config(&d.join("config.json")),
            None => Ok(self),
        }
    }

    /// Takes the credentials for this registry's host from a docker
    /// `config.json` (`auths.HOST.auth`, base64 of `user:password`), when
    /// it has some.
    pub fn with_docker_config(mut self, path: &Path) -> Result<Self, ArtifactError> {
        use base64::Engine as _;
        let text = match std::fs::read_to_string(path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(self),
            Err(source) => {
                return Err(ArtifactError::Io {
                    what: format!("cannot read {}", path.display()),
                    source,
                });
            }
        };
        let json: serde_json::Value = serde_json::from_str(&text).map_err(|e| {
            ArtifactError::Invalid(format!(
                "{} is not a docker config.json: {e}",
                path.display()
            ))
        })?;
        let host = host_of(&self.url);
        // Docker Hub's credentials are kept under its index's address.
        let hub = ["registry-1.docker.io", "index.docker.io", "docker.io"];
        let same = |k: &str| {
            let h = host_of(k);
            h == host || (hub.contains(&h.as_str()) && hub.contains(&host.as_str()))
        };
        let entry = json["auths"]
            .as_object()
            .and_then(|a| a.iter().find(|(k, _)| same(k)).map(|(_, v)| v.clone()));
        if entry.is_none()
            && (json.get("credsStore").is_some() || json.get("credHelpers").is_some())
        {
            eprintln!(
                "note: {} keeps credentials in a credential helper, which is not read: put {host}'s in `auths`",
                path.display()
            );
        }
        if let Some(auth) = entry.as_ref().and_then(|e| e["auth"].as_str()) {
            let decoded = base64::engine::general_purpose::STANDARD
                .decode(auth.trim())
                .ok()
                .and_then(|b| String::from_utf8(b).ok())
                .ok_or_else(|| {
                    ArtifactError::Invalid(format!(
                        "{}: the auth of {host} is not base64 of user:password",
                        path.display()
                    ))
                })?;
            if let Some((u, p)) = decoded.split_once(':') {
                self.username = Some(u.to_owned());
                self.password = Some(p.to_owned());
            }
        }
        Ok(self)
    }
}

/// An image reference split into where it lives: `127.0.0.1:5000/img/app:1.0`
/// is (`http://127.0.0.1:5000`, `img/app`, `1.0`); `docker.io/library/busybox`
/// or `busybox` is Docker Hub's `library/busybox`; `@sha256:...` names a digest.
pub fn parse_image_ref(reference: &str) -> Result<(String, String, String), ArtifactError> {
    let bad = |why: &str| {
        ArtifactError::Invalid(format!(
            "image reference {reference:?} {why}: give HOST/REPOSITORY:TAG or HOST/REPOSITORY@sha256:..."
        ))
    };
    let (name, tag) = match reference.rsplit_once('@') {
        // `NAME:TAG@DIGEST`: the digest decides; the tag is for people.
        Some((n, d)) => (
            n.rsplit_once(':')
                .filter(|(_, t)| !t.contains('/'))
                .map_or(n, |(n, _)| n),
            d.to_owned(),
        ),
        None => match reference.rsplit_once(':') {
            Some((n, t)) if !t.contains('/') => (n, t.to_owned()),
            _ => (reference, "latest".to_owned()),
        },
    };
    let (first, rest) = name.split_once('/').unwrap_or(("", name));
    let has_host = first.contains('.') || first.contains(':') || first == "localhost";
    let (host, repo) = if has_host {
        (first.to_owned(), rest.to_owned())
    } else {
        ("docker.io".to_owned(), name.to_owned())
    };
    let (base, repo) = if host == "docker.io" || host == "index.docker.io" {
        let repo = if repo.contains('/') {
            repo
        } else {
            format!("library/{repo}")
        };
        ("https://registry-1.docker.io".to_owned(), repo)
    } else if is_loopback(&host) {
        (format!("http://{host}"), repo)
    } else {
        (format!("https://{host}"), repo)
    };
    if repo.is_empty() || tag.is_empty() {
        return Err(bad("has no repository or tag"));
    }
    check_repo(&repo)?;
    Ok((base, repo, tag))
}

/// Whether `host[:port]` names this machine: `localhost` or a loopback
/// address, nothing that merely starts like one.
pub fn is_loopback(host: &str) -> bool {
    let name = if let Some(rest) = host.strip_prefix('[') {
        rest.split(']').next().unwrap_or("")
    } else {
        host.rsplit_once(':')
            .filter(|(_, port)| port.bytes().all(|b| b.is_ascii_digit()))
            .map_or(host, |(h, _)| h)
    };
    name == "localhost"
        || name
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// `host[:port]` of a URL or a bare host.
fn host_of(url: &str) -> String {
    let rest = url.split_once("://").map_or(url, |x| x.1);
    rest.split('/').next().unwrap_or(rest).to_owned()
}

/// A registry, as an artifact store.
pub struct RegistryStore {
    chunk_threshold: u64,
    chunk_size: u64,
    base: String,
    client: reqwest::Client,
    username: Option<String>,
    password: Option<String>,
    /// The `Authorization` value that worked, per scope.
    auth: Mutex<HashMap<String, String>>,
}

fn io_err(
    what: impl Into<String>,
    e: impl std::error::Error + Send + Sync + 'static,
) -> ArtifactError {
    ArtifactError::Io {
        what: what.into(),
        source: std::io::Error::other(e),
    }
}

/// One parameter of a `WWW-Authenticate` challenge.
fn param(challenge: &str, key: &str) -> Option<String> {
    let at = challenge.find(&format!("{key}=\""))? + key.len() + 2;
    let end = challenge[at..].find('"')? + at;
    Some(challenge[at..end].to_owned())
}

impl RegistryStore {
    /// A client of the registry `config` names.
    pub fn new(config: &RegistryConfig) -> Result<Self, ArtifactError> {
        let url = config.url.trim_end_matches('/');
        let (scheme, _) = url.split_once("://").ok_or_else(|| {
            ArtifactError::Invalid(format!(
                "registry URL {url:?} has no scheme: use https://HOST or, on loopback, http://127.0.0.1:PORT"
            ))
        })?;
        let host = host_of(url);
        let loopback = is_loopback(&host);
        match scheme {
            "https" => {}
            "http" if loopback => {}
            "http" => {
                return Err(ArtifactError::Invalid(format!(
                    "registry {url} is plain HTTP on a non-loopback address: use https"
                )));
            }
            other => {
                return Err(ArtifactError::Invalid(format!(
                    "registry URL scheme {other:?} is not http or https"
                )));
            }
        }
        let mut builder = reqwest::Client::builder()
            .user_agent(concat!("nuon/", env!("CARGO_PKG_VERSION")))
            .connect_timeout(std::time::Duration::from_secs(15));
        if let Some(path) = &config.ca_bundle {
            let pem = std::fs::read(path).map_err(|source| ArtifactError::Io {
                what: format!("cannot read CA bundle {}", path.display()),
                source,
            })?;
            for cert in reqwest::Certificate::from_pem_bundle(&pem)
                .map_err(|e| io_err(format!("CA bundle {}", path.display()), e))?
            {
                builder = builder.add_root_certificate(cert);
            }
        }
        let client = builder
            .build()
            .map_err(|e| io_err("cannot build the HTTP client", e))?;
        Ok(RegistryStore {
            chunk_threshold: config.chunk_threshold.unwrap_or(512 << 20),
            chunk_size: config.chunk_size.unwrap_or(64 << 20).max(1 << 16),
            base: url.to_owned(),
            client,
            username: config.username.clone(),
            password: config.password.clone(),
            auth: Mutex::new(HashMap::new()),
        })
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// An upload `Location`, which may be relative.
    fn absolute(&self, location: &str) -> String {
        if location.starts_with("http://") || location.starts_with("https://") {
            location.to_owned()
        } else {
            self.url(location)
        }
    }

    /// A large blob in chunks: each `PATCH` is retried after asking the
    /// registry how far the upload got (its `Range`), so a dropped
    /// connection costs at most one chunk; memory stays one chunk.
    async fn put_chunked(
        &self,
        repo: &str,
        blob: &Descriptor,
        reader: BlobReader,
        mut location: String,
    ) -> Result<(), ArtifactError> {
        use tokio::io::AsyncReadExt;
        let what = format!("uploading {} to {repo}", blob.digest);
        let mut checked = VerifyingReader::new(reader, blob.clone());
        let mut offset = 0u64;
        let mut chunk = Vec::with_capacity(self.chunk_size as usize);
        loop {
            chunk.clear();
            let mut limited = (&mut checked).take(self.chunk_size);
            limited.read_to_end(&mut chunk).await.map_err(|e| {
                if e.kind() == std::io::ErrorKind::InvalidData {
                    ArtifactError::Corrupt(format!("refused blob {} for {repo}: {e}", blob.digest))
                } else {
                    io_err(what.clone(), e)
                }
            })?;
            if chunk.is_empty() {
                break;
            }
            let end = offset + chunk.len() as u64 - 1;
            // Where this chunk's upload has got to: after a failure the
            // registry says (its `Range`), and the rest is sent from there.
            let mut from = offset;
            let mut tries = 0;
            loop {
                tries += 1;
                let part = chunk[(from - offset) as usize..].to_vec();
                let req = self.pushing(
                    repo,
                    self.client
                        .patch(&location)
                        .header(CONTENT_TYPE, "application/octet-stream")
                        .header(CONTENT_LENGTH, part.len())
                        .header("Content-Range", format!("{from}-{end}"))
                        .body(part),
                );
                match req.send().await {
                    Ok(resp) if resp.status() == StatusCode::ACCEPTED => {
                        if let Some(l) = resp.headers().get(LOCATION).and_then(|v| v.to_str().ok())
                        {
                            location = self.absolute(l);
                        }
                        break;
                    }
                    Ok(resp) if tries >= 3 => return Err(unexpected(resp, &what).await),
                    Err(e) if tries >= 3 => return Err(io_err(what.clone(), e)),
                    _ => {
                        let (got, loc) = self.upload_status(repo, &location).await?;
                        location = loc;
                        // An empty upload says `0-0`, as one holding a byte would.
                        let got = if offset == 0 && got <= 1 { 0 } else { got };
                        if got > end {
                            break;
                        }
                        if got < offset {
                            // The session lost what earlier chunks sent: the
                            // blob is sent again, from a new upload.
                            return Err(io_err(
                                what.clone(),
                                std::io::Error::other(format!(
                                    "the registry holds {got} bytes of the upload where {offset} were sent"
                                )),
                            ));
                        }
                        from = got;
                    }
                }
            }
            offset = end + 1;
        }
        let put = with_digest(&location, &blob.digest);
        let req = self.pushing(repo, self.client.put(&put).header(CONTENT_LENGTH, 0));
        let resp = req.send().await.map_err(|e| io_err(what.clone(), e))?;
        if resp.status() != StatusCode::CREATED {
            return Err(unexpected(resp, &what).await);
        }
        Ok(())
    }

    /// How many bytes an upload session holds (its `Range: 0-N`) and its
    /// current location. A session the registry no longer has is an I/O
    /// error, so the blob is sent again from a new one.
    async fn upload_status(
        &self,
        repo: &str,
        location: &str,
    ) -> Result<(u64, String), ArtifactError> {
        let resp = self
            .send(&push(repo), "upload status", || self.client.get(location))
            .await?;
        if !resp.status().is_success() {
            return Err(io_err(
                format!("upload status of {repo}"),
                std::io::Error::other(format!("the registry answered {}", resp.status())),
            ));
        }
        let held = resp
            .headers()
            .get("Range")
            .and_then(|v| v.to_str().ok())
            .and_then(|r| r.split_once('-'))
            .and_then(|(_, end)| end.parse::<u64>().ok())
            .map_or(0, |end| end + 1);
        let loc = resp
            .headers()
            .get(LOCATION)
            .and_then(|v| v.to_str().ok())
            .map_or_else(|| location.to_owned(), |l| self.absolute(l));
        Ok((held, loc))
    }

    /// Gets (and caches) the `Authorization` value a challenge asks for.
    async fn authorize(&self, challenge: &str, scope: &str) -> Result<String, ArtifactError> {
        use base64::Engine as _;
        let basic = || -> Result<String, ArtifactError> {
            match (&self.username, &self.password) {
                (Some(u), Some(p)) => Ok(format!(
                    "Basic {}",
                    base64::engine::general_purpose::STANDARD.encode(format!("{u}:{p}"))
                )),
                _ => Err(ArtifactError::Invalid(format!(
                    "registry {} needs credentials for {scope}: give a username and password (or a docker config.json entry for it)",
                    self.base
                ))),
            }
        };
        let value = if challenge
            .trim_start()
            .to_ascii_lowercase()
            .starts_with("bearer")
        {
            let realm = param(challenge, "realm").ok_or_else(|| {
                ArtifactError::Invalid(format!(
                    "registry {} sent a bearer challenge without a realm: {challenge}",
                    self.base
                ))
            })?;
            let mut req = self.client.get(&realm);
            let mut query = vec![("scope", scope.to_owned())];
            if let Some(s) = param(challenge, "service") {
                query.push(("service", s));
            }
            req = req.query(&query);
            if let Ok(b) = basic() {
                req = req.header(AUTHORIZATION, b);
            }
            let resp = req
                .send()
                .await
                .map_err(|e| io_err(format!("token request to {realm}"), e))?;
            if !resp.status().is_success() {
                return Err(ArtifactError::Invalid(format!(
                    "the token service of {} refused {scope}: {} (check the credentials)",
                    self.base,
                    resp.status()
                )));
            }
            let body: serde_json::Value = resp
                .json()
                .await
                .map_err(|e| io_err(format!("token answer of {realm}"), e))?;
            let token = body["token"]
                .as_str()
                .or_else(|| body["access_token"].as_str())
                .ok_or_else(|| {
                    ArtifactError::Invalid(format!("the token service {realm} answered no token"))
                })?;
            format!("Bearer {token}")
        } else {
            basic()?
        };
        self.auth
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(scope.to_owned(), value.clone());
        Ok(value)
    }

    /// `req` with the credentials that opened `repo`'s upload: a streamed
    /// body cannot be sent twice, so the upload's `POST` settled them.
    fn pushing(&self, repo: &str, req: RequestBuilder) -> RequestBuilder {
        match self.cached(&push(repo)) {
            Some(a) => req.header(AUTHORIZATION, a),
            None => req,
        }
    }

    fn cached(&self, scope: &str) -> Option<String> {
        self.auth
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(scope)
            .cloned()
    }

    /// Sends a request built by `build` (again, with credentials, after a
    /// 401 that asks for them).
    async fn send(
        &self,
        scope: &str,
        what: &str,
        build: impl Fn() -> RequestBuilder,
    ) -> Result<Response, ArtifactError> {
        let with_auth = |auth: Option<String>| {
            let req = build();
            match auth {
                Some(a) => req.header(AUTHORIZATION, a),
                None => req,
            }
        };
        let resp = with_auth(self.cached(scope))
            .send()
            .await
            .map_err(|e| io_err(what, e))?;
        if resp.status() != StatusCode::UNAUTHORIZED {
            return Ok(resp);
        }
        let challenge = resp
            .headers()
            .get(WWW_AUTHENTICATE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("Basic")
            .to_owned();
        let auth = self.authorize(&challenge, scope).await?;
        let resp = with_auth(Some(auth))
            .send()
            .await
            .map_err(|e| io_err(what, e))?;
        if resp.status() == StatusCode::UNAUTHORIZED || resp.status() == StatusCode::FORBIDDEN {
            let message = if self.username.is_some() {
                format!(
                    "registry {} refused the credentials for {scope} ({}): check the username and password",
                    self.base,
                    resp.status()
                )
            } else {
                format!(
                    "registry {} refused anonymous access to {scope} ({}): give credentials (a docker config.json `auths` entry for it)",
                    self.base,
                    resp.status()
                )
            };
            return Err(ArtifactError::Invalid(message));
        }
        Ok(resp)
    }
}

/// An upload location with the blob's digest, to finish the upload.
fn with_digest(location: &str, digest: &Digest) -> String {
    let sep = if location.contains('?') { '&' } else { '?' };
    format!("{location}{sep}digest={digest}")
}

fn pull(repo: &str) -> String {
    format!("repository:{repo}:pull")
}

fn push(repo: &str) -> String {
    format!("repository:{repo}:pull,push")
}

async fn unexpected(resp: Response, what: &str) -> ArtifactError {
    let status = resp.status();
    let body = resp.text().await.unwrap_or_default();
    ArtifactError::Invalid(format!(
        "{what}: the registry answered {status}: {}",
        body.chars().take(300).collect::<String>()
    ))
}

#[async_trait]
impl ArtifactStore for RegistryStore {
    async fn has_blob(&self, repo: &str, blob: &Descriptor) -> Result<bool, ArtifactError> {
        check_repo(repo)?;
        let url = self.url(&format!("/v2/{repo}/blobs/{}", blob.digest));
        let resp = self
            .send(&pull(repo), "blob check", || self.client.head(&url))
            .await?;
        match resp.status() {
            StatusCode::NOT_FOUND => Ok(false),
            s if s.is_success() => Ok(resp
                .headers()
                .get(CONTENT_LENGTH)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.parse::<u64>().ok())
                .is_none_or(|n| n == blob.size)),
            _ => Err(unexpected(resp, &format!("HEAD blob {} in {repo}", blob.digest)).await),
        }
    }

    async fn open_blob(&self, repo: &str, blob: &Descriptor) -> Result<BlobReader, ArtifactError> {
        check_repo(repo)?;
        let url = self.url(&format!("/v2/{repo}/blobs/{}", blob.digest));
        let resp = self
            .send(&pull(repo), "blob download", || self.client.get(&url))
            .await?;
        match resp.status() {
            StatusCode::NOT_FOUND => Err(ArtifactError::NotFound(format!(
                "no blob {} in {}/{repo}",
                blob.digest, self.base
            ))),
            s if s.is_success() => {
                let stream = resp.bytes_stream().map_err(std::io::Error::other);
                let reader = tokio_util::io::StreamReader::new(stream);
                Ok(Box::pin(VerifyingReader::new(reader, blob.clone())))
            }
            _ => Err(unexpected(resp, &format!("GET blob {} in {repo}", blob.digest)).await),
        }
    }

    async fn open_blob_from(
        &self,
        repo: &str,
        blob: &Descriptor,
        offset: u64,
    ) -> Result<BlobReader, ArtifactError> {
        check_repo(repo)?;
        let url = self.url(&format!("/v2/{repo}/blobs/{}", blob.digest));
        let resp = self
            .send(&pull(repo), "blob download", || {
                self.client
                    .get(&url)
                    .header("Range", format!("bytes={offset}-"))
            })
            .await?;
        let status = resp.status();
        if status == StatusCode::NOT_FOUND {
            return Err(ArtifactError::NotFound(format!(
                "no blob {} in {}/{repo}",
                blob.digest, self.base
            )));
        }
        if !status.is_success() {
            return Err(unexpected(resp, &format!("GET blob {} in {repo}", blob.digest)).await);
        }
        let stream = resp.bytes_stream().map_err(std::io::Error::other);
        let mut reader: BlobReader = Box::pin(tokio_util::io::StreamReader::new(stream));
        if status != StatusCode::PARTIAL_CONTENT {
            // The registry sent it all: drop what is held already.
            use tokio::io::AsyncReadExt as _;
            let mut head = (&mut reader).take(offset);
            tokio::io::copy(&mut head, &mut tokio::io::sink())
                .await
                .map_err(|e| io_err(format!("blob {} in {repo}", blob.digest), e))?;
        }
        // Unchecked on its own: the destination checks the whole blob.
        Ok(reader)
    }

    async fn put_blob(
        &self,
        repo: &str,
        blob: &Descriptor,
        reader: BlobReader,
    ) -> Result<(), ArtifactError> {
        check_repo(repo)?;
        let start = self.url(&format!("/v2/{repo}/blobs/uploads/"));
        let resp = self
            .send(&push(repo), "blob upload", || {
                self.client.post(&start).header(CONTENT_LENGTH, "0")
            })
            .await?;
        if resp.status() != StatusCode::ACCEPTED {
            return Err(unexpected(
                resp,
                &format!("starting the upload of {} to {repo}", blob.digest),
            )
            .await);
        }
        let location = resp
            .headers()
            .get(LOCATION)
            .and_then(|v| v.to_str().ok())
            .ok_or_else(|| {
                ArtifactError::Invalid("the registry opened an upload without a Location".into())
            })?;
        let location = self.absolute(location);
        if blob.size > self.chunk_threshold {
            return self.put_chunked(repo, blob, reader, location).await;
        }
        let put = with_digest(&location, &blob.digest);
        // The bytes are checked while they stream: a source that does not
        // match the digest ends the upload with an error.
        let checked = VerifyingReader::new(reader, blob.clone());
        let body = reqwest::Body::wrap_stream(tokio_util::io::ReaderStream::with_capacity(
            checked,
            256 * 1024,
        ));
        let req = self.pushing(
            repo,
            self.client
                .put(&put)
                .header(CONTENT_TYPE, "application/octet-stream")
                .header(CONTENT_LENGTH, blob.size)
                .body(body),
        );
        let resp = req.send().await.map_err(|e| {
            let mut src: Option<&dyn std::error::Error> = Some(&e);
            let mut corrupt = false;
            while let Some(s) = src {
                if s.to_string().contains("does not match its digest") {
                    corrupt = true;
                }
                src = s.source();
            }
            if corrupt {
                ArtifactError::Corrupt(format!(
                    "refused blob {} for {repo}: its bytes do not match the digest",
                    blob.digest
                ))
            } else {
                io_err(format!("uploading {} to {repo}", blob.digest), e)
            }
        })?;
        if resp.status() != StatusCode::CREATED {
            let e = unexpected(resp, &format!("uploading {} to {repo}", blob.digest)).await;
            // The registry checks the digest too (the last bytes may have
            // left before our check ended the stream).
            if e.to_string().contains("DIGEST_INVALID") {
                return Err(ArtifactError::Corrupt(format!(
                    "refused blob {} for {repo}: its bytes do not match the digest",
                    blob.digest
                )));
            }
            return Err(e);
        }
        Ok(())
    }

    async fn mount_blob(
        &self,
        repo: &str,
        from_repo: &str,
        blob: &Descriptor,
    ) -> Result<bool, ArtifactError> {
        check_repo(repo)?;
        check_repo(from_repo)?;
        let url = self.url(&format!(
            "/v2/{repo}/blobs/uploads/?mount={}&from={from_repo}",
            blob.digest
        ));
        // The token must allow pulling from the other repository too.
        let scope = format!("{} {}", push(repo), pull(from_repo));
        let resp = self
            .send(&scope, "blob mount", || {
                self.client.post(&url).header(CONTENT_LENGTH, "0")
            })
            .await?;
        // 201: mounted. 202: declined (an upload was opened instead; it is
        // left to expire and the blob is uploaded as usual).
        match resp.status() {
            StatusCode::CREATED => Ok(true),
            StatusCode::ACCEPTED => Ok(false),
            _ => Err(unexpected(resp, &format!("mounting {} into {repo}", blob.digest)).await),
        }
    }

    async fn get_manifest(
        &self,
        repo: &str,
        reference: &str,
    ) -> Result<Option<RawManifest>, ArtifactError> {
        check_repo(repo)?;
        let url = self.url(&format!("/v2/{repo}/manifests/{reference}"));
        let resp = self
            .send(&pull(repo), "manifest download", || {
                self.client.get(&url).header(ACCEPT, MANIFEST_ACCEPT)
            })
            .await?;
        if resp.status() == StatusCode::NOT_FOUND {
            return Ok(None);
        }
        if !resp.status().is_success() {
            return Err(unexpected(resp, &format!("GET manifest {reference} of {repo}")).await);
        }
        let media_type = resp
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("application/vnd.oci.image.manifest.v1+json")
            .to_owned();
        let bytes = resp
            .bytes()
            .await
            .map_err(|e| io_err(format!("reading manifest {reference} of {repo}"), e))?
            .to_vec();
        let digest = Digest::of(&bytes);
        if let Ok(want) = reference.parse::<Digest>()
            && want != digest
        {
            return Err(ArtifactError::Corrupt(format!(
                "manifest {want} of {repo} from {} hashes to {digest}",
                self.base
            )));
        }
        Ok(Some(RawManifest {
            digest,
            bytes,
            media_type,
        }))
    }

    async fn put_manifest(
        &self,
        repo: &str,
        manifest: &RawManifest,
        tag: Option<&str>,
    ) -> Result<(), ArtifactError> {
        check_repo(repo)?;
        if Digest::of(&manifest.bytes) != manifest.digest {
            return Err(ArtifactError::Corrupt(format!(
                "manifest bytes do not hash to {}",
                manifest.digest
            )));
        }
        let reference = tag.map_or_else(|| manifest.digest.to_string(), str::to_owned);
        let url = self.url(&format!("/v2/{repo}/manifests/{reference}"));
        let resp = self
            .send(&push(repo), "manifest upload", || {
                self.client
                    .request(Method::PUT, &url)
                    .header(CONTENT_TYPE, manifest.media_type.clone())
                    .body(manifest.bytes.clone())
            })
            .await?;
        if resp.status() != StatusCode::CREATED {
            return Err(unexpected(resp, &format!("PUT manifest {reference} of {repo}")).await);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_is_an_address_not_a_prefix() {
        for h in [
            "127.0.0.1:5000",
            "localhost:5000",
            "localhost",
            "[::1]:5000",
            "127.3.4.5",
        ] {
            assert!(is_loopback(h), "{h}");
        }
        for h in [
            "localhost.attacker.example:5000",
            "127.foo.example",
            "10.0.0.1:5000",
            "registry.example",
        ] {
            assert!(!is_loopback(h), "{h}");
        }
    }

    #[test]
    fn image_references_split_into_registry_repository_and_reference() {
        let p = |r: &str| parse_image_ref(r).unwrap();
        let s = |a: &str, b: &str, c: &str| (a.to_owned(), b.to_owned(), c.to_owned());
        assert_eq!(
            p("busybox"),
            s("https://registry-1.docker.io", "library/busybox", "latest")
        );
        assert_eq!(
            p("127.0.0.1:5000/img/app:1.0"),
            s("http://127.0.0.1:5000", "img/app", "1.0")
        );
        let d = "sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a";
        assert_eq!(
            p(&format!("ghcr.io/org/app:1.0@{d}")),
            s("https://ghcr.io", "org/app", d)
        );
        assert!(
            parse_image_ref("localhost.evil.example/x:1")
                .unwrap()
                .0
                .starts_with("https://")
        );
    }
}
