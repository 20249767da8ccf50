//! What the loader read from the files, before the cross-file checks
//! ([`super::check`]) turn it into an [`AppConfig`](super::AppConfig).

use std::collections::BTreeMap;

use serde_json::Value;

use nuon_core::app::{Diagnostics, SourceFile, did_you_mean};

use super::reader::Located;
use super::{
    Action, Component, InputDecl, InputGroup, InstallDecl, Metadata, RunnerSettings, Sandbox,
    SecretDecl,
};

/// Something read from one file, with what the cross-file checks need.
pub(crate) struct Item<T> {
    pub(crate) value: Option<T>,
    pub(crate) file: usize,
    pub(crate) name: Option<Located>,
    /// Every string of the item, for template checks.
    pub(crate) strings: Vec<Located>,
    /// Written dependencies.
    pub(crate) deps: Vec<Located>,
    /// Other names it refers to (an input's group, a trigger's component).
    pub(crate) refs: Vec<Located>,
    /// Install input values by name, unchecked.
    pub(crate) values: Vec<(Located, Value)>,
    /// The kubernetes context it names (`kubernetes_context`).
    pub(crate) context: Option<Located>,
    /// An install file's `[components.NAME]` overrides, unchecked.
    pub(crate) overrides: Vec<OverrideAt>,
    /// Templates rendered after the component's apply (its health
    /// probes): they may read its own outputs.
    pub(crate) after_apply: Vec<Located>,
}

/// One `[components.NAME]` table of an install file, as written.
pub(crate) struct OverrideAt {
    pub(crate) component: Located,
    pub(crate) helm_values: Option<Located>,
    pub(crate) tf_vars: Option<Located>,
}

impl<T> Item<T> {
    pub(super) fn new(file: usize) -> Self {
        Item {
            value: None,
            file,
            name: None,
            strings: Vec::new(),
            deps: Vec::new(),
            refs: Vec::new(),
            values: Vec::new(),
            context: None,
            after_apply: Vec::new(),
            overrides: Vec::new(),
        }
    }
}

/// Everything read from the files, before the cross-file checks.
#[derive(Default)]
pub(crate) struct Loaded {
    pub(crate) metadata: Option<Metadata>,
    pub(crate) sandbox: Option<Item<Sandbox>>,
    pub(crate) runner: Option<RunnerSettings>,
    /// `runner.toml`'s file and the components its `[job_images]` name.
    pub(crate) job_images: Option<(usize, Vec<Located>)>,
    pub(crate) groups: Vec<Item<InputGroup>>,
    pub(crate) inputs: Vec<Item<InputDecl>>,
    pub(crate) secrets: Vec<Item<SecretDecl>>,
    pub(crate) components: Vec<Item<Component>>,
    pub(crate) actions: Vec<Item<Action>>,
    pub(crate) installs: Vec<Item<InstallDecl>>,
    pub(crate) platform: super::platform::Loaded,
}

/// Where a name or reference was written.
#[derive(Clone)]
pub(crate) struct Place {
    pub(crate) file: usize,
    pub(crate) offset: usize,
}

/// Reports each of `refs` that names no `known` thing (a `what`), with the
/// nearest known name.
pub(crate) fn check_refs(
    what: &str,
    refs: &[Located],
    known: &BTreeMap<String, Place>,
    file: &SourceFile,
    d: &mut Diagnostics,
) {
    for r in refs {
        if !known.contains_key(&r.text) {
            d.push(file.at(
                &r.span,
                format!(
                    "unknown {what} {:?}{}",
                    r.text,
                    did_you_mean(&r.text, known.keys().map(String::as_str))
                ),
            ));
        }
    }
}
