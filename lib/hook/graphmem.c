/* graphmem.c: graph memory (memory-allocation nodes, and cuMemAllocAsync captured into a graph)
 * at the job's limit (issue 11, part 6).
 *
 * The driver gives a graph's allocations their memory from a per-device graph pool when the
 * graph is launched or uploaded, and returns CUDA_ERROR_OUT_OF_MEMORY from
 * cuGraphAddMemAllocNode, instantiation or launch when memory is short. vgpu does the same at
 * the limit:
 *  - cuGraphAddMemAllocNode / cuGraphAddNode(MEM_ALLOC): refused when the allocation does not
 *    fit in what the job has left now (its free share plus what the graph pool holds unused);
 *    a cuMemAllocAsync captured into a graph is checked the same way by pool.c;
 *  - instantiation: refused when the graph's allocations on one device exceed the job's limit
 *    (it could never run); otherwise what the graph allocates on each device is recorded, read
 *    from the graph's nodes (cuGraphGetNodes, cuGraphMemAllocNodeGetParams, and the free nodes,
 *    whose memory a relaunch reuses);
 *  - launch and upload: before the real call, the growth the graph pool may need (the graph's
 *    allocations less what the pool holds unused) is reserved against the limit; when it does
 *    not fit the call is refused with CUDA_ERROR_OUT_OF_MEMORY and nothing runs. After the call
 *    the pool's real growth (RESERVED_MEM_CURRENT) is charged and the reservation returned.
 *    A relaunch needs only what the graph does not free itself (and nothing with
 *    AUTO_FREE_ON_LAUNCH), as its earlier launch's memory comes back in stream order.
 * Graphs the hook never saw instantiated (and trims, pool shrinking) are settled after the
 * fact by vgpu_graphmem_reconcile, as before: growth it finds is charged even past the limit.
 * What the graph pools hold, charged, is graphmem_charge.c's (below admit.c, which re-measures
 * it before refusing); this file is the admission of graph memory and the wrappers, above. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "hook.h"
#include "vgpu/region.h"

#define MAXDEV VGPU_REGION_MAX_DEVICES
#define EXEC_DEVS 4        /* devices recorded per graph; more is rare, and settled after the fact */
#define MAX_EXECS 1024

/* Whether `bytes` of graph memory fit on `dev` now (the OOM line is logged when not). */
static bool fits_now(int dev, uint64_t bytes, const char *what)
{
    if (dev < 0 || dev >= MAXDEV || !vgpu_job() || !bytes)
        return true;
    vgpu_graphmem_reconcile(dev);
    uint64_t spare = vgpu_graphmem_spare(dev);
    if (bytes <= spare)
        return true;
    if (!vgpu_acct_reserve(dev, bytes - spare, what))
        return false;
    vgpu_acct_release(dev, bytes - spare);
    return true;
}

static int alloc_device(const CUDA_MEM_ALLOC_NODE_PARAMS *p)
{
    return p && p->poolProps.location.type == CU_MEM_LOCATION_TYPE_DEVICE ? p->poolProps.location.id : -1;
}

/* ---- what a graph allocates ---- */

struct graph_need {
    int n;
    struct { int dev; uint64_t total, persist; } d[EXEC_DEVS];
};

static void need_add(struct graph_need *g, int dev, uint64_t total, uint64_t persist)
{
    for (int i = 0; i < g->n; i++)
        if (g->d[i].dev == dev) {
            g->d[i].total += total;
            g->d[i].persist += persist;
            return;
        }
    if (g->n < EXEC_DEVS && dev >= 0 && dev < MAXDEV) {
        g->d[g->n].dev = dev;
        g->d[g->n].total = total;
        g->d[g->n].persist = persist;
        g->n++;
    }
}

/* Reads the graph's memory nodes. False when the driver cannot tell (nothing is checked then). */
static bool measure_graph(CUgraph graph, bool auto_free, struct graph_need *out)
{
    vgpu_cuGraphGetNodes_fn nodes_of = (vgpu_cuGraphGetNodes_fn)vgpu_real_cuda_sym("cuGraphGetNodes");
    vgpu_cuGraphNodeGetType_fn type_of = (vgpu_cuGraphNodeGetType_fn)vgpu_real_cuda_sym("cuGraphNodeGetType");
    vgpu_cuGraphMemAllocNodeGetParams_fn alloc_of =
        (vgpu_cuGraphMemAllocNodeGetParams_fn)vgpu_real_cuda_sym("cuGraphMemAllocNodeGetParams");
    vgpu_cuGraphMemFreeNodeGetParams_fn free_of =
        (vgpu_cuGraphMemFreeNodeGetParams_fn)vgpu_real_cuda_sym("cuGraphMemFreeNodeGetParams");
    out->n = 0;
    size_t n = 0;
    if (!nodes_of || !type_of || !alloc_of || nodes_of(graph, NULL, &n) != CUDA_SUCCESS)
        return false;
    if (n == 0)
        return true;
    CUgraphNode *nodes = calloc(n, sizeof *nodes);
    CUdeviceptr *freed = calloc(n, sizeof *freed);
    struct { CUdeviceptr p; int dev; uint64_t bytes; } *allocs = calloc(n, sizeof *allocs);
    size_t got = n, nfreed = 0, nallocs = 0;
    bool ok = nodes && freed && allocs && nodes_of(graph, nodes, &got) == CUDA_SUCCESS;
    for (size_t i = 0; ok && i < got && i < n; i++) {
        CUgraphNodeType t;
        if (type_of(nodes[i], &t) != CUDA_SUCCESS)
            continue;
        CUDA_MEM_ALLOC_NODE_PARAMS p;
        if (t == CU_GRAPH_NODE_TYPE_MEM_ALLOC && alloc_of(nodes[i], &p) == CUDA_SUCCESS && alloc_device(&p) >= 0) {
            allocs[nallocs].p = p.dptr;
            allocs[nallocs].dev = alloc_device(&p);
            allocs[nallocs].bytes = p.bytesize;
            nallocs++;
        } else if (t == CU_GRAPH_NODE_TYPE_MEM_FREE && free_of && free_of(nodes[i], &freed[nfreed]) == CUDA_SUCCESS) {
            nfreed++;
        }
    }
    for (size_t i = 0; ok && i < nallocs; i++) {
        bool self_freed = auto_free;
        for (size_t k = 0; k < nfreed && !self_freed; k++)
            self_freed = freed[k] == allocs[i].p;
        need_add(out, allocs[i].dev, allocs[i].bytes, self_freed ? 0 : allocs[i].bytes);
    }
    free(nodes);
    free(freed);
    free(allocs);
    return ok;
}

/* ---- executable graphs with memory nodes ---- */

struct exec_rec {
    CUgraphExec exec;
    bool launched;           /* relaunches need only the memory the graph does not free itself */
    bool uploaded;           /* cuGraphUpload took its memory for the next launch */
    struct graph_need need;
};
static pthread_mutex_t exec_lock = PTHREAD_MUTEX_INITIALIZER;
/* Open addressing keyed by the handle (a launch looks its graph up: no scan of the table).
 * NULL: never used, GONE: a forgotten record (probing goes on past it). */
static struct exec_rec execs[MAX_EXECS];
#define GONE ((CUgraphExec)(uintptr_t)1)

static unsigned exec_hash(CUgraphExec e)
{
    uint64_t x = (uint64_t)(uintptr_t)e;
    return (unsigned)((x >> 4) * 0x9E3779B97F4A7C15ull >> 54) % MAX_EXECS;
}

/* Under exec_lock. */
static struct exec_rec *exec_find(CUgraphExec e)
{
    unsigned h = exec_hash(e);
    for (unsigned i = 0; i < MAX_EXECS; i++) {
        struct exec_rec *r = &execs[(h + i) % MAX_EXECS];
        if (r->exec == e)
            return r;
        if (!r->exec)
            return NULL;
    }
    return NULL;
}

static void exec_forget(CUgraphExec e)
{
    pthread_mutex_lock(&exec_lock);
    struct exec_rec *r = e ? exec_find(e) : NULL;
    if (r)
        r->exec = GONE;
    pthread_mutex_unlock(&exec_lock);
}

/* Past MAX_EXECS live graphs with memory nodes, a graph is not recorded: its memory is then
 * charged after its launches, as for graphs the hook never saw instantiated. */
static void exec_remember(CUgraphExec e, const struct graph_need *need)
{
    pthread_mutex_lock(&exec_lock);
    struct exec_rec *r = exec_find(e);
    unsigned h = exec_hash(e);
    for (unsigned i = 0; !r && i < MAX_EXECS; i++) {
        struct exec_rec *x = &execs[(h + i) % MAX_EXECS];
        if (!x->exec || x->exec == GONE)
            r = x;
    }
    if (r) {
        r->exec = e;
        r->launched = r->uploaded = false;
        r->need = *need;
    }
    pthread_mutex_unlock(&exec_lock);
}

/* After a successful instantiation: records the graph's memory, or refuses a graph whose
 * allocations exceed the limit (the caller then destroys the executable graph). */
static bool instantiated(CUgraphExec exec, CUgraph graph, unsigned long long flags)
{
    if (!vgpu_job())
        return true;
    struct graph_need need;
    if (!measure_graph(graph, flags & CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH, &need) || need.n == 0) {
        exec_forget(exec);
        return true;
    }
    vgpu_graphmem_saw();
    for (int i = 0; i < need.n; i++) {
        uint64_t limit = vgpu_acct_limit(need.d[i].dev);
        if (limit && need.d[i].total > limit) {
            (void)vgpu_acct_reserve(need.d[i].dev, need.d[i].total, "graph instantiation");   /* logs the refusal */
            return false;
        }
    }
    exec_remember(exec, &need);
    return true;
}

_Static_assert(EXEC_DEVS == VGPU_GRAPH_HOLD_DEVS, "a graph's devices fit in a hold");

bool vgpu_graph_mem_before(CUgraphExec exec, const char *what, struct vgpu_graph_hold *h)
{
    h->n = 0;
    if (!vgpu_graphmem_seen() || !vgpu_job())
        return true;
    pthread_mutex_lock(&exec_lock);
    struct exec_rec *r = exec ? exec_find(exec) : NULL;
    struct exec_rec copy = r ? *r : (struct exec_rec){ 0 };
    pthread_mutex_unlock(&exec_lock);
    for (int i = 0; r && i < copy.need.n; i++) {
        int dev = copy.need.d[i].dev;
        uint64_t want = copy.uploaded ? 0 : copy.launched ? copy.need.d[i].persist : copy.need.d[i].total;
        vgpu_graphmem_reconcile(dev);
        uint64_t spare = vgpu_graphmem_spare(dev);
        want = want > spare ? want - spare : 0;
        if (want && !vgpu_acct_reserve(dev, want, what)) {
            for (int k = 0; k < h->n; k++)
                vgpu_acct_release(h->d[k].dev, h->d[k].held);
            h->n = 0;
            return false;
        }
        h->d[h->n].dev = dev;
        h->d[h->n].held = want;
        h->n++;
    }
    return true;
}

void vgpu_graph_mem_after(CUgraphExec exec, CUresult rc, bool launch, struct vgpu_graph_hold *h)
{
    for (int k = 0; k < h->n; k++) {
        vgpu_graphmem_reconcile(h->d[k].dev);
        vgpu_acct_release(h->d[k].dev, h->d[k].held);
    }
    if (h->n && rc == CUDA_SUCCESS) {
        pthread_mutex_lock(&exec_lock);
        struct exec_rec *r = exec ? exec_find(exec) : NULL;
        if (r && launch)
            r->launched = true, r->uploaded = false;
        else if (r)
            r->uploaded = true;
        pthread_mutex_unlock(&exec_lock);
    }
    if (rc == CUDA_SUCCESS)
        vgpu_graph_launched();
    h->n = 0;
}

/* ---- wrappers ---- */

VGPU_EXPORT CUresult cuGraphAddMemAllocNode(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,
                                            size_t numDependencies, CUDA_MEM_ALLOC_NODE_PARAMS *nodeParams)
{
    vgpu_cuGraphAddMemAllocNode_fn real = REAL(cuGraphAddMemAllocNode);
    if (!real)
        return CUDA_ERROR_NOT_INITIALIZED;
    vgpu_graphmem_saw();
    if (nodeParams && !fits_now(alloc_device(nodeParams), nodeParams->bytesize, "cuGraphAddMemAllocNode"))
        return CUDA_ERROR_OUT_OF_MEMORY;
    return real(phGraphNode, hGraph, dependencies, numDependencies, nodeParams);
}

static bool node_fits(const CUgraphNodeParams *p)
{
    if (!p || p->type != CU_GRAPH_NODE_TYPE_MEM_ALLOC)
        return true;
    vgpu_graphmem_saw();
    return fits_now(alloc_device(&p->alloc), p->alloc.bytesize, "cuGraphAddNode");
}

VGPU_EXPORT CUresult cuGraphAddNode(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,
                                    size_t numDependencies, CUgraphNodeParams *nodeParams)
{
    vgpu_cuGraphAddNode_fn real = REAL(cuGraphAddNode);
    if (!real)
        return CUDA_ERROR_NOT_INITIALIZED;
    if (!node_fits(nodeParams))
        return CUDA_ERROR_OUT_OF_MEMORY;
    return real(phGraphNode, hGraph, dependencies, numDependencies, nodeParams);
}

VGPU_EXPORT CUresult cuGraphAddNode_v2(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,
                                       const CUgraphEdgeData *dependencyData, size_t numDependencies,
                                       CUgraphNodeParams *nodeParams)
{
    vgpu_cuGraphAddNode_v2_fn real = REAL(cuGraphAddNode_v2);
    if (!real)
        return CUDA_ERROR_NOT_INITIALIZED;
    if (!node_fits(nodeParams))
        return CUDA_ERROR_OUT_OF_MEMORY;
    return real(phGraphNode, hGraph, dependencies, dependencyData, numDependencies, nodeParams);
}

#define BEGIN_CAPTURE(sym, params, args)                                         \
    VGPU_EXPORT CUresult sym params                                              \
    {                                                                            \
        vgpu_graphmem_saw();                                                      \
        CALL_REAL(sym, args);                                                    \
    }
BEGIN_CAPTURE(cuStreamBeginCapture, (CUstream hStream), (hStream))
BEGIN_CAPTURE(cuStreamBeginCapture_ptsz, (CUstream hStream), (hStream))
BEGIN_CAPTURE(cuStreamBeginCapture_v2, (CUstream hStream, CUstreamCaptureMode mode), (hStream, mode))
BEGIN_CAPTURE(cuStreamBeginCapture_v2_ptsz, (CUstream hStream, CUstreamCaptureMode mode), (hStream, mode))

static void destroy_exec(CUgraphExec e)
{
    vgpu_cuGraphExecDestroy_fn destroy = (vgpu_cuGraphExecDestroy_fn)vgpu_real_cuda_sym("cuGraphExecDestroy");
    if (destroy && e)
        (void)destroy(e);
}

VGPU_EXPORT CUresult cuGraphInstantiateWithFlags(CUgraphExec *phGraphExec, CUgraph hGraph, unsigned long long flags)
{
    vgpu_cuGraphInstantiateWithFlags_fn real = REAL(cuGraphInstantiateWithFlags);
    if (!real)
        return CUDA_ERROR_NOT_INITIALIZED;
    CUresult rc = real(phGraphExec, hGraph, flags);
    if (rc == CUDA_SUCCESS && phGraphExec && !instantiated(*phGraphExec, hGraph, flags)) {
        destroy_exec(*phGraphExec);
        *phGraphExec = NULL;
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    if (rc == CUDA_SUCCESS)
        vgpu_graph_launched();
    return rc;
}

#define INSTANTIATE_LOGGED(sym)                                                                     \
    VGPU_EXPORT CUresult sym(CUgraphExec *phGraphExec, CUgraph hGraph, CUgraphNode *phErrorNode,         \
                             char *logBuffer, size_t bufferSize)                                         \
    {                                                                                                    \
        vgpu_##sym##_fn real = REAL(sym);                                                                \
        if (!real)                                                                                       \
            return CUDA_ERROR_NOT_INITIALIZED;                                                           \
        CUresult rc = real(phGraphExec, hGraph, phErrorNode, logBuffer, bufferSize);                     \
        if (rc == CUDA_SUCCESS && phGraphExec && !instantiated(*phGraphExec, hGraph, 0)) {               \
            destroy_exec(*phGraphExec);                                                                  \
            *phGraphExec = NULL;                                                                         \
            return CUDA_ERROR_OUT_OF_MEMORY;                                                             \
        }                                                                                                \
        if (rc == CUDA_SUCCESS)                                                                          \
            vgpu_graph_launched();                                                                       \
        return rc;                                                                                       \
    }
INSTANTIATE_LOGGED(cuGraphInstantiate)
INSTANTIATE_LOGGED(cuGraphInstantiate_v2)

static CUresult upload(CUgraphExec exec, CUstream stream, bool ptsz);

/* With CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD the driver would take the graph's memory inside the
 * call, before vgpu could check it: the upload is done separately, through the checked path. */
static CUresult instantiate_with_params(vgpu_cuGraphInstantiateWithParams_fn real, CUgraphExec *phGraphExec,
                                        CUgraph hGraph, CUDA_GRAPH_INSTANTIATE_PARAMS *p, bool ptsz)
{
    if (!real)
        return CUDA_ERROR_NOT_INITIALIZED;
    if (!vgpu_job() || !p)
        return real(phGraphExec, hGraph, p);
    cuuint64_t flags = p->flags;
    bool up = flags & CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD;
    p->flags = flags & ~(cuuint64_t)CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD;
    CUresult rc = real(phGraphExec, hGraph, p);
    p->flags = flags;
    if (rc != CUDA_SUCCESS || !phGraphExec)
        return rc;
    if (!instantiated(*phGraphExec, hGraph, flags))
        rc = CUDA_ERROR_OUT_OF_MEMORY;
    else if (up)
        rc = upload(*phGraphExec, p->hUploadStream, ptsz);
    if (rc != CUDA_SUCCESS) {
        exec_forget(*phGraphExec);
        destroy_exec(*phGraphExec);
        *phGraphExec = NULL;
        p->result_out = CUDA_GRAPH_INSTANTIATE_ERROR;
    }
    return rc;
}

VGPU_EXPORT CUresult cuGraphInstantiateWithParams(CUgraphExec *phGraphExec, CUgraph hGraph,
                                                  CUDA_GRAPH_INSTANTIATE_PARAMS *instantiateParams)
{
    return instantiate_with_params(REAL(cuGraphInstantiateWithParams), phGraphExec, hGraph, instantiateParams, false);
}

VGPU_EXPORT CUresult cuGraphInstantiateWithParams_ptsz(CUgraphExec *phGraphExec, CUgraph hGraph,
                                                       CUDA_GRAPH_INSTANTIATE_PARAMS *instantiateParams)
{
    return instantiate_with_params(REAL(cuGraphInstantiateWithParams_ptsz), phGraphExec, hGraph, instantiateParams,
                                   true);
}

static CUresult upload(CUgraphExec exec, CUstream stream, bool ptsz)
{
    vgpu_cuGraphUpload_fn real = ptsz ? REAL(cuGraphUpload_ptsz) : REAL(cuGraphUpload);
    if (!real)
        return CUDA_ERROR_NOT_INITIALIZED;
    struct vgpu_graph_hold hold;
    if (!vgpu_graph_mem_before(exec, "cuGraphUpload", &hold))
        return CUDA_ERROR_OUT_OF_MEMORY;
    CUresult rc = real(exec, stream);
    vgpu_graph_mem_after(exec, rc, false, &hold);
    return rc;
}

VGPU_EXPORT CUresult cuGraphUpload(CUgraphExec hGraphExec, CUstream hStream)
{
    return upload(hGraphExec, hStream, false);
}

VGPU_EXPORT CUresult cuGraphUpload_ptsz(CUgraphExec hGraphExec, CUstream hStream)
{
    return upload(hGraphExec, hStream, true);
}

VGPU_EXPORT CUresult cuGraphExecDestroy(CUgraphExec hGraphExec)
{
    vgpu_cuGraphExecDestroy_fn real = REAL(cuGraphExecDestroy);
    if (!real)
        return CUDA_ERROR_NOT_INITIALIZED;
    CUresult rc = real(hGraphExec);
    if (rc == CUDA_SUCCESS)
        exec_forget(hGraphExec);
    return rc;
}

VGPU_EXPORT CUresult cuDeviceGraphMemTrim(CUdevice device)
{
    vgpu_cuDeviceGraphMemTrim_fn real = REAL(cuDeviceGraphMemTrim);
    if (!real)
        return CUDA_ERROR_NOT_INITIALIZED;
    CUresult rc = real(device);
    if (rc == CUDA_SUCCESS && vgpu_job())
        vgpu_graphmem_reconcile(device);
    return rc;
}
