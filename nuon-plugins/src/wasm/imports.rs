//! What the host gives a plugin: the `nuon:plugin` imports (log, progress,
//! cancellation, secrets, HTTP to allowed hosts) and the pipes that carry
//! its stdout and stderr to the job's log.

use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Instant;

use tokio::io::AsyncWrite;

use super::bindings::nuon::plugin::{host, http, types};
use super::{CallState, LogSink};

/// The most bytes of one stream (stdout or stderr) a call may log.
const MAX_STREAM_BYTES: usize = 4 << 20;
/// The largest HTTP response body a plugin gets.
const MAX_BODY_BYTES: usize = 16 << 20;

impl types::Host for CallState {}

impl host::Host for CallState {
    async fn log(&mut self, level: host::Level, message: String) {
        let tag = match level {
            host::Level::Debug => "debug",
            host::Level::Info => "info",
            host::Level::Warn => "warn",
            host::Level::Error => "error",
        };
        for line in message.lines() {
            let _ = self.log.send(format!("[plugin {tag}] {line}"));
        }
    }

    async fn progress(&mut self, done: u32, total: u32, message: String) {
        let _ = self
            .log
            .send(format!("[plugin progress {done}/{total}] {message}"));
    }

    async fn cancelled(&mut self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    async fn secret(&mut self, name: String) -> Result<String, String> {
        match self.secrets.get(&name) {
            Some(v) => Ok(v.clone()),
            None => {
                let text = format!(
                    "secret {name:?} refused: the plugin did not declare it (plugin.toml [capabilities] secrets) or the component does not grant it"
                );
                let _ = self.log.send(format!("[host] {text}"));
                Err(text)
            }
        }
    }

    async fn time_left_ms(&mut self) -> u64 {
        self.deadline
            .saturating_duration_since(Instant::now())
            .as_millis() as u64
    }
}

impl http::Host for CallState {
    async fn send(&mut self, request: http::Request) -> Result<http::Response, http::HttpError> {
        let url = reqwest::Url::parse(&request.url)
            .map_err(|e| http::HttpError::InvalidRequest(format!("URL {:?}: {e}", request.url)))?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(http::HttpError::InvalidRequest(format!(
                "URL {:?}: only http and https",
                request.url
            )));
        }
        let host = url.host_str().unwrap_or_default().trim_matches(['[', ']']);
        let port = url.port_or_known_default().unwrap_or(0);
        // The allow-list, before any connection (and before any name is
        // resolved).
        if !nuon_core::wasm::host_allowed(&self.allowed_hosts, host, port) {
            let text = format!(
                "HTTP to {host}:{port} refused: not among the plugin's allowed hosts ({}); declare it in plugin.toml and grant it in the component's [capabilities]",
                if self.allowed_hosts.is_empty() {
                    "none".to_owned()
                } else {
                    self.allowed_hosts.join(", ")
                }
            );
            let _ = self.log.send(format!("[host] {text}"));
            return Err(http::HttpError::Denied(text));
        }
        let method = reqwest::Method::from_bytes(request.method.as_bytes())
            .map_err(|_| http::HttpError::InvalidRequest(format!("method {:?}", request.method)))?;
        let mut req = self.http.request(method, url).body(request.body);
        for h in request.headers {
            req = req.header(h.name, h.value);
        }
        let deadline = tokio::time::Instant::from_std(self.deadline);
        let work = async {
            let resp = req
                .send()
                .await
                .map_err(|e| http::HttpError::Transport(format!("{e}")))?;
            let status = resp.status().as_u16();
            let headers = resp
                .headers()
                .iter()
                .map(|(k, v)| http::Header {
                    name: k.to_string(),
                    value: String::from_utf8_lossy(v.as_bytes()).into_owned(),
                })
                .collect();
            let mut body = Vec::new();
            let mut resp = resp;
            while let Some(chunk) = resp
                .chunk()
                .await
                .map_err(|e| http::HttpError::Transport(format!("{e}")))?
            {
                if body.len() + chunk.len() > MAX_BODY_BYTES {
                    return Err(http::HttpError::Transport(format!(
                        "the response is larger than {} MiB",
                        MAX_BODY_BYTES >> 20
                    )));
                }
                body.extend_from_slice(&chunk);
            }
            Ok(http::Response {
                status,
                headers,
                body,
            })
        };
        match tokio::time::timeout_at(deadline, work).await {
            Ok(r) => r,
            Err(_) => Err(http::HttpError::Timeout),
        }
    }
}

/// A guest's stdout or stderr: complete lines go to the job's log.
#[derive(Clone)]
pub(super) struct LogPipe(Arc<Mutex<PipeInner>>);

struct PipeInner {
    sink: LogSink,
    name: &'static str,
    partial: Vec<u8>,
    written: usize,
}

impl PipeInner {
    fn emit(&mut self, line: &[u8]) {
        let text = String::from_utf8_lossy(line);
        let _ = self.sink.send(format!(
            "[plugin {}] {}",
            self.name,
            text.trim_end_matches('\r')
        ));
    }
}

impl Drop for PipeInner {
    fn drop(&mut self) {
        if !self.partial.is_empty() {
            let rest = std::mem::take(&mut self.partial);
            self.emit(&rest);
        }
    }
}

impl LogPipe {
    pub(super) fn new(sink: LogSink, name: &'static str) -> Self {
        LogPipe(Arc::new(Mutex::new(PipeInner {
            sink,
            name,
            partial: Vec::new(),
            written: 0,
        })))
    }

    fn write(&self, buf: &[u8]) {
        let mut p = self.0.lock().expect("log pipe");
        if p.written >= MAX_STREAM_BYTES {
            return;
        }
        p.written += buf.len();
        if p.written >= MAX_STREAM_BYTES {
            let text = format!(
                "[host] the plugin's {} passed {} MiB; the rest is dropped",
                p.name,
                MAX_STREAM_BYTES >> 20
            );
            let _ = p.sink.send(text);
            return;
        }
        p.partial.extend_from_slice(buf);
        while let Some(i) = p.partial.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = p.partial.drain(..=i).collect();
            p.emit(&line[..line.len() - 1]);
        }
    }
}

impl wasmtime_wasi::cli::IsTerminal for LogPipe {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl wasmtime_wasi::cli::StdoutStream for LogPipe {
    fn async_stream(&self) -> Box<dyn AsyncWrite + Send + Sync> {
        Box::new(self.clone())
    }
}

impl AsyncWrite for LogPipe {
    fn poll_write(
        self: Pin<&mut Self>,
        _: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        self.write(buf);
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}
