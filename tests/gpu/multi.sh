#!/bin/bash
# Jobs that span GPUs (issue 26) on 2 or more real GPUs: one process round robin over the GPUs,
# and a NCCL job of one rank per GPU, bare, under vgpu run --mem only, and under --core 50 and 90.
# Gang turns (DESIGN.md decision 11, lib/hook/gang.c): a job's turns on its GPUs open and close
# together, so that no turn ends between two ranks' launches of one collective; targets (issue
# 26): nccl --core 50 >= 45 % of bare, --core 90 >= 85 %, rr at its cap +-5 (tests/gpu/RESULTS-multi.md). Prints one table;
# skipped, and said, on fewer than 2 GPUs. ARBITER=1: through vgpu daemon.
#   bash tests/gpu/multi.sh [BUILD_DIR]     (GPUs 0 and 1; about 2 minutes)
set -u
B=$(cd "${1:-build}" && pwd) || exit 2
src=$(cd "$(dirname "$0")/../.." && pwd)
T=$(mktemp -d); trap 'jobs -p | xargs -r kill 2>/dev/null; rm -rf "$T"' EXIT
export PATH="$B:$PATH" VGPU_STATE_DIR=$T/state VGPU_MACHINE_DIR=$T/machine
mkdir -m 0700 "$VGPU_STATE_DIR"; mkdir -m 0755 "$VGPU_MACHINE_DIR"
. "$src/tests/gpu/arbiter.lib"; arbiter_start || exit 1
n=$(nvidia-smi -L | grep -c '^GPU ')
if [ "$n" -lt 2 ]; then echo "multi.sh: SKIP: $n GPU(s); needs 2"; exit 0; fi
python3 -c 'import torch' 2>/dev/null || { echo "multi.sh: SKIP: python3 cannot import torch"; exit 0; }
S=${MULTI_SECONDS:-10}
get() { printf '%s\n' "$1" | tr ' ' '\n' | sed -n "s/^$2=//p" | tail -1; }
run() { # label mode prefix...
  local label=$1 mode=$2; shift 2
  local out; out=$(timeout 300 "$@" python3 "$src/tests/gpu/multi.py" "$mode" "$S" 2>"$T/err" | tail -1)
  printf '%s\t%s\t%s\n' "$label" "$(get "$out" steps_per_s)" "$(get "$out" busbw_gbs)"
  [ -n "$out" ] || sed 's/^/  # /' "$T/err" | tail -3 >&2
}
{
  for m in rr nccl; do
    run "$m bare" $m env
    run "$m --mem 16G" $m vgpu run --gpu 0,1 --mem 16G --
    run "$m --core 50" $m vgpu run --gpu 0,1 --core 50 --
    run "$m --core 90" $m vgpu run --gpu 0,1 --core 90 --
  done
} > "$T/rows"
echo "| job | steps/s | all-reduce GB/s over the step | of bare |"
echo "|---|---|---|---|"
awk -F'\t' '{ split($1, w, " "); if ($1 ~ / bare$/) bare[w[1]] = $2;
  printf "| %s | %s | %s | %s |\n", $1, $2, ($3 == "" ? "-" : $3), (bare[w[1]] > 0 && $2 != "" ? sprintf("%.0f %%", 100 * $2 / bare[w[1]]) : "-") }' "$T/rows"
