/* guard.c: the library's SIGBUS handler (issue 12 item 3).
 *
 * A file mapped MAP_SHARED and then truncated kills whoever touches its lost pages with SIGBUS.
 * The allocation path looks before it touches the job region (vgpu_region_check: fstat), but the
 * launch path cannot (it reads the limits sequence from the mapped limits page on every launch,
 * and costs nanoseconds: no system call fits there), nor can the compute limiter, which reads
 * the limits and charges GPU time into the usage part, from its helper thread too. So the
 * library catches the fault instead, at no cost until it happens:
 *
 *  - Installed once, when the library maps a job region (config.c), never in a process with no
 *    job. SA_ONSTACK (an alternate signal stack is used when the thread has one; some runtimes,
 *    Go's among them, require the flag), SA_RESTART when the handler before it had it.
 *  - It acts only on a fault (si_code > 0) whose address lies in one of the library's own
 *    mappings of a registered region: those mappings are replaced in place by private memory
 *    holding the last limits seen (vgpu_region_fence_fault: mmap, memcpy, mremap; async-signal-
 *    safe), and the handler returns, so the faulting access is retried and reads the last
 *    limits, or writes usage nobody else sees. It also makes the next launch look at the limits
 *    (vgpu_gate.seen_seq), where config.c says once, on stderr, outside the handler, that the
 *    region is damaged and which limits are kept.
 *  - Everything else goes to the disposition that was there before, as the kernel would have
 *    delivered it: a handler is called with its own sa_mask (and the signal, unless SA_NODEFER)
 *    blocked and SA_RESETHAND honoured, with the same siginfo and context; the default action
 *    (or SIG_IGN, which the kernel does not honour for a fault) is restored and the same signal,
 *    with the same siginfo, queued again to the thread, so the program dies by SIGBUS as it
 *    would have; a SIGBUS sent to an ignoring program is ignored. Two differences remain: that
 *    handler runs on the stack this one runs on (its own SA_ONSTACK cannot be honoured), and a
 *    system call interrupted by a SIGBUS sent to a thread is restarted when the previous handler
 *    said SA_RESTART, else not.
 *  - A handler the program installs after the library replaces this one (sigaction is the
 *    program's to call): from then on a truncated region's fault goes to the program's handler,
 *    which usually ends the process. libvgpu(7) says so.
 *  - Threads: the handler is the process's; each thread's fault is handled in that thread. Two
 *    threads faulting at once: one replaces the mappings, the other waits for it in its handler
 *    (vgpu_region_fence_fault). The limiter's helper thread leaves SIGBUS unblocked (a fault in a
 *    thread that blocks it kills the process, whatever the handler). */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

#include "gate.h"
#include "hook.h"
#include "vgpu/region.h"

#define MAX_GUARDED 4
static struct vgpu_region *_Atomic guarded[MAX_GUARDED];
static struct sigaction prev;              /* SIGBUS's disposition before ours */
static pthread_once_t install_once = PTHREAD_ONCE_INIT;

/* sa_handler and sa_sigaction share their storage: SIG_DFL and SIG_IGN are those values in either. */
static bool is_function(const struct sigaction *a)
{
    return a->sa_handler != SIG_DFL && a->sa_handler != SIG_IGN;
}

/* The signal was not ours: what the previous disposition would have done. */
static void chain(int sig, siginfo_t *si, void *uc)
{
    struct sigaction p = prev;
    if (is_function(&p)) {
        sigset_t mask;
        if (uc)
            mask = ((ucontext_t *)uc)->uc_sigmask;   /* the thread's mask before the signal */
        else
            pthread_sigmask(SIG_SETMASK, NULL, &mask);
        sigorset(&mask, &mask, &p.sa_mask);
        if (!(p.sa_flags & SA_NODEFER))
            sigaddset(&mask, sig);
        if (p.sa_flags & SA_RESETHAND) {
            struct sigaction dfl;
            memset(&dfl, 0, sizeof dfl);
            dfl.sa_handler = SIG_DFL;
            sigaction(sig, &dfl, NULL);
        }
        pthread_sigmask(SIG_SETMASK, &mask, NULL);   /* our return restores uc's mask anyway */
        if (p.sa_flags & SA_SIGINFO)
            p.sa_sigaction(sig, si, uc);
        else
            p.sa_handler(sig);
        return;
    }
    if (p.sa_handler == SIG_IGN && (!si || si->si_code <= 0))
        return;                                  /* sent, and ignored: as before */
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    sigaction(sig, &dfl, NULL);
    /* Pending (this handler blocks it) until we return: then the default action, by the same
     * signal with the same siginfo (a core dump shows the original fault). */
    if (!si || syscall(SYS_rt_tgsigqueueinfo, getpid(), (pid_t)syscall(SYS_gettid), sig, si) != 0)
        syscall(SYS_tgkill, getpid(), (pid_t)syscall(SYS_gettid), sig);
}

static void on_sigbus(int sig, siginfo_t *si, void *uc)
{
    int saved = errno;
    if (si && si->si_code > 0) {                 /* from the kernel: a fault, si_addr is set */
        for (int i = 0; i < MAX_GUARDED; i++) {
            struct vgpu_region *r = atomic_load_explicit(&guarded[i], memory_order_acquire);
            if (!r || !vgpu_region_maps(r, si->si_addr))
                continue;
            if (vgpu_region_fence_fault(r, si->si_addr)) {
                /* The copy's sequence is fixed now: any other value sends the next launch to
                 * vgpu_job_core_limited, which says so (config.c). */
                uint32_t seq = atomic_load_explicit(&r->hdr->limits_seq, memory_order_relaxed);
                atomic_store_explicit(&vgpu_gate.seen_seq, seq + 1, memory_order_release);
                errno = saved;
                return;                          /* the access is retried on private memory */
            }
            break;                               /* could not be replaced: as if we were not here */
        }
    }
    errno = saved;
    chain(sig, si, uc);
}

static void install(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    if (sigaction(SIGBUS, NULL, &prev) != 0)
        return;
    sa.sa_sigaction = on_sigbus;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK | (is_function(&prev) ? (prev.sa_flags & SA_RESTART) : SA_RESTART);
    sigemptyset(&sa.sa_mask);
    struct sigaction was;
    if (sigaction(SIGBUS, &sa, &was) == 0)
        prev = was;                              /* the same, unless it changed in between */
}

void vgpu_guard_region(struct vgpu_region *r)
{
    if (!r)
        return;
    for (int i = 0; i < MAX_GUARDED; i++) {
        struct vgpu_region *none = NULL;
        if (atomic_load(&guarded[i]) == r || atomic_compare_exchange_strong(&guarded[i], &none, r))
            break;
    }
    pthread_once(&install_once, install);
}
