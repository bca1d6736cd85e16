#!/usr/bin/env bash
# ABI check of our hand-written driver declarations (decision 1 of DESIGN.md): every enum
# value, integer #define, struct/union/enum size and member offset declared in
# lib/include/vgpu_cuda.h and lib/include/vgpu_nvml.h, and every entry-point signature in
# lib/include/vgpu_cuda_fns.def, must equal the vendor's header. tests/unit/abi_facts.awk lists
# the facts, tests/unit/abi_check.c (built here, against our header) prints one _Static_assert
# per fact, and the result is compiled against the vendor header: any difference is a compile
# error naming the fact. Skipped with a reason where the vendor header is absent.
. "$(dirname "$0")/lib.sh"

CUDA_INC=${VGPU_CUDA_INCLUDE:-/usr/local/cuda/include}
CC=${CC:-cc}

# check_abi LABEL OUR_HEADER VENDOR_INCLUDES [EXTRA_CFLAGS...]
check_abi() {
  local label=$1 header=$2 vendor=$3; shift 3
  local dir=$T_DIR/abi-$label
  mkdir -p "$dir"
  if ! awk -f "$VGPU_SRC/tests/unit/abi_facts.awk" "$VGPU_SRC/lib/include/$header" >"$dir/abi_facts.inc"; then
    not_ok "abi: $label: extract facts from $header"; return
  fi
  local nfacts; nfacts=$(wc -l <"$dir/abi_facts.inc")
  case " $* " in *" -DVGPU_ABI_CUDA_FNS "*)
    nfacts="$nfacts facts and $(grep -c '^VGPU_CU_FN(' "$VGPU_SRC/lib/include/vgpu_cuda_fns.def") entry points" ;;
  *) nfacts="$nfacts facts" ;; esac
  if ! $CC -std=gnu11 -Wall -Werror -I"$dir" -I"$VGPU_SRC/lib/include" \
        -DVGPU_ABI_HEADER="\"$header\"" "$@" "$VGPU_SRC/tests/unit/abi_check.c" -o "$dir/abi_check" 2>"$dir/build.err"; then
    not_ok "abi: $label: build abi_check against $header" "$(cat "$dir/build.err")"; return
  fi
  { printf '%s\n' "$vendor"; "$dir/abi_check"; } >"$dir/check.c"
  if $CC -std=gnu11 -fsyntax-only -I"$CUDA_INC" -I"$VGPU_SRC/lib/include" "$dir/check.c" 2>"$dir/check.err"; then
    ok "abi: $label: $nfacts of $header match the vendor header"
  else
    not_ok "abi: $label: $header differs from the vendor header" "$(grep -E 'error' "$dir/check.err" | head -n 30)"
  fi
}

if [ -f "$CUDA_INC/cuda.h" ] && [ -f "$CUDA_INC/cudaTypedefs.h" ]; then
  # __CUDA_API_VERSION_INTERNAL makes cudaTypedefs.h declare the old ABIs (PFN_cuMemAlloc_v2000...).
  check_abi cuda vgpu_cuda.h $'#define __CUDA_API_VERSION_INTERNAL 1\n#include <cuda.h>\n#include <cudaTypedefs.h>' -DVGPU_ABI_CUDA_FNS
else
  skip "abi: cuda" "no $CUDA_INC/cuda.h and cudaTypedefs.h (install the CUDA toolkit headers to check vgpu_cuda.h)"
fi

if [ ! -f "$VGPU_SRC/lib/include/vgpu_nvml.h" ]; then
  skip "abi: nvml" "lib/include/vgpu_nvml.h does not exist yet"
elif [ -f "$CUDA_INC/nvml.h" ]; then
  check_abi nvml vgpu_nvml.h '#include <nvml.h>'
else
  skip "abi: nvml" "no $CUDA_INC/nvml.h (install the CUDA toolkit's NVML headers to check vgpu_nvml.h)"
fi
done_testing
