# libvgpu.so leaves the application alone: umask and signal dispositions unchanged (but SIGBUS
# in a process with a job region: its guard, libvgpu(7)), files it creates are 0600; only the
# hook symbols are exported; it depends on libc alone.
. "$(dirname "$0")/lib.sh"

# "before umask=0027 sigs=DDDDDD..." with SIGBUS's letter (the 7th) replaced by '?'
no_bus() { local s=${1#*sigs=}; printf '%s sigs=%s?%s' "${1%% sigs=*}" "${s:0:6}" "${s:7}"; }
bus() { local s=${1#*sigs=}; printf '%s' "${s:6:1}"; }
run vgpu run --mem 2G --core 50 -- env_probe
before=$(printf '%s\n' "$out" | sed -n 's/^before //p')
after=$(printf '%s\n' "$out" | sed -n 's/^after //p')
assert_contains "env_probe ran its CUDA work under the library" "umask=0027" "$before"
assert_eq "umask and every signal disposition but SIGBUS are unchanged after CUDA work" "$(no_bus "$before")" \
  "$(no_bus "$after")"
# (Under the sanitizer build its runtime's handler is there before.)
[ "${VGPU_ASAN:-0}" = 1 ] || assert_eq "SIGBUS: the default action before CUDA work" D "$(bus "$before")"
assert_eq "SIGBUS: the library's handler once the job region is mapped" H "$(bus "$after")"
# Without a job (the library preloaded, no VGPU_REGION): nothing changes, SIGBUS included.
run env LD_PRELOAD="${LD_PRELOAD:+$LD_PRELOAD:}$VGPU_BUILD/libvgpu.so" env_probe
before=$(printf '%s\n' "$out" | sed -n 's/^before //p')
after=$(printf '%s\n' "$out" | sed -n 's/^after //p')
assert_contains "env_probe ran its CUDA work with the library and no job" "umask=0027" "$before"
assert_eq "no job: umask and every signal disposition are unchanged, SIGBUS too" "$before" "$after"

lib=$VGPU_BUILD/libvgpu.so
exported=$(nm -D --defined-only "$lib" | awk '{print $3}' | sed 's/@.*//' | sort)
expected=$({ sed -n 's/^VGPU_HOOK(\([A-Za-z0-9_]*\),.*/\1/p' "$VGPU_SRC/lib/hook/hooks.def"
             printf '%s\n' nvmlDeviceGetCount nvmlDeviceGetCount_v2 nvmlDeviceGetHandleByIndex \
               nvmlDeviceGetHandleByIndex_v2 nvmlDeviceGetMemoryInfo nvmlDeviceGetMemoryInfo_v2 dlsym; } | sort)
assert_eq "libvgpu.so exports exactly the hooks of hooks.def, the NVML views and dlsym" "$expected" "$exported"
map=$(sed -n '/global:/,/local:/s/^ *\([A-Za-z0-9_]*\);$/\1/p' "$VGPU_SRC/lib/hook/exports.map" | sort)
assert_eq "exports.map lists the same names" "$expected" "$map"
assert_not_contains "no cudnn/cublas/cuda* names are exported" "cudnn" "$exported"
needed=$(objdump -p "$lib" | awk '/NEEDED/ {print $2}' | sort | tr '\n' ' ')
case $needed in
  *libasan*) skip "libvgpu.so needs libc only" "sanitized build" ;;
  # (The dynamic loader, ld-linux, would be needed only for __tls_get_addr; the limiter's TLS is
  # initial-exec, so libc alone, plus libdl and libpthread, where glibc < 2.34 keeps dl* and
  # pthread_*: tests/cli/glibc.sh.)
  *) assert_eq "libvgpu.so needs libc only (and libdl, libpthread for old glibc)" "libc.so.6 libdl.so.2 libpthread.so.0 " "$needed" ;;
esac
if nm -D --undefined-only "$lib" | grep -qE ' (exit|_exit|umask|signal)(@|$)'; then
  not_ok "the library never calls exit, umask or signal" "$(nm -D --undefined-only "$lib" | grep -E ' (exit|_exit|umask|signal)')"
else
  ok "the library never calls exit, umask or signal"
fi
# sigaction: guard.c's SIGBUS handler alone (its install and its chaining to the one before).
users=$(cd "$VGPU_BUILD/obj" && nm -A --undefined-only lib/hook/*.o lib/core/*/*.o 2>/dev/null |
  awk '$NF ~ /^sigaction(@|$)/ { sub(/:.*/, "", $1); print $1 }' | sort -u | tr '\n' ' ')
assert_eq "sigaction is called from lib/hook/guard.c alone" "lib/hook/guard.o " "$users"

# The HAMi shared cache it creates is 0600 whatever the umask.
run sh -c 'umask 000; CUDA_DEVICE_MEMORY_LIMIT=1G CUDA_DEVICE_MEMORY_SHARED_CACHE="$0/cache" LD_PRELOAD="$1" alloc_probe meminfo; stat -c %a "$0/cache"' "$T_DIR" "$lib"
assert_contains "a region the library creates is 0600 even under umask 000" "600" "$(printf '%s\n' "$out" | tail -1)"
done_testing
