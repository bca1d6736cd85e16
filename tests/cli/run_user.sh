# vgpu run --user USER (issue 12 item 2): root starts a job as another user, with limits that
# user can read but not raise (root's .region, 0640, in root's directory) and usage the user's
# processes account into (the user's .usage). Root's and the user's vgpu ps see the job; the
# user's vgpu limit is refused, root's works; non-root gets a clear error.
. "$(dirname "$0")/lib.sh"
[ "$(id -u)" = 0 ] || skip_all "needs root (the job runs as nobody)"
command -v setpriv >/dev/null || skip_all "needs setpriv"

user_dirs
sups=()
trap 'kill "${sups[@]}" 2>/dev/null; t_cleanup' EXIT
as_nobody() {
  setpriv --reuid=nobody --regid=nogroup --clear-groups env -u VGPU_STATE_DIR -u XDG_RUNTIME_DIR "$@"
}
cd "$T_DIR" || exit 1    # a 0700 directory of root's: the job must not need it

# Who may use it.
run as_nobody vgpu run --user nobody -- true
assert_rc "--user as non-root: 125" 125
assert_contains "--user as non-root: says only root can" "only root can start a job as another user" "$err"
run vgpu run --user no-such-user-x -- true
assert_rc "--user of an unknown user: 125" 125
assert_contains "--user of an unknown user: says so" "no such user" "$err"
run vgpu run --user root -- true
assert_rc "--user root: 125" 125

# The command runs as the user, limited, accounting.
run env XDG_RUNTIME_DIR=/run/user/0 vgpu run --user nobody -- \
  sh -c 'id -u; id -g; echo "$USER ${VGPU_STATE_DIR:-nostate} ${XDG_RUNTIME_DIR:-noxdg}"'
assert_rc "--user nobody: the job runs (0)" 0
assert_eq "--user nobody: as uid/gid 65534, USER=nobody, without root's state and runtime directories" \
  "$(id -u nobody) $(id -g nobody) nobody nostate noxdg" "$(echo $out)"
run vgpu run --user nobody --mem 1G -- alloc_probe alloc 256M alloc 1G meminfo
assert_rc "--user nobody --mem 1G: alloc_probe runs" 0
assert_contains "256 MiB fits" "alloc rc=0 size=268435456" "$out"
assert_contains "1 GiB more does not (the limit holds)" "alloc rc=2 size=1073741824" "$out"
assert_contains "the usage is accounted (context + 256 MiB)" "used=805306368" "$out"

# The user cannot raise its own limits: not by mprotect, not by writing the file.
run vgpu run --user nobody --mem 1G -- limits_poke 2048
assert_contains "as nobody: mprotect of the limits page is refused" "mprotect=EACCES" "$out"
assert_contains "as nobody: 2 GiB is still refused under 1 GiB" "poked=0 alloc rc=2" "$out"
run vgpu run --user nobody --mem 1G -- sh -c 'printf x | dd of="$VGPU_REGION" bs=1 seek=800 conv=notrunc 2>&1; \
  chmod 0666 "$VGPU_REGION" 2>&1; mv "$VGPU_REGION" "$VGPU_REGION.x" 2>&1; echo done'
assert_contains "as nobody: the region file cannot be written" "Permission denied" "$(head -n 1 <<<"$out")"
assert_contains "as nobody: nor chmod'ed" "Operation not permitted" "$out"
assert_contains "as nobody: nor renamed" "cannot move" "$out"

# A running job: the files, vgpu ps of both users, vgpu limit of both.
id=$(vgpu run -d --user nobody --mem 1G --name asnobody -- sleep 30)
sups+=("$(vgpu ps --json | jq -r --arg j "$id" '.jobs[] | select(.id == $j) | .creator_pid')")
jd=$U_MACHINE/userjobs/$(id -u nobody)/jobs
assert_eq "the region: root's, group nogroup, 0640" "root nogroup 640" "$(stat -c '%U %G %a' "$jd/$id.region")"
assert_eq "the usage: nobody's, 0600" "nobody 600" "$(stat -c '%U %a' "$jd/$id.usage")"
assert_eq "its directory: root's, group nogroup, 0750" "root nogroup 750" "$(stat -c '%U %G %a' "$jd")"
run vgpu ps --json
assert_eq "root's vgpu ps shows the job as nobody's" "nobody" \
  "$(jq -r --arg j "$id" '.jobs[] | select(.id == $j) | .owner' <<<"$out")"
run as_nobody vgpu ps --json
assert_rc "nobody's vgpu ps: 0" 0
assert_eq "nobody's vgpu ps shows the job" "$id 1073741824" \
  "$(jq -r --arg j "$id" '.jobs[] | select(.id == $j) | "\(.id) \(.gpus[0].mem_limit_bytes)"' <<<"$out")"
run as_nobody vgpu top --json -n 1
assert_contains "nobody's vgpu top shows the job" "\"$id\"" "$out"
run as_nobody vgpu limit asnobody --mem 8G
assert_rc "nobody's vgpu limit on its own --user job: refused (6)" 6
assert_contains "... saying root set the limits" "its limits were set by root (vgpu run --user)" "$err"
run vgpu limit asnobody --mem 512M
assert_rc "root's vgpu limit on it: 0" 0
run as_nobody vgpu ps --json
assert_eq "nobody sees root's new limit" 536870912 \
  "$(jq -r --arg j "$id" '.jobs[] | select(.id == $j) | .gpus[0].mem_limit_bytes' <<<"$out")"
kill "${sups[@]}"
run vgpu wait "$id"
assert_rc "root's vgpu wait gets the job's status (killed by SIGTERM: 143)" 143

# The library must be readable by the user, or the job would run unlimited: refused.
mkdir -m 0700 "$T_DIR/private"; cp "$VGPU_BUILD/libvgpu.so" "$T_DIR/private/"
run env VGPU_LIBRARY="$T_DIR/private/libvgpu.so" vgpu run --user nobody -- true
assert_rc "--user with a library the user cannot read: 125" 125
assert_contains "... says so and what to do" "nobody cannot read the library" "$err"

done_testing
