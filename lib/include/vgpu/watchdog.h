/* A bound on driver calls that may never return. An NVML call on a wedged driver (a GPU fallen
 * off the bus, a hung kernel module) can block forever, and so would vgpu list, ps, run --mem
 * and top's start. Between vgpu_watchdog_arm(what) and vgpu_watchdog_disarm(), a helper thread
 * watches the clock: after VGPU_NVML_TIMEOUT_S seconds (default 30; 0 turns the bound off) it
 * prints an error naming `what`, saying the driver is not answering and what to look at, and ends
 * the process: exit status VGPU_EXIT_NO_DRIVER, or VGPU_EXIT_RUN_FAILED for `vgpu run`, whose own
 * errors are 125. Arming inside an armed section keeps the outer deadline. vgpu-side only: the
 * library never starts this thread and never ends a process. */
#ifndef VGPU_WATCHDOG_H
#define VGPU_WATCHDOG_H

void vgpu_watchdog_arm(const char *what);
void vgpu_watchdog_disarm(void);

#endif
