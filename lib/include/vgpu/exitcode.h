/* Exit statuses, the same for every command (documented in man/vgpu.1, EXIT STATUS).
 * `vgpu run` follows env(1) instead: 125 for its own errors, 126/127 when the command
 * cannot be run, otherwise the command's own status. */
#ifndef VGPU_EXITCODE_H
#define VGPU_EXITCODE_H

enum vgpu_exit {
    VGPU_EXIT_OK          = 0,
    VGPU_EXIT_FAIL        = 1,  /* the operation failed (the message says why) */
    VGPU_EXIT_USAGE       = 2,  /* bad command line: unknown command/option, bad size, unknown GPU */
    VGPU_EXIT_NO_LIBRARY  = 3,  /* libnvidia-ml.so.1 / libcuda.so.1 cannot be loaded */
    VGPU_EXIT_NO_DRIVER   = 4,  /* the NVIDIA kernel driver is not loaded, or versions differ */
    VGPU_EXIT_NO_GPU      = 5,  /* the driver found no GPU */
    VGPU_EXIT_PERMISSION  = 6,  /* not allowed: needs root, or another user's job */
    VGPU_EXIT_BUSY        = 7,  /* in use: processes hold the GPU/instance, name taken */
    VGPU_EXIT_NOT_FOUND   = 8,  /* no such job, instance or process */
    VGPU_EXIT_NO_CAPACITY = 9,  /* does not fit: no free placement, memory promised elsewhere */
    VGPU_EXIT_PENDING     = 10, /* accepted but pending (MIG mode needs a reset) */
    VGPU_EXIT_STATE       = 11, /* vgpu's own state is corrupt or unreadable */
    VGPU_EXIT_GPU_LOST    = 12, /* a GPU the command needed is lost or does not answer */

    VGPU_EXIT_TIMEOUT      = 124, /* vgpu wait --timeout gave up, as timeout(1) does */
    VGPU_EXIT_RUN_FAILED   = 125, /* vgpu run: its own error */
    VGPU_EXIT_RUN_NOEXEC   = 126, /* vgpu run: the command was found but cannot be run */
    VGPU_EXIT_RUN_NOTFOUND = 127, /* vgpu run: the command was not found */
};

#endif
