/* graph.c: CUDA graphs, stream capture and graph memory.
 *
 * A graph is a list of nodes: kernels (their duration fixed when the node is added, from the
 * same rules as a launch), memory allocations and frees. Dependencies are accepted but not
 * modelled: a launched graph occupies its device for the sum of its kernels' durations, queued
 * as one piece of work on the launch stream. Graph allocations get their address when the node
 * is added and their memory at launch, from a per-device graph pool that keeps what it reserved
 * until cuDeviceGraphMemTrim (the CU_GRAPH_MEM_ATTR_* counters). */
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

CUresult cuGraphInstantiateWithFlags(CUgraphExec *phGraphExec, CUgraph hGraph, unsigned long long flags)
{
    FC_TRACE();
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

/* Caller holds fc_lock. */
CUresult fc_graph_alloc_free(struct fc_alloc *a)
{
    if (!a->live)
        return CUDA_ERROR_INVALID_VALUE;
    struct graph_mem *m = &gmem[a->device];
    unsigned long long n = fc_round_up(a->size, 512);
    m->used = m->used > n ? m->used - n : 0;
    a->live = false;
    return CUDA_SUCCESS;
}

/* Caller holds fc_lock. */
static CUresult graph_alloc_take(struct fc_alloc *a)
{
    if (a->live)
        return CUDA_ERROR_INVALID_VALUE; /* relaunch before the previous allocation was freed */
    struct graph_mem *m = &gmem[a->device];
    unsigned long long n = fc_round_up(a->size, 512);
    if (m->used + n > m->reserved) {
        unsigned long long grow = fc_round_up(m->used + n - m->reserved, 2 * FC_MIB);
        CUresult r = fc_dev_charge(a->device, grow);
        if (r != CUDA_SUCCESS)
            return r;
        m->reserved += grow;
        if (m->reserved > m->reserved_high)
            m->reserved_high = m->reserved;
    }
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
    pthread_mutex_lock(&fc_lock);
    r = fc_stream_resolve(s, ptsz, c, &st);
    if (r == CUDA_SUCCESS && st && st->capture)
        r = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    uint64_t total = 0;
    for (size_t i = 0; r == CUDA_SUCCESS && i < e->n; i++) {
        struct node *n = e->nodes[i];
        if (n->kind == NODE_KERNEL) {
            total += n->dur_ns;
        } else if (n->kind == NODE_ALLOC) {
            r = graph_alloc_take(n->alloc);
        } else {
            struct fc_alloc *a = fc_alloc_find(n->dptr, false);
            if (a && a->kind == FC_ALLOC_GRAPH && a->live)
                fc_graph_alloc_free(a);
        }
    }
    if (r == CUDA_SUCCESS)
        fc_stream_enqueue(c, st, total);
    pthread_mutex_unlock(&fc_lock);
    return r;
}

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
    struct graph_mem *m = &gmem[device];
    unsigned long long keep = fc_round_up(m->used, 2 * FC_MIB);
    if (m->reserved > keep) {
        fc_dev_uncharge(device, m->reserved - keep);
        m->reserved = keep;
    }
    pthread_mutex_unlock(&fc_lock);
    return CUDA_SUCCESS;
}
