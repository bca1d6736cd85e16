# vgpu mig on the simulated H100 and A100: every verb, pending mode, permissions, all-or-nothing
# create, in-use refusal, apply idempotence and the export/apply round trip, apply's plan and
# its check of the whole layout before any change, and --json documents on failure.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/jsondoc.lib"
export VGPU_FAKE_ROOT=1

for sc in h100 a100; do
  use_scenario $sc
  run vgpu mig status
  assert_rc "$sc: status" 0
  assert_match "$sc: status shows MIG disabled, nothing pending" '^0 .* disabled +disabled +no' "$out"
  run vgpu mig status --json
  assert_eq "$sc: status --json mode" "disabled" "$(jq -r '.gpus[0].mig_mode_current' <<<"$out")"
  assert_eq "$sc: status --json reset_required" "false" "$(jq -r '.gpus[0].reset_required' <<<"$out")"
  run vgpu mig profiles --placements
  assert_rc "$sc: profiles" 0
  run vgpu mig profiles --json
  assert_eq "$sc: profiles --json lists 7 profiles" 7 "$(jq '.gpus[0].profiles | length' <<<"$out")"
  assert_eq "$sc: 1g profile has ID 19 and 7 placements" "19 7" \
    "$(jq -r '.gpus[0].profiles[] | select(.name | test("^1g\\.[0-9]+gb$")) | "\(.id) \(.placements | length)"' <<<"$out" | head -n1)"
done

use_scenario a100
run vgpu mig profiles --json
assert_eq "a100: names as the MIG guide" "1g.5gb 2g.10gb 3g.20gb 4g.20gb 7g.40gb 1g.5gb+me 1g.10gb" \
  "$(jq -r '[.gpus[0].profiles[].name] | join(" ")' <<<"$out")"
assert_eq "a100: 3g.20gb memory" $((19968 * 1048576)) "$(jq '.gpus[0].profiles[] | select(.name=="3g.20gb") | .mem_total_bytes' <<<"$out")"

# ---- mode and permissions (H100) ----
use_scenario h100
run vgpu mig create 1g.10gb
assert_rc "create with MIG disabled fails" 1
assert_contains "... and says to enable it" "enable it first" "$err"
VGPU_FAKE_ROOT=0 run vgpu mig enable
assert_rc "enable as non-root: permission" 6
assert_contains "... says root is needed" "requires root" "$err"
run vgpu mig enable
assert_rc "enable" 0
assert_contains "enable reports the change" "Enabled MIG mode on GPU 0" "$out"
run vgpu mig enable
assert_contains "enable again: already" "already enabled" "$out"

VGPU_FAKE_ROOT=0 run vgpu mig create 1g.10gb
assert_rc "create as non-root: permission" 6
assert_contains "... names the capability file" "capabilities/mig/config" "$err"

# ---- create: counts, placements, --no-ci, --ci ----
run vgpu mig create 3g.40gb,2x1g.10gb,1g.10gb:4
assert_rc "create SPEC with counts and a placement" 0
run vgpu mig list --json
assert_eq "four GPU instances" 4 "$(jq '.gpus[0].gpu_instances | length' <<<"$out")"
assert_eq "placement honoured (1g.10gb at 4)" 1 "$(jq '[.gpus[0].gpu_instances[] | select(.profile=="1g.10gb" and .placement_start==4)] | length' <<<"$out")"
assert_eq "each has a compute instance with a MIG UUID" 4 "$(jq '[.gpus[0].gpu_instances[].compute_instances[] | select(.uuid | startswith("MIG-"))] | length' <<<"$out")"
uuid=$(jq -r '.gpus[0].gpu_instances[] | select(.profile=="3g.40gb") | .compute_instances[0].uuid' <<<"$out")
run vgpu list --gpu "$uuid" --json
assert_rc "the MIG UUID is a valid --gpu selector" 0
run vgpu mig list
assert_contains "list shows the MIG UUID" "$uuid" "$out"

run vgpu mig create 3g.40gb
assert_rc "no room left: no capacity" 9
assert_contains "... says so" "cannot place 3g.40gb" "$err"
run vgpu mig create 9g.90gb
assert_rc "unknown profile: usage" 2
assert_contains "... lists the valid ones" "1g.10gb (ID 19)" "$err"
run vgpu mig create 1g.10gb:3 --gpu 0
assert_rc "a placement inside another instance: no capacity" 9
run vgpu mig destroy all
assert_rc "destroy all" 0
run vgpu mig list --json
assert_eq "nothing left" 0 "$(jq '.gpus[0].gpu_instances | length' <<<"$out")"

run vgpu mig create 2x19 --no-ci --json
assert_rc "create by ID with --no-ci" 0
assert_eq "--no-ci: no compute instance" "null null" "$(jq -r '[.created[].compute_instance_id] | map(tostring) | join(" ")' <<<"$out")"
run vgpu mig create 3g.40gb --ci 1c.3g.40gb --json
assert_rc "create with --ci" 0
assert_eq "--ci picks the compute profile" "1c.3g.40gb" "$(jq -r '.created[0].compute_instance_profile' <<<"$out")"
gi3=$(jq -r '.created[0].gpu_instance_id' <<<"$out")
run vgpu mig profiles --gi "$gi3" --json
assert_eq "profiles --gi lists compute profiles, default marked" "3g.40gb" \
  "$(jq -r '.gpu_instances[0].compute_instance_profiles[] | select(.default) | .name' <<<"$out")"
run vgpu mig create 1g.10gb --ci 5c
assert_rc "bad --ci: usage error" 2
assert_contains "... and nothing is left behind" "nothing was changed" "$err"
run vgpu mig destroy 999
assert_rc "destroy unknown ID" 8
must vgpu mig destroy all
# Bad requests are told apart, and refused before anything is created (issue 27).
for ci in bogus 2c; do
  run vgpu mig create 1g.10gb --ci "$ci"
  assert_rc "--ci $ci on a 1g instance: usage error" 2
  assert_not_contains "... found before a GPU instance was created (none to roll back)" "destroyed again" "$err"
  assert_contains "... saying which names fit" "give Nc (N from 1 to 1)" "$err"
done
run vgpu mig create 1g.10gb:1:2
assert_rc "1g.10gb:1:2: usage error" 2
assert_contains "... named as two placements, not an unknown profile" "more than one ':'" "$err"
run vgpu mig create 1g.10gbb
assert_rc "1g.10gbb: usage error" 2
assert_contains "... with a suggestion" "did you mean '1g.10gb'?" "$err"
run vgpu mig list --json
assert_eq "none of these created anything" 0 "$(jq '.gpus[0].gpu_instances | length' <<<"$out")"
printf '{ "schema": 1, "gpus": [ { "gpu": "0", "mig": true, "instances": [ %s"1g.10gb" ] } ] }\n' \
  "$(printf '"1g.10gb", %.0s' $(seq 32))" >"$T_DIR/33.json"
run vgpu mig apply "$T_DIR/33.json" --dry-run
assert_rc "a layout of 33 instances: usage error" 2
assert_contains "... saying more than 32, not more than 0" "more than 32 instances on one GPU" "$err"
printf '{ "schema": 1, "gpus": [ { "gpu": "0", "mig": true,\n "instances": [ "1g.10gb" ], "instances": [ "7g.80gb" ] } ] }\n' >"$T_DIR/dup.json"
run vgpu mig apply "$T_DIR/dup.json" --dry-run
assert_rc "a layout with a key twice: usage error" 2
assert_contains "... naming the key and its line" 'the key "instances" twice in one object (line 2)' "$err"

# ---- in use: destroy refuses naming the PIDs ----
must vgpu mig create 3g.40gb:0 --json
gid=$(jq -r '.created[0].gpu_instance_id' <<<"$out"); cid=$(jq -r '.created[0].compute_instance_id' <<<"$out")
fakegpu-ctl hold "0:$gid:$cid" 1048576 >"$T_DIR/hold.out" 2>&1 &
hold=$!
wait_until 20 grep -q ready "$T_DIR/hold.out"
run vgpu mig destroy "$gid"
assert_rc "destroy while in use: busy" 7
assert_contains "... names the PID" "$hold" "$err"
run vgpu mig disable
assert_rc "disable with instances: busy" 7
kill $hold; wait $hold 2>/dev/null
run vgpu mig destroy "$gid"
assert_rc "destroy once the process is gone" 0

# ---- pending mode: a process on the GPU keeps the change pending ----
run vgpu mig disable
assert_rc "disable (idle GPU)" 0
fakegpu-ctl hold 0 1048576 >"$T_DIR/hold2.out" 2>&1 &
hold=$!
wait_until 20 grep -q ready "$T_DIR/hold2.out"
run vgpu mig enable
assert_rc "enable while in use: pending" 10
assert_contains "... names the process" "$hold" "$err"
assert_contains "... says what must happen" "reset the GPU" "$err"
run vgpu mig status --json
assert_eq "status: current disabled, pending enabled, reset needed" "disabled enabled true" \
  "$(jq -r '.gpus[0] | "\(.mig_mode_current) \(.mig_mode_pending) \(.reset_required)"' <<<"$out")"
run vgpu mig list --json
assert_eq "list --json shows the pending change too" "disabled enabled true" \
  "$(jq -r '.gpus[0] | "\(.mig_mode_current) \(.mig_mode_pending) \(.reset_required)"' <<<"$out")"
check_doc "vgpu mig list --json" "$out"
run vgpu mig enable --json
assert_rc "enable --json while pending: 10" 10
assert_eq "... ok false, the pending message as error" "false true" \
  "$(jq -r '"\(.ok) \(.error | test("pending on GPU 0"))"' <<<"$out")"
assert_contains "... and on stderr" "is pending on GPU 0" "$err"
kill $hold; wait $hold 2>/dev/null
must fakegpu-ctl reset 0
run vgpu mig status --json
assert_eq "after a reset the mode is current" "enabled false" \
  "$(jq -r '.gpus[0] | "\(.mig_mode_current) \(.reset_required)"' <<<"$out")"
run vgpu mig list --json
assert_eq "... list --json agrees" "enabled enabled false" \
  "$(jq -r '.gpus[0] | "\(.mig_mode_current) \(.mig_mode_pending) \(.reset_required)"' <<<"$out")"
VGPU_FAKE_MIG_RESET_REQUIRED=1 run vgpu mig disable
assert_rc "pass-through VM: pending" 10
assert_contains "... says to reboot" "reboot" "$err"
must fakegpu-ctl reset 0
must vgpu mig enable

# ---- all-or-nothing: the third create fails ----
use_scenario a100
must vgpu mig enable
VGPU_FAKE_FAIL=mig_create_fail_after=2 run vgpu mig create 3x1g.5gb
assert_rc "injected failure on the third create" 9
assert_contains "... names the failing instance" "(3 of 3)" "$err"
assert_contains "... and rolls back" "2 instances this call had created were destroyed again" "$err"
run vgpu mig list --json
assert_eq "nothing left after the rollback" 0 "$(jq '.gpus[0].gpu_instances | length' <<<"$out")"

# ---- apply / export ----
cat >"$T_DIR/layout.json" <<'EOF'
{ "schema": 1, "gpus": [ { "gpu": "0", "mig": true, "instances": [ "3g.20gb", "2x1g.5gb", { "profile": "2g.10gb", "ci": "none" } ] } ] }
EOF
run vgpu mig apply "$T_DIR/layout.json" --dry-run
assert_rc "apply --dry-run" 0
assert_contains "dry run prints the plan" "create 3g.20gb" "$out"
run vgpu mig list --json
assert_eq "dry run changes nothing" 0 "$(jq '.gpus[0].gpu_instances | length' <<<"$out")"
run vgpu mig apply "$T_DIR/layout.json"
assert_rc "apply" 0
run vgpu mig list --json
assert_eq "apply created four instances" 4 "$(jq '.gpus[0].gpu_instances | length' <<<"$out")"
before=$out
run vgpu mig apply "$T_DIR/layout.json" --json
assert_rc "apply again" 0
assert_eq "apply again: nothing changed" "false" "$(jq -r '.changed' <<<"$out")"
run vgpu mig list --json
assert_eq "apply again touched nothing" "$before" "$out"
run vgpu mig export
assert_rc "export" 0
printf '%s\n' "$out" >"$T_DIR/exported.json"
run vgpu mig apply "$T_DIR/exported.json"
assert_contains "export | apply is a no-op" "already matches" "$out"
must vgpu mig destroy all
run vgpu mig apply "$T_DIR/exported.json"
assert_rc "apply the export onto an empty GPU" 0
run vgpu mig list --json
assert_eq "round trip restores the same layout" \
  "$(jq -c '[.gpus[0].gpu_instances[] | [.profile, .placement_start, (.compute_instances | map(.profile))]] | sort' <<<"$before")" \
  "$(jq -c '[.gpus[0].gpu_instances[] | [.profile, .placement_start, (.compute_instances | map(.profile))]] | sort' <<<"$out")"
echo '{ "gpus": [ { "gpu": "0", "mig": true, "instances": [ "7g.40gb" ] } ] }' >"$T_DIR/full.json"
run vgpu mig apply "$T_DIR/full.json"
assert_rc "apply a different layout" 0
assert_contains "... destroys what does not fit the layout" "destroy GPU instance" "$out"
run vgpu mig list --json
assert_eq "now one 7g instance" "7g.40gb" "$(jq -r '[.gpus[0].gpu_instances[].profile] | join(" ")' <<<"$out")"
echo '{ "gpus": [ { "gpu": "0", "mig": false } ] }' >"$T_DIR/off.json"
run vgpu mig apply "$T_DIR/off.json"
assert_rc "apply mig off" 0
run vgpu mig status --json
assert_eq "MIG is off" "disabled" "$(jq -r '.gpus[0].mig_mode_current' <<<"$out")"
echo '{ "gpus": [ { "gpu": "0", "mig": true, "bogus": 1 } ] }' >"$T_DIR/bad.json"
run vgpu mig apply "$T_DIR/bad.json"
assert_rc "unknown key in a layout: usage" 2
assert_contains "... names it" '"bogus"' "$err"

# ---- usage ----
run vgpu mig
assert_rc "no verb: usage" 2
run vgpu mig crate 1g.5gb
assert_contains "typo in a verb: suggestion" "did you mean 'create'" "$err"
run vgpu mig list --no-ci
assert_rc "--no-ci outside create: usage" 2
run vgpu mig status --gpu 7
assert_rc "unknown GPU: usage" 2

# ---- apply: each step once, in the order carried out, also when the mode changes ----
use_scenario h100
echo '{ "gpus": [ { "gpu": "0", "mig": true, "instances": [ "3g.40gb", "1g.10gb" ] } ] }' >"$T_DIR/two.json"
want='["enable MIG mode","create 3g.40gb","create 1g.10gb"]'
run vgpu mig apply "$T_DIR/two.json" --dry-run --json
assert_eq "apply --dry-run --json with MIG off: each step once" "$want" "$(jq -c '.gpus[0].plan' <<<"$out")"
run vgpu mig apply "$T_DIR/two.json" --dry-run
assert_eq "... the text plan too" "$want" "$(sed -n 's/^  //p' <<<"$out" | jq -Rnc '[inputs]')"
run vgpu mig apply "$T_DIR/two.json"
assert_rc "apply enabling MIG" 0
assert_eq "... prints each step once, in order" "$want" "$(sed -n 's/^  //p' <<<"$out" | jq -Rnc '[inputs]')"
run vgpu mig list --json
assert_eq "... and created two instances" "1g.10gb 3g.40gb" "$(jq -r '[.gpus[0].gpu_instances[].profile] | sort | join(" ")' <<<"$out")"
must vgpu mig destroy all
must vgpu mig disable
run vgpu mig apply "$T_DIR/two.json" --json
assert_rc "apply --json enabling MIG" 0
assert_eq "... its plan lists each step once" "$want" "$(jq -c '.gpus[0].plan' <<<"$out")"
assert_eq "... ok true, error null" "true null" "$(jq -r '"\(.ok) \(.error)"' <<<"$out")"
check_doc "vgpu mig apply --json" "$out"
# The kept 1g.10gb at 0 is in the way of 4g.40gb: start from an empty GPU rather than fail
# half way (the 2g.20gb destroyed, the 4g.40gb not created).
must vgpu mig destroy all
must vgpu mig create 1g.10gb:0,2g.20gb:2
echo '{ "gpus": [ { "gpu": "0", "mig": true, "instances": [ "4g.40gb", "1g.10gb" ] } ] }' >"$T_DIR/blocked.json"
run vgpu mig apply "$T_DIR/blocked.json"
assert_rc "apply where a kept instance is in the way" 0
run vgpu mig list --json
assert_eq "... gives the layout" "1g.10gb 4g.40gb" "$(jq -r '[.gpus[0].gpu_instances[].profile] | sort | join(" ")' <<<"$out")"

# ---- apply checks the whole layout before it changes anything ----
must vgpu mig destroy all
must vgpu mig disable
mig_modes() { vgpu mig status --json | jq -r '[.gpus[] | "\(.mig_mode_current)/\(.mig_mode_pending)"] | join(" ")'; }
echo '{ "gpus": [ { "gpu": "0", "mig": true, "instances": [ "3g.40gb", "9g.90gb" ] } ] }' >"$T_DIR/unknown.json"
run vgpu mig apply "$T_DIR/unknown.json"
assert_rc "unknown profile on a GPU with MIG off: usage" 2
assert_contains "... names it, the entry and the GPU, and the valid ones" \
  "gpus[0], GPU 0 (NVIDIA H100 80GB HBM3): unknown profile '9g.90gb'; valid: 1g.10gb (ID 19)" "$err"
assert_contains "... says nothing was changed" "nothing was changed" "$err"
assert_eq "... and MIG is still off" "disabled/disabled" "$(mig_modes)"
run vgpu mig apply "$T_DIR/unknown.json" --json
assert_rc "... --json: usage" 2
assert_eq "... --json: ok false, changed false, no GPU touched" "false false 0" \
  "$(jq -r '"\(.ok) \(.changed) \(.gpus | length)"' <<<"$out")"
assert_eq "... --json: error is the message on stderr" "${err#vgpu mig: error: }" "$(jq -r '.error' <<<"$out")"
check_doc "vgpu mig apply --json" "$out"
for bad in '"1g.10gb:7"' '"3x3g.40gb"' '"2x3g.40gb","1g.10gb"' '"4g.40gb","3g.40gb:0"' \
           '{ "profile": "1g.10gb", "ci": "2c" }'; do
  echo "{ \"gpus\": [ { \"gpu\": \"0\", \"mig\": true, \"instances\": [ $bad ] } ] }" >"$T_DIR/bad2.json"
  run vgpu mig apply "$T_DIR/bad2.json"
  assert_rc "layout [$bad] refused before any change: usage" 2
done
assert_eq "... and MIG is still off" "disabled/disabled" "$(mig_modes)"
echo '{ "gpus": [ { "gpu": "all", "mig": true }, { "gpu": "0", "mig": false } ] }' >"$T_DIR/twice.json"
run vgpu mig apply "$T_DIR/twice.json"
assert_rc "a GPU named by two entries: usage" 2
assert_contains "... says so" "gpus[1], GPU 0 (NVIDIA H100 80GB HBM3): already named by gpus[0]" "$err"

use_scenario mixed   # two H100, one A100: a bad entry for the A100 stops the H100 entry too
echo '{ "gpus": [ { "gpu": "0", "mig": true, "instances": [ "3g.40gb" ] },
                  { "gpu": "2", "mig": true, "instances": [ "3g.40gb" ] } ] }' >"$T_DIR/mixed.json"
run vgpu mig apply "$T_DIR/mixed.json"
assert_rc "a profile the A100 lacks: usage" 2
assert_contains "... names the entry and the GPU" "gpus[1], GPU 2 (NVIDIA A100-SXM4-40GB): unknown profile '3g.40gb'" "$err"
assert_eq "... and no GPU was changed" "disabled/disabled disabled/disabled disabled/disabled" "$(mig_modes)"

printf '%s\n' '{ "gpus": [ { "model": "h100-80gb" }, { "model": "h100-80gb", "mig_capable": false } ] }' >"$T_DIR/nomig.scenario.json"
export VGPU_FAKE_SCENARIO=$T_DIR/nomig.scenario.json; rm -f "$VGPU_FAKE_STATE"
echo '{ "gpus": [ { "gpu": "0", "mig": true }, { "gpu": "1", "mig": true } ] }' >"$T_DIR/nomig.json"
run vgpu mig apply "$T_DIR/nomig.json"
assert_rc "a GPU without MIG named explicitly: usage" 2
assert_contains "... says so" "gpus[1], GPU 1" "$err"
run vgpu mig status --json
assert_eq "... and GPU 0 was not changed" "disabled" "$(jq -r '.gpus[0].mig_mode_current' <<<"$out")"
echo '{ "gpus": [ { "gpu": "all", "mig": true } ] }' >"$T_DIR/allmig.json"
run vgpu mig apply "$T_DIR/allmig.json"
assert_rc "\"all\" skips the GPU without MIG" 0
run vgpu mig status --json
assert_eq "... and enables the other" "enabled" "$(jq -r '.gpus[0].mig_mode_current' <<<"$out")"

# ---- --json: one document on failure too, with ok false and the message as error ----
use_scenario h100
json_fails() { # desc expected-rc heading: the last run failed with a document saying why
  assert_rc "$1: exit status" "$2"
  assert_eq "$1: ok false" false "$(jq -r '.ok' <<<"$out" 2>&1)"
  assert_eq "$1: error is the message on stderr" "${err#vgpu mig: error: }" "$(jq -r '.error' <<<"$out" 2>&1)"
  check_doc "$3" "$out"
}
run vgpu mig create 1g.10gb --json
json_fails "create --json with MIG off" 1 "vgpu mig create --json"
assert_eq "... nothing created" 0 "$(jq '.created | length' <<<"$out")"
VGPU_FAKE_ROOT=0 run vgpu mig enable --json
assert_rc "enable --json as non-root: permission" 6
assert_eq "... ok false, the GPU's entry too" "false false" "$(jq -r '"\(.ok) \(.gpus[0].ok)"' <<<"$out")"
assert_contains "... error says root is needed" "requires root" "$(jq -r '.error' <<<"$out")"
check_doc "vgpu mig enable --json" "$out"
run vgpu mig enable --json
assert_eq "enable --json: ok true, error null" "true null" "$(jq -r '"\(.ok) \(.error)"' <<<"$out")"
run vgpu mig create 9g.90gb --json
json_fails "create --json, unknown profile" 2 "vgpu mig create --json"
VGPU_FAKE_FAIL=mig_create_fail_after=1 run vgpu mig create 2x1g.10gb --json
json_fails "create --json, the second fails" 9 "vgpu mig create --json"
assert_contains "... error says what the rollback undid" "instance this call had created was destroyed again" "$(jq -r '.error' <<<"$out")"
run vgpu mig create 3g.40gb --json
assert_eq "create --json: ok true, error null" "true null" "$(jq -r '"\(.ok) \(.error)"' <<<"$out")"
gi=$(jq -r '.created[0].gpu_instance_id' <<<"$out")
run vgpu mig destroy 99 --json
json_fails "destroy --json, unknown ID" 8 "vgpu mig destroy --json"
assert_eq "... nothing destroyed" 0 "$(jq '.destroyed | length' <<<"$out")"
run vgpu mig destroy --json
json_fails "destroy --json without IDs: usage" 2 "vgpu mig destroy --json"
run vgpu mig profiles --gi 99 --json
json_fails "profiles --gi 99 --json" 8 "vgpu mig profiles --gi ID --json"
run vgpu mig profiles --gi "$gi" --json
assert_eq "profiles --gi --json: ok true" "true 1" "$(jq -r '"\(.ok) \(.gpu_instances | length)"' <<<"$out")"
run vgpu mig status --gpu 7 --json
json_fails "status --json, unknown GPU" 2 "vgpu mig status --json"
run vgpu mig status --json
assert_eq "status --json: ok true, error null" "true null" "$(jq -r '"\(.ok) \(.error)"' <<<"$out")"
VGPU_FAKE_FAIL=nvml_init=driver_not_loaded run vgpu mig list --json
assert_eq "list --json without a driver: ok false" "false" "$(jq -r '.ok' <<<"$out")"
assert_contains "... error from NVML" "$(jq -r '.error // empty' <<<"$out" 2>/dev/null)" "$err"
check_doc "vgpu mig list --json" "$out"
run vgpu mig crate --json
assert_rc "unknown verb with --json: usage" 2
assert_contains "... a document saying so" "did you mean 'create'" "$(jq -r '.error' <<<"$out")"
run vgpu mig destroy all --json
assert_eq "destroy all --json: ok true" "true 1" "$(jq -r '"\(.ok) \(.destroyed | length)"' <<<"$out")"

# ---- export: --json is accepted and shown; apply ignores ok and refuses a failed export ----
run vgpu mig --help
assert_match "export's usage line shows --json" '^ +vgpu mig export +\[--gpu SEL\] \[--json\]$' "$out"
run vgpu mig export --json
assert_rc "export --json" 0
printf '%s\n' "$out" >"$T_DIR/exp.json"
run vgpu mig apply "$T_DIR/exp.json"
assert_contains "apply of an export (with ok and error) is a no-op" "already matches" "$out"
run vgpu mig export --gpu 7 --json
json_fails "export --json, unknown GPU" 2 "vgpu mig export --json"
printf '%s\n' "$out" >"$T_DIR/failed-export.json"
run vgpu mig apply "$T_DIR/failed-export.json"
assert_rc "apply refuses a failed export" 2
assert_contains "... says why" "output of a failed 'vgpu mig export'" "$err"
done_testing
