//! A record service on a loopback port: what the records example
//! plugin calls.

use super::*;

/// A record service on a loopback port: the HTTP API the records example
/// plugin manages (`GET|PUT|DELETE /records/{collection}/{id}`, a bearer
/// token), in memory. It counts every request it is sent.
pub struct RecordService {
    /// `http://127.0.0.1:PORT`.
    pub url: String,
    /// The bearer token it wants.
    pub token: String,
    state: std::sync::Arc<std::sync::Mutex<RecordState>>,
    _stop: tokio::sync::oneshot::Sender<()>,
}

#[derive(Default)]
struct RecordState {
    records: std::collections::BTreeMap<String, serde_json::Value>,
    requests: usize,
}

impl RecordService {
    /// Starts one on its own thread.
    pub fn start(token: &str) -> Result<RecordService> {
        use axum::extract::{Path as UrlPath, State};
        use axum::http::{HeaderMap, StatusCode};
        use axum::routing::get;
        use axum::{Json, Router};
        type Shared = std::sync::Arc<std::sync::Mutex<RecordState>>;
        let state: Shared = Default::default();
        let want = format!("Bearer {token}");
        let authed = move |h: &HeaderMap| {
            h.get("authorization").and_then(|v| v.to_str().ok()) == Some(want.as_str())
        };
        let (a1, a2, a3) = (authed.clone(), authed.clone(), authed);
        let app = Router::new()
            .route(
                "/records/{collection}/{id}",
                get(
                    move |State(s): State<Shared>,
                          UrlPath((c, id)): UrlPath<(String, String)>,
                          h: HeaderMap| async move {
                        let mut s = s.lock().unwrap();
                        s.requests += 1;
                        if !a1(&h) {
                            return Err(StatusCode::UNAUTHORIZED);
                        }
                        s.records
                            .get(&format!("{c}/{id}"))
                            .cloned()
                            .map(Json)
                            .ok_or(StatusCode::NOT_FOUND)
                    },
                )
                .put(
                    move |State(s): State<Shared>,
                          UrlPath((c, id)): UrlPath<(String, String)>,
                          h: HeaderMap,
                          Json(body): Json<serde_json::Value>| async move {
                        let mut s = s.lock().unwrap();
                        s.requests += 1;
                        if !a2(&h) {
                            return Err(StatusCode::UNAUTHORIZED);
                        }
                        let key = format!("{c}/{id}");
                        let revision = s
                            .records
                            .get(&key)
                            .and_then(|r| r["revision"].as_u64())
                            .unwrap_or(0)
                            + 1;
                        let record =
                            serde_json::json!({"fields": body["fields"], "revision": revision});
                        s.records.insert(key, record.clone());
                        Ok(Json(record))
                    },
                )
                .delete(
                    move |State(s): State<Shared>,
                          UrlPath((c, id)): UrlPath<(String, String)>,
                          h: HeaderMap| async move {
                        let mut s = s.lock().unwrap();
                        s.requests += 1;
                        if !a3(&h) {
                            return StatusCode::UNAUTHORIZED;
                        }
                        match s.records.remove(&format!("{c}/{id}")) {
                            Some(_) => StatusCode::NO_CONTENT,
                            None => StatusCode::NOT_FOUND,
                        }
                    },
                ),
            )
            .with_state(state.clone());
        let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
        listener.set_nonblocking(true)?;
        let url = format!("http://{}", listener.local_addr()?);
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime");
            rt.block_on(async move {
                let listener = tokio::net::TcpListener::from_std(listener).expect("listener");
                let _ = axum::serve(listener, app)
                    .with_graceful_shutdown(async {
                        let _ = stopped.await;
                    })
                    .await;
            });
        });
        Ok(RecordService {
            url,
            token: token.into(),
            state,
            _stop: stop,
        })
    }

    /// Record `collection/id`, if there is one.
    pub fn get(&self, collection: &str, id: &str) -> Option<serde_json::Value> {
        self.state
            .lock()
            .unwrap()
            .records
            .get(&format!("{collection}/{id}"))
            .cloned()
    }

    /// How many requests it has been sent.
    pub fn requests(&self) -> usize {
        self.state.lock().unwrap().requests
    }
}
