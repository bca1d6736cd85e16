#!/usr/bin/env bash
# vgpu acct's inputs and outputs (issue 36): times past 2262 and dates that do not exist, empty
# and repeated filters, --gpu all, job ids in any case, a failed read that prints no "no records",
# names cut with '+', control bytes and formulas in --csv, energy in one unit, a full disk.
source "$(dirname "$0")/lib.sh"

command -v sqlite3 >/dev/null || skip_all "needs the sqlite3 command (make deps)"
DB=$VGPU_STATE_DIR/acct.db
names() { jq -r '[.jobs[].name] | join(" ")'; }

must vgpu run --name first -- true
must vgpu run --name a-very-long-job-name-24c -- true

# ---- N4: a time past 2262 (64-bit ns) ----
run vgpu acct --json --since 2263-01-01
assert_eq "--since 2263-01-01: no record ended after it" "0 " "$rc $(printf '%s' "$out" | names)"
run vgpu acct --json --until 9999-12-31
assert_eq "--until 9999-12-31: every record ended before it" "0 first a-very-long-job-name-24c" \
  "$rc $(printf '%s' "$out" | names)"

# ---- L7: dates and times that do not exist ----
run vgpu acct --since 2026-02-30
assert_rc "--since 2026-02-30: a usage error" 2
assert_contains "... saying there is no such day" "there is no 30 February 2026" "$err"
run vgpu acct --until 2026-11-01T18:34:61
assert_rc "--until 2026-11-01T18:34:61: a usage error" 2
assert_contains "... saying there is no such time" "no such local time" "$err"
run vgpu acct --since 2024-02-29
assert_rc "--since 2024-02-29 (a leap day) is a date" 0

# ---- N5: empty and repeated filters ----
for o in -j --gpu --name --user --since; do
  run vgpu acct "$o" ''
  assert_eq "$o '': a usage error, saying a value is needed" "2 1" "$rc $(printf '%s' "$err" | grep -c "give a value")"
done
run vgpu acct --name first --name other
assert_rc "--name given twice: a usage error (filters do not accumulate)" 2
assert_contains "... saying so" "--name is given twice ('first' and 'other')" "$err"
run vgpu acct -j abc --job def
assert_contains "-j given twice: said" "-j/--job is given twice" "$err"

# ---- L5: --gpu all ----
run vgpu acct --json --gpu all
assert_eq "--gpu all: every job (no filter)" "first a-very-long-job-name-24c" "$(printf '%s' "$out" | names)"

# ---- L16: job ids are hex, in any case ----
id=$(vgpu acct --json --name first | jq -r '.jobs[0].id')
run vgpu acct --json -j "$(printf '%s' "${id:0:6}" | tr a-f A-F)"
assert_eq "-j with the id's start in upper case finds the job" "first" "$(printf '%s' "$out" | names)"

# ---- L6: a retention with a space ----
run vgpu acct --retention ' 5'
assert_rc "--retention ' 5': a usage error, as top -d ' 5'" 2
assert_contains "... saying the value as given and what to give, as top -d ' 5' does" \
  "--retention ' 5': give a number of days from 1 to 36500" "$err"

# ---- L4: a long name is cut with '+' ----
run vgpu acct --name a-very-long-job-name-24c
assert_match "the table cuts a 24-character name to 13 and a '+'" "a-very-long-j\+ " "$out"

# ---- L20: energy in the table, in kJ as in --totals and top ----
assert_match "the table has an ENERGY-KJ column" "GIB-HOURS +ENERGY-KJ +NOTE" "$(vgpu acct | head -1)"
assert_match "--totals says kJ too" "ENERGY-KJ" "$(vgpu acct --totals | head -1)"

# ---- L13: control bytes and formulas in --csv ----
printf '#!/bin/sh\ntrue\n' >"$T_DIR/=cmd"; chmod +x "$T_DIR/=cmd"
ln -s "$T_DIR/=cmd" "$T_DIR/$(printf 'b\033[31mell\a')"
must vgpu run --name csvctl -- "$T_DIR/$(printf 'b\033[31mell\a')"
must env -C "$T_DIR" PATH="$T_DIR:$PATH" vgpu run --name csvformula -- =cmd
run vgpu acct --csv --name csvctl
assert_eq "--csv writes no raw control byte" "0" "$(printf '%s' "$out" | tr -d '\n' | LC_ALL=C grep -c '[[:cntrl:]]')"
assert_contains "... but the escapes" 'b\x1b[31mell\x07' "$out"
run vgpu acct --csv --name csvformula
assert_contains "a cell that starts with '=' is quoted with an apostrophe (text for a spreadsheet)" ",\"'=cmd\"," "$out"
# The other characters a spreadsheet starts a formula with: + - @.
for c in +:plus -:minus @:at; do
  n=csv${c#*:} c=${c%%:*}
  cp "$T_DIR/=cmd" "$T_DIR/${c}cmd"
  must env -C "$T_DIR" PATH="$T_DIR:$PATH" vgpu run --name "$n" -- "${c}cmd"
  run vgpu acct --csv --name "$n"
  assert_contains "a cell that starts with '$c' is quoted with an apostrophe too" ",\"'${c}cmd\"," "$out"
done

# ---- N12: a failed vgpu acct prints nothing on stdout ----
cp "$DB" "$T_DIR/db.keep"
printf 'not a database at all, not a database at all, not a database at all, not a database' >"$DB"
rm -f "$DB-wal" "$DB-shm"
run vgpu acct
assert_eq "a database that cannot be read: exit 1, and no 'no records' on stdout" "1 " "$rc $out"
run vgpu acct --json
assert_eq "... nor a JSON document" "1 " "$rc $out"
cp "$T_DIR/db.keep" "$DB"

# ---- L12: a full file system under the store (16 KiB left: SQLite says "disk I/O error") ----
if [ "$(id -u)" = 0 ] && command -v unshare >/dev/null; then
  FULL=$T_DIR/full; mkdir -m 0700 "$FULL"
  run unshare -m sh -c "mount -t tmpfs -o size=64k,mode=0700 tmpfs '$FULL' && dd if=/dev/zero of='$FULL/fill' bs=1k count=48 2>/dev/null; \
    VGPU_STATE_DIR='$FULL' vgpu acct --retention 5"
  assert_contains "a full file system: said so" "the file system is full" "$err"
  assert_not_contains "... not as an I/O error" "disk I/O error" "$err"
else
  skip "a full file system" "needs root and unshare (a tmpfs of 64 KiB)"
fi
done_testing
