/* graph.c: CUDA graphs, stream capture and graph memory.
 *
 * A graph is a list of nodes: kernels (their duration fixed when the node is added, from the
 * same rules as a launch), memory allocations and frees. Dependencies are accepted but not
 * modelled: a launched graph occupies its device for the sum of its kernels' durations, queued
 * as one piece of work on the launch stream. Graph allocations get their address when the node
 * is added and their memory at launch (or at cuGraphUpload, which reserves it ahead), from a
 * per-device graph pool that keeps what it reserved until cuDeviceGraphMemTrim (the
 * CU_GRAPH_MEM_ATTR_* counters). A free node runs when the graph's work on the stream is done,
 * not inside cuGraphLaunch: until then the memory stays in use (USED_MEM_CURRENT), and so does
 * memory freed with cuMemFreeAsync until its stream gets there. A relaunch of the same graph is
 * ordered after its previous launch, so it reuses the memory of that launch's pending frees.
 * cuGraphAddNode takes kernel, memory-allocation and memory-free nodes (other types:
 * CUDA_ERROR_NOT_SUPPORTED in the fake). */
#include <stdlib.h>
#include <string.h>

#include "fakecuda.h"

enum node_kind { NODE_KERNEL, NODE_ALLOC, NODE_FREE };
struct node {
    uint32_t magic;
    enum node_kind kind;
    uint64_t dur_ns;
    struct fc_alloc *alloc;   /* NODE_ALLOC */
    CUdeviceptr dptr;         /* NODE_FREE */
};
#define NODE_MAGIC 0x90DE0000u

struct fc_graph {
    uint32_t magic;
    struct node **nodes;
    size_t n, cap;
};
#define GRAPH_MAGIC 0x64A9F000u
#define EXEC_MAGIC 0xE8EC0000u

struct graph_mem { unsigned long long used, used_high, reserved, reserved_high; };
static struct graph_mem gmem[FC_MAX_DEVICES];

/* Frees (free nodes of launched graphs, cuMemFreeAsync) the streams have not reached yet. */
struct pending_free {
    struct fc_alloc *a;
    uint64_t due_ns;
    struct pending_free *next;
};
static struct pending_free *pending;

static void release_alloc(struct fc_alloc *a)
{
    struct graph_mem *m = &gmem[a->device];
    unsigned long long n = fc_round_up(a->size, 512);
    m->used = m->used > n ? m->used - n : 0;
    a->live = false;
}

/* Caller holds fc_lock. Runs the frees that are due on `device` (-1: every device), and the one
 * of `only` whatever its time (stream order). */
static void retire(int device, const struct fc_alloc *only)
{
    uint64_t now = fc_now_ns();
    for (struct pending_free **pp = &pending; *pp;) {
        struct pending_free *f = *pp;
        if (f->a == only || (f->due_ns <= now && (device < 0 || f->a->device == device))) {
            *pp = f->next;
            release_alloc(f->a);
            free(f);
        } else {
            pp = &f->next;
        }
    }
}

static bool free_pending(const struct fc_alloc *a)
{
    for (struct pending_free *f = pending; f; f = f->next)
        if (f->a == a)
            return true;
    return false;
}

/* Caller holds fc_lock. A context goes: its pending frees are done (its memory is gone). */
void fc_graph_forget_ctx(struct fc_ctx *ctx)
{
    for (struct pending_free **pp = &pending; *pp;) {
        struct pending_free *f = *pp;
        if (f->a->ctx == ctx) {
            *pp = f->next;
            release_alloc(f->a);
            free(f);
        } else {
            pp = &f->next;
        }
    }
}

/* Caller holds fc_lock. */
static CUresult defer_free(struct fc_alloc *a, uint64_t due_ns)
{
    if (!a->live || free_pending(a))
        return CUDA_ERROR_INVALID_VALUE;
    struct pending_free *f = calloc(1, sizeof *f);
    if (!f) {
        release_alloc(a);
        return CUDA_SUCCESS;
    }
    *f = (struct pending_free){ a, due_ns, pending };
    pending = f;
    return CUDA_SUCCESS;
}

CUresult fc_graph_alloc_free_async(struct fc_alloc *a, uint64_t due_ns)
{
    return defer_free(a, due_ns);
}

struct fc_graph *fc_graph_new(void)
{
    struct fc_graph *g = calloc(1, sizeof *g);
    if (g)
        g->magic = GRAPH_MAGIC;
    return g;
}

static CUresult graph_valid(CUgraph h, uint32_t magic, struct fc_graph **out)
{
    struct fc_graph *g = (struct fc_graph *)h;
    if (!g || g->magic != magic)
        return CUDA_ERROR_INVALID_VALUE;
    *out = g;
    return CUDA_SUCCESS;
}

/* Caller holds fc_lock. */
static struct node *add_node(struct fc_graph *g, enum node_kind kind)
{
    if (g->n == g->cap) {
        size_t cap = g->cap ? g->cap * 2 : 8;
        struct node **nn = realloc(g->nodes, cap * sizeof *nn);
        if (!nn)
            return NULL;
        g->nodes = nn;
        g->cap = cap;
    }
    struct node *n = calloc(1, sizeof *n);
    if (!n)
        return NULL;
    n->magic = NODE_MAGIC;
    n->kind = kind;
    g->nodes[g->n++] = n;
    return n;
}

static CUresult check_deps(const CUgraphNode *deps, size_t n)
{
    if (n && !deps)
        return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < n; i++)
        if (!deps[i] || ((struct node *)deps[i])->magic != NODE_MAGIC)
            return CUDA_ERROR_INVALID_VALUE;
    return CUDA_SUCCESS;
}

static CUresult add_free(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,
                         size_t numDependencies, CUdeviceptr dptr);

CUresult cuGraphCreate(CUgraph *phGraph, unsigned int flags)
{
    FC_TRACE();
    CUresult r = fc_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (!phGraph || flags)
        return CUDA_ERROR_INVALID_VALUE;
    struct fc_graph *g = fc_graph_new();
    if (!g)
        return CUDA_ERROR_OUT_OF_MEMORY;
    *phGraph = (CUgraph)g;
    return CUDA_SUCCESS;
}

static void graph_free(struct fc_graph *g)
{
    for (size_t i = 0; i < g->n; i++) {
        g->nodes[i]->magic = 0;
        free(g->nodes[i]);
    }
    free(g->nodes);
    g->magic = 0;
    free(g);
}

CUresult cuGraphDestroy(CUgraph hGraph)
{
    FC_TRACE();
    struct fc_graph *g;
    CUresult r = fc_check_init();
    if (r == CUDA_SUCCESS)
        r = graph_valid(hGraph, GRAPH_MAGIC, &g);
    if (r != CUDA_SUCCESS)
        return r;
    pthread_mutex_lock(&fc_lock);
    graph_free(g);
    pthread_mutex_unlock(&fc_lock);
    return CUDA_SUCCESS;
}

static CUresult add_kernel(CUgraphNode *out, CUgraph hGraph, const CUgraphNode *deps, size_t ndeps,
                           CUfunction func, const unsigned int grid[3], const unsigned int block[3],
                           unsigned int shmem, void **params, void **extra)
{
    struct fc_graph *g;
    CUresult r = fc_check_init();
    if (r == CUDA_SUCCESS)
        r = graph_valid(hGraph, GRAPH_MAGIC, &g);
    if (r == CUDA_SUCCESS)
        r = out ? check_deps(deps, ndeps) : CUDA_ERROR_INVALID_VALUE;
    if (r != CUDA_SUCCESS)
        return r;
    struct fc_launch l;
    r = fc_launch_prepare(&l, func, grid, block, shmem, params, extra);
    if (r != CUDA_SUCCESS)
        return r;
    pthread_mutex_lock(&fc_lock);
    struct node *n = add_node(g, NODE_KERNEL);
    if (n)
        n->dur_ns = l.dur_ns;
    pthread_mutex_unlock(&fc_lock);
    if (!n)
        return CUDA_ERROR_OUT_OF_MEMORY;
    *out = (CUgraphNode)n;
    return CUDA_SUCCESS;
}

CUresult cuGraphAddKernelNode(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,
                              size_t numDependencies, const CUDA_KERNEL_NODE_PARAMS_v1 *p)
{
    FC_TRACE();
    if (!p)
        return CUDA_ERROR_INVALID_VALUE;
    const unsigned int grid[3] = { p->gridDimX, p->gridDimY, p->gridDimZ };
    const unsigned int block[3] = { p->blockDimX, p->blockDimY, p->blockDimZ };
    return add_kernel(phGraphNode, hGraph, dependencies, numDependencies, p->func, grid, block,
                      p->sharedMemBytes, p->kernelParams, p->extra);
}

CUresult cuGraphAddKernelNode_v2(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,
                                 size_t numDependencies, const CUDA_KERNEL_NODE_PARAMS *p)
{
    FC_TRACE();
    if (!p)
        return CUDA_ERROR_INVALID_VALUE;
    const unsigned int grid[3] = { p->gridDimX, p->gridDimY, p->gridDimZ };
    const unsigned int block[3] = { p->blockDimX, p->blockDimY, p->blockDimZ };
    CUfunction f = p->func ? p->func : (CUfunction)p->kern;
    return add_kernel(phGraphNode, hGraph, dependencies, numDependencies, f, grid, block,
                      p->sharedMemBytes, p->kernelParams, p->extra);
}

/* Caller holds fc_lock. */
static CUresult new_graph_alloc(struct fc_graph *g, struct fc_ctx *c, int device, size_t size,
                                struct node **out)
{
    struct node *n = add_node(g, NODE_ALLOC);
    if (!n)
        return CUDA_ERROR_OUT_OF_MEMORY;
    n->alloc = fc_alloc_new(FC_ALLOC_GRAPH, fc_va_reserve(size, 512), size, device, c);
    if (!n->alloc) {
        g->n--;
        free(n);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    *out = n;
    return CUDA_SUCCESS;
}

CUresult cuGraphAddMemAllocNode(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,
                                size_t numDependencies, CUDA_MEM_ALLOC_NODE_PARAMS *p)
{
    FC_TRACE();
    struct fc_ctx *c;
    struct fc_graph *g;
    CUresult r = fc_current(&c);
    if (r == CUDA_SUCCESS)
        r = graph_valid(hGraph, GRAPH_MAGIC, &g);
    if (r == CUDA_SUCCESS)
        r = (phGraphNode && p && p->bytesize) ? check_deps(dependencies, numDependencies) : CUDA_ERROR_INVALID_VALUE;
    if (r != CUDA_SUCCESS)
        return r;
    if (p->poolProps.allocType != CU_MEM_ALLOCATION_TYPE_PINNED ||
        p->poolProps.location.type != CU_MEM_LOCATION_TYPE_DEVICE || p->poolProps.location.id < 0 ||
        p->poolProps.location.id >= fc_ndev || p->poolProps.handleTypes != CU_MEM_HANDLE_TYPE_NONE)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&fc_lock);
    struct node *n;
    r = new_graph_alloc(g, c, p->poolProps.location.id, p->bytesize, &n);
    if (r == CUDA_SUCCESS) {
        p->dptr = n->alloc->base;
        *phGraphNode = (CUgraphNode)n;
    }
    pthread_mutex_unlock(&fc_lock);
    return r;
}

CUresult cuGraphAddMemFreeNode(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,
                               size_t numDependencies, CUdeviceptr dptr)
{
    FC_TRACE();
    return add_free(phGraphNode, hGraph, dependencies, numDependencies, dptr);
}

static CUresult add_free(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,
                         size_t numDependencies, CUdeviceptr dptr)
{
    struct fc_graph *g;
    CUresult r = fc_check_init();
    if (r == CUDA_SUCCESS)
        r = graph_valid(hGraph, GRAPH_MAGIC, &g);
    if (r == CUDA_SUCCESS)
        r = phGraphNode ? check_deps(dependencies, numDependencies) : CUDA_ERROR_INVALID_VALUE;
    if (r != CUDA_SUCCESS)
        return r;
    pthread_mutex_lock(&fc_lock);
    struct fc_alloc *a = fc_alloc_find(dptr, false);
    struct node *n = NULL;
    if (!a || a->kind != FC_ALLOC_GRAPH)
        r = CUDA_ERROR_INVALID_VALUE;
    else if (!(n = add_node(g, NODE_FREE)))
        r = CUDA_ERROR_OUT_OF_MEMORY;
    else
        n->dptr = dptr;
    pthread_mutex_unlock(&fc_lock);
    if (r == CUDA_SUCCESS)
        *phGraphNode = (CUgraphNode)n;
    return r;
}

static CUresult add_any(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *deps, size_t ndeps,
                        CUgraphNodeParams *p)
{
    if (!p)
        return CUDA_ERROR_INVALID_VALUE;
    switch (p->type) {
    case CU_GRAPH_NODE_TYPE_KERNEL: {
        const CUDA_KERNEL_NODE_PARAMS_v2 *k = &p->kernel;
        const unsigned int grid[3] = { k->gridDimX, k->gridDimY, k->gridDimZ };
        const unsigned int block[3] = { k->blockDimX, k->blockDimY, k->blockDimZ };
        return add_kernel(phGraphNode, hGraph, deps, ndeps, k->func ? k->func : (CUfunction)k->kern, grid, block,
                          k->sharedMemBytes, k->kernelParams, k->extra);
    }
    case CU_GRAPH_NODE_TYPE_MEM_ALLOC:
        return cuGraphAddMemAllocNode(phGraphNode, hGraph, deps, ndeps, &p->alloc);
    case CU_GRAPH_NODE_TYPE_MEM_FREE:
        return add_free(phGraphNode, hGraph, deps, ndeps, p->free.dptr);
    default:
        return (unsigned)p->type <= CU_GRAPH_NODE_TYPE_CONDITIONAL ? CUDA_ERROR_NOT_SUPPORTED : CUDA_ERROR_INVALID_VALUE;
    }
}

CUresult cuGraphAddNode(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,
                        size_t numDependencies, CUgraphNodeParams *nodeParams)
{
    FC_TRACE();
    return add_any(phGraphNode, hGraph, dependencies, numDependencies, nodeParams);
}

CUresult cuGraphAddNode_v2(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,
                           const CUgraphEdgeData *dependencyData, size_t numDependencies, CUgraphNodeParams *nodeParams)
{
    FC_TRACE();
    (void)dependencyData;   /* edges are not modelled */
    return add_any(phGraphNode, hGraph, dependencies, numDependencies, nodeParams);
}

CUresult cuGraphGetNodes(CUgraph hGraph, CUgraphNode *nodes, size_t *numNodes)
{
    FC_TRACE();
    struct fc_graph *g;
    CUresult r = fc_check_init();
    if (r == CUDA_SUCCESS)
        r = graph_valid(hGraph, GRAPH_MAGIC, &g);
    if (r != CUDA_SUCCESS)
        return r;
    if (!numNodes)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&fc_lock);
    if (nodes) {
        for (size_t i = 0; i < *numNodes; i++)
            nodes[i] = i < g->n ? (CUgraphNode)g->nodes[i] : NULL;
        if (*numNodes > g->n)
            *numNodes = g->n;
    } else {
        *numNodes = g->n;
    }
    pthread_mutex_unlock(&fc_lock);
    return CUDA_SUCCESS;
}

static CUresult node_valid(CUgraphNode h, struct node **out)
{
    struct node *n = (struct node *)h;
    CUresult r = fc_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (!n || n->magic != NODE_MAGIC)
        return CUDA_ERROR_INVALID_VALUE;
    *out = n;
    return CUDA_SUCCESS;
}

CUresult cuGraphNodeGetType(CUgraphNode hNode, CUgraphNodeType *type)
{
    FC_TRACE();
    struct node *n;
    CUresult r = node_valid(hNode, &n);
    if (r != CUDA_SUCCESS)
        return r;
    if (!type)
        return CUDA_ERROR_INVALID_VALUE;
    *type = n->kind == NODE_KERNEL ? CU_GRAPH_NODE_TYPE_KERNEL
          : n->kind == NODE_ALLOC  ? CU_GRAPH_NODE_TYPE_MEM_ALLOC
                                   : CU_GRAPH_NODE_TYPE_MEM_FREE;
    return CUDA_SUCCESS;
}

CUresult cuGraphMemFreeNodeGetParams(CUgraphNode hNode, CUdeviceptr *dptr_out)
{
    FC_TRACE();
    struct node *n;
    CUresult r = node_valid(hNode, &n);
    if (r != CUDA_SUCCESS)
        return r;
    if (!dptr_out || n->kind != NODE_FREE)
        return CUDA_ERROR_INVALID_VALUE;
    *dptr_out = n->dptr;
    return CUDA_SUCCESS;
}

CUresult cuGraphMemAllocNodeGetParams(CUgraphNode hNode, CUDA_MEM_ALLOC_NODE_PARAMS *params_out)
{
    FC_TRACE();
    struct node *n;
    CUresult r = node_valid(hNode, &n);
    if (r != CUDA_SUCCESS)
        return r;
    if (!params_out || n->kind != NODE_ALLOC)
        return CUDA_ERROR_INVALID_VALUE;
    memset(params_out, 0, sizeof *params_out);
    params_out->poolProps.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    params_out->poolProps.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    params_out->poolProps.location.id = n->alloc->device;
    params_out->bytesize = n->alloc->size;
    params_out->dptr = n->alloc->base;
    return CUDA_SUCCESS;
}

/* ---- capture (called by stream.c/launch.c/pool.c with the capturing stream) ---- */

CUresult fc_graph_capture_kernel(struct fc_stream *st, const struct fc_launch *l)
{
    /* Caller holds fc_lock. */
    struct node *n = add_node(st->capture, NODE_KERNEL);
    if (!n)
        return CUDA_ERROR_OUT_OF_MEMORY;
    n->dur_ns = l->dur_ns;
    return CUDA_SUCCESS;
}

CUresult fc_graph_capture_alloc(struct fc_stream *st, size_t size, CUdeviceptr *out)
{
    pthread_mutex_lock(&fc_lock);
    struct node *n;
    CUresult r = new_graph_alloc(st->capture, st->ctx, st->ctx->device, size, &n);
    if (r == CUDA_SUCCESS)
        *out = n->alloc->base;
    pthread_mutex_unlock(&fc_lock);
    return r;
}

CUresult fc_graph_capture_free(struct fc_stream *st, CUdeviceptr p)
{
    pthread_mutex_lock(&fc_lock);
    struct fc_alloc *a = fc_alloc_find(p, false);
    CUresult r = CUDA_SUCCESS;
    struct node *n;
    if (!a || a->kind != FC_ALLOC_GRAPH)
        r = CUDA_ERROR_INVALID_VALUE;
    else if (!(n = add_node(st->capture, NODE_FREE)))
        r = CUDA_ERROR_OUT_OF_MEMORY;
    else
        n->dptr = p;
    pthread_mutex_unlock(&fc_lock);
    return r;
}

/* ---- instantiate and launch ---- */

static CUresult instantiate(CUgraphExec *phGraphExec, CUgraph hGraph, unsigned long long flags)
{
    struct fc_graph *g;
    CUresult r = fc_check_init();
    if (r == CUDA_SUCCESS)
        r = graph_valid(hGraph, GRAPH_MAGIC, &g);
    if (r != CUDA_SUCCESS)
        return r;
    if (!phGraphExec || (flags & ~0xFULL))
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&fc_lock);
    struct fc_graph *e = fc_graph_new();
    for (size_t i = 0; e && i < g->n; i++) {
        struct node *n = add_node(e, g->nodes[i]->kind);
        if (!n) {
            graph_free(e);
            e = NULL;
            break;
        }
        n->dur_ns = g->nodes[i]->dur_ns;
        n->alloc = g->nodes[i]->alloc;
        n->dptr = g->nodes[i]->dptr;
    }
    if (e)
        e->magic = EXEC_MAGIC;
    pthread_mutex_unlock(&fc_lock);
    if (!e)
        return CUDA_ERROR_OUT_OF_MEMORY;
    *phGraphExec = (CUgraphExec)e;
    return CUDA_SUCCESS;
}

CUresult cuGraphInstantiateWithFlags(CUgraphExec *phGraphExec, CUgraph hGraph, unsigned long long flags)
{
    FC_TRACE();
    return instantiate(phGraphExec, hGraph, flags);
}

/* The CUDA 10/11 forms: an error node and a log buffer, no flags. */
static CUresult instantiate_logged(CUgraphExec *phGraphExec, CUgraph hGraph, CUgraphNode *phErrorNode, char *logBuffer,
                                   size_t bufferSize)
{
    if (phErrorNode)
        *phErrorNode = NULL;
    if (logBuffer && bufferSize)
        logBuffer[0] = 0;
    return instantiate(phGraphExec, hGraph, 0);
}

CUresult cuGraphInstantiate(CUgraphExec *phGraphExec, CUgraph hGraph, CUgraphNode *phErrorNode, char *logBuffer,
                            size_t bufferSize)
{
    FC_TRACE();
    return instantiate_logged(phGraphExec, hGraph, phErrorNode, logBuffer, bufferSize);
}

CUresult cuGraphInstantiate_v2(CUgraphExec *phGraphExec, CUgraph hGraph, CUgraphNode *phErrorNode, char *logBuffer,
                               size_t bufferSize)
{
    FC_TRACE();
    return instantiate_logged(phGraphExec, hGraph, phErrorNode, logBuffer, bufferSize);
}

static CUresult graph_upload(CUgraphExec hGraphExec, CUstream s, bool ptsz);

static CUresult instantiate_with_params(CUgraphExec *phGraphExec, CUgraph hGraph, CUDA_GRAPH_INSTANTIATE_PARAMS *p,
                                        bool ptsz)
{
    if (!p)
        return CUDA_ERROR_INVALID_VALUE;
    p->hErrNode_out = NULL;
    CUresult r = instantiate(phGraphExec, hGraph, p->flags);
    if (r == CUDA_SUCCESS && (p->flags & CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD)) {
        r = graph_upload(*phGraphExec, p->hUploadStream, ptsz);
        if (r != CUDA_SUCCESS) {
            (void)cuGraphExecDestroy(*phGraphExec);
            *phGraphExec = NULL;
        }
    }
    p->result_out = r == CUDA_SUCCESS ? CUDA_GRAPH_INSTANTIATE_SUCCESS : CUDA_GRAPH_INSTANTIATE_ERROR;
    return r;
}

CUresult cuGraphInstantiateWithParams(CUgraphExec *phGraphExec, CUgraph hGraph,
                                      CUDA_GRAPH_INSTANTIATE_PARAMS *instantiateParams)
{
    FC_TRACE();
    return instantiate_with_params(phGraphExec, hGraph, instantiateParams, false);
}

CUresult cuGraphInstantiateWithParams_ptsz(CUgraphExec *phGraphExec, CUgraph hGraph,
                                           CUDA_GRAPH_INSTANTIATE_PARAMS *instantiateParams)
{
    FC_TRACE();
    return instantiate_with_params(phGraphExec, hGraph, instantiateParams, true);
}

CUresult cuGraphExecDestroy(CUgraphExec hGraphExec)
{
    FC_TRACE();
    struct fc_graph *e;
    CUresult r = fc_check_init();
    if (r == CUDA_SUCCESS)
        r = graph_valid((CUgraph)hGraphExec, EXEC_MAGIC, &e);
    if (r != CUDA_SUCCESS)
        return r;
    pthread_mutex_lock(&fc_lock);
    graph_free(e);
    pthread_mutex_unlock(&fc_lock);
    return CUDA_SUCCESS;
}

/* Caller holds fc_lock. cuMemFree: synchronous. */
CUresult fc_graph_alloc_free(struct fc_alloc *a)
{
    if (!a->live || free_pending(a))
        return CUDA_ERROR_INVALID_VALUE;
    release_alloc(a);
    return CUDA_SUCCESS;
}

/* Caller holds fc_lock. Grows the device's graph pool so that `n` more bytes fit. */
static CUresult graph_reserve(int device, unsigned long long n)
{
    struct graph_mem *m = &gmem[device];
    if (m->used + n <= m->reserved)
        return CUDA_SUCCESS;
    unsigned long long grow = fc_round_up(m->used + n - m->reserved, 2 * FC_MIB);
    CUresult r = fc_dev_charge(device, grow);
    if (r != CUDA_SUCCESS)
        return r;
    m->reserved += grow;
    if (m->reserved > m->reserved_high)
        m->reserved_high = m->reserved;
    return CUDA_SUCCESS;
}

/* Caller holds fc_lock. */
static CUresult graph_alloc_take(struct fc_alloc *a)
{
    retire(a->device, free_pending(a) ? a : NULL);   /* a relaunch comes after the last one's free */
    if (a->live)
        return CUDA_ERROR_INVALID_VALUE; /* relaunch before the previous allocation was freed */
    if (a->uploaded) {                   /* cuGraphUpload took its memory already */
        a->uploaded = false;
        a->live = true;
        return CUDA_SUCCESS;
    }
    struct graph_mem *m = &gmem[a->device];
    unsigned long long n = fc_round_up(a->size, 512);
    CUresult r = graph_reserve(a->device, n);
    if (r != CUDA_SUCCESS)
        return r;
    m->used += n;
    if (m->used > m->used_high)
        m->used_high = m->used;
    a->live = true;
    return CUDA_SUCCESS;
}

static CUresult graph_launch(CUgraphExec hGraphExec, CUstream s, bool ptsz)
{
    struct fc_ctx *c;
    struct fc_graph *e;
    struct fc_stream *st;
    CUresult r = fc_current(&c);
    if (r == CUDA_SUCCESS)
        r = graph_valid((CUgraph)hGraphExec, EXEC_MAGIC, &e);
    if (r != CUDA_SUCCESS)
        return r;
    fc_queue_admit(c);
    pthread_mutex_lock(&fc_lock);
    r = fc_stream_resolve(s, ptsz, c, &st);
    if (r == CUDA_SUCCESS && st && st->capture)
        r = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    uint64_t total = 0;
    size_t taken = 0;
    for (size_t i = 0; r == CUDA_SUCCESS && i < e->n; i++) {
        struct node *n = e->nodes[i];
        if (n->kind == NODE_KERNEL)
            total += n->dur_ns;
        else if (n->kind == NODE_ALLOC && (r = graph_alloc_take(n->alloc)) == CUDA_SUCCESS)
            taken = i + 1;
    }
    if (r != CUDA_SUCCESS) {
        /* Out of memory part way: what this launch took goes back, nothing runs. */
        for (size_t i = 0; i < taken; i++)
            if (e->nodes[i]->kind == NODE_ALLOC && e->nodes[i]->alloc->live)
                release_alloc(e->nodes[i]->alloc);
    } else {
        /* The graph's kernels touch managed memory as any kernel does (cuda/managed.c). */
        if (total)
            total += fc_managed_on_launch(c);
        /* The free nodes run when the stream gets through the graph's work. */
        uint64_t end = fc_stream_enqueue(c, st, total, 1000, NULL, true);
        for (size_t i = 0; i < e->n; i++) {
            struct fc_alloc *a;
            if (e->nodes[i]->kind == NODE_FREE && (a = fc_alloc_find(e->nodes[i]->dptr, false)) != NULL &&
                a->kind == FC_ALLOC_GRAPH && a->live)
                (void)defer_free(a, end);
        }
    }
    pthread_mutex_unlock(&fc_lock);
    return r;
}

/* cuGraphUpload: the graph's allocations get their memory reserved in the graph pool ahead of
 * the launch (which then takes it without growing the pool). */
static CUresult graph_upload(CUgraphExec hGraphExec, CUstream s, bool ptsz)
{
    struct fc_ctx *c;
    struct fc_graph *e;
    struct fc_stream *st;
    CUresult r = fc_current(&c);
    if (r == CUDA_SUCCESS)
        r = graph_valid((CUgraph)hGraphExec, EXEC_MAGIC, &e);
    if (r != CUDA_SUCCESS)
        return r;
    pthread_mutex_lock(&fc_lock);
    r = fc_stream_resolve(s, ptsz, c, &st);
    /* Each allocation not yet mapped takes its memory now, as its launch would. */
    size_t taken = 0;
    for (size_t i = 0; r == CUDA_SUCCESS && i < e->n; i++) {
        struct fc_alloc *a = e->nodes[i]->alloc;
        if (e->nodes[i]->kind != NODE_ALLOC || a->live || a->uploaded)
            continue;
        retire(a->device, NULL);
        unsigned long long n = fc_round_up(a->size, 512);
        if ((r = graph_reserve(a->device, n)) == CUDA_SUCCESS) {
            gmem[a->device].used += n;
            if (gmem[a->device].used > gmem[a->device].used_high)
                gmem[a->device].used_high = gmem[a->device].used;
            a->uploaded = true;
            taken = i + 1;
        }
    }
    for (size_t i = 0; r != CUDA_SUCCESS && i < taken; i++)
        if (e->nodes[i]->kind == NODE_ALLOC && e->nodes[i]->alloc->uploaded) {
            e->nodes[i]->alloc->uploaded = false;
            release_alloc(e->nodes[i]->alloc);
        }
    pthread_mutex_unlock(&fc_lock);
    return r;
}

CUresult cuGraphUpload(CUgraphExec hGraphExec, CUstream hStream) { FC_TRACE(); return graph_upload(hGraphExec, hStream, false); }
CUresult cuGraphUpload_ptsz(CUgraphExec hGraphExec, CUstream hStream) { FC_TRACE(); return graph_upload(hGraphExec, hStream, true); }

CUresult cuGraphLaunch(CUgraphExec hGraphExec, CUstream hStream) { FC_TRACE(); return graph_launch(hGraphExec, hStream, false); }
CUresult cuGraphLaunch_ptsz(CUgraphExec hGraphExec, CUstream hStream) { FC_TRACE(); return graph_launch(hGraphExec, hStream, true); }

CUresult cuDeviceGetGraphMemAttribute(CUdevice device, CUgraphMem_attribute attr, void *value)
{
    FC_TRACE();
    CUresult r = fc_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (device < 0 || device >= fc_ndev)
        return CUDA_ERROR_INVALID_DEVICE;
    if (!value)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&fc_lock);
    retire(device, NULL);
    struct graph_mem *m = &gmem[device];
    switch ((int)attr) {
    case CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT: *(cuuint64_t *)value = m->used; break;
    case CU_GRAPH_MEM_ATTR_USED_MEM_HIGH: *(cuuint64_t *)value = m->used_high; break;
    case CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT: *(cuuint64_t *)value = m->reserved; break;
    case CU_GRAPH_MEM_ATTR_RESERVED_MEM_HIGH: *(cuuint64_t *)value = m->reserved_high; break;
    default: r = CUDA_ERROR_INVALID_VALUE;
    }
    pthread_mutex_unlock(&fc_lock);
    return r;
}

CUresult cuDeviceGraphMemTrim(CUdevice device)
{
    FC_TRACE();
    CUresult r = fc_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (device < 0 || device >= fc_ndev)
        return CUDA_ERROR_INVALID_DEVICE;
    pthread_mutex_lock(&fc_lock);
    retire(device, NULL);
    struct graph_mem *m = &gmem[device];
    unsigned long long keep = fc_round_up(m->used, 2 * FC_MIB);
    if (m->reserved > keep) {
        fc_dev_uncharge(device, m->reserved - keep);
        m->reserved = keep;
    }
    pthread_mutex_unlock(&fc_lock);
    return CUDA_SUCCESS;
}
