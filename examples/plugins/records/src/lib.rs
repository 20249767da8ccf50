//! The records plugin: keeps one record of an HTTP record service (the kind
//! of SaaS API a vendor registers an install with: a license, a tenant, a
//! DNS entry) equal to the component's config.
//!
//! Config:
//!
//! ```json
//! {
//!   "endpoint": "http://127.0.0.1:8080",
//!   "collection": "licenses",
//!   "id": "acme",
//!   "fields": {"seats": 10, "plan": "pro"},
//!   "token_secret": "records_token"
//! }
//! ```
//!
//! The service: `GET|PUT|DELETE {endpoint}/records/{collection}/{id}`, a
//! record being `{"fields": {...}, "revision": N}`; `PUT` takes
//! `{"fields": {...}}` and answers the new record. With `token_secret` the
//! plugin sends that secret as a bearer token.
//!
//! The plan records the revision it saw; apply and destroy refuse to act
//! when the record changed since (plan again), so they make exactly the
//! planned change.

use nuon_plugin_sdk::{
    Action, Applied, Error, Info, Mode, Plan, Plugin, Request, Value, http, json,
};

struct Records;

/// Where the record lives, and how to reach it.
struct Target {
    url: String,
    token: Option<String>,
}

impl Target {
    fn of(req: &Request) -> Result<Target, Error> {
        let endpoint = req.str("endpoint")?.trim_end_matches('/');
        let url = format!(
            "{endpoint}/records/{}/{}",
            req.str("collection")?,
            req.str("id")?
        );
        let token = match req.config.get("token_secret").and_then(Value::as_str) {
            Some(name) => Some(nuon_plugin_sdk::secret(name)?),
            None => None,
        };
        Ok(Target { url, token })
    }

    fn send(&self, r: http::Request) -> Result<http::Response, Error> {
        let r = match &self.token {
            Some(t) => r.header("authorization", &format!("Bearer {t}")),
            None => r,
        };
        let resp = r.send()?;
        match resp.status {
            200..=299 | 404 => Ok(resp),
            401 | 403 => Err(Error::InvalidConfig(format!(
                "{} refused the token (status {}): check the secret",
                self.url, resp.status
            ))),
            s if s >= 500 || s == 429 => {
                Err(Error::Transient(format!("{} answered {s}", self.url)))
            }
            s => Err(Error::Permanent(format!(
                "{} answered {s}: {}",
                self.url,
                String::from_utf8_lossy(&resp.body)
            ))),
        }
    }

    /// The record now, if there is one.
    fn current(&self) -> Result<Option<Value>, Error> {
        let resp = self.send(http::get(&self.url))?;
        if resp.status == 404 {
            return Ok(None);
        }
        resp.json().map(Some)
    }

    /// Fails unless the record is still at the revision the plan saw.
    fn unchanged_since(&self, plan: &Plan) -> Result<Option<Value>, Error> {
        let now = self.current()?;
        let revision = |r: &Option<Value>| r.as_ref().map(|r| r["revision"].clone());
        if revision(&now) != plan.data.get("revision").cloned().filter(|v| !v.is_null()) {
            return Err(Error::Permanent(format!(
                "{} changed since the plan (revision {}): plan again",
                self.url,
                revision(&now).unwrap_or(Value::Null)
            )));
        }
        Ok(now)
    }
}

fn outputs(t: &Target, req: &Request, record: &Value) -> Applied {
    let revision = record["revision"].clone();
    Applied::new(
        json!({"url": t.url, "revision": revision}),
        json!({
            "url": t.url,
            "collection": req.config["collection"],
            "id": req.config["id"],
            "revision": revision,
            "fields": record["fields"],
        }),
    )
}

impl Plugin for Records {
    fn info() -> Info {
        Info::new("records", env!("CARGO_PKG_VERSION")).schema(json!({
            "type": "object",
            "required": ["endpoint", "collection", "id", "fields"],
            "properties": {
                "endpoint": {"type": "string"},
                "collection": {"type": "string", "minLength": 1},
                "id": {"type": "string", "minLength": 1},
                "fields": {"type": "object"},
                "token_secret": {"type": "string"}
            },
            "additionalProperties": false
        }))
    }

    fn validate(config: &Value) -> Result<(), Error> {
        let endpoint = config["endpoint"].as_str().unwrap_or_default();
        if !(endpoint.starts_with("http://") || endpoint.starts_with("https://")) {
            return Err(Error::InvalidConfig(format!(
                "endpoint {endpoint:?} must be an http:// or https:// URL"
            )));
        }
        for key in ["collection", "id"] {
            let v = config[key].as_str().unwrap_or_default();
            if !v
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
            {
                return Err(Error::InvalidConfig(format!(
                    "{key} {v:?} may hold only letters, digits, '-' and '_'"
                )));
            }
        }
        Ok(())
    }

    fn plan(req: &Request, mode: Mode) -> Result<Plan, Error> {
        let t = Target::of(req)?;
        let now = t.current()?;
        let revision = now.as_ref().map(|r| r["revision"].clone());
        let plan = Plan::new(mode).data(json!({"revision": revision}));
        let want = &req.config["fields"];
        Ok(match (mode, &now) {
            (Mode::Deploy, None) => plan.change(Action::Create, &t.url, "create the record"),
            (Mode::Deploy, Some(r)) if &r["fields"] != want => {
                let have = r["fields"].as_object().cloned().unwrap_or_default();
                let want_map = want.as_object().cloned().unwrap_or_default();
                let mut keys: Vec<&String> = have
                    .keys()
                    .chain(want_map.keys())
                    .filter(|k| have.get(*k) != want_map.get(*k))
                    .collect();
                keys.sort();
                keys.dedup();
                let keys: Vec<&str> = keys.iter().map(|k| k.as_str()).collect();
                plan.change(
                    Action::Update,
                    &t.url,
                    &format!("update fields {}", keys.join(", ")),
                )
            }
            (Mode::Destroy, Some(_)) => plan.change(Action::Delete, &t.url, "delete the record"),
            _ => plan,
        })
    }

    fn apply(req: &Request, plan: &Plan) -> Result<Applied, Error> {
        if plan.mode != Mode::Deploy {
            return Err(Error::Permanent("apply was given a destroy plan".into()));
        }
        let t = Target::of(req)?;
        let now = t.unchanged_since(plan)?;
        if plan.changes.is_empty() {
            let record = now.ok_or_else(|| Error::Permanent(format!("{} is gone", t.url)))?;
            return Ok(outputs(&t, req, &record));
        }
        nuon_plugin_sdk::progress(0, 1, "writing the record");
        let resp = t.send(http::put(&t.url).json(&json!({"fields": req.config["fields"]})))?;
        let record = resp.json()?;
        nuon_plugin_sdk::log(&format!("{} is at revision {}", t.url, record["revision"]));
        nuon_plugin_sdk::progress(1, 1, "record written");
        Ok(outputs(&t, req, &record))
    }

    fn destroy(req: &Request, plan: &Plan) -> Result<(), Error> {
        if plan.mode != Mode::Destroy {
            return Err(Error::Permanent("destroy was given a deploy plan".into()));
        }
        let t = Target::of(req)?;
        t.unchanged_since(plan)?;
        if plan.changes.is_empty() {
            nuon_plugin_sdk::log(&format!("{} is already gone", t.url));
            return Ok(());
        }
        t.send(http::delete(&t.url))?;
        nuon_plugin_sdk::log(&format!("deleted {}", t.url));
        Ok(())
    }
}

nuon_plugin_sdk::export!(Records);
