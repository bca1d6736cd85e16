# Every input gets the right answer (issue 13): each bad size, percentage, name, list or word
# gets its own reason, with the accepted range or form, and no "did you mean" unless it is close.
. "$(dirname "$0")/lib.sh"

# --- sizes: the real reason, with and without --gpu (placement) -----------------------------
for gpu in "" "--gpu 0"; do
  for bad in 4Q -1 1.5 0x10 +4G 99999999T; do
    # shellcheck disable=SC2086
    run vgpu run $gpu --mem "$bad" -- true
    assert_rc "run ${gpu:-(placing)} --mem '$bad' exits 125" 125
    assert_not_contains "run ${gpu:-(placing)} --mem '$bad': no placement excuse" "vgpu needs a size" "$err"
    assert_contains "run ${gpu:-(placing)} --mem '$bad' quotes the bad text" "'$bad'" "$err"
  done
  run vgpu run $gpu --mem "" -- true
  assert_contains "run ${gpu:-(placing)} --mem '' says it is empty" "empty size" "$err"
  run vgpu run $gpu --mem 50 -- true
  assert_rc "run ${gpu:-(placing)} --mem 50 (no unit, 50 bytes) is refused" 125
  assert_contains "run ${gpu:-(placing)} --mem 50 says to write the unit" "write the unit" "$err"
done
run vgpu run --mem 99999999T -- true
assert_contains "a too large size says the largest" "at most 16 EiB" "$err"
run vgpu run --mem -- true
assert_rc "run --mem -- CMD (no value) exits 125" 125
assert_contains "run --mem -- CMD says --mem needs a value" "option '--mem' needs a value" "$err"
run vgpu run --gpu 0 --mem 2097152 -- true
assert_rc "a bare number of at least 1 MiB is bytes" 0

# Advice is itself valid: no "1048575%" (a percentage is 1..100), no "1048575G".
run vgpu run --gpu 0 --mem 1048575 -- true
assert_contains "--mem 1048575 (under 1 MiB) says to write the unit" "write the unit" "$err"
assert_not_contains "... without suggesting 1048575%" "1048575%" "$err"
assert_not_contains "... or 1048575G" "1048575G" "$err"
run vgpu run --gpu 0 --mem 50 -- true
assert_contains "--mem 50 suggests 50%, a valid percentage" "50%" "$err"
# Over the GPU by one byte: both sizes print as 79.65 GiB, so the bytes are said, and the
# advice is a value that fits (the rounded 79.65G would not).
total=$(vgpu list --json | jq '.gpus[0].mem_total_bytes')
for gpu in "" "--gpu 0"; do
  # shellcheck disable=SC2086
  run vgpu run $gpu --mem $((total + 1)) -- true
  assert_rc "run ${gpu:-(placing)} --mem TOTAL+1 is refused" 125
  assert_contains "run ${gpu:-(placing)} --mem TOTAL+1 says the GPU's bytes" "$total bytes" "$err"
  assert_contains "run ${gpu:-(placing)} --mem TOTAL+1 says its own bytes" "$((total + 1)) bytes" "$err"
done
advice=$(sed -n 's/.*give at most \([^ ]*\).*/\1/p' <<<"$err")
run vgpu run --gpu 0 --mem "$advice" -- true
assert_rc "the size advised ($advice) is accepted" 0
# Gi, Mi, Ki, Ti, as Kubernetes writes them (vgpu(1), SIZES).
for v in 4194304Ki 4096Mi 4Gi; do
  run vgpu run --gpu 0 --mem "$v" -- alloc_probe meminfo
  assert_contains "--mem $v is 4 GiB" "total=4294967296" "$out"
done
run vgpu run --gpu 0 --mem 1Ti -- true
assert_contains "--mem 1Ti is a size (larger than the GPU)" "is larger than" "$err"
# --oversubscribe's errors name --oversubscribe, not --mem.
for bad in 0 -1G 1e3M; do
  run vgpu run --gpu 0 --mem 4G --oversubscribe="$bad" -- true
  assert_rc "--oversubscribe=$bad exits 125" 125
  assert_contains "--oversubscribe=$bad names --oversubscribe" "--oversubscribe" "$err"
  assert_not_contains "--oversubscribe=$bad does not blame --mem" "--mem" "$err"
done

# --- an option given twice is refused, never last-wins ----------------------------------------
for pair in "--mem|--mem 1G --mem 2G" "--core|--core 30 --core 40" "--gpu|--gpu 0 --gpu 0" "--name|--name a --name b" \
            "--core-policy|--core 30 --core-policy hard --core-policy soft" \
            "--priority|--core 30 --priority low --priority high" "--place|--mem 1G --place binpack --place spread" \
            "--max-jobs|--max-jobs 3 --max-jobs 4" "--user|--user root --user nobody" \
            "--oversubscribe|--mem 1G --oversubscribe --oversubscribe=1G"; do
  opt=${pair%%|*} args=${pair#*|}
  # shellcheck disable=SC2086
  run vgpu run $args -- true
  assert_rc "run $args exits 125" 125
  assert_contains "run $args says $opt is given twice" "$opt is given twice" "$err"
done

# A VGPU_MACHINE_DIR that does not exist is refused, never made world-writable where it points.
run env VGPU_MACHINE_DIR="$T_DIR/no-such-machine-dir" vgpu run --mem 1G -- true
assert_rc "run with a missing VGPU_MACHINE_DIR exits 125" 125
assert_contains "... saying it does not exist" "does not exist" "$err"
check "... and it was not created" test ! -e "$T_DIR/no-such-machine-dir"

# --- names and lists ----------------------------------------------------------------------------
run vgpu run --name "" -- true
assert_rc "run --name '' is refused" 125
assert_contains "run --name '' gives the length range" "1 to 63" "$err"
run vgpu run --mem 0:4G, -- true
assert_rc "run --mem 0:4G, (trailing comma) is refused" 125
assert_contains "a stray comma in --mem is named" "stray comma" "$err"
use_scenario mixed
run vgpu run --gpu 0,0,1 -- true
assert_rc "run --gpu 0,0,1 (a GPU twice) is refused" 125
assert_contains "run --gpu 0,0,1 says a GPU is named twice" "same GPU twice" "$err"
run vgpu run --gpu 0,1, -- true
assert_contains "run --gpu 0,1, (stray comma) is refused" "stray comma" "$err"
use_scenario h100

# --- percentages and seconds: the range stated is the range accepted --------------------------
for v in 0 101; do
  run vgpu run --core $v -- true
  assert_rc "run --core $v exits 125" 125
  assert_contains "run --core $v states 1 to 100" "from 1 to 100" "$err"
done
run vgpu run --gpu 0 --mem 0% -- true
assert_contains "run --mem 0% states 1 to 100" "from 1 to 100" "$err"
run vgpu limit nosuchjob --core 0
assert_contains "limit --core 0 states 1 to 100, or none" "from 1 to 100" "$err"
for v in 0 nan inf 1e3 -5; do
  run vgpu wait --timeout "$v" x
  assert_rc "wait --timeout $v exits 2" 2
  assert_contains "wait --timeout $v states the range" "above 0 and at most" "$err"
done

# --- suggestions only when close --------------------------------------------------------------
run vgpu bogus
assert_not_contains "vgpu bogus suggests nothing" "did you mean" "$err"
run vgpu rnu
assert_contains "vgpu rnu suggests run" "did you mean 'run'" "$err"
run vgpu run --priority urgent --core 5 -- true
assert_not_contains "--priority urgent suggests nothing" "did you mean" "$err"
assert_contains "--priority urgent lists the words" "use low, normal or high" "$err"
run vgpu run --core-policy bogus --core 5 -- true
assert_not_contains "--core-policy bogus suggests nothing" "did you mean" "$err"
run vgpu run --core-policy sfot --core 5 -- true
assert_contains "--core-policy sfot suggests soft" "did you mean 'soft'" "$err"
run vgpu timeslice set bogus
assert_not_contains "timeslice set bogus suggests nothing" "did you mean" "$err"

# --- help is a command too --------------------------------------------------------------------
run vgpu help --help
assert_rc "help --help exits 0" 0
assert_contains "help --help lists the commands" "Commands:" "$out"
ln -s "$VGPU_BUILD/vgpu" "$T_DIR/vgpu-help"
run "$T_DIR/vgpu-help"
assert_rc "a vgpu-help link exits 0" 0
assert_contains "a vgpu-help link lists the commands" "Commands:" "$out"
run vgpu help run extra
assert_rc "help with two commands is refused" 2


# --- VGPU_LIBRARY must be libvgpu.so (it was preloaded whatever it was: no limits, no warning) ---
for lib in /lib/x86_64-linux-gnu/libm.so.6 "$VGPU_BUILD/fakegpu/libcuda.so.1" /etc/hostname "$T_DIR"; do
  [ -e "$lib" ] || continue
  run env VGPU_LIBRARY="$lib" vgpu run --gpu 0 --mem 1G -- true
  assert_rc "VGPU_LIBRARY=$lib: refused with 125" 125
  assert_contains "VGPU_LIBRARY=$lib: says it is not libvgpu.so" "is not libvgpu.so" "$err"
done
run env VGPU_LIBRARY="$VGPU_BUILD/libvgpu.so" vgpu run --gpu 0 --mem 1G -- true
assert_rc "VGPU_LIBRARY=build/libvgpu.so: runs" 0

# --- vgpu mig apply reads exactly one layout document from a file ------------------------------
export VGPU_FAKE_ROOT=1
vgpu mig export >"$T_DIR/layout.json"
run vgpu mig apply --dry-run "$T_DIR/layout.json"
assert_rc "mig apply of an exported layout: 0" 0
{ cat "$T_DIR/layout.json"; echo garbage; } >"$T_DIR/l-garbage.json"
run vgpu mig apply "$T_DIR/l-garbage.json"
assert_rc "mig apply of a layout followed by garbage: 2" 2
assert_contains "mig apply says there is more after the document" "more after its JSON document" "$err"
cat "$T_DIR/layout.json" "$T_DIR/layout.json" >"$T_DIR/l-two.json"
run vgpu mig apply "$T_DIR/l-two.json"
assert_rc "mig apply of two documents: 2" 2
echo '{"schema":1,"gpus":[]}' >"$T_DIR/l-empty.json"
run vgpu mig apply "$T_DIR/l-empty.json"
assert_rc "mig apply of a layout naming no GPU: 2" 2
assert_contains "mig apply says the layout is empty" "nothing to apply" "$err"
run vgpu mig apply "$T_DIR"
assert_rc "mig apply of a directory: 2, as a missing file" 2
assert_contains "mig apply says it is a directory" "is a directory" "$err"
run vgpu mig apply "$T_DIR/nonexistent.json"
assert_rc "mig apply of a missing file: 2" 2
run vgpu mig create --gpu 0 1g.10gb:abc
assert_contains "mig create quotes the bad placement" "'abc'" "$err"
run vgpu mig profiles --gpu 0 --gi abc
assert_rc "mig profiles --gi abc: 2, as destroy abc" 2
run vgpu mig destroy --gpu 0 abc
assert_rc "mig destroy abc: 2" 2
unset VGPU_FAKE_ROOT

# --- vgpu shell and vgpu completion take exactly what they document ---------------------------
run vgpu shell "$T_DIR"
assert_rc "shell DIR: 2" 2
assert_contains "shell DIR says it is a directory" "is a directory" "$err"
run vgpu shell "$T_DIR/nonexistent"
assert_rc "shell of a missing script: 2" 2
printf 'exit abc\n' >"$T_DIR/exit.vgpu"
run vgpu shell "$T_DIR/exit.vgpu"
assert_rc "a script line 'exit abc': 2" 2
assert_contains "exit abc says the range" "from 0 to 255" "$err"
printf 'exit 3\n' >"$T_DIR/exit3.vgpu"
run vgpu shell "$T_DIR/exit3.vgpu"
assert_rc "a script line 'exit 3': 3" 3
run vgpu shell -c list extra
assert_rc "shell -c list extra: 2" 2
assert_contains "shell -c list extra names the extra argument" "'extra'" "$err"
run vgpu completion bash extra
assert_rc "completion bash extra: 2" 2

# --- vgpu top --once fits COLUMNS, and fails as vgpu ps does when jobs cannot be read ----------
for c in 30 40 80; do
  run env COLUMNS=$c vgpu top --once
  w=$(awk '{ if (length($0) > m) m = length($0) } END { print m + 0 }' <<<"$out")
  [ "$w" -le "$c" ] && ok "top --once at COLUMNS=$c: no line wider" || not_ok "top --once at COLUMNS=$c: no line wider" "widest: $w"
done
run env VGPU_STATE_DIR=/etc/passwd vgpu ps
ps_rc=$rc
run env VGPU_STATE_DIR=/etc/passwd vgpu top --once
assert_rc "top --once with an unreadable state directory exits as vgpu ps ($ps_rc)" "$ps_rc"
assert_contains "top --once says why on stderr" "no job data" "$err"
run env VGPU_FAKE_FAIL=gpu_lost=0 vgpu top --once
assert_rc "top --once with a lost GPU: 12" 12
assert_contains "top --once names the lost GPU on stderr" "GPU 0 is lost" "$err"

# --- vgpu ps fits the terminal, marks cut names, and freezes an ended job's GPU% --------------
id=$(vgpu run -d --gpu 0 --name a-name-longer-than-fourteen --mem 4G --core 50 -- core_loop -t 2)
for c in 80 120; do
  run env COLUMNS=$c vgpu ps
  w=$(awk '{ if (length($0) > m) m = length($0) } END { print m + 0 }' <<<"$out")
  [ "$w" -le "$c" ] && ok "ps at COLUMNS=$c: no line wider (widest $w)" || not_ok "ps at COLUMNS=$c: no line wider" "$out"
done
run env COLUMNS=200 vgpu ps
assert_contains "ps marks a cut name with +" "a-name-longer+" "$out"
# GPU% once the job has ended, and again 2 s of age later: the same.
job_field() { vgpu ps --json | jq -r --arg j "$1" --arg f "$2" '.jobs[] | select(.id == $j) | .[$f]'; }
ended() { [ "$(job_field "$1" state)" = exited ]; }
wait_until 30 ended "$id"
share() { COLUMNS=200 vgpu ps | awk -v id="$1" '$1 == id { print $11 }'; }  # PIDS is "exited N": two words
first=$(share "$id")
age0=$(job_field "$id" age_seconds)
aged() { [ "$(job_field "$1" age_seconds)" -ge "$2" ]; }
wait_until 30 aged "$id" $((age0 + 2))
assert_match "the ended job has a GPU%" '^[0-9]+%$' "$first"
assert_eq "an ended job's GPU% is frozen at its end" "$first" "$(share "$id")"

# --- wording: each message says what is true ---------------------------------------------------
run vgpu run -- /nonexistent/cmd
assert_rc "run of a missing path: 127" 127
assert_not_contains "a path is not said to be looked up in PATH" "in PATH" "$err"
run vgpu run -- nonexistent-cmd-xyz
assert_contains "a bare name is said to be looked up in PATH" "not found in PATH" "$err"
run env VGPU_MPS_CONTROL=/nonexistent vgpu mps start --pipe-dir "$T_DIR/pipe" --log-dir "$T_DIR/mpslog"
assert_not_contains "VGPU_MPS_CONTROL=/nonexistent: not 'on PATH'" "on PATH" "$err"
assert_contains "VGPU_MPS_CONTROL=/nonexistent: says to fix the variable" "set VGPU_MPS_CONTROL" "$err"
run env VGPU_FAKE_MPS_FAULT=exit vgpu mps start --pipe-dir "$T_DIR/pipe" --log-dir "$T_DIR/mpslog"
assert_rc "a failed mps start: 1" 1
assert_not_contains "a failed mps start prints no compute-mode note" "note:" "$out"
run env VGPU_STATE_DIR=/ vgpu run -- true
assert_not_contains "VGPU_STATE_DIR=/: no '//' path" "//" "$err"
assert_contains "VGPU_STATE_DIR=/: refused with the reason" "cannot be /" "$err"
run env VGPU_STATE_DIR="$VGPU_STATE_DIR/" vgpu ps
assert_rc "VGPU_STATE_DIR with a trailing / works" 0

# --- control bytes in a value a message echoes are escaped, never written raw to the terminal ----
# (an escape sequence in a job name or a path could retitle or recolour the terminal, or hide
# the message). Every message goes through log.c's one escaping helper.
raw_controls() { LC_ALL=C grep -q $'[\x01-\x08\x0b-\x1f\x7f]' <<<"$1"; }
run vgpu wait $'a\e]0;pwned\ab\tc'
assert_rc "a job name with control bytes: not found" 8
raw_controls "$err" && not_ok "... the message has no raw control byte" "$(od -c <<<"$err" | head -5)" \
  || ok "... the message has no raw control byte"
assert_contains "... they are shown escaped" 'a\x1b]0;pwned\x07b\tc' "$err"
run env VGPU_LOG=$'\e[31mloud' vgpu run true
raw_controls "$err" && not_ok "VGPU_LOG with control bytes: the warning has none raw" "$(od -c <<<"$err" | head -5)" \
  || ok "VGPU_LOG with control bytes: the warning has none raw"
assert_contains "... shown escaped" '\x1b[31mloud' "$err"
# A bad VGPU_LOG is said by a command that logs nothing else, once.
run env VGPU_LOG=loud vgpu ps
assert_eq "a bad VGPU_LOG is said once by vgpu ps, which logs nothing else" 1 "$(grep -c "VGPU_LOG='loud'" <<<"$err")"

# --- the simulated MPS daemon: an ordinary file as its pipe directory is refused, not chmod'ed --
: >"$T_DIR/pipefile"; chmod 600 "$T_DIR/pipefile"
run vgpu mps start --pipe-dir "$T_DIR/pipefile" --log-dir "$T_DIR/mpslog"
assert_rc "mps start with a file as the pipe directory fails" 1
assert_eq "the file keeps its mode" "600" "$(stat -c %a "$T_DIR/pipefile")"

done_testing
