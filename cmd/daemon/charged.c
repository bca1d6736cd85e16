/* What the daemon's schedules charged each job, per GPU (issue 28): the GPU time of a capped job
 * that its accounting record must not fall below (cmd/daemon/acct.c). A job's schedule entry, and
 * its used_ns, go when the job has had no process for a second (arbiter.c, ARB_LEFT_JOB_NS), and a
 * later entry of the same job starts again at 0; so the daemon adds up every lease it charged in a
 * table of its own, keyed like the schedule's entries (the job's key mixed with its user:
 * arb_user_key), which outlives them.
 *
 * Bounded: ARB_CHARGED_MAX (GPU, job) pairs in all. A pair goes when its job's record is stored,
 * or, when room is needed, the least recently charged pair goes first: a user's own, once that
 * user holds ARB_CHARGED_USER_MAX pairs, so that no user can push other users' charges out by
 * running many jobs. The daemon's memory only: a restarted daemon has charged nothing yet, and
 * records of jobs that ran before it keep the figure their `vgpu run` measured. */
#include "daemon/server.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#define ARB_CHARGED_MAX      4096
#define ARB_CHARGED_USER_MAX 512

struct arb_charged {
    uint64_t key;          /* 0: free */
    uint64_t ns;           /* charged so far */
    uint64_t reported;     /* what the job's processes said their leases used (each at most its charge) */
    uint64_t last;         /* CLOCK_MONOTONIC of the last charge */
    uid_t uid;
    unsigned gpu;          /* index into arbiter.gpus */
};

static uint64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

uint64_t arb_job_key(const char *id, size_t len)
{
    return vgpu_sched_job_key(id, len);   /* the key the job's library joined the schedule with */
}

static struct arb_charged *table(struct arbiter *a)
{
    if (!a->charged)
        a->charged = calloc(ARB_CHARGED_MAX, sizeof *a->charged);
    return a->charged;
}

static int find(const struct arb_charged *t, unsigned gpu, uint64_t key)
{
    for (int i = 0; i < ARB_CHARGED_MAX; i++)
        if (t[i].key == key && t[i].gpu == gpu)
            return i;
    return -1;
}

/* A slot for a new pair of `uid`: a free one, else the least recently charged of the user's own
 * when it holds its most, else of anyone's. */
static int make_room(struct arb_charged *t, uid_t uid)
{
    int free_slot = -1, oldest = -1, own_oldest = -1;
    unsigned own = 0;
    for (int i = 0; i < ARB_CHARGED_MAX; i++) {
        if (!t[i].key) {
            if (free_slot < 0)
                free_slot = i;
            continue;
        }
        if (oldest < 0 || t[i].last < t[oldest].last)
            oldest = i;
        if (t[i].uid == uid) {
            own++;
            if (own_oldest < 0 || t[i].last < t[own_oldest].last)
                own_oldest = i;
        }
    }
    if (own >= ARB_CHARGED_USER_MAX)
        return own_oldest;
    return free_slot >= 0 ? free_slot : oldest;
}

void arb_charged_add(struct arbiter *a, unsigned gpu, unsigned job, uint64_t ns, uint64_t reported)
{
    struct arb_charged *t = table(a);
    struct arb_gpu *g = a->gpus[gpu];
    if (!t || job >= VGPU_SCHED_MAX_JOBS || !ns)
        return;
    uint64_t key = atomic_load(&g->s.f->jobs[job].key);
    if (!key)
        return;
    /* The slot this entry was last charged to, while it still is this job's (an entry is reused). */
    int i = g->charged_slot[job] - 1;
    if (i < 0 || t[i].key != key || t[i].gpu != gpu) {
        i = find(t, gpu, key);
        if (i < 0) {
            i = make_room(t, g->job_uid[job]);
            t[i] = (struct arb_charged){ .key = key, .uid = g->job_uid[job], .gpu = gpu };
        }
        g->charged_slot[job] = (uint16_t)(i + 1);
    }
    t[i].ns += ns;
    t[i].reported += reported < ns ? reported : ns;
    t[i].last = mono_ns();
}

bool arb_charged_get(struct arbiter *a, unsigned gpu, uint64_t key, uint64_t *ns, uint64_t *reported)
{
    int i = a->charged ? find(a->charged, gpu, key) : -1;
    if (i < 0)
        return false;
    *ns = a->charged[i].ns;
    *reported = a->charged[i].reported;
    return true;
}

void arb_charged_forget(struct arbiter *a, unsigned gpu, uint64_t key)
{
    int i = a->charged ? find(a->charged, gpu, key) : -1;
    if (i >= 0)
        memset(&a->charged[i], 0, sizeof a->charged[i]);
}
