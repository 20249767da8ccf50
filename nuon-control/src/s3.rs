//! The vendor's bucket for CloudFormation quick-create templates: AWS's
//! console takes a quick-create `templateURL` on S3 only, so when the
//! control plane is given a bucket (`nuon-ctl serve
//! --stack-template-bucket s3://BUCKET/PREFIX`), a customer's "Launch
//! stack" puts the install's template there and hands the console a
//! presigned, short-lived link to it.
//!
//! Two calls of S3's REST API, signed with AWS Signature Version 4 (the
//! `PutObject`, and the presigned `GetObject` URL), over the control
//! plane's one HTTP stack: no AWS SDK. The keys come from the standard
//! environment (`AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`,
//! `AWS_SESSION_TOKEN`), read once when the control plane starts: keys
//! of an IAM user, not an instance role's or any that expire (they are
//! not renewed); the endpoint from `AWS_ENDPOINT_URL_S3` or
//! `AWS_ENDPOINT_URL` when set (path-style, as moto and MinIO take it),
//! else S3's regional endpoint (virtual-hosted; path-style for a bucket
//! with a dot in its name).

use std::fmt;
use std::time::Duration;

use ring::{digest, hmac};

/// Where quick-create templates go, and the keys that put them there.
#[derive(Clone)]
pub struct TemplateBucket {
    bucket: String,
    /// `""` or ending in `/`.
    prefix: String,
    region: String,
    /// The scheme and authority of a custom endpoint (path-style).
    endpoint: Option<String>,
    keys: Keys,
    http: reqwest::Client,
}

#[derive(Clone)]
struct Keys {
    id: String,
    secret: String,
    session_token: Option<String>,
}

impl fmt::Debug for TemplateBucket {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TemplateBucket")
            .field("bucket", &self.bucket)
            .field("prefix", &self.prefix)
            .field("region", &self.region)
            .field("endpoint", &self.endpoint)
            .field("access_key_id", &self.keys.id)
            .finish_non_exhaustive()
    }
}

/// How long a presigned template link works: the console fetches it when
/// the customer's browser opens the quick-create page.
pub const PRESIGN_TTL: Duration = Duration::from_secs(5 * 60);

impl TemplateBucket {
    /// The bucket `s3://BUCKET[/PREFIX]` in `region` (else `AWS_REGION`,
    /// `AWS_DEFAULT_REGION`), with the keys and endpoint `env` gives (the
    /// process's environment in `nuon-ctl`); what is missing is said.
    pub fn new(
        url: &str,
        region: Option<&str>,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Self, String> {
        let rest = url.strip_prefix("s3://").ok_or_else(|| {
            format!("stack template bucket {url:?}: write it as s3://BUCKET or s3://BUCKET/PREFIX")
        })?;
        let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
        let bucket_ok = (3..=63).contains(&bucket.len())
            && bucket
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.');
        if !bucket_ok {
            return Err(format!(
                "stack template bucket {bucket:?}: an S3 bucket name is 3 to 63 lowercase letters, digits, '-' and '.'"
            ));
        }
        let prefix = match prefix.trim_matches('/') {
            "" => String::new(),
            p if p
                .split('/')
                .any(|seg| seg.is_empty() || seg == "." || seg == "..") =>
            {
                return Err(format!(
                    "stack template bucket prefix {p:?}: give path segments without '.', '..' or '//'"
                ));
            }
            p => format!("{p}/"),
        };
        let env = |k: &str| env(k).filter(|v| !v.trim().is_empty());
        let region = region
            .map(str::to_owned)
            .or_else(|| env("AWS_REGION"))
            .or_else(|| env("AWS_DEFAULT_REGION"))
            .ok_or("the stack template bucket's region is not known: give --stack-template-region (or AWS_REGION)")?;
        let (Some(id), Some(secret)) = (env("AWS_ACCESS_KEY_ID"), env("AWS_SECRET_ACCESS_KEY"))
        else {
            return Err("the stack template bucket needs AWS keys that may s3:PutObject and s3:GetObject on it: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (and AWS_SESSION_TOKEN for temporary ones)".into());
        };
        let endpoint = env("AWS_ENDPOINT_URL_S3")
            .or_else(|| env("AWS_ENDPOINT_URL"))
            .map(|e| endpoint(&e))
            .transpose()?;
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(30))
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|e| format!("cannot make an HTTP client: {e}"))?;
        Ok(TemplateBucket {
            bucket: bucket.to_owned(),
            prefix,
            region,
            endpoint,
            keys: Keys {
                id,
                secret,
                session_token: env("AWS_SESSION_TOKEN"),
            },
            http,
        })
    }

    /// Puts `body` (a template) at `PREFIX/name` and returns a presigned
    /// link to it that works for [`PRESIGN_TTL`] after `now_ms`.
    pub async fn put_template(
        &self,
        name: &str,
        body: String,
        now_ms: i64,
    ) -> Result<String, String> {
        let key = format!("{}{name}", self.prefix);
        let (base, host, path) = self.object(&key);
        let when = Moment::at(now_ms);
        let payload = hex(digest::digest(&digest::SHA256, body.as_bytes()).as_ref());
        let mut headers = vec![
            ("host", host.clone()),
            ("x-amz-content-sha256", payload.clone()),
            ("x-amz-date", when.stamp.clone()),
        ];
        if let Some(t) = &self.keys.session_token {
            headers.push(("x-amz-security-token", t.clone()));
        }
        let signed: Vec<&str> = headers.iter().map(|(k, _)| *k).collect();
        let canonical = format!(
            "PUT\n{path}\n\n{}\n{}\n{payload}",
            headers
                .iter()
                .map(|(k, v)| format!("{k}:{}\n", v.trim()))
                .collect::<String>(),
            signed.join(";"),
        );
        let signature = self.signature(&when, &canonical);
        let auth = format!(
            "AWS4-HMAC-SHA256 Credential={}/{}, SignedHeaders={}, Signature={signature}",
            self.keys.id,
            when.scope(&self.region),
            signed.join(";")
        );
        let mut req = self
            .http
            .put(format!("{base}{path}"))
            .header("authorization", auth)
            .header("content-type", "application/json");
        for (k, v) in headers.iter().filter(|(k, _)| *k != "host") {
            req = req.header(*k, v);
        }
        let resp = req.body(body).send().await.map_err(|e| {
            format!(
                "cannot reach S3 to put the template in s3://{}/{key}: {e}",
                self.bucket
            )
        })?;
        if !resp.status().is_success() {
            let status = resp.status();
            let text = resp.text().await.unwrap_or_default();
            let code = between(&text, "<Code>", "</Code>").unwrap_or("");
            let message = between(&text, "<Message>", "</Message>").unwrap_or("");
            return Err(format!(
                "S3 refused to put the template in s3://{}/{key}: {status} {code} {message}",
                self.bucket
            ));
        }
        Ok(self.presigned_get(&key, &when, PRESIGN_TTL))
    }

    /// A presigned `GetObject` link to `key`, signed at `when`, good for
    /// `ttl`.
    fn presigned_get(&self, key: &str, when: &Moment, ttl: Duration) -> String {
        let (base, host, path) = self.object(key);
        let mut query = vec![
            ("X-Amz-Algorithm", "AWS4-HMAC-SHA256".to_owned()),
            (
                "X-Amz-Credential",
                format!("{}/{}", self.keys.id, when.scope(&self.region)),
            ),
            ("X-Amz-Date", when.stamp.clone()),
            ("X-Amz-Expires", ttl.as_secs().to_string()),
            ("X-Amz-SignedHeaders", "host".to_owned()),
        ];
        if let Some(t) = &self.keys.session_token {
            query.push(("X-Amz-Security-Token", t.clone()));
        }
        query.sort();
        let query = query
            .iter()
            .map(|(k, v)| format!("{}={}", encode(k, true), encode(v, true)))
            .collect::<Vec<_>>()
            .join("&");
        let canonical = format!("GET\n{path}\n{query}\nhost:{host}\n\nhost\nUNSIGNED-PAYLOAD");
        let signature = self.signature(when, &canonical);
        format!("{base}{path}?{query}&X-Amz-Signature={signature}")
    }

    /// Where `key` is: the URL's scheme and authority, the `Host`, and the
    /// canonical (encoded) path.
    fn object(&self, key: &str) -> (String, String, String) {
        match &self.endpoint {
            Some(e) => {
                let host = e
                    .split_once("://")
                    .map_or(e.as_str(), |(_, h)| h)
                    .to_owned();
                let path = format!("/{}/{}", self.bucket, encode(key, false));
                (e.clone(), host, path)
            }
            None => {
                // us-east-1 answers at S3's first (global) name.
                let s3 = match self.region.as_str() {
                    "us-east-1" => "s3.amazonaws.com".to_owned(),
                    region => format!("s3.{region}.amazonaws.com"),
                };
                if self.bucket.contains('.') {
                    // A dotted name is no host S3's certificate covers.
                    let path = format!("/{}/{}", self.bucket, encode(key, false));
                    (format!("https://{s3}"), s3, path)
                } else {
                    let host = format!("{}.{s3}", self.bucket);
                    let path = format!("/{}", encode(key, false));
                    (format!("https://{host}"), host, path)
                }
            }
        }
    }

    /// SigV4's signature of `canonical` (a canonical request) at `when`.
    fn signature(&self, when: &Moment, canonical: &str) -> String {
        let to_sign = format!(
            "AWS4-HMAC-SHA256\n{}\n{}\n{}",
            when.stamp,
            when.scope(&self.region),
            hex(digest::digest(&digest::SHA256, canonical.as_bytes()).as_ref())
        );
        let mut key = format!("AWS4{}", self.keys.secret).into_bytes();
        for part in [when.date.as_str(), &self.region, "s3", "aws4_request"] {
            key = mac(&key, part.as_bytes());
        }
        hex(&mac(&key, to_sign.as_bytes()))
    }
}

/// A custom endpoint's scheme and authority as requests name it (a
/// default port dropped, as the `Host` header drops it), or why not.
fn endpoint(e: &str) -> Result<String, String> {
    let bad =
        || format!("AWS endpoint {e:?}: give a scheme, host and port only (http://127.0.0.1:9000)");
    let (scheme, rest) = e.split_once("://").ok_or_else(bad)?;
    let authority = rest.strip_suffix('/').unwrap_or(rest);
    let default = match scheme {
        "https" => ":443",
        "http" => ":80",
        _ => return Err(bad()),
    };
    if authority.is_empty() || authority.contains(['/', '?', '#', '@']) {
        return Err(bad());
    }
    let authority = authority.strip_suffix(default).unwrap_or(authority);
    Ok(format!("{scheme}://{authority}"))
}

/// A signing time: `20261130T091500Z` and its day, `20261130`.
struct Moment {
    stamp: String,
    date: String,
}

impl Moment {
    fn at(now_ms: i64) -> Self {
        let stamp =
            nuon_core::template::time::format(i128::from(now_ms) * 1_000_000, "20060102T150405Z");
        let date = stamp[..8].to_owned();
        Moment { stamp, date }
    }

    fn scope(&self, region: &str) -> String {
        format!("{}/{region}/s3/aws4_request", self.date)
    }
}

fn mac(key: &[u8], data: &[u8]) -> Vec<u8> {
    hmac::sign(&hmac::Key::new(hmac::HMAC_SHA256, key), data)
        .as_ref()
        .to_vec()
}

fn hex(bytes: &[u8]) -> String {
    ::hex::encode(bytes)
}

/// SigV4's URI encoding: every byte but the unreserved ones, and `/` too
/// when `slash`.
fn encode(text: &str, slash: bool) -> String {
    let mut out = String::with_capacity(text.len());
    for b in text.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                out.push(b as char)
            }
            b'/' if !slash => out.push('/'),
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

fn between<'a>(text: &'a str, open: &str, close: &str) -> Option<&'a str> {
    let from = text.find(open)? + open.len();
    let to = text[from..].find(close)? + from;
    Some(&text[from..to])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
        move |k| {
            pairs
                .iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| v.to_string())
        }
    }

    /// AWS's own example of a presigned URL (the S3 API reference,
    /// "Authenticating Requests: Using Query Parameters"): the same
    /// signature from the same keys, time and object.
    #[test]
    fn a_presigned_link_matches_awss_worked_example() {
        let b = TemplateBucket::new(
            "s3://examplebucket",
            Some("us-east-1"),
            env(&[
                ("AWS_ACCESS_KEY_ID", "AKIAIOSFODNN7EXAMPLE"),
                (
                    "AWS_SECRET_ACCESS_KEY",
                    "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
                ),
            ]),
        )
        .unwrap();
        let when = Moment {
            stamp: "20130524T000000Z".into(),
            date: "20130524".into(),
        };
        let link = b.presigned_get("test.txt", &when, Duration::from_secs(86400));
        assert_eq!(
            link,
            "https://examplebucket.s3.amazonaws.com/test.txt?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIAIOSFODNN7EXAMPLE%2F20130524%2Fus-east-1%2Fs3%2Faws4_request&X-Amz-Date=20130524T000000Z&X-Amz-Expires=86400&X-Amz-SignedHeaders=host&X-Amz-Signature=aeeed9bbccd4d02ee5c0109b86d86835f995330da4c265957d157751f604d404"
        );
    }

    #[test]
    fn what_is_missing_is_said() {
        for (url, region, why) in [
            ("bucket", Some("r"), "write it as s3://BUCKET"),
            ("s3://No_Such", Some("r"), "3 to 63 lowercase"),
            ("s3://bucket", None, "--stack-template-region"),
            ("s3://bucket", Some("r"), "AWS_ACCESS_KEY_ID"),
            ("s3://bucket/a/../b", Some("r"), "without '.', '..'"),
        ] {
            let e = TemplateBucket::new(url, region, env(&[])).unwrap_err();
            assert!(e.contains(why), "{e}");
        }
        let b = TemplateBucket::new(
            "s3://bucket/a/b/",
            None,
            env(&[
                ("AWS_REGION", "eu-west-1"),
                ("AWS_ACCESS_KEY_ID", "id"),
                ("AWS_SECRET_ACCESS_KEY", "secret"),
                ("AWS_ENDPOINT_URL", "http://127.0.0.1:5000/"),
            ]),
        )
        .unwrap();
        assert_eq!(b.prefix, "a/b/");
        assert_eq!(
            b.object("a/b/x y.json"),
            (
                "http://127.0.0.1:5000".into(),
                "127.0.0.1:5000".into(),
                "/bucket/a/b/x%20y.json".into()
            )
        );
        assert!(!format!("{b:?}").contains("secret"), "{b:?}");
        assert_eq!(
            endpoint("https://minio.test:443/").unwrap(),
            "https://minio.test"
        );
        assert_eq!(
            endpoint("http://127.0.0.1:9000").unwrap(),
            "http://127.0.0.1:9000"
        );
        for bad in ["minio.test", "https://gw.test/s3", "ftp://x", "https://"] {
            assert!(
                endpoint(bad)
                    .unwrap_err()
                    .contains("scheme, host and port only"),
                "{bad}"
            );
        }
        let dotted = TemplateBucket::new(
            "s3://acme.templates",
            Some("eu-west-1"),
            env(&[
                ("AWS_ACCESS_KEY_ID", "id"),
                ("AWS_SECRET_ACCESS_KEY", "secret"),
            ]),
        )
        .unwrap();
        assert_eq!(
            dotted.object("k.json"),
            (
                "https://s3.eu-west-1.amazonaws.com".into(),
                "s3.eu-west-1.amazonaws.com".into(),
                "/acme.templates/k.json".into()
            )
        );
    }

    /// moto's S3 on loopback, IAM enforced: a template put with the keys'
    /// signature is there to read; a wrong secret and keys without
    /// `s3:PutObject` are refused with S3's reason.
    #[tokio::test]
    async fn a_template_is_put_signed_and_refused_with_s3s_reason() {
        let Some(moto) = nuon_test_fixtures::moto::Moto::start().unwrap() else {
            return;
        };
        moto.aws(&["s3api", "create-bucket", "--bucket", "acme-templates"])
            .unwrap();
        let bucket = |keys: &nuon_test_fixtures::moto::Keys, secret: Option<&str>| {
            let mut env = moto.env(keys);
            if let Some(s) = secret {
                env.retain(|(k, _)| k != "AWS_SECRET_ACCESS_KEY");
                env.push(("AWS_SECRET_ACCESS_KEY".into(), s.into()));
            }
            TemplateBucket::new("s3://acme-templates/quick", None, move |k| {
                env.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone())
            })
            .unwrap()
        };
        let putter = moto.user("putter", &["s3:PutObject"]).unwrap();
        let link = bucket(&putter, None)
            .put_template(
                "ins_1/a b.json",
                "{\"ok\": true}".into(),
                nuon_core::now_ms(),
            )
            .await
            .unwrap();
        assert!(
            link.starts_with(&format!("{}/acme-templates/quick/ins_1/a%20b.json?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential={}%2F", moto.url, putter.id)),
            "{link}"
        );
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("t.json");
        moto.aws(&[
            "s3api",
            "get-object",
            "--bucket",
            "acme-templates",
            "--key",
            "quick/ins_1/a b.json",
            out.to_str().unwrap(),
        ])
        .unwrap();
        assert_eq!(std::fs::read_to_string(&out).unwrap(), "{\"ok\": true}");

        let e = bucket(&putter, Some("not-the-secret"))
            .put_template("ins_1/b.json", "{}".into(), nuon_core::now_ms())
            .await
            .unwrap_err();
        assert!(e.contains("SignatureDoesNotMatch"), "{e}");
        let reader = moto.user("reader", &["s3:GetObject"]).unwrap();
        let e = bucket(&reader, None)
            .put_template("ins_1/c.json", "{}".into(), nuon_core::now_ms())
            .await
            .unwrap_err();
        assert!(
            e.starts_with(
                "S3 refused to put the template in s3://acme-templates/quick/ins_1/c.json: 403"
            ) && e.contains("AccessDenied"),
            "{e}"
        );
    }
}
