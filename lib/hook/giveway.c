/* giveway.c: an allocation within the job's promise that the GPU cannot hold because other jobs
 * borrow its room (issue 37 item 2, decision 13's last step).
 *
 * Borrowers give way on their own (squeeze.c): each borrowing process looks every 200 ms and
 * demotes borrowed memory to the host when other jobs' unmet requests need the room, and the
 * driver evicts managed pages for an ordinary allocation besides. An allocation can still find
 * the GPU full when it comes before the borrowers' next look (a job that allocates as soon as it
 * starts), or on a driver that does not evict another process's pages. Then, and only when some
 * other job on the GPU borrows, the allocation waits a bounded time (WAIT_NS), retrying every
 * POLL_NS, before it answers CUDA_ERROR_OUT_OF_MEMORY with a message naming the borrowers. No job
 * is ever killed for it.
 *
 * While it waits the allocation's reservation is given back (and taken again before each
 * retry): a borrower counts this job's unmet request from the region (REQUEST - used), and bytes
 * reserved but not on the GPU would hide exactly the room being waited for. */
#include <time.h>

#include "hook.h"
#include "vgpu/lend.h"
#include "vgpu/region.h"
#include "vgpu/units.h"

#define WAIT_NS 1000000000ULL   /* issue 37: an owner's allocation is granted within 1 s */
#define POLL_NS 20000000ULL

bool vgpu_giveway_wait(struct vgpu_giveway *g, int dev, uint64_t bytes, const char *what)
{
    struct vgpu_region *r = vgpu_job();
    int jdev = dev >= 0 ? vgpu_job_dev(dev) : -1;
    if (!r || jdev < 0 || !bytes || !vgpu_acct_tracked(dev))
        return false;
    uint64_t now = vgpu_now_ns();
    if (!g->start_ns || g->unsure) {
        struct vgpu_lend_others o;
        vgpu_lend_others(r, (unsigned)jdev, &o);
        /* Another user's borrower is known from the arbiter's answer, which vgpu run renews every
         * 250 ms: one older than this wait may predate that borrower's first figures (a job that
         * allocates as soon as it starts, beside a borrower that just did). Then the wait goes on
         * until an answer newer than its start says whether anyone borrows. */
        uint64_t at = vgpu_lend_answered_at(r);
        bool stale = at && at < (g->start_ns ? g->start_ns : now);
        if (!o.borrowed && !stale)
            return false;              /* nobody borrows here: an ordinary out of memory */
        if (!g->start_ns)
            g->start_ns = now;
        g->unsure = !o.borrowed;
    }
    if (now - g->start_ns >= WAIT_NS) {
        struct vgpu_lend_others o;
        char names[256], req[32], bo[32];
        vgpu_lend_borrowers(r, (unsigned)jdev, &o, names, sizeof names);
        vgpu_warn("%s: %s of %s on GPU %d, within the job's request, refused with CUDA_ERROR_OUT_OF_MEMORY: the GPU "
                  "has no room for it, and after waiting %u ms for the borrowers to give way, other jobs still "
                  "borrow %s there (%s). vgpu demotes what it lent them within about 200 ms of the need; what "
                  "stays is managed memory their programs allocated and placed themselves, which only the "
                  "driver evicts. Try again, or lower their LIMIT (vgpu limit JOB --mem REQUEST:LIMIT).",
                  vgpu_job_label(), what, vgpu_format_size(bytes, req, sizeof req), dev,
                  (unsigned)((now - g->start_ns) / 1000000), vgpu_format_size(o.borrowed, bo, sizeof bo),
                  names[0] ? names : "they ended meanwhile");
        return false;
    }
    vgpu_acct_release(dev, bytes);
    nanosleep(&(struct timespec){ 0, (long)POLL_NS }, NULL);
    if (vgpu_acct_try(dev, bytes, VGPU_ACCT_ON_DEVICE, NULL) != VGPU_ACCT_GRANTED) {
        /* The job's own room went meanwhile (another of its processes, or vgpu limit): held again
         * regardless, so that the caller's release after the failure gives back what it took. */
        vgpu_acct_force(dev, bytes);
        char req[32];
        vgpu_warn("%s: %s of %s on GPU %d refused with CUDA_ERROR_OUT_OF_MEMORY: while it waited for borrowed "
                  "memory to give way, the job's own limit was used or lowered (vgpu ps shows its use)",
                  vgpu_job_label(), what, vgpu_format_size(bytes, req, sizeof req), dev);
        return false;
    }
    g->rounds++;
    return true;
}
