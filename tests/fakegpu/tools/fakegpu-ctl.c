/* fakegpu-ctl: drives the simulated machine from tests (test double; tests/fakegpu/README.md).
 *
 *   fakegpu-ctl show                      the state as JSON (GPUs, MIG, processes, the busy time of
 *                                         ended ones, utilisation, now_ns)
 *   fakegpu-ctl reset [GPU...]            "GPU reset": a pending MIG mode becomes current;
 *                                         fails (exit 6) while processes use the GPU
 *   fakegpu-ctl lose GPU | find GPU       the GPU falls off the bus / comes back
 *   fakegpu-ctl hold PLACE BYTES [SEC]    this process holds a context (the GPU's context overhead,
 *                                         as a CUDA process pays) and BYTES on PLACE, prints "ready"
 *                                         and sleeps SEC seconds (default: until killed)
 *   fakegpu-ctl busy PLACE SEC [PCT]      this process keeps PLACE PCT % busy (default 100) for SEC
 *   fakegpu-ctl fragment GPU PCT          PCT % of the GPU's free memory lies in pieces too small for
 *                                         a large allocation: one allocation over 2 MiB gets at most
 *                                         100-PCT % of the free memory (0: none)
 *   fakegpu-ctl mig-ci GPU GI_ID PROFILE  creates one more compute instance of the CI profile PROFILE
 *                                         ("1c.2g.20gb") in GPU instance GI_ID and prints its MIG UUID
 *                                         (vgpu mig create makes one CI per GI)
 *   fakegpu-ctl hang-locked               takes the state's lock, prints "ready" and sleeps: kill it
 *                                         with SIGKILL to check that the others recover the lock
 *
 * PLACE is a GPU index, or GPU:GI_ID:CI_ID for a MIG device (NVML instance IDs). */
#include <json-c/json.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../common/fakestate.h"

static int usage(void)
{
    fprintf(stderr, "usage: fakegpu-ctl show | reset [GPU...] | lose GPU | find GPU | hold PLACE BYTES [SEC] | "
                    "busy PLACE SEC [PCT] | fragment GPU PCT\n");
    return 2;
}

static bool parse_gpu(const char *s, unsigned *gpu)
{
    char *end;
    long v = strtol(s, &end, 10);
    if (*s == 0 || (*end && *end != ':') || v < 0 || (unsigned long)v >= fs_state()->ngpus) {
        fprintf(stderr, "fakegpu-ctl: no GPU '%s' (the scenario has %u)\n", s, fs_state()->ngpus);
        return false;
    }
    *gpu = (unsigned)v;
    return true;
}

/* "0" or "0:GI:CI" -> gpu and slots */
static bool parse_place(const char *s, unsigned *gpu, int *gi, int *ci)
{
    if (!parse_gpu(s, gpu))
        return false;
    *gi = *ci = -1;
    const char *c1 = strchr(s, ':');
    if (!c1)
        return true;
    unsigned gid, cid;
    if (sscanf(c1, ":%u:%u", &gid, &cid) != 2) {
        fprintf(stderr, "fakegpu-ctl: place '%s' is not GPU or GPU:GI_ID:CI_ID\n", s);
        return false;
    }
    fs_lock();
    *gi = fs_gi_by_id(*gpu, gid);
    if (*gi >= 0)
        for (int c = 0; c < FS_MAX_CI; c++)
            if (fs_state()->gpu[*gpu].gi[*gi].ci[c].used && fs_state()->gpu[*gpu].gi[*gi].ci[c].id == cid)
                *ci = c;
    fs_unlock();
    if (*gi < 0 || *ci < 0) {
        fprintf(stderr, "fakegpu-ctl: GPU %u has no GPU instance %u with compute instance %u\n", *gpu, gid, cid);
        return false;
    }
    return true;
}

static void sleep_ns(uint64_t ns)
{
    struct timespec ts = {(time_t)(ns / 1000000000ULL), (long)(ns % 1000000000ULL)};
    nanosleep(&ts, NULL);
}

static int show(void)
{
    struct fs_state *st = fs_state();
    json_object *root = json_object_new_object(), *gpus = json_object_new_array();
    fs_lock();
    fs_reap();
    uint64_t now = fs_now_ns(), period = (uint64_t)st->sample_period_ms * 1000000ULL;
    for (unsigned i = 0; i < st->ngpus; i++) {
        struct fs_gpu *g = &st->gpu[i];
        fs_advance_gpu(i);   /* busy time up to now */
        json_object *o = json_object_new_object(), *procs = json_object_new_array(), *gis = json_object_new_array();
        json_object_object_add(o, "index", json_object_new_int((int)i));
        json_object_object_add(o, "name", json_object_new_string(g->s.name));
        json_object_object_add(o, "uuid", json_object_new_string(g->s.uuid));
        json_object_object_add(o, "lost", json_object_new_boolean(fs_gpu_lost(i)));
        json_object_object_add(o, "memory_used", json_object_new_int64((int64_t)fs_place_used(i, -1)));
        json_object_object_add(o, "pcie_tx_bytes", json_object_new_int64((int64_t)g->pcie_tx));
        json_object_object_add(o, "pcie_rx_bytes", json_object_new_int64((int64_t)g->pcie_rx));
        json_object_object_add(o, "busy_ns", json_object_new_int64((int64_t)g->busy_ns));
        json_object_object_add(o, "energy_mj", g->s.no_energy ? NULL : json_object_new_int64((int64_t)fs_energy_mj(i)));
        json_object_object_add(o, "busy_pct", json_object_new_int((int)(fs_busy_between(i, 0, -2, now - period, now) * 100 / period)));
        json_object_object_add(o, "compute_mode", json_object_new_int((int)g->compute_mode));
        json_object_object_add(o, "timeslice", json_object_new_int((int)g->timeslice));
        json_object_object_add(o, "mig_current", json_object_new_int((int)g->mig_current));
        json_object_object_add(o, "mig_pending", json_object_new_int((int)g->mig_pending));
        for (unsigned p = 0; p < FS_MAX_PROCS; p++) {
            const struct fs_proc *r = &g->procs[p];
            if (!r->used)
                continue;
            json_object *po = json_object_new_object();
            json_object_object_add(po, "pid", json_object_new_int(r->pid));
            json_object_object_add(po, "memory", json_object_new_int64((int64_t)r->mem));
            json_object_object_add(po, "busy_ns", json_object_new_int64((int64_t)r->busy_ns));
            json_object_object_add(po, "gi", json_object_new_int(r->gi < 0 ? -1 : (int)g->gi[r->gi].id));
            json_object_object_add(po, "ci", json_object_new_int(r->gi < 0 ? -1 : (int)g->gi[r->gi].ci[r->ci].id));
            json_object_array_add(procs, po);
        }
        /* Records that ended, with the busy time they had: a pid's busy time is its live
         * records' plus these (oldest first), so it never goes down when the process ends. */
        json_object *ended = json_object_new_array();
        for (unsigned k = 0; k < FS_MAX_ENDED; k++) {
            const struct fs_ended *e = &g->ended[(g->ended_head + k) % FS_MAX_ENDED];
            if (!e->ended_ns)
                continue;
            json_object *eo = json_object_new_object();
            json_object_object_add(eo, "pid", json_object_new_int(e->pid));
            json_object_object_add(eo, "busy_ns", json_object_new_int64((int64_t)e->busy_ns));
            json_object_object_add(eo, "gi", json_object_new_int(e->gi < 0 ? -1 : (int)g->gi[e->gi].id));
            json_object_object_add(eo, "ended_ns", json_object_new_int64((int64_t)e->ended_ns));
            json_object_array_add(ended, eo);
        }
        for (int s = 0; s < FS_MAX_GI; s++) {
            if (!g->gi[s].used)
                continue;
            json_object *go = json_object_new_object(), *cis = json_object_new_array();
            json_object_object_add(go, "id", json_object_new_int((int)g->gi[s].id));
            json_object_object_add(go, "profile", json_object_new_string(g->s.profiles[g->gi[s].profile].name));
            json_object_object_add(go, "start", json_object_new_int((int)g->gi[s].start));
            json_object_object_add(go, "size", json_object_new_int((int)g->gi[s].size));
            for (int c = 0; c < FS_MAX_CI; c++)
                if (g->gi[s].ci[c].used) {
                    json_object *co = json_object_new_object();
                    json_object_object_add(co, "id", json_object_new_int((int)g->gi[s].ci[c].id));
                    json_object_object_add(co, "uuid", json_object_new_string(g->gi[s].ci[c].uuid));
                    json_object_array_add(cis, co);
                }
            json_object_object_add(go, "compute_instances", cis);
            json_object_array_add(gis, go);
        }
        json_object_object_add(o, "processes", procs);
        json_object_object_add(o, "ended_processes", ended);
        json_object_object_add(o, "gpu_instances", gis);
        json_object_array_add(gpus, o);
    }
    fs_unlock();
    json_object_object_add(root, "gpus", gpus);
    /* The simulator's clock (CLOCK_MONOTONIC) the busy times above were brought up to: a test
     * that divides busy time by elapsed time takes both from here, not from its own clock around
     * this command (under ASan the command's own run time made GPU 0 105 % busy). */
    json_object_object_add(root, "now_ns", json_object_new_int64((int64_t)now));
    printf("%s\n", json_object_to_json_string_ext(root, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_NOSLASHESCAPE));
    json_object_put(root);
    return 0;
}

static int reset(int argc, char **argv)
{
    struct fs_state *st = fs_state();
    int rc = 0;
    for (unsigned i = 0; i < st->ngpus; i++) {
        bool selected = argc == 0;
        for (int a = 0; a < argc; a++)
            selected |= (unsigned)atoi(argv[a]) == i;
        if (!selected)
            continue;
        fs_lock();
        bool ok = fs_gpu_reset(i);
        fs_unlock();
        if (!ok) {
            fprintf(stderr, "fakegpu-ctl: GPU %u is currently in use by another process; stop it first\n", i);
            rc = 6;
        }
    }
    return rc;
}

static int set_lost(const char *arg, bool lost)
{
    unsigned gpu;
    if (!parse_gpu(arg, &gpu))
        return 2;
    fs_lock();
    fs_state()->gpu[gpu].lost = lost;
    fs_unlock();
    return 0;
}

static volatile sig_atomic_t stop;
static void on_signal(int sig) { (void)sig; stop = 1; }

static int hold(int argc, char **argv)
{
    unsigned gpu;
    int gi, ci;
    if (argc < 2 || !parse_place(argv[0], &gpu, &gi, &ci))
        return usage();
    unsigned long long bytes = strtoull(argv[1], NULL, 0);
    double secs = argc > 2 ? atof(argv[2]) : -1;
    unsigned long long overhead = fs_state()->gpu[gpu].s.ctx_overhead;
    fs_attach(gpu, gi, ci, true);
    if (bytes > ~0ULL - overhead || !fs_charge(gpu, gi, ci, overhead + bytes)) {
        fprintf(stderr, "fakegpu-ctl: out of memory on %s: a context (%llu bytes) and %llu bytes do not fit\n",
                argv[0], overhead, bytes);
        fs_attach(gpu, gi, ci, false);
        return 1;
    }
    printf("ready %d\n", (int)getpid());
    fflush(stdout);
    signal(SIGTERM, on_signal);
    signal(SIGINT, on_signal);
    uint64_t end = secs < 0 ? UINT64_MAX : fs_now_ns() + (uint64_t)(secs * 1e9);
    while (!stop && fs_now_ns() < end)
        sleep_ns(10000000);
    fs_release_self();
    return 0;
}

static int busy(int argc, char **argv)
{
    unsigned gpu;
    int gi, ci;
    if (argc < 2 || !parse_place(argv[0], &gpu, &gi, &ci))
        return usage();
    double secs = atof(argv[1]);
    unsigned pct = argc > 2 ? (unsigned)atoi(argv[2]) : 100;
    if (pct == 0 || pct > 100)
        return usage();
    fs_attach(gpu, gi, ci, true);
    signal(SIGTERM, on_signal);
    const uint64_t slot = 10000000; /* 10 ms: pct % of it is kernel work */
    uint64_t end = fs_now_ns() + (uint64_t)(secs * 1e9);
    while (!stop && fs_now_ns() < end) {
        uint64_t t0 = fs_now_ns();
        uint64_t done = fs_run(gpu, gi, ci, t0, slot * pct / 100);
        uint64_t next = t0 + slot > done ? t0 + slot : done;
        sleep_ns(next - fs_now_ns() < slot * 2 ? next - fs_now_ns() : slot);
    }
    fs_release_self();
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 2)
        return usage();
    if (!fs_open()) {
        fprintf(stderr, "fakegpu-ctl: %s\n", fs_error());
        return 2;
    }
    const char *cmd = argv[1];
    if (strcmp(cmd, "show") == 0)
        return show();
    if (strcmp(cmd, "reset") == 0)
        return reset(argc - 2, argv + 2);
    if (strcmp(cmd, "lose") == 0 && argc == 3)
        return set_lost(argv[2], true);
    if (strcmp(cmd, "find") == 0 && argc == 3)
        return set_lost(argv[2], false);
    if (strcmp(cmd, "hold") == 0)
        return hold(argc - 2, argv + 2);
    if (strcmp(cmd, "busy") == 0)
        return busy(argc - 2, argv + 2);
    if (strcmp(cmd, "fragment") == 0 && argc == 4) {
        unsigned gpu;
        char *end;
        unsigned long pct = strtoul(argv[3], &end, 10);
        if (!parse_gpu(argv[2], &gpu))
            return 2;
        if (*end || !*argv[3] || pct > 99) {
            fprintf(stderr, "fakegpu-ctl: fragment takes a percentage 0..99, not '%s'\n", argv[3]);
            return 2;
        }
        fs_lock();
        fs_state()->gpu[gpu].fragment_pct = (unsigned)pct;
        fs_unlock();
        return 0;
    }
    if (strcmp(cmd, "mig-ci") == 0 && argc == 5) {
        unsigned gpu;
        if (!parse_gpu(argv[2], &gpu))
            return 2;
        fs_lock();
        struct fs_gpu *g = &fs_state()->gpu[gpu];
        int gi = fs_gi_by_id(gpu, (unsigned)atoi(argv[3])), rc = -2;
        if (gi >= 0) {
            const struct fs_profile *p = &g->s.profiles[g->gi[gi].profile];
            for (unsigned c = 0; c < p->nci; c++)
                if (strcmp(p->ci[c].name, argv[4]) == 0)
                    rc = fs_ci_create(gpu, gi, c, -1);
        }
        if (rc >= 0)
            printf("%s\n", g->gi[gi].ci[rc].uuid);
        fs_unlock();
        if (rc < 0)
            fprintf(stderr, "fakegpu-ctl: cannot create a %s compute instance in GPU instance %s of GPU %u (%d)\n",
                    argv[4], argv[3], gpu, rc);
        return rc < 0 ? 1 : 0;
    }
    if (strcmp(cmd, "hang-locked") == 0) {
        fs_lock();
        printf("ready %d\n", (int)getpid());
        fflush(stdout);
        for (;;)
            pause();
    }
    return usage();
}
