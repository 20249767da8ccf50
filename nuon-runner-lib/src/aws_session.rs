//! Each job's AWS session, renewed while it runs: the runner assumes the
//! job's role, and serves the session's keys to the job's tools from a
//! loopback endpoint only that job knows (the container-credentials
//! protocol every AWS SDK and the AWS CLI read:
//! `AWS_CONTAINER_CREDENTIALS_FULL_URI` and
//! `AWS_CONTAINER_AUTHORIZATION_TOKEN`). The keys are never in the job's
//! environment nor on a disk; a job that outlives its session asks again
//! and gets a new one (AssumeRole again, the same session name) once the
//! old one is within `renew_before` of its end. The endpoint of a job is
//! gone when its [`Lease`] is dropped, at the job's end.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::json;

/// The keys of one AssumeRole.
#[derive(Clone)]
pub struct Assumed {
    /// `AccessKeyId`.
    pub access_key_id: String,
    /// `SecretAccessKey`.
    pub secret_access_key: String,
    /// `SessionToken`.
    pub session_token: String,
    /// When they end, as STS wrote it (RFC 3339): handed on to the SDKs.
    pub expiration: String,
}

impl std::fmt::Debug for Assumed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Assumed")
            .field("access_key_id", &self.access_key_id)
            .field("expiration", &self.expiration)
            .finish_non_exhaustive()
    }
}

/// Makes the sessions: AssumeRole of `arn` as `session` for `duration`.
#[async_trait]
pub trait Assume: Send + Sync {
    /// A new session, or why STS refused it.
    async fn assume(&self, arn: &str, session: &str, duration: Duration)
    -> Result<Assumed, String>;
}

/// What is said of each AssumeRole made for a job: `(outcome, detail)`
/// with outcome `assumed` (the first), `renewed` or `renewal failed`.
pub type Note = Arc<dyn Fn(&str, String) + Send + Sync>;

/// How long sessions last and when they are renewed.
#[derive(Debug, Clone, Copy)]
pub struct Lifetime {
    /// The `DurationSeconds` asked of STS (900 s to the role's maximum).
    pub duration: Duration,
    /// A session this close to its end is replaced when a tool asks.
    pub renew_before: Duration,
}

impl Default for Lifetime {
    /// One hour, renewed in its last 20 minutes (the AWS SDKs ask again
    /// 15 minutes before the end they were told).
    fn default() -> Self {
        Lifetime {
            duration: Duration::from_secs(3600),
            renew_before: Duration::from_secs(1200),
        }
    }
}

impl Lifetime {
    /// A lifetime from the runner's flags, or why it cannot be.
    pub fn new(duration_secs: u64, renew_before_secs: u64) -> Result<Lifetime, String> {
        if !(900..=43_200).contains(&duration_secs) {
            return Err(format!(
                "--aws-session-duration {duration_secs}: STS gives sessions of 900 to 43200 seconds (and at most the role's maximum session duration)"
            ));
        }
        if renew_before_secs >= duration_secs {
            return Err(format!(
                "--aws-renew-before {renew_before_secs} must be shorter than the session ({duration_secs} s), or every request would assume the role again"
            ));
        }
        Ok(Lifetime {
            duration: Duration::from_secs(duration_secs),
            renew_before: Duration::from_secs(renew_before_secs),
        })
    }
}

/// One job's session.
struct Session {
    token: String,
    arn: String,
    name: String,
    note: Note,
    /// The keys and when this runner counts them as ended (its own clock:
    /// the moment it asked plus the duration it asked for).
    current: tokio::sync::Mutex<(Assumed, Instant)>,
}

/// The runner's endpoint of its jobs' sessions.
pub struct Sessions {
    assume: Arc<dyn Assume>,
    lifetime: Lifetime,
    addr: tokio::sync::OnceCell<SocketAddr>,
    live: Arc<Mutex<HashMap<String, Arc<Session>>>>,
}

/// A job's hold on its session: the endpoint answers for the job until
/// this is dropped.
pub struct Lease {
    id: String,
    live: Arc<Mutex<HashMap<String, Arc<Session>>>>,
}

impl Drop for Lease {
    fn drop(&mut self) {
        let mut live = self.live.lock().unwrap_or_else(|e| e.into_inner());
        live.remove(&self.id);
    }
}

impl Sessions {
    /// Sessions made by `assume`; the endpoint opens with the first.
    pub fn new(assume: Arc<dyn Assume>, lifetime: Lifetime) -> Sessions {
        Sessions {
            assume,
            lifetime,
            addr: tokio::sync::OnceCell::new(),
            live: Arc::default(),
        }
    }

    /// Assumes `arn` for a job (so that a role it may not have refuses the
    /// job before it starts) and opens its endpoint: the variables that
    /// point the job's tools at it, and the lease that closes it.
    pub async fn open(
        &self,
        arn: &str,
        session: &str,
        note: Note,
    ) -> Result<(Vec<(String, String)>, Lease), String> {
        let first = self
            .assume
            .assume(arn, session, self.lifetime.duration)
            .await?;
        let ends = Instant::now() + self.lifetime.duration;
        note(
            "assumed",
            format!("{arn} as session {session}, until {}", first.expiration),
        );
        let addr = *self
            .addr
            .get_or_try_init(|| serve(self.live.clone(), self.assume.clone(), self.lifetime))
            .await?;
        let id = random_hex(16);
        let token = random_hex(32);
        let s = Session {
            token: token.clone(),
            arn: arn.to_owned(),
            name: session.to_owned(),
            note,
            current: tokio::sync::Mutex::new((first, ends)),
        };
        let mut live = self.live.lock().unwrap_or_else(|e| e.into_inner());
        live.insert(id.clone(), Arc::new(s));
        let env = vec![
            (
                "AWS_CONTAINER_CREDENTIALS_FULL_URI".to_owned(),
                format!("http://{addr}/v1/credentials/{id}"),
            ),
            ("AWS_CONTAINER_AUTHORIZATION_TOKEN".to_owned(), token),
        ];
        Ok((
            env,
            Lease {
                id,
                live: self.live.clone(),
            },
        ))
    }
}

#[derive(Clone)]
struct Served {
    live: Arc<Mutex<HashMap<String, Arc<Session>>>>,
    assume: Arc<dyn Assume>,
    lifetime: Lifetime,
}

/// Binds the endpoint on loopback and serves it for the runner's life.
async fn serve(
    live: Arc<Mutex<HashMap<String, Arc<Session>>>>,
    assume: Arc<dyn Assume>,
    lifetime: Lifetime,
) -> Result<SocketAddr, String> {
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0))
        .await
        .map_err(|e| format!("cannot open the jobs' credentials endpoint on 127.0.0.1: {e}"))?;
    let addr = listener
        .local_addr()
        .map_err(|e| format!("the jobs' credentials endpoint: {e}"))?;
    let app = axum::Router::new()
        .route("/v1/credentials/{id}", axum::routing::get(credentials))
        .with_state(Served {
            live,
            assume,
            lifetime,
        });
    tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, app).await {
            tracing::error!(error = %e, "the jobs' credentials endpoint stopped");
        }
    });
    Ok(addr)
}

/// The container-credentials answer: the session's keys, renewed first
/// when it is near its end.
async fn credentials(
    State(s): State<Served>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Response {
    let session = {
        let live = s.live.lock().unwrap_or_else(|e| e.into_inner());
        live.get(&id).cloned()
    };
    let Some(session) = session else {
        return refusal(
            StatusCode::NOT_FOUND,
            "NotFound",
            "no running job has these credentials (the job ended)",
        );
    };
    let given = headers
        .get(header::AUTHORIZATION)
        .map(|v| v.as_bytes())
        .unwrap_or_default();
    if !same(given, session.token.as_bytes()) {
        return refusal(
            StatusCode::FORBIDDEN,
            "AccessDenied",
            "the authorization token is not this job's",
        );
    }
    let mut current = session.current.lock().await;
    if Instant::now() + s.lifetime.renew_before >= current.1 {
        match s
            .assume
            .assume(&session.arn, &session.name, s.lifetime.duration)
            .await
        {
            Ok(next) => {
                (session.note)(
                    "renewed",
                    format!(
                        "{} as session {}, until {}",
                        session.arn, session.name, next.expiration
                    ),
                );
                *current = (next, Instant::now() + s.lifetime.duration);
            }
            Err(e) => {
                (session.note)("renewal failed", e.clone());
                // The old keys while they last; the tool asks again.
                if Instant::now() >= current.1 {
                    return refusal(StatusCode::SERVICE_UNAVAILABLE, "RenewalFailed", &e);
                }
            }
        }
    }
    let c = &current.0;
    axum::Json(json!({
        "AccessKeyId": c.access_key_id,
        "SecretAccessKey": c.secret_access_key,
        "Token": c.session_token,
        "Expiration": c.expiration,
    }))
    .into_response()
}

fn refusal(status: StatusCode, code: &str, message: &str) -> Response {
    (
        status,
        axum::Json(json!({"Code": code, "Message": message})),
    )
        .into_response()
}

/// Equal bytes, compared in a time that does not depend on where they
/// differ.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

fn random_hex(bytes: usize) -> String {
    let mut buf = vec![0u8; bytes];
    nuon_core::random_bytes(&mut buf);
    buf.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering};

    /// Sessions numbered 1, 2, … (the key id says which).
    #[derive(Default)]
    struct Counting(AtomicU32);

    #[async_trait]
    impl Assume for Counting {
        async fn assume(&self, arn: &str, session: &str, _: Duration) -> Result<Assumed, String> {
            let n = self.0.fetch_add(1, Ordering::SeqCst) + 1;
            if arn.contains("denied") && n > 1 {
                return Err("AccessDenied".into());
            }
            Ok(Assumed {
                access_key_id: format!("AKIA{n}"),
                secret_access_key: format!("secret{n}"),
                session_token: format!("{session}-{n}"),
                expiration: "2030-01-01T00:00:00Z".into(),
            })
        }
    }

    async fn ask(env: &[(String, String)], token: Option<&str>) -> (u16, serde_json::Value) {
        let url = &env[0].1;
        let token = token.unwrap_or(&env[1].1);
        let r = reqwest::Client::new()
            .get(url)
            .header("authorization", token)
            .send()
            .await
            .unwrap();
        (r.status().as_u16(), r.json().await.unwrap())
    }

    #[tokio::test]
    async fn a_session_is_served_to_its_job_only_renewed_near_its_end_and_gone_with_the_lease() {
        let assume = Arc::new(Counting::default());
        let lifetime = Lifetime {
            duration: Duration::from_millis(1500),
            renew_before: Duration::from_millis(1000),
        };
        let sessions = Sessions::new(assume.clone(), lifetime);
        let notes: Arc<Mutex<Vec<String>>> = Arc::default();
        let n = notes.clone();
        let note: Note = Arc::new(move |o, d| n.lock().unwrap().push(format!("{o}: {d}")));
        let (env, lease) = sessions
            .open("arn:aws:iam::1:role/r", "nuon-job_1", note.clone())
            .await
            .unwrap();
        assert_eq!(env[0].0, "AWS_CONTAINER_CREDENTIALS_FULL_URI");
        assert!(env[0].1.starts_with("http://127.0.0.1:"), "{env:?}");
        assert_eq!(env[1].0, "AWS_CONTAINER_AUTHORIZATION_TOKEN");

        let (status, body) = ask(&env, None).await;
        assert_eq!(status, 200, "{body}");
        assert_eq!(body["AccessKeyId"], "AKIA1");
        assert_eq!(body["Token"], "nuon-job_1-1");
        assert_eq!(body["Expiration"], "2030-01-01T00:00:00Z");
        // Another job's token, or none, is refused.
        let (status, body) = ask(&env, Some("not-the-token")).await;
        assert_eq!((status, body["Code"].as_str()), (403, Some("AccessDenied")));
        // A second job has its own session.
        let (env2, lease2) = sessions
            .open("arn:aws:iam::1:role/other", "nuon-job_2", note)
            .await
            .unwrap();
        assert_eq!(ask(&env2, None).await.1["AccessKeyId"], "AKIA2");
        let (status, _) = ask(&env2, Some(&env[1].1)).await;
        assert_eq!(status, 403);
        drop(lease2);
        // Past the renewal point the same job gets a new session.
        tokio::time::sleep(Duration::from_millis(600)).await;
        let (_, body) = ask(&env, None).await;
        assert_eq!(body["AccessKeyId"], "AKIA3");
        assert_eq!(body["Token"], "nuon-job_1-3");
        let (_, body) = ask(&env, None).await;
        assert_eq!(body["AccessKeyId"], "AKIA3", "kept until near its end");
        let said = notes.lock().unwrap().clone();
        assert_eq!(said.len(), 3, "{said:?}");
        assert!(said[2].starts_with("renewed: arn:aws:iam::1:role/r as session nuon-job_1"));
        // The job ended: its endpoint answers no more.
        drop(lease);
        let (status, body) = ask(&env, None).await;
        assert_eq!((status, body["Code"].as_str()), (404, Some("NotFound")));
    }

    #[tokio::test]
    async fn a_failed_renewal_keeps_the_old_keys_while_they_last_and_then_says_why() {
        let lifetime = Lifetime {
            duration: Duration::from_millis(800),
            renew_before: Duration::from_millis(700),
        };
        let sessions = Sessions::new(Arc::new(Counting::default()), lifetime);
        let note: Note = Arc::new(|_, _| {});
        let (env, _lease) = sessions
            .open("arn:aws:iam::1:role/denied", "s", note)
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_millis(200)).await;
        let (status, body) = ask(&env, None).await;
        assert_eq!((status, body["AccessKeyId"].as_str()), (200, Some("AKIA1")));
        tokio::time::sleep(Duration::from_millis(700)).await;
        let (status, body) = ask(&env, None).await;
        assert_eq!(status, 503, "{body}");
        assert_eq!(body["Message"], "AccessDenied");
    }

    #[test]
    fn lifetimes_sts_would_refuse_are_refused_here() {
        assert!(Lifetime::new(900, 600).is_ok());
        assert!(
            Lifetime::new(899, 600)
                .unwrap_err()
                .contains("900 to 43200")
        );
        assert!(Lifetime::new(3600, 3600).unwrap_err().contains("shorter"));
    }
}
