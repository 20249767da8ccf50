//! Webhooks: the events an org can subscribe to, and how each delivery is
//! signed, the way GitHub and Stripe sign theirs.
//!
//! A delivery is a `POST` of a JSON body with these headers:
//! - [`EVENT_HEADER`]: the event (`workflow_failed`);
//! - [`DELIVERY_HEADER`]: the delivery's id, the same on every retry (a
//!   receiver that saw it already can drop it);
//! - [`SIGNATURE_HEADER`]: `t=UNIX_SECONDS,v1=HEX`, where `HEX` is
//!   HMAC-SHA256 under the webhook's secret over `UNIX_SECONDS`, a `.` and
//!   the body's exact bytes.
//!
//! ```
//! use nuon_core::webhook::{sign, verify};
//!
//! let header = sign(b"whsec_x", 1_700_000_000, br#"{"event":"drift_detected"}"#);
//! verify(b"whsec_x", &header, br#"{"event":"drift_detected"}"#, 1_700_000_030, 300)?;
//! assert!(verify(b"whsec_x", &header, b"{}", 1_700_000_030, 300).is_err());
//! # Ok::<(), nuon_core::webhook::SignatureRefused>(())
//! ```

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The header naming the event.
pub const EVENT_HEADER: &str = "nuon-event";
/// The header carrying the delivery's id.
pub const DELIVERY_HEADER: &str = "nuon-delivery";
/// The header carrying the signature.
pub const SIGNATURE_HEADER: &str = "nuon-signature";

/// What a webhook can be told of.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum WebhookEvent {
    /// A workflow step waits for an approval.
    ApprovalNeeded,
    /// A workflow failed.
    WorkflowFailed,
    /// A drift check found changes.
    DriftDetected,
    /// A runner turned unhealthy or offline.
    RunnerUnhealthy,
    /// A runner is healthy again.
    RunnerHealthy,
    /// A component's health probe failed, as the install's runner saw it
    /// between deploys (it passed, or had not been seen, before).
    ProbeFailed,
    /// A component's health probe passes again, as the runner saw it.
    ProbeRecovered,
}

impl WebhookEvent {
    /// Every event.
    pub const ALL: [WebhookEvent; 7] = [
        WebhookEvent::ApprovalNeeded,
        WebhookEvent::WorkflowFailed,
        WebhookEvent::DriftDetected,
        WebhookEvent::RunnerUnhealthy,
        WebhookEvent::RunnerHealthy,
        WebhookEvent::ProbeFailed,
        WebhookEvent::ProbeRecovered,
    ];

    /// Its name.
    pub fn as_str(self) -> &'static str {
        match self {
            WebhookEvent::ApprovalNeeded => "approval_needed",
            WebhookEvent::WorkflowFailed => "workflow_failed",
            WebhookEvent::DriftDetected => "drift_detected",
            WebhookEvent::RunnerUnhealthy => "runner_unhealthy",
            WebhookEvent::RunnerHealthy => "runner_healthy",
            WebhookEvent::ProbeFailed => "probe_failed",
            WebhookEvent::ProbeRecovered => "probe_recovered",
        }
    }
}

impl std::str::FromStr for WebhookEvent {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        WebhookEvent::ALL
            .into_iter()
            .find(|e| e.as_str() == s.trim())
            .ok_or_else(|| {
                let all: Vec<_> = WebhookEvent::ALL.iter().map(|e| e.as_str()).collect();
                format!("unknown event {s:?}: expected one of {}", all.join(", "))
            })
    }
}

impl std::fmt::Display for WebhookEvent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

fn mac(secret: &[u8], timestamp: i64, body: &[u8]) -> String {
    let mut message = format!("{timestamp}.").into_bytes();
    message.extend_from_slice(body);
    hex::encode(crate::signing::hmac_sha256(secret, &message))
}

/// The [`SIGNATURE_HEADER`] value of `body` sent at `timestamp` (Unix seconds).
pub fn sign(secret: &[u8], timestamp: i64, body: &[u8]) -> String {
    format!("t={timestamp},v1={}", mac(secret, timestamp, body))
}

/// Why a delivery's signature was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("webhook signature refused: {0}")]
pub struct SignatureRefused(pub String);

/// Checks a [`SIGNATURE_HEADER`] value against the body received, at
/// `now` (Unix seconds), refusing a timestamp more than `tolerance`
/// seconds away (a replay).
pub fn verify(
    secret: &[u8],
    header: &str,
    body: &[u8],
    now: i64,
    tolerance: i64,
) -> Result<(), SignatureRefused> {
    let mut t = None;
    let mut sigs = Vec::new();
    for part in header.split(',') {
        match part.trim().split_once('=') {
            Some(("t", v)) => t = v.parse::<i64>().ok(),
            Some(("v1", v)) => sigs.push(v),
            _ => {}
        }
    }
    let t = t.ok_or_else(|| SignatureRefused("no t=TIMESTAMP in the header".into()))?;
    if now.abs_diff(t) > tolerance.unsigned_abs() {
        return Err(SignatureRefused(format!(
            "timestamp {t} is more than {tolerance} s from now ({now})"
        )));
    }
    let want = mac(secret, t, body);
    // Compare in constant time: an attacker learns nothing from timing.
    let matches = |s: &&str| {
        s.len() == want.len()
            && s.bytes()
                .zip(want.bytes())
                .fold(0u8, |acc, (a, b)| acc | (a ^ b))
                == 0
    };
    if sigs.iter().any(matches) {
        Ok(())
    } else {
        Err(SignatureRefused(
            "no v1 signature matches the body under this secret".into(),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_signature_checks_body_secret_and_time() {
        let h = sign(b"s", 100, b"body");
        assert!(verify(b"s", &h, b"body", 150, 300).is_ok());
        assert!(verify(b"t", &h, b"body", 150, 300).is_err());
        assert!(verify(b"s", &h, b"bodY", 150, 300).is_err());
        assert!(verify(b"s", &h, b"body", 1000, 300).is_err());
        assert!(verify(b"s", "v1=00", b"body", 100, 300).is_err());
        // A timestamp far from now never overflows.
        let far = format!("t={},v1=00", i64::MIN);
        assert!(verify(b"s", &far, b"body", i64::MAX, 300).is_err());
    }
}
