//! Install stacks: what the customer applies once in their own account to
//! run an install's runner (so far the `vm` flavour: a shell bundle and a
//! systemd unit), and the stack's phone-home on the Runner API, which
//! trades the stack's one-time token for the runner's token and records
//! the stack's outputs as `.nuon.install_stack.outputs.*`.

use std::collections::BTreeMap;
use std::time::Duration;

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::{get, post};
use nuon_core::audit::AuditEntry;
use nuon_core::token::{hash_token, issue_runner_token, issue_stack_token};
use nuon_core::wire::{InstallStack, PhoneHome, PhoneHomeAnswer, StackFile, routes};
use nuon_core::{OrgId, now_ms};
use serde::Deserialize;
use serde_json::json;

use super::apps::install_of;
use super::control::require_admin;
use super::doc::Op;
use super::{ApiAuth, Body, Q, SharedState, Source};
use crate::error::Error;
use crate::store::{StackRedeem, StoredInstall};

/// How long a downloaded stack's one-time token works.
const STACK_TOKEN_TTL: Duration = Duration::from_secs(24 * 3600);
/// The most outputs a stack may report, and the longest value.
const MAX_OUTPUTS: usize = 100;
const MAX_OUTPUT_CHARS: usize = 4096;

pub(super) fn ops() -> Vec<Op> {
    vec![
        Op::get(routes::INSTALL_STACK, "getInstallStack", "The install's stack: what the customer applies once to run the install's runner (format vm: install.sh, a systemd unit and its settings). Each download carries a new one-time token for the stack's phone-home (valid 24 h, single use); the one before stops working. Needs an admin token.", get(stack))
            .query("format", json!({"type": "string", "enum": ["vm"]}), "The flavour (default vm).")
            .returns::<InstallStack>(200),
    ]
}

pub(super) fn runner_routes() -> axum::Router<SharedState> {
    axum::Router::new().route(routes::PHONE_HOME, post(phone_home))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct StackQuery {
    format: Option<String>,
}

async fn stack(
    State(state): State<SharedState>,
    Source(source): Source,
    auth: ApiAuth,
    Path(key): Path<String>,
    Q(q): Q<StackQuery>,
) -> Result<Json<InstallStack>, Error> {
    // It issues a token: an admin's call, though a read.
    require_admin(&auth)?;
    let format = q.format.unwrap_or_else(|| "vm".into());
    if format != "vm" {
        return Err(Error::bad_request(format!(
            "stack format {format:?} is not made here yet: the formats are vm (a shell bundle and a systemd unit)"
        )));
    }
    let install = install_of(&state, &auth, &key).await?;
    // What can fail first: the token before stays good until a new one
    // is handed out.
    let api = state.engine.runner_url_known().ok_or_else(|| {
        Error::internal("the Runner API's address is not known yet: the control plane is starting")
    })?;
    let signing_key = state.signing_public_key(&auth.0.org_id).await?.to_string();
    let token = issue_stack_token();
    let expires = now_ms() + STACK_TOKEN_TTL.as_millis() as i64;
    state
        .store
        .set_stack_token(&auth.0.org_id, &install.id, &token.hash, expires)
        .await?;
    // A GET, so not in the write layer's record: a credential was issued.
    let entry = AuditEntry::new(
        now_ms(),
        auth.0.token_id.as_str(),
        "getInstallStack",
        format!("/v1/installs/{}/stack", install.id),
        source,
        "200",
    )
    .with_detail(format!(
        "a new one-time stack token for install {} (the one before stops working)",
        install.name
    ));
    state.auditor.record(&auth.0.org_id, entry).await;
    Ok(Json(vm_stack(
        &install,
        api,
        &signing_key,
        &token.secret,
        expires,
    )))
}

/// The `vm` flavour: `install.sh`, the unit it installs, and its settings.
fn vm_stack(
    install: &StoredInstall,
    api: &str,
    signing_key: &str,
    token: &str,
    expires: i64,
) -> InstallStack {
    let env = format!(
        "# The runner of install {name} ({id}). Holds a one-time token: keep it private.\n\
         NUON_RUNNER_API_URL={api}\n\
         NUON_RUNNER_SIGNING_KEY={signing_key}\n\
         NUON_RUNNER_INSTALL_TOKEN={token}\n",
        name = install.name,
        id = install.id,
    );
    InstallStack {
        install: install.name.clone(),
        format: "vm".into(),
        files: vec![
            StackFile {
                path: "install.sh".into(),
                contents: INSTALL_SH.into(),
                mode: 0o755,
            },
            StackFile {
                path: "nuon-runner.service".into(),
                contents: UNIT.into(),
                mode: 0o644,
            },
            StackFile {
                path: "nuon-runner.env".into(),
                contents: env,
                mode: 0o600,
            },
        ],
        instructions: format!(
            "On the machine that will run install {}'s runner, as root: `sh install.sh` (installs nuon-runner to /opt/nuon-runner, its unit, and starts it; \
             `--binary PATH` names the nuon-runner binary to install, `--output KEY=VALUE` adds a stack output, `--no-systemd` starts the runner in the foreground instead). \
             The runner phones home once with the one-time token in nuon-runner.env (it expires in 24 h and works once); then `nuon installs provision {}`.",
            install.name, install.name
        ),
        token_expires_at_ms: expires,
    }
}

/// The VM bundle's installer: POSIX sh, no dependency beyond coreutils.
const INSTALL_SH: &str = r#"#!/bin/sh
# Installs an install's nuon-runner on this machine, and starts it: as a
# systemd service, or with --no-systemd in the foreground. The runner
# phones home once with the one-time token in nuon-runner.env and keeps
# the runner token it gets in its work directory.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
prefix=/opt/nuon-runner
work_dir=/var/lib/nuon-runner
binary=
systemd=1
outputs=
fail() { printf 'install.sh: %s\n' "$1" >&2; exit 64; }
while [ $# -gt 0 ]; do
  case "$1" in
    --prefix) prefix=${2:?--prefix needs a directory}; shift 2 ;;
    --work-dir) work_dir=${2:?--work-dir needs a directory}; shift 2 ;;
    --binary) binary=${2:?--binary needs a path}; shift 2 ;;
    --output)
      pair=${2:?--output needs KEY=VALUE}
      # A name, then a value with no blank, quote, $, backquote or backslash:
      # it goes into a settings file both systemd and sh read alike.
      printf '%s' "$pair" | grep -Eq '^[A-Za-z_][A-Za-z0-9_]{0,63}=[^[:space:]"'"'"'$`\\]*$' \
        || fail "--output takes KEY=VALUE (KEY: letters, digits and _; VALUE: no blank, quote, \$, backquote or backslash), not $pair"
      outputs="$outputs $pair"; shift 2 ;;
    --no-systemd) systemd=0; shift ;;
    -h|--help)
      echo "usage: install.sh [--binary PATH] [--prefix DIR] [--work-dir DIR] [--output KEY=VALUE]... [--no-systemd]"
      exit 0 ;;
    *) fail "unknown argument $1 (see --help)" ;;
  esac
done
for d in "$prefix" "$work_dir"; do
  printf '%s' "$d" | grep -Eq '^/[A-Za-z0-9._/-]+$' \
    || fail "$d: give an absolute path of letters, digits, . _ - and /"
done
if [ -z "$binary" ]; then
  binary=$(command -v nuon-runner || true)
fi
if [ -z "$binary" ] || [ ! -x "$binary" ]; then
  echo "install.sh: no nuon-runner binary: give --binary PATH (or put nuon-runner on PATH)" >&2
  exit 66
fi
umask 077
mkdir -p "$prefix/bin" "$work_dir"
cp "$binary" "$prefix/bin/nuon-runner.new"
chmod 0755 "$prefix/bin/nuon-runner.new"
mv "$prefix/bin/nuon-runner.new" "$prefix/bin/nuon-runner"
# What the stack reports on phoning home, with what --output added.
stack_outputs="hostname=$(uname -n) os=$(uname -s | tr 'A-Z' 'a-z') arch=$(uname -m)$outputs"
{
  cat "$here/nuon-runner.env"
  printf 'NUON_RUNNER_WORK_DIR=%s\n' "$work_dir"
  printf 'NUON_RUNNER_STACK_OUTPUTS="%s"\n' "$stack_outputs"
} > "$prefix/nuon-runner.env"
chmod 0600 "$prefix/nuon-runner.env"
sed -e "s#/opt/nuon-runner#$prefix#g" "$here/nuon-runner.service" > "$prefix/nuon-runner.service"
if [ "$systemd" = 1 ]; then
  cp "$prefix/nuon-runner.service" /etc/systemd/system/nuon-runner.service
  systemctl daemon-reload
  systemctl enable nuon-runner.service
  # Applied again (a new binary, new settings, a new token): restarted.
  systemctl restart nuon-runner.service
  echo "nuon-runner installed and started (systemctl status nuon-runner)"
  exit 0
fi
set -a
. "$prefix/nuon-runner.env"
set +a
exec "$prefix/bin/nuon-runner" run
"#;

/// The systemd unit `install.sh` installs (with its prefix).
const UNIT: &str = "[Unit]
Description=nuon runner: runs this install's jobs
Documentation=https://github.com/nuon-byoc/nuon
Wants=network-online.target
After=network-online.target

[Service]
Type=simple
EnvironmentFile=/opt/nuon-runner/nuon-runner.env
ExecStart=/opt/nuon-runner/bin/nuon-runner run
Restart=always
RestartSec=5
# 64: bad settings or a refused install token; restarting cannot help.
RestartPreventExitStatus=64
KillMode=mixed
TimeoutStopSec=11min
NoNewPrivileges=yes

[Install]
WantedBy=multi-user.target
";

/// What a stack may report: names like Terraform outputs, plain text.
fn check_outputs(outputs: &BTreeMap<String, String>) -> Result<(), Error> {
    if outputs.len() > MAX_OUTPUTS {
        return Err(Error::bad_request(format!(
            "a stack reports at most {MAX_OUTPUTS} outputs, not {}",
            outputs.len()
        )));
    }
    for (k, v) in outputs {
        let name_ok = k.len() <= 64
            && k.chars()
                .next()
                .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        if !name_ok {
            return Err(Error::bad_request(format!(
                "stack output {:?} is not a name: letters, digits and _, starting with a letter or _, at most 64",
                k.chars().take(80).collect::<String>()
            )));
        }
        if v.chars().count() > MAX_OUTPUT_CHARS || v.contains('\0') {
            return Err(Error::bad_request(format!(
                "stack output {k}: the value is longer than {MAX_OUTPUT_CHARS} characters or holds a NUL"
            )));
        }
    }
    Ok(())
}

fn when(ms: i64) -> String {
    format!("{} s ago", (now_ms() - ms).max(0) / 1000)
}

/// Trades a stack's one-time token for the runner's token (the one before
/// stops working) and records the stack's outputs.
async fn phone_home(
    State(state): State<SharedState>,
    Source(source): Source,
    Body(req): Body<PhoneHome>,
) -> Result<Json<PhoneHomeAnswer>, Error> {
    check_outputs(&req.outputs)?;
    let again = "download the stack again (`nuon installs stack INSTALL`, each download carries a new one-time token) and apply it";
    let refuse = |why: String| Error::api(StatusCode::UNAUTHORIZED, "install_token_refused", why);
    let (org, install, runner) = match state
        .store
        .redeem_stack_token(&hash_token(req.install_token.trim()), now_ms())
        .await?
    {
        StackRedeem::Redeemed {
            org,
            install,
            runner,
        } => (org, install, runner),
        StackRedeem::Used(at) => {
            return Err(refuse(format!(
                "this install token was used already ({}): a stack's token works once; {again}",
                when(at)
            )));
        }
        StackRedeem::Expired(at) => {
            return Err(refuse(format!(
                "this install token expired {}; {again}",
                when(at)
            )));
        }
        StackRedeem::Unknown => {
            return Err(refuse(format!(
                "unknown install token: not one of this control plane's, or a newer download of the stack replaced it; {again}"
            )));
        }
    };
    // A revoked runner stays revoked: a stack downloaded before does not
    // bring it back.
    let current = state.store.find_runner(&org, runner.as_str()).await?;
    if current.is_none_or(|r| r.revoked) {
        return Err(refuse(format!(
            "the install's runner is revoked (`nuon runners revoke`): its stack cannot bring it back; issue it a new token with `nuon runners rotate-token`, then {again}"
        )));
    }
    let token = issue_runner_token(&runner);
    state
        .store
        .rotate_runner_token(&org, &runner, &token.hash)
        .await?
        .ok_or_else(|| Error::not_found("the install's runner is gone"))?;
    state.forget_runner_tokens(&runner);
    let outputs = serde_json::to_string(&req.outputs)
        .map_err(|e| Error::internal(format!("cannot encode the outputs: {e}")))?;
    state
        .store
        .set_stack_outputs(&org, &install, &outputs)
        .await?;
    record(&state, &org, &install, source, &req.outputs).await;
    tracing::info!(%install, %runner, "install stack phoned home");
    Ok(Json(PhoneHomeAnswer {
        install_id: install,
        runner_id: runner,
        runner_token: token.secret,
        signing_public_key: state.signing_public_key(&org).await?.to_string(),
    }))
}

async fn record(
    state: &SharedState,
    org: &OrgId,
    install: &nuon_core::InstallId,
    source: String,
    outputs: &BTreeMap<String, String>,
) {
    let names: Vec<&str> = outputs.keys().map(String::as_str).collect();
    let entry = AuditEntry::new(
        now_ms(),
        "install-stack",
        "phoneHome",
        format!("/v1/installs/{install}"),
        source,
        "200",
    )
    .with_detail(format!(
        "the runner's token issued anew; outputs: {}",
        names.join(", ")
    ));
    state.auditor.record(org, entry).await;
}
