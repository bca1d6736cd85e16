/* state.c: finding, creating and mapping the state file; its lock; time; failures.
 * See fakestate.h for the protocol. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "fs_internal.h"

static pthread_mutex_t open_lock = PTHREAD_MUTEX_INITIALIZER;
static struct fs_state *mapped;
static char error_text[512];
static struct fs_failures failures;   /* process view: scenario + VGPU_FAKE_FAIL */

const char *fs_error(void) { return error_text; }
struct fs_state *fs_state(void) { return mapped; }
const struct fs_failures *fs_failures(void) { return &failures; }

static void set_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void set_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(error_text, sizeof error_text, fmt, ap);
    va_end(ap);
}

static pthread_mutex_t *state_mutex(struct fs_state *st)
{
    _Static_assert(sizeof(pthread_mutex_t) <= sizeof st->lock_storage, "lock_storage too small");
    return (pthread_mutex_t *)(void *)st->lock_storage;
}

/* Shared mode (VGPU_FAKE_SHARED=NAME): one machine for every user, as a real GPU is. The file
 * is DIR/NAME.state, mode 0666, in DIR = VGPU_FAKE_SHARED_DIR or /tmp/vgpu-fakegpu, a sticky
 * 1777 directory (created so when missing) owned by root or the caller. */
static bool shared_mode;

static bool shared_name_ok(const char *s)
{
    if (!*s || *s == '.' || strlen(s) > 64)
        return false;
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') || *s == '.' ||
              *s == '_' || *s == '-'))
            return false;
    return true;
}

static bool shared_path(char *out, size_t len, const char *name)
{
    const char *dir = getenv("VGPU_FAKE_SHARED_DIR");
    if (!dir || !*dir)
        dir = "/tmp/vgpu-fakegpu";
    if (!shared_name_ok(name)) {
        set_error("VGPU_FAKE_SHARED='%s' is not a name: use 1 to 64 letters, digits, '.', '_' or '-'", name);
        return false;
    }
    if (mkdir(dir, 01777) == 0)
        chmod(dir, 01777);              /* the umask took bits away */
    struct stat sb;
    if (lstat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode) || (sb.st_mode & 07777) != 01777 ||
        (sb.st_uid != 0 && sb.st_uid != getuid())) {
        set_error("the shared simulated-GPU directory %s is not a directory of mode 1777 owned by root or you; "
                  "remove it or set VGPU_FAKE_SHARED_DIR", dir);
        return false;
    }
    snprintf(out, len, "%s/%s.state", dir, name);
    return true;
}

/* VGPU_FAKE_SHARED (see above), else VGPU_FAKE_STATE, else
 * /tmp/vgpu-fake-<uid>-<hash of the scenario path>.state */
static void state_path(char *out, size_t len, const char *scenario)
{
    const char *env = getenv("VGPU_FAKE_STATE");
    if (env && *env) {
        snprintf(out, len, "%s", env);
        return;
    }
    unsigned long h = 5381;
    for (const char *p = scenario ? scenario : "(builtin)"; *p; p++)
        h = h * 33 + (unsigned char)*p;
    snprintf(out, len, "/tmp/vgpu-fake-%u-%08lx.state", (unsigned)getuid(), h & 0xffffffffUL);
}

static bool init_mutex(struct fs_state *st)
{
    pthread_mutexattr_t a;
    pthread_mutexattr_init(&a);
    pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
    pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
    int rc = pthread_mutex_init(state_mutex(st), &a);
    pthread_mutexattr_destroy(&a);
    return rc == 0;
}

/* Builds the state from the scenario in a temporary file next to path and links it into place.
 * Losing the race to another process is fine: its file is as good as ours. */
static bool create_state(const char *path, const char *scenario)
{
    char tmp[4200];
    /* By thread, not only by process: the fake libcuda and libnvidia-ml each carry this code, and
     * one process can create the state from both at once (libvgpu.so starts NVML on a thread of
     * its own beside cuInit). */
    snprintf(tmp, sizeof tmp, "%s.tmp.%d.%ld", path, (int)getpid(), (long)syscall(SYS_gettid));
    int fd = open(tmp, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0) {
        set_error("cannot create the simulated GPU state %s: %s (set VGPU_FAKE_STATE to a writable path)", tmp,
                  strerror(errno));
        return false;
    }
    bool ok = false;
    struct fs_state *st = MAP_FAILED;
    if ((shared_mode && fchmod(fd, 0666) != 0) || ftruncate(fd, sizeof *st) != 0) {
        set_error("cannot size %s: %s", tmp, strerror(errno));
        goto out;
    }
    st = mmap(NULL, sizeof *st, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (st == MAP_FAILED) {
        set_error("cannot map %s: %s", tmp, strerror(errno));
        goto out;
    }
    char err[400];
    if (!fs_scenario_load(scenario, st, err, sizeof err)) {
        set_error("%s", err);
        goto out;
    }
    if (!init_mutex(st)) {
        set_error("cannot initialise the lock in %s", tmp);
        goto out;
    }
    st->host_pidns = fs_proc_pidns(0);
    st->loaded_ns = fs_now_ns();
    st->magic = FS_MAGIC;
    st->layout_version = FS_LAYOUT_VERSION;
    st->size = sizeof *st;
    /* link() never replaces a file another process published first; where hard links are
     * not supported, rename() (which can only lose a race nobody has mapped yet). */
    if (link(tmp, path) != 0 && errno != EEXIST) {
        struct stat sb;
        if ((errno != EPERM && errno != EOPNOTSUPP) || (stat(path, &sb) != 0 && rename(tmp, path) != 0)) {
            set_error("cannot publish the simulated GPU state %s: %s", path, strerror(errno));
            goto out;
        }
    }
    ok = true;
out:
    if (st != MAP_FAILED)
        munmap(st, sizeof *st);
    close(fd);
    unlink(tmp);
    return ok;
}

static struct fs_state *map_state(const char *path)
{
    int fd = open(path, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) {
        if (errno != ENOENT)
            set_error("cannot open the simulated GPU state %s: %s", path, strerror(errno));
        return NULL;
    }
    struct stat sb;
    struct fs_state *st = NULL;
    if (fstat(fd, &sb) == 0 && (size_t)sb.st_size == sizeof *st) {
        st = mmap(NULL, sizeof *st, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (st == MAP_FAILED)
            st = NULL;
    }
    close(fd);
    if (st && (st->magic != FS_MAGIC || st->layout_version != FS_LAYOUT_VERSION || st->size != sizeof *st)) {
        munmap(st, sizeof *st);
        st = NULL;
    }
    if (!st)
        errno = EPROTO;
    return st;
}

struct fs_state *fs_open(void)
{
    pthread_mutex_lock(&open_lock);
    if (mapped) {
        pthread_mutex_unlock(&open_lock);
        return mapped;
    }
    const char *scenario = getenv("VGPU_FAKE_SCENARIO");
    if (scenario && !*scenario)
        scenario = NULL;
    char path[4096];
    const char *shared = getenv("VGPU_FAKE_SHARED");
    shared_mode = shared && *shared;
    struct fs_state *st = NULL;
    if (shared_mode) {
        if (!shared_path(path, sizeof path, shared)) {
            pthread_mutex_unlock(&open_lock);
            return NULL;
        }
    } else {
        state_path(path, sizeof path, scenario);
    }
    for (int attempt = 0; attempt < 3 && !st; attempt++) {
        st = map_state(path);
        if (st)
            break;
        if (errno == EPROTO) {
            /* A state file of another layout (an older build): start over. */
            unlink(path);
        }
        if (!create_state(path, scenario))
            break;
    }
    if (st) {
        failures = st->fail;
        const char *spec = getenv("VGPU_FAKE_FAIL");
        char err[300];
        if (spec && *spec && !fs_failures_parse(spec, &failures, st, err, sizeof err)) {
            set_error("VGPU_FAKE_FAIL: %s", err);
            munmap(st, sizeof *st);
            st = NULL;
        }
    } else if (!error_text[0]) {
        set_error("cannot open the simulated GPU state %s", path);
    }
    mapped = st;
    pthread_mutex_unlock(&open_lock);
    return st;
}

void fs_lock(void)
{
    int rc = pthread_mutex_lock(state_mutex(mapped));
    if (rc == EOWNERDEAD)
        pthread_mutex_consistent(state_mutex(mapped));
}

void fs_unlock(void) { pthread_mutex_unlock(state_mutex(mapped)); }

void fs_maybe_slow(const char *fn)
{
    /* slow_while: a test makes the calls slow from a moment of its choosing (a job's command
     * creating the file as it ends), not from the process's start. */
    if (failures.slow_while[0] && failures.nslow && access(failures.slow_while, F_OK) != 0)
        return;
    for (unsigned i = 0; i < failures.nslow; i++) {
        if (strcmp(failures.slow[i].fn, fn) == 0) {
            struct timespec ts = {failures.slow[i].ms / 1000, (long)(failures.slow[i].ms % 1000) * 1000000L};
            while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
            }
        }
    }
}

uint64_t fs_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

uint64_t fs_wall_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000ULL + (uint64_t)ts.tv_nsec / 1000;
}

uint64_t fs_mono_to_wall_us(uint64_t mono_ns)
{
    /* One offset per process: reading both clocks on every call made the same instant come out
     * a microsecond apart from one call to the next, so a sample already seen could look new. */
    static _Atomic int64_t offset_us;
    static atomic_bool have_offset;
    if (!atomic_load(&have_offset)) {
        atomic_store(&offset_us, (int64_t)fs_wall_us() - (int64_t)(fs_now_ns() / 1000));
        atomic_store(&have_offset, true);
    }
    return (uint64_t)((int64_t)(mono_ns / 1000) + atomic_load(&offset_us));
}

bool fs_gpu_lost(unsigned gpu)
{
    return gpu < FS_MAX_GPUS && (mapped->gpu[gpu].lost || (failures.gpu_lost_mask >> gpu) & 1u);
}
