//! Finding a config's files and reading each one into its part of the
//! model, recording every problem with its place.

use toml::de::DeTable;

use super::check;
use super::keys::{
    KIND_KEYS, NUON_ONLY_COMPONENT_KEYS, component_kinds_of, deploy_timeout, drift_schedule,
    max_auto_retries, operation_roles, pulumi, skip_noops, terraform_version, toggles, var_files,
};
use super::loaded::{Item, Loaded};
use super::reader::{KeyTable, Located, Reader, duration, text};
use super::sources::source;
use super::{
    AppConfig, Component, ComponentKind, InputDecl, InputGroup, InputType, Metadata,
    RunnerSettings, Sandbox,
};
use nuon_core::app::{Diagnostic, Diagnostics, SourceFile, did_you_mean};

/// The largest config file read.
pub const MAX_FILE_BYTES: usize = 1024 * 1024;
/// The most files a config may have.
pub const MAX_FILES: usize = 1000;

/// Top-level files this project reads.
const FILES: &[&str] = &[
    "metadata.toml",
    "sandbox.toml",
    "runner.toml",
    "inputs.toml",
    "secrets.toml",
    "stack.toml",
    "permissions.toml",
    "break_glass.toml",
    "operation_roles.toml",
    "policies.toml",
    "kubernetes_contexts.toml",
    "installer.toml",
];
/// Directories whose `*.toml` files (at any depth) this project reads.
const DIRS: &[&str] = &[
    "components",
    "actions",
    "installs",
    "secrets",
    "inputs",
    "input_groups",
    "permissions",
    "break_glass",
    "policies",
    "kubernetes_contexts",
    "runbooks",
];
/// Files and directories of Nuon's cloud service (app branches, event
/// automation, an installs repository): read, and answered with a warning.
const NUON_ONLY_FILES: &[&str] = &["branch.toml", "installs.toml", "triggers.toml"];
const NUON_ONLY_DIRS: &[&str] = &["branches"];

fn top_dir(name: &str) -> Option<&str> {
    name.split_once('/').map(|(d, _)| d)
}

/// Whether a config's loader reads the files (at any depth) of the
/// top-level directory `name`: the layout's directories, and Nuon's others
/// so they can be reported.
pub fn reads_dir(name: &str) -> bool {
    DIRS.contains(&name) || NUON_ONLY_DIRS.contains(&name)
}

/// Whether a config's loader reads the file `name` (its path relative to
/// the config directory, `/`-separated): every `*.toml` at the top level or
/// under a directory it [reads](reads_dir). Everything else (sources,
/// values files, READMEs) is left alone.
pub fn reads_file(name: &str) -> bool {
    name.ends_with(".toml") && top_dir(name).is_none_or(reads_dir)
}

/// An error about the config as a whole (`file` is where).
fn whole(file: &str, message: String) -> Diagnostic {
    Diagnostic {
        file: file.to_owned(),
        line: 1,
        col: 1,
        warning: false,
        message,
    }
}

/// The problem of a config directory that cannot be listed.
pub fn unreadable_dir(dir: &str, error: &dyn std::fmt::Display) -> Diagnostics {
    let mut d = Diagnostics::default();
    d.push(whole(
        dir,
        format!("cannot read the config directory: {error}"),
    ));
    d
}

/// Checks how many files a config has before they are read.
pub fn check_file_count(n: usize) -> Result<(), Diagnostics> {
    if n <= MAX_FILES {
        return Ok(());
    }
    let mut d = Diagnostics::default();
    d.push(whole(
        ".",
        format!("the config has {n} files; at most {MAX_FILES} are read"),
    ));
    Err(d)
}

/// A config file as read (`read` is its bytes, or why they could not be
/// read): the file, or its problem (too large, not UTF-8) in `d`.
pub fn source_file(
    name: String,
    read: Result<Vec<u8>, String>,
    d: &mut Diagnostics,
) -> Option<SourceFile> {
    match read {
        Ok(bytes) if bytes.len() > MAX_FILE_BYTES => {
            d.push(whole(
                &name,
                format!(
                    "the file is {} bytes; config files may be at most {MAX_FILE_BYTES}",
                    bytes.len()
                ),
            ));
            None
        }
        Ok(bytes) => match String::from_utf8(bytes) {
            Ok(text) => Some(SourceFile::new(name, text)),
            Err(e) => {
                let text = String::from_utf8_lossy(e.as_bytes()).into_owned();
                let file = SourceFile::new(name, text);
                d.push(file.diag(e.utf8_error().valid_up_to(), "the file is not valid UTF-8"));
                None
            }
        },
        Err(e) => {
            d.push(whole(&name, format!("cannot read the file: {e}")));
            None
        }
    }
}

/// Checks a config's files, and that the paths it names exist next to it
/// (`exists(path, is_dir)` answers for a path relative to the config
/// directory): the config when it has no error, and every problem found
/// (warnings too).
pub fn validate(
    files: &[SourceFile],
    exists: &dyn Fn(&str, bool) -> bool,
) -> (Option<AppConfig>, Diagnostics) {
    let (config, mut d) = parse(files);
    if let Some(c) = &config {
        check::local_paths(exists, c, files, &mut d);
    }
    let d = d.finish();
    if d.has_errors() {
        (None, d)
    } else {
        (config, d)
    }
}

/// Checks the files of a config and builds it. Returns the config when
/// there is no error, and every problem found (sorted; warnings too).
pub fn parse(files: &[SourceFile]) -> (Option<AppConfig>, Diagnostics) {
    let mut d = Diagnostics::default();
    let mut loaded = Loaded::default();
    let has_secrets_file = files.iter().any(|f| f.name == "secrets.toml");
    let has_inputs_file = files.iter().any(|f| f.name == "inputs.toml");
    for (i, file) in files.iter().enumerate() {
        if file.text.len() > MAX_FILE_BYTES {
            d.push(file.diag(
                0,
                format!(
                    "the file is {} bytes; config files may be at most {MAX_FILE_BYTES}",
                    file.text.len()
                ),
            ));
            continue;
        }
        let name = file.name.as_str();
        let dir = top_dir(name);
        if NUON_ONLY_FILES.contains(&name) || dir.is_some_and(|d| NUON_ONLY_DIRS.contains(&d)) {
            let why = match name {
                "installs.toml" => {
                    "it points Nuon's service at a repository of install files; put them in installs/ here"
                }
                "triggers.toml" => {
                    "event automation of app branches is part of Nuon's hosted service"
                }
                _ => {
                    "app branches (preview runs of pull requests, install groups) are part of Nuon's hosted service; roll out with `nuon installs deploy`"
                }
            };
            if let Err(e) = DeTable::parse(&file.text) {
                let at = e.span().map(|s| s.start).unwrap_or(0);
                d.push(file.diag(at, format!("TOML syntax error: {}", e.message().trim())));
            }
            d.push(file.warn(
                &(0..0),
                format!("{name} cannot take effect here: {why}; it is read and ignored"),
            ));
            continue;
        }
        let known_place = FILES.contains(&name) || dir.is_some_and(|d| DIRS.contains(&d));
        if !known_place || !name.ends_with(".toml") {
            let hint = did_you_mean(name, FILES.iter().copied());
            let message = if hint.is_empty() {
                format!(
                    "unknown config file {name:?} is ignored: an app config has {} and {}/",
                    FILES.join(", "),
                    DIRS.join("/, ")
                )
            } else {
                format!("unknown config file {name:?} is ignored{hint}")
            };
            d.push(file.warn(&(0..0), message));
            continue;
        }
        if dir == Some("inputs") && has_inputs_file {
            d.push(file.diag(
                0,
                "inputs are given both in inputs.toml and in inputs/: keep one of the two",
            ));
            continue;
        }
        if dir == Some("secrets") && has_secrets_file {
            d.push(file.diag(
                0,
                "secrets are given both in secrets.toml and in secrets/: keep one of the two",
            ));
            continue;
        }
        let (table, errors) = DeTable::parse_recoverable(&file.text);
        if !errors.is_empty() {
            for e in errors {
                let at = e.span().map(|s| s.start).unwrap_or(0);
                let msg = e
                    .message()
                    .trim()
                    .lines()
                    .next()
                    .unwrap_or("invalid TOML")
                    .to_owned();
                d.push(file.diag(at, format!("TOML syntax error: {msg}")));
            }
            continue;
        }
        let table = table.into_inner();
        let at = match dir {
            Some(dir) => format!("{dir}/*.toml"),
            None => name.to_owned(),
        };
        let r = Reader::new(file, &table, at);
        match (name, dir) {
            ("metadata.toml", _) => loaded.metadata = metadata(r, &mut d),
            ("sandbox.toml", _) => loaded.sandbox = Some(sandbox(r, i, &mut d)),
            ("runner.toml", _) => {
                let mut refs = Vec::new();
                loaded.runner = runner(r, &mut d, &mut refs);
                loaded.job_images = Some((i, refs));
            }
            ("inputs.toml", _) => inputs(r, i, &mut d, &mut loaded),
            ("secrets.toml", _) => {
                let mut r = r;
                for s in r.tables(&mut d, "secret") {
                    loaded.secrets.push(super::secrets::secret(s, i, &mut d));
                }
                super::secrets::hold_all(&mut r, &mut d, &mut loaded.secrets);
                r.finish(&mut d, &[], |_| None);
            }
            (_, Some("secrets")) => loaded.secrets.push(super::secrets::secret(r, i, &mut d)),
            (_, Some("inputs")) => {
                let mut r = r;
                loaded.inputs.push(input(&mut r, i, &mut d));
                r.finish(&mut d, &[], |_| None);
            }
            (_, Some("input_groups")) => {
                let mut r = r;
                loaded.groups.push(group(&mut r, i, &mut d));
                r.finish(&mut d, &[], |_| None);
            }
            (
                "stack.toml"
                | "permissions.toml"
                | "break_glass.toml"
                | "operation_roles.toml"
                | "policies.toml"
                | "kubernetes_contexts.toml"
                | "installer.toml",
                _,
            )
            | (
                _,
                Some(
                    "permissions" | "break_glass" | "policies" | "kubernetes_contexts" | "runbooks",
                ),
            ) => super::platform::load(r, i, name, &mut d, &mut loaded.platform),
            (_, Some("components")) => {
                // Nuon's (deprecated) job components: read, and answered
                // with a warning; they are not deployed here.
                let kind = table.get("type").and_then(|t| match t.get_ref() {
                    toml::de::DeValue::String(s) => Some(s.to_string()),
                    _ => None,
                });
                let why = match kind.as_deref() {
                    Some("job") => {
                        Some("job components are deprecated in Nuon; run the image from an action")
                    }
                    _ => None,
                };
                match why {
                    Some(why) => d.push(file.warn(
                        &(0..0),
                        format!(
                            "component type {:?} cannot take effect here ({why}): the component is read and not deployed",
                            kind.unwrap_or_default()
                        ),
                    )),
                    None => loaded.components.push(component(r, i, &mut d)),
                }
            }
            (_, Some("actions")) => loaded.actions.push(super::actions::action(r, i, &mut d)),
            (_, Some("installs")) => loaded
                .installs
                .push(super::install_file::install(r, i, &mut d)),
            _ => unreachable!("every known place is matched"),
        }
    }
    if !files.iter().any(|f| f.name == "metadata.toml") {
        d.push(Diagnostic {
            file: "metadata.toml".into(),
            line: 1,
            col: 1,
            warning: false,
            message: format!(
                "missing metadata.toml: every app config has one, with version = \"{}\"",
                super::CONFIG_VERSION
            ),
        });
    }
    // As in Nuon, an empty permissions boundary is none.
    let perms = &mut loaded.platform.permissions;
    for r in perms.roles.iter_mut().chain(perms.break_glass.iter_mut()) {
        r.permissions_boundary = r
            .permissions_boundary
            .take()
            .filter(|b| !b.trim().is_empty());
    }
    super::limits::report_long_role_names(files, &loaded.platform, loaded.runner.as_ref(), &mut d);
    let mut config = check::cross_check(files, loaded, &mut d);
    if let Some(c) = &mut config {
        super::runbooks::inline_actions(c, &mut d);
    }
    let d = d.finish();
    if d.has_errors() {
        (None, d)
    } else {
        (config, d)
    }
}

fn metadata(mut r: Reader<'_, '_>, d: &mut Diagnostics) -> Option<Metadata> {
    let version = r.req_str(d, "version");
    // Nuon reads a directory the same whatever the version says (it
    // documents v1 and v2, and takes any text): so does this project.
    if let Some(v) = &version
        && !super::CONFIG_VERSIONS.contains(&v.text.as_str())
    {
        d.push(r.file.warn(
            &v.span,
            format!(
                "config version {:?} is not one Nuon documents (\"v1\", \"v2\"): read as \"{}\"",
                v.text,
                super::CONFIG_VERSION
            ),
        ));
    }
    let m = Metadata {
        version: version.map(|v| v.text).unwrap_or_default(),
        display_name: text(r.str(d, "display_name")),
        description: text(r.str(d, "description")),
        readme: text(r.str(d, "readme")),
    };
    r.finish(
        d,
        &[
            (
                "slack_webhook_url",
                "notifications are not sent to Slack by this platform",
            ),
            (
                "label_colors",
                "labels are shown in Nuon's dashboard; this platform keeps none",
            ),
            (
                "default_labels",
                "labels are shown in Nuon's dashboard; this platform keeps none",
            ),
            ("onboarding", "it configures Nuon's hosted onboarding pages"),
            (
                "customer_managed",
                "it describes runner images for Nuon's customer-managed mode",
            ),
        ],
        |_| None,
    );
    Some(m)
}

fn sandbox(mut r: Reader<'_, '_>, file: usize, d: &mut Diagnostics) -> Item<Sandbox> {
    let mut item = Item::new(file);
    // `type = "terraform"` (the default) or `"pulumi"`, as in Nuon.
    let kind = r.str(d, "type");
    let is_pulumi = match &kind {
        Some(k) if k.text == "pulumi" => true,
        Some(k) if k.text == "terraform" => false,
        Some(k) => {
            d.push(r.file.at(
                &k.span,
                format!(
                    "sandbox type {:?} is not terraform or pulumi{}",
                    k.text,
                    did_you_mean(&k.text, ["terraform", "pulumi"])
                ),
            ));
            false
        }
        None => false,
    };
    let (tf, pulumi) = if is_pulumi {
        let p = pulumi(&mut r, d, "pulumi_config", &mut item.strings);
        (None, p)
    } else {
        (terraform_version(&mut r, d), None)
    };
    let program_ok = tf.is_some() || pulumi.is_some();
    let src = source(&mut r, d, &["path", "public_repo", "git"], true);
    let vars = r.map(d, "vars", &mut item.strings);
    let env_vars = r.str_map(d, "env_vars", &mut item.strings);
    let var_files = var_files(&mut r, d, "var_file", &mut item.strings);
    if is_pulumi {
        for key in ["vars", "var_file", "terraform_version"] {
            if let Some(v) = r.get(key) {
                d.push(r.file.warn(
                    &v.span(),
                    format!(
                        "{key} is for Terraform sandboxes: a Pulumi program reads [pulumi_config]"
                    ),
                ));
            }
        }
    }
    skip_noops(&mut r, d);
    let drift_schedule = drift_schedule(&mut r, d);
    let operation_roles = operation_roles(
        &mut r,
        d,
        &["provision", "deprovision", "reprovision"],
        "the sandbox",
        &mut item.strings,
    );
    let max_auto_retries = max_auto_retries(&mut r, d);
    let auto_approve_on_policies_passing = r
        .bool(d, "auto_approve_on_policies_passing")
        .unwrap_or(false);
    r.finish(d, NUON_ONLY_COMPONENT_KEYS, |k| match k {
        "runtime" | "pulumi_version" | "pulumi_config" => {
            Some("is for Pulumi sandboxes (type = \"pulumi\")".to_string())
        }
        "toggleable" | "default_enabled" => {
            Some("is a component's key: the sandbox is never turned off".to_string())
        }
        _ => None,
    });
    if let (true, Some(source)) = (program_ok, src) {
        item.value = Some(Sandbox {
            terraform_version: text(tf),
            pulumi,
            source,
            vars,
            env_vars,
            var_files,
            drift_schedule,
            operation_roles,
            max_auto_retries,
            auto_approve_on_policies_passing,
        });
    }
    item
}

fn runner(
    mut r: Reader<'_, '_>,
    d: &mut Diagnostics,
    image_refs: &mut Vec<Located>,
) -> Option<RunnerSettings> {
    let mut strings = Vec::new();
    let runner_type = r.req_str(d, "runner_type");
    const TYPES: &[&str] = &[
        "aws",
        "azure",
        "gcp",
        "local",
        "aws-ecs",
        "aws-eks",
        "azure-aks",
        "azure-acs",
    ];
    if let Some(t) = &runner_type
        && !TYPES.contains(&t.text.as_str())
    {
        d.push(r.file.at(
            &t.span,
            format!(
                "runner_type {:?} is not one of {}{}",
                t.text,
                TYPES.join(", "),
                did_you_mean(&t.text, TYPES.iter().copied())
            ),
        ));
    }
    let helm_driver = r.str(d, "helm_driver");
    if let Some(h) = &helm_driver
        && !["configmap", "secret"].contains(&h.text.as_str())
    {
        d.push(r.file.at(
            &h.span,
            format!("helm_driver {:?} is not configmap or secret", h.text),
        ));
    }
    let settings = RunnerSettings {
        runner_type: runner_type.map(|t| t.text).unwrap_or_default(),
        helm_driver: text(helm_driver),
        init_script_url: text(r.str(d, "init_script_url")),
        env_vars: r.str_map(d, "env_vars", &mut strings),
        instance_type: text(r.str(d, "instance_type")),
        job_images: r.str_map(d, "job_images", image_refs),
    };
    for (kind, component) in &settings.job_images {
        if super::JOB_IMAGE_KINDS.contains(&kind.as_str()) {
            continue;
        }
        let span = image_refs
            .iter()
            .find(|l| &l.text == component)
            .map_or(0..0, |l| l.span.clone());
        d.push(r.file.at(
            &span,
            format!(
                "job_images.{kind}: not a job kind that runs in a container; one of {}{}",
                super::JOB_IMAGE_KINDS.join(", "),
                did_you_mean(kind, super::JOB_IMAGE_KINDS.iter().copied())
            ),
        ));
    }
    r.finish(
        d,
        &[
            ("source", "runner settings are read from this file"),
            (
                "phone_home_script_url",
                "the install stack's runner phones home itself: no script is run",
            ),
            (
                "runner_api_url",
                "runners are given the control plane's address when they start",
            ),
            (
                "public_api_url",
                "runners are given the control plane's address when they start",
            ),
        ],
        |k| (k == "env_var").then(|| "is Nuon's old form: use an [env_vars] table".to_string()),
    );
    Some(settings)
}

fn inputs(mut r: Reader<'_, '_>, file: usize, d: &mut Diagnostics, loaded: &mut Loaded) {
    for mut g in r.tables(d, "group") {
        let item = group(&mut g, file, d);
        g.finish(d, &[], |_| None);
        loaded.groups.push(item);
    }
    for mut t in r.tables(d, "input") {
        let item = input(&mut t, file, d);
        t.finish(d, &[], |_| None);
        loaded.inputs.push(item);
    }
    r.finish(
        d,
        &[
            ("source", ": inputs are read from this file"),
            ("sources", ": inputs are read from this file"),
        ],
        |k| {
            matches!(k, "groups" | "inputs").then(|| {
                format!(
                    "is not a section of inputs.toml: write [[{}]]",
                    k.trim_end_matches('s')
                )
            })
        },
    );
}

/// An input group: a `[[group]]`, or one file of `input_groups/`.
fn group(g: &mut Reader<'_, '_>, file: usize, d: &mut Diagnostics) -> Item<InputGroup> {
    let mut item = Item::new(file);
    let name = g.name(d, "name");
    let display_name = text(g.str(d, "display_name"));
    let description = text(g.str(d, "description"));
    item.value = name.as_ref().map(|n| InputGroup {
        name: n.text.clone(),
        display_name,
        description,
    });
    item.name = name;
    item
}

/// An input: an `[[input]]`, or one file of `inputs/`.
fn input(t: &mut Reader<'_, '_>, file: usize, d: &mut Diagnostics) -> Item<InputDecl> {
    let mut item = Item::new(file);
    let name = t.name(d, "name");
    let display_name = text(t.str(d, "display_name"));
    let description = text(t.str(d, "description"));
    let group = t.str(d, "group");
    let required = t.bool(d, "required").unwrap_or(false);
    let sensitive = t.bool(d, "sensitive").unwrap_or(false);
    let internal = t.bool(d, "internal").unwrap_or(false);
    let user_configurable = t.bool(d, "user_configurable").unwrap_or(false);
    let ty = match t.str(d, "type") {
        None => Some(InputType::String),
        Some(v) if v.text.is_empty() => Some(InputType::String),
        Some(v) => match InputType::parse(&v.text) {
            Some(ty) => Some(ty),
            None => {
                d.push(t.file.at(
                    &v.span,
                    format!(
                        "input type {:?} is not one of {}{}",
                        v.text,
                        InputType::ALL.join(", "),
                        did_you_mean(&v.text, InputType::ALL)
                    ),
                ));
                None
            }
        },
    };
    let mut default = None;
    let mut ok = ty.is_some();
    if let Some((raw, v)) = t.any(d, "default")
        && let Some(ty) = ty
    {
        // Nuon writes `required = true` with `default = ""`: an empty
        // default of a required input is no default.
        let empty = raw.as_str() == Some("");
        if !(required && empty) {
            match ty.coerce(&raw) {
                Ok(value) => default = Some(value),
                Err(e) => {
                    ok = false;
                    let n = name.as_ref().map(|n| n.text.as_str()).unwrap_or("");
                    d.push(t.file.at(&v.span(), format!("default of input {n:?}: {e}")));
                }
            }
        }
    }
    if let Some(g) = group.clone() {
        item.refs.push(g);
    }
    if let (Some(n), Some(ty), true) = (&name, ty, ok) {
        item.value = Some(InputDecl {
            name: n.text.clone(),
            display_name,
            description,
            group: group.map(|g| g.text),
            default,
            required,
            sensitive,
            internal,
            user_configurable,
            ty,
        });
    }
    item.name = name;
    item
}

/// The config format's keys as the loader reads them, table by table,
/// from reading `configs`: a table's keys are listed once any config has
/// one such table (the reference is made of it; see [`KeyTable`]).
pub fn key_table<'a>(configs: impl IntoIterator<Item = &'a [SourceFile]>) -> KeyTable {
    super::reader::capture_keys(|| {
        for files in configs {
            let _ = parse(files);
        }
    })
}

fn component(mut r: Reader<'_, '_>, file: usize, d: &mut Diagnostics) -> Item<Component> {
    let mut item = Item::new(file);
    let name = r.name(d, "name");
    let kind_v = r.req_str(d, "type");
    let kind = kind_v.as_ref().and_then(|k| {
        let kind = ComponentKind::parse(&k.text);
        if kind.is_none() {
            let message = format!(
                "unknown component type {:?}{} (supported: {})",
                k.text,
                did_you_mean(&k.text, ComponentKind::ALL),
                ComponentKind::ALL.join(", ")
            );
            d.push(r.file.at(&k.span, message));
        }
        kind
    });
    item.deps = r.str_list(d, "dependencies");
    let build_timeout = duration(&mut r, d, "build_timeout");
    let deploy_timeout = deploy_timeout(&mut r, d);
    let max_auto_retries = max_auto_retries(&mut r, d);
    let auto_approve_on_policies_passing = r
        .bool(d, "auto_approve_on_policies_passing")
        .unwrap_or(false);
    let (toggleable, default_enabled) = toggles(&mut r, d);
    let drift_schedule = drift_schedule(&mut r, d);
    let operation_roles = operation_roles(
        &mut r,
        d,
        &["deploy", "teardown"],
        "a component",
        &mut item.strings,
    );
    skip_noops(&mut r, d);
    item.context = r.str(d, "kubernetes_context");
    let take_ownership = r.bool(d, "take_ownership").unwrap_or(false);
    let health = super::health::read(&mut r, d, &mut item.after_apply);
    let labels = r.str_map(d, "labels", &mut Vec::new());
    let readme = text(r.str(d, "readme"));
    let Some(kind) = kind else {
        // Without a type the other keys cannot be checked; the name still counts.
        r.know(KIND_KEYS);
        r.finish(d, NUON_ONLY_COMPONENT_KEYS, |_| None);
        item.name = name;
        return item;
    };
    let (spec, src) = super::kinds::read(kind, &mut r, d, &mut item.strings, take_ownership);
    let health = match health {
        Some(_) if kind == ComponentKind::ContainerImage => {
            if let Some(v) = r.get("health") {
                d.push(r.file.warn(
                    &v.span(),
                    "health cannot take effect on a container_image (it is deployed by a copy into the install's registry, nothing serves to probe): probe it from the component that runs it",
                ));
            }
            None
        }
        health => health,
    };
    let kind_name = kind.as_str();
    r.finish(d, NUON_ONLY_COMPONENT_KEYS, |k| {
        let kinds = component_kinds_of(k);
        (!kinds.is_empty() && !kinds.contains(&kind_name)).then(|| {
            format!(
                "belongs to {} components, not {kind_name}",
                kinds.join(" and ")
            )
        })
    });
    if let (Some(n), Some(spec), Some(source)) = (&name, spec, src) {
        item.value = Some(Component {
            name: n.text.clone(),
            spec,
            dependencies: item.deps.iter().map(|l| l.text.clone()).collect(),
            depends_on: Vec::new(),
            source,
            readme,
            build_timeout,
            deploy_timeout,
            max_auto_retries,
            auto_approve_on_policies_passing,
            toggleable,
            default_enabled,
            drift_schedule,
            operation_roles,
            kubernetes_context: item.context.as_ref().map(|k| k.text.clone()),
            health,
            labels,
        });
    }
    item.name = name;
    item
}
