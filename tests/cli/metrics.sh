# vgpu metrics: Prometheus's text exposition of the GPUs and the jobs, checked by a strict parser
# (tests/metrics/expo_check.py: HELP/TYPE before the samples, families together, label escaping,
# _total counters, ratios 0..1, no series twice), and by promtool when it is installed.
. "$(dirname "$0")/lib.sh"

py=python3
parse() {  # parse FILE: the samples, one "name{k=v,...} value" a line (labels sorted), or the problems
  run $py "$VGPU_SRC/tests/metrics/expo_check.py" "$1"
}
value() {  # value NAME LABEL-SUBSTRING: the value of the first sample of NAME whose labels contain it
  printf '%s\n' "$out" | grep "^$1{" | grep -F -- "$2" | head -1 | sed 's/.* //'
}

# A GPU whose model name needs escaping in a label value.
jq '.gpus[0].name = "Fake \"H100\" \\ 80GB"' "$VGPU_SRC/tests/fakegpu/scenarios/h100.json" > "$T_DIR/odd.json"
export VGPU_FAKE_SCENARIO=$T_DIR/odd.json
rm -f "$VGPU_FAKE_STATE"

run vgpu metrics
assert_rc "vgpu metrics with no job" 0
printf '%s\n' "$out" > "$T_DIR/m0"
parse "$T_DIR/m0"
assert_rc "... is valid exposition" 0
assert_contains "... with the GPU, its model name unescaped back exactly" 'modelName=Fake "H100" \ 80GB' "$out"
assert_contains "... and no job" "vgpu_jobs{Hostname=$(hostname)} 0" "$out"
assert_contains "... NVML up" "vgpu_nvml_up{Hostname=$(hostname)} 1" "$out"
assert_contains "the raw label escapes the quotes and the backslash" 'modelName="Fake \"H100\" \\ 80GB"' "$(cat "$T_DIR/m0")"

# The parser can fail: a counter without _total, a label with a raw quote.
printf '# HELP x_seconds h\n# TYPE x_seconds counter\nx_seconds 1\n' > "$T_DIR/bad1"
printf '# HELP x_bytes h\n# TYPE x_bytes gauge\nx_bytes{a="b"c"} 1\n' > "$T_DIR/bad2"
printf '# HELP x_bytes h\n# TYPE x_bytes gauge\nx_bytes 1\n# HELP y y\n# TYPE y gauge\ny 1\nx_bytes{a="1"} 2\n' > "$T_DIR/bad3"
for b in bad1 bad2 bad3; do
  parse "$T_DIR/$b"
  assert_rc "the parser refuses $b" 1
done

# A Slurm-named job with limits, holding 1 GiB (a background job of this script: lib.sh ends it).
vgpu run --name slurm-77.0.3 --mem 4G --core 30 -- alloc_probe alloc 1G hold > "$T_DIR/job.out" 2>&1 < /dev/null &
metered() { vgpu metrics > "$T_DIR/m1" 2>&1; grep -q '^vgpu_job_memory_used_bytes{.*} [1-9]' "$T_DIR/m1"; }
wait_until 20 metered
parse "$T_DIR/m1"
assert_rc "with a job: valid exposition" 0
assert_eq "the job's memory limit in bytes" 4294967296 "$(value vgpu_job_memory_limit_bytes job_name=slurm-77.0.3)"
assert_eq "its core limit as a ratio" 0.3 "$(value vgpu_job_core_limit_ratio job_name=slurm-77.0.3)"
used=$(value vgpu_job_memory_used_bytes job_name=slurm-77.0.3)
if [ -n "$used" ] && [ "$used" -ge 1073741824 ]; then ok "its memory in use counts the 1 GiB held ($used)"; else not_ok "its memory in use counts the 1 GiB held" "$(cat "$T_DIR/m1")"; fi
assert_match "the Slurm job id is the hpc_job label (DCGM's job mapping name)" "vgpu_job_info\{.*hpc_job=77,.*job_name=slurm-77\.0\.3.*state=running" "$out"
assert_match "per job and GPU, with DCGM's gpu and UUID labels" 'vgpu_job_memory_limit_bytes\{.*UUID=GPU-[0-9a-f-]+,gpu=0,hpc_job=77' "$out"
assert_eq "one live process" 1 "$(value vgpu_job_processes job_name=slurm-77.0.3)"
for m in vgpu_job_gpu_time_seconds_total vgpu_job_throttled_seconds_total vgpu_job_outside_memory_bytes \
         vgpu_job_outside_processes vgpu_job_gpu_time_share_ratio; do
  assert_match "$m is there" "^$m\{.*job_name=slurm-77" "$out"
done
assert_contains "the GPU time is a counter" "# TYPE vgpu_job_gpu_time_seconds_total counter" "$(cat "$T_DIR/m1")"

if command -v promtool >/dev/null; then
  # Exit 3 is lint advice, not an error: the only advice allowed is about DCGM-exporter's own
  # label names (UUID, Hostname, modelName), which vgpu keeps on purpose (vgpu-metrics(1)).
  run promtool check metrics < "$T_DIR/m1"
  lint=$(printf '%s\n' "$err" | grep -v "label names should be written in 'snake_case' not 'camelCase'" | grep -v '^$')
  if { [ "$rc" = 0 ] || [ "$rc" = 3 ]; } && [ -z "$lint" ]; then ok "promtool check metrics accepts it (rc $rc)"
  else not_ok "promtool check metrics accepts it" "rc $rc: $err"; fi
else
  skip "promtool check metrics accepts it" "promtool (Debian's prometheus package) is not installed; the strict parser checked it"
fi

# --textfile: DIR/vgpu.prom, atomically (no temporary left), readable by node_exporter.
mkdir "$T_DIR/tf"
run vgpu metrics --textfile "$T_DIR/tf"
assert_rc "--textfile writes" 0
assert_eq "... DIR/vgpu.prom only" vgpu.prom "$(ls "$T_DIR/tf")"
assert_eq "... 0644" 644 "$(stat -c %a "$T_DIR/tf/vgpu.prom")"
parse "$T_DIR/tf/vgpu.prom"
assert_rc "... valid exposition" 0
run vgpu metrics --textfile "$T_DIR/missing"
assert_rc "a missing --textfile directory is an error" 1
assert_contains "... saying what to do" "create the directory first" "$err"
run vgpu metrics --textfile ''
assert_rc "an empty --textfile is a usage error" 2
assert_contains "... saying why" "not an empty string" "$err"
run vgpu metrics --textfile "$T_DIR/tf" --listen 9999
assert_rc "--textfile and --listen together are a usage error" 2
run vgpu metrics --listen 70000
assert_rc "a bad port is a usage error" 2

# --listen: HTTP on /metrics, fresh for every request. The client is bash's /dev/tcp (curl hangs
# under the sanitizers' preloaded runtimes).
http_get() {  # http_get PORT PATH: the whole answer (headers and body), bounded in time
  timeout 10 bash -c 'exec 3<>"/dev/tcp/127.0.0.1/$0" || exit 1; printf "GET %s HTTP/1.0\r\nHost: x\r\n\r\n" "$1" >&3; cat <&3' "$1" "$2"
}
port=$((20000 + RANDOM % 20000))
vgpu metrics --listen "127.0.0.1:$port" 2>"$T_DIR/listen.err" &
srv=$!
# served: sets $got (wait_until runs it in this shell)
served() { got=$(http_get $port /metrics 2>/dev/null) && [ -n "$got" ]; }
got=
wait_until 20 served || not_ok "vgpu metrics --listen serves" "$(cat "$T_DIR/listen.err")"
printf '%s\n' "$got" | tr -d '\r' | sed '1,/^$/d' > "$T_DIR/m2"
parse "$T_DIR/m2"
assert_rc "--listen serves valid exposition on /metrics" 0
assert_contains "... the job's series" "job_name=slurm-77.0.3" "$out"
assert_contains "... as text/plain version 0.0.4" "version=0.0.4" "$(printf '%s' "$got" | sed -n '1,/^\r*$/p')"
assert_match "... and 404 elsewhere" "^HTTP/1.0 404" "$(http_get $port /other 2>/dev/null)"
assert_match "... whose length is right" "^Content-Length: 22" "$(http_get $port /other 2>/dev/null | tr -d '\r' | grep Content-Length)"

# Slow clients never hold a scrape: three connections that trickle a request a byte every 3 s
# (each says when it is connected), then one timed scrape. Served one at a time with a timeout
# per read, such a client held every scrape for 14.5 s and more, past Prometheus' 10 s timeout.
for k in 1 2 3; do
  timeout 20 bash -c 'exec 3<>"/dev/tcp/127.0.0.1/$0" || exit 1; : >"$1"
    for b in G E T " " /; do printf %s "$b" >&3 || exit 0; sleep 3; done' "$port" "$T_DIR/slow$k" 2>/dev/null &
done
slow_connected() { [ -e "$T_DIR/slow1" ] && [ -e "$T_DIR/slow2" ] && [ -e "$T_DIR/slow3" ]; }
wait_until 10 slow_connected || not_ok "the slow clients connect"
t0=$(date +%s%N)
got=$(http_get $port /metrics 2>/dev/null)
ms=$(( ($(date +%s%N) - t0) / 1000000 ))
assert_match "a scrape beside three slow clients is answered" "^HTTP/1.0 200" "$got"
[ "$ms" -lt 1500 ] && ok "... within 1.5 s ($ms ms)" || not_ok "... within 1.5 s" "it took $ms ms"
# A client that sends nothing is closed at its deadline (about 1 s), not kept.
timeout 8 bash -c 'exec 3<>"/dev/tcp/127.0.0.1/$0" || exit 1; cat <&3 >/dev/null' "$port"
assert_eq "a silent client is closed by the server" 0 "$?"
kill $srv 2>/dev/null; wait $srv 2>/dev/null

# Per-user totals from the job records (issue 28 item 4): counters that keep what ended jobs
# used, and grow as more end.
user_total() { # metric: root's value on GPU 0
  # grep, not awk: under ASan's preloaded runtime, awk's index() aborts (a false alarm of awk's)
  records_settled   # a job's record comes from vgpu run's finisher, up to a second after it
  vgpu metrics 2>/dev/null | grep -F "$1{user=\"root\",gpu=\"0\"," | sed 's/.* //'
}
run vgpu run --core 30 -- core_loop -t 1 -k 1000
g1=$(user_total vgpu_user_gpu_seconds_total) j1=$(user_total vgpu_user_gpu_jobs_total)
check "an ended --core 30 job of 1 s: root's GPU-seconds counter has it (${g1:-none})" \
  awk -v v="${g1:-0}" 'BEGIN { exit !(v > 0.2 && v < 0.45) }'
assert_eq "... and its jobs counter 1" "1" "$j1"
check "the counters are typed counter" sh -c 'vgpu metrics | grep -qx "# TYPE vgpu_user_memory_gib_seconds_total counter"'
run vgpu run --core 30 -- core_loop -t 1 -k 1000
g2=$(user_total vgpu_user_gpu_seconds_total)
check "after another job ends the counter has grown, not reset (${g1:-none} -> ${g2:-none})" \
  awk -v a="${g1:-0}" -v b="${g2:-0}" 'BEGIN { exit !(b > a + 0.2) }'
assert_eq "... its jobs counter on the GPU 2 (vgpu_user_jobs_total, per user, is acct_bounds.sh's)" "2" "$(user_total vgpu_user_gpu_jobs_total)"

done_testing
