//! Prefixed, time-ordered identifiers (`job_01J...`).

use std::fmt;
use std::str::FromStr;
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

/// The 32 characters of an id's 26 (Crockford base32), each its 5 bits
/// by its place here.
pub const CROCKFORD: &[u8; 32] = b"0123456789ABCDEFGHJKMNPQRSTVWXYZ";

/// Fills `buf` with bytes from the operating system's random source.
///
/// # Panics
/// Only when the operating system has no random source at all, which no
/// supported platform lacks.
pub fn random_bytes(buf: &mut [u8]) {
    getrandom::fill(buf).expect("the operating system random source failed");
}

/// A uniformly random duration in `[0, max)` (zero when `max` is zero):
/// the jitter of backoffs and long-poll deadlines.
pub fn random_below(max: std::time::Duration) -> std::time::Duration {
    let nanos = u64::try_from(max.as_nanos()).unwrap_or(u64::MAX);
    if nanos == 0 {
        return std::time::Duration::ZERO;
    }
    let mut raw = [0u8; 8];
    random_bytes(&mut raw);
    std::time::Duration::from_nanos(u64::from_le_bytes(raw) % nanos)
}

/// The milliseconds of a ULID's first ten characters.
fn ulid_ms(ulid: &str) -> i64 {
    ulid.bytes().take(10).fold(0i64, |acc, b| {
        let v = CROCKFORD.iter().position(|c| *c == b).unwrap_or(0) as i64;
        (acc << 5) | v
    })
}

/// A 26-character ULID-style string: 48 bits of milliseconds, 80 random bits,
/// Crockford base32. Sorts by creation time, and strictly increases within
/// a process (ULID's monotonic mode): two ids made in one millisecond sort
/// in the order they were made.
fn ulid() -> String {
    static LAST: std::sync::Mutex<u128> = std::sync::Mutex::new(0);
    let ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis())
        .unwrap_or(0)
        & ((1u128 << 48) - 1);
    let mut rnd = [0u8; 10];
    random_bytes(&mut rnd);
    let mut value = ms << 80;
    for (i, b) in rnd.iter().enumerate() {
        value |= (*b as u128) << (72 - 8 * i);
    }
    {
        let mut last = LAST.lock().unwrap_or_else(|p| p.into_inner());
        if value <= *last {
            value = *last + 1;
        }
        *last = value;
    }
    let mut out = [0u8; 26];
    for slot in out.iter_mut().rev() {
        *slot = CROCKFORD[(value & 31) as usize];
        value >>= 5;
    }
    String::from_utf8(out.to_vec()).expect("crockford alphabet is ascii")
}

/// The error of parsing an id with the wrong prefix or shape.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid {kind} id {value:?}: expected {prefix}_ followed by 26 base32 characters")]
pub struct IdError {
    kind: &'static str,
    prefix: &'static str,
    value: String,
}

macro_rules! id_type {
    ($(#[$doc:meta])* $name:ident, $prefix:literal, $kind:literal) => {
        $(#[$doc])*
        #[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        #[serde(try_from = "String", into = "String")]
        pub struct $name(String);

        impl $name {
            /// The prefix every id of this kind starts with.
            pub const PREFIX: &'static str = $prefix;

            /// A new, unique, time-ordered id.
            pub fn generate() -> Self {
                Self(format!("{}_{}", $prefix, ulid()))
            }

            /// The id as a string slice.
            pub fn as_str(&self) -> &str {
                &self.0
            }

            /// When it was made, ms since the Unix epoch (its first 48 bits).
            pub fn created_at_ms(&self) -> i64 {
                ulid_ms(&self.0[$prefix.len() + 1..])
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl FromStr for $name {
            type Err = IdError;
            fn from_str(s: &str) -> Result<Self, IdError> {
                let ok = s
                    .strip_prefix($prefix)
                    .and_then(|rest| rest.strip_prefix('_'))
                    .is_some_and(|rest| {
                        rest.len() == 26 && rest.bytes().all(|b| CROCKFORD.contains(&b))
                    });
                if ok {
                    Ok(Self(s.to_owned()))
                } else {
                    Err(IdError { kind: $kind, prefix: $prefix, value: s.chars().take(64).collect() })
                }
            }
        }

        impl schemars::JsonSchema for $name {
            fn schema_name() -> std::borrow::Cow<'static, str> {
                stringify!($name).into()
            }

            fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
                schemars::json_schema!({
                    "type": "string",
                    "pattern": concat!("^", $prefix, "_[0-9A-HJKMNP-TV-Z]{26}$"),
                    "description": concat!("A ", $kind, " id: `", $prefix, "_` and 26 Crockford base32 characters."),
                })
            }
        }

        impl TryFrom<String> for $name {
            type Error = IdError;
            fn try_from(s: String) -> Result<Self, IdError> {
                s.parse()
            }
        }

        impl From<$name> for String {
            fn from(id: $name) -> String {
                id.0
            }
        }
    };
}

id_type!(
    /// An organisation (a vendor, the tenant of every resource).
    OrgId, "org", "org"
);
id_type!(
    /// A runner: one per install, or an org's build runner.
    RunnerId, "rnr", "runner"
);
id_type!(
    /// A job: one unit of work for one runner.
    JobId, "job", "job"
);
id_type!(
    /// An API token (the id, never the secret).
    TokenId, "tok", "token"
);
id_type!(
    /// An app: what a vendor ships, described by its app config.
    AppId, "app", "app"
);
id_type!(
    /// An install: one customer's copy of an app.
    InstallId, "ins", "install"
);
id_type!(
    /// A workflow: the ordered steps of one install operation.
    WorkflowId, "wfl", "workflow"
);
id_type!(
    /// A release: an app config version and its builds, frozen.
    ReleaseId, "rel", "release"
);
id_type!(
    /// A rollout: a release deployed to the installs a selector picks, in
    /// waves.
    RolloutId, "rol", "rollout"
);
id_type!(
    /// A person of an org: invited by email address, signing in through
    /// the org's OpenID Connect provider.
    UserId, "usr", "user"
);
id_type!(
    /// An invitation: a link a vendor sends its customer to install an app.
    InvitationId, "inv", "invitation"
);
id_type!(
    /// A webhook: a URL an org's events are posted to.
    WebhookId, "whk", "webhook"
);
id_type!(
    /// One delivery of one event to one webhook (the same on every retry).
    DeliveryId, "dlv", "delivery"
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_round_trip_and_sort_by_time() {
        let a = JobId::generate();
        std::thread::sleep(std::time::Duration::from_millis(2));
        let b = JobId::generate();
        assert!(a < b, "{a} should sort before {b}");
        assert_eq!(a.as_str().parse::<JobId>().unwrap(), a);
        assert_eq!(a.as_str().len(), 4 + 26);
    }

    #[test]
    fn an_id_knows_when_it_was_made() {
        let before = crate::now_ms();
        let id = JobId::generate();
        let after = crate::now_ms();
        assert!((before..=after).contains(&id.created_at_ms()));
    }

    #[test]
    fn ids_made_in_one_millisecond_sort_in_the_order_made() {
        let ids: Vec<WorkflowId> = (0..1000).map(|_| WorkflowId::generate()).collect();
        assert!(ids.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn wrong_prefix_or_shape_is_refused() {
        let runner = RunnerId::generate();
        let err = runner.as_str().parse::<JobId>().unwrap_err();
        assert!(err.to_string().contains("invalid job id"), "{err}");
        assert!("job_short".parse::<JobId>().is_err());
        assert!("job_0000000000000000000000000!".parse::<JobId>().is_err());
    }
}
