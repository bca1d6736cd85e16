/* fuzz_arbiter: the daemon's request handler (cmd/daemon/arbiter.c, arb_handle) against whatever
 * its clients may send, through the seam tests/unit/test_arb_handle.c uses: no socket, the
 * handler called as the daemon's loop calls it (cmd/daemon.c, serve_client), for five clients:
 * root, two connections of nobody's, uid 1000, and uid 300001 (a subordinate uid of nobody's,
 * VGPU_SUBUID_FILE). Links cmd/daemon's objects (the Makefile's fuzz_arbiter rule).
 *
 * The input is a run of messages, each
 *     u8 who (client, mod 5), u8 flags, struct vgpu_arb_req, then q.len bytes of payload
 * flags: 1 a descriptor (/dev/null) travels with it (JOB's limits file); 2 the client's
 * connection closes after it (arb_client_gone; its next message is a new connection's). A
 * message the daemon would not read (q.len over VGPU_ARB_MAX_PAYLOAD, or cut short) ends the
 * input, as it ends the connection. At the end every connection closes and the daemon's state is
 * freed, so each input starts from an empty daemon.
 *
 * Invariants (abort: a finding):
 *  - a reply fits its buffer: r.len <= VGPU_ARB_MAX_PAYLOAD (the payload buffer is exactly that
 *    big, so ASan sees a write past it), its message is NUL-terminated, and the descriptor it
 *    passes is a GPU's read-only schedule or none;
 *  - no descriptor leaks: /proc/self/fd has as many entries after the input as before;
 *  - no entry of another uid is touched: a message of client c never changes, in any GPU's
 *    schedule, a job entry of another uid (its key, cap, policy, priority, its owner) nor gives
 *    it credit, and never detaches, moves or takes over another uid's process entry. What the
 *    lease rules do to another's entry (charging a lease it let run over) is allowed. */
#include <dirent.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "fuzz.h"

#include "daemon/server.h"
#include "vgpu/sched.h"

#define NCLIENTS 5
#define MS 1000000ULL

static const uid_t uids[NCLIENTS] = { 0, 65534, 65534, 1000, 300001 };
static struct arbiter A;
static struct arb_client clients[NCLIENTS];
static unsigned nclients = NCLIENTS;
static uint64_t next_id;
static char *out;                 /* VGPU_ARB_MAX_PAYLOAD bytes exactly */
static char dir[64], subuid[128], policy[128], state[128];

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static int count_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    FUZZ_ASSERT(d != NULL);
    int n = 0;
    while (readdir(d))
        n++;
    closedir(d);
    return n;
}

static void connect_client(unsigned i)
{
    clients[i] = (struct arb_client){ .fd = -1, .id = ++next_id, .pid = getpid(), .uid = uids[i],
                                      .login = arb_login_of(&A, uids[i]) };
}

static void cleanup(void)
{
    unlink(subuid);
    unlink(policy);
    unlink(state);
    rmdir(dir);
}

/* Once: the simulated NVML (next to this build's gcc twin: build/fakegpu, or VGPU_NVML_LIB), a
 * machine directory and subordinate uids of the harness's own; then what the daemon keeps for
 * its life (NVML's list, the logins) read once, so that it is not counted as a leak. */
static void init(void)
{
    char exe[PATH_MAX], path[PATH_MAX + 64];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    FUZZ_ASSERT(n > 0);
    exe[n] = 0;
    const char *src = dirname(dirname(dirname(exe)));   /* SRC/build-fuzz/fuzz/fuzz_arbiter */
    snprintf(path, sizeof path, "%s/build/fakegpu/libnvidia-ml.so.1", src);
    setenv("VGPU_NVML_LIB", path, 0);
    snprintf(path, sizeof path, "%s/tests/fakegpu/scenarios/h100.json", src);
    setenv("VGPU_FAKE_SCENARIO", path, 0);
    /* run.sh removes what a crashed harness left of /dev/shm/vgpu-fuzz-* */
    snprintf(dir, sizeof dir, "/dev/shm/vgpu-fuzz-arbiter.XXXXXX");
    FUZZ_ASSERT(mkdtemp(dir) != NULL);
    atexit(cleanup);
    snprintf(state, sizeof state, "%s/fake.state", dir);
    setenv("VGPU_FAKE_STATE", state, 1);
    setenv("VGPU_MACHINE_DIR", dir, 1);
    snprintf(subuid, sizeof subuid, "%s/subuid", dir);
    FILE *f = fopen(subuid, "w");
    FUZZ_ASSERT(f != NULL);
    fputs("nobody:300000:100\n", f);
    fclose(f);
    setenv("VGPU_SUBUID_FILE", subuid, 1);
    /* nobody may ask for high priority: the policy's paths are reached too */
    snprintf(policy, sizeof policy, "%s/policy", dir);
    f = fopen(policy, "w");
    FUZZ_ASSERT(f != NULL);
    fputs("priority-high-users nobody\n", f);
    fclose(f);
    chmod(policy, 0644);
    out = malloc(VGPU_ARB_MAX_PAYLOAD);
    FUZZ_ASSERT(out != NULL);
    A.clients = clients;
    A.nclients = &nclients;
    struct vgpu_err e = { 0 };
    arb_gpus_known(&A, "GPU-4f6c2a51-93b1-4c7e-8d2a-0b5e6f7a8c91", &e);
    (void)arb_login_of(&A, 0);
}

/* Every connection closes; the schedules, placement and charges go (what NVML and the logins
 * hold is kept, as a daemon keeps them). */
static void reset(void)
{
    for (unsigned i = 0; i < NCLIENTS; i++)
        arb_client_gone(&A, &clients[i]);
    for (unsigned i = 0; i < A.ngpus; i++) {
        vgpu_sched_close(&A.gpus[i]->s);
        close(A.gpus[i]->ro_fd);
        free(A.gpus[i]);
        A.gpus[i] = NULL;
    }
    A.ngpus = 0;
    arb_place_free(&A);
    arb_lend_free(&A);
    free(A.charged);
    A.charged = NULL;
    free(A.acct);
    A.acct = NULL;
}

/* What client `uid` must not change: the other uids' entries of every GPU, before its message. */
struct snapshot {
    bool job[VGPU_ARB_MAX_GPUS][VGPU_SCHED_MAX_JOBS];
    bool proc[VGPU_ARB_MAX_GPUS][VGPU_SCHED_MAX_PROCS];
    struct vgpu_sched_job jobs[VGPU_ARB_MAX_GPUS][VGPU_SCHED_MAX_JOBS];
    uid_t job_uid[VGPU_ARB_MAX_GPUS][VGPU_SCHED_MAX_JOBS];
    struct vgpu_sched_proc procs[VGPU_ARB_MAX_GPUS][VGPU_SCHED_MAX_PROCS];
    uint64_t proc_client[VGPU_ARB_MAX_GPUS][VGPU_SCHED_MAX_PROCS];
    uid_t proc_uid[VGPU_ARB_MAX_GPUS][VGPU_SCHED_MAX_PROCS];
};
static struct snapshot snap;

static bool job_has_proc(const struct arb_gpu *g, unsigned j)
{
    for (unsigned p = 0; p < VGPU_SCHED_MAX_PROCS; p++)
        if (atomic_load(&g->s.f->procs[p].pid) && atomic_load(&g->s.f->procs[p].job) == j)
            return true;
    return false;
}

static void take_snapshot(uid_t uid)
{
    uint64_t now = now_ns();
    memset(snap.job, 0, sizeof snap.job);
    memset(snap.proc, 0, sizeof snap.proc);
    for (unsigned i = 0; i < A.ngpus; i++) {
        const struct arb_gpu *g = A.gpus[i];
        for (unsigned j = 0; j < VGPU_SCHED_MAX_JOBS; j++) {
            const struct vgpu_sched_job *e = &g->s.f->jobs[j];
            uint64_t seen = atomic_load(&e->seen_ns);
            /* An entry free for anyone to take (no process, idle long enough) may go to another job. */
            bool free_for_all = !job_has_proc(g, j) && (seen > now || now - seen > VGPU_SCHED_JOB_IDLE_NS - 100 * MS);
            if (!atomic_load(&e->key) || g->job_uid[j] == uid || free_for_all)
                continue;
            snap.job[i][j] = true;
            memcpy(&snap.jobs[i][j], e, sizeof *e);
            snap.job_uid[i][j] = g->job_uid[j];
        }
        for (unsigned p = 0; p < VGPU_SCHED_MAX_PROCS; p++) {
            if (!g->proc_client[p] || g->proc_uid[p] == uid)
                continue;
            snap.proc[i][p] = true;
            memcpy(&snap.procs[i][p], &g->s.f->procs[p], sizeof snap.procs[i][p]);
            snap.proc_client[i][p] = g->proc_client[p];
            snap.proc_uid[i][p] = g->proc_uid[p];
        }
    }
}

static int64_t credit_at(const struct vgpu_sched_job *e, uint64_t t)
{
    return vgpu_sched_credit_at(atomic_load(&e->credit), atomic_load(&e->credit_t), atomic_load(&e->cap), t);
}

static void check_snapshot(void)
{
    uint64_t t = now_ns();
    for (unsigned i = 0; i < A.ngpus; i++) {
        const struct arb_gpu *g = A.gpus[i];
        for (unsigned j = 0; j < VGPU_SCHED_MAX_JOBS; j++) {
            if (!snap.job[i][j])
                continue;
            const struct vgpu_sched_job *b = &snap.jobs[i][j], *e = &g->s.f->jobs[j];
            FUZZ_ASSERT(atomic_load(&e->key) == atomic_load(&b->key));
            FUZZ_ASSERT(g->job_uid[j] == snap.job_uid[i][j]);
            FUZZ_ASSERT(atomic_load(&e->cap) == atomic_load(&b->cap));
            FUZZ_ASSERT(atomic_load(&e->soft) == atomic_load(&b->soft));
            FUZZ_ASSERT(atomic_load(&e->prio) == atomic_load(&b->prio));
            FUZZ_ASSERT(atomic_load(&e->spilling) == atomic_load(&b->spilling));
            FUZZ_ASSERT(atomic_load(&e->back_at) == atomic_load(&b->back_at));
            FUZZ_ASSERT(atomic_load(&e->back_gap) == atomic_load(&b->back_gap));
            /* charged (a lease of its own that ran over, revoked) at most, never credited */
            FUZZ_ASSERT(atomic_load(&e->used_ns) >= atomic_load(&b->used_ns));
            FUZZ_ASSERT(credit_at(e, t) <= credit_at(b, t) + 1000);
        }
        for (unsigned p = 0; p < VGPU_SCHED_MAX_PROCS; p++) {
            if (!snap.proc[i][p])
                continue;
            const struct vgpu_sched_proc *b = &snap.procs[i][p], *e = &g->s.f->procs[p];
            FUZZ_ASSERT(g->proc_client[p] == snap.proc_client[i][p]);
            FUZZ_ASSERT(g->proc_uid[p] == snap.proc_uid[i][p]);
            FUZZ_ASSERT(atomic_load(&e->pid) == atomic_load(&b->pid));
            FUZZ_ASSERT(atomic_load(&e->start) == atomic_load(&b->start));
            FUZZ_ASSERT(atomic_load(&e->job) == atomic_load(&b->job));
            FUZZ_ASSERT(atomic_load(&e->pidns) == atomic_load(&b->pidns));
        }
    }
}

static void check_reply(const struct vgpu_arb_rep *r, int send_fd)
{
    FUZZ_ASSERT(r->len <= VGPU_ARB_MAX_PAYLOAD);
    FUZZ_ASSERT(memchr(r->msg, 0, sizeof r->msg) != NULL);
    if (send_fd < 0)
        return;
    bool a_schedule = false;
    for (unsigned i = 0; i < A.ngpus; i++)
        a_schedule |= A.gpus[i]->ro_fd == send_fd;
    FUZZ_ASSERT(a_schedule);
    FUZZ_ASSERT((fcntl(send_fd, F_GETFL) & O_ACCMODE) == O_RDONLY);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static bool ready, trace;
    if (!ready) {
        init();
        trace = getenv("FUZZ_ARBITER_TRACE") && *getenv("FUZZ_ARBITER_TRACE") == '1';
        ready = true;
    }
    int fds = count_fds();
    for (unsigned i = 0; i < NCLIENTS; i++)
        connect_client(i);
    size_t at = 0;
    while (size - at >= 2 + sizeof(struct vgpu_arb_req)) {
        unsigned who = data[at] % NCLIENTS, flags = data[at + 1];
        struct vgpu_arb_req q;
        memcpy(&q, data + at + 2, sizeof q);
        at += 2 + sizeof q;
        if (q.len > VGPU_ARB_MAX_PAYLOAD || q.len > size - at)
            break;   /* the daemon would not read it: the connection ends */
        /* The payload in a buffer of its own size, as received: a read past it is ASan's. */
        char *in = malloc(q.len ? q.len : 1);
        FUZZ_ASSERT(in != NULL);
        memcpy(in, data + at, q.len);
        at += q.len;
        int passed = flags & 1 ? open("/dev/null", O_RDONLY | O_CLOEXEC) : -1;
        struct arb_client *c = &clients[who];
        take_snapshot(c->uid);
        struct vgpu_arb_rep r;
        int send_fd = -1;
        memset(out, 0xa5, VGPU_ARB_MAX_PAYLOAD);
        bool answered = arb_handle(&A, c, &q, in, passed, &r, out, &send_fd);
        if (answered)
            check_reply(&r, send_fd);
        else
            FUZZ_ASSERT(send_fd == -1);
        if (trace)   /* FUZZ_ARBITER_TRACE=1: each message and its answer, to turn a finding into a unit test */
            fprintf(stderr, "client %u (uid %u) op %u gpu %u proc %d len %u a %llu %llu %llu %llu: %s %d %s\n", who,
                    (unsigned)c->uid, q.op, q.gpu, q.proc, q.len, (unsigned long long)q.a[0],
                    (unsigned long long)q.a[1], (unsigned long long)q.a[2], (unsigned long long)q.a[3],
                    answered ? "rc" : "no reply", answered ? r.rc : 0, answered ? r.msg : "");
        free(in);
        if (flags & 2) {
            arb_client_gone(&A, c);
            connect_client(who);
        }
        check_snapshot();
    }
    reset();
    FUZZ_ASSERT(count_fds() == fds);
    return 0;
}
