#!/usr/bin/env bash
# The step budget's cost in instructions: the template bench's execute loop
# (every case Go renders, ITER times) built from this tree and from BASE (the
# commit before the budget), each run under callgrind, only the loop counted.
# This VM has no hardware counters, and its timings swing by ±25 %: an
# instruction count is the same at every run.
#
#   benches/instructions/budget_cost.sh [BASE] [ITER]
#
# Needs valgrind, git, Go and sprig (the oracle picks the cases Go renders).
set -euo pipefail
base=${1:-51428dd}
iter=${2:-20}
here=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d)
trap 'git -C "$here" worktree remove --force "$work/tree" >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
command -v valgrind >/dev/null || { echo "valgrind is missing (apt-get install valgrind)" >&2; exit 1; }
git -C "$here" worktree add --detach "$work/tree" "$base" >/dev/null 2>&1
cases="$work/tree/tests/templates"
for side in base this; do
  if [ "$side" = base ]; then root="$work/tree"; else root="$here"; fi
  mkdir -p "$work/$side"
  cat > "$work/$side/Cargo.toml" <<TOML
[package]
name = "render-count-$side"
version = "0.0.0"
edition = "2024"
publish = false
[[bin]]
name = "render-count-$side"
path = "$here/benches/instructions/render_count.rs"
[dependencies]
nuon-core = { path = "$root/nuon-core" }
nuon-test-fixtures = { path = "$here/tests/fixtures" }
serde_json = "1"
tempfile = "3"
[workspace]
TOML
  cp "$root/Cargo.lock" "$work/$side/Cargo.lock"
  (cd "$work/$side" && CARGO_TARGET_DIR="$work/target" cargo build --release -q)
done
declare -A ir
for side in base this; do
  ir[$side]=$(valgrind --tool=callgrind --toggle-collect='*render_all*' \
      --callgrind-out-file="$work/cg.$side" "$work/target/release/render-count-$side" "$cases" "$iter" 2>&1 \
    | sed -n 's/.*Collected : \([0-9]*\).*/\1/p')
  echo "$side: ${ir[$side]} instructions"
done
awk -v a="${ir[base]}" -v b="${ir[this]}" -v base="$base" \
  'BEGIN { printf "this tree against %s: %+.1f %% instructions\n", base, (b / a - 1) * 100 }'
