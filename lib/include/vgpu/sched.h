/* The per-GPU schedule of the compute limiter (DESIGN.md decisions 7 and 10).
 *
 * One schedule per physical GPU (or MIG device) for the whole machine, shared by every user:
 * a System V shared-memory segment whose key is derived from the machine-wide directory's
 * path and the GPU's UUID (vgpu_sched_key). Why not a file in that directory: every process
 * must write the lease word, so the file would have to be writable by all, and anyone who can
 * write a file can truncate it, after which every process that maps it dies of SIGBUS on its
 * next launch. A segment has a fixed size for its whole life: a hostile user can write garbage
 * into it, never pull the memory out from under another user's job. Every value read from it
 * is therefore validated or clamped (see the readers in sched.c), and every wait on it is
 * bounded, so damaged or hostile state degrades to the driver's plain time-slicing.
 *
 * Jobs take turns holding one *lease*: only the holder's processes launch; before passing the
 * lease on, the holder waits for its own work to finish, so a lease's wall time is the GPU time
 * it used, whatever its kernels look like.
 *
 * Keeping clear (reference/latency.md): the GPU switches contexts at its own pace, so a preemptor
 * still waits for the holder's queued kernels (on an H200, a request waited for the whole
 * 2.45 ms matmul the training job had just started: p99 2.8 ms). A job that gives the lease back
 * idle publishes when it expects to want it again (its recent idle gaps). A holder that job would
 * preempt does not queue work that would still run then: it gives the lease back and waits until
 * that moment, so the request finds the GPU free. Bounded: its work may end 0.5 ms after that
 * moment (at most a quarter of a pacing interval), 1 ms (half an interval) once the holder is
 * under its own cap (credit above one and a half quanta: keeping
 * clear has cost it), and the holder stops keeping clear while its credit is at its burst (it
 * would lose what it is owed); and only for work that fits in such a gap at all (longer work
 * cannot keep clear, it would only idle the GPU). The H200 showed why a holder under its cap
 * still keeps clear, later: one that simply went ahead then let 1-3 % of requests wait a whole
 * kernel (p99 2.76 ms).
 *
 * Budget ("credit", ns): each job earns cap% of wall time, capped at a burst of two quanta
 * (quantum = cap% of the 50 ms period); a lease costs the time it was held (overruns included,
 * so they are paid back by the next turns). A hard job may take the lease once its credit
 * reaches one quantum. Whoever is entitled goes first by: starving (eligible for longer than
 * VGPU_SCHED_STARVE_NS), priority, credit relative to its quantum, waiting time. Soft jobs may borrow the GPU for a short lease when no waiting job is
 * entitled; borrowed time leaves them no debt beyond zero credit.
 *
 * Latency (reference/latency.md): a lease is not exclusive for its whole length. An entitled
 * waiter of another job *preempts* the holder at once when it has higher priority, or when its
 * credit is near its burst (it has used less than its cap lately: an inference service between
 * requests). It takes the lease word from the holder by compare-and-swap and launches at once;
 * the holder sees the lease gone at its next launch (or its helper thread, woken through a futex
 * in the segment), stops launching, and charges its time until its already-queued work (which
 * the pacing fences bound to a kernel or two) has finished. That work and the preemptor's share
 * the GPU meanwhile under the driver's own time-slicing, so the preemptor waits no longer than
 * plain time-slicing would make it; the holder is charged the overlap. Any other waiter only
 * asks; the holder then gives the lease back once it has launched nothing and had nothing in
 * flight for VGPU_SCHED_IDLE_NS. (It does so whether or not anyone asks, so that what a lease is
 * charged is the time its work took: lib/hook/limiter_keeper.c.) Accuracy comes from charging what each lease used, not from
 * the lease's length.
 *
 * Uncapped priority classes (issue 27: `vgpu run --priority high|low` without --core, the recipe
 * for inference beside training). A job may join with a priority and no cap of its own (its
 * entry's cap reads 100, its soft word carries VGPU_SCHED_UNCAPPED): it has no budget, so its
 * credit is always its burst and nothing it uses is owed back.
 *  - `high` uncapped (a service) is always entitled: it preempts any holder of lower priority at
 *    once, as capped high does, and its leases are as long as anyone's (two quanta of 100 %).
 *  - `low` uncapped (background) is never entitled: it runs only on borrowed turns, when nobody
 *    entitled waits, so it takes what others leave, and any entitled waiter of another job
 *    preempts it at once, whatever that job's priority. It never preempts; it only asks an idle
 *    holder to give the lease back. Its waits are legitimate however long (the GPU is someone
 *    else's then): the limiter does not take them for a damaged schedule while the lease moves.
 *    It keeps clear of a service's expected return as any holder that service would preempt
 *    (it owes nobody, so without the credit-based slack), because on a GPU that time-slices, a
 *    request that finds background work queued waits for it (core_recipe.sh measures both).
 * The existing recipe, --core 30 high soft beside --core 70 soft low, is unchanged.
 * Through the arbiter, an uncapped job that is not background is held to a fair share
 * (vgpu_sched_fair_cap, a soft cap the daemon writes), and high is granted only as root's policy
 * says (cmd/daemon/arbiter.c, do_job): it preempts only within what it is owed.
 *
 * No locks: the lease is one 64-bit word taken and given back by compare-and-swap; waiters
 * sleep on a futex in the segment (bounded), and anyone may free the lease of a dead holder or
 * of one that overstays its deadline by VGPU_SCHED_GRACE_NS. libc only (linked into libvgpu.so). */
#ifndef VGPU_SCHED_H
#define VGPU_SCHED_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include "vgpu/log.h"

#define VGPU_SCHED_MAGIC       0x3148435355504756ULL /* "VGPUSCH1" */
#define VGPU_SCHED_VERSION     2
#define VGPU_SCHED_MAX_JOBS    32
#define VGPU_SCHED_MAX_PROCS   256
#define VGPU_SCHED_PERIOD_NS   50000000ULL   /* 50 ms: a 30% job runs 15 ms, idles 35 ms */
#define VGPU_SCHED_BORROW_NS   10000000ULL   /* a soft job's borrowed lease; a peer waits at most this */
#define VGPU_SCHED_MIN_LEASE_NS 1000000ULL   /* no lease shorter than 1 ms (handover cost) */
#define VGPU_SCHED_STARVE_NS   1000000000ULL /* eligible this long: served before any priority (the
                                                * low-priority floor: one turn a second) */
#define VGPU_SCHED_GRACE_NS    20000000ULL   /* a holder past deadline + grace loses the lease */
#define VGPU_SCHED_OVERLAP_NS  200000000ULL  /* a preempted holder's drain is believed this long */
#define VGPU_SCHED_NEW_WORK_NS 1000000ULL    /* wanting again this soon after giving the lease
                                              * back is not new work (it cannot preempt) */
#define VGPU_SCHED_ABSENT_NS   25000000ULL   /* waiters retry at least every 5 ms */
#define VGPU_SCHED_JOB_IDLE_NS 10000000000ULL /* a job entry with no process for 10 s is freed */
#define VGPU_SCHED_MAX_LEASE_NS (2 * VGPU_SCHED_PERIOD_NS) /* no valid lease is longer (two quanta of 100%) */
#define VGPU_SCHED_DEBT_NS     (4 * VGPU_SCHED_PERIOD_NS)  /* the most debt a job carries (overruns) */
#define VGPU_SCHED_IDLE_NS     200000ULL     /* a holder asked to yield gives the lease back after
                                                * launching nothing for this long, at least
                                                * (vgpu_sched_idle_need) */
#define VGPU_SCHED_IDLE_MAX_NS 5000000ULL    /* ... and never needs longer */
#define VGPU_SCHED_CLEAR_TOL_NS 500000ULL    /* keeping clear: queued work may end this long after a
                                                * job's expected return (its request waits that much) */
#define VGPU_SCHED_CLEAR_LATE_NS 1000000ULL  /* ... or this long, by a holder under its own cap */
#define VGPU_SCHED_CLEAR_AHEAD_NS 100000000ULL /* an expected return further ahead is not believed */
#define VGPU_SCHED_STALL_NS    3000000000ULL /* a launch never waits longer: past it, the schedule is
                                                * taken as damaged and the process runs unscheduled */

#define VGPU_SCHED_SOFT        1u            /* the soft word's bits */
#define VGPU_SCHED_UNCAPPED    2u

enum vgpu_sched_prio { VGPU_PRIO_LOW = -1, VGPU_PRIO_NORMAL = 0, VGPU_PRIO_HIGH = 1 };

struct vgpu_sched_job {
    _Atomic uint64_t key;          /* job identity (hash of the job id); 0 = free entry */
    _Atomic uint32_t cap;          /* percent 1..100 */
    _Atomic uint32_t soft;         /* VGPU_SCHED_SOFT: may borrow idle time; VGPU_SCHED_UNCAPPED
                                    * (with soft): a priority class without a cap ("Uncapped
                                    * priority classes"). Older readers see any nonzero as soft,
                                    * which an uncapped job is */
    _Atomic int32_t prio;          /* enum vgpu_sched_prio */
    _Atomic uint32_t spilling;     /* 1: the job has memory spilled off this GPU (--oversubscribe):
                                    * another spilling job does not count it among the busy
                                    * processes it yields to (limiter.c, "fair share"). Was
                                    * reserved (0) */
    _Atomic int64_t credit;        /* ns of GPU time owed to the job at credit_t */
    _Atomic uint64_t credit_t;     /* CLOCK_MONOTONIC of that value */
    _Atomic uint64_t used_ns;      /* GPU time charged so far */
    _Atomic uint64_t seen_ns;      /* last time a process of the job touched the entry */
    /* When the job is expected to want the GPU again, and the idle gap that guess is made of
     * (a service between requests; 0: no guess). Holders it would preempt keep clear of it
     * (vgpu_sched_keep_clear). Once reserved words: the layout is unchanged. back_gap holds the
     * gap in its low 32 bits and, in its high 32, how much later than back_at the return may
     * come (vgpu_sched_back_word): an older reader takes the whole word for a gap too long to
     * matter, and keeps clear as it did. */
    _Atomic uint64_t back_at;
    _Atomic uint64_t back_gap;
};

struct vgpu_sched_proc {
    _Atomic uint64_t pid;          /* 0 = free */
    _Atomic uint64_t start;        /* /proc/PID/stat start time: pid reuse is not mistaken for it */
    _Atomic uint32_t job;          /* index into jobs[] */
    _Atomic uint32_t held_out;     /* its last lease ran to its deadline (it had work throughout) */
    _Atomic uint64_t want_since;   /* 0, or when it began waiting for the lease */
    _Atomic uint64_t polled;       /* last try: a waiter silent for VGPU_SCHED_ABSENT_NS is passed over */
    _Atomic uint64_t pidns;        /* inode of its PID namespace: a pid means nothing in another one */
    _Atomic uint64_t released;     /* when it last gave a lease back: a process whose lease ran
                                    * out (held_out) and that wants again within
                                    * VGPU_SCHED_NEW_WORK_NS is saturating, not a request */
};

struct vgpu_sched_file {
    /* The first cache line is what a launch reads: the lease word and its deadline. */
    _Atomic uint64_t lease;        /* generation << 16 | (holder proc index + 1); low 16 bits 0 = free */
    _Atomic uint64_t lease_end;    /* deadline for launching; a preemptor sets it to now */
    _Atomic uint64_t lease_start;  /* CLOCK_MONOTONIC when granted */
    _Atomic uint32_t seq;          /* futex word: bumped whenever the lease is freed */
    _Atomic uint32_t yield_seq;    /* futex word the holder's helper thread sleeps on: bumped by a
                                    * waiter that preempts or asks the holder to yield */
    _Atomic uint32_t borrowed;     /* the current lease is a soft job's borrowed turn */
    uint32_t reserved1;
    _Atomic uint64_t overlap_until; /* a preempted holder's queued work finished then: the time
                                     * before it is charged to that holder, not to the next. Set
                                     * ahead (preemption time + VGPU_SCHED_OVERLAP_NS) by the
                                     * preemptor while the holder still drains */
    _Atomic uint64_t want_ns;      /* last time an entitled waiter of another job asked for the GPU */
    /* Header (second cache line). */
    _Atomic uint64_t magic;        /* written last at creation */
    uint32_t version, size;
    _Atomic uint32_t closing;      /* the last process is removing the segment (sched.c) */
    uint32_t reserved0;
    _Atomic uint64_t preemptions;  /* leases cut short by a preemptor (statistics) */
    _Atomic uint64_t yields;       /* leases given back early on request (statistics) */
    uint64_t dirhash;              /* hash of the machine-wide directory's path (vgpu_sched_sweep) */
    /* The lease holder's own GPU work since its grant, as its helper thread sees it: closed busy
     * time, and the start of the busy stretch going on (0: idle). Read by a holder it preempted,
     * still draining, which pays the rest of the overlap alone (vgpu_sched_preemptor_busy). */
    _Atomic uint64_t holder_busy_ns;
    _Atomic uint64_t holder_busy_from;
    struct vgpu_sched_job jobs[VGPU_SCHED_MAX_JOBS];
    struct vgpu_sched_proc procs[VGPU_SCHED_MAX_PROCS];
};

/* back_gap's word: an idle gap and the lateness of a return, each < 2^32 ns (both are at most
 * VGPU_SCHED_CLEAR_AHEAD_NS where they are believed). */
static inline uint64_t vgpu_sched_back_word(uint64_t gap, uint64_t late)
{
    return (late > 0xffffffffULL ? 0xffffffffULL : late) << 32 | (gap > 0xffffffffULL ? 0xffffffffULL : gap);
}
static inline uint64_t vgpu_sched_back_gap(uint64_t word) { return word & 0xffffffffULL; }
static inline uint64_t vgpu_sched_back_late(uint64_t word) { return word >> 32; }

static inline unsigned vgpu_lease_holder(uint64_t lease) { return (unsigned)(lease & 0xffff); } /* proc+1 */
static inline uint64_t vgpu_lease_gen(uint64_t lease) { return lease >> 16; }

/* ---- the arithmetic (pure; tests/unit/test_sched.c) ------------------------------------------ */

/* A job's key in every schedule, from its id (at most len bytes): what the library joins with
 * and what the arbiter's charges are kept by (cmd/daemon/charged.c), one function for both. */
uint64_t vgpu_sched_job_key(const char *id, size_t len);
/* cap% of the period. */
uint64_t vgpu_sched_quantum(unsigned cap);
/* Credit at `now`: credit + cap% of the time since credit_t, at most two quanta. */
int64_t vgpu_sched_credit_at(int64_t credit, uint64_t credit_t, unsigned cap, uint64_t now);
/* Credit after a lease that used `used` ns. A borrowed (soft) lease never leaves the job below
 * min(0, what it had before). */
int64_t vgpu_sched_charge(int64_t credit_now, uint64_t used, bool borrowed);
/* The credit to store when a lease ends at `now`: what accrued since credit_t (unclamped: the
 * job was running, not idling) minus `used`, then clamped to the burst. */
int64_t vgpu_sched_settle(int64_t credit, uint64_t credit_t, unsigned cap, uint64_t now, uint64_t used,
                          bool borrowed);
/* When a job with this credit reaches one quantum (now when it already has). */
uint64_t vgpu_sched_eligible_at(int64_t credit, uint64_t credit_t, unsigned cap);

/* Keeping clear of a job expected back at `back_at` after idle gaps of `gap` ns, and perhaps up
 * to `late` ns after that: 0 when `new_ns` of work may be queued now, behind which `work_ns` in
 * all would be queued, else the time until which the holder should queue nothing (back_at + tol:
 * how late after that return the work may end; once that has passed with the job not back,
 * back_at + late + tol). Go ahead when there is no guess, when even the late return is past (the
 * job came back, or did not) or too far ahead to believe, when all the work ends in time, and
 * when the new work would not fit in the job's gap anyway. A return late by a millisecond (a
 * client's sleep woken late) otherwise found a whole training kernel queued just before it: 2.8
 * ms for a 0.8 ms request on an H200 (issue 34). Pure. */
uint64_t vgpu_sched_clear_until(uint64_t now, uint64_t work_ns, uint64_t new_ns, uint64_t back_at, uint64_t gap,
                                uint64_t late, uint64_t tol);

/* One waiting process, as the picker sees it. */
struct vgpu_sched_cand {
    unsigned job;                  /* job index (several processes may share one) */
    unsigned cap;
    bool soft;
    int prio;
    int64_t credit;                /* at now */
    uint64_t want_since;
    uint64_t eligible_at;
};
/* Picks who gets a free lease now. Returns the candidate index, or -1 when nobody may run;
 * *borrow says the winner runs on borrowed (soft) time and *len how long its lease is. */
int vgpu_sched_pick(const struct vgpu_sched_cand *c, unsigned n, uint64_t now, bool *borrow, uint64_t *len);

/* ---- the shared file ---------------------------------------------------------------------------- */

struct vgpu_sched {
    struct vgpu_sched_file *f;     /* NULL when closed */
    int fd;                        /* a file mapping (tests), else -1 */
    int shmid;                     /* this user's own segment (no arbiter), else -1 */
    /* Through the arbiter (vgpu/arbiter.h): f is a read-only mapping of the daemon's schedule,
     * and every operation that writes is sent to the daemon, which performs it. */
    bool remote;
    bool lost;                     /* the daemon went away: reopen (vgpu_sched_lost) */
    uint32_t handle, gen;          /* the daemon's handle of the GPU, on connection `gen` */
    int limits_fd;                 /* the job's limits file, shown to the daemon with the job (a
                                    * root-owned one, vgpu run --user, sets the cap), or -1 */
    bool job_known;                /* the job entry the daemon last gave, and what it was asked */
    bool job_soft;
    int job_prio, job_index;
    unsigned job_cap;
    uint64_t job_key;
};

/* The segment key of GPU `uuid`'s schedule for user `uid` when no arbiter runs: a hash of the
 * machine-wide directory's path (vgpu_machinedir_path), the UUID, the uid and `attempt` (another
 * user may have made a segment under a key first: the next attempt's key is tried), never
 * IPC_PRIVATE. */
int vgpu_sched_key(const char *machinedir, const char *uuid, unsigned uid, unsigned attempt);
#define VGPU_SCHED_KEY_ATTEMPTS 32
/* Opens the schedule of GPU `uuid`: the arbiter's (vgpu daemon, vgpu/arbiter.h) when one answers,
 * else this user's own segment (mode 0600; jobs of other users are then not scheduled together
 * with ours), created when missing. 0, or -1 with e set (the caller runs unscheduled and says
 * so). */
int vgpu_sched_open(struct vgpu_sched *s, const char *uuid, struct vgpu_err *e);
/* The same, but never creates: 1 when the schedule exists (opened), 0 when not, -1 on error.
 * For readers (tests/progs/sched_peek, vgpu ps). */
int vgpu_sched_open_existing(struct vgpu_sched *s, const char *uuid, struct vgpu_err *e);
/* True when a schedule opened through the arbiter can no longer be used (the daemon went away,
 * or the process reconnected since): close it and open the schedule anew. */
bool vgpu_sched_lost(struct vgpu_sched *s);
/* The same, after the caller's own setup: the daemon executes what we ask there (vgpu daemon). */
int vgpu_sched_create_memfd(struct vgpu_sched *s, int *ro_fd, struct vgpu_err *e);
/* Opens a file by path (tests). */
int vgpu_sched_open_path(struct vgpu_sched *s, const char *path, struct vgpu_err *e);
/* Detaches; the last process of a schedule nobody uses removes the segment. */
void vgpu_sched_close(struct vgpu_sched *s);
/* The removal part of close, keeping the segment mapped (at exit, while other threads may
 * still read it). */
void vgpu_sched_retire(struct vgpu_sched *s);
/* Removes the schedules of this machine-wide directory that no live process is in. The last
 * process to leave a schedule removes it, but only its creator's processes (or root's) may: one
 * created by another user stays until a sweep by its creator or root (`vgpu ps`, the end of
 * `vgpu run`). Returns how many were removed. */
unsigned vgpu_sched_sweep(void);
/* True when the segment has been removed by its last user since we attached it (then the
 * caller closes it and opens the schedule anew: a new segment under the same key). */
bool vgpu_sched_removed(struct vgpu_sched *s);

/* Finds or adds the entry of job `key` and (re)writes its cap, policy and priority: called at
 * every lease boundary, so `vgpu limit` takes effect at the next turn. Cap 0 with a priority
 * other than normal: an uncapped priority class ("Uncapped priority classes"; soft is then
 * implied); cap 0 with normal priority reads as 100. Returns the job index, or -1 when the table
 * is full of live jobs. */
int vgpu_sched_job(struct vgpu_sched *s, uint64_t key, unsigned cap, bool soft, int prio, uint64_t now);
/* A fair share of the GPU for job `job`: 100 % divided among the owners of the jobs with a
 * process in the schedule (itself counted) that are not background, and an owner's share among
 * those of its jobs. owner[j]: who job entry j's job is (the arbiter: its login), NULL: each job
 * its own. What the arbiter grants an uncapped job ("Uncapped priority classes"): it preempts
 * only within that, so a user with four uncapped jobs gets one share, not four. At least 1. */
unsigned vgpu_sched_fair_cap(struct vgpu_sched *s, unsigned job, const uint32_t *owner);
/* Claims a process entry for (pid, start) in job `job`. Index, or -1 when full. */
int vgpu_sched_attach(struct vgpu_sched *s, unsigned job, pid_t pid, uint64_t start);
/* The last process of job `job` left at `now`: the job keeps its debt but no positive credit, so
 * that leaving and coming back (a DETACH and ATTACH, a reconnect) is never a way to a fresh turn.
 * For the owner of the schedule (the daemon); uncapped classes are untouched (no budget). */
void vgpu_sched_forfeit(struct vgpu_sched *s, unsigned job, uint64_t now);
void vgpu_sched_detach(struct vgpu_sched *s, int proc);

/* Tries to take the lease for process `proc` (marks it waiting first). true: granted, *lease
 * is the lease word to release with, *end the deadline. Frees a dead, overdue or invalid
 * holder's lease on the way. When another job holds the lease and `proc` is entitled, it
 * preempts the holder (higher priority, or credit near its burst) or asks it to yield. */
bool vgpu_sched_try_acquire(struct vgpu_sched *s, int proc, uint64_t now, uint64_t *lease, uint64_t *end);
/* True when the current lease may be taken from its holder: past its deadline + grace and not
 * draining (vgpu_sched_draining, believed at most VGPU_SCHED_OVERLAP_NS past the deadline), or a
 * word no valid grant wrote. A waiter frees such a lease; the daemon first charges it. */
bool vgpu_sched_overdue(struct vgpu_sched *s, uint64_t now);
/* Gives the lease back and charges its job `used` ns. Returns false when the lease had already
 * been taken away (overdue): the time is charged all the same. */
bool vgpu_sched_release(struct vgpu_sched *s, uint64_t lease, uint64_t used, uint64_t now);
/* The process stops waiting (gives up, or got no lease and will not retry). */
void vgpu_sched_unwant(struct vgpu_sched *s, int proc);
/* Sleeps until the lease is freed or `max_ns` passed (whichever first). */
void vgpu_sched_wait(struct vgpu_sched *s, uint64_t max_ns);
/* How long the caller should sleep at most before trying again (until its job is eligible,
 * capped to a few ms so that a lease freed without a wake-up is never missed for long). */
uint64_t vgpu_sched_retry_in(struct vgpu_sched *s, int proc, uint64_t now);
/* When proc's job may next take a turn: once its credit reaches a quantum, and not before
 * another job's lease ends (its deadline); at most a period from now. For a job of several GPUs,
 * whose other GPUs then wait for this one (lib/hook/gang.c). */
uint64_t vgpu_sched_turn_at(struct vgpu_sched *s, int proc, uint64_t now);

/* Process `proc` gave its lease back at `now`: with work to the end (`held_out`: its deadline
 * passed, or a preemptor took the lease), or early (idle, exiting). A waiter under its cap preempts only with new
 * work: not when its last lease ran out and it wants again within VGPU_SCHED_NEW_WORK_NS. */
void vgpu_sched_note_end(struct vgpu_sched *s, int proc, bool held_out, uint64_t now);
/* Process `proc` began to want the GPU at `t` (a launch arrived then; it may have waited for the
 * process's own lock before it could ask): recorded unless it already waits. */
void vgpu_sched_want_from(struct vgpu_sched *s, int proc, uint64_t t);
/* The holder of `lease` begins to wait for the work it queued (its deadline passed, or it gives
 * the lease back): until it releases, or VGPU_SCHED_OVERLAP_NS, waiters do not revoke the lease.
 * Bounded: one lease's overrun at most (never believed past the lease's deadline + its length,
 * nor + VGPU_SCHED_OVERLAP_NS), however often said; then the lease is revoked, and through the
 * daemon charged. */
void vgpu_sched_draining(struct vgpu_sched *s, uint64_t lease, uint64_t now);
/* A preempted holder finished draining at `now` (its release found the lease gone). */
void vgpu_sched_drained(struct vgpu_sched *s, uint64_t now);
/* The overlap of a preemption: while the preempted holder drains, its queued work and the
 * preemptor's share the GPU under the driver's time-slicing. While both have work each pays
 * half; while only the holder's drain runs (the preemptor's request is done, or it has not come
 * yet), that time is the holder's alone. Half and half for the whole drain charged an inference
 * client four times what it used, kept it from preempting, and let the training job run 87 %
 * under a 70 % cap (H100, tests/gpu/latency.sh); the holder paying all of it kept it far under
 * its cap beside a busy client (core_preempt.sh). Both sides measure the same thing: the
 * preemptor's helper thread tracks when its lease has work on the GPU (busy) and publishes it
 * (vgpu_sched_note_busy); the holder reads it when its drain ends.
 *
 * What a lease granted at `start` and given back at `now` is charged, when it was not itself
 * preempted. `ov` is the drain end of a holder it preempted, as read before our own drain
 * marked it (vgpu_sched_overlap_mark): at most `start` when there was no overlap, ahead of `now`
 * while that holder still drains (believed up to VGPU_SCHED_OVERLAP_NS). `busy_in_ov` is our
 * busy time inside [start, ov], `busy` our busy time in the whole lease. Pure. */
uint64_t vgpu_sched_used_overlapped(uint64_t start, uint64_t ov, uint64_t busy_in_ov, uint64_t busy, uint64_t now);
/* What a lease granted at `start`, preempted at `tp` and drained at `now`, is charged: all of it
 * but half the time the preemptor had work during the overlap (`busy`, at most now - tp). An
 * out-of-range tp (garbage) reads as start. Pure. */
uint64_t vgpu_sched_used_preempted(uint64_t start, uint64_t tp, uint64_t busy, uint64_t now);
/* How long a holder asked to yield must have been idle before it gives the lease back, after
 * `busy` ns of work in the lease: VGPU_SCHED_IDLE_NS, or a tenth of its busy time when that is
 * longer (at most VGPU_SCHED_IDLE_MAX_NS). A loaded machine deschedules a saturating loop between
 * its synchronize and its next launch for longer than VGPU_SCHED_IDLE_NS; giving the lease back
 * then made its next launch new work that preempted the job it had yielded to, and two --core 60
 * jobs took the lease from each other at every turn (70 % + 70 % on machine_wide.sh's two
 * simulated GPUs). A request of a service is short: its lease goes back after the usual 0.2 ms.
 * Pure. */
uint64_t vgpu_sched_idle_need(uint64_t busy);
/* The overlap mark (see vgpu_sched_used_overlapped). */
uint64_t vgpu_sched_overlap_mark(struct vgpu_sched *s);
/* True while a holder preempted by the current lease is still draining (the mark ahead of now,
 * believed). */
bool vgpu_sched_overlapping(struct vgpu_sched *s, uint64_t now);
/* When the lease granted at `start` was taken by a preemptor (the current lease's grant, if it
 * falls inside [start, now]; else start). */
uint64_t vgpu_sched_preempted_at(struct vgpu_sched *s, uint64_t start, uint64_t now);
/* The holder of `lease` publishes its busy time so far: `busy_ns` closed, and `busy_from` the
 * start of the busy stretch going on (0: idle now). */
void vgpu_sched_note_busy(struct vgpu_sched *s, uint64_t lease, uint64_t busy_ns, uint64_t busy_from);
/* For a holder preempted at `tp`, draining until `now`: the preemptor's busy time since, as it
 * published it, at most now - tp (garbage reads as busy throughout). */
uint64_t vgpu_sched_preemptor_busy(struct vgpu_sched *s, uint64_t tp, uint64_t now);
/* Process `proc` gave its lease back idle and expects to want the GPU again at `back_at`, after
 * an idle gap like its recent ones (`gap`), and at most `late` ns after that; 0, 0: no guess. */
void vgpu_sched_expect(struct vgpu_sched *s, int proc, uint64_t back_at, uint64_t gap, uint64_t late);
/* For the holder `proc`, about to queue `new_ns` of GPU work at `now` (`work_ns` queued in all
 * then): 0 to go ahead, else keep clear until the time returned (vgpu_sched_clear_until) of the
 * soonest job expected back that would preempt it, while the holder is not under its own cap
 * (see "Keeping clear"). */
uint64_t vgpu_sched_keep_clear(struct vgpu_sched *s, int proc, uint64_t now, uint64_t work_ns, uint64_t new_ns);
/* A lease was given back on request (statistics). */
void vgpu_sched_note_yield(struct vgpu_sched *s);
/* Job `job` has memory spilled off this GPU (or no longer). */
void vgpu_sched_set_spilling(struct vgpu_sched *s, int job, bool spilling);
/* True when a process `pid` (as NVML reports it: the host's pid) is in the schedule under a job
 * marked spilling. An entry of another PID namespace (a container) is found in this process's
 * view of /proc; where that namespace cannot be seen, its pid is compared as it is. */
bool vgpu_sched_pid_spilling(struct vgpu_sched *s, pid_t pid);
/* For the holder's helper thread: true when a waiter of another job asked for the GPU after
 * `since` (the holder should give the lease back once it is idle). */
bool vgpu_sched_wanted(struct vgpu_sched *s, uint64_t since);
/* Sleeps on the holder's futex until a waiter preempts or asks, or max_ns passed. *seen is the
 * value last seen (updated). */
void vgpu_sched_wait_yield(struct vgpu_sched *s, uint32_t *seen, uint64_t max_ns);
/* The lease word and deadline as stored (validated: a deadline beyond the longest valid lease
 * reads as already passed). */
uint64_t vgpu_sched_deadline(struct vgpu_sched *s, uint64_t lease);

/* Process liveness (pid + start time); overridable for tests. */
extern bool (*vgpu_sched_alive)(pid_t pid, uint64_t start);

#endif
