/* Running NVIDIA's command-line tools (nvidia-smi, nvidia-cuda-mps-control) and reading
 * their output. Some driver settings have no public NVML call (the time-slice policy,
 * reference/nvml.md §15) and MPS is driven through its control program (§16), so vgpu
 * execs them and parses what they print: their text is the interface, and their exit
 * statuses are not always meaningful (mps-control exits 0 on unknown commands).
 * vgpu-side code (not used by libvgpu.so). */
#ifndef VGPU_SMI_H
#define VGPU_SMI_H

#include <stdbool.h>
#include <stddef.h>
#include "vgpu/log.h"

/* ---- running a tool ------------------------------------------------------------------------- */

struct vgpu_proc {
    int status;          /* exit status; 128+N when killed by signal N */
    bool timed_out;      /* killed after the timeout */
    char *out;           /* stdout, NUL-terminated (never NULL after success) */
    char *err;           /* stderr, likewise */
};

/* Runs argv[0] (searched on PATH when it has no '/') with `input` on its stdin (NULL: empty),
 * with the environment changed by `env` ("NAME=VALUE" sets, "NAME" unsets; NULL-terminated,
 * may be NULL). stdout/stderr go to temporary files, so a tool that daemonizes and keeps them
 * open does not hang us. After timeout_ms the tool is killed. 0, or -1 with e set when it could
 * not be started (ENOENT: not found, named with `what to do` hints by the caller). */
int vgpu_proc_run(const char *const argv[], const char *const env[], const char *input, int timeout_ms,
                  struct vgpu_proc *p, struct vgpu_err *e);
void vgpu_proc_free(struct vgpu_proc *p);

/* The nvidia-smi to run: $VGPU_NVIDIA_SMI, else "nvidia-smi" on PATH. */
const char *vgpu_smi_path(void);

/* Why a tool that vgpu_proc_run could not start is missing, worded for where the name came
 * from: "/x/y does not exist" for a path (never "not found on PATH"), "not found on PATH"
 * for a bare name; with env_var (the variable that named it, when set) it says to fix or
 * unset that variable, else `install` (what to install). */
char *vgpu_tool_missing(const char *tool, const char *env_var, const char *install, char *buf, size_t len);

/* ---- the time-slice policy (nvidia-smi compute-policy) -------------------------------------- */

enum vgpu_timeslice {
    VGPU_TIMESLICE_DEFAULT = 0,
    VGPU_TIMESLICE_SHORT = 1,
    VGPU_TIMESLICE_MEDIUM = 2,
    VGPU_TIMESLICE_LONG = 3,
};

/* "default", "short", "medium", "long" (any case) or "0".."3" -> 0..3; -1 otherwise. */
int vgpu_timeslice_parse(const char *s);
/* 0..3 -> "default".."long"; NULL otherwise. */
const char *vgpu_timeslice_name(int v);

#define VGPU_SMI_MAX_ROWS 64
struct vgpu_policy_row {
    unsigned gpu;        /* nvidia-smi's GPU index */
    int timeslice;       /* 0..3, or -1 when the value was not understood */
    char value[32];      /* the value as printed ("Default") */
};

/* Parses `nvidia-smi compute-policy -l`:
 *   +-------------------------------------+
 *   | GPU compute policies:               |
 *   | GPU     Name           Value        |
 *   |=====================================|
 *   |   0   Timeslice       Default       |
 *   +-------------------------------------+
 * Returns the number of Timeslice rows stored (at most max), or -1 when the text has no
 * policy box at all (not the output we know). */
int vgpu_smi_parse_policy_list(const char *text, struct vgpu_policy_row *rows, int max);

/* What went wrong with an nvidia-smi run, from its exit status and text. */
enum vgpu_smi_fault {
    VGPU_SMI_OK = 0,
    VGPU_SMI_NO_PERMISSION,   /* "Insufficient Permissions", status 4 */
    VGPU_SMI_NOT_FOUND,       /* "No devices were found", status 6 */
    VGPU_SMI_NOT_SUPPORTED,   /* "Not Supported", status 3 */
    VGPU_SMI_INVALID,         /* "Invalid Argument", status 2 */
    VGPU_SMI_NO_DRIVER,       /* status 9, "couldn't communicate with the NVIDIA driver" */
    VGPU_SMI_VERSION,         /* status 18, "Driver/library version mismatch" */
    VGPU_SMI_IN_USE,          /* "In use by another client", status 19 */
    VGPU_SMI_OTHER,
};
/* Classifies a run (status and stdout+stderr); copies the most telling line into reason. */
enum vgpu_smi_fault vgpu_smi_classify(int status, const char *out, const char *err, char *reason, size_t len);

/* True when the output has "Successfully set timeslice policy ... for GPU <gpu>". */
bool vgpu_smi_set_succeeded(const char *out, unsigned gpu);

#endif
