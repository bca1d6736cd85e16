/* abi_check.c: prints, for every ABI fact of one hand-written header, a _Static_assert that
 * holds only if the vendor's header agrees. tests/cli/abi.sh builds it against our header
 * (VGPU_ABI_HEADER, e.g. "vgpu_cuda.h") with the list of facts that abi_facts.awk extracted
 * from that header (abi_facts.inc), runs it, and compiles its output against the vendor header
 * (cuda.h, nvml.h). Our header and the vendor's use the same names, so one spelling of each
 * expression is valid in both translation units; they can never be included together.
 * With -DVGPU_ABI_CUDA_FNS it also checks every entry point of vgpu_cuda_fns.def: the output
 * redeclares our function-pointer types from the .def and compares each with cudaTypedefs.h's
 * PFN_<base>_v<version>[_ptsz|_ptds] using __builtin_types_compatible_p. */
#include <stddef.h>
#include <stdio.h>

#include VGPU_ABI_HEADER

#define VGPU_ABI_ENUM(e) \
    printf("_Static_assert((long long)(%s) == %lldLL, \"value of %s\");\n", #e, (long long)(e), #e);
#define VGPU_ABI_SIZE(t) printf("_Static_assert(sizeof(%s) == %zu, \"sizeof(%s)\");\n", #t, sizeof(t), #t);
#define VGPU_ABI_OFF(t, f)                                                                     \
    printf("_Static_assert(offsetof(%s, %s) == %zu, \"offsetof(%s, %s)\");\n", #t, #f, offsetof(t, f), \
           #t, #f);

static void emit_facts(void)
{
#include "abi_facts.inc"
}

#ifdef VGPU_ABI_CUDA_FNS
#define PFN_SUFFIX_PLAIN ""
#define PFN_SUFFIX_PTSZ "_ptsz"
#define PFN_SUFFIX_PTDS "_ptds"
#undef VGPU_CU_FN
#define VGPU_CU_FN(symbol, base, version, kind, params)                                        \
    printf("_Static_assert(__builtin_types_compatible_p(vgpu_%s_fn, PFN_%s_v%d%s), "          \
           "\"signature of %s\");\n",                                                        \
           #symbol, #base, version, PFN_SUFFIX_##kind, #symbol);
static void emit_functions(void)
{
    printf("#define VGPU_CU_FN(symbol, base, version, kind, params) "
           "typedef CUresult (*vgpu_##symbol##_fn) params;\n");
    printf("#include \"vgpu_cuda_fns.def\"\n");
#include "vgpu_cuda_fns.def"
}
#endif

int main(void)
{
    printf("#include <stddef.h>\n");
    emit_facts();
#ifdef VGPU_ABI_CUDA_FNS
    emit_functions();
#endif
    return 0;
}
