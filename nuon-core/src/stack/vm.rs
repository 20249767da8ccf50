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
    let mut files = vec![
        file("install.sh", INSTALL_SH.into(), 0o755),
        file("nuon-runner.service", UNIT.into(), 0o644),
        file("nuon-runner.env", env, 0o600),
    ];
    // The release `install.sh` downloads when no --binary is given: values
    // `RunnerDownload` checked to be plain (the installer reads the file
    // as shell).
    let download = spec.runner_download.as_ref();
    if let Some(d) = download {
        files.push(file(
            "runner-release.env",
            format!(
                "# The runner release install.sh downloads from the control plane (unless --binary names one),\n\
                 # refused unless its SHA-256 is this one.\n\
                 release_version={}\nrelease_platform={}\nrelease_url={}\nrelease_sha256={}\n",
                d.version, d.platform, d.url, d.sha256
            ),
            0o644,
        ));
    }
    let binary = match download {
        Some(d) => format!(
            "downloads nuon-runner {} ({}) from the control plane and checks its SHA-256; `--binary PATH` installs another binary instead",
            d.version, d.platform
        ),
        None => "`--binary PATH` names the nuon-runner binary to install (the control plane serves no runner release yet: `nuon runners release publish`)".into(),
    };
    let instructions = format!(
        "On the machine that will run install {name}'s runner, as root: `sh install.sh` (installs nuon-runner to /opt/nuon-runner, its unit, and starts it; \
         it {binary}; `--output KEY=VALUE` adds a stack output, `--no-systemd` starts the runner in the foreground instead). \
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
umask 077
mkdir -p "$prefix/bin" "$work_dir"
# Without --binary: the release the control plane serves (runner-release.env),
# downloaded with the stack's one-time token and refused unless its SHA-256
# is the release's.
downloaded=
if [ -z "$binary" ] && [ -f "$here/runner-release.env" ]; then
  . "$here/runner-release.env"
  here_platform="$(uname -s | tr 'A-Z' 'a-z')-$(uname -m)"
  if [ "$release_platform" != "$here_platform" ]; then
    echo "install.sh: the control plane's runner $release_version is built for $release_platform, this machine is $here_platform: give --binary PATH" >&2
    exit 66
  fi
  command -v sha256sum >/dev/null || fail "sha256sum is not installed: it checks the downloaded runner (or give --binary PATH)"
  token=$(sed -n 's/^NUON_RUNNER_INSTALL_TOKEN=//p' "$here/nuon-runner.env")
  downloaded="$prefix/bin/nuon-runner.download"
  rm -f "$downloaded"
  # The token goes in on standard input or a private file, never on a
  # command line another user could read.
  got=0
  if command -v curl >/dev/null; then
    printf 'Authorization: Bearer %s\n' "$token" \
      | curl -fsSL --retry 3 -H @- -o "$downloaded" "$release_url" || got=$?
  elif command -v wget >/dev/null; then
    wgetrc="$prefix/bin/.wgetrc.$$"
    printf 'header = Authorization: Bearer %s\n' "$token" > "$wgetrc"
    WGETRC="$wgetrc" wget -q -O "$downloaded" "$release_url" || got=$?
    rm -f "$wgetrc"
  else
    fail "neither curl nor wget is installed: one downloads the runner (or give --binary PATH)"
  fi
  if [ "$got" != 0 ] || [ ! -s "$downloaded" ]; then
    rm -f "$downloaded"
    echo "install.sh: could not download nuon-runner $release_version from $release_url (see above; a bundle's one-time token works until its runner phones home: download the stack again for a new one); or give --binary PATH to install one you have" >&2
    exit 69
  fi
  # Compared as text: coreutils' and BusyBox's sha256sum print alike.
  sum=$(sha256sum "$downloaded" | cut -d' ' -f1)
  if [ "$sum" != "$release_sha256" ]; then
    rm -f "$downloaded"
    echo "install.sh: the nuon-runner downloaded from $release_url has SHA-256 $sum, not $release_sha256 (runner $release_version as the control plane signed it): refused, nothing installed" >&2
    exit 65
  fi
  chmod 0700 "$downloaded"
  binary=$downloaded
fi
if [ -z "$binary" ]; then
  binary=$(command -v nuon-runner || true)
fi
if [ -z "$binary" ] || [ ! -x "$binary" ]; then
  echo "install.sh: no nuon-runner binary: give --binary PATH (or put nuon-runner on PATH)" >&2
  exit 66
fi
cp "$binary" "$prefix/bin/nuon-runner.new"
chmod 0755 "$prefix/bin/nuon-runner.new"
mv "$prefix/bin/nuon-runner.new" "$prefix/bin/nuon-runner"
[ -z "$downloaded" ] || rm -f "$downloaded"
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
