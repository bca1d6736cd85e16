#!/usr/bin/env bash
# One spelling of a job's --priority (issue 36 L15): high, normal or low in vgpu ps (its PRIO
# column and gpus[].priority in --json), vgpu top (its PRIO column; --json keeps the number in
# "priority", as before, and adds "priority_name") and vgpu acct. Before: ps showed no priority,
# top showed 1/0/-1.
source "$(dirname "$0")/lib.sh"

# Each job looks at itself from inside: its region is there while its command runs.
look='COLUMNS=200 vgpu ps; echo @; vgpu ps --json; echo @; COLUMNS=200 vgpu top --once; echo @; vgpu top --json -n 1 -d 0.1 </dev/null'
for p in high normal low; do
  run vgpu run --priority $p --name "p$p" -- sh -c "$look"
  assert_rc "--priority $p: the job ran" 0
  ps_table=$(printf '%s\n' "$out" | awk 'BEGIN{RS="@\n"} NR==1')
  ps_json=$(printf '%s\n' "$out" | awk 'BEGIN{RS="@\n"} NR==2' | tr -d ' \n')
  top_table=$(printf '%s\n' "$out" | awk 'BEGIN{RS="@\n"} NR==3')
  top_json=$(printf '%s\n' "$out" | awk 'BEGIN{RS="@\n"} NR==4' | tr -d ' \n')
  # PRIO is the column before AGE, whose title row says where it is.
  col=$(printf '%s\n' "$ps_table" | awk 'NR==1 { for (i = 1; i <= NF; i++) if ($i == "PRIO") print i - 2 }')  # "MEM LIMIT", "NVML USED": 2 words
  assert_eq "vgpu ps: PRIO says $p" "$p" "$(printf '%s\n' "$ps_table" | awk -v c="${col:-0}" '$2 == "p'$p'" { print $c }')"
  assert_contains "vgpu ps --json: the GPU's priority is \"$p\"" "\"priority\":\"$p\"" "$ps_json"
  assert_match "vgpu top --once: the job's row says $p" "^p$p .* $p +1( |\$)" "$(printf '%s\n' "$top_table" | grep "^p$p ")"
  n=$(case $p in high) echo 1;; normal) echo 0;; low) echo -1;; esac)
  assert_contains "vgpu top --json: \"priority\" is still the number $n" "\"priority\":$n," "$top_json"
  assert_contains "... and \"priority_name\" is \"$p\"" "\"priority_name\":\"$p\"" "$top_json"
done
run vgpu acct --json
assert_contains "vgpu acct --json spells it the same" '"priority":"high"' "$(printf '%s' "$out" | tr -d ' \n')"
done_testing
