# A process under libvgpu.so that only launches kernels (never allocates) while its job region
# is truncated (issue 12 item 3): it died by SIGBUS (the launch gate reads the limits sequence
# from the mapped limits page, the compute limiter reads the limits and writes the usage), or,
# with the file cut inside the limits page (no fault: the rest of the page reads as zeros), ran
# on without its GPU time limit. It must live on, exit 0, keep the limits it last saw, and say
# once that the region is damaged. tests/cli/truncated.sh covers allocations and the tools.
. "$(dirname "$0")/lib.sh"

# job_probe SIZE FILE VGPU-ARGS... -- BUS_PROBE-STEPS...: vgpu run of bus_probe, whose region is
# truncated to SIZE once it launches (its first 8 kernels are in); the steps after launchuntil
# run on the truncated region. Sets out (bus_probe's stdout), err and rc (vgpu run's).
job_probe() {
  local size=$1 f=$2; shift 2
  local args=()
  while [ "$1" != -- ]; do args+=("$1"); shift; done
  shift
  run vgpu run "${args[@]}" -- sh -c 'f=$0 size=$1; shift
    bus_probe init launchuntil "$f.go" "$@" >"$f" & p=$!
    wait_until 20 grep -q launching "$f"; truncate -s "$size" "$VGPU_REGION"; touch "$f.go"
    wait $p; st=$?; cat "$f"; exit $st' "$f" "$size" "$@"
}
said_once() { # desc
  assert_eq "$1: the damage is said once" 1 "$(grep -c 'the job region is damaged' <<<"$err")"
}

for size in 0 100; do
  # --mem only: the launch path reads the limits sequence and nothing else.
  job_probe $size "$T_DIR/mem.$size" --mem 1G -- launch 300 100
  assert_rc "--mem 1G, truncate -s $size while it launches: it lives on, exit 0" 0
  assert_contains "--mem 1G, truncate -s $size: launches went on after the truncation" "launch rc=0" "$out"
  said_once "--mem 1G, truncate -s $size"
  assert_contains "--mem 1G, truncate -s $size: it keeps the 1 GiB it last saw" "keeps the limits it last saw (1 GiB" "$err"

  # The same, allocating afterwards: the 1 GiB it last saw still holds.
  job_probe $size "$T_DIR/memalloc.$size" --mem 1G -- launch 200 100 alloc 256M alloc 1200M
  assert_rc "--mem 1G, truncate -s $size, then allocations: exit 0" 0
  assert_contains "--mem 1G, truncate -s $size: 256 MiB afterwards passes" "alloc rc=0 size=268435456" "$out"
  assert_contains "--mem 1G, truncate -s $size: 1200 MiB afterwards is still refused" "alloc rc=2 size=1258291200" "$out"
  said_once "--mem 1G, truncate -s $size, then allocations"

  # --core 30: the compute limiter reads the limits and charges GPU time into the usage part;
  # 2 s of 2 ms kernels after the truncation still get about 30 % of the simulated GPU (alone
  # and unlimited a job gets about 100 %; the band is wide for a loaded 2-core machine).
  job_probe $size "$T_DIR/core.$size" --core 30 -- launch 2000 2000
  assert_rc "--core 30, truncate -s $size while it launches: it lives on, exit 0" 0
  share=$(sed -n 's/^launch rc=0 .*share=\([0-9.]*\)$/\1/p' <<<"$out")
  if [ -n "$share" ] && awk -v s="$share" 'BEGIN { exit !(s >= 0.12 && s <= 0.45) }'; then
    ok "--core 30, truncate -s $size: still limited afterwards (share $share)"
  else
    not_ok "--core 30, truncate -s $size: still limited afterwards" "share '$share', want 0.12..0.45; out: $out; err: ${err:0:600}"
  fi
  said_once "--core 30, truncate -s $size"
  assert_contains "--core 30, truncate -s $size: it names the GPU time limit it keeps" "30 % GPU time" "$err"
done

done_testing
