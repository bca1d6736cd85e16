/* route.c: how callers reach our wrappers (DESIGN.md decision 3, interception.md §1).
 *
 * 1. Direct linking: the wrappers are exported under the driver's own versioned names.
 * 2. dlopen + dlsym: glibc's dlsym on a libcuda handle would skip an LD_PRELOAD library, so we
 *    override dlsym. It asks the real dlsym first; only when that finds something and the name
 *    is exactly one of the driver exports in hooks.def (or an NVML function we virtualise) is
 *    the answer replaced by our wrapper. cudnn*, cublas*, cuda* and every other name are never
 *    touched, because they are simply not in the table.
 * 3. cuGetProcAddress (4 arguments, CUDA 11.3) and cuGetProcAddress_v2 (5 arguments): the real
 *    one answers first; a non-NULL answer is replaced by the wrapper of exactly the ABI variant
 *    the driver chose. The variant is identified by pointer identity with the driver's exports,
 *    else by the driver's own rule (newest variant introduced at or before cudaVersion; the
 *    _ptsz/_ptds one for CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) over every variant of
 *    vgpu_cuda_fns.def, so an old ABI is never answered with a newer ABI's wrapper, and a
 *    per-thread request gets a wrapper that calls the per-thread function. Variants we do not
 *    hook (cuMemPrefetchAsync, cuMemAdvise, ...) come back exactly as the driver gave them. */
#include <dlfcn.h>
#include <link.h>
#include <string.h>

#include "hook.h"

struct route {
    const char *symbol, *base;
    int version;
    bool per_thread;
    enum vgpu_hook_id id;
    void *wrapper;
};

#define PT_PLAIN false
#define PT_PTSZ true
#define PT_PTDS true

static const struct route routes[] = {
#define VGPU_HOOK(symbol, base, version, kind) \
    { #symbol, #base, version, PT_##kind, VGPU_H_##symbol, (void *)&symbol },
#include "hooks.def"
#undef VGPU_HOOK
};
#define NROUTES (sizeof routes / sizeof *routes)

/* Every ABI variant the driver may hand out, hooked or not: the selection rule needs them all. */
struct variant {
    const char *symbol, *base;
    int version;
    bool per_thread;
};
static const struct variant variants[] = {
#define VGPU_CU_FN(symbol, base, version, kind, params) { #symbol, #base, version, PT_##kind },
#include "vgpu_cuda_fns.def"
#undef VGPU_CU_FN
};

void *vgpu_route_hook_by_symbol(const char *name)
{
    for (size_t i = 0; i < NROUTES; i++)
        if (strcmp(routes[i].symbol, name) == 0)
            return routes[i].wrapper;
    return NULL;
}

static const struct route *route_of_symbol(const char *name)
{
    for (size_t i = 0; i < NROUTES; i++)
        if (strcmp(routes[i].symbol, name) == 0)
            return &routes[i];
    return NULL;
}

/* The variant the driver's rule picks for (base, cudaVersion, flags), or NULL. */
static const struct variant *pick_variant(const char *base, int cuda_version, cuuint64_t flags)
{
    const struct variant *plain = NULL, *pt = NULL;
    for (size_t i = 0; i < sizeof variants / sizeof *variants; i++) {
        const struct variant *v = &variants[i];
        if (v->version > cuda_version || strcmp(v->base, base) != 0)
            continue;
        const struct variant **best = v->per_thread ? &pt : &plain;
        if (!*best || v->version > (*best)->version)
            *best = v;
    }
    return (flags == CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM && pt) ? pt : plain;
}

/* What to hand out instead of the driver's `fn` for a cuGetProcAddress request. */
static void *substitute(const char *base, void *fn, int cuda_version, cuuint64_t flags)
{
    bool hooked_base = false;
    for (size_t i = 0; i < NROUTES; i++) {
        if (strcmp(routes[i].base, base) != 0)
            continue;
        hooked_base = true;
        if (fn == routes[i].wrapper)
            return fn;                 /* already ours */
        if (vgpu_real(routes[i].id) == fn)
            return routes[i].wrapper;  /* exactly that export */
    }
    if (!hooked_base)
        return fn;
    const struct variant *v = pick_variant(base, cuda_version, flags);
    const struct route *r = v ? route_of_symbol(v->symbol) : NULL;
    if (!r)
        return fn;                     /* a variant we pass through untouched */
    vgpu_real_offer(r->id, fn);        /* the driver exports none: call what it gave us */
    return r->wrapper;
}

VGPU_EXPORT CUresult cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags)
{
    vgpu_cuGetProcAddress_fn real = REAL(cuGetProcAddress);
    if (!real)
        return CUDA_ERROR_NOT_INITIALIZED;
    CUresult rc = real(symbol, pfn, cudaVersion, flags);
    if (rc == CUDA_SUCCESS && symbol && pfn && *pfn)
        *pfn = substitute(symbol, *pfn, cudaVersion, flags);
    return rc;
}

VGPU_EXPORT CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags,
                                         CUdriverProcAddressQueryResult *symbolStatus)
{
    vgpu_cuGetProcAddress_v2_fn real = REAL(cuGetProcAddress_v2);
    if (!real)
        return CUDA_ERROR_NOT_INITIALIZED;
    CUresult rc = real(symbol, pfn, cudaVersion, flags, symbolStatus);
    if (rc == CUDA_SUCCESS && symbol && pfn && *pfn)
        *pfn = substitute(symbol, *pfn, cudaVersion, flags);
    return rc;
}

/* dlsym(RTLD_NEXT, name) means "after the caller", and glibc finds the caller from dlsym's
 * return address. So an RTLD_NEXT lookup of a name we do not route must reach glibc's dlsym by a
 * tail jump, with nothing of ours on the stack and without calling anything that may not work
 * yet: sanitizer runtimes look up their interceptors this way (dlsym(RTLD_NEXT, "mmap"), and
 * RTLD_DEFAULT) before malloc or dlopen work. dlsym itself is therefore a few instructions of
 * assembly that jump to glibc's dlsym for every name we do not route (any handle), and to
 * vgpu_dlsym_routed() for the names we route. */
static void *(*next_dlsym)(void *, const char *);

/* Where dlsym(handle, name) goes: glibc's dlsym, or vgpu_dlsym_routed for a routed name. */
__attribute__((used)) void *vgpu_dlsym_next_target(const char *name);
__attribute__((used)) void *vgpu_dlsym_routed(void *handle, const char *name);

/* These two run when a sanitizer runtime resolves its interceptors, before its shadow memory
 * exists: they must not be instrumented (a no-op in normal builds). */
#define NOT_SANITIZED __attribute__((no_sanitize("address", "undefined", "thread")))

NOT_SANITIZED static bool routed_name(const char *name)
{
    if (name[0] == 'c' && name[1] == 'u')
        return vgpu_route_hook_by_symbol(name) != NULL;
    if (name[0] == 'n' && name[1] == 'v' && name[2] == 'm' && name[3] == 'l')
        return vgpu_nvml_hook_by_symbol(name) != NULL;
    return false;
}

NOT_SANITIZED void *vgpu_dlsym_next_target(const char *name)
{
    if (!next_dlsym) {
        /* The same search as real.c, without pthread_once (this may run before anything else). */
        static const char *const versions[] = { "GLIBC_2.34", "GLIBC_2.2.5", "GLIBC_2.17" };
        for (size_t i = 0; i < sizeof versions / sizeof *versions && !next_dlsym; i++)
            next_dlsym = (void *(*)(void *, const char *))dlvsym(RTLD_NEXT, "dlsym", versions[i]);
    }
    return name && routed_name(name) ? (void *)vgpu_dlsym_routed : (void *)next_dlsym;
}

/* dlsym(RTLD_NEXT, routed name): walk the link maps after the caller's object and take the
 * first definition that lives in one of them (it is then routed like any other answer). */
static void *next_after(const void *caller, const char *name)
{
    Dl_info info;
    struct link_map *self = NULL;
    if (!dladdr1(caller, &info, (void **)&self, RTLD_DL_LINKMAP) || !self)
        return vgpu_real_dlsym(RTLD_DEFAULT, name);
    for (struct link_map *l = self->l_next; l; l = l->l_next) {
        void *h = dlopen(l->l_name && l->l_name[0] ? l->l_name : NULL, RTLD_LAZY | RTLD_NOLOAD);
        if (!h)
            continue;
        void *p = vgpu_real_dlsym(h, name);
        dlclose(h);
        struct link_map *owner = NULL;
        Dl_info pinfo;
        if (p && dladdr1(p, &pinfo, (void **)&owner, RTLD_DL_LINKMAP) && owner == l)
            return p;
    }
    return NULL;
}

void *vgpu_dlsym_routed(void *handle, const char *name)
{
    /* Reached by a jump from dlsym: our return address is the application's call site. */
    void *p = handle == RTLD_NEXT ? next_after(__builtin_return_address(0), name) : vgpu_real_dlsym(handle, name);
    if (!p)
        return p;
    if (name[0] == 'c' && name[1] == 'u') {
        void *w = vgpu_route_hook_by_symbol(name);
        return w ? w : p;
    }
    if (name[0] == 'n' && strncmp(name, "nvml", 4) == 0) {
        void *w = vgpu_nvml_hook_by_symbol(name);
        return w ? w : p;
    }
    return p;
}

#if defined(__x86_64__)
__asm__(".text\n"
        ".globl dlsym\n"
        ".type dlsym, @function\n"
        "dlsym:\n"
        "    endbr64\n"                    /* a no-op unless indirect-branch tracking is on */
        "    pushq %rdi\n"
        "    pushq %rsi\n"
        "    subq $8, %rsp\n"               /* 16-byte alignment at the call */
        "    movq %rsi, %rdi\n"
        "    call vgpu_dlsym_next_target\n"
        "    addq $8, %rsp\n"
        "    popq %rsi\n"
        "    popq %rdi\n"
        "    jmp *%rax\n"
        ".size dlsym, .-dlsym\n");
#elif defined(__aarch64__)
__asm__(".text\n"
        ".globl dlsym\n"
        ".type dlsym, %function\n"
        "dlsym:\n"
        "    hint #34\n"                   /* bti c: a no-op unless branch protection is on */
        "    stp x29, x30, [sp, #-32]!\n"
        "    mov x29, sp\n"
        "    stp x0, x1, [sp, #16]\n"
        "    mov x0, x1\n"
        "    bl vgpu_dlsym_next_target\n"
        "    mov x16, x0\n"
        "    ldp x0, x1, [sp, #16]\n"
        "    ldp x29, x30, [sp], #32\n"
        "    br x16\n"
        ".size dlsym, .-dlsym\n");
#else
#error "libvgpu.so's dlsym override is written for x86-64 and aarch64"
#endif
