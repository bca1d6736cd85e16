# Every command's --json output against man/vgpu-json.7, key by key (the checker is
# tests/cli/jsondoc.lib): each key the output has is documented under that command, and each
# documented key that is not marked optional is there. vgpu mode/timeslice/mps: mps_json.sh.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/jsondoc.lib"
export VGPU_FAKE_ROOT=1   # mig enable/create/destroy need root on the simulated GPU

# ---- vgpu list ----
run vgpu list --json
assert_rc "vgpu list --json: 0" 0
check_doc "vgpu list --json" "$out"

# ---- vgpu ps: no job, then a job with a process, --mem and --core (every key appears) ----
run vgpu ps --json
check_doc "vgpu ps --json" "$out"
# ... and a child outside the limiter (no LD_PRELOAD), for the outside_* keys.
vgpu run --name probe --mem 4G --core 30 -- sh -c '
  env -u LD_PRELOAD alloc_probe alloc 16M hold > "$0/outside.out" 2>&1 & echo $! > "$0/outside.pid"
  exec alloc_probe alloc 64M hold' "$T_DIR" >"$T_DIR/probe.out" 2>&1 &
job=$!
wait_until 30 grep -q holding "$T_DIR/probe.out" && wait_until 30 grep -q holding "$T_DIR/outside.out"
run vgpu ps -q
[ -n "$out" ] && ok "the job is listed" || not_ok "the job is listed" "$(cat "$T_DIR/probe.out")"
run vgpu ps --json
assert_rc "vgpu ps --json: 0" 0
assert_eq "the job has its process and limits" "1 4294967296 30" \
  "$(jq -r '.jobs[0] | "\(.processes | length) \(.gpus[0].mem_limit_bytes) \(.gpus[0].core_limit_percent)"' <<<"$out")"
check_doc "vgpu ps --json" "$out"
# ... and a damaged region (an empty file), for the damaged_jobs keys.
: >"$VGPU_STATE_DIR/jobs/cccccccccccc.region"
run vgpu ps --json
check_doc "vgpu ps --json" "$out"
rm -f "$VGPU_STATE_DIR/jobs/cccccccccccc.region"
doc_all_seen "vgpu ps --json"
run vgpu ps -q --json
check_doc "vgpu ps -q --json" "$out"
assert_eq "ps -q --json: jobs are id strings" "string" "$(jq -r '.jobs[0] | type' <<<"$out")"
kill $job "$(cat "$T_DIR/outside.pid")" 2>/dev/null; wait $job 2>/dev/null
run vgpu ps --json            # the job has ended (ended jobs stay listed a while)
check_doc "vgpu ps --json" "$out"
run vgpu run -- sh -c 'exit 3'
run vgpu ps --json
check_doc "vgpu ps --json" "$out"

# ---- vgpu mig on the H100: MIG off, on, instances (one without a compute instance) ----
use_scenario h100
run vgpu mig status --json;   check_doc "vgpu mig status --json" "$out"
run vgpu mig profiles --json; check_doc "vgpu mig profiles --json" "$out"
run vgpu mig list --json;     check_doc "vgpu mig list --json" "$out"
run vgpu mig export --json;   check_doc "vgpu mig export --json" "$out"
run vgpu mig enable --json
assert_rc "vgpu mig enable --json: 0" 0
check_doc "vgpu mig enable --json" "$out"
run vgpu mig enable --json;   check_doc "vgpu mig enable --json" "$out"   # already enabled
run vgpu mig create 3g.40gb,1g.10gb --json
assert_rc "vgpu mig create --json: 0" 0
check_doc "vgpu mig create --json" "$out"
run vgpu mig create 1g.10gb --no-ci --json
assert_eq "create --no-ci: compute instance null" null "$(jq '.created[0].compute_instance_id' <<<"$out")"
check_doc "vgpu mig create --json" "$out"
doc_all_seen "vgpu mig create --json"
gi=$(jq -r '.created[0].gpu_instance_id' <<<"$out")
run vgpu mig status --json
assert_eq "status lists the three instances" 3 "$(jq '.gpus[0].gpu_instances | length' <<<"$out")"
check_doc "vgpu mig status --json" "$out"
doc_all_seen "vgpu mig status --json"
run vgpu mig profiles --json; check_doc "vgpu mig profiles --json" "$out"
doc_all_seen "vgpu mig profiles --json"
gi3=$(vgpu mig list --json | jq -r '.gpus[0].gpu_instances[] | select(.profile == "3g.40gb") | .gpu_instance_id')
run vgpu mig profiles --gi "$gi3" --json
assert_rc "vgpu mig profiles --gi --json: 0" 0
check_doc "vgpu mig profiles --gi ID --json" "$out"
doc_all_seen "vgpu mig profiles --gi ID --json"
run vgpu mig list --json;     check_doc "vgpu mig list --json" "$out"
doc_all_seen "vgpu mig list --json"
run vgpu mig export --json
assert_eq "export: a string and an object entry" "object string" \
  "$(jq -r '[.gpus[0].instances[] | type] | unique | join(" ")' <<<"$out")"
check_doc "vgpu mig export --json" "$out"
doc_all_seen "vgpu mig export --json"
printf '%s\n' "$out" >"$T_DIR/layout.json"
run vgpu list --json          # now with MIG devices
check_doc "vgpu list --json" "$out"
doc_all_seen "vgpu list --json"

run vgpu mig disable --json   # refused: instances exist
assert_rc "vgpu mig disable --json with instances: busy" 7
check_doc "vgpu mig disable --json" "$out"
run vgpu mig destroy "$gi" --json
assert_rc "vgpu mig destroy --json: 0" 0
check_doc "vgpu mig destroy --json" "$out"
doc_all_seen "vgpu mig destroy --json"
run vgpu mig apply "$T_DIR/layout.json" --dry-run --json
check_doc "vgpu mig apply --json" "$out"
run vgpu mig apply "$T_DIR/layout.json" --json
assert_rc "vgpu mig apply --json: 0" 0
assert_eq "apply recreated the instance" "true" "$(jq -r '.changed' <<<"$out")"
check_doc "vgpu mig apply --json" "$out"
doc_all_seen "vgpu mig apply --json"
run vgpu mig destroy all --json; check_doc "vgpu mig destroy --json" "$out"
run vgpu mig disable --json
assert_rc "vgpu mig disable --json: 0" 0
check_doc "vgpu mig disable --json" "$out"
doc_all_seen "vgpu mig disable --json"
doc_all_seen "vgpu mig enable --json"

# ---- every command that takes --json has a section ----
# "vgpu CMD --json", or for a command with verbs "vgpu CMD VERB ... --json" for each verb whose
# usage line shows --json. Aliases (their --help prints their command's usage) are skipped.
for c in $(vgpu completion --complete 1 vgpu | grep -vx help); do
  vgpu completion --complete 2 vgpu "$c" -- | grep -qx -- --json || continue
  help=$(vgpu "$c" --help 2>&1)
  [ "$(sed -n '1s/^usage: vgpu \([a-z-]*\).*/\1/p' <<<"$help")" = "$c" ] || continue
  verbs=$(vgpu completion --complete 2 vgpu "$c")
  if [ -z "$verbs" ]; then
    grep -qx "\.SS vgpu $c --json" "$doc" && ok "vgpu $c --json is documented" \
      || not_ok "vgpu $c --json is documented in vgpu-json(7)"
    continue
  fi
  for v in $(sed '/^$/q' <<<"$help" | awk -v c="$c" '{ sub(/^usage:/, "") } $1 == "vgpu" && $2 == c && /--json/ { print $3 }'); do
    grep -qx "\.SS vgpu $c $v\( .*\)\? --json" "$doc" && ok "vgpu $c $v --json is documented" \
      || not_ok "vgpu $c $v --json is documented in vgpu-json(7)"
  done
done
done_testing
