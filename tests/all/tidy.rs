//! Tidy: the architecture's lines that code review would otherwise have to
//! remember (rust-analyzer's `tidy.rs` habit). Each check reads the source
//! tree as text and names every place that breaks its rule.

use std::path::{Path, PathBuf};

use nuon_tests::repo_root;

/// Every file under `dir` (relative to the repo root) ending in `ext`.
fn files(dir: &str, ext: &str) -> Vec<PathBuf> {
    fn walk(dir: &Path, ext: &str, out: &mut Vec<PathBuf>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                if p.file_name().is_some_and(|n| n == "target") {
                    continue;
                }
                walk(&p, ext, out);
            } else if p.extension().is_some_and(|x| x == ext) {
                out.push(p);
            }
        }
    }
    let mut out = Vec::new();
    walk(&repo_root().join(dir), ext, &mut out);
    out.sort();
    out
}

fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

fn rel(p: &Path) -> String {
    p.strip_prefix(repo_root())
        .unwrap_or(p)
        .display()
        .to_string()
}

/// The names of the workspace crates a `Cargo.toml` depends on, in its
/// `[dependencies]` (not dev or build dependencies).
fn our_dependencies(manifest: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut in_deps = false;
    for line in manifest.lines() {
        let line = line.trim();
        if line.starts_with('[') {
            in_deps = line == "[dependencies]";
            continue;
        }
        if !in_deps {
            continue;
        }
        let name = line.split(['=', '.', ' ']).next().unwrap_or("");
        if name.starts_with("nuon-") {
            out.push(name.to_owned());
        }
    }
    out
}

#[test]
fn crates_depend_one_way() {
    // Each library crate, and the workspace crates it may depend on.
    let allowed: &[(&str, &[&str])] = &[
        ("nuon-template", &[]),
        ("nuon-core", &["nuon-template"]),
        ("nuon-appconfig", &["nuon-core"]),
        ("nuon-client", &["nuon-core", "nuon-appconfig"]),
        ("nuon-plugins", &["nuon-core"]),
        (
            "nuon-runner-lib",
            &["nuon-core", "nuon-client", "nuon-plugins"],
        ),
        ("nuon-control", &["nuon-core", "nuon-appconfig"]),
    ];
    let mut wrong = Vec::new();
    for (krate, may) in allowed {
        let manifest = read(&repo_root().join(krate).join("Cargo.toml"));
        for dep in our_dependencies(&manifest) {
            if !may.contains(&dep.as_str()) {
                wrong.push(format!(
                    "{krate} depends on {dep} (it may use only {may:?})"
                ));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "dependencies must point one way (ARCHITECTURE.md, invariants):\n{}",
        wrong.join("\n")
    );
}

/// The packages `krate` links, by `cargo tree` (normal dependencies, for
/// this platform), with `flags` (`--no-default-features`, ...).
fn linked_packages(krate: &str, flags: &[&str]) -> Vec<String> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = std::process::Command::new(cargo)
        .current_dir(repo_root())
        .args([
            "tree", "--locked", "-p", krate, "-e", "normal", "--prefix", "none",
        ])
        .args(flags)
        .output()
        .expect("cargo tree runs");
    assert!(
        out.status.success(),
        "cargo tree -p {krate} {flags:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut names: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .map(str::to_owned)
        .collect();
    names.sort();
    names.dedup();
    names
}

#[test]
fn the_client_links_a_policy_engine_only_with_its_feature() {
    let engine = "regorus";
    let bare = linked_packages("nuon-client", &["--no-default-features"]);
    assert!(
        bare.iter().any(|p| p == "nuon-core") && !bare.iter().any(|p| p == engine),
        "nuon-client without its `policies` feature links no policy engine (nuon-core's `policies` feature off): {bare:?}"
    );
    let full = linked_packages("nuon-client", &[]);
    assert!(
        full.iter().any(|p| p == engine),
        "nuon-client's default features check an app directory's policies: {full:?}"
    );
    // The crates that evaluate policies ask for the feature themselves.
    for krate in ["nuon-control", "nuon-plugins", "nuon-cli"] {
        assert!(
            linked_packages(krate, &["--no-default-features"])
                .iter()
                .any(|p| p == engine),
            "{krate} evaluates policies: it asks for nuon-core's `policies` feature"
        );
    }
}

#[test]
fn every_crate_takes_the_workspace_lints_and_they_ask_for_docs() {
    let root = read(&repo_root().join("Cargo.toml"));
    assert!(
        root.contains("missing_docs = \"warn\"") || root.contains("missing_docs = \"deny\""),
        "the workspace lints must ask for docs on every public item (missing_docs)"
    );
    let mut manifests = files("", "toml");
    manifests.retain(|p| {
        p.file_name().is_some_and(|n| n == "Cargo.toml") && p != &repo_root().join("Cargo.toml")
    });
    let missing: Vec<_> = manifests
        .iter()
        .filter(|p| !read(p).contains("[lints]\nworkspace = true"))
        .map(|p| rel(p))
        .collect();
    assert!(
        missing.is_empty(),
        "these crates do not take the workspace lints ([lints] workspace = true), so nothing checks their docs or unsafe code:\n{}",
        missing.join("\n")
    );
}

#[test]
fn the_store_stays_small_by_domain() {
    let mut long = Vec::new();
    for p in files("nuon-control/src/store", "rs") {
        let n = read(&p).lines().count();
        if n > 800 {
            long.push(format!("{}: {n} lines", rel(&p)));
        }
    }
    assert!(
        long.is_empty(),
        "no file of the store over 800 lines: split it by domain\n{}",
        long.join("\n")
    );
    // Each store trait: a handful of methods.
    let mut large = Vec::new();
    for p in files("nuon-control/src/store", "rs") {
        let text = read(&p);
        let mut current: Option<(String, usize)> = None;
        for line in text.lines() {
            if let Some(rest) = line.strip_prefix("pub trait ") {
                let name = rest.split([':', ' ', '<']).next().unwrap_or("").to_owned();
                current = Some((name, 0));
            } else if line == "}" {
                if let Some((name, n)) = current.take()
                    && n >= 15
                {
                    large.push(format!("{}: {name} has {n} methods", rel(&p)));
                }
            } else if let Some((_, n)) = current.as_mut()
                && (line.starts_with("    async fn ") || line.starts_with("    fn "))
            {
                *n += 1;
            }
        }
    }
    assert!(
        large.is_empty(),
        "a store trait has under 15 methods: split it by domain\n{}",
        large.join("\n")
    );
}

/// The store traits still written once per database, each with why: the
/// SQL the two spell differently. Every other trait is written once, over
/// `Sql` (`nuon-control/src/store/sql.rs`).
const PER_DIALECT: &[(&str, &str)] = &[
    ("Sql", "how each database runs a statement and a change"),
    (
        "QueueStore",
        "claims: FOR UPDATE SKIP LOCKED and LISTEN/NOTIFY, or the one writer's group commit",
    ),
    (
        "MaintenanceStore",
        "the leader's session lock, rescue under FOR UPDATE SKIP LOCKED, pruning with USING or across an attached database, gauges from PRAGMA or FILTER",
    ),
];

/// Where the bytes a signature covers are made: one way, for every type
/// signed (`nuon_core::Signed`, its domain first).
const SIGNED_BYTES_HOME: &str = "nuon-core/src/signing.rs";

/// Signed bytes made anywhere but in `Signed`: a `signed_bytes` of its own.
fn signed_bytes_elsewhere(files: &[(String, String)]) -> Vec<String> {
    let others: Vec<(String, String)> = files
        .iter()
        .filter(|(path, _)| path != SIGNED_BYTES_HOME)
        .cloned()
        .collect();
    code_naming(&others, &["fn signed_bytes("])
}

#[test]
fn signed_bytes_are_made_one_way() {
    let found = signed_bytes_elsewhere(&sources(&CAPPED));
    assert!(
        found.is_empty(),
        "bytes to sign made outside nuon_core::Signed: implement `Signed` (a domain of its own, \
         then `signed_body`)\n{}",
        found.join("\n")
    );
}

/// Store traits implemented for `SqliteStore` or `PostgresStore` and not
/// in `allowed`.
fn traits_per_dialect(files: &[(String, String)], allowed: &[(&str, &str)]) -> Vec<String> {
    let mut found = Vec::new();
    for (path, text) in files {
        for (i, line) in shipped(text).lines().enumerate() {
            let Some(rest) = line.strip_prefix("impl ") else {
                continue;
            };
            let Some((name, store)) = rest.split_once(" for ") else {
                continue;
            };
            let store = store.trim_end_matches(" {");
            let name = name.rsplit("::").next().unwrap_or(name);
            if ["SqliteStore", "PostgresStore"].contains(&store)
                && !["Drop", "Debug"].contains(&name)
                && !allowed.iter().any(|(a, _)| *a == name)
            {
                found.push(format!("{path}:{}: {}", i + 1, line.trim()));
            }
        }
    }
    found
}

#[test]
fn store_traits_are_written_once_for_both_databases() {
    let found = traits_per_dialect(&sources(&["nuon-control/src/store"]), PER_DIALECT);
    assert!(
        found.is_empty(),
        "a store trait implemented per database: write it once, `impl<S: Sql + 'static> Trait for S` \
         (SQL both run alike, with a `Dialect` method for what they spell differently), or say in \
         tidy.rs's PER_DIALECT why it cannot be\n{}",
        found.join("\n")
    );
}

/// The `.rs` files under `dirs` (none under a `tests/` directory), as
/// `(path from the repo root, text)`: what the rules below read.
fn sources(dirs: &[&str]) -> Vec<(String, String)> {
    dirs.iter()
        .flat_map(|d| files(d, "rs"))
        .map(|p| (rel(&p), read(&p)))
        .filter(|(path, _)| !path.contains("/tests/"))
        .collect()
}

/// A file's text before its first `#[cfg(test)]`: what ships.
fn shipped(text: &str) -> &str {
    text.find("\n#[cfg(test)]").map_or(text, |at| &text[..at])
}

/// A file's whole text.
fn whole(text: &str) -> &str {
    text
}

/// Every line of `part` of each file holding one of `needles`, as
/// `path:line: text`.
fn lines_with(
    files: &[(String, String)],
    part: fn(&str) -> &str,
    needles: &[impl AsRef<str>],
) -> Vec<String> {
    let mut found = Vec::new();
    for (path, text) in files {
        for (i, line) in part(text).lines().enumerate() {
            if needles.iter().any(|s| line.contains(s.as_ref())) {
                found.push(format!("{path}:{}: {}", i + 1, line.trim()));
            }
        }
    }
    found
}

/// Every line whose code (before a `//`) names one of `words`.
fn code_naming(files: &[(String, String)], words: &[&str]) -> Vec<String> {
    let mut found = Vec::new();
    for (path, text) in files {
        for (i, line) in text.lines().enumerate() {
            let code = line.split("//").next().unwrap_or("");
            if words.iter().any(|w| code.contains(w)) {
                found.push(format!("{path}:{}: {}", i + 1, line.trim()));
            }
        }
    }
    found
}

/// The crates that serve and call the APIs, where states are read.
const API_CRATES: [&str; 4] = [
    "nuon-control/src",
    "bins/nuon/src",
    "nuon-client/src",
    "nuon-runner-lib/src",
];

/// The statuses that are workflow or step states and nothing else.
const WORKFLOW_ONLY: [&str; 4] = [
    "\"waiting_approval\"",
    "\"cancelling\"",
    "\"partial\"",
    "\"denied\"",
];

fn workflow_state_spellings(files: &[(String, String)]) -> Vec<String> {
    lines_with(files, whole, &WORKFLOW_ONLY)
}

#[test]
fn workflow_and_step_states_are_spelled_only_in_their_enums() {
    let found = workflow_state_spellings(&sources(&API_CRATES[..3]));
    assert!(
        found.is_empty(),
        "use WorkflowStatus / StepStatus (nuon_core::workflow), not their spelling:\n{}",
        found.join("\n")
    );
}

/// The spellings that name nothing but an install's state, its approval
/// mode, a drift status, a health or sync status, a webhook delivery's
/// status or a runner's (`active`, `failed`, `created`, `healthy` or
/// `pending` name other things too).
const MODEL_ONLY: [&str; 17] = [
    "\"provisioning\"",
    "\"deploying\"",
    "\"tearing_down\"",
    "\"torn_down\"",
    "\"deprovisioning\"",
    "\"deprovisioned\"",
    "\"approve-all\"",
    "\"prompt\"",
    "\"in_sync\"",
    "\"never_checked\"",
    "\"check_failed\"",
    "\"not_deployed\"",
    "\"progressing\"",
    "\"out_of_sync\"",
    "\"delivered\"",
    "\"never_seen\"",
    "\"connected\"",
];

fn model_state_spellings(files: &[(String, String)]) -> Vec<String> {
    lines_with(files, shipped, &MODEL_ONLY)
}

#[test]
fn install_states_and_approval_modes_are_spelled_only_in_their_enums() {
    let found = model_state_spellings(&sources(&API_CRATES));
    assert!(
        found.is_empty(),
        "use InstallState / ApprovalMode / DriftStatus / HealthStatus / SyncStatus / DeliveryStatus / RunnerStatus (nuon_core::model), not their spelling:\n{}",
        found.join("\n")
    );
}

/// Every spelling `ErrorCode` declares, read from its declaration.
fn error_code_spellings() -> Vec<String> {
    let decl = read(&repo_root().join("nuon-core/src/wire/errors.rs"));
    decl.lines()
        .filter_map(|l| {
            let (_, rest) = l.trim().split_once(" = \"")?;
            Some(rest.strip_suffix("\",")?.to_owned())
        })
        .collect()
}

fn error_code_uses(files: &[(String, String)], codes: &[String]) -> Vec<String> {
    // `csrf` is also the dashboard forms' field name.
    let banned: Vec<String> = codes
        .iter()
        .filter(|c| *c != "csrf")
        .map(|c| format!("\"{c}\""))
        .collect();
    lines_with(files, shipped, &banned)
}

#[test]
fn api_error_codes_are_spelled_only_in_their_enum() {
    let codes = error_code_spellings();
    assert!(
        codes.len() > 50,
        "ErrorCode's spellings not found: {codes:?}"
    );
    let found = error_code_uses(&sources(&API_CRATES), &codes);
    assert!(
        found.is_empty(),
        "use ErrorCode (nuon_core::wire), not its spelling:\n{}",
        found.join("\n")
    );
}

/// What the service layer may not name: it takes a caller and a request.
const ABOVE_THE_SERVICE: [&str; 5] = [
    "crate::api",
    "super::api",
    "crate::server",
    "axum::extract",
    "axum::Json",
];

#[test]
fn the_service_layer_sits_below_the_api() {
    let found = code_naming(&sources(&["nuon-control/src/service"]), &ABOVE_THE_SERVICE);
    assert!(
        found.is_empty(),
        "the service layer takes a Caller and a request and answers a response; the API's handlers and the dashboard's forms adapt HTTP to it, never the other way (ARCHITECTURE.md, the service layer)\n{}",
        found.join("\n")
    );
}

/// The Control API's modules of operations: the dashboard reaches what
/// they do through the service, never through their handlers.
const API_OPERATION_MODULES: [&str; 18] = [
    "apps",
    "control",
    "drift",
    "groups",
    "health",
    "installers",
    "lifecycle",
    "ops",
    "orgs",
    "people",
    "releases",
    "rollouts",
    "runner",
    "runner_releases",
    "stack",
    "state",
    "toggles",
    "workflows",
];

/// What the dashboard may still take from the API's modules, and why.
const DASHBOARD_FROM_THE_API: &[(&str, &str)] = &[(
    "control::follow",
    "a job log's live follower: a stream both the API and the dashboard's page hold open, not an operation",
)];

/// Every line of the dashboard (`nuon-control/src/api/web/`) that names
/// an API module of operations (as `crate::api::M::`, or by `super::`
/// from where the file is) for something not in `allowed`.
fn dashboard_past_the_service(files: &[(String, String)], allowed: &[(&str, &str)]) -> Vec<String> {
    const WEB: &str = "nuon-control/src/api/web/";
    let mut found = Vec::new();
    for (path, text) in files {
        let Some(inside) = path.strip_prefix(WEB) else {
            continue;
        };
        // From `web/mod.rs`, `super` is the API; one `super` more for
        // each directory or file below it.
        let depth = inside.matches('/').count() + usize::from(!inside.ends_with("mod.rs"));
        let up = "super::".repeat(depth + 1);
        for (i, line) in shipped(text).lines().enumerate() {
            let code = line.split("//").next().unwrap_or("");
            let names = API_OPERATION_MODULES.iter().any(|m| {
                [format!("crate::api::{m}::"), format!("{up}{m}::")]
                    .iter()
                    .any(|p| {
                        code.match_indices(p.as_str()).any(|(at, _)| {
                            // `super::super::x::` is not `super::x::`.
                            let before = &code[..at];
                            let whole = !before.ends_with("super::");
                            let rest = &code[at + p.len() - m.len() - 2..];
                            whole && !allowed.iter().any(|(item, _)| rest.starts_with(item))
                        })
                    })
            });
            if names {
                found.push(format!("{path}:{}: {}", i + 1, line.trim()));
            }
        }
    }
    found
}

/// The dashboard's files that read the store themselves, each with why:
/// what they read belongs to no member of the org acting.
const DASHBOARD_STORE_READERS: &[(&str, &str)] = &[
    (
        "nuon-control/src/api/web/mod.rs",
        "sessions: the signed-in person's cookie looked up, made and ended, before there is a caller",
    ),
    (
        "nuon-control/src/api/web/installer/",
        "the customer's installer: an invitation's or a stack template's one-time token is what calls, not a member of the org",
    ),
];

/// Every line of the dashboard outside [`DASHBOARD_STORE_READERS`] that
/// reads the store itself (`state.store`, or `.store` ending a line of a
/// chain) instead of through the service.
fn dashboard_store_reads(files: &[(String, String)], allowed: &[(&str, &str)]) -> Vec<String> {
    let pages: Vec<(String, String)> = files
        .iter()
        .filter(|(path, _)| path.starts_with("nuon-control/src/api/web/"))
        .filter(|(path, _)| !allowed.iter().any(|(p, _)| path.starts_with(p)))
        .map(|(path, text)| (path.clone(), shipped(text).to_owned()))
        .collect();
    code_naming_whole(&pages, &[".store"])
}

#[test]
fn the_dashboard_reads_and_acts_through_the_service() {
    let found = dashboard_past_the_service(
        &sources(&["nuon-control/src/api/web"]),
        DASHBOARD_FROM_THE_API,
    );
    assert!(
        found.is_empty(),
        "the dashboard's pages read, and its forms act, through the service (`state.services()`), as the API's handlers do: calling a handler rebuilds its extractors and misses what the service records (ARCHITECTURE.md, the service layer)\n{}",
        found.join("\n")
    );
    let found = dashboard_store_reads(
        &sources(&["nuon-control/src/api/web"]),
        DASHBOARD_STORE_READERS,
    );
    assert!(
        found.is_empty(),
        "the dashboard's pages read through the service (`state.services()`), which masks what the API masks and scopes to the caller, not from the store\n{}",
        found.join("\n")
    );
}

/// Handlers that still do their operation's work themselves, each with
/// why: the list only shrinks (issue "Structure, second floor").
const HANDLERS_NOT_YET_IN_THE_SERVICE: &[(&str, &str, &str)] = &[
    (
        "people.rs",
        "callback",
        "the OpenID Connect flow's return: a session made from the provider's answer, HTTP through and through",
    ),
    (
        "people.rs",
        "sign_in",
        "the OpenID Connect flow's start: a redirect to the provider",
    ),
];

/// The handlers of the Control API's operations: each name routed in the
/// `fn ops()` of a file of `nuon-control/src/api/`, with its text.
fn operation_handlers(files: &[(String, String)]) -> Vec<(String, String, String)> {
    let mut out = Vec::new();
    for (path, text) in files {
        let Some(start) = text.find("fn ops() -> Vec<Op> {") else {
            continue;
        };
        let block = &text[start..text[start..].find("\n}").map_or(text.len(), |e| start + e)];
        for verb in ["get(", "post(", "put(", "patch(", "delete("] {
            for (at, _) in block.match_indices(verb) {
                let before = block[..at].chars().next_back().unwrap_or(' ');
                if before.is_alphanumeric() || before == '_' {
                    continue;
                }
                let name: String = block[at + verb.len()..]
                    .trim_start()
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                let Some(f) = text.find(&format!("async fn {name}(")) else {
                    continue;
                };
                let body = &text[f..text[f..].find("\n}").map_or(text.len(), |e| f + e)];
                out.push((path.clone(), name, body.to_owned()));
            }
        }
    }
    out
}

/// What a handler names when it does an operation's work itself.
const BELOW_THE_SERVICE: [&str; 4] = ["state.store", "state.engine", "state.keys", "state.secrets"];

/// Every handler of an operation that reaches the store, the engine, the
/// keys or the sealing box itself instead of through the service, but for
/// those `allowed` (file, handler, why); and every allowed one that no
/// longer does (the list only shrinks).
fn handlers_past_the_service(
    files: &[(String, String)],
    allowed: &[(&str, &str, &str)],
) -> Vec<String> {
    let handlers = operation_handlers(files);
    let mut found = Vec::new();
    for (path, name, body) in &handlers {
        // Code only, a method chain on one line (`state\n    .store`).
        let code = body
            .lines()
            .map(|l| l.split("//").next().unwrap_or("").trim())
            .fold(String::new(), |mut code, l| {
                if !l.starts_with('.') {
                    code.push('\n');
                }
                code.push_str(l);
                code
            });
        let past = BELOW_THE_SERVICE.iter().any(|w| code.contains(w));
        let file = path.rsplit('/').next().unwrap_or(path);
        let excused = allowed.iter().any(|(f, h, _)| *f == file && h == name);
        if past && !excused {
            found.push(format!(
                "{path}: {name} does its operation's work itself: move it into the service (`state.services()`)"
            ));
        }
        if excused && !past {
            found.push(format!(
                "{path}: {name} reaches only the service now: take it off HANDLERS_NOT_YET_IN_THE_SERVICE"
            ));
        }
    }
    found
}

#[test]
fn api_handlers_are_adapters_over_the_service() {
    let files = sources(&["nuon-control/src/api"]);
    let found = handlers_past_the_service(&files, HANDLERS_NOT_YET_IN_THE_SERVICE);
    assert!(
        found.is_empty(),
        "an operation's checks, changes and audit record live in the service; its handler adapts HTTP to it in a few lines (ARCHITECTURE.md, the service layer)\n{}",
        found.join("\n")
    );
    let handlers = operation_handlers(&files).len();
    assert!(
        handlers >= 90,
        "found {handlers} handlers of operations: is `fn ops()` still how the API declares them?"
    );
}

/// How the service may not refuse: by an HTTP status of its choosing. A
/// refusal names its code (`Error::refused`, `not_found`, `bad_request`,
/// `conflict`), and the code's status is the wire's one table.
const STATUS_CHOSEN: [&str; 1] = ["Error::api("];

/// Every line of the service that answers with a status it chose.
fn statuses_chosen(files: &[(String, String)]) -> Vec<String> {
    let mut found: Vec<String> = code_naming(files, &STATUS_CHOSEN)
        .into_iter()
        .chain(
            lines_with(files, shipped, &["StatusCode::"])
                .into_iter()
                // What a success is recorded as: one of the statuses the
                // operation's endpoint declares.
                .filter(|l| !l.contains("StatusCode::OK") && !l.contains("StatusCode::CREATED"))
                .filter(|l| !l.starts_with("nuon-control/src/service/mod.rs")),
        )
        .collect();
    found.sort();
    found.dedup();
    found
}

#[test]
fn the_service_refuses_by_code() {
    let found = statuses_chosen(&sources(&["nuon-control/src/service"]));
    assert!(
        found.is_empty(),
        "the service refuses with an error code (`Error::refused(ErrorCode::X, …)`); the HTTP status is the code's own (`ErrorCode::http_status`)\n{}",
        found.join("\n")
    );
}

/// Files allowed past 800 shipped lines, each with the most it may have:
/// the ceiling only comes down. Every one is to be split by what it is
/// about (issue: "Structure, second floor"); a new file never joins.
const LONG_FILES: &[(&str, usize)] = &[
    ("nuon-core/src/wire.rs", 1970),
    // A table: Sprig's functions, one after another.
    ("nuon-template/src/funcs/sprig.rs", 1835),
    ("nuon-control/src/api/web/mod.rs", 1491),
    // Load generators, one per scenario.
    ("benches/fleet.rs", 1553),
    ("benches/job_loop.rs", 1047),
    ("nuon-runner-lib/src/runner.rs", 1154),
    ("nuon-template/src/parse.rs", 826),
    ("nuon-appconfig/src/check.rs", 808),
    ("nuon-plugins/src/oci/registry.rs", 841),
];

/// The directories whose files keep the 800-line cap.
const CAPPED: [&str; 13] = [
    "tests/support",
    "tests/fixtures",
    "fuzz",
    "nuon-core/src",
    "nuon-appconfig/src",
    "nuon-template/src",
    "nuon-control/src",
    "nuon-client/src",
    "nuon-runner-lib/src",
    "nuon-plugins/src",
    "bins",
    "benches",
    "examples",
];

/// Files over their cap (800, or their ceiling), and ceilings of files
/// that no longer need one.
fn long_files(files: &[(String, String)], ceilings: &[(&str, usize)]) -> Vec<String> {
    let mut long = Vec::new();
    for (path, text) in files {
        let n = shipped(text).lines().count();
        let cap = ceilings
            .iter()
            .find(|(f, _)| f == path)
            .map_or(800, |(_, cap)| *cap);
        if n > cap {
            long.push(format!("{path}: {n} lines (at most {cap})"));
        }
    }
    // A ceiling whose file shrank under 800, or went, goes from the list.
    for (path, _) in ceilings {
        let n = files
            .iter()
            .find(|(f, _)| f == path)
            .map_or(0, |(_, t)| shipped(t).lines().count());
        if n <= 800 {
            long.push(format!(
                "{path}: {n} lines: take it off LONG_FILES (it keeps the 800 cap now)"
            ));
        }
    }
    long
}

#[test]
fn no_file_grows_past_800_lines() {
    let long = long_files(&sources(&CAPPED), LONG_FILES);
    assert!(
        long.is_empty(),
        "a file over its line cap (800, or its ceiling in tidy.rs's LONG_FILES, which only comes down): split it by what it is about\n{}",
        long.join("\n")
    );
}

/// What the workflow engine may not name: it knows nothing of HTTP.
const ABOVE_THE_ENGINE: [&str; 5] = [
    "crate::api",
    "super::api",
    "axum",
    "StatusCode",
    "crate::error",
];

#[test]
fn the_engine_knows_nothing_of_http() {
    let found = code_naming(&sources(&["nuon-control/src/engine"]), &ABOVE_THE_ENGINE);
    assert!(
        found.is_empty(),
        "the workflow engine sits below the API: it returns EngineError, which the API maps to HTTP (ARCHITECTURE.md, invariants)\n{}",
        found.join("\n")
    );
}

/// What the domain model may not name: the wire sits above it.
const ABOVE_THE_MODEL: [&str; 3] = ["crate::wire", "super::wire", "nuon_core::wire"];

/// The model's files: `model.rs` and what is under `model/`.
fn model_files() -> Vec<(String, String)> {
    let mut files = sources(&["nuon-core/src/model"]);
    let decl = repo_root().join("nuon-core/src/model.rs");
    files.push((rel(&decl), read(&decl)));
    files
}

#[test]
fn the_model_knows_nothing_of_the_wire() {
    let found = code_naming(&model_files(), &ABOVE_THE_MODEL);
    assert!(
        found.is_empty(),
        "the domain model (nuon_core::model) sits below the wire: the wire's types are made from it, never the other way\n{}",
        found.join("\n")
    );
}

/// The domain model's type names: each `pub struct`, `pub enum` and
/// `pub type` of its files, and each state its `status!` macro declares.
fn model_names(files: &[(String, String)]) -> Vec<String> {
    let mut names = Vec::new();
    for (_, text) in files {
        let mut in_status = false;
        for line in text.lines() {
            let t = line.trim();
            if t.starts_with("status! {") {
                in_status = true;
                continue;
            }
            let declared = ["pub struct ", "pub enum ", "pub type "]
                .iter()
                .find_map(|kw| t.strip_prefix(kw));
            let status = in_status && !t.starts_with("//") && !t.starts_with("#[");
            if let Some(rest) = declared.or(status.then_some(t)) {
                let name: String = rest
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                if name.starts_with(|c: char| c.is_ascii_uppercase()) {
                    names.push(name);
                }
                in_status = false;
            }
        }
    }
    names.sort();
    names.dedup();
    names
}

/// The wire's own names for model types: the store and the engine use
/// the model's (`Workflow`, `Step`, `QueuedJob`, `Install`).
const WIRE_NAMES_OF_THE_MODEL: [&str; 4] = [
    "WorkflowInfo",
    "WorkflowStepInfo",
    "JobInfo",
    "StoredInstall",
];

/// Every place in `files` that names a model type through the wire
/// (`wire::InstallCheck`, `use nuon_core::wire::{Role, RunnerHealth}`), or
/// by the wire's name for it.
fn model_named_by_the_wire(files: &[(String, String)], model: &[String]) -> Vec<String> {
    let mut found = code_naming_whole(files, &WIRE_NAMES_OF_THE_MODEL);
    for (path, text) in files {
        let code: Vec<&str> = text
            .lines()
            .map(|l| l.split("//").next().unwrap_or(""))
            .collect();
        let joined = code.join("\n");
        for (at, _) in joined.match_indices("wire::") {
            let rest = &joined[at + "wire::".len()..];
            let named = match rest.strip_prefix('{') {
                Some(list) => &list[..list.find('}').unwrap_or(list.len())],
                None => {
                    let end = rest
                        .find(|c: char| !(c.is_alphanumeric() || c == '_'))
                        .unwrap_or(rest.len());
                    &rest[..end]
                }
            };
            let hits: Vec<&str> = named
                .split(',')
                .map(str::trim)
                .filter(|n| model.iter().any(|m| m == n))
                .collect();
            if !hits.is_empty() {
                let line = joined[..at].matches('\n').count() + 1;
                found.push(format!("{path}:{line}: wire::{}", hits.join(", ")));
            }
        }
    }
    found
}

/// Where the model is used as itself: below the service, the store keeps
/// it and the engine moves it.
const MODEL_USERS: [&str; 2] = ["nuon-control/src/store", "nuon-control/src/engine"];

#[test]
fn the_store_and_the_engine_name_the_model() {
    let model = model_names(&model_files());
    for kept in [
        "Install",
        "Workflow",
        "Step",
        "QueuedJob",
        "InstallState",
        "StepStatus",
    ] {
        assert!(
            model.iter().any(|m| m == kept),
            "{kept} is not found in the model: {model:?}"
        );
    }
    let found = model_named_by_the_wire(&sources(&MODEL_USERS), &model);
    assert!(
        found.is_empty(),
        "the store and the engine use the domain model (nuon_core::model) by its own names; the wire \
         shows it under the API's names, above them\n{}",
        found.join("\n")
    );
}

/// The one file of the CLI that asks whether `--json` was given: it
/// chooses between the machine document and people's text (`emit`,
/// `emit_with`, `for_people`, `for_machines`, `emit_item`, `Progress`).
const CLI_OUTPUT_HOME: &str = "bins/nuon/src/output.rs";

/// What asks elsewhere: the flag read from a command's `Global` (`g`, or
/// by its long name `global`), a field named `json` tested (`.json {`), or
/// a `json` flag handed on and tested (`if json`, `!json`). Each is a
/// whole word, so `serde_json`, `json!`, `config.json` and `--json` in a
/// help text or a string are none of them.
const CLI_OUTPUT_CHOICES: [&str; 5] = ["g.json", "global.json", ".json {", "if json", "!json"];

/// Every line whose code (before a `//`) holds one of `words` as a whole:
/// a word that starts or ends with a letter is not part of a longer name
/// there (`config.json` holds no `g.json`).
fn code_naming_whole(files: &[(String, String)], words: &[&str]) -> Vec<String> {
    let in_name = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || c == '_');
    let holds = |code: &str, word: &str| {
        code.match_indices(word).any(|(at, _)| {
            let (before, after) = (&code[..at], &code[at + word.len()..]);
            let joins_before = in_name(word.chars().next()) && in_name(before.chars().next_back());
            let joins_after = in_name(word.chars().next_back()) && in_name(after.chars().next());
            !joins_before && !joins_after
        })
    };
    let mut found = Vec::new();
    for (path, text) in files {
        for (i, line) in text.lines().enumerate() {
            let code = line.split("//").next().unwrap_or("");
            if words.iter().any(|w| holds(code, w)) {
                found.push(format!("{path}:{}: {}", i + 1, line.trim()));
            }
        }
    }
    found
}

/// The lines of the CLI outside [`CLI_OUTPUT_HOME`] that ask whether
/// `--json` was given.
fn cli_output_choices(files: &[(String, String)]) -> Vec<String> {
    let others: Vec<(String, String)> = files
        .iter()
        .filter(|(path, _)| path != CLI_OUTPUT_HOME)
        .cloned()
        .collect();
    code_naming_whole(&others, &CLI_OUTPUT_CHOICES)
}

#[test]
fn cli_output_is_chosen_in_one_place() {
    let found = cli_output_choices(&sources(&["bins/nuon/src"]));
    assert!(
        found.is_empty(),
        "the CLI chooses between its document (--json) and people's text in {CLI_OUTPUT_HOME} \
         alone: `emit` (a `Render` for a type shown one way) or `emit_with`, `for_people` \
         (progress, notes), `for_machines` (a followed workflow's document), `emit_item` (a \
         followed log), `Progress` (where a workflow's steps go), not `if g.json`\n{}",
        found.join("\n")
    );
}

/// How many parameters of the list `params` are `bool`s: `x: bool`, and
/// each `bool` of a tuple `(bool, bool)`; not a `bool` inside another type
/// (`Receiver<bool>`).
fn bools_in(params: &str) -> usize {
    params
        .match_indices("bool")
        .filter(|(at, _)| {
            let before = params[..*at].trim_end().chars().next_back();
            let after = params[at + "bool".len()..].trim_start().chars().next();
            matches!(before, Some(':' | '(' | ',')) && matches!(after, None | Some(',' | ')'))
        })
        .count()
}

/// The parameter list of the `fn` whose signature `sig` starts with:
/// inside the first `(` after its name and generics, to its match; none
/// when a body or a `;` comes first.
fn parameters(sig: &str) -> Option<&str> {
    let mut angle = 0i32;
    let mut prev = ' ';
    let mut open = None;
    for (i, c) in sig.char_indices() {
        match c {
            '<' => angle += 1,
            '>' if prev != '-' => angle -= 1,
            '(' if angle == 0 => {
                open = Some(i);
                break;
            }
            '{' | ';' => return None,
            _ => {}
        }
        prev = c;
    }
    let open = open?;
    let mut depth = 0;
    for (i, c) in sig[open..].char_indices() {
        match c {
            '(' => depth += 1,
            ')' => {
                depth -= 1;
                if depth == 0 {
                    return Some(&sig[open + 1..open + i]);
                }
            }
            _ => {}
        }
    }
    None
}

/// Every `fn` of `files` (their shipped code) that takes two or more
/// `bool` parameters, by the line it starts on.
fn two_bool_functions(files: &[(String, String)]) -> Vec<String> {
    let in_name = |c: char| c.is_alphanumeric() || c == '_';
    let mut found = Vec::new();
    for (path, text) in files {
        let code: String = shipped(text)
            .lines()
            .map(|l| l.split("//").next().unwrap_or(""))
            .collect::<Vec<_>>()
            .join("\n");
        for (at, _) in code.match_indices("fn ") {
            let named = code[at + 3..].starts_with(|c: char| c.is_alphabetic() || c == '_');
            if !named || code[..at].chars().next_back().is_some_and(in_name) {
                continue;
            }
            let n = parameters(&code[at..]).map_or(0, bools_in);
            if n >= 2 {
                let line = code[..at].matches('\n').count() + 1;
                let head = code[at..].lines().next().unwrap_or("").trim();
                found.push(format!("{path}:{line}: {head} ({n} bool parameters)"));
            }
        }
    }
    found
}

#[test]
fn no_cli_function_takes_two_bools() {
    let found = two_bool_functions(&sources(&["bins/nuon/src"]));
    assert!(
        found.is_empty(),
        "a function of the CLI takes two or more bools, which its callers write as `f(x, false, \
         true)`: give it a small options struct whose fields name them (as `deploy::Watch`, \
         `deploy::Follow`, `rollouts::ActOn`)\n{}",
        found.join("\n")
    );
}

/// Each rule above finds a violation planted in a file of its own, and
/// passes the same file without it.
#[test]
fn every_rule_finds_a_planted_violation() {
    let one = |path: &str, text: &str| vec![(path.to_owned(), text.to_owned())];
    let planted = |rule: &str, found: Vec<String>, path: &str| {
        assert!(
            found.len() == 1 && found[0].starts_with(path),
            "{rule} missed its planted violation: {found:?}"
        );
    };
    let f = "nuon-control/src/api/planted.rs";
    planted(
        "workflow states",
        workflow_state_spellings(&one(f, "let s = \"waiting_approval\";")),
        f,
    );
    assert!(
        workflow_state_spellings(&one(f, "let s = WorkflowStatus::WaitingApproval;")).is_empty()
    );
    planted(
        "install states",
        model_state_spellings(&one(f, "if state == \"torn_down\" {}")),
        f,
    );
    planted(
        "health statuses",
        model_state_spellings(&one(f, "if h == \"out_of_sync\" {}")),
        f,
    );
    assert!(
        model_state_spellings(&one(
            f,
            "fn a() {}\n#[cfg(test)]\nmod t { const S: &str = \"torn_down\"; }"
        ))
        .is_empty(),
        "a test module may spell a state"
    );
    let codes = error_code_spellings();
    planted(
        "error codes",
        error_code_uses(&one(f, &format!("if c == \"{}\" {{}}", codes[0])), &codes),
        f,
    );
    let s = "nuon-control/src/service/planted.rs";
    planted(
        "the service layer",
        code_naming(&one(s, "use crate::api::apps;"), &ABOVE_THE_SERVICE),
        s,
    );
    assert!(code_naming(&one(s, "// not crate::api: a comment"), &ABOVE_THE_SERVICE).is_empty());
    let e = "nuon-control/src/engine/planted.rs";
    planted(
        "the engine",
        code_naming(&one(e, "use axum::Json;"), &ABOVE_THE_ENGINE),
        e,
    );
    let m = "nuon-core/src/model/planted.rs";
    planted(
        "the model",
        code_naming(&one(m, "use crate::wire::AppInfo;"), &ABOVE_THE_MODEL),
        m,
    );
    let model = model_names(&model_files());
    let st = "nuon-control/src/store/planted.rs";
    planted(
        "the store naming the model through the wire",
        model_named_by_the_wire(
            &one(
                st,
                "use nuon_core::wire::{\n    ErrorCode,\n    InstallCheck,\n};",
            ),
            &model,
        ),
        st,
    );
    planted(
        "the engine naming the model by the wire's name",
        model_named_by_the_wire(&one(e, "fn f(w: &WorkflowInfo) {}"), &model),
        e,
    );
    assert!(
        model_named_by_the_wire(
            &one(e, "use nuon_core::wire::{ErrorCode, LogPage};\nuse nuon_core::model::Workflow;\n// wire::Workflow"),
            &model
        )
        .is_empty()
    );
    let w = "nuon-core/src/wire/planted.rs";
    planted(
        "signed bytes made one way",
        signed_bytes_elsewhere(&one(w, "    pub fn signed_bytes(&self) -> Vec<u8> {")),
        w,
    );
    assert!(signed_bytes_elsewhere(&one(w, "let b = s.signed_bytes();")).is_empty());
    let d = "nuon-control/src/store/sqlite/planted.rs";
    planted(
        "a store trait per database",
        traits_per_dialect(&one(d, "impl AppStore for SqliteStore {\n}"), PER_DIALECT),
        d,
    );
    assert!(
        traits_per_dialect(&one(d, "impl QueueStore for SqliteStore {"), PER_DIALECT).is_empty()
    );
    let c = "bins/nuon/src/planted.rs";
    planted(
        "the CLI's output chosen in one place",
        cli_output_choices(&one(c, "    if g.json {")),
        c,
    );
    assert!(cli_output_choices(&one(c, "    // not `if g.json {`: a comment")).is_empty());
    assert!(cli_output_choices(&one(c, "let p = dir.join(\"config.json\");")).is_empty());
    assert!(cli_output_choices(&one(CLI_OUTPUT_HOME, "    if g.json {")).is_empty());
    planted(
        "a CLI function with two bools",
        two_bool_functions(&one(
            c,
            "pub(crate) async fn watch(\n    id: &str,\n    logs: bool,\n    json: bool,\n) -> R {",
        )),
        c,
    );
    planted(
        "a CLI function with a tuple of bools",
        two_bool_functions(&one(c, "fn say((wait, logs): (bool, bool)) {}")),
        c,
    );
    assert!(
        two_bool_functions(&one(
            c,
            "fn f<F: Fn(bool, bool) -> bool>(how: Watch, rx: Receiver<bool>, raw: bool) {}"
        ))
        .is_empty()
    );
    let w = "nuon-control/src/api/web/planted.rs";
    planted(
        "the dashboard calling a handler",
        dashboard_past_the_service(
            &one(
                w,
                "let r = super::super::groups::create_group(State(s), auth, body).await;",
            ),
            DASHBOARD_FROM_THE_API,
        ),
        w,
    );
    let m = "nuon-control/src/api/web/mod.rs";
    planted(
        "the dashboard naming an API module",
        dashboard_past_the_service(
            &one(m, "use crate::api::apps::install_of;"),
            DASHBOARD_FROM_THE_API,
        ),
        m,
    );
    assert!(
        dashboard_past_the_service(
            &one(
                m,
                "// super::groups::create_group\ntokio::spawn(super::control::follow(s, o, i, a, tx));\nlet p = super::pages::people(s, w);\nlet n = super::super::installer::stack::page();"
            ),
            DASHBOARD_FROM_THE_API,
        )
        .is_empty()
    );
    let p = "nuon-control/src/api/web/planted.rs";
    planted(
        "a dashboard page reading the store",
        dashboard_store_reads(
            &one(
                p,
                "let jobs = state\n    .store\n    .list_jobs(org, 10)\n    .await?;",
            ),
            DASHBOARD_STORE_READERS,
        ),
        p,
    );
    assert!(
        dashboard_store_reads(
            &one(
                "nuon-control/src/api/web/installer/planted.rs",
                "let inv = state.store.invitation_by_token(&h).await?;"
            ),
            DASHBOARD_STORE_READERS,
        )
        .is_empty()
    );
    assert!(
        dashboard_store_reads(
            &one(
                p,
                "let s = state.services(); // not state.store\nlet x = i.stored;"
            ),
            DASHBOARD_STORE_READERS,
        )
        .is_empty()
    );
    let v = "nuon-control/src/service/planted.rs";
    planted(
        "a status the service chose",
        statuses_chosen(&one(
            v,
            "return Err(Error::api(StatusCode::GONE, ErrorCode::NotFound, m));",
        )),
        v,
    );
    assert!(
        statuses_chosen(&one(
            v,
            "let ok = if dry { StatusCode::OK } else { StatusCode::CREATED };\nErr(Error::refused(ErrorCode::NotFound, m))"
        ))
        .is_empty()
    );
    let a = "nuon-control/src/api/planted.rs";
    let routed =
        "pub(super) fn ops() -> Vec<Op> {\n    vec![Op::endpoint::<ep::X>(post(make))]\n}\n";
    planted(
        "a handler doing its operation's work",
        handlers_past_the_service(
            &one(
                a,
                &format!(
                    "{routed}async fn make(State(state): State<SharedState>) -> R {{\n    state.store.make().await\n}}\n"
                ),
            ),
            &[],
        ),
        a,
    );
    let adapter = format!(
        "{routed}async fn make(State(state): State<SharedState>, caller: Caller) -> R {{\n    // not state.store: the service's\n    state.services().make(&caller).await\n}}\n"
    );
    assert!(handlers_past_the_service(&one(a, &adapter), &[]).is_empty());
    planted(
        "a handler excused that is an adapter now",
        handlers_past_the_service(&one(a, &adapter), &[("planted.rs", "make", "")]),
        a,
    );
    let c = "nuon-core/src/app/planted.rs";
    planted(
        "the loader in the model",
        config_readers(&one(c, "use toml::de::DeTable;")),
        c,
    );
    let r = "nuon-runner-lib/src/planted.rs";
    planted(
        "a runner loading a config",
        config_readers(&one(r, "let (c, d) = nuon_appconfig::parse(&files);")),
        r,
    );
    assert!(
        config_readers(&one(
            "nuon-control/src/planted.rs",
            "let (c, d) = nuon_appconfig::parse(&files);"
        ))
        .is_empty()
    );
    let lines = |n: usize| "x\n".repeat(n);
    let l = "nuon-core/src/planted.rs";
    planted("the 800 cap", long_files(&one(l, &lines(801)), &[]), l);
    assert!(long_files(&one(l, &lines(800)), &[]).is_empty());
    assert!(long_files(&one(l, &lines(850)), &[(l, 900)]).is_empty());
    planted(
        "a ceiling",
        long_files(&one(l, &lines(901)), &[(l, 900)]),
        l,
    );
    planted(
        "a stale ceiling",
        long_files(&one(l, &lines(700)), &[(l, 900)]),
        l,
    );
}

#[test]
fn the_core_does_no_io() {
    let banned = [
        "std::fs",
        "std::process",
        "std::net",
        "tokio::fs",
        "tokio::process",
        "tokio::net",
    ];
    let mut found = Vec::new();
    let pure = [
        files("nuon-core/src", "rs"),
        files("nuon-template/src", "rs"),
        files("nuon-appconfig/src", "rs"),
    ];
    for p in pure.iter().flatten() {
        for (i, line) in read(p).lines().enumerate() {
            let code = line.split("//").next().unwrap_or("");
            if let Some(b) = banned.iter().find(|b| code.contains(*b)) {
                found.push(format!("{}:{}: {b}: {}", rel(p), i + 1, line.trim()));
            }
        }
    }
    // Its tokio is the I/O traits alone: no runtime features of its own.
    let manifest = read(&repo_root().join("nuon-core/Cargo.toml"));
    let deps = manifest
        .split("[dev-dependencies]")
        .next()
        .unwrap_or_default();
    for line in deps.lines().filter(|l| l.starts_with("tokio")) {
        let features_ok =
            !line.contains(" features = [") || line.contains(" features = [\"io-util\"]");
        if !line.contains("default-features = false") || !features_ok {
            found.push(format!("nuon-core/Cargo.toml: {line}"));
        }
    }
    assert!(
        found.is_empty(),
        "nuon-core is types, traits and pure logic: it is handed what it parses (the loader in nuon-client walks directories; the copy engine is nuon_plugins::oci::copy)\n{}",
        found.join("\n")
    );
}

/// The runner's side: it runs the jobs the control plane made from a
/// config and never loads one itself.
const NEVER_LOADS_A_CONFIG: [&str; 4] = [
    "nuon-runner-lib/src",
    "nuon-plugins/src",
    "bins/nuon-runner",
    "bins/nuon-build-runner",
];

/// Lines that read an app config's files outside the loader
/// (`nuon-appconfig`): in nuon-core, the model, a reader of TOML with its
/// places (`toml::de`, `toml::Spanned`, what the loader is built on); on
/// the runner's side, any use of the loader.
fn config_readers(files: &[(String, String)]) -> Vec<String> {
    let mut found = Vec::new();
    for (path, text) in files {
        let core = path.starts_with("nuon-core/");
        let runner = NEVER_LOADS_A_CONFIG.iter().any(|d| path.starts_with(d));
        for (i, line) in shipped(text).lines().enumerate() {
            let code = line.split("//").next().unwrap_or("");
            let reads = code.contains("toml::de") || code.contains("toml::Spanned");
            if (core && reads) || (runner && code.contains("nuon_appconfig")) {
                found.push(format!("{path}:{}: {}", i + 1, line.trim()));
            }
        }
    }
    found
}

#[test]
fn the_loader_lives_in_nuon_appconfig() {
    let mut dirs = vec!["nuon-core/src"];
    dirs.extend(NEVER_LOADS_A_CONFIG);
    let found = config_readers(&sources(&dirs));
    assert!(
        found.is_empty(),
        "an app config's files are read by nuon-appconfig alone: nuon-core keeps the model it fills, and the runner's side never loads a config (ARCHITECTURE.md, crates)\n{}",
        found.join("\n")
    );
}

/// Where `unsafe` may appear: the list in ARCHITECTURE.md's invariants.
const UNSAFE_ALLOWED: &[&str] = &[
    "nuon-runner-lib/src/sys.rs",
    "nuon-control/src/sys.rs",
    "nuon-plugins/src/wasm/cache.rs",
    "nuon-plugins/sdk/src/lib.rs",
    "tests/plugins/compat/src/lib.rs",
    "tests/support/lib.rs",
    "benches/job_loop.rs",
];

#[test]
fn unsafe_stays_where_the_architecture_allows_it() {
    let architecture = read(&repo_root().join("ARCHITECTURE.md"));
    let mut found = Vec::new();
    for allowed in UNSAFE_ALLOWED {
        if !architecture.contains(&format!("`{allowed}`")) {
            found.push(format!(
                "{allowed} is allowed unsafe here but ARCHITECTURE.md does not list it"
            ));
        }
    }
    for dir in [
        "nuon-core",
        "nuon-appconfig",
        "nuon-client",
        "nuon-plugins",
        "nuon-runner-lib",
        "nuon-control",
        "bins",
        "tests",
        "benches",
        "examples",
    ] {
        for p in files(dir, "rs") {
            let r = rel(&p);
            if UNSAFE_ALLOWED.contains(&r.as_str()) || r == "tests/all/tidy.rs" {
                continue;
            }
            for (i, line) in read(&p).lines().enumerate() {
                let code = line.split("//").next().unwrap_or("");
                if code.contains("unsafe ")
                    || code.contains("unsafe_code")
                    || code.contains("unsafe{")
                {
                    found.push(format!("{r}:{}: {}", i + 1, line.trim()));
                }
            }
        }
    }
    assert!(
        found.is_empty(),
        "unsafe outside the allow-list (ARCHITECTURE.md, invariants): move it into a sys.rs that is listed, or list it with why\n{}",
        found.join("\n")
    );
}

#[test]
fn mains_are_thin() {
    let mut long = Vec::new();
    for p in files("bins", "rs") {
        if p.file_name().is_some_and(|n| n == "main.rs") {
            let n = read(&p).lines().count();
            if n > 150 {
                long.push(format!("{}: {n} lines", rel(&p)));
            }
        }
    }
    assert!(
        long.is_empty(),
        "a binary's main.rs stays under 150 lines: its commands belong in a library\n{}",
        long.join("\n")
    );
}

/// The `[[package]]` entries of a Cargo.lock as (name, version) pairs.
fn locked_packages(lock: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut name = None;
    for line in lock.lines() {
        if let Some(n) = line.strip_prefix("name = ") {
            name = Some(n.trim_matches('"').to_string());
        } else if let Some(v) = line.strip_prefix("version = ")
            && let Some(n) = name.take()
        {
            out.push((n, v.trim_matches('"').to_string()));
        }
    }
    out
}

#[test]
fn the_fuzz_lock_file_follows_the_workspace() {
    // fuzz/ is its own workspace with its own Cargo.lock, which CI builds
    // with --locked: a dependency added to nuon-core must land there too,
    // at the version the main workspace uses.
    let root = repo_root();
    let main = locked_packages(&read(&root.join("Cargo.lock")));
    let fuzz = locked_packages(&read(&root.join("fuzz/Cargo.lock")));
    let mut differ = Vec::new();
    for (name, version) in &fuzz {
        let ours: Vec<&String> = main
            .iter()
            .filter(|(n, _)| n == name)
            .map(|(_, v)| v)
            .collect();
        if !ours.is_empty() && !ours.contains(&version) {
            differ.push(format!("{name} {version} (workspace: {ours:?})"));
        }
    }
    assert!(
        differ.is_empty(),
        "fuzz/Cargo.lock pins other versions than Cargo.lock: run `cargo update --offline --manifest-path fuzz/Cargo.toml -p NAME --precise VERSION`\n{}",
        differ.join("\n")
    );
    match fuzz_lock_check(&root) {
        LockCheck::Current => {}
        LockCheck::OutOfDate(why) => panic!("{}", out_of_date(&why)),
        // `cargo metadata` reads the manifest of every package in the lock
        // file, every platform's, so offline it needs crates that no build
        // on this machine downloads (fiat-crypto, a dependency of
        // curve25519-dalek on other targets). Fetch them (`.ci/run` does
        // so first) and check again: a cache that lacks them proves
        // nothing either way.
        LockCheck::CouldNotFetch(offline) => {
            let fetch = std::process::Command::new(env!("CARGO"))
                .args(["fetch", "--locked", "--manifest-path"])
                .arg(root.join("fuzz/Cargo.toml"))
                .output()
                .expect("cargo runs");
            let stderr = String::from_utf8_lossy(&fetch.stderr);
            if !fetch.status.success() {
                if lock_needs_update(&stderr) {
                    panic!("{}", out_of_date(&stderr));
                }
                let msg = format!(
                    "could not check fuzz/Cargo.lock: the crates it names are not all in the cargo cache, and fetching them failed (this does not mean the lock file is out of date). Run `cargo fetch --manifest-path fuzz/Cargo.toml` with crates.io reachable, then the test again.
offline check:
{offline}
fetch:
{stderr}"
                );
                assert!(!nuon_tests::require_all(), "{msg} (NUON_TEST_REQUIRE=all)");
                eprintln!("SKIPPED: {msg}");
                return;
            }
            match fuzz_lock_check(&root) {
                LockCheck::Current => {}
                LockCheck::OutOfDate(why) => panic!("{}", out_of_date(&why)),
                LockCheck::CouldNotFetch(why) => panic!(
                    "fuzz/Cargo.lock: `cargo fetch --locked` succeeded but `cargo metadata --locked --offline` still lacks a crate:\n{why}"
                ),
            }
        }
    }
}

/// What `cargo metadata --locked` said of fuzz/Cargo.lock.
enum LockCheck {
    Current,
    /// The lock file does not match the manifests (cargo's words).
    OutOfDate(String),
    /// A crate it names is not in the cache (cargo's words).
    CouldNotFetch(String),
}

/// `cargo metadata --locked --offline` on the fuzz workspace.
fn fuzz_lock_check(root: &Path) -> LockCheck {
    let out = std::process::Command::new(env!("CARGO"))
        .args([
            "metadata",
            "--locked",
            "--offline",
            "--format-version",
            "1",
            "--manifest-path",
        ])
        .arg(root.join("fuzz/Cargo.toml"))
        .output()
        .expect("cargo runs");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    if out.status.success() {
        LockCheck::Current
    } else if lock_needs_update(&stderr) {
        LockCheck::OutOfDate(stderr)
    } else {
        LockCheck::CouldNotFetch(stderr)
    }
}

/// Whether cargo refused because the lock file would change under
/// `--locked` (as opposed to a crate it could not download).
fn lock_needs_update(stderr: &str) -> bool {
    stderr.contains("--locked was passed") || stderr.contains("needs to be updated")
}

fn out_of_date(cargo_said: &str) -> String {
    format!(
        "fuzz/Cargo.lock is out of date with fuzz/Cargo.toml and the crates it builds on: run `cargo metadata --manifest-path fuzz/Cargo.toml --format-version 1 > /dev/null` (it rewrites the lock file) and commit fuzz/Cargo.lock\n{cargo_said}"
    )
}

/// The crates whose modules may not import each other in a circle.
const CRATES: &[&str] = &[
    "nuon-core",
    "nuon-appconfig",
    "nuon-template",
    "nuon-control",
    "nuon-client",
    "nuon-runner-lib",
    "nuon-plugins",
    "bins/nuon",
    "bins/nuon-ctl",
    "bins/nuon-runner",
    "bins/nuon-build-runner",
];

/// The module a file under a crate's `src/` is (`api/mod.rs` is `api`,
/// `lib.rs` the root, ``).
fn module_of(path: &str) -> String {
    let path = path.strip_suffix(".rs").unwrap_or(path);
    let mut segs: Vec<&str> = path.split('/').collect();
    if matches!(segs.last(), Some(&("mod" | "lib" | "main"))) {
        segs.pop();
    }
    segs.join("::")
}

/// Every path a `use` tree or an expression names from `text[*i..]`: `a::b`,
/// `a::{b, c::{d, self}}`, `a::*`, each as its segments after `prefix`.
fn use_paths(text: &[u8], i: &mut usize, prefix: Vec<String>, out: &mut Vec<Vec<String>>) {
    let skip_ws = |i: &mut usize| {
        while *i < text.len() && text[*i].is_ascii_whitespace() {
            *i += 1;
        }
    };
    let mut path = prefix;
    loop {
        skip_ws(i);
        if *i < text.len() && text[*i] == b'{' {
            *i += 1;
            loop {
                skip_ws(i);
                if *i >= text.len() {
                    return;
                }
                if text[*i] == b'}' {
                    *i += 1;
                    return;
                }
                use_paths(text, i, path.clone(), out);
                skip_ws(i);
                if *i < text.len() && text[*i] == b',' {
                    *i += 1;
                } else if *i < text.len() && text[*i] != b'}' {
                    // `a as b`, or something that is not a use tree.
                    while *i < text.len() && !matches!(text[*i], b',' | b'}') {
                        *i += 1;
                    }
                }
            }
        }
        let start = *i;
        while *i < text.len() && (text[*i].is_ascii_alphanumeric() || text[*i] == b'_') {
            *i += 1;
        }
        let ident = std::str::from_utf8(&text[start..*i]).unwrap_or("");
        match ident {
            "" | "self" => {}
            "super" => {
                path.pop();
            }
            _ => path.push(ident.to_owned()),
        }
        if text[*i..].starts_with(b"::") && !ident.is_empty() {
            *i += 2;
            continue;
        }
        out.push(path);
        return;
    }
}

/// The module graph of one crate: for each module, the modules it names
/// (neither its ancestors nor its descendants) and where it first does.
/// `files` are the crate's files, by path under `src/`, and their text.
fn module_graph(
    files: &[(String, String)],
) -> std::collections::BTreeMap<String, std::collections::BTreeMap<String, String>> {
    use std::collections::{BTreeMap, BTreeSet};
    let modules: BTreeSet<String> = files.iter().map(|(p, _)| module_of(p)).collect();
    let related = |a: &str, b: &str| {
        a == b
            || a.is_empty()
            || b.is_empty()
            || a.starts_with(&format!("{b}::"))
            || b.starts_with(&format!("{a}::"))
    };
    let mut graph: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
    for (path, text) in files {
        let me = module_of(path);
        let parent: Vec<String> = {
            let mut s: Vec<String> = me.split("::").map(str::to_owned).collect();
            s.pop();
            s
        };
        let code: String = shipped(text)
            .lines()
            .map(|l| l.split("//").next().unwrap_or(""))
            .collect::<Vec<_>>()
            .join("\n");
        let code = code.as_bytes();
        let mut at = 0;
        while at < code.len() {
            let rest = &code[at..];
            let base = if rest.starts_with(b"crate::") {
                Vec::new()
            } else if rest.starts_with(b"super::") {
                parent.clone()
            } else {
                at += 1;
                continue;
            };
            // Only a whole word: not `foo_crate::`, not `my_super::`.
            let start = at;
            at += "crate::".len();
            if start > 0 && (code[start - 1].is_ascii_alphanumeric() || code[start - 1] == b'_') {
                continue;
            }
            let line = code[..start].iter().filter(|b| **b == b'\n').count() + 1;
            let mut paths = Vec::new();
            use_paths(code, &mut at, base, &mut paths);
            for segs in paths {
                // The longest prefix that is a module of the crate.
                let target = (1..=segs.len())
                    .rev()
                    .map(|k| segs[..k].join("::"))
                    .find(|m| modules.contains(m));
                let Some(target) = target else { continue };
                if related(&me, &target) {
                    continue;
                }
                graph
                    .entry(me.clone())
                    .or_default()
                    .entry(target)
                    .or_insert_with(|| format!("{path}:{line}"));
            }
        }
    }
    graph
}

/// The circles of a module graph, at every depth: modules seen as wholes
/// (`store` with all of `store::*`) must not import each other in a
/// circle, and neither may the modules inside one. Each circle comes with
/// the imports that close it.
fn import_cycles(
    graph: &std::collections::BTreeMap<String, std::collections::BTreeMap<String, String>>,
) -> Vec<String> {
    use std::collections::{BTreeMap, BTreeSet};
    let depth = graph
        .iter()
        .flat_map(|(a, e)| std::iter::once(a).chain(e.keys()))
        .map(|m| m.split("::").count())
        .max()
        .unwrap_or(0);
    let at_depth = |m: &str, d: usize| m.split("::").take(d).collect::<Vec<_>>().join("::");
    let mut out = Vec::new();
    let mut seen = BTreeSet::new();
    for d in 1..=depth {
        // The graph with every module cut to its first `d` segments.
        let mut cut: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
        for (a, edges) in graph {
            for (b, at) in edges {
                let (a, b) = (at_depth(a, d), at_depth(b, d));
                let nested = |x: &str, y: &str| x == y || y.starts_with(&format!("{x}::"));
                if nested(&a, &b) || nested(&b, &a) {
                    continue;
                }
                cut.entry(a)
                    .or_default()
                    .entry(b)
                    .or_insert_with(|| at.clone());
            }
        }
        // Which modules each module reaches (the graphs are small).
        let mut reach: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
        for from in cut.keys() {
            let mut found = BTreeSet::new();
            let mut todo = vec![from.as_str()];
            while let Some(m) = todo.pop() {
                for to in cut.get(m).into_iter().flat_map(|e| e.keys()) {
                    if found.insert(to.as_str()) {
                        todo.push(to);
                    }
                }
            }
            reach.insert(from, found);
        }
        for from in cut.keys() {
            if !reach[from.as_str()].contains(from.as_str()) {
                continue;
            }
            let circle: BTreeSet<&str> = reach[from.as_str()]
                .iter()
                .copied()
                .filter(|m| reach.get(m).is_some_and(|r| r.contains(from.as_str())))
                .collect();
            let names = circle.iter().copied().collect::<Vec<_>>().join(", ");
            if !seen.insert(names.clone()) {
                continue;
            }
            let mut edges = Vec::new();
            for a in &circle {
                for (b, at) in cut.get(*a).into_iter().flatten() {
                    if circle.contains(b.as_str()) {
                        edges.push(format!("  {a} -> {b} ({at})"));
                    }
                }
            }
            out.push(format!("{names}\n{}", edges.join("\n")));
        }
    }
    out
}

/// A crate's shipped files, by path under `src/`.
fn crate_files(krate: &str) -> Vec<(String, String)> {
    let src = format!("{krate}/src");
    files(&src, "rs")
        .into_iter()
        .map(|p| {
            let path = rel(&p)[src.len() + 1..].to_owned();
            (path, read(&p))
        })
        .filter(|(p, _)| !p.split('/').any(|s| s == "tests" || s == "tests.rs"))
        .collect()
}

#[test]
fn no_import_cycle_between_modules() {
    let mut found = Vec::new();
    for krate in CRATES {
        for circle in import_cycles(&module_graph(&crate_files(krate))) {
            found.push(format!("{krate}: {circle}"));
        }
    }
    assert!(
        found.is_empty(),
        "modules that import each other in a circle: the layers go one way (ARCHITECTURE.md); move what both need below both\n{}",
        found.join("\n")
    );
}

#[test]
fn a_planted_import_cycle_is_found() {
    // The store reaching up into the API closes a circle through the
    // service layer and the engine.
    let mut files = crate_files("nuon-control");
    let store = files
        .iter_mut()
        .find(|(p, _)| p == "store/mod.rs")
        .expect("nuon-control has store/mod.rs");
    store.1.insert_str(0, "use crate::api::SharedState;\n");
    let cycles = import_cycles(&module_graph(&files));
    assert!(
        cycles
            .iter()
            .any(|c| c.contains("store -> api (store/mod.rs:1)")),
        "{cycles:?}"
    );
    // Groups, `self` and `super` are read as the compiler reads them.
    let files = vec![
        ("lib.rs".to_owned(), String::new()),
        (
            "a/mod.rs".to_owned(),
            "use crate::{b::{self, c::X}, d as e};\n".to_owned(),
        ),
        (
            "a/x.rs".to_owned(),
            "fn f() { super::super::d::g(); }\n".to_owned(),
        ),
        ("b/mod.rs".to_owned(), String::new()),
        ("b/c.rs".to_owned(), "use super::super::a::x;\n".to_owned()),
        (
            "d.rs".to_owned(),
            "// crate::a::x in a comment\n".to_owned(),
        ),
    ];
    let graph = module_graph(&files);
    let targets = |m: &str| graph.get(m).map(|e| e.keys().cloned().collect::<Vec<_>>());
    assert_eq!(
        targets("a"),
        Some(vec!["b".into(), "b::c".into(), "d".into()])
    );
    assert_eq!(targets("d"), None);
    let cycles = import_cycles(&graph);
    assert_eq!(cycles.len(), 1, "{cycles:?}");
    assert!(cycles[0].starts_with("a, b\n"), "{cycles:?}");
}

/// What breaks "one `write_private` per crate": a second definition, or a
/// temporary file named by `with_extension("tmp")` (`a.b` and `a.c` would
/// share `a.tmp`).
fn private_writer_problems(krate: &str, files: &[(String, String)]) -> Vec<String> {
    let mut defs = Vec::new();
    let mut found = Vec::new();
    for (path, text) in files {
        for (i, line) in shipped(text).lines().enumerate() {
            let code = line.split("//").next().unwrap_or("");
            if code.contains("fn write_private(") {
                defs.push(format!("{krate}/src/{path}:{}", i + 1));
            }
            if code.contains("with_extension(\"tmp\")") {
                found.push(format!(
                    "{krate}/src/{path}:{}: a temporary file named by with_extension(\"tmp\"); use the crate's write_private",
                    i + 1
                ));
            }
        }
    }
    if defs.len() > 1 {
        found.push(format!(
            "{krate}: {} write_private functions ({}); keep one and call it",
            defs.len(),
            defs.join(", ")
        ));
    }
    found
}

#[test]
fn one_write_private_per_crate() {
    let mut found = Vec::new();
    for krate in CRATES {
        found.extend(private_writer_problems(krate, &crate_files(krate)));
    }
    assert!(
        found.is_empty(),
        "private files are written one way per crate (atomic, 0600, a temporary file of its own)\n{}",
        found.join("\n")
    );
    // Planted: a second writer, and the old race.
    let mut files = crate_files("nuon-runner-lib");
    files.push((
        "planted.rs".into(),
        "fn write_private(p: &Path) { let tmp = p.with_extension(\"tmp\"); }\n".into(),
    ));
    let planted = private_writer_problems("nuon-runner-lib", &files);
    assert_eq!(planted.len(), 2, "{planted:?}");
}

/// Every tracked text file of the repository (git's list), with its text.
fn tracked_texts() -> Vec<(String, String)> {
    let out = std::process::Command::new("git")
        .args(["ls-files", "-z"])
        .current_dir(repo_root())
        .output()
        .expect("git ls-files");
    assert!(out.status.success(), "git ls-files failed");
    out.stdout
        .split(|b| *b == 0)
        .filter(|p| !p.is_empty())
        .filter_map(|p| {
            let path = String::from_utf8_lossy(p).into_owned();
            let text = std::fs::read(repo_root().join(&path)).ok()?;
            Some((path, String::from_utf8(text).ok()?))
        })
        .collect()
}

/// Addresses under organisations this project does not own (a runner
/// binary or image a customer's stack would fail to fetch).
fn invented_addresses(files: &[(String, String)]) -> Vec<String> {
    // Spelled in two halves, so this file does not find itself.
    let banned = [concat!("nuon", "-byoc"), concat!("ghcr.io/", "nuon")];
    let mut found = Vec::new();
    for (path, text) in files {
        for (i, line) in text.lines().enumerate() {
            if banned.iter().any(|b| line.contains(b)) {
                found.push(format!("{path}:{}: {}", i + 1, line.trim()));
            }
        }
    }
    found
}

#[test]
fn no_address_points_at_an_organisation_we_do_not_own() {
    let found = invented_addresses(&tracked_texts());
    assert!(
        found.is_empty(),
        "a URL or image under an organisation this project does not own: install stacks download the runner from the vendor's control plane (`GET /v1/runner/releases/{{version}}/{{platform}}`), and images are the vendor's own\n{}",
        found.join("\n")
    );
    // And the check finds one planted.
    let planted = vec![(
        "planted.rs".to_owned(),
        format!(
            "let url = \"https://github.com/{}/nuon\";",
            concat!("nuon", "-byoc")
        ),
    )];
    assert_eq!(invented_addresses(&planted).len(), 1);
}
