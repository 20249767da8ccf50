//! Reading an app config: the directory of TOML files a vendor describes
//! an app with, in Nuon's format, into nuon-core's model of it
//! ([`nuon_core::app::AppConfig`]), and everything needed to check one
//! offline.
//!
//! ```text
//! metadata.toml            version = "v2" (or "v1"), display_name, description, readme
//! sandbox.toml             the install's base infrastructure (a Terraform module)
//! runner.toml              runner_type, env_vars
//! inputs.toml              [[group]] and [[input]]
//! secrets.toml             [[secret]]     (or secrets/*.toml, one secret a file)
//! components/*.toml        one component a file: name, type, dependencies, source, ...
//! actions/*.toml           one action a file: name, timeout, [[triggers]], [[steps]]
//! installs/*.toml          one install a file: name, [[inputs]]
//! ```
//!
//! [`parse`] reads the files of a config and reports **every** problem at
//! once, each as `file:line:col: message`, with a suggestion for near-miss
//! names. Keys and files that Nuon has and this project does not support yet
//! are warnings, so Nuon's own configs stay readable; everything else is an
//! error. Values may use Nuon's templates ([`nuon_core::app::template`]);
//! component dependencies are the explicit list plus every component whose
//! outputs a template reads, and must form no cycle.
//!
//! The model the loader fills (the config, its components as a
//! [`nuon_core::app::ComponentSpec`], diagnostics, overrides,
//! the render context) stays in nuon-core: the store keeps it, the engine
//! plans and renders from it and the wire shows it, and none of them reads
//! a config's files. This crate is only what reads and checks them: the
//! control plane when a config is synced, the client and the CLI before.

mod actions;
mod check;
mod health;
mod install_file;
mod installer;
mod interface;
mod keys;
mod kinds;
mod limits;
mod load;
mod loaded;
mod platform;
mod policies;
mod reader;
mod runbooks;
mod schema;
mod secrets;
mod sources;

// The model the loader fills, by the names the loader's modules use.
use nuon_core::app::*;

pub use interface::{ModuleInterface, check_module_interfaces, module_interface};
pub use keys::component_kinds_of;
pub use limits::{IAM_ROLE_NAME_MAX, role_name_length, stand_in_id};
pub use load::{
    MAX_FILE_BYTES, MAX_FILES, check_file_count, key_table, parse, reads_dir, reads_file,
    source_file, unreadable_dir, validate,
};
pub use policies::check_policies;
pub use reader::{KeyTable, TableKeys};

#[cfg(test)]
mod tests;
