//! Where the repository is, and the WASM plugins the tests run.

use super::*;

/// The `tests` package's directory: cargo's at run time (a binary built in
/// another checkout of the tree keeps that checkout's path in `env!`).
pub fn manifest_dir() -> PathBuf {
    std::env::var_os("CARGO_MANIFEST_DIR")
        .unwrap_or_else(|| env!("CARGO_MANIFEST_DIR").into())
        .into()
}

/// The WASM plugins the tests run, built for `wasm32-wasip2`.
#[derive(Debug, Clone)]
pub struct WasmPlugins {
    /// The example plugin of `examples/plugins/records`.
    pub records: PathBuf,
    /// `tests/plugins/hostile`: its config picks an attack.
    pub hostile: PathBuf,
    /// `tests/plugins/compat`: built against the frozen 0.1.0 contract.
    pub compat: PathBuf,
    /// `tests/plugins/other-world`: a WASI command, not a plugin.
    pub other_world: PathBuf,
}

/// The repository's root.
pub fn repo_root() -> PathBuf {
    manifest_dir()
        .parent()
        .expect("tests/ has a parent")
        .to_path_buf()
}

/// Where the plugins are built: a target directory of their own (so the
/// build does not wait on the lock of the one running the tests).
fn plugin_target_dir() -> PathBuf {
    match std::env::var_os("CARGO_TARGET_DIR") {
        Some(d) => PathBuf::from(d).join("wasm-plugins"),
        None => repo_root().join("target").join("wasm-plugins"),
    }
}

/// Builds the Rust plugins (once per test process, incrementally across
/// runs). `None`, said loudly, when the `wasm32-wasip2` target is not
/// installed (a failure under `NUON_TEST_REQUIRE=all`).
pub fn wasm_plugins() -> Option<WasmPlugins> {
    static BUILT: OnceLock<Result<WasmPlugins, String>> = OnceLock::new();
    let built = BUILT.get_or_init(|| {
        let sysroot = Command::new("rustc")
            .args(["--print", "sysroot"])
            .output()
            .map_err(|e| format!("rustc: {e}"))?;
        let sysroot = String::from_utf8_lossy(&sysroot.stdout).trim().to_owned();
        if !Path::new(&sysroot)
            .join("lib/rustlib/wasm32-wasip2")
            .is_dir()
        {
            return Err(
                "the wasm32-wasip2 target is not installed (rustup target add wasm32-wasip2)"
                    .into(),
            );
        }
        let target = plugin_target_dir();
        let out = cargo()
            .current_dir(repo_root())
            .args([
                "build",
                "--release",
                "--target",
                "wasm32-wasip2",
                "-p",
                "records-plugin",
                "-p",
                "hostile-plugin",
                "-p",
                "compat-plugin",
                "-p",
                "other-world",
                "--target-dir",
            ])
            .arg(&target)
            .output()
            .map_err(|e| format!("cargo: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "building the test plugins failed:\n{}",
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        let dir = target.join("wasm32-wasip2/release");
        Ok(WasmPlugins {
            records: dir.join("records_plugin.wasm"),
            hostile: dir.join("hostile_plugin.wasm"),
            compat: dir.join("compat_plugin.wasm"),
            other_world: dir.join("other-world.wasm"),
        })
    });
    match built {
        Ok(p) => Some(p.clone()),
        Err(e) if e.contains("not installed") => {
            assert!(!require_all(), "{e} (NUON_TEST_REQUIRE=all)");
            eprintln!("SKIPPED: {e}");
            None
        }
        Err(e) => panic!("{e}"),
    }
}

/// The Python example plugin (`examples/plugins/inventory-py`) built with
/// componentize-py; `None`, said loudly, when componentize-py is missing.
pub fn python_plugin() -> Option<PathBuf> {
    static BUILT: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    if !have_tool("componentize-py", "build the Python plugin") {
        return None;
    }
    let built = BUILT.get_or_init(|| {
        let src = repo_root().join("examples/plugins/inventory-py");
        let out_dir = plugin_target_dir();
        std::fs::create_dir_all(&out_dir).map_err(|e| e.to_string())?;
        let out = out_dir.join("inventory.wasm");
        let fresh = |p: &Path| std::fs::metadata(p).and_then(|m| m.modified()).ok();
        if fresh(&out).is_some() && fresh(&out) >= fresh(&src.join("app.py")) {
            return Ok(out);
        }
        let wit = repo_root().join("nuon-plugins/sdk/wit");
        let run = Command::new("componentize-py")
            .arg("-d")
            .arg(&wit)
            .args(["-w", "nuon-plugin", "componentize", "app", "-p"])
            .arg(&src)
            .arg("-o")
            .arg(&out)
            .output()
            .map_err(|e| format!("componentize-py: {e}"))?;
        if !run.status.success() {
            return Err(format!(
                "componentize-py failed:\n{}",
                String::from_utf8_lossy(&run.stderr)
            ));
        }
        Ok(out)
    });
    Some(built.clone().unwrap_or_else(|e| panic!("{e}")))
}
