//! The app config reader: one fuzzed file, at a place picked by the first
//! byte, next to a fixed valid `metadata.toml`, read the way the CLI's
//! directory loader reads a config (bytes → `source_file` → `validate`).
#![no_main]

use libfuzzer_sys::fuzz_target;
use nuon_core::app::{self, Diagnostics};

/// Where the fuzzed file goes: `PATHS[first byte % len]`.
const PATHS: &[&str] = &[
    "metadata.toml",
    "inputs.toml",
    "components/x.toml",
    "actions/x.toml",
    "sandbox.toml",
    "secrets.toml",
    "runner.toml",
    "installs/x.toml",
    "inputs/x.toml",
    "input_groups/x.toml",
    "stack.toml",
    "permissions.toml",
    "permissions/x.toml",
    "break_glass.toml",
    "operation_roles.toml",
    "policies.toml",
    "policies/x.toml",
    "kubernetes_contexts.toml",
    "runbooks/x.toml",
    "installer.toml",
];

const METADATA: &str = r#"version = "v2"
display_name = "Fuzz"
description = "The fixed metadata.toml next to the fuzzed file."
"#;

fuzz_target!(|bytes: &[u8]| {
    let Some((&pick, body)) = bytes.split_first() else {
        return;
    };
    let path = PATHS[usize::from(pick) % PATHS.len()];
    let mut d = Diagnostics::default();
    let mut files = Vec::new();
    if path != "metadata.toml" {
        files.push(app::SourceFile::new("metadata.toml", METADATA));
    }
    // As the loader does: too large or not UTF-8 is a problem, not a file.
    files.extend(nuon_appconfig::source_file(
        path.to_owned(),
        Ok(body.to_vec()),
        &mut d,
    ));
    files.sort_by(|a, b| a.name.cmp(&b.name));
    // Paths the config names "exist" unless they say otherwise, so both
    // answers of the existence check are reached.
    let (config, diags) = nuon_appconfig::validate(&files, &|p, _is_dir| !p.contains("missing"));
    let _ = diags.to_string();
    if let Some(config) = config {
        assert!(
            !diags.has_errors(),
            "a config came back with errors: {diags}"
        );
        let _ = serde_json::to_string(&config);
        let _ = app::path_sources(&config);
    }
    let _ = d.to_string();
});
