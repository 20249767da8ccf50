//! Signing people in through an OpenID Connect provider: the
//! authorization code flow with PKCE (RFC 7636, `S256`), and the ID token
//! checked as OpenID Connect Core 3.1.3.7 says: signed (RS256, PS256 or
//! ES256) by a key the provider publishes, by the configured issuer, for
//! this client, not expired, carrying the nonce of this sign-in.
//!
//! Each start is kept in the store (by the hash of its `state`) so that any
//! replica can finish it, and is taken once: a replayed or forged `state`
//! finds nothing.

use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde::Deserialize;
use serde_json::Value;
use tokio::sync::Mutex;

use crate::store::{Identity, PendingSignIn};

/// How long the provider may take to answer one request.
const TIMEOUT: Duration = Duration::from_secs(15);
/// How far the provider's clock may be from ours.
const LEEWAY_MS: i64 = 120_000;
/// How long a person has between starting a sign-in and coming back.
pub(crate) const SIGN_IN_WINDOW_MS: i64 = 10 * 60 * 1000;

/// The provider a control plane signs people in through.
#[derive(Debug, Clone)]
pub struct OidcConfig {
    /// The issuer URL (`https://accounts.example.com`); its discovery
    /// document is at `/.well-known/openid-configuration` under it.
    pub issuer: String,
    /// The client id registered with the provider.
    pub client_id: String,
    /// The client secret (sent with HTTP basic auth to the token endpoint).
    pub client_secret: String,
    /// Where the provider sends the browser back, as registered with it
    /// (default: the Control API's URL and `/v1/auth/oidc/callback`).
    pub redirect_url: Option<String>,
    /// How long the API token a sign-in hands out works (default 12 h).
    pub session_ttl: Duration,
}

impl OidcConfig {
    /// Checks what can be checked before the provider is asked: an issuer
    /// over HTTPS (plain HTTP only on a loopback address).
    pub fn check(&self) -> Result<(), String> {
        let loopback = ["http://127.0.0.1", "http://localhost", "http://[::1]"];
        let secure = self.issuer.starts_with("https://")
            || loopback.iter().any(|l| {
                self.issuer
                    .strip_prefix(l)
                    .is_some_and(|rest| rest.is_empty() || rest.starts_with([':', '/']))
            });
        if !secure {
            return Err(format!(
                "--oidc-issuer {:?} must be an https:// URL (plain http only on a loopback address)",
                self.issuer
            ));
        }
        if self.client_id.is_empty() || self.client_secret.is_empty() {
            return Err("--oidc-client-id and the client secret (--oidc-client-secret-file or NUON_OIDC_CLIENT_SECRET) are both needed".into());
        }
        Ok(())
    }
}

/// Why a sign-in did not finish.
#[derive(Debug, thiserror::Error)]
pub(crate) enum OidcError {
    /// The provider could not be reached or answered nonsense (502).
    #[error("the identity provider: {0}")]
    Provider(String),
    /// What came back is not good enough to sign anyone in (401).
    #[error("sign-in refused: {0}")]
    Refused(String),
}

/// What the provider's discovery document says.
#[derive(Debug, Clone, Deserialize)]
struct Provider {
    issuer: String,
    authorization_endpoint: String,
    token_endpoint: String,
    jwks_uri: String,
    #[serde(default)]
    userinfo_endpoint: Option<String>,
}

/// A sign-in's start: where to send the browser, and what to keep.
pub(crate) struct Start {
    /// The provider's authorization URL, with every parameter.
    pub(crate) url: String,
    /// The `state` sent (kept by its hash).
    pub(crate) state: String,
    /// The nonce and the PKCE verifier, to keep.
    pub(crate) nonce: String,
    pub(crate) verifier: String,
}

/// The provider, its discovery document and keys fetched when first needed.
pub(crate) struct Oidc {
    pub(crate) config: OidcConfig,
    http: reqwest::Client,
    provider: Mutex<Option<Provider>>,
    keys: Mutex<Vec<Value>>,
}

fn random() -> String {
    let mut raw = [0u8; 32];
    nuon_core::random_bytes(&mut raw);
    URL_SAFE_NO_PAD.encode(raw)
}

/// `application/x-www-form-urlencoded` of one value (RFC 6749 2.3.1 asks
/// it of the client id and secret in basic auth too).
pub(crate) fn form_encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

impl Oidc {
    pub(crate) fn new(config: OidcConfig) -> Result<Self, String> {
        config.check()?;
        let http = reqwest::Client::builder()
            .use_rustls_tls()
            .timeout(TIMEOUT)
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|e| format!("cannot build the OpenID Connect client: {e}"))?;
        Ok(Oidc {
            config,
            http,
            provider: Mutex::new(None),
            keys: Mutex::new(Vec::new()),
        })
    }

    async fn get_json(&self, url: &str, bearer: Option<&str>) -> Result<Value, OidcError> {
        let mut req = self.http.get(url);
        if let Some(t) = bearer {
            req = req.bearer_auth(t);
        }
        let answer = req
            .send()
            .await
            .map_err(|e| OidcError::Provider(format!("cannot reach {url}: {e}")))?;
        let status = answer.status();
        if !status.is_success() {
            return Err(OidcError::Provider(format!("{url} answered {status}")));
        }
        answer
            .json()
            .await
            .map_err(|e| OidcError::Provider(format!("{url} did not answer JSON: {e}")))
    }

    /// The discovery document, fetched once (again after a failure).
    async fn provider(&self) -> Result<Provider, OidcError> {
        let mut slot = self.provider.lock().await;
        if let Some(p) = &*slot {
            return Ok(p.clone());
        }
        let url = format!(
            "{}/.well-known/openid-configuration",
            self.config.issuer.trim_end_matches('/')
        );
        let doc = self.get_json(&url, None).await?;
        let p: Provider = serde_json::from_value(doc)
            .map_err(|e| OidcError::Provider(format!("{url} is not a discovery document: {e}")))?;
        if p.issuer != self.config.issuer {
            return Err(OidcError::Provider(format!(
                "{url} names the issuer {:?}, not {:?} (--oidc-issuer must be the issuer exactly)",
                p.issuer, self.config.issuer
            )));
        }
        *slot = Some(p.clone());
        Ok(p)
    }

    /// Starts a sign-in: a new state, nonce and PKCE verifier, and the URL
    /// that sends the browser to the provider with them.
    pub(crate) async fn start(&self, redirect: &str) -> Result<Start, OidcError> {
        let p = self.provider().await?;
        let (state, nonce, verifier) = (random(), random(), random());
        let challenge = URL_SAFE_NO_PAD
            .encode(ring::digest::digest(&ring::digest::SHA256, verifier.as_bytes()).as_ref());
        let params = [
            ("response_type", "code"),
            ("client_id", &self.config.client_id),
            ("redirect_uri", redirect),
            ("scope", "openid email profile"),
            ("state", &state),
            ("nonce", &nonce),
            ("code_challenge", &challenge),
            ("code_challenge_method", "S256"),
        ];
        let query: Vec<String> = params
            .iter()
            .map(|(k, v)| format!("{k}={}", form_encode(v)))
            .collect();
        let sep = if p.authorization_endpoint.contains('?') {
            '&'
        } else {
            '?'
        };
        Ok(Start {
            url: format!("{}{sep}{}", p.authorization_endpoint, query.join("&")),
            state,
            nonce,
            verifier,
        })
    }

    /// Finishes a sign-in: trades the code (with the start's PKCE
    /// verifier) for an ID token, checks it against the start's nonce, and
    /// says who it is.
    pub(crate) async fn finish(
        &self,
        code: &str,
        redirect: &str,
        pending: &PendingSignIn,
    ) -> Result<Identity, OidcError> {
        let p = self.provider().await?;
        let answer = self
            .http
            .post(&p.token_endpoint)
            .basic_auth(
                form_encode(&self.config.client_id),
                Some(form_encode(&self.config.client_secret)),
            )
            .form(&[
                ("grant_type", "authorization_code"),
                ("code", code),
                ("redirect_uri", redirect),
                ("code_verifier", &pending.verifier),
            ])
            .send()
            .await
            .map_err(|e| OidcError::Provider(format!("cannot reach {}: {e}", p.token_endpoint)))?;
        let status = answer.status();
        let body: Value = answer.json().await.map_err(|e| {
            OidcError::Provider(format!(
                "the token endpoint answered {status}, not JSON: {e}"
            ))
        })?;
        if !status.is_success() {
            return Err(OidcError::Refused(format!(
                "the provider refused the code ({status}): {} {}",
                body["error"].as_str().unwrap_or("?"),
                body["error_description"].as_str().unwrap_or("")
            )));
        }
        let id_token = body["id_token"].as_str().ok_or_else(|| {
            OidcError::Provider("the token endpoint's answer has no id_token".into())
        })?;
        let claims = self.verified(&p, id_token).await?;
        self.check_claims(&claims, &pending.nonce)?;
        let sub = claims["sub"].as_str().unwrap_or_default().to_owned();
        let mut email = claims["email"].as_str().map(str::to_owned);
        let mut verified = claims.get("email_verified").cloned();
        let mut name = claims["name"].as_str().map(str::to_owned);
        // A provider that answers the scope's claims at the userinfo
        // endpoint, not in the ID token.
        if email.is_none()
            && let (Some(url), Some(access)) = (&p.userinfo_endpoint, body["access_token"].as_str())
        {
            let info = self.get_json(url, Some(access)).await?;
            if info["sub"].as_str() != Some(sub.as_str()) {
                return Err(OidcError::Refused(
                    "the userinfo endpoint answered for another subject than the ID token's".into(),
                ));
            }
            email = info["email"].as_str().map(str::to_owned);
            verified = info.get("email_verified").cloned();
            name = name.or_else(|| info["name"].as_str().map(str::to_owned));
        }
        let email = email.ok_or_else(|| {
            OidcError::Refused("the provider gave no email address (is the `email` scope allowed for this client?)".into())
        })?;
        if verified == Some(Value::Bool(false)) {
            return Err(OidcError::Refused(format!(
                "the provider has not verified {email}"
            )));
        }
        Ok(Identity {
            email: email.to_lowercase(),
            subject: format!("{}|{sub}", self.config.issuer),
            name,
        })
    }

    /// The ID token's claims, once its signature checks out against the
    /// provider's published keys (fetched again once for a key not seen).
    async fn verified(&self, p: &Provider, jwt: &str) -> Result<Value, OidcError> {
        let parts: Vec<&str> = jwt.split('.').collect();
        let [header, payload, signature] = parts[..] else {
            return Err(OidcError::Refused(
                "the ID token is not a signed JWT".into(),
            ));
        };
        let decode = |s: &str, what: &str| {
            URL_SAFE_NO_PAD
                .decode(s)
                .map_err(|_| OidcError::Refused(format!("the ID token's {what} is not base64url")))
        };
        let header: Value = serde_json::from_slice(&decode(header, "header")?)
            .map_err(|_| OidcError::Refused("the ID token's header is not JSON".into()))?;
        let alg = header["alg"].as_str().unwrap_or_default();
        let kid = header["kid"].as_str();
        let signature = decode(signature, "signature")?;
        let signed = &jwt.as_bytes()[..jwt.len() - parts[2].len() - 1];
        for refresh in [false, true] {
            let keys = {
                let mut keys = self.keys.lock().await;
                if keys.is_empty() || refresh {
                    let set = self.get_json(&p.jwks_uri, None).await?;
                    *keys = set["keys"].as_array().cloned().unwrap_or_default();
                }
                keys.clone()
            };
            let candidates: Vec<&Value> = keys
                .iter()
                .filter(|k| kid.is_none() || k["kid"].as_str() == kid)
                .filter(|k| k["use"].as_str().is_none_or(|u| u == "sig"))
                .collect();
            if candidates.is_empty() {
                continue;
            }
            if candidates
                .iter()
                .any(|k| verify(alg, k, signed, &signature))
            {
                let claims = decode(payload, "payload")?;
                return serde_json::from_slice(&claims)
                    .map_err(|_| OidcError::Refused("the ID token's claims are not JSON".into()));
            }
            return Err(OidcError::Refused(format!(
                "the ID token's signature ({alg}) does not verify with the provider's key{}",
                kid.map(|k| format!(" {k:?}")).unwrap_or_default()
            )));
        }
        Err(OidcError::Refused(format!(
            "the ID token is signed with a key the provider does not publish ({})",
            kid.unwrap_or("no kid")
        )))
    }

    fn check_claims(&self, c: &Value, nonce: &str) -> Result<(), OidcError> {
        let refuse = |m: String| Err(OidcError::Refused(m));
        if c["iss"].as_str() != Some(self.config.issuer.as_str()) {
            return refuse(format!(
                "the ID token's issuer is {}, not {}",
                c["iss"], self.config.issuer
            ));
        }
        let client = self.config.client_id.as_str();
        let audiences: Vec<&str> = match &c["aud"] {
            Value::String(a) => vec![a.as_str()],
            Value::Array(a) => a.iter().filter_map(Value::as_str).collect(),
            _ => vec![],
        };
        if !audiences.contains(&client) {
            return refuse(format!("the ID token is not for this client ({client})"));
        }
        if audiences.len() > 1 && c["azp"].as_str() != Some(client) {
            return refuse("the ID token has several audiences and names another party".into());
        }
        let now = nuon_core::now_ms();
        let exp = c["exp"].as_i64().unwrap_or(0).saturating_mul(1000);
        if exp + LEEWAY_MS <= now {
            return refuse("the ID token has expired".into());
        }
        if c["iat"].as_i64().unwrap_or(0).saturating_mul(1000) > now + LEEWAY_MS {
            return refuse("the ID token is issued in the future".into());
        }
        if c["nonce"].as_str() != Some(nonce) {
            return refuse(
                "the ID token's nonce is not this sign-in's (a replayed or injected token); start the sign-in again".into(),
            );
        }
        if c["sub"].as_str().is_none_or(str::is_empty) {
            return refuse("the ID token names no subject".into());
        }
        Ok(())
    }
}

/// Whether `signature` over `signed` verifies with the JWK `key` under
/// `alg`. Only asymmetric algorithms: `none` and the HMAC ones (keyed with
/// the client secret, which a replica could forge) are refused.
fn verify(alg: &str, key: &Value, signed: &[u8], signature: &[u8]) -> bool {
    use ring::signature as sig;
    let b64 = |field: &str| {
        key[field]
            .as_str()
            .and_then(|v| URL_SAFE_NO_PAD.decode(v).ok())
    };
    match (alg, key["kty"].as_str()) {
        ("RS256" | "PS256", Some("RSA")) => {
            let (Some(n), Some(e)) = (b64("n"), b64("e")) else {
                return false;
            };
            let params: &sig::RsaParameters = if alg == "RS256" {
                &sig::RSA_PKCS1_2048_8192_SHA256
            } else {
                &sig::RSA_PSS_2048_8192_SHA256
            };
            sig::RsaPublicKeyComponents { n: &n, e: &e }
                .verify(params, signed, signature)
                .is_ok()
        }
        ("ES256", Some("EC")) if key["crv"].as_str() == Some("P-256") => {
            let (Some(x), Some(y)) = (b64("x"), b64("y")) else {
                return false;
            };
            let mut point = vec![4u8];
            point.extend_from_slice(&x);
            point.extend_from_slice(&y);
            sig::UnparsedPublicKey::new(&sig::ECDSA_P256_SHA256_FIXED, point)
                .verify(signed, signature)
                .is_ok()
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_issuer_must_be_https_but_on_loopback() {
        let config = |issuer: &str| OidcConfig {
            issuer: issuer.into(),
            client_id: "c".into(),
            client_secret: "s".into(),
            redirect_url: None,
            session_ttl: Duration::from_secs(60),
        };
        assert!(config("https://id.example.com").check().is_ok());
        assert!(config("http://127.0.0.1:8080").check().is_ok());
        assert!(config("http://localhost/realms/x").check().is_ok());
        let err = config("http://id.example.com").check().unwrap_err();
        assert!(err.contains("https://"), "{err}");
        assert!(config("http://localhost.evil.example").check().is_err());
    }

    #[test]
    fn form_encoding_leaves_only_unreserved_characters() {
        assert_eq!(form_encode("a b+c/d=é"), "a%20b%2Bc%2Fd%3D%C3%A9");
        assert_eq!(form_encode("Az09-._~"), "Az09-._~");
    }

    #[test]
    fn only_asymmetric_signatures_verify() {
        let key = serde_json::json!({"kty": "oct", "k": "c2VjcmV0"});
        assert!(!verify("HS256", &key, b"x", b"y"));
        assert!(!verify("none", &key, b"x", b""));
        let rsa = serde_json::json!({"kty": "RSA", "n": "AQAB", "e": "AQAB"});
        assert!(!verify("RS256", &rsa, b"x", b"y"));
    }
}
