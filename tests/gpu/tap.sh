# Sourced by the read-only real-GPU checks (list.sh, mig.sh, policy.sh): TAP assertions and the
# nvidia-smi guard. Sets build (the build directory, $1 of the script) and V (its vgpu).
set -u
build=${1:-build}
V=$build/vgpu
n=0 fail=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
not_ok() { n=$((n + 1)); fail=$((fail + 1)); echo "not ok $n - $1"; [ $# -gt 1 ] && printf '%s\n' "$2" | sed 's/^/#   /'; }
command -v nvidia-smi >/dev/null || { echo "ok 1 - nvidia-smi # SKIP not installed"; exit 0; }
