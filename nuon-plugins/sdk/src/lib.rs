//! Write a nuon plugin in Rust: implement [`Plugin`], call [`export!`], and
//! build for `wasm32-wasip2`.
//!
//! ```ignore
//! use nuon_plugin_sdk::{Applied, Error, Info, Plan, Plugin, Request, json};
//!
//! struct Hello;
//!
//! impl Plugin for Hello {
//!     fn info() -> Info {
//!         Info::new("hello", "0.1.0").schema(json!({"type": "object"}))
//!     }
//!     fn plan(req: &Request, mode: nuon_plugin_sdk::Mode) -> Result<Plan, Error> {
//!         Ok(Plan::new(mode))
//!     }
//!     fn apply(req: &Request, plan: &Plan) -> Result<Applied, Error> {
//!         Ok(Applied::new(json!({}), json!({"greeting": "hello"})))
//!     }
//!     fn destroy(req: &Request, plan: &Plan) -> Result<(), Error> {
//!         Ok(())
//!     }
//! }
//!
//! nuon_plugin_sdk::export!(Hello);
//! ```
//!
//! The contract is the WIT package in `wit/` (`nuon:plugin`); GUIDE.md
//! next to this crate walks through building, testing with
//! `nuon plugins run`, packaging and publishing.

use std::time::Duration;

pub use serde_json::{Value, json};

#[doc(hidden)]
pub mod bindings {
    #![allow(missing_docs, unsafe_code)]
    wit_bindgen::generate!({
        path: "wit",
        world: "nuon-plugin",
        pub_export_macro: true,
        export_macro_name: "__export_world",
        default_bindings_module: "nuon_plugin_sdk::bindings",
    });
}

use bindings::exports::nuon::plugin::plugin as wit;
use bindings::nuon::plugin::{host, types};

/// Why a call failed. The runner treats each kind differently.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Error {
    /// The config is wrong; the vendor or the install must change it.
    InvalidConfig(String),
    /// May succeed if tried again (a timeout, a 503).
    Transient(String),
    /// Will not succeed if tried again.
    Permanent(String),
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Error::InvalidConfig(m) => write!(f, "invalid config: {m}"),
            Error::Transient(m) => write!(f, "transient: {m}"),
            Error::Permanent(m) => write!(f, "{m}"),
        }
    }
}

impl std::error::Error for Error {}

/// What a plugin says of itself.
#[derive(Debug, Clone)]
pub struct Info {
    /// Its name.
    pub name: String,
    /// Its own version.
    pub version: String,
    /// The component types it handles.
    pub component_types: Vec<String>,
    /// The JSON schema its config must satisfy.
    pub config_schema: Value,
}

impl Info {
    /// A plugin named `name` at `version`, handling `wasm` components, with
    /// any object as config.
    pub fn new(name: &str, version: &str) -> Self {
        Info {
            name: name.into(),
            version: version.into(),
            component_types: vec!["wasm".into()],
            config_schema: json!({"type": "object"}),
        }
    }

    /// Sets the config's JSON schema.
    pub fn schema(mut self, schema: Value) -> Self {
        self.config_schema = schema;
        self
    }
}

/// The config and state a call is about.
#[derive(Debug, Clone)]
pub struct Request {
    /// The component's rendered config (an object).
    pub config: Value,
    /// What the last apply returned as state; `None` before the first.
    pub state: Option<Value>,
}

impl Request {
    /// Config key `key` as text, or an invalid-config error naming it.
    pub fn str(&self, key: &str) -> Result<&str, Error> {
        self.config
            .get(key)
            .and_then(Value::as_str)
            .ok_or_else(|| Error::InvalidConfig(format!("config key {key:?} must be a string")))
    }
}

/// Whether a plan deploys or destroys.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Create or update what the plugin manages.
    Deploy,
    /// Remove it.
    Destroy,
}

/// One kind of change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Something new.
    Create,
    /// Changed in place.
    Update,
    /// Removed and made again.
    Replace,
    /// Removed.
    Delete,
}

/// One planned change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    /// What kind.
    pub action: Action,
    /// What changes.
    pub resource: String,
    /// One line for people.
    pub summary: String,
}

/// A plan: the changes, and data the plugin reads back in `apply`.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// Deploy or destroy.
    pub mode: Mode,
    /// The changes (none: nothing to do).
    pub changes: Vec<Change>,
    /// Anything the plugin wants back in `apply` or `destroy`.
    pub data: Value,
}

impl Plan {
    /// A plan that changes nothing.
    pub fn new(mode: Mode) -> Self {
        Plan {
            mode,
            changes: Vec::new(),
            data: Value::Null,
        }
    }

    /// Adds a change.
    pub fn change(mut self, action: Action, resource: &str, summary: &str) -> Self {
        self.changes.push(Change {
            action,
            resource: resource.into(),
            summary: summary.into(),
        });
        self
    }

    /// Sets the plan's data.
    pub fn data(mut self, data: Value) -> Self {
        self.data = data;
        self
    }
}

/// What an apply leaves behind.
#[derive(Debug, Clone, PartialEq)]
pub struct Applied {
    /// Kept by the platform for the next call.
    pub state: Value,
    /// The component's outputs (an object).
    pub outputs: Value,
}

impl Applied {
    /// State and outputs.
    pub fn new(state: Value, outputs: Value) -> Self {
        Applied { state, outputs }
    }
}

/// A nuon plugin. Every function is called on a fresh instance: keep
/// nothing in statics between calls.
pub trait Plugin {
    /// Who it is and what config it takes.
    fn info() -> Info;

    /// Checks a config beyond its schema. No side effects.
    fn validate(config: &Value) -> Result<(), Error> {
        let _ = config;
        Ok(())
    }

    /// What deploying (or destroying) would change. No side effects.
    fn plan(request: &Request, mode: Mode) -> Result<Plan, Error>;

    /// Makes exactly the changes of `plan`.
    fn apply(request: &Request, plan: &Plan) -> Result<Applied, Error>;

    /// Removes what the plugin manages, following `plan`.
    fn destroy(request: &Request, plan: &Plan) -> Result<(), Error>;
}

/// Writes a line to the job's log.
pub fn log(message: &str) {
    host::log(host::Level::Info, message);
}

/// Writes a warning to the job's log.
pub fn warn(message: &str) {
    host::log(host::Level::Warn, message);
}

/// Reports progress: `done` of `total` steps.
pub fn progress(done: u32, total: u32, message: &str) {
    host::progress(done, total, message);
}

/// Whether the job was cancelled; stop early when it was.
pub fn cancelled() -> bool {
    host::cancelled()
}

/// The value of secret `name`: the plugin must declare it in its manifest
/// and the component's config must grant it.
pub fn secret(name: &str) -> Result<String, Error> {
    host::secret(name).map_err(Error::Permanent)
}

/// Time left before the call's deadline.
pub fn time_left() -> Duration {
    Duration::from_millis(host::time_left_ms())
}

/// Outgoing HTTP to the hosts the plugin declares.
pub mod http {
    use super::Error;
    use crate::bindings::nuon::plugin::http as wit;

    /// A response.
    #[derive(Debug, Clone)]
    pub struct Response {
        /// The status code.
        pub status: u16,
        /// The headers.
        pub headers: Vec<(String, String)>,
        /// The body.
        pub body: Vec<u8>,
    }

    impl Response {
        /// The body as JSON.
        pub fn json(&self) -> Result<serde_json::Value, Error> {
            serde_json::from_slice(&self.body).map_err(|e| {
                Error::Permanent(format!(
                    "the response (status {}) is not JSON: {e}",
                    self.status
                ))
            })
        }
    }

    /// A request to send.
    #[derive(Debug, Clone)]
    pub struct Request {
        method: String,
        url: String,
        headers: Vec<(String, String)>,
        body: Vec<u8>,
    }

    impl Request {
        /// A request of `method` to `url`.
        pub fn new(method: &str, url: &str) -> Self {
            Request {
                method: method.into(),
                url: url.into(),
                headers: Vec::new(),
                body: Vec::new(),
            }
        }

        /// Adds a header.
        pub fn header(mut self, name: &str, value: &str) -> Self {
            self.headers.push((name.into(), value.into()));
            self
        }

        /// Sets a JSON body (and its content type).
        pub fn json(mut self, body: &serde_json::Value) -> Self {
            self.body = body.to_string().into_bytes();
            self.header("content-type", "application/json")
        }

        /// Sends it. Transport failures and timeouts are transient errors; a
        /// host the plugin may not reach is a permanent one.
        pub fn send(self) -> Result<Response, Error> {
            let headers = |h: Vec<(String, String)>| {
                h.into_iter()
                    .map(|(name, value)| wit::Header { name, value })
                    .collect()
            };
            let r = wit::send(&wit::Request {
                method: self.method,
                url: self.url.clone(),
                headers: headers(self.headers),
                body: self.body,
            })
            .map_err(|e| match e {
                wit::HttpError::Denied(m) => Error::Permanent(m),
                wit::HttpError::InvalidRequest(m) => {
                    Error::InvalidConfig(format!("{}: {m}", self.url))
                }
                wit::HttpError::Transport(m) => Error::Transient(format!("{}: {m}", self.url)),
                wit::HttpError::Timeout => Error::Transient(format!("{}: timed out", self.url)),
            })?;
            Ok(Response {
                status: r.status,
                headers: r.headers.into_iter().map(|h| (h.name, h.value)).collect(),
                body: r.body,
            })
        }
    }

    /// `GET url`.
    pub fn get(url: &str) -> Request {
        Request::new("GET", url)
    }

    /// `PUT url`.
    pub fn put(url: &str) -> Request {
        Request::new("PUT", url)
    }

    /// `DELETE url`.
    pub fn delete(url: &str) -> Request {
        Request::new("DELETE", url)
    }
}

// ---- the glue between the WIT types and the SDK's ----

fn parse(what: &str, text: &str) -> Result<Value, types::PluginError> {
    serde_json::from_str(text)
        .map_err(|e| types::PluginError::InvalidConfig(format!("the {what} is not JSON: {e}")))
}

fn to_wit_error(e: Error) -> types::PluginError {
    match e {
        Error::InvalidConfig(m) => types::PluginError::InvalidConfig(m),
        Error::Transient(m) => types::PluginError::Transient(m),
        Error::Permanent(m) => types::PluginError::Permanent(m),
    }
}

fn request(r: types::Request) -> Result<Request, types::PluginError> {
    Ok(Request {
        config: parse("config", &r.config)?,
        state: r.state.as_deref().map(|s| parse("state", s)).transpose()?,
    })
}

fn mode_of(m: types::PlanMode) -> Mode {
    match m {
        types::PlanMode::Deploy => Mode::Deploy,
        types::PlanMode::Destroy => Mode::Destroy,
    }
}

fn plan_of(p: types::ChangePlan) -> Result<Plan, types::PluginError> {
    Ok(Plan {
        mode: mode_of(p.mode),
        changes: p
            .changes
            .into_iter()
            .map(|c| Change {
                action: match c.action {
                    types::ChangeAction::Create => Action::Create,
                    types::ChangeAction::Update => Action::Update,
                    types::ChangeAction::Replace => Action::Replace,
                    types::ChangeAction::Delete => Action::Delete,
                },
                resource: c.target,
                summary: c.summary,
            })
            .collect(),
        data: parse("plan data", &p.data)?,
    })
}

fn wit_plan(p: Plan) -> types::ChangePlan {
    types::ChangePlan {
        mode: match p.mode {
            Mode::Deploy => types::PlanMode::Deploy,
            Mode::Destroy => types::PlanMode::Destroy,
        },
        changes: p
            .changes
            .into_iter()
            .map(|c| types::PlannedChange {
                action: match c.action {
                    Action::Create => types::ChangeAction::Create,
                    Action::Update => types::ChangeAction::Update,
                    Action::Replace => types::ChangeAction::Replace,
                    Action::Delete => types::ChangeAction::Delete,
                },
                target: c.resource,
                summary: c.summary,
            })
            .collect(),
        data: p.data.to_string(),
    }
}

/// What [`export!`] expands to call; not for direct use.
#[doc(hidden)]
pub struct Adapter<P>(std::marker::PhantomData<P>);

impl<P: Plugin> Adapter<P> {
    #[doc(hidden)]
    pub fn info() -> wit::PluginInfo {
        let i = P::info();
        wit::PluginInfo {
            name: i.name,
            version: i.version,
            component_types: i.component_types,
            config_schema: i.config_schema.to_string(),
        }
    }

    #[doc(hidden)]
    pub fn validate(config: String) -> Result<(), wit::PluginError> {
        P::validate(&parse("config", &config)?).map_err(to_wit_error)
    }

    #[doc(hidden)]
    pub fn plan(r: wit::Request, mode: wit::PlanMode) -> Result<wit::ChangePlan, wit::PluginError> {
        let r = request(r)?;
        P::plan(&r, mode_of(mode))
            .map(wit_plan)
            .map_err(to_wit_error)
    }

    #[doc(hidden)]
    pub fn apply(r: wit::Request, plan: wit::ChangePlan) -> Result<wit::Applied, wit::PluginError> {
        let (r, plan) = (request(r)?, plan_of(plan)?);
        let a = P::apply(&r, &plan).map_err(to_wit_error)?;
        Ok(wit::Applied {
            state: a.state.to_string(),
            outputs: a.outputs.to_string(),
        })
    }

    #[doc(hidden)]
    pub fn destroy(r: wit::Request, plan: wit::ChangePlan) -> Result<(), wit::PluginError> {
        let (r, plan) = (request(r)?, plan_of(plan)?);
        P::destroy(&r, &plan).map_err(to_wit_error)
    }
}

#[doc(hidden)]
pub use bindings::exports::nuon::plugin::plugin::Guest as __Guest;

/// Exports type `$plugin` (an implementation of [`Plugin`]) as the
/// component's `nuon:plugin/plugin` interface. Call it once, at the crate's
/// top level.
#[macro_export]
macro_rules! export {
    ($plugin:ty) => {
        struct __NuonPlugin;

        impl $crate::__Guest for __NuonPlugin {
            fn info() -> $crate::bindings::exports::nuon::plugin::plugin::PluginInfo {
                $crate::Adapter::<$plugin>::info()
            }
            fn validate(
                config: String,
            ) -> Result<(), $crate::bindings::exports::nuon::plugin::plugin::PluginError> {
                $crate::Adapter::<$plugin>::validate(config)
            }
            fn plan(
                r: $crate::bindings::exports::nuon::plugin::plugin::Request,
                mode: $crate::bindings::exports::nuon::plugin::plugin::PlanMode,
            ) -> Result<
                $crate::bindings::exports::nuon::plugin::plugin::ChangePlan,
                $crate::bindings::exports::nuon::plugin::plugin::PluginError,
            > {
                $crate::Adapter::<$plugin>::plan(r, mode)
            }
            fn apply(
                r: $crate::bindings::exports::nuon::plugin::plugin::Request,
                plan: $crate::bindings::exports::nuon::plugin::plugin::ChangePlan,
            ) -> Result<
                $crate::bindings::exports::nuon::plugin::plugin::Applied,
                $crate::bindings::exports::nuon::plugin::plugin::PluginError,
            > {
                $crate::Adapter::<$plugin>::apply(r, plan)
            }
            fn destroy(
                r: $crate::bindings::exports::nuon::plugin::plugin::Request,
                plan: $crate::bindings::exports::nuon::plugin::plugin::ChangePlan,
            ) -> Result<(), $crate::bindings::exports::nuon::plugin::plugin::PluginError> {
                $crate::Adapter::<$plugin>::destroy(r, plan)
            }
        }

        $crate::bindings::__export_world!(__NuonPlugin with_types_in $crate::bindings);
    };
}
