//! The `vm` flavour: `install.sh` (POSIX sh: installs the runner binary
//! under a prefix, writes its settings and a systemd unit, starts the
//! service, or with `--no-systemd` the runner in the foreground), the unit,
//! and `nuon-runner.env` with the one-time token.

use super::{StackSpec, file, runner_env};
use crate::wire::StackFile;

/// The bundle's files and how to apply it.
pub(crate) fn files(spec: &StackSpec) -> (Vec<StackFile>, String) {
    let mut env = format!(
        "# The runner of install {} ({}). Holds a one-time token: keep it private.\n",
        spec.install_name, spec.install_id
    );
    for (k, v) in runner_env(spec) {
        env.push_str(&format!("{k}={v}\n"));
    }
    let files = vec![
        file("install.sh", INSTALL_SH.into(), 0o755),
        file("nuon-runner.service", UNIT.into(), 0o644),
        file("nuon-runner.env", env, 0o600),
    ];
    let instructions = format!(
        "On the machine that will run install {name}'s runner, as root: `sh install.sh` (installs nuon-runner to /opt/nuon-runner, its unit, and starts it; \
         `--binary PATH` names the nuon-runner binary to install, `--output KEY=VALUE` adds a stack output, `--no-systemd` starts the runner in the foreground instead). \
         The runner phones home once with the one-time token in nuon-runner.env (it expires in {ttl} and works once); the install's provision waits for it.",
        name = spec.install_name,
        ttl = spec.token_ttl,
    );
    (files, instructions)
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
pub(crate) const UNIT: &str = "[Unit]
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
