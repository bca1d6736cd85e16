/* The fake libnvidia-ml.so.1 and the shared simulated machine (tests/fakegpu): NVML's
 * protocols (two-call buffers, version words, ref-counted init), the MIG state machine
 * (pending mode, profile indexes vs IDs, placements, capacity, IN_USE, destroy), process lists
 * and utilisation fed by other processes (fakegpu-ctl), reaping of SIGKILLed processes,
 * injected failures, the PCIe byte counters. Loaded by path from $VGPU_FAKE_LIBDIR;
 * tests/run.sh gives each unit binary h100.json and a fresh state file. */
#include <dlfcn.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>
#include <json-c/json.h>

#include "vgpu_nvml.h"

static void *lib;
static char libdir[4096];

#define SYM(name) ((vgpu_##name##_fn)sym(#name))
static void *sym(const char *name)
{
    void *p = dlsym(lib, name);
    if (!p) {
        fprintf(stderr, "the fake libnvidia-ml.so.1 lacks %s\n", name);
        exit(1);
    }
    return p;
}

static void load(void)
{
    const char *dir = getenv("VGPU_FAKE_LIBDIR");
    snprintf(libdir, sizeof libdir, "%s", dir ? dir : "build/fakegpu");
    char path[4200];
    snprintf(path, sizeof path, "%s/libnvidia-ml.so.1", libdir);
    lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        fprintf(stderr, "cannot load %s: %s (run through tests/run.sh)\n", path, dlerror());
        exit(1);
    }
}

static nvmlDevice_t dev0(void)
{
    nvmlDevice_t d = NULL;
    assert_int_equal(SYM(nvmlDeviceGetHandleByIndex_v2)(0, &d), NVML_SUCCESS);
    return d;
}

static int setup(void **state)
{
    (void)state;
    setenv("VGPU_FAKE_ROOT", "1", 1);
    return SYM(nvmlInit_v2)() == NVML_SUCCESS ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    return SYM(nvmlShutdown)() == NVML_SUCCESS ? 0 : -1;
}

/* ---- helpers running fakegpu-ctl ---- */
struct child {
    pid_t pid;
    FILE *out;
};

/* Starts `fakegpu-ctl ARGS...` and, for "hold", waits for its "ready" line. */
static struct child ctl_start(const char *a1, const char *a2, const char *a3, const char *a4)
{
    int fd[2];
    assert_int_equal(pipe(fd), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        dup2(fd[1], 1);
        close(fd[0]);
        char path[4200];
        snprintf(path, sizeof path, "%s/fakegpu-ctl", libdir);
        execl(path, "fakegpu-ctl", a1, a2, a3, a4, (char *)NULL);
        _exit(127);
    }
    close(fd[1]);
    struct child c = {pid, fdopen(fd[0], "r")};
    if (strcmp(a1, "hold") == 0 || strcmp(a1, "hang-locked") == 0) {
        char line[64] = "";
        assert_non_null(fgets(line, sizeof line, c.out));
        assert_true(strncmp(line, "ready", 5) == 0);
    }
    return c;
}

static int ctl_wait(struct child c)
{
    int status = 0;
    waitpid(c.pid, &status, 0);
    fclose(c.out);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

static int ctl(const char *a1, const char *a2) { return ctl_wait(ctl_start(a1, a2, NULL, NULL)); }

/* ---- init, versions, identity ---- */
static void test_init_refcount_and_strings(void **state)
{
    (void)state;
    assert_int_equal(SYM(nvmlInit_v2)(), NVML_SUCCESS);
    assert_int_equal(SYM(nvmlShutdown)(), NVML_SUCCESS);
    unsigned n = 0;
    assert_int_equal(SYM(nvmlDeviceGetCount_v2)(&n), NVML_SUCCESS); /* still initialised once */
    assert_int_equal(n, 1);
    assert_string_equal(SYM(nvmlErrorString)(NVML_ERROR_INSUFFICIENT_SIZE), "Insufficient Size");
    assert_string_equal(SYM(nvmlErrorString)(NVML_ERROR_LIB_RM_VERSION_MISMATCH), "Driver/library version mismatch");
    assert_string_equal(SYM(nvmlErrorString)((nvmlReturn_t)31), "Unknown Error");
    char v[NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE];
    assert_int_equal(SYM(nvmlSystemGetDriverVersion)(v, sizeof v), NVML_SUCCESS);
    assert_string_equal(v, "580.159.04");
    assert_int_equal(SYM(nvmlSystemGetNVMLVersion)(v, sizeof v), NVML_SUCCESS);
    assert_string_equal(v, "13.580.159.04");
    assert_int_equal(SYM(nvmlSystemGetDriverVersion)(v, 5), NVML_ERROR_INSUFFICIENT_SIZE);
    int cv = 0;
    assert_int_equal(SYM(nvmlSystemGetCudaDriverVersion_v2)(&cv), NVML_SUCCESS);
    assert_int_equal(cv, 13000);
}

static void test_identity(void **state)
{
    (void)state;
    nvmlDevice_t d = dev0(), again = NULL;
    char name[NVML_DEVICE_NAME_V2_BUFFER_SIZE], uuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE];
    assert_int_equal(SYM(nvmlDeviceGetName)(d, name, sizeof name), NVML_SUCCESS);
    assert_string_equal(name, "NVIDIA H100 80GB HBM3");
    assert_int_equal(SYM(nvmlDeviceGetUUID)(d, uuid, sizeof uuid), NVML_SUCCESS);
    assert_true(strncmp(uuid, "GPU-", 4) == 0 && strlen(uuid) == 40);
    assert_int_equal(SYM(nvmlDeviceGetHandleByUUID)(uuid, &again), NVML_SUCCESS);
    assert_ptr_equal(again, d);
    assert_int_equal(SYM(nvmlDeviceGetHandleByUUID)("GPU-nope", &again), NVML_ERROR_NOT_FOUND);
    nvmlPciInfo_t pci;
    assert_int_equal(SYM(nvmlDeviceGetPciInfo_v3)(d, &pci), NVML_SUCCESS);
    assert_int_equal(pci.pciDeviceId, 0x233010DE);
    assert_string_equal(pci.busId, "00000000:1B:00.0");
    assert_int_equal(SYM(nvmlDeviceGetHandleByPciBusId_v2)("0000:1b:00.0", &again), NVML_SUCCESS);
    assert_ptr_equal(again, d);
    assert_int_equal(SYM(nvmlDeviceGetHandleByIndex_v2)(1, &again), NVML_ERROR_INVALID_ARGUMENT);
    unsigned fan;
    assert_int_equal(SYM(nvmlDeviceGetFanSpeed)(d, &fan), NVML_ERROR_NOT_SUPPORTED);
    unsigned mw = 0;
    assert_int_equal(SYM(nvmlDeviceGetEnforcedPowerLimit)(d, &mw), NVML_SUCCESS);
    assert_int_equal(mw, 700000);
}

/* ---- memory: v1 vs v2 semantics and the version word ---- */
static void test_memory_versions(void **state)
{
    (void)state;
    nvmlDevice_t d = dev0();
    nvmlMemory_t m1;
    assert_int_equal(SYM(nvmlDeviceGetMemoryInfo)(d, &m1), NVML_SUCCESS);
    assert_int_equal(m1.total, 85520809984ULL);
    nvmlMemory_v2_t m2 = {.version = nvmlMemory_v2};
    assert_int_equal(SYM(nvmlDeviceGetMemoryInfo_v2)(d, &m2), NVML_SUCCESS);
    assert_int_equal(m2.total, 85520809984ULL);
    assert_true(m2.reserved > 0);
    assert_int_equal(m1.used, m2.used + m2.reserved); /* v1 counts the reserve as used */
    assert_int_equal(m2.free, m2.total - m2.reserved - m2.used);
    m2.version = 2; /* the bare number: 580.159.04 says Function Not Found */
    assert_int_equal(SYM(nvmlDeviceGetMemoryInfo_v2)(d, &m2), NVML_ERROR_FUNCTION_NOT_FOUND);
    m2.version = 0x02000020;
    assert_int_equal(SYM(nvmlDeviceGetMemoryInfo_v2)(d, &m2), NVML_ERROR_ARGUMENT_VERSION_MISMATCH);
}

/* ---- processes: another process's memory, the two-call protocol, reaping ---- */
static void test_processes_two_call_and_reaping(void **state)
{
    (void)state;
    nvmlDevice_t d = dev0();
    unsigned n = 0;
    assert_int_equal(SYM(nvmlDeviceGetComputeRunningProcesses_v3)(d, &n, NULL), NVML_SUCCESS);
    assert_int_equal(n, 0);

    struct child c = ctl_start("hold", "0", "1073741824", NULL);
    n = 0;
    assert_int_equal(SYM(nvmlDeviceGetComputeRunningProcesses_v3)(d, &n, NULL), NVML_ERROR_INSUFFICIENT_SIZE);
    assert_int_equal(n, 1);
    nvmlProcessInfo_v2_t v3[4];
    n = 4;
    assert_int_equal(SYM(nvmlDeviceGetComputeRunningProcesses_v3)(d, &n, v3), NVML_SUCCESS);
    assert_int_equal(n, 1);
    assert_int_equal(v3[0].pid, c.pid);
    assert_int_equal(v3[0].usedGpuMemory, 1073741824ULL + 536870912ULL); /* + its context (h100: 512 MiB) */
    assert_int_equal(v3[0].gpuInstanceId, 0xFFFFFFFFu);
    nvmlProcessInfo_v1_t v1[4];
    n = 4;
    assert_int_equal(SYM(nvmlDeviceGetComputeRunningProcesses)(d, &n, v1), NVML_SUCCESS);
    assert_int_equal(v1[0].pid, c.pid); /* 16-byte records */
    assert_int_equal(v1[0].usedGpuMemory, 1073741824ULL + 536870912ULL);
    n = 4;
    assert_int_equal(SYM(nvmlDeviceGetGraphicsRunningProcesses_v3)(d, &n, v3), NVML_SUCCESS);
    assert_int_equal(n, 0);
    nvmlMemory_v2_t m2 = {.version = nvmlMemory_v2};
    assert_int_equal(SYM(nvmlDeviceGetMemoryInfo_v2)(d, &m2), NVML_SUCCESS);
    assert_int_equal(m2.used, 1073741824ULL + 536870912ULL);

    /* SIGKILL: nothing cleans up, yet the next reader no longer sees the process or its memory */
    kill(c.pid, SIGKILL);
    assert_int_equal(ctl_wait(c), 128 + SIGKILL);
    n = 4;
    assert_int_equal(SYM(nvmlDeviceGetComputeRunningProcesses_v3)(d, &n, v3), NVML_SUCCESS);
    assert_int_equal(n, 0);
    assert_int_equal(SYM(nvmlDeviceGetMemoryInfo_v2)(d, &m2), NVML_SUCCESS);
    assert_int_equal(m2.used, 0);
}

/* ---- PID namespaces: NVML reports host pids ---- */

/* The only child of `parent` (the process unshare -f forked), or 0. */
static pid_t child_of(pid_t parent)
{
    char path[64], buf[256] = "";
    snprintf(path, sizeof path, "/proc/%d/task/%d/children", (int)parent, (int)parent);
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    if (!fgets(buf, sizeof buf, f))
        buf[0] = 0;
    fclose(f);
    return (pid_t)atoi(buf);
}

/* The unshare process of the test below: killed by the teardown even when an assertion failed
 * (unshare --kill-child then kills the process in the namespace). */
static pid_t ns_unshare;

static int kill_ns_unshare(void **state)
{
    (void)state;
    if (ns_unshare > 0) {
        kill(ns_unshare, SIGKILL);
        waitpid(ns_unshare, NULL, 0);
        ns_unshare = 0;
    }
    return 0;
}

static void test_processes_in_pid_namespace(void **state)
{
    (void)state;
    if (system("unshare -pf --mount-proc true 2>/dev/null") != 0) {
        skip();
        return;
    }
    int fd[2];
    assert_int_equal(pipe(fd), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        dup2(fd[1], 1);
        close(fd[0]);
        char path[4200];
        snprintf(path, sizeof path, "%s/fakegpu-ctl", libdir);
        execlp("unshare", "unshare", "-pf", "--kill-child", "--mount-proc", path, "hold", "0", "1073741824",
               (char *)NULL);
        _exit(127);
    }
    ns_unshare = pid;
    close(fd[1]);
    FILE *out = fdopen(fd[0], "r");
    char line[64] = "";
    assert_non_null(fgets(line, sizeof line, out));
    assert_string_equal(line, "ready 1\n");          /* pid 1 in its own namespace */
    pid_t host = child_of(pid);
    assert_true(host > 1);
    nvmlDevice_t d = dev0();
    nvmlProcessInfo_v2_t v3[4];
    unsigned n = 4;
    assert_int_equal(SYM(nvmlDeviceGetComputeRunningProcesses_v3)(d, &n, v3), NVML_SUCCESS);
    assert_int_equal(n, 1);
    assert_int_equal(v3[0].pid, (unsigned)host);        /* the host's pid, as the driver reports */
    /* its 1 GiB and the context fakegpu-ctl hold creates (512 MiB in this scenario) */
    assert_int_equal(v3[0].usedGpuMemory, 1073741824ULL + (512ULL << 20));
    n = 4;                                              /* and again: not reaped as dead */
    assert_int_equal(SYM(nvmlDeviceGetComputeRunningProcesses_v3)(d, &n, v3), NVML_SUCCESS);
    assert_int_equal(n, 1);
    kill(host, SIGKILL);
    int status = 0;
    waitpid(pid, &status, 0);
    ns_unshare = 0;
    fclose(out);
    n = 4;
    assert_int_equal(SYM(nvmlDeviceGetComputeRunningProcesses_v3)(d, &n, v3), NVML_SUCCESS);
    assert_int_equal(n, 0);                             /* the dead one is reaped */
}

/* ---- utilisation from another process's kernels ----
 * Checked against the simulator's own clock and busy time, measured in the same run: a loaded
 * machine slows the busy child (fewer kernels in a window), so fixed bands and fixed sleeps failed
 * there ("busy 0.7 s" then a 300 ms sleep, 30..70 % after 350 ms). The simulator's clock is
 * CLOCK_MONOTONIC (fs_now_ns); NVML's stamps are wall-clock µs. */
static uint64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static unsigned long long wall_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (unsigned long long)ts.tv_sec * 1000000ULL + (unsigned long long)ts.tv_nsec / 1000;
}

/* Waits (in 5 ms steps) until the simulator's clock has passed `t`: a point of its time, not a
 * guess of how long the machine takes to get there. */
static void until_mono(uint64_t t)
{
    while (mono_ns() < t)
        nanosleep(&(struct timespec){ 0, 5000000 }, NULL);
}

/* GPU 0's busy time as the simulator counts it (`fakegpu-ctl show`), and its clock then. */
static uint64_t sim_gpu_busy(uint64_t *now)
{
    char cmd[4300];
    snprintf(cmd, sizeof cmd, "'%s/fakegpu-ctl' show", libdir);
    FILE *f = popen(cmd, "r");
    assert_non_null(f);
    static char buf[1 << 20];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = 0;
    assert_int_equal(pclose(f), 0);
    json_object *root = json_tokener_parse(buf), *gpus, *v;
    assert_non_null(root);
    assert_true(json_object_object_get_ex(root, "gpus", &gpus));
    assert_true(json_object_object_get_ex(json_object_array_get_idx(gpus, 0), "busy_ns", &v));
    uint64_t busy = (uint64_t)json_object_get_int64(v);
    assert_true(json_object_object_get_ex(root, "now_ns", &v));
    *now = (uint64_t)json_object_get_int64(v);
    json_object_put(root);
    return busy;
}

#define PERIOD_NS 200000000ULL   /* the scenario's sample period */

static void test_utilisation_samples(void **state)
{
    (void)state;
    nvmlDevice_t d = dev0();
    unsigned n = 0;
    assert_int_equal(SYM(nvmlDeviceGetProcessUtilization)(d, NULL, &n, 0), NVML_ERROR_INSUFFICIENT_SIZE);
    assert_int_equal(n, 72); /* the driver's buffer capacity, as observed */
    struct child c = ctl_start("busy", "0", "0.7", "100");
    assert_int_equal(ctl_wait(c), 0);
    /* The sample period in which the work ended must complete: until then its sample does not
     * exist yet, and would appear between the two queries below (as on a real driver). */
    until_mono(mono_ns() + PERIOD_NS + 1000000);
    nvmlProcessUtilizationSample_t s[72];
    n = 72;
    assert_int_equal(SYM(nvmlDeviceGetProcessUtilization)(d, s, &n, 0), NVML_SUCCESS);
    assert_true(n >= 1);
    unsigned long long newest = 0;
    unsigned found = 0;
    for (unsigned i = 0; i < n; i++) {
        assert_true(s[i].smUtil <= 100);
        if (s[i].pid == (unsigned)c.pid && s[i].smUtil > 0)
            found++;
        if (s[i].timeStamp > newest)
            newest = s[i].timeStamp;
    }
    /* Only the process's newest window (the one its work ended in, partly busy), as an H200 on
     * driver 580 gives them: not one sample per window of its 0.7 s. */
    assert_int_equal(found, 1);
    unsigned long long now_us = wall_us();
    assert_true(newest > now_us - 5000000ULL && newest <= now_us); /* wall-clock µs, a completed window */
    n = 72;
    assert_int_equal(SYM(nvmlDeviceGetProcessUtilization)(d, s, &n, newest), NVML_ERROR_NOT_FOUND);

    nvmlProcessUtilizationInfo_v1_t arr[72];
    nvmlProcessesUtilizationInfo_t info = {.version = 1, .processSamplesCount = 72, .procUtilArray = arr};
    assert_int_equal(SYM(nvmlDeviceGetProcessesUtilizationInfo)(d, &info), NVML_ERROR_ARGUMENT_VERSION_MISMATCH);
    info.version = nvmlProcessesUtilizationInfo_v1;
    assert_int_equal(SYM(nvmlDeviceGetProcessesUtilizationInfo)(d, &info), NVML_SUCCESS);
    assert_true(info.processSamplesCount >= 1);

    /* Device utilisation follows the load: over the last period, what the simulator counted busy
     * in it. The period lies inside [t0, t1] of two readings of the simulator's busy time, with
     * t0 a period or more before the query: at most their difference, and at least it less the
     * time of [t0, t1] outside the period (which held at most that much busy time). */
    c = ctl_start("busy", "0", "2", "50");
    uint64_t t0, t1, b0, b1, tq;
    do {   /* from the child's first kernel on (a loaded machine starts it late) */
        b0 = sim_gpu_busy(&t0);
    } while (b0 == 0 && mono_ns() < t0 + 5000000000ULL);
    assert_true(b0 > 0);
    until_mono(t0 + PERIOD_NS);
    nvmlUtilization_t u;
    tq = mono_ns();
    assert_int_equal(SYM(nvmlDeviceGetUtilizationRates)(d, &u), NVML_SUCCESS);
    b1 = sim_gpu_busy(&t1);
    assert_true(t1 > tq && tq >= t0 + PERIOD_NS);
    double hi = (double)(b1 - b0) * 100.0 / PERIOD_NS + 1.0;
    double lo = ((double)(b1 - b0) - (double)(t1 - t0 - PERIOD_NS)) * 100.0 / PERIOD_NS - 1.0;
    print_message("device utilisation %u %%, the simulator's busy time bounds it to %.1f..%.1f %%\n", u.gpu, lo, hi);
    assert_true(u.gpu <= hi + 0.5 && u.gpu >= lo - 0.5);
    assert_true(u.gpu <= 55);           /* a 50 % load is never seen above it (and a period's edge) */
    assert_int_equal(ctl_wait(c), 0);
    /* A whole period after its last kernel (before its exit), the GPU was idle over all of it. */
    until_mono(mono_ns() + PERIOD_NS + 1000000);
    assert_int_equal(SYM(nvmlDeviceGetUtilizationRates)(d, &u), NVML_SUCCESS);
    assert_int_equal(u.gpu, 0);
}

/* ---- device utilisation samples: the GPU's busy % per sample period (200 ms here) ---- */
static void test_device_samples(void **state)
{
    (void)state;
    nvmlDevice_t d = dev0();
    nvmlValueType_t type = NVML_VALUE_TYPE_DOUBLE;
    unsigned n = 0;
    uint64_t t0;
    unsigned long long before = wall_us();
    uint64_t b0 = sim_gpu_busy(&t0);
    /* 0.6 s of kernels spread over 1 s (fewer on a loaded machine); then the period the work ended
     * in completes */
    struct child c = ctl_start("busy", "0", "1", "60");
    assert_int_equal(ctl_wait(c), 0);
    until_mono(mono_ns() + PERIOD_NS + 1000000);
    uint64_t t1, b1 = sim_gpu_busy(&t1);   /* all the child's busy time: it has ended */
    unsigned long long asked = wall_us();
    assert_int_equal(SYM(nvmlDeviceGetSamples)(d, NVML_GPU_UTILIZATION_SAMPLES, before, &type, &n, NULL),
                     NVML_SUCCESS);  /* a NULL buffer: how many there are */
    assert_int_equal(type, NVML_VALUE_TYPE_UNSIGNED_INT);
    nvmlSample_t s[130];
    unsigned want = n;
    n = 130;
    assert_int_equal(SYM(nvmlDeviceGetSamples)(d, NVML_GPU_UTILIZATION_SAMPLES, before, &type, &n, s), NVML_SUCCESS);
    assert_int_equal(n, want);
    /* Every period from the one `before` fell in to the last completed one, oldest first, a
     * period apart: as many as the time between them holds, whatever the machine's load. */
    assert_true(n >= 2 && n <= 120);
    assert_true(s[0].timeStamp > before && s[0].timeStamp <= before + 201000);
    assert_true(s[n - 1].timeStamp <= asked && s[n - 1].timeStamp + 201000 > asked);
    unsigned long long busy_ms = 0;
    for (unsigned i = 0; i < n; i++) {
        assert_true(s[i].sampleValue.uiVal <= 100);
        assert_true(s[i].timeStamp > before);
        if (i > 0)   /* oldest first, a period apart */
            assert_in_range(s[i].timeStamp - s[i - 1].timeStamp, 199000, 201000);
        busy_ms += s[i].sampleValue.uiVal * 200ULL / 100;
    }
    /* The samples add up to the busy time the simulator counted meanwhile (all of it in them:
     * the GPU was idle before `before` and after the child), to a percent (2 ms) a sample. */
    double sim_ms = (double)(b1 - b0) / 1e6;
    print_message("samples: %u, busy %llu ms; the simulator counted %.1f ms\n", n, busy_ms, sim_ms);
    assert_true(sim_ms > 0);
    assert_true((double)busy_ms >= sim_ms - 2.0 * n && (double)busy_ms <= sim_ms + 2.0 * n);
    /* Nothing newer than the last stamp, unless a period has ended since (a loaded machine took
     * that long since the query above): then only newer ones. */
    unsigned long long oldest = s[0].timeStamp, last = s[want - 1].timeStamp;
    n = 130;
    nvmlReturn_t r = SYM(nvmlDeviceGetSamples)(d, NVML_GPU_UTILIZATION_SAMPLES, last, &type, &n, s);
    if (r == NVML_SUCCESS) {
        assert_true(wall_us() >= last + 199000);
        for (unsigned i = 0; i < n; i++)
            assert_true(s[i].timeStamp > last);
    } else {
        assert_int_equal(r, NVML_ERROR_NOT_FOUND);
    }
    /* a buffer too small: the oldest that fit, so a reader resumes from the last stamp */
    n = 2;
    assert_int_equal(SYM(nvmlDeviceGetSamples)(d, NVML_GPU_UTILIZATION_SAMPLES, before, &type, &n, s), NVML_SUCCESS);
    assert_int_equal(n, 2);
    assert_true(s[0].timeStamp == oldest);
    /* from the start: never more than the driver's 120 */
    n = 0;
    assert_int_equal(SYM(nvmlDeviceGetSamples)(d, NVML_GPU_UTILIZATION_SAMPLES, 0, &type, &n, NULL), NVML_SUCCESS);
    assert_in_range(n, want, 120);
    n = 130;
    assert_int_equal(SYM(nvmlDeviceGetSamples)(d, NVML_TOTAL_POWER_SAMPLES, 0, &type, &n, s),
                     NVML_ERROR_NOT_SUPPORTED);   /* only utilisation is simulated */
    assert_int_equal(SYM(nvmlDeviceGetSamples)(d, NVML_GPU_UTILIZATION_SAMPLES, 0, &type, NULL, s),
                     NVML_ERROR_INVALID_ARGUMENT);
}

/* ---- compute mode: permission path and cross-process visibility ---- */
static void test_compute_mode_cross_process(void **state)
{
    (void)state;
    nvmlDevice_t d = dev0();
    setenv("VGPU_FAKE_ROOT", "0", 1);
    assert_int_equal(SYM(nvmlDeviceSetComputeMode)(d, NVML_COMPUTEMODE_PROHIBITED), NVML_ERROR_NO_PERMISSION);
    setenv("VGPU_FAKE_ROOT", "1", 1);
    pid_t pid = fork();
    if (pid == 0) /* the child changes the machine... */
        _exit(SYM(nvmlDeviceSetComputeMode)(d, NVML_COMPUTEMODE_EXCLUSIVE_PROCESS) == NVML_SUCCESS ? 0 : 1);
    int status;
    waitpid(pid, &status, 0);
    assert_true(WIFEXITED(status));   /* a child killed by a signal has WEXITSTATUS 0 too */
    assert_int_equal(WEXITSTATUS(status), 0);
    nvmlComputeMode_t m;
    assert_int_equal(SYM(nvmlDeviceGetComputeMode)(d, &m), NVML_SUCCESS); /* ...the parent sees it */
    assert_int_equal(m, NVML_COMPUTEMODE_EXCLUSIVE_PROCESS);
    assert_int_equal(SYM(nvmlDeviceSetComputeMode)(d, NVML_COMPUTEMODE_DEFAULT), NVML_SUCCESS);
}

/* ---- MIG ---- */
static void test_mig_profiles_with_mig_off(void **state)
{
    (void)state;
    nvmlDevice_t d = dev0();
    unsigned cur = 9, pend = 9, max = 9;
    assert_int_equal(SYM(nvmlDeviceGetMigMode)(d, &cur, &pend), NVML_SUCCESS);
    assert_int_equal(cur, 0);
    assert_int_equal(pend, 0);
    assert_int_equal(SYM(nvmlDeviceGetMaxMigDeviceCount)(d, &max), NVML_SUCCESS);
    assert_int_equal(max, 0);
    nvmlGpuInstanceProfileInfo_t v1;
    assert_int_equal(SYM(nvmlDeviceGetGpuInstanceProfileInfo)(d, NVML_GPU_INSTANCE_PROFILE_1_SLICE, &v1), NVML_SUCCESS);
    assert_int_equal(v1.id, 19); /* index 0 is profile ID 19 on Hopper */
    assert_int_equal(v1.memorySizeMB, 9984);
    assert_int_equal(v1.instanceCount, 7);
    assert_int_equal(SYM(nvmlDeviceGetGpuInstanceProfileInfo)(d, NVML_GPU_INSTANCE_PROFILE_3_SLICE, &v1), NVML_SUCCESS);
    assert_int_equal(v1.id, 9);
    assert_int_equal(SYM(nvmlDeviceGetGpuInstanceProfileInfo)(d, 5, &v1), NVML_ERROR_NOT_SUPPORTED);
    assert_int_equal(SYM(nvmlDeviceGetGpuInstanceProfileInfo)(d, 17, &v1), NVML_ERROR_INVALID_ARGUMENT);
    nvmlGpuInstanceProfileInfo_v2_t v2 = {.version = nvmlGpuInstanceProfileInfo_v2};
    assert_int_equal(SYM(nvmlDeviceGetGpuInstanceProfileInfoV)(d, 7, &v2), NVML_SUCCESS);
    assert_string_equal(v2.name, "MIG 1g.10gb+me");
    assert_int_equal(v2.id, 20);
    v2.version = 0x01000098; /* wrong version: 2, not 25, as observed */
    assert_int_equal(SYM(nvmlDeviceGetGpuInstanceProfileInfoV)(d, 0, &v2), NVML_ERROR_INVALID_ARGUMENT);
    nvmlGpuInstanceProfileInfo_v3_t v3 = {.version = nvmlGpuInstanceProfileInfo_v3};
    assert_int_equal(SYM(nvmlDeviceGetGpuInstanceProfileInfoV)(d, 0, (nvmlGpuInstanceProfileInfo_v2_t *)&v3),
                     NVML_SUCCESS);
    assert_int_equal(v3.memorySizeMB, 9984);
    assert_int_equal(v3.version, 0); /* the v3 bug: version zeroed, no name */
    assert_string_equal(v3.name, "");
    nvmlGpuInstancePlacement_t pl[8];
    unsigned n = 0;
    assert_int_equal(SYM(nvmlDeviceGetGpuInstancePossiblePlacements_v2)(d, 19, NULL, &n), NVML_SUCCESS);
    assert_int_equal(n, 7);
    n = 8;
    assert_int_equal(SYM(nvmlDeviceGetGpuInstancePossiblePlacements_v2)(d, 9, pl, &n), NVML_SUCCESS);
    assert_int_equal(n, 2);
    assert_int_equal(pl[1].start, 4);
    assert_int_equal(pl[1].size, 4);
    n = 5;
    nvmlGpuInstance_t gis[8];
    assert_int_equal(SYM(nvmlDeviceGetGpuInstances)(d, 19, gis, &n), NVML_SUCCESS);
    assert_int_equal(n, 0);
    nvmlGpuInstance_t gi;
    assert_int_equal(SYM(nvmlDeviceCreateGpuInstance)(d, 19, &gi), NVML_ERROR_NOT_SUPPORTED); /* MIG off */
}

static void set_mig(nvmlDevice_t d, unsigned mode, nvmlReturn_t want_activation)
{
    nvmlReturn_t act = NVML_ERROR_UNKNOWN;
    assert_int_equal(SYM(nvmlDeviceSetMigMode)(d, mode, &act), NVML_SUCCESS);
    assert_int_equal(act, want_activation);
}

static void test_mig_mode_pending_until_reset(void **state)
{
    (void)state;
    nvmlDevice_t d = dev0();
    nvmlReturn_t act;
    setenv("VGPU_FAKE_ROOT", "0", 1);
    assert_int_equal(SYM(nvmlDeviceSetMigMode)(d, 1, &act), NVML_ERROR_NO_PERMISSION);
    setenv("VGPU_FAKE_ROOT", "1", 1);

    struct child c = ctl_start("hold", "0", "1048576", NULL);
    set_mig(d, NVML_DEVICE_MIG_ENABLE, NVML_ERROR_IN_USE); /* a process uses the GPU: pending */
    unsigned cur, pend;
    assert_int_equal(SYM(nvmlDeviceGetMigMode)(d, &cur, &pend), NVML_SUCCESS);
    assert_int_equal(cur, 0);
    assert_int_equal(pend, 1);
    assert_int_equal(ctl("reset", "0"), 6); /* reset refused while it runs */
    kill(c.pid, SIGTERM);
    assert_int_equal(ctl_wait(c), 0);
    assert_int_equal(ctl("reset", "0"), 0);
    assert_int_equal(SYM(nvmlDeviceGetMigMode)(d, &cur, &pend), NVML_SUCCESS);
    assert_int_equal(cur, 1);
    assert_int_equal(pend, 1);

    set_mig(d, NVML_DEVICE_MIG_DISABLE, NVML_SUCCESS); /* idle: immediate */
    assert_int_equal(SYM(nvmlDeviceGetMigMode)(d, &cur, &pend), NVML_SUCCESS);
    assert_int_equal(cur, 0);
}

static void test_mig_instances(void **state)
{
    (void)state;
    nvmlDevice_t d = dev0();
    set_mig(d, NVML_DEVICE_MIG_ENABLE, NVML_SUCCESS);

    /* without placements the driver fills from the top: 19,19,14 leave no room for a 3g (ID 9) */
    nvmlGpuInstance_t a, b, c, x;
    assert_int_equal(SYM(nvmlDeviceCreateGpuInstance)(d, 19, &a), NVML_SUCCESS);
    assert_int_equal(SYM(nvmlDeviceCreateGpuInstance)(d, 19, &b), NVML_SUCCESS);
    assert_int_equal(SYM(nvmlDeviceCreateGpuInstance)(d, 14, &c), NVML_SUCCESS);
    unsigned left = 9;
    assert_int_equal(SYM(nvmlDeviceGetGpuInstanceRemainingCapacity)(d, 9, &left), NVML_SUCCESS);
    assert_int_equal(left, 0);
    assert_int_equal(SYM(nvmlDeviceCreateGpuInstance)(d, 9, &x), NVML_ERROR_INSUFFICIENT_RESOURCES);
    nvmlGpuInstanceInfo_t info;
    assert_int_equal(SYM(nvmlGpuInstanceGetInfo)(a, &info), NVML_SUCCESS);
    assert_int_equal(info.placement.start, 6);
    assert_int_equal(info.id, 13); /* 1-slice GI at slot 6: swizzle ID 7 + 6 */
    assert_int_equal(info.profileId, 19);
    assert_ptr_equal(info.device, d);
    assert_int_equal(SYM(nvmlGpuInstanceGetInfo)(c, &info), NVML_SUCCESS);
    assert_int_equal(info.placement.start, 2);
    assert_int_equal(SYM(nvmlDeviceGetGpuInstanceRemainingCapacity)(d, 19, &left), NVML_SUCCESS);
    assert_int_equal(left, 3); /* slots 0, 1 and 4 */

    /* an explicit placement: taken vs free */
    nvmlGpuInstancePlacement_t p = {2, 2};
    assert_int_equal(SYM(nvmlDeviceCreateGpuInstanceWithPlacement)(d, 14, &p, &x), NVML_ERROR_INSUFFICIENT_RESOURCES);
    p.start = 0;
    assert_int_equal(SYM(nvmlDeviceCreateGpuInstanceWithPlacement)(d, 14, &p, &x), NVML_SUCCESS);
    unsigned n = 8;
    nvmlGpuInstance_t gis[8];
    assert_int_equal(SYM(nvmlDeviceGetGpuInstances)(d, 14, gis, &n), NVML_SUCCESS);
    assert_int_equal(n, 2);

    /* a compute instance makes a MIG device with its own UUID and the GI's memory */
    nvmlComputeInstanceProfileInfo_t cp;
    assert_int_equal(SYM(nvmlGpuInstanceGetComputeInstanceProfileInfo)(c, NVML_COMPUTE_INSTANCE_PROFILE_2_SLICE, 0, &cp),
                     NVML_SUCCESS);
    assert_int_equal(cp.sliceCount, 2);
    assert_int_equal(SYM(nvmlGpuInstanceGetComputeInstanceProfileInfo)(c, NVML_COMPUTE_INSTANCE_PROFILE_3_SLICE, 0, &cp),
                     NVML_ERROR_NOT_SUPPORTED);
    nvmlComputeInstance_t ci;
    assert_int_equal(SYM(nvmlGpuInstanceCreateComputeInstance)(c, 1, &ci), NVML_SUCCESS);
    nvmlComputeInstanceInfo_t cinfo;
    assert_int_equal(SYM(nvmlComputeInstanceGetInfo_v2)(ci, &cinfo), NVML_SUCCESS);
    assert_int_equal(cinfo.id, 0);
    assert_ptr_equal(cinfo.gpuInstance, c);
    unsigned max = 0, is_mig = 9, gid = 0;
    assert_int_equal(SYM(nvmlDeviceGetMaxMigDeviceCount)(d, &max), NVML_SUCCESS);
    assert_int_equal(max, 7);
    nvmlDevice_t mig, parent;
    assert_int_equal(SYM(nvmlDeviceGetMigDeviceHandleByIndex)(d, 0, &mig), NVML_SUCCESS);
    assert_int_equal(SYM(nvmlDeviceGetMigDeviceHandleByIndex)(d, 1, &parent), NVML_ERROR_NOT_FOUND);
    assert_int_equal(SYM(nvmlDeviceIsMigDeviceHandle)(mig, &is_mig), NVML_SUCCESS);
    assert_int_equal(is_mig, 1);
    assert_int_equal(SYM(nvmlDeviceGetGpuInstanceId)(mig, &gid), NVML_SUCCESS);
    assert_int_equal(gid, 4); /* 2-slot GI at start 2: 3 + 1 */
    assert_int_equal(SYM(nvmlDeviceGetDeviceHandleFromMigDeviceHandle)(mig, &parent), NVML_SUCCESS);
    assert_ptr_equal(parent, d);
    char uuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE], name[NVML_DEVICE_NAME_V2_BUFFER_SIZE];
    assert_int_equal(SYM(nvmlDeviceGetUUID)(mig, uuid, sizeof uuid), NVML_SUCCESS);
    assert_true(strncmp(uuid, "MIG-", 4) == 0);
    assert_int_equal(SYM(nvmlDeviceGetHandleByUUID)(uuid, &parent), NVML_SUCCESS);
    assert_ptr_equal(parent, mig);
    assert_int_equal(SYM(nvmlDeviceGetName)(mig, name, sizeof name), NVML_SUCCESS);
    assert_string_equal(name, "NVIDIA H100 80GB HBM3 MIG 2g.20gb");
    nvmlMemory_v2_t m2 = {.version = nvmlMemory_v2};
    assert_int_equal(SYM(nvmlDeviceGetMemoryInfo_v2)(mig, &m2), NVML_SUCCESS);
    assert_int_equal(m2.total, 20096ULL << 20);
    nvmlDeviceAttributes_t at;
    assert_int_equal(SYM(nvmlDeviceGetAttributes_v2)(mig, &at), NVML_SUCCESS);
    assert_int_equal(at.multiprocessorCount, 32);
    assert_int_equal(at.gpuInstanceSliceCount, 2);
    assert_int_equal(at.memorySizeMB, 20096);
    nvmlProcessUtilizationSample_t s[4];
    n = 4;
    assert_int_equal(SYM(nvmlDeviceGetProcessUtilization)(d, s, &n, 0), NVML_ERROR_NOT_SUPPORTED); /* N/A */
    nvmlComputeMode_t mode = NVML_COMPUTEMODE_EXCLUSIVE_PROCESS;
    assert_int_equal(SYM(nvmlDeviceSetComputeMode)(d, mode), NVML_ERROR_NOT_SUPPORTED);

    /* a process on the MIG device: the CI and GI are in use */
    char place[32];
    snprintf(place, sizeof place, "0:%u:0", gid);
    struct child h = ctl_start("hold", place, "4096", NULL);
    n = 4;
    nvmlProcessInfo_v2_t pr[4];
    assert_int_equal(SYM(nvmlDeviceGetComputeRunningProcesses_v3)(mig, &n, pr), NVML_SUCCESS);
    assert_int_equal(n, 1);
    assert_int_equal(pr[0].gpuInstanceId, 4);
    assert_int_equal(pr[0].computeInstanceId, 0);
    assert_int_equal(SYM(nvmlComputeInstanceDestroy)(ci), NVML_ERROR_IN_USE);
    kill(h.pid, SIGKILL);
    ctl_wait(h);
    assert_int_equal(SYM(nvmlGpuInstanceDestroy)(c), NVML_ERROR_IN_USE); /* its CI remains */
    assert_int_equal(SYM(nvmlComputeInstanceDestroy)(ci), NVML_SUCCESS);
    assert_int_equal(SYM(nvmlComputeInstanceGetInfo_v2)(ci, &cinfo), NVML_ERROR_INVALID_ARGUMENT); /* stale */
    assert_int_equal(SYM(nvmlGpuInstanceDestroy)(c), NVML_SUCCESS);
    assert_int_equal(SYM(nvmlGpuInstanceDestroy)(a), NVML_SUCCESS);
    assert_int_equal(SYM(nvmlGpuInstanceDestroy)(b), NVML_SUCCESS);
    assert_int_equal(SYM(nvmlGpuInstanceDestroy)(x), NVML_SUCCESS);
    p.start = 4; /* everything free again: a 3g fits at 4 */
    assert_int_equal(SYM(nvmlDeviceCreateGpuInstanceWithPlacement)(d, 9, &p, &x), NVML_SUCCESS);
    assert_int_equal(SYM(nvmlGpuInstanceDestroy)(x), NVML_SUCCESS);
    set_mig(d, NVML_DEVICE_MIG_DISABLE, NVML_SUCCESS);
}

/* ---- injected failures: each in a fresh process (this binary re-executed) ---- */
static int child_init(void)
{
    load();
    nvmlReturn_t rc = SYM(nvmlInit_v2)();
    if (rc != NVML_SUCCESS)
        return (int)rc;
    unsigned n = 0;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    SYM(nvmlDeviceGetCount_v2)(&n);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    long ms = (t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000;
    nvmlDevice_t d;
    SYM(nvmlDeviceGetHandleByIndex_v2)(0, &d);
    char name[96];
    nvmlReturn_t nr = SYM(nvmlDeviceGetName)(d, name, sizeof name);
    if (nr != NVML_SUCCESS)
        return 100 + (int)nr;
    return ms >= 250 ? 99 : 0;
}

static int run_child(const char *fail)
{
    pid_t pid = fork();
    if (pid == 0) {
        if (fail)
            setenv("VGPU_FAKE_FAIL", fail, 1);
        execl("/proc/self/exe", "test_fakenvml", "--child-init", (char *)NULL);
        _exit(127);
    }
    int status;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static void test_failure_injection(void **state)
{
    (void)state;
    assert_int_equal(run_child(NULL), 0);
    assert_int_equal(run_child("nvml_init=driver_not_loaded"), NVML_ERROR_DRIVER_NOT_LOADED);
    assert_int_equal(run_child("nvml_init=lib_version_mismatch"), NVML_ERROR_LIB_RM_VERSION_MISMATCH);
    assert_int_equal(run_child("nvml_init=no_permission"), NVML_ERROR_NO_PERMISSION);
    assert_int_equal(run_child("gpu_lost=0"), 100 + NVML_ERROR_GPU_IS_LOST);
    assert_int_equal(run_child("slow=nvmlDeviceGetCount_v2:300"), 99);
    /* slow_while: slow only while its path exists */
    char spec[4400], flag[4096];
    const char *tmp = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    snprintf(flag, sizeof flag, "%s/fakenvml-slow-%d", tmp, (int)getpid());
    unlink(flag);
    snprintf(spec, sizeof spec, "slow=nvmlDeviceGetCount_v2:300,slow_while=%s", flag);
    assert_int_equal(run_child(spec), 0);
    int fd = open(flag, O_WRONLY | O_CREAT, 0600);
    assert_true(fd >= 0);
    close(fd);
    assert_int_equal(run_child(spec), 99);
    unlink(flag);
    assert_int_equal(run_child("bogus=1"), NVML_ERROR_DRIVER_NOT_LOADED); /* and a message on stderr */

    /* a GPU lost at run time, seen by this (already initialised) process */
    nvmlDevice_t d = dev0();
    char name[96];
    assert_int_equal(ctl("lose", "0"), 0);
    assert_int_equal(SYM(nvmlDeviceGetName)(d, name, sizeof name), NVML_ERROR_GPU_IS_LOST);
    assert_int_equal(ctl("find", "0"), 0);
    assert_int_equal(SYM(nvmlDeviceGetName)(d, name, sizeof name), NVML_SUCCESS);
}

/* Runs tests/progs/oversub_probe ARGS (the fake libcuda's traffic over the link); its status. */
static int probe(const char *a1, const char *a2, const char *a3, const char *a4)
{
    pid_t pid = fork();
    if (pid == 0) {
        char path[4200];
        snprintf(path, sizeof path, "%s/../tests/progs/oversub_probe", libdir);
        setenv("LD_LIBRARY_PATH", libdir, 1);
        int devnull = open("/dev/null", O_WRONLY);
        if (devnull >= 0)
            dup2(devnull, 1);
        execl(path, "oversub_probe", a1, a2, a3, a4, (char *)NULL);
        _exit(127);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

/* NVML's PCIe byte counters (fields 197/198): fed by managed migrations, 64-bit by default,
 * 32-bit or absent on request (VGPU_FAKE_PCIE_COUNTER), per field statuses. */
static void test_pcie_counters(void **state)
{
    (void)state;
    vgpu_nvmlDeviceGetFieldValues_fn get = SYM(nvmlDeviceGetFieldValues);
    nvmlDevice_t d = dev0();
    nvmlFieldValue_t f[3] = { { .fieldId = NVML_FI_DEV_PCIE_COUNT_TX_BYTES },
                              { .fieldId = NVML_FI_DEV_PCIE_COUNT_RX_BYTES },
                              { .fieldId = 999 } };
    assert_int_equal(get(d, 3, NULL), NVML_ERROR_INVALID_ARGUMENT);
    assert_int_equal(get(d, 3, f), NVML_SUCCESS);
    assert_int_equal(f[0].nvmlReturn, NVML_SUCCESS);
    assert_int_equal(f[0].valueType, NVML_VALUE_TYPE_UNSIGNED_LONG_LONG);
    assert_int_equal(f[1].nvmlReturn, NVML_SUCCESS);
    assert_int_equal(f[2].nvmlReturn, NVML_ERROR_NOT_SUPPORTED);
    unsigned long long tx = f[0].value.ullVal, rx = f[1].value.ullVal;
    /* 1 GiB of managed memory made resident, sent back, made resident again */
    assert_int_equal(probe("managed", "1G", "prefetch", "evict"), 0);
    assert_int_equal(get(d, 2, f), NVML_SUCCESS);
    assert_int_equal(f[0].value.ullVal - tx, 1ULL << 30);
    assert_int_equal(f[1].value.ullVal - rx, 1ULL << 30);
    unsigned long long full = f[1].value.ullVal;
    setenv("VGPU_FAKE_PCIE_COUNTER", "32", 1);
    assert_int_equal(get(d, 2, f), NVML_SUCCESS);
    assert_int_equal(f[1].valueType, NVML_VALUE_TYPE_UNSIGNED_INT);
    assert_int_equal(f[1].value.uiVal, (unsigned)full);
    setenv("VGPU_FAKE_PCIE_COUNTER", "none", 1);
    assert_int_equal(get(d, 2, f), NVML_SUCCESS);   /* the call succeeds; each field says */
    assert_int_equal(f[0].nvmlReturn, NVML_ERROR_NOT_SUPPORTED);
    assert_int_equal(f[1].nvmlReturn, NVML_ERROR_NOT_SUPPORTED);
    unsetenv("VGPU_FAKE_PCIE_COUNTER");
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* PID's busy time on GPU 0 as `fakegpu-ctl show` gives it: its live records' plus its ended
 * ones'. *live: whether a live record of it was listed. */
static long long shown_busy(pid_t pid, bool *live)
{
    char cmd[4300];
    snprintf(cmd, sizeof cmd, "'%s/fakegpu-ctl' show", libdir);
    FILE *f = popen(cmd, "r");
    assert_non_null(f);
    static char buf[1 << 20];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = 0;
    assert_int_equal(pclose(f), 0);
    json_object *root = json_tokener_parse(buf), *gpus, *g0, *list;
    assert_non_null(root);
    assert_true(json_object_object_get_ex(root, "gpus", &gpus));
    g0 = json_object_array_get_idx(gpus, 0);
    long long busy = 0;
    *live = false;
    const char *keys[2] = { "processes", "ended_processes" };
    for (int k = 0; k < 2; k++) {
        if (!json_object_object_get_ex(g0, keys[k], &list))
            continue;
        for (size_t i = 0; i < json_object_array_length(list); i++) {
            json_object *e = json_object_array_get_idx(list, i), *v;
            if (!json_object_object_get_ex(e, "pid", &v) || json_object_get_int(v) != pid)
                continue;
            json_object_object_get_ex(e, "busy_ns", &v);
            busy += json_object_get_int64(v);
            *live |= k == 0;
        }
    }
    json_object_put(root);
    return busy;
}

/* A process's busy time never goes down, not even when it ends between two reads: its record is
 * freed at exit, and the busy time went with it (core_preempt.sh printed "used -35 %" for a job
 * that ended inside its window). */
static void test_busy_time_outlives_the_process(void **state)
{
    (void)state;
    struct child c = ctl_start("busy", "0", "3", NULL);   /* long enough to be seen under ASan */
    bool live = false;
    long long seen = 0;
    double deadline = now_ms() + 10000;
    while (now_ms() < deadline && !(live && seen > 0)) {
        seen = shown_busy(c.pid, &live);
        nanosleep(&(struct timespec){ 0, 20000000 }, NULL);
    }
    assert_true(live && seen > 0);               /* seen busy while it ran */
    assert_int_equal(ctl_wait(c), 0);
    long long after = shown_busy(c.pid, &live);
    assert_false(live);                          /* ended: no live record */
    assert_true(after >= seen);                  /* and its busy time is still there */
}

/* A process SIGKILLed while holding the state's lock must not wedge the others. */
static void test_lock_owner_killed(void **state)
{
    (void)state;
    struct child c = ctl_start("hang-locked", NULL, NULL, NULL);
    kill(c.pid, SIGKILL);
    assert_int_equal(ctl_wait(c), 128 + SIGKILL);
    unsigned n = 0;
    assert_int_equal(SYM(nvmlDeviceGetCount_v2)(&n), NVML_SUCCESS); /* would hang forever */
    assert_int_equal(n, 1);
    nvmlMemory_v2_t m2 = {.version = nvmlMemory_v2};
    assert_int_equal(SYM(nvmlDeviceGetMemoryInfo_v2)(dev0(), &m2), NVML_SUCCESS);
}

/* mig_create_fail_after=1: the second GPU instance cannot be created (fresh process). */
static int child_mig(void)
{
    load();
    setenv("VGPU_FAKE_ROOT", "1", 1);
    if (SYM(nvmlInit_v2)() != NVML_SUCCESS)
        return 1;
    nvmlDevice_t d;
    SYM(nvmlDeviceGetHandleByIndex_v2)(0, &d);
    nvmlReturn_t act;
    if (SYM(nvmlDeviceSetMigMode)(d, 1, &act) != NVML_SUCCESS || act != NVML_SUCCESS)
        return 2;
    nvmlGpuInstance_t a, b;
    int rc = 0;
    if (SYM(nvmlDeviceCreateGpuInstance)(d, 19, &a) != NVML_SUCCESS)
        rc = 3;
    else if (SYM(nvmlDeviceCreateGpuInstance)(d, 19, &b) != NVML_ERROR_INSUFFICIENT_RESOURCES)
        rc = 4;
    SYM(nvmlDeviceSetMigMode)(d, 0, &act); /* clears the instances */
    return rc;
}

static void test_mig_create_fail_after(void **state)
{
    (void)state;
    pid_t pid = fork();
    if (pid == 0) {
        setenv("VGPU_FAKE_FAIL", "mig_create_fail_after=1", 1);
        execl("/proc/self/exe", "test_fakenvml", "--child-mig", (char *)NULL);
        _exit(127);
    }
    int status;
    waitpid(pid, &status, 0);
    assert_true(WIFEXITED(status));   /* a child killed by a signal has WEXITSTATUS 0 too */
    assert_int_equal(WEXITSTATUS(status), 0);
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "--child-init") == 0)
        return child_init();
    if (argc > 1 && strcmp(argv[1], "--child-mig") == 0)
        return child_mig();
    load();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_init_refcount_and_strings),
        cmocka_unit_test(test_identity),
        cmocka_unit_test(test_memory_versions),
        cmocka_unit_test(test_processes_two_call_and_reaping),
        cmocka_unit_test_teardown(test_processes_in_pid_namespace, kill_ns_unshare),
        cmocka_unit_test(test_utilisation_samples),
        cmocka_unit_test(test_device_samples),
        cmocka_unit_test(test_compute_mode_cross_process),
        cmocka_unit_test(test_mig_profiles_with_mig_off),
        cmocka_unit_test(test_mig_mode_pending_until_reset),
        cmocka_unit_test(test_mig_instances),
        cmocka_unit_test(test_failure_injection),
        cmocka_unit_test(test_lock_owner_killed),
        cmocka_unit_test(test_mig_create_fail_after),
        cmocka_unit_test(test_pcie_counters),
        cmocka_unit_test(test_busy_time_outlives_the_process),
    };
    return cmocka_run_group_tests_name("fakenvml", tests, setup, teardown);
}
