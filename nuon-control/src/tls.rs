//! TLS on the control plane's listeners (`nuon-ctl serve --tls-cert
//! --tls-key`): a certificate chain and its key from PEM files, read again
//! when they change (a renewal by cert-manager or certbot needs no
//! restart), and a plain HTTP request sent to a TLS port answered with
//! what to do instead of a handshake error the caller cannot read.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use nuon_core::wire::ErrorCode;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::server::TlsStream;

/// The PEM files a listener's certificate and key are read from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFiles {
    /// The certificate chain, the server's own certificate first.
    pub cert: PathBuf,
    /// Its private key (PKCS#8, PKCS#1 or SEC1).
    pub key: PathBuf,
}

/// Why a certificate and key cannot be served.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A file could not be read.
    #[error("cannot read {what} {path}: {source}")]
    Read {
        /// `--tls-cert` or `--tls-key`.
        what: &'static str,
        /// The file.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// The certificate file holds no PEM certificate.
    #[error(
        "--tls-cert {0} holds no PEM certificate (-----BEGIN CERTIFICATE-----): give the server's certificate, then its chain"
    )]
    NoCertificate(String),
    /// The key file holds no PEM private key.
    #[error(
        "--tls-key {0} holds no PEM private key (-----BEGIN PRIVATE KEY-----, RSA or EC): give the key of --tls-cert"
    )]
    NoKey(String),
    /// The key cannot be used, or is not the certificate's.
    #[error("--tls-key {key} cannot serve --tls-cert {cert}: {message}")]
    Unusable {
        /// The certificate file.
        cert: String,
        /// The key file.
        key: String,
        /// What rustls said, in words.
        message: String,
    },
}

/// What was read from the files, and when they said it.
struct Loaded {
    bytes: (Vec<u8>, Vec<u8>),
    key: Arc<CertifiedKey>,
}

/// A listener's certificate: served to every handshake, replaced when its
/// files change.
pub(crate) struct Tls {
    files: TlsFiles,
    provider: Arc<CryptoProvider>,
    current: Arc<Current>,
    config: Arc<rustls::ServerConfig>,
}

impl std::fmt::Debug for Tls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tls").field("files", &self.files).finish()
    }
}

/// Hands the certificate read last to each handshake.
struct Current(RwLock<Loaded>);

impl std::fmt::Debug for Current {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Current")
    }
}

impl ResolvesServerCert for Current {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.0.read().expect("tls lock").key.clone())
    }
}

impl Tls {
    /// Reads `files`; an error says which file and what is wrong with it.
    pub(crate) fn load(files: &TlsFiles) -> Result<Arc<Tls>, TlsError> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let current = Arc::new(Current(RwLock::new(read(files, &provider)?)));
        let mut config = rustls::ServerConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .expect("ring supports the default protocol versions")
            .with_no_client_auth()
            .with_cert_resolver(current.clone());
        config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        Ok(Arc::new(Tls {
            files: files.clone(),
            provider,
            current,
            config: Arc::new(config),
        }))
    }

    /// Reads the files again; when they changed and make a usable pair,
    /// new handshakes get the new certificate (`Ok(true)`). A pair that
    /// does not work (a renewal half written) keeps the old one.
    pub(crate) fn reload_if_changed(&self) -> Result<bool, TlsError> {
        let bytes = read_both(&self.files)?;
        if bytes == self.current.0.read().expect("tls lock").bytes {
            return Ok(false);
        }
        let loaded = parse(&self.files, bytes, &self.provider)?;
        *self.current.0.write().expect("tls lock") = loaded;
        Ok(true)
    }

    /// The files, for messages.
    pub(crate) fn files(&self) -> &TlsFiles {
        &self.files
    }

    /// Takes a new connection through the handshake (the caller bounds
    /// how long). A connection that speaks plain HTTP is answered 400 with
    /// the URL to use instead, and closed; one that fails the handshake is
    /// closed.
    pub(crate) async fn accept(
        &self,
        stream: TcpStream,
        peer: SocketAddr,
    ) -> Option<TlsStream<TcpStream>> {
        let mut first = [0u8; 1];
        if stream.peek(&mut first).await.ok()? != 1 {
            return None;
        }
        // Every TLS connection opens with a handshake record (type 22).
        if first[0] != 0x16 {
            refuse_plain_http(stream, peer).await;
            return None;
        }
        let acceptor = tokio_rustls::TlsAcceptor::from(self.config.clone());
        acceptor
            .accept(stream)
            .await
            .inspect_err(|e| {
                // A client that does not trust the certificate says so
                // here (an alert): the operator's clue to a missing CA.
                tracing::info!(peer = %peer, error = %e, "TLS handshake failed");
            })
            .ok()
    }
}

fn read_both(files: &TlsFiles) -> Result<(Vec<u8>, Vec<u8>), TlsError> {
    let read = |what, path: &Path| {
        std::fs::read(path).map_err(|source| TlsError::Read {
            what,
            path: path.display().to_string(),
            source,
        })
    };
    Ok((
        read("--tls-cert", &files.cert)?,
        read("--tls-key", &files.key)?,
    ))
}

fn read(files: &TlsFiles, provider: &CryptoProvider) -> Result<Loaded, TlsError> {
    parse(files, read_both(files)?, provider)
}

fn parse(
    files: &TlsFiles,
    bytes: (Vec<u8>, Vec<u8>),
    provider: &CryptoProvider,
) -> Result<Loaded, TlsError> {
    let cert_path = files.cert.display().to_string();
    let key_path = files.key.display().to_string();
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(&bytes.0)
        .collect::<Result<_, _>>()
        .map_err(|e| TlsError::Unusable {
            cert: cert_path.clone(),
            key: key_path.clone(),
            message: format!("the certificate file is not valid PEM: {e}"),
        })?;
    if chain.is_empty() {
        return Err(TlsError::NoCertificate(cert_path));
    }
    let key = PrivateKeyDer::from_pem_slice(&bytes.1).map_err(|e| match e {
        rustls::pki_types::pem::Error::NoItemsFound => TlsError::NoKey(key_path.clone()),
        e => TlsError::Unusable {
            cert: cert_path.clone(),
            key: key_path.clone(),
            message: format!("the key file is not valid PEM: {e}"),
        },
    })?;
    let key = CertifiedKey::from_der(chain, key, provider).map_err(|e| TlsError::Unusable {
        message: match e {
            rustls::Error::InconsistentKeys(_) => {
                "the key is not the certificate's (a renewal writes both files: give the pair)"
                    .into()
            }
            e => e.to_string(),
        },
        cert: cert_path,
        key: key_path,
    })?;
    Ok(Loaded {
        bytes,
        key: Arc::new(key),
    })
}

/// Answers a plain HTTP request on a TLS port: 400, in the API's error
/// shape, naming the `https://` URL to use.
async fn refuse_plain_http(mut stream: TcpStream, peer: SocketAddr) {
    let mut head = vec![0u8; 8192];
    let n = stream.read(&mut head).await.unwrap_or(0);
    let head = String::from_utf8_lossy(&head[..n]);
    let mut lines = head.lines();
    let target = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .filter(|t| t.starts_with('/'))
        .unwrap_or("/");
    let host = lines
        .take_while(|l| !l.is_empty())
        .find_map(|l| {
            let (name, value) = l.split_once(':')?;
            name.trim()
                .eq_ignore_ascii_case("host")
                .then(|| value.trim())
        })
        .filter(|h| h.bytes().all(|b| b.is_ascii_graphic()))
        .map(str::to_owned)
        .unwrap_or_else(|| "HOST:PORT".into());
    tracing::debug!(peer = %peer, "plain HTTP on a TLS port: answered with the https:// URL");
    let body = serde_json::json!({"error": {
        "code": ErrorCode::BadRequest.as_str(),
        "message": format!(
            "this port speaks HTTPS (TLS), not plain HTTP: use https://{host}{target} instead of http://"
        ),
    }})
    .to_string();
    let answer = format!(
        "HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    if stream.write_all(answer.as_bytes()).await.is_ok() {
        let _ = stream.shutdown().await;
    }
}
