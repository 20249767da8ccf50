//! "Keys and secrets at rest", tried as an attacker with read access to the
//! control plane's data directory: `nuon dev --once` provisions the example
//! app (a generated secret, a sensitive input, a sensitive output, state
//! tokens in its Terraform jobs) on SQLite and on PostgreSQL; then every
//! file under the data directory, and a `pg_dump` of the database, is
//! searched for every secret value (as it is, cased, base64, hex and
//! percent-encoded), the org's signing key (raw, hex and base64) and every runner and state token. The files' modes are checked
//! on the fresh data dir and after a restart.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use base64::Engine as _;
use nuon_control::{ADMIN_TOKEN_FILE, BUILD_RUNNER_TOKEN_FILE, OpenStore, SIGNING_KEY_FILE};
use nuon_test_fixtures::PgCluster;
use nuon_tests::{have_tool, ours, rt};

fn example() -> PathBuf {
    nuon_tests::manifest_dir().join("../examples/apps/hello")
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// `nuon dev --once` on a fresh `data`, its control plane on `database_url`
/// when given.
fn provision(data: &Path, database_url: Option<&str>) {
    let mut c = ours("nuon");
    c.arg("dev")
        .arg("--data-dir")
        .arg(data)
        .arg("--app-dir")
        .arg(example())
        .args(["--listen", &format!("127.0.0.1:{}", free_port())])
        .args(["--runner-listen", &format!("127.0.0.1:{}", free_port())])
        .arg("--once")
        .stdin(Stdio::null());
    match database_url {
        Some(url) => c.env("NUON_DATABASE_URL", url),
        None => c.env_remove("NUON_DATABASE_URL"),
    };
    let out = c.output().unwrap();
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// What must not be found, each with what it is.
struct Needles(Vec<(String, Vec<u8>)>);

impl Needles {
    fn add(&mut self, what: impl Into<String>, value: impl AsRef<[u8]>) {
        let value = value.as_ref().to_vec();
        assert!(value.len() >= 4, "too short to search for");
        self.0.push((what.into(), value));
    }

    /// Each needle found in `bytes`, with `place` for the message.
    fn hits(&self, place: &str, bytes: &[u8]) -> Vec<String> {
        self.0
            .iter()
            .filter(|(_, v)| bytes.windows(v.len()).any(|w| w == v.as_slice()))
            .map(|(what, _)| format!("{what} in {place}"))
            .collect()
    }
}

/// The secrets of the provisioned install and the org's key, opened with
/// the data dir's secrets key the way the control plane opens them.
fn needles(data: &Path, database_url: Option<&str>) -> Needles {
    let control = data.join("control");
    let mut n = Needles(Vec::new());
    rt().block_on(async {
        let open = OpenStore::existing(&control, database_url).await.unwrap();
        let secrets = open.secrets(&control).await.unwrap();
        let store = open.store();
        let admin = std::fs::read_to_string(control.join(ADMIN_TOKEN_FILE)).unwrap();
        let org = store
            .authenticate_api(&nuon_core::token::hash_token(admin.trim()))
            .await
            .unwrap()
            .unwrap()
            .org_id;
        let install = store.find_install(&org, "demo").await.unwrap().unwrap();
        let sealed: serde_json::Value = serde_json::from_str(&install.sealed_json).unwrap();
        for kind in ["input", "secret"] {
            let map = sealed[format!("{kind}s")].as_object().unwrap();
            assert!(!map.is_empty(), "the example has a sensitive {kind}");
            for (name, value) in map {
                let context = nuon_control::secrets::seal_context(&install.id, kind, name);
                let plain = secrets.open(value.as_str().unwrap(), &context).unwrap();
                // And the forms a template makes of it.
                for (what, form) in crate::hostile::forms_of(&format!("{kind} {name}"), &plain) {
                    n.add(what, form);
                }
            }
        }
        let stored = store.signing_key(&org).await.unwrap().unwrap();
        let key = nuon_control::keys::open_signing_key(&secrets, &org, &stored)
            .unwrap()
            .to_bytes();
        n.add("the signing key", key);
        n.add("the signing key (hex)", hex_of(&key));
        for engine in [
            base64::engine::general_purpose::STANDARD,
            base64::engine::general_purpose::STANDARD_NO_PAD,
            base64::engine::general_purpose::URL_SAFE_NO_PAD,
        ] {
            // Without its last characters, whose bits depend on padding.
            let b64 = engine.encode(key);
            n.add("the signing key (base64)", &b64[..40]);
        }
        open.close().await;
    });
    let runner_token =
        std::fs::read_to_string(data.join("installs/demo/runner/runner-token")).unwrap();
    n.add("the install runner's token", runner_token.trim());
    let build_token = std::fs::read_to_string(control.join(BUILD_RUNNER_TOKEN_FILE)).unwrap();
    n.add("the build runner's token", build_token.trim());
    // Every state token: `stt_` and its secret (no sealed form has `_`).
    n.add("a state token", "stt_");
    n
}

fn hex_of(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.push(p);
            }
        }
    }
    out
}

/// Every file of the control plane's data dir. The bootstrap's hand-off
/// files hold the one token each hands over (mode 0600), and nothing else.
fn search_data_dir(control: &Path, n: &Needles) -> Vec<String> {
    let mut hits = Vec::new();
    for file in files_under(control) {
        let bytes = std::fs::read(&file).unwrap();
        let found = n.hits(&file.display().to_string(), &bytes);
        let handed_over = file.ends_with(BUILD_RUNNER_TOKEN_FILE);
        hits.extend(
            found
                .into_iter()
                .filter(|h| !(handed_over && h.starts_with("the build runner's token in"))),
        );
    }
    hits
}

/// The data dir 0700, every file in it 0600 but the public key; at least
/// `files` of them (databases, their WAL, the key and token files).
fn assert_private(control: &Path, files: usize) {
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(control), 0o700, "{}", control.display());
    let mut seen = 0;
    for file in files_under(control) {
        let want = if file.ends_with(SIGNING_KEY_FILE) {
            0o644
        } else {
            0o600
        };
        assert_eq!(mode(&file), want, "{}", file.display());
        seen += 1;
    }
    assert!(seen >= files, "{seen} files in {}", control.display());
}

#[test]
fn no_secret_key_or_token_is_readable_in_the_data_dir_on_sqlite() {
    if !have_tool("terraform", "run the example app's Terraform") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    provision(&data, None);
    let control = data.join("control");
    assert_private(&control, 8);
    let n = needles(&data, None);
    // The check finds what it looks for: the runner's own token file.
    let own = std::fs::read(data.join("installs/demo/runner/runner-token")).unwrap();
    assert!(!n.hits("runner-token", &own).is_empty());
    let hits = search_data_dir(&control, &n);
    assert!(hits.is_empty(), "found in the clear: {hits:#?}");

    // A wider mode is fixed at the next start (`--once` again: a deploy
    // with nothing to change); under --strict-permissions it is refused.
    let db = control.join("nuon.db");
    std::fs::set_permissions(&db, std::fs::Permissions::from_mode(0o644)).unwrap();
    std::fs::set_permissions(&control, std::fs::Permissions::from_mode(0o755)).unwrap();
    let out = ours("nuon-ctl")
        .args(["serve", "--strict-permissions", "--listen", "127.0.0.1:0"])
        .args(["--runner-listen", "127.0.0.1:0", "--data-dir"])
        .arg(&control)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(err.contains("chmod 700"), "{err}");
    provision(&data, None);
    assert_private(&control, 8);
    let hits = search_data_dir(&control, &needles(&data, None));
    assert!(
        hits.is_empty(),
        "found in the clear after a restart: {hits:#?}"
    );

    // The secrets key rotated over a whole provisioned install: every
    // place holds values, every value opens with the new key alone, and
    // the next deploy works on it.
    use crate::rotation::{all_values, hex_of, under, unhex};
    use nuon_control::store::SealedColumn;
    let key_file = control.join(nuon_control::secrets::SECRETS_KEY_FILE);
    let old = unhex(&std::fs::read_to_string(&key_file).unwrap());
    let new = [0x6b; 32];
    let out = ours("nuon-ctl")
        .args([
            "rotate-secrets-key",
            "--grace",
            "0s",
            "--new-key",
            &hex_of(&new),
        ])
        .arg("--data-dir")
        .arg(&control)
        .env_remove("NUON_SECRETS_KEY")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for column in SealedColumn::ALL {
        let values = all_values(&control, None, column);
        // The example has no webhook and no pending change: their sealing
        // and rotation are checked in `reseal.rs` and `ops.rs`.
        let optional = [
            SealedColumn::JobOutputs,
            SealedColumn::StepOutputs,
            SealedColumn::WebhookSecrets,
            SealedColumn::InstallPending,
        ];
        assert!(
            !values.is_empty() || optional.contains(&column),
            "the example keeps nothing at {column:?}"
        );
        assert_eq!(under(&values, column, new), values.len(), "{column:?}");
        assert_eq!(under(&values, column, old), 0, "{column:?}");
    }
    provision(&data, None);
    assert_private(&control, 8);
}

#[test]
fn no_secret_key_or_token_is_readable_in_the_data_dir_or_a_dump_on_postgresql() {
    if !have_tool("terraform", "run the example app's Terraform")
        || !have_tool("pg_dump", "dump the PostgreSQL store")
    {
        return;
    }
    let Some(pg) = PgCluster::start().expect("start PostgreSQL") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    provision(&data, Some(&pg.url));
    let control = data.join("control");
    // The secrets key, the public key and the two hand-off files.
    assert_private(&control, 4);
    let n = needles(&data, Some(&pg.url));
    let mut hits = search_data_dir(&control, &n);
    let dump = Command::new("pg_dump")
        .arg("--dbname")
        .arg(&pg.url)
        .output()
        .unwrap();
    assert!(
        dump.status.success(),
        "{}",
        String::from_utf8_lossy(&dump.stderr)
    );
    assert!(dump.stdout.len() > 10_000, "a dump of the whole store");
    hits.extend(n.hits("pg_dump", &dump.stdout));
    assert!(hits.is_empty(), "found in the clear: {hits:#?}");
}
