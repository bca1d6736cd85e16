# Debian's Prometheus scrapes `vgpu metrics --listen`, and prometheus-node-exporter's textfile
# collector reads `vgpu metrics --textfile` (issue 29), while a capped job runs on the simulated
# GPU; the test asks Prometheus's HTTP API what arrived. Everything listens on 127.0.0.1 only, on
# free ports, with storage under the test's directory; every daemon is bounded by timeout(1) and
# killed at the end. Run by `make test-engines` (VGPU_TEST_ENGINES=1); `make test` skips it.
. "$(dirname "$0")/lib.sh"

pkgs=${VGPU_ENGINE_PACKAGES:-podman prometheus prometheus-node-exporter}
[ "${VGPU_TEST_ENGINES:-}" = 1 ] || skip_all "a real Prometheus: run it with make test-engines"
command -v prometheus >/dev/null || skip_all "prometheus is missing: install $pkgs (sudo make deps-engines)"
command -v python3 >/dev/null || skip_all "python3 is missing (make deps)"

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
q() {  # q PROMQL: Prometheus's instant query result (JSON), at the newest data
  python3 - "$prom_port" "$1" <<'EOF'
import json, sys, urllib.parse, urllib.request
url = "http://127.0.0.1:%s/api/v1/query?%s" % (sys.argv[1], urllib.parse.urlencode({"query": sys.argv[2]}))
print(json.dumps(json.load(urllib.request.urlopen(url, timeout=5))["data"]["result"]))
EOF
}
has() { [ "$(q "$1" 2>/dev/null | jq length 2>/dev/null)" -gt 0 ] 2>/dev/null; }   # has PROMQL: any result
val() { q "$1" | jq -r '.[0].value[1] // empty'; }                              # val PROMQL: the first value

vgpu_port=$(free_port) prom_port=$(free_port) node_port=$(free_port)
tf=$T_DIR/textfile
mkdir -p "$tf" "$T_DIR/prom"

# The capped job first, so that the first scrapes already see it: 1 GiB held, kernels at 30 %
# until the test has seen what it needs and creates $T_DIR/stop (a fixed 8 s ended it before
# Prometheus had started on a busy machine, issue 36 N18); 100 s at most.
vgpu run --name prom-job --mem 4G --core 30 -- sh -c 'core_loop -a 1024 -k 2000 -t 100 & l=$!
  wait_until 100 test -e "$0/stop"; kill "$l"; wait "$l"; exit 0' "$T_DIR" > "$T_DIR/job.out" 2>&1 < /dev/null &
job=$!
timeout 120 vgpu metrics --listen "127.0.0.1:$vgpu_port" 2> "$T_DIR/listen.err" &
# The textfile form, rewritten every second as a cron job or a systemd timer would.
( end=$((SECONDS + 110)); while [ $SECONDS -lt $end ]; do vgpu metrics --textfile "$tf" 2>>"$T_DIR/tf.err"; sleep 1; done ) &

node=
if command -v prometheus-node-exporter >/dev/null; then
  timeout 120 prometheus-node-exporter --web.listen-address="127.0.0.1:$node_port" --collector.disable-defaults \
    --collector.textfile --collector.textfile.directory="$tf" > "$T_DIR/node.log" 2>&1 &
  node=1
fi
cat > "$T_DIR/prometheus.yml" <<EOF
global:
  scrape_interval: 1s
  scrape_timeout: 1s
scrape_configs:
  - job_name: vgpu
    static_configs: [{ targets: ["127.0.0.1:$vgpu_port"] }]
  - job_name: node
    static_configs: [{ targets: ["127.0.0.1:$node_port"] }]
EOF
timeout 120 prometheus --config.file="$T_DIR/prometheus.yml" --storage.tsdb.path="$T_DIR/prom" \
  --web.listen-address="127.0.0.1:$prom_port" --storage.tsdb.retention.time=1h > "$T_DIR/prom.log" 2>&1 &

if ! wait_until 30 has 'up{job="vgpu"} == 1'; then
  not_ok "Prometheus scrapes vgpu metrics --listen" "$(tail -5 "$T_DIR/prom.log"; cat "$T_DIR/listen.err")"
  done_testing; exit 0
fi
ok "Prometheus $(prometheus --version 2>&1 | head -1 | awk '{print $3}') scrapes vgpu metrics --listen: the target is up"
sel='job="vgpu",job_name="prom-job"'
wait_until 30 has "vgpu_job_memory_used_bytes{$sel} >= 1073741824"
m=$(q "vgpu_job_memory_used_bytes{$sel}")
assert_match "the job's memory in use arrives, counting the 1 GiB held" '^[0-9]+' "$(jq -r '.[0].value[1] | select(tonumber >= 1073741824)' <<<"$m")"
assert_eq "... with the GPU's labels (gpu, UUID, Hostname)" "0 GPU- $(hostname)" \
  "$(jq -r '.[0].metric | "\(.gpu) \(.UUID[0:4]) \(.Hostname)"' <<<"$m")"
assert_eq "the job's memory limit" 4294967296 "$(val "vgpu_job_memory_limit_bytes{$sel}")"
assert_eq "its core limit" 0.3 "$(val "vgpu_job_core_limit_ratio{$sel}")"
wait_until 20 has "vgpu_job_gpu_time_seconds_total{$sel} > 0.2"
running=$(val "vgpu_job_gpu_time_seconds_total{$sel} > 0.2")
assert_match "its GPU time arrives (a counter, past 0.2 s while it runs)" '^[0-9.]+$' "$running"
d=$(val 'max_over_time(scrape_duration_seconds{job="vgpu"}[1m])')
if [ -n "$d" ] && awk -v d="$d" 'BEGIN { exit !(d < 1) }'; then ok "every scrape took under a second (longest ${d} s)"; else
  not_ok "every scrape took under a second" "longest: '$d'"; fi

if [ -n "$node" ]; then
  wait_until 30 has "vgpu_job_memory_limit_bytes{job=\"node\",job_name=\"prom-job\"}"
  assert_eq "node-exporter's textfile collector: the job's memory limit arrives the same way" 4294967296 \
    "$(val "vgpu_job_memory_limit_bytes{job=\"node\",job_name=\"prom-job\"}")"
  assert_eq "... and no textfile error" 0 "$(val 'node_textfile_scrape_error{job="node"}')"
else
  skip "node-exporter's textfile collector reads vgpu metrics --textfile" "prometheus-node-exporter is missing: install $pkgs"
  skip "... and no textfile error" "prometheus-node-exporter is missing"
fi

# The job ends; its GPU time counter goes on being served at its last value: no reset.
touch "$T_DIR/stop"
wait $job
ended=$(date +%s)
wait_until 20 has "timestamp(up{job=\"vgpu\"}) > $((ended + 2))"
after=$(val "vgpu_job_gpu_time_seconds_total{$sel}")
if [ -n "$after" ]; then ok "after the job ended its GPU time is still served ($after s)"; else
  not_ok "after the job ended its GPU time is still served" "$(q "{job_name=\"prom-job\"}")"; fi
if [ -n "$after" ] && [ -n "$running" ] && awk -v a="$after" -v b="$running" 'BEGIN { exit !(a > b) }'; then
  ok "... more than while it ran ($running s)"; else not_ok "... more than while it ran" "running=$running after=$after"; fi
assert_eq "... and Prometheus saw no counter reset" 0 "$(val "resets(vgpu_job_gpu_time_seconds_total{$sel}[5m])")"

done_testing
