#!/usr/bin/env bash
# Root's retention policy for accounting records (issue 28): acct-retention-days N in the
# machine-wide policy file is every store's default and its maximum (a user may keep less,
# never more), and a bad value is refused naming the line.
source "$(dirname "$0")/lib.sh"

command -v sqlite3 >/dev/null || skip_all "needs the sqlite3 command (make deps)"
[ "$(id -u)" = 0 ] || skip_all "root's policy file must be root's"
DB=$VGPU_STATE_DIR/acct.db
POLICY=$VGPU_MACHINE_DIR/policy
policy() { printf '%s\n' "$@" >"$POLICY"; chmod 0644 "$POLICY"; }
# Three records, ended 1, 5 and 20 days ago.
must vgpu run --name d1 -- true
must vgpu run --name d5 -- true
must vgpu run --name d20 -- true
age() { sqlite3 "$DB" "UPDATE jobs SET end_ns = end_ns - $2 * 86400000000000 WHERE name = '$1'"; }
age d1 1; age d5 5; age d20 20
names() { sqlite3 "$DB" "SELECT group_concat(name, ' ') FROM (SELECT name FROM jobs ORDER BY name)"; }

policy '# accounting' 'max-jobs-per-gpu 4' 'acct-retention-days 10'
must vgpu run --name now -- true
assert_eq "root's acct-retention-days 10: the next record written prunes the one 20 days old" "d1 d5 now" "$(names)"
run vgpu acct --retention 30
assert_rc "a user may not keep more than root's policy: a usage error" 2
assert_contains "saying root's limit" "at most 10 days" "$err"
assert_eq "and nothing was changed" "" "$(sqlite3 "$DB" "SELECT value FROM meta WHERE key = 'retention_days'")"
run vgpu acct --retention 3
assert_rc "a user may keep less" 0
assert_eq "--retention 3 under root's 10: the record 5 days old goes" "d1 now" "$(names)"
policy 'acct-retention-days 1'
age d1 1; must vgpu run --name later -- true
assert_eq "root lowers its policy under the user's 3 days: the smaller one applies" "later now" "$(names)"
policy 'acct-retention-days 0'
run vgpu acct --retention 2
assert_rc "acct-retention-days 0 is refused (a bad state, 11)" 11
assert_contains "naming the line and the range" "line 1: 'acct-retention-days 0'" "$err"
# A key given twice (issue 36 L21): refused naming both lines, not the last one winning (which
# would hide the first from whoever reads the file top down).
policy 'acct-retention-days 5' 'acct-retention-days 9'
run vgpu acct --retention 2
assert_rc "acct-retention-days given twice is refused (a bad state, 11)" 11
assert_contains "... naming the key and both lines" "'acct-retention-days' given twice (lines 1 and 2)" "$err"
assert_eq "... and nothing was changed" "3" "$(sqlite3 "$DB" "SELECT value FROM meta WHERE key = 'retention_days'")"
policy '# split count' 'max-jobs-per-gpu 4' '' 'max-jobs-per-gpu 1'
run vgpu run --name twice -- true
assert_rc "vgpu run under a policy with a key given twice: refused (125)" 125
assert_contains "... naming the key and both lines" "'max-jobs-per-gpu' given twice (lines 2 and 4)" "$err"
policy 'max-jobs-per-gpu 2'
run vgpu run --name plain -- true
assert_rc "a policy without acct-retention-days still runs jobs" 0
done_testing
