# Damaged job regions and the job lookup order (issue 13): a damaged region is named with its
# reason and exit status 11 (vgpu-limit(1)), never "no job"; a region copied under another
# file name is not a second job; a word that names one job and starts another's id is an error.
. "$(dirname "$0")/lib.sh"

jobs=$VGPU_STATE_DIR/jobs
# Detached jobs are not the shell's children: their supervisors are killed by pid at the end.
sups=()
sup_of() { vgpu ps --json | jq -r --arg j "$1" '.jobs[] | select(.id == $j) | .creator_pid'; }
trap 'kill "${sups[@]}" 2>/dev/null; t_cleanup' EXIT
id=$(vgpu run -d --gpu 0 --name first -- sleep 120)
[ -n "$id" ] && ok "a job runs" || not_ok "a job runs"
sups+=("$(sup_of "$id")")

# A 0-byte region.
: >"$jobs/bbbbbbbbbbbb.region"
run vgpu limit bbbbbbbbbbbb --mem 1G
assert_rc "limit on a 0-byte region: 11" 11
assert_contains "limit names the damaged file" "bbbbbbbbbbbb.region is damaged" "$err"
assert_contains "limit says why" "truncated" "$err"
run vgpu wait bbbbbbbbbbbb
assert_rc "wait on a 0-byte region: 11" 11
assert_not_contains "wait does not say no job is running" "no job of yours" "$err"
run env VGPU_LOG=debug vgpu ps
assert_contains "ps with VGPU_LOG=debug says which file and why" "damaged job region $jobs/bbbbbbbbbbbb.region" "$err"
rm -f "$jobs/bbbbbbbbbbbb.region"

# A truncated region of a running job.
id2=$(vgpu run -d --gpu 0 -- sleep 120)
sups+=("$(sup_of "$id2")")
truncate -s 100 "$jobs/$id2.region"
run vgpu wait "$id2"
assert_rc "wait on a truncated running job: 11" 11
assert_contains "wait names the truncated region" "$id2.region is damaged" "$err"
rm -f "$jobs/$id2.region"

# A copy under another name is not a second job, and limit does not change it.
cp "$jobs/$id.region" "$jobs/aaaaaaaaaaaa.region"
run vgpu ps --json
assert_eq "the copy is not listed as a job" "$id" "$(jq -r '[.jobs[].id] | join(" ")' <<<"$out")"
run vgpu limit aaaaaaaaaaaa --mem 1G
assert_rc "limit on the copy: 11" 11
assert_contains "limit says the id is not the file name" "not its file name" "$err"
rm -f "$jobs/aaaaaaaaaaaa.region"

# Lookup order: a name that is the start of another job's id is ambiguous.
prefix=${id:0:4}
id3=$(vgpu run -d --gpu 0 --name "$prefix" -- sleep 120)
sups+=("$(sup_of "$id3")")
run vgpu limit "$prefix" --mem 1G
assert_rc "a name that starts another job's id: 2" 2
assert_contains "the ambiguity names both jobs" "name of job $id3" "$err"
assert_contains "the ambiguity names the other job" "$id" "$err"
run vgpu limit "$id" --mem 1G
assert_rc "the full id still works" 0
run vgpu limit first --mem 1G
assert_rc "a name that is no id's start still works" 0


done_testing
