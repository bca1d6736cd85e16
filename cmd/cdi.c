/* vgpu cdi: Container Device Interface specs, so that container engines start limited containers. */
static const char usage[] =
    "usage: vgpu cdi generate [--gpu SEL] [--mem SIZE|PCT%|REQUEST:LIMIT] [--core PCT]\n"
    "                         [--name NAME]\n"
    "                         [--library PATH] [--output DIR] [--cdi-version V] [--annotations]\n"
    "       vgpu cdi validate FILE\n"
    "\n"
    "generate writes a CDI spec (JSON, kind vgpu.dev/gpu) with one device, NAME, whose\n"
    "container edits preload libvgpu.so with the limits, so that podman, Docker 25+ (CDI on),\n"
    "containerd and CRI-O start a limited container when asked for it beside NVIDIA's own\n"
    "device:\n"
    "    podman run --device nvidia.com/gpu=0 --device vgpu.dev/gpu=NAME IMAGE CMD\n"
    "The device carries: LD_PRELOAD and the limits (HAMi-core's variables, which libvgpu.so\n"
    "reads, see libvgpu(7)); libvgpu.so bind-mounted read-only; a tmpfs of its own at\n"
    "/run/vgpu, the per-container state (the job region, created by the container's first CUDA\n"
    "process), so every container started with NAME gets the whole limit; and the machine-wide\n"
    "directory (/run/vgpu-machine, read-write), so that the GPU-time caps of containers and\n"
    "host jobs add up, and through which containers reach the arbiter's socket.\n"
    "The spec's cdiVersion is the lowest its fields need (0.4.0 for the tmpfs mount's type;\n"
    "0.5.0 when NAME starts with a digit; 0.6.0 with --annotations), so that older engines read\n"
    "it: podman 4.3 (Debian 12) reads up to 0.5.0. See vgpu-cdi(1) for which engine reads\n"
    "which.\n"
    "\n"
    "  --gpu SEL      the GPUs the container will be given, in the order NVIDIA's devices are\n"
    "                 requested (they are its CUDA devices 0, 1, ...): an index, a UUID, a\n"
    "                 comma list or 'all' (default: all). Used to check the limits and to\n"
    "                 resolve PCT%\n"
    "  --mem SIZE     memory limit on each of the container's GPUs: 4G, 512MiB ... (or PCT% of\n"
    "                 each selected GPU's memory)\n"
    "  --mem REQUEST:LIMIT  lent memory, as vgpu run's (20G:100G): REQUEST promised, LIMIT\n"
    "                 the cap (CUDA_DEVICE_MEMORY_REQUEST_i beside CUDA_DEVICE_MEMORY_LIMIT_i)\n"
    "  --core PCT     cap the container's share of GPU time at PCT percent (1-100)\n"
    "  --name NAME    the device name (letters, digits, '_', '.', '-', a letter or digit first\n"
    "                 and last; default from the limits, e.g. mem-4GiB-core-30). Names are per\n"
    "                 allocation size: every device name must be unique among the vgpu.dev/gpu\n"
    "                 specs an engine loads\n"
    "  --library PATH the host's libvgpu.so to mount (default: the one vgpu run would preload;\n"
    "                 give the installed copy, e.g. /usr/local/lib/vgpu/libvgpu.so). It must be\n"
    "                 this vgpu's libvgpu.so: every container would preload it\n"
    "  --output DIR   write DIR/vgpu.dev-gpu_NAME.json (atomically, 0644) instead of printing\n"
    "                 the spec; /etc/cdi or /var/run/cdi are where engines look\n"
    "  --cdi-version V  write cdiVersion V (0.3.0 ... 1.1.0) instead of the lowest;\n"
    "                 refused when V cannot carry a field the spec has, saying which\n"
    "  --annotations  describe the device in annotations (its GPUs' UUIDs and the limits in\n"
    "                 exact numbers); they need cdiVersion 0.6.0, which podman 4.3 cannot read\n"
    "  --help         show this help\n"
    "Each option may be given once.\n"
    "\n"
    "validate checks FILE as a CDI loader would: known fields only, the required ones, names,\n"
    "and a cdiVersion that is known and carries every field used (each field that needs a later\n"
    "version is named); and that every library a device preloads is mounted by the spec from a\n"
    "host file that is this vgpu's libvgpu.so (a regular ELF shared object).\n"
    "\n"
    "A container's own LD_PRELOAD is overridden by the spec's (the engine puts\n"
    "the spec's last).\n"
    "\n"
    "Exit status: 0 written, or valid; 1 the file could not be written, or FILE is not a valid\n"
    "spec; 2 bad usage (an unknown GPU, a limit larger than a GPU, a library that is not\n"
    "libvgpu.so, a --cdi-version that cannot carry the spec); 3-5 NVML could not be used to\n"
    "check the GPUs.\n";

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cmd.h"
#include "cdi/rules.h"
#include "cdi/validate.h"
#include "run/libcheck.h"
#include "run/library.h"
#include "vgpu/exitcode.h"
#include "vgpu/gpu.h"
#include "vgpu/json.h"
#include "vgpu/log.h"
#include "vgpu/machinedir.h"
#include "vgpu/nvml.h"
#include "vgpu/region.h"
#include "vgpu/statedir.h"
#include "vgpu/units.h"

extern const struct vgpu_cmd vgpu_cmd_cdi;

/* The CDI version rules live in cdi/rules.c: the spec carries the lowest version its fields
 * need (issue 29: podman 4.3 refused 1.1.0 as "unresolvable"). The kind is vendor.tld/class. */
#define CDI_KIND "vgpu.dev/gpu"
/* Inside the container. The state is a tmpfs per container (its own budget); the library is a
 * read-only bind of the host's file. */
#define CTR_LIBRARY "/usr/lib/vgpu/libvgpu.so"
#define CTR_STATE "/run/vgpu"
#define CTR_REGION CTR_STATE "/container.region"

static const struct option options[] = {
    { "gpu", required_argument, NULL, 'g' },
    { "mem", required_argument, NULL, 'm' },
    { "core", required_argument, NULL, 'c' },
    { "name", required_argument, NULL, 'n' },
    { "library", required_argument, NULL, 'l' },
    { "output", required_argument, NULL, 'o' },
    { "cdi-version", required_argument, NULL, 'V' },
    { "annotations", no_argument, NULL, 'a' },
    VGPU_OPTION_HELP,
    VGPU_OPTION_END,
};

static const struct vgpu_opt_doc optdocs[] = {
    { "gpu", VGPU_ARG_GPU, NULL },
    { "mem", VGPU_ARG_SIZE, NULL },
    { "core", VGPU_ARG_PERCENT, NULL },
    { "name", VGPU_ARG_OTHER, NULL },
    { "library", VGPU_ARG_FILE, NULL },
    { "output", VGPU_ARG_DIR, NULL },
    { "cdi-version", VGPU_ARG_WORD, "0.3.0 0.4.0 0.5.0 0.6.0 0.7.0 0.8.0 1.0.0 1.1.0" },
    { "annotations", VGPU_ARG_NONE, NULL },
    { NULL, 0, NULL },
};

static const struct vgpu_verb verbs[] = {
    { "generate", "write a CDI spec whose device runs a container under vgpu's limits", VGPU_ARG_NONE, NULL },
    { "validate", "check a CDI spec against CDI's version rules, and the library it preloads", VGPU_ARG_FILE, NULL },
    { NULL, NULL, 0, NULL },
};

/* "4GiB", "1536MiB", "123456789B": exact, so two sizes never get one name. */
static void size_word(uint64_t b, char *buf, size_t len)
{
    static const char *const unit[] = { "B", "KiB", "MiB", "GiB", "TiB" };
    unsigned u = 0;
    while (u < 4 && b && b % 1024 == 0) {
        b /= 1024;
        u++;
    }
    snprintf(buf, len, "%llu%s", (unsigned long long)b, unit[u]);
}

static void env_add(struct json_object *env, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void env_add(struct json_object *env, const char *fmt, ...)
{
    char buf[4400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    json_object_array_add(env, json_object_new_string(buf));
}

static struct json_object *mount(const char *host, const char *ctr, const char *type, const char *const *opts)
{
    struct json_object *m = json_object_new_object();
    json_object_object_add(m, "hostPath", json_object_new_string(host));
    json_object_object_add(m, "containerPath", json_object_new_string(ctr));
    if (type)
        json_object_object_add(m, "type", json_object_new_string(type));
    struct json_object *o = json_object_new_array();
    for (; *opts; opts++)
        json_object_array_add(o, json_object_new_string(*opts));
    json_object_object_add(m, "options", o);
    return m;
}

/* HAMi-core's size form where it is exact ("4096m", what its device plugin writes), else bytes. */
static void hami_size(uint64_t b, char *buf, size_t len)
{
    if (b % (1024 * 1024) == 0)
        snprintf(buf, len, "%llum", (unsigned long long)(b / (1024 * 1024)));
    else
        snprintf(buf, len, "%llu", (unsigned long long)b);
}

struct cdi_req {
    unsigned ngpu;
    const struct vgpu_gpu *gpu[VGPU_REGION_MAX_DEVICES];
    uint64_t mem[VGPU_REGION_MAX_DEVICES];   /* 0: none */
    uint64_t req[VGPU_REGION_MAX_DEVICES];   /* --mem REQUEST:LIMIT's REQUEST; == mem: nothing lent */
    unsigned core;                           /* 0: none */
    char name[64];
    char library[PATH_MAX];
    bool annotate;                           /* --annotations */
};

static struct json_object *build_spec(const struct cdi_req *q)
{
    struct json_object *spec = json_object_new_object();
    /* First, as CDI's own examples have it; the caller sets the version from the fields this spec
     * ends up with (replacing a key keeps its place). */
    json_object_object_add(spec, "cdiVersion", json_object_new_string(cdi_version_name(cdi_version_earliest())));
    json_object_object_add(spec, "kind", json_object_new_string(CDI_KIND));
    struct json_object *dev = json_object_new_object();
    json_object_object_add(dev, "name", json_object_new_string(q->name));
    char buf[4096] = "";
    if (q->annotate) {
        /* Annotations say what the device is, for people and tools (cdi list): exact numbers.
         * Only when asked: they need CDI 0.6.0, which podman 4.3 and other CDI 0.5 readers refuse. */
        struct json_object *ann = json_object_new_object();
        json_object_object_add(ann, "vgpu.dev/generated-by", json_object_new_string("vgpu " VGPU_VERSION));
        json_object_object_add(spec, "annotations", ann);
        struct json_object *dann = json_object_new_object();
        for (unsigned i = 0; i < q->ngpu; i++) {
            size_t l = strlen(buf);
            snprintf(buf + l, sizeof buf - l, "%s%s", i ? "," : "", q->gpu[i]->uuid);
        }
        json_object_object_add(dann, "vgpu.dev/gpus", json_object_new_string(buf));
        buf[0] = 0;
        for (unsigned i = 0; i < q->ngpu; i++) {
            size_t l = strlen(buf);
            snprintf(buf + l, sizeof buf - l, "%s%llu", i ? "," : "", (unsigned long long)q->mem[i]);
        }
        json_object_object_add(dann, "vgpu.dev/memory-limit-bytes", json_object_new_string(buf));
        /* Only for lent memory, so that the annotations of other devices stay as they were. */
        bool lent = false;
        buf[0] = 0;
        for (unsigned i = 0; i < q->ngpu; i++) {
            size_t l = strlen(buf);
            snprintf(buf + l, sizeof buf - l, "%s%llu", i ? "," : "", (unsigned long long)q->req[i]);
            lent = lent || q->req[i] < q->mem[i];
        }
        if (lent)
            json_object_object_add(dann, "vgpu.dev/memory-request-bytes", json_object_new_string(buf));
        snprintf(buf, sizeof buf, "%u", q->core);
        json_object_object_add(dann, "vgpu.dev/core-limit-percent", json_object_new_string(buf));
        json_object_object_add(dev, "annotations", dann);
    }

    struct json_object *edits = json_object_new_object();
    struct json_object *env = json_object_new_array();
    env_add(env, "LD_PRELOAD=%s", CTR_LIBRARY);
    /* Per CUDA device of the container (the GPUs in --gpu order). HAMi's names: libvgpu.so
     * reads them when VGPU_REGION is absent, and so would HAMi-core's library. */
    for (unsigned i = 0; i < q->ngpu; i++) {
        if (q->mem[i]) {
            hami_size(q->mem[i], buf, sizeof buf);
            env_add(env, "CUDA_DEVICE_MEMORY_LIMIT_%u=%s", i, buf);
        }
        if (q->mem[i] && q->req[i] < q->mem[i]) {
            hami_size(q->req[i], buf, sizeof buf);
            env_add(env, "CUDA_DEVICE_MEMORY_REQUEST_%u=%s", i, buf);
        }
        if (q->core)
            env_add(env, "CUDA_DEVICE_SM_LIMIT_%u=%u", i, q->core);
    }
    env_add(env, "CUDA_DEVICE_MEMORY_SHARED_CACHE=%s", CTR_REGION);
    json_object_object_add(edits, "env", env);

    struct json_object *mounts = json_object_new_array();
    static const char *const ro[] = { "ro", "nosuid", "nodev", "bind", NULL };
    static const char *const rw[] = { "rw", "nosuid", "nodev", "bind", NULL };
    /* 1777 like /tmp: a container that runs as a non-root user must be able to create the
     * region; it is private to the container all the same (a tmpfs of its own). */
    static const char *const tmpfs[] = { "nosuid", "nodev", "noexec", "mode=1777", "size=16m", NULL };
    json_object_array_add(mounts, mount(q->library, CTR_LIBRARY, NULL, ro));
    json_object_array_add(mounts, mount("tmpfs", CTR_STATE, "tmpfs", tmpfs));
    /* Read-write: the GPU-time schedules are written there, and the arbiter's socket
     * (arbiter.sock) is connected to there. */
    json_object_array_add(mounts, mount(vgpu_machinedir_path(), VGPU_MACHINEDIR_DEFAULT, NULL, rw));
    json_object_object_add(edits, "mounts", mounts);
    json_object_object_add(dev, "containerEdits", edits);

    struct json_object *devs = json_object_new_array();
    json_object_array_add(devs, dev);
    json_object_object_add(spec, "devices", devs);
    return spec;
}

/* DIR/NAME written through a temporary file and rename(), so an engine never loads half a spec. */
static int write_spec(const char *dir, const char *name, const char *text)
{
    char path[PATH_MAX], tmp[PATH_MAX + 32];
    struct stat st;
    if (stat(dir, &st) != 0)
        return vgpu_fail(VGPU_EXIT_FAIL, "--output %s: %s; create it first (engines read /etc/cdi and /var/run/cdi)",
                         dir, strerror(errno));
    if (!S_ISDIR(st.st_mode))
        return vgpu_fail(VGPU_EXIT_FAIL, "--output %s: not a directory", dir);
    if ((size_t)snprintf(path, sizeof path, "%s/%s", dir, name) >= sizeof path)
        return vgpu_fail(VGPU_EXIT_USAGE, "--output %s: the path is too long", dir);
    snprintf(tmp, sizeof tmp, "%s/.%s.%d.tmp", dir, name, (int)getpid());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0)
        return vgpu_fail(VGPU_EXIT_FAIL, "cannot write %s: %s", tmp, strerror(errno));
    size_t len = strlen(text), off = 0;
    int err = 0;
    if (fchmod(fd, 0644) != 0)          /* readable by the engine whatever the umask */
        err = errno;
    while (!err && off < len) {
        ssize_t w = write(fd, text + off, len - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            err = w < 0 ? errno : EIO;
        else
            off += (size_t)w;
    }
    if (!err && (write(fd, "\n", 1) != 1 || fsync(fd) != 0))
        err = errno ? errno : EIO;
    if (close(fd) != 0 && !err)
        err = errno;
    if (!err && rename(tmp, path) != 0)
        err = errno;
    if (err) {
        unlink(tmp);
        return vgpu_fail(VGPU_EXIT_FAIL, "cannot write %s: %s", path, strerror(err));
    }
    printf("%s\n", path);
    return 0;
}

static int generate(int argc, char **argv)
{
    const char *gpu = NULL, *mem = NULL, *core = NULL, *name = NULL, *library = NULL, *output = NULL;
    const char *cdi_version = NULL;
    bool annotate = false;
    int c;
    optind = 1;
    while ((c = vgpu_getopt(&vgpu_cmd_cdi, argc, argv, "")) != -1) {
        switch (c) {
        case 'g': if (!vgpu_opt_once(&gpu, "--gpu")) return VGPU_EXIT_USAGE; break;
        case 'm': if (!vgpu_opt_once(&mem, "--mem")) return VGPU_EXIT_USAGE; break;
        case 'c': if (!vgpu_opt_once(&core, "--core")) return VGPU_EXIT_USAGE; break;
        case 'n': if (!vgpu_opt_once(&name, "--name")) return VGPU_EXIT_USAGE; break;
        case 'l': if (!vgpu_opt_once(&library, "--library")) return VGPU_EXIT_USAGE; break;
        case 'o': if (!vgpu_opt_once(&output, "--output")) return VGPU_EXIT_USAGE; break;
        case 'V': if (!vgpu_opt_once(&cdi_version, "--cdi-version")) return VGPU_EXIT_USAGE; break;
        case 'a': annotate = true; break;
        case VGPU_OPT_HELP: return 0;
        default: return VGPU_EXIT_USAGE;
        }
    }
    /* Before anything is read: stat("") said "No such file or directory" about no file. */
    if (output && !*output)
        return vgpu_usage_error(&vgpu_cmd_cdi, "--output needs a directory, and '' is empty: give the directory "
                                "the spec goes to (engines read /etc/cdi and /var/run/cdi)");
    if (optind < argc)
        return vgpu_usage_error(&vgpu_cmd_cdi, "generate takes no operands ('%s'): give the limits as options",
                                argv[optind]);
    struct vgpu_err e = { 0 };
    struct cdi_req *q = calloc(1, sizeof *q);
    if (!q)
        return vgpu_fail(VGPU_EXIT_FAIL, "out of memory");
    int rc = VGPU_EXIT_USAGE;
    struct vgpu_nvml *nv = NULL;
    struct vgpu_gpu_list *list = NULL;
    struct json_object *spec = NULL;
    if (core && vgpu_parse_percent_range(core, 1, 100, &q->core, "--core", &e) < 0) {
        rc = vgpu_err_report(&e);
        goto out;
    }
    q->annotate = annotate;
    if (name && !cdi_device_name_valid(name)) {
        rc = vgpu_usage_error(&vgpu_cmd_cdi, "--name '%s': a CDI device name is 1 to 63 letters, digits, '_', '.' "
                              "or '-', with a letter or digit first and last", name);
        goto out;
    }
    int pinned = -1;
    if (cdi_version && ((pinned = cdi_version_parse(cdi_version)) < cdi_version_earliest())) {
        rc = vgpu_usage_error(&vgpu_cmd_cdi, "--cdi-version '%s': %s; give %s", cdi_version,
                              pinned < 0 ? "not a CDI version" : "below 0.3.0, the earliest CDI loaders accept",
                              cdi_versions_accepted());
        goto out;
    }
    nv = vgpu_nvml_open(&e);
    if (!nv) {
        vgpu_error("%s", e.msg);
        rc = vgpu_fail(e.code ? e.code : VGPU_EXIT_NO_LIBRARY,
                       "vgpu cdi generate needs NVML to check the limits against the GPUs; run it on the host "
                       "that runs the containers");
        goto out;
    }
    list = calloc(1, sizeof *list);
    struct vgpu_gpu_sel sel;
    if (!list) {
        rc = vgpu_fail(VGPU_EXIT_FAIL, "out of memory");
        goto out;
    }
    if (vgpu_gpus_enumerate(nv, list, &e) < 0 || vgpu_gpus_select_default(list, gpu, &sel, &e) < 0) {
        rc = vgpu_err_report(&e);
        goto out;
    }
    if (sel.count == 0 || sel.count > VGPU_REGION_MAX_DEVICES) {
        rc = vgpu_fail(VGPU_EXIT_USAGE, sel.count ? "--gpu: at most %d GPUs per device" : "no GPU selected%.0d",
                       VGPU_REGION_MAX_DEVICES);
        goto out;
    }
    q->ngpu = sel.count;
    for (unsigned i = 0; i < sel.count; i++) {
        const struct vgpu_gpu *g = &list->gpu[sel.pos[i]];
        q->gpu[i] = g;
        char desc[160];
        snprintf(desc, sizeof desc, "GPU %u (%s)", g->index, g->uuid);
        if (mem && vgpu_mem_request_limit(mem, g->mem_total, desc, false, &q->req[i], &q->mem[i], &e) < 0) {
            rc = vgpu_err_report(&e);
            goto out;
        }
    }
    if (name) {
        snprintf(q->name, sizeof q->name, "%s", name);
    } else {
        char w[40] = "";
        if (mem) {
            bool same = true;
            for (unsigned i = 1; i < q->ngpu; i++)
                same = same && q->mem[i] == q->mem[0] && q->req[i] == q->req[0];
            if (!same) {
                rc = vgpu_usage_error(&vgpu_cmd_cdi, "--mem %s gives the GPUs different limits: name the device "
                                      "with --name", mem);
                goto out;
            }
            if (q->req[0] < q->mem[0]) {
                /* REQUEST-LIMIT: mem-20GiB-100GiB (the size of any GPU is a word of at most 19 characters) */
                char r[24], l[24];
                size_word(q->req[0], r, sizeof r);
                size_word(q->mem[0], l, sizeof l);
                snprintf(w, sizeof w, "%.19s-%.19s", r, l);
            } else {
                size_word(q->mem[0], w, sizeof w);
            }
        }
        snprintf(q->name, sizeof q->name, "%s%s%s%s", mem ? "mem-" : "", w, q->core && mem ? "-" : "",
                 q->core ? "core-" : (mem ? "" : "unlimited"));
        if (q->core) {
            size_t l = strlen(q->name);
            snprintf(q->name + l, sizeof q->name - l, "%u", q->core);
        }
    }
    /* The library every container will preload: it must be this vgpu's libvgpu.so (issue 27:
     * --library /etc/passwd was taken). The check reads the file, it never loads it. */
    if (library) {
        if (library[0] != '/') {
            rc = vgpu_fail(VGPU_EXIT_USAGE, "--library %s: give an absolute path (the engine mounts it)", library);
            goto out;
        }
        snprintf(q->library, sizeof q->library, "%s", library);
    } else {
        char statedir[4096];
        if (vgpu_statedir(statedir, sizeof statedir, true, &e) < 0 ||
            vgpu_run_find_library(statedir, q->library, sizeof q->library, &e) < 0) {
            rc = vgpu_err_report(&e);
            goto out;
        }
    }
    if (vgpu_run_check_library(q->library, library ? "--library" : "the default library", &e) < 0) {
        vgpu_error("%s", e.msg);
        rc = VGPU_EXIT_USAGE;
        goto out;
    }
    spec = build_spec(q);
    struct cdi_need needs[16];
    int lowest;
    size_t nneeds = cdi_spec_needs(spec, needs, 16, &lowest);
    if (pinned >= 0 && pinned < lowest) {
        /* Say every field that the pinned version cannot carry, so that one fix is enough. */
        for (size_t i = 0; i < nneeds && i < 16; i++)
            if (needs[i].version > pinned)
                vgpu_error("--cdi-version %s cannot carry %s", cdi_version_name(pinned), needs[i].why);
        rc = vgpu_fail(VGPU_EXIT_USAGE, "--cdi-version %s: this spec needs %s or later; give that, or leave "
                       "--cdi-version out (the lowest version that carries the spec is chosen)",
                       cdi_version_name(pinned), cdi_version_name(lowest));
        goto out;
    }
    json_object_object_add(spec, "cdiVersion", json_object_new_string(cdi_version_name(pinned >= 0 ? pinned : lowest)));
    const char *text = json_object_to_json_string_ext(spec, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_SPACED |
                                                                JSON_C_TO_STRING_NOSLASHESCAPE);
    if (output) {
        char file[128];
        snprintf(file, sizeof file, "vgpu.dev-gpu_%s.json", q->name);
        rc = write_spec(output, file, text);
    } else {
        rc = printf("%s\n", text) < 0 || fflush(stdout) != 0
                 ? vgpu_fail(VGPU_EXIT_FAIL, "cannot write the spec: %s", strerror(errno))
                 : 0;
    }
out:
    if (spec)
        json_object_put(spec);
    if (nv)
        vgpu_nvml_close(nv);
    free(list);
    free(q);
    return rc;
}

static int validate(int argc, char **argv)
{
    int c;
    optind = 1;
    while ((c = vgpu_getopt(&vgpu_cmd_cdi, argc, argv, "")) != -1) {
        if (c == VGPU_OPT_HELP)
            return 0;
        if (c != '?')
            return vgpu_usage_error(&vgpu_cmd_cdi, "validate takes no options: give only the spec file");
        return VGPU_EXIT_USAGE;
    }
    if (argc - optind != 1)
        return vgpu_usage_error(&vgpu_cmd_cdi, "validate takes one spec file: vgpu cdi validate FILE");
    return cdi_validate_file(argv[optind]);
}

static int cmd_cdi(int argc, char **argv)
{
    if (argc >= 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
        vgpu_cmd_help(&vgpu_cmd_cdi, stdout);
        return 0;
    }
    if (argc < 2)
        return vgpu_usage_error(&vgpu_cmd_cdi, "name what to do: vgpu cdi generate [OPTIONS], or vgpu cdi validate FILE");
    if (strcmp(argv[1], "validate") == 0)
        return validate(argc - 1, argv + 1);
    if (strcmp(argv[1], "generate") != 0) {
        static const char *const cands[] = { "generate", "validate", NULL };
        return vgpu_unknown_word(&vgpu_cmd_cdi, "verb", argv[1], cands);
    }
    return generate(argc - 1, argv + 1);
}

const struct vgpu_cmd vgpu_cmd_cdi = {
    .name = "cdi",
    .fn = cmd_cdi,
    .summary = "write CDI specs so that container engines run limited containers",
    .usage = usage,
    .options = options,
    .optdocs = optdocs,
    .verbs = verbs,
};
