/* Fake nvidia-smi (test double): the parts vgpu runs, with the texts and exit statuses of
 * nvidia-smi 580.159.04 (reference/nvml.md §7, §12, §14, §15), on the simulated machine's
 * state file:
 *   nvidia-smi -L
 *   nvidia-smi [-i IDS] -c 0|2|3|DEFAULT|PROHIBITED|EXCLUSIVE_PROCESS
 *   nvidia-smi compute-policy [-i IDS] [-l|--list] [--set-timeslice N]
 * IDS: comma list of indexes, UUIDs or PCI bus ids. VGPU_FAKE_ROOT=0/1 pretends to be (not)
 * root (default: the real euid). The time-slice value lives in fs_gpu.timeslice. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "../common/fakestate.h"

static const char *const ts_upper[] = { "DEFAULT", "SHORT", "MEDIUM", "LONG" };
static const char *const ts_title[] = { "Default", "Short", "Medium", "Long" };

static bool is_root(void)
{
    const char *r = getenv("VGPU_FAKE_ROOT");
    if (r && *r)
        return strcmp(r, "0") != 0;
    return geteuid() == 0;
}

static int no_driver(void)
{
    printf("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that "
           "the latest NVIDIA driver is installed and running.\n\n");
    return 9;
}

/* Selected GPUs from -i (NULL: all). false when an id is unknown. */
static bool select_ids(struct fs_state *st, const char *ids, bool *sel)
{
    for (unsigned i = 0; i < st->ngpus; i++)
        sel[i] = ids == NULL;
    if (!ids)
        return true;
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", ids);
    for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        bool found = false;
        char *end;
        unsigned long v = strtoul(t, &end, 10);
        for (unsigned i = 0; i < st->ngpus; i++) {
            const struct fs_gpu_static *g = &st->gpu[i].s;
            size_t lt = strlen(t), lb = strlen(g->pci_bus_id);
            if ((*t && !*end && v == i) || strcasecmp(t, g->uuid) == 0 || strcasecmp(t, g->pci_bus_id) == 0 ||
                (lt >= 7 && lt < lb && strcasecmp(g->pci_bus_id + lb - lt, t) == 0)) {
                sel[i] = true;
                found = true;
            }
        }
        if (!found)
            return false;
    }
    return true;
}

static int policy_help(void)
{
    printf("\n    Compute Policy -- Control and list compute policies.\n\n"
           "    Usage: nvidia-smi compute-policy [options]\n\n"
           "    Options include:\n"
           "    [-i | --id]: GPU device ID's. Provide comma\n"
           "                 separated values for more than one device\n\n"
           "    [-l | --list]: List all compute policies\n\n"
           "    [ | --set-timeslice]: Set timeslice config for a GPU:\n"
           "                          0=DEFAULT, 1=SHORT, 2=MEDIUM, 3=LONG\n\n"
           "    [-h | --help]: Display help information\n\n\n");
    return 0;
}

static int compute_policy(struct fs_state *st, int argc, char **argv)
{
    const char *ids = NULL, *set = NULL;
    int commands = 0;
    bool list = false;
    for (int i = 0; i < argc; i++) {
        if ((!strcmp(argv[i], "-i") || !strcmp(argv[i], "--id")) && i + 1 < argc) {
            ids = argv[++i];
        } else if (!strncmp(argv[i], "--id=", 5)) {
            ids = argv[i] + 5;
        } else if (!strcmp(argv[i], "-l") || !strcmp(argv[i], "--list")) {
            list = true;
            commands++;
        } else if (!strcmp(argv[i], "--set-timeslice") && i + 1 < argc) {
            set = argv[++i];
            commands++;
        } else if (!strncmp(argv[i], "--set-timeslice=", 16)) {
            set = argv[i] + 16;
            commands++;
        } else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            return policy_help();
        } else {
            printf("Invalid combination of input arguments. Please run 'nvidia-smi compute-policy -h' for help.\n");
            return 2;
        }
    }
    if (commands == 0)
        return policy_help();
    if (commands > 1) {
        printf("One, and only one, compute-policy command allowed at a time\n");
        return 2;
    }
    bool sel[FS_MAX_GPUS];
    if (!select_ids(st, ids, sel)) {
        printf("No devices were found\n");
        return 6;
    }
    if (list) {
        printf("+-------------------------------------+\n"
               "| GPU compute policies:               |\n"
               "| GPU     Name           Value        |\n"
               "|=====================================|\n");
        fs_lock();
        for (unsigned i = 0; i < st->ngpus; i++)
            if (sel[i])
                printf("| %3u   Timeslice       %-14s|\n", i, ts_title[st->gpu[i].timeslice & 3]);
        fs_unlock();
        printf("+-------------------------------------+\n");
        return 0;
    }
    /* --set-timeslice */
    char *end;
    long v = strtol(set, &end, 10);
    if (!*set || *end) {
        printf("Option passed to set the timeslice is invalid.\n");
        return 2;
    }
    const char *vname = v >= 0 && v <= 3 ? ts_upper[v] : "Unknown";
    int rc = 0;
    const char *why = NULL;
    fs_lock();
    for (unsigned i = 0; i < st->ngpus; i++) {
        if (!sel[i])
            continue;
        struct fs_gpu *g = &st->gpu[i];
        const char *err = NULL;
        int code = 0;
        if (v < 0 || v > 3)
            err = "Invalid Argument", code = 2;
        else if (g->lost)
            err = "GPU is lost", code = 15;
        else if (!is_root())
            err = "Insufficient Permissions", code = 4;
        else if (g->mig_current)
            err = "Not Supported", code = 3;
        if (err) {
            printf("Failed to set timeslice policy with value %s for GPU %u : %s\n", vname, i, err);
            if (!rc) {
                rc = code;
                why = err;
            }
            continue;
        }
        g->timeslice = (unsigned)v;
        printf("Successfully set timeslice policy with value %s for GPU %u\n", vname, i);
    }
    fs_unlock();
    if (rc)
        printf("Failed to set timeslice for requested devices : %s\n", why);
    return rc;
}

static int list_gpus(struct fs_state *st)
{
    for (unsigned i = 0; i < st->ngpus; i++)
        printf("GPU %u: %s (UUID: %s)\n", i, st->gpu[i].s.name, st->gpu[i].s.uuid);
    return 0;
}

static int compute_mode(struct fs_state *st, const char *ids, const char *mode)
{
    static const char *const names[] = { "DEFAULT", "EXCLUSIVE_THREAD", "PROHIBITED", "EXCLUSIVE_PROCESS" };
    int m = -1;
    for (int k = 0; k < 4; k++)
        if (!strcasecmp(mode, names[k]) || (mode[0] == '0' + k && !mode[1]))
            m = k;
    if (m < 0 || m == 1) {
        printf("Invalid compute mode. Run 'nvidia-smi -h' for help.\n");
        return 2;
    }
    bool sel[FS_MAX_GPUS];
    if (!select_ids(st, ids, sel)) {
        printf("No devices were found\n");
        return 6;
    }
    int rc = 0;
    fs_lock();
    for (unsigned i = 0; i < st->ngpus; i++) {
        if (!sel[i])
            continue;
        struct fs_gpu *g = &st->gpu[i];
        if (g->compute_mode == (unsigned)m) {
            printf("Compute mode is already set to %s for GPU %s.\n", names[m], g->s.pci_bus_id);
        } else if (!is_root()) {
            printf("Unable to set the compute mode for GPU %s: Insufficient Permissions\n", g->s.pci_bus_id);
            rc = 4;
        } else if (g->mig_current) {
            printf("Setting compute mode to %s is not supported on a MIG-enabled device.\n", names[m]);
            rc = 3;
        } else {
            g->compute_mode = (unsigned)m;
            printf("Set compute mode to %s for GPU %s.\n", names[m], g->s.pci_bus_id);
        }
    }
    fs_unlock();
    if (!rc)
        printf("All done.\n");
    else
        printf("Terminating early due to previous errors.\n");
    return rc;
}

int main(int argc, char **argv)
{
    struct fs_state *st = fs_open();
    if (!st) {
        fprintf(stderr, "fake nvidia-smi: %s\n", fs_error());
        return 255;
    }
    int init = fs_failures()->nvml_init;
    if (init == 9 || init == 18) {
        if (init == 18) {
            printf("Failed to initialize NVML: Driver/library version mismatch\n");
            return 18;
        }
        return no_driver();
    }
    if (st->ngpus == 0 || init == 28) {
        printf("No devices were found\n");
        return 6;
    }
    if (argc >= 2 && !strcmp(argv[1], "compute-policy"))
        return compute_policy(st, argc - 2, argv + 2);
    const char *ids = NULL, *mode = NULL;
    bool L = false;
    for (int i = 1; i < argc; i++) {
        if ((!strcmp(argv[i], "-i") || !strcmp(argv[i], "--id")) && i + 1 < argc)
            ids = argv[++i];
        else if ((!strcmp(argv[i], "-c") || !strcmp(argv[i], "--compute-mode")) && i + 1 < argc)
            mode = argv[++i];
        else if (!strcmp(argv[i], "-L") || !strcmp(argv[i], "--list-gpus"))
            L = true;
        else {
            printf("Invalid combination of input arguments. Please run 'nvidia-smi -h' for help.\n\n");
            return 2;
        }
    }
    if (mode)
        return compute_mode(st, ids, mode);
    if (L || argc == 1)
        return list_gpus(st);
    printf("Invalid combination of input arguments. Please run 'nvidia-smi -h' for help.\n\n");
    return 2;
}
