/* The accounting thread (issue 35 item 4): the one owner of the daemon's database. Records and
 * queries are served here, so a slow query, a busy file (root's sqlite3 holding it) or a flood of
 * records never delays a lease handover on the scheduling thread, which only checks a request,
 * copies it into a work item with a dup of the client's connection, and goes back to the
 * schedules (acct.c).
 *
 * The queue is bounded (ARB_ACCT_QUEUE), a user other than root has at most ARB_ACCT_USER_QUEUED
 * items in it, and ARB_ACCT_ROOT_ROOM are kept for root; the next item served is the oldest of
 * the user served least recently, so one user's stream of queries waits behind itself, not in
 * front of root's --totals. The answer goes on the dup: the main thread may close its own
 * descriptor (and reuse its number) meanwhile; the dup keeps the socket until the answer is
 * sent, and an answer to a client that has gone is simply lost. The client holds its
 * connection's mutex until its answer comes, so no other answer of its can overtake this one.
 * At exit the queue is served to its end (bounded by its size), then the database closed. */
#include "daemon/acct_worker.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <pwd.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "daemon/server.h"
#include "vgpu/exitcode.h"
#include "vgpu/log.h"

#define ARB_ACCT_BUSY_MS  200
#define ARB_ACCT_RETRY_NS 5000000000ULL   /* a database that cannot be opened: tried again after this */
#define STORED_MAX        256             /* ids stored and not yet told to the main thread */
#define ARB_ACCT_NICE     10

struct user_turn {
    bool set;
    uid_t uid;
    uint64_t served;                      /* the worker's counter when this user was last served (0: never) */
};

static struct {
    pthread_mutex_t mu;
    pthread_cond_t cv, idle;
    bool started, stopping, busy;
    struct arb_acct_work *items;          /* ARB_ACCT_QUEUE of them */
    bool used[ARB_ACCT_QUEUE], queued[ARB_ACCT_QUEUE];
    uint64_t order[ARB_ACCT_QUEUE];       /* when each was queued */
    uint64_t next_order, turns;
    struct user_turn users[ARB_ACCT_QUEUE * 2];
    char stored_id[STORED_MAX][VGPU_JOB_ID_LEN];
    uid_t stored_uid[STORED_MAX];
    unsigned nstored;
    pthread_t thread;
    /* The database: the thread's alone once started. */
    char path[PATH_MAX];
    struct vgpu_acct_store *s;
    uint64_t failed_at;
    char why[600];
} W = { .mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER, .idle = PTHREAD_COND_INITIALIZER };

static uint64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/* ---- the database ------------------------------------------------------------------------------ */

/* The database's directory: made (0755) when missing, and it must be ours and closed to others'
 * writes, else someone could swap the file under us. */
static int open_dir(const char *dir, struct vgpu_err *e)
{
    if (mkdir(dir, 0755) != 0 && errno != EEXIST) {
        vgpu_err_set(e, 1, "cannot create %s: %s", dir, strerror(errno));
        return -1;
    }
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        vgpu_err_set(e, 1, "cannot open %s: %s", dir, strerror(errno));
        if (fd >= 0)
            close(fd);
        return -1;
    }
    if (st.st_uid != geteuid() || (st.st_mode & 022)) {
        vgpu_err_set(e, 1, "%s is not the daemon's own directory (owner uid %u, mode %04o): make it root's, 0755 or "
                     "0700", dir, (unsigned)st.st_uid, (unsigned)(st.st_mode & 07777));
        close(fd);
        return -1;
    }
    return fd;
}

/* The database at `path` (absolute), opened (and made when missing), or NULL with e set. */
static struct vgpu_acct_store *open_store(const char *path, struct vgpu_err *e)
{
    struct stat pst;
    if (stat(path, &pst) == 0 && S_ISDIR(pst.st_mode)) {
        vgpu_err_set(e, VGPU_EXIT_USAGE, "accounting database %s is a directory: give the database file's path "
                     "(for example %s/%s)", path, path, VGPU_ACCT_DB_NAME);
        return NULL;
    }
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (!slash || !slash[1]) {
        vgpu_err_set(e, VGPU_EXIT_USAGE, "accounting database '%s': give the database file's absolute path", path);
        return NULL;
    }
    const char *file = path + (slash + 1 - dir);
    *slash = 0;
    int fd = open_dir(dir[0] ? dir : "/", e);
    if (fd < 0)
        return NULL;
    struct vgpu_acct_store *s = vgpu_acct_open(fd, dir[0] ? dir : "/", file, true, e);
    close(fd);
    return s;
}

int arb_acct_check(const char *path, struct vgpu_err *e)
{
    char def[PATH_MAX];
    if (!path) {
        arb_acct_default_path(def, sizeof def);
        path = def;
    }
    struct vgpu_acct_store *s = open_store(path, e);
    if (!s)
        return -1;
    vgpu_acct_close(s);
    return 0;
}

/* The reason `why` in a reply's msg, a field of fixed size in the protocol (struct vgpu_arb_rep):
 * whole when it fits. Else without the database's path, which root gave the daemon and its log
 * names ("its accounting database: ..."; issue 36 N9: a damaged database's advice was cut to
 * "move it away; vgpu start"); and when that is still too long, cut after a word and marked
 * so, with `tail` saying where the whole text is. */
static void refuse_fit(struct vgpu_arb_rep *r, int err, const char *why, const char *tail)
{
    const size_t cap = sizeof r->msg;
    char shorter[sizeof W.why + 32];
    r->rc = -err;
    size_t plen = strlen(W.path);
    if (strlen(why) >= cap && !strncmp(why, "accounting database ", 20) && plen && !strncmp(why + 20, W.path, plen) &&
        !strncmp(why + 20 + plen, ": ", 2)) {
        snprintf(shorter, sizeof shorter, "its accounting database: %s", why + 20 + plen + 2);
        why = shorter;
    }
    size_t n = strlen(why);
    if (n >= cap) {
        size_t room = cap - 1 - strlen(tail);
        n = room;
        while (n > 0 && why[n] != ' ')
            n--;
        while (n > 0 && (why[n - 1] == ' ' || why[n - 1] == ',' || why[n - 1] == ';' || why[n - 1] == ':'))
            n--;
        if (!n)
            n = room;
        snprintf(r->msg, cap, "%.*s%s", (int)n, why, tail);
        return;
    }
    memcpy(r->msg, why, n + 1);
}

static void refuse(struct vgpu_arb_rep *r, int err, const char *why)
{
    refuse_fit(r, err, why, " ...");
}

/* What a client is told when the database fails: root, whose file it is, gets the reason; other
 * users get where their records went and who can mend it, never advice about root's file. */
static void refuse_failed(uid_t uid, struct vgpu_arb_rep *r, const char *why)
{
    if (uid == 0)
        refuse_fit(r, EIO, why, " ... (the whole reason: vgpu daemon's log)");
    else
        refuse(r, EIO, "the arbiter cannot use its accounting database now (root: see vgpu daemon's log); records "
                       "stay in your own store meanwhile");
}

/* A failure of the database is logged, once for as long as it keeps failing the same way. The
 * store's reasons name the database already (issue 36 N9: the log line said "accounting
 * database P: accounting database P: ..."); another reason (its directory) gets the name. */
static void log_failure(const char *why)
{
    if (strcmp(W.why, why)) {
        if (strstr(why, W.path))
            vgpu_warn("%s (records go to each user's own store meanwhile)", why);
        else
            vgpu_warn("accounting database %s: %s (records go to each user's own store meanwhile)", W.path, why);
        snprintf(W.why, sizeof W.why, "%s", why);
    }
}

static struct vgpu_acct_store *store(uid_t uid, struct vgpu_arb_rep *r)
{
    if (W.s)
        return W.s;
    uint64_t now = mono_ns();
    if (W.failed_at && now - W.failed_at < ARB_ACCT_RETRY_NS) {
        refuse_failed(uid, r, W.why);
        return NULL;
    }
    struct vgpu_err e = { 0 };
    W.s = open_store(W.path, &e);
    if (!W.s) {
        W.failed_at = now;
        log_failure(e.msg);
        refuse_failed(uid, r, W.why);
        return NULL;
    }
    W.failed_at = 0;
    W.why[0] = 0;
    vgpu_acct_busy_timeout(W.s, ARB_ACCT_BUSY_MS);
    return W.s;
}

/* A store that failed mid-way (its file removed or damaged): logged, closed (opened again, and
 * checked, after ARB_ACCT_RETRY_NS) and the client told; a busy file (another writer holds it)
 * is only the client's to retry. */
static void refuse_store(uid_t uid, struct vgpu_arb_rep *r, const struct vgpu_err *e)
{
    if (e->code == VGPU_EXIT_BUSY) {
        refuse(r, EBUSY, e->msg);
        return;
    }
    log_failure(e->msg);
    refuse_failed(uid, r, e->msg);
    vgpu_acct_close(W.s);
    W.s = NULL;
    W.failed_at = mono_ns();
}

/* ---- the requests --------------------------------------------------------------------------------- */

static void note_stored(const struct vgpu_acct_record *rec)
{
    pthread_mutex_lock(&W.mu);
    if (W.nstored < STORED_MAX) {
        memcpy(W.stored_id[W.nstored], rec->id, VGPU_JOB_ID_LEN);
        W.stored_uid[W.nstored++] = rec->uid;
    }
    pthread_mutex_unlock(&W.mu);
}

static void do_record(struct arb_acct_work *w, struct vgpu_arb_rep *r)
{
    struct vgpu_acct_store *s = store(w->uid, r);
    if (!s)
        return;
    static struct vgpu_acct_record rec;
    size_t off = 0;
    uint64_t added = 0;
    for (uint64_t i = 0; i < w->count; i++) {
        size_t used = vgpu_acct_unpack(w->buf + off, w->len - off, &rec);
        if (!used)
            break;   /* packed by acct.c: cannot happen */
        off += used;
        /* Here, not on the scheduling thread: NSS may be slow. */
        struct passwd pwd, *pw = NULL;
        char pwbuf[4096];
        if (getpwuid_r(rec.uid, &pwd, pwbuf, sizeof pwbuf, &pw) != 0)
            pw = NULL;
        snprintf(rec.user, sizeof rec.user, "%s", pw ? pw->pw_name : "");
        struct vgpu_err e = { 0 };
        int rc = vgpu_acct_insert(s, &rec, &e);
        if (rc < 0) {
            refuse_store(w->uid, r, &e);   /* its charges are kept: the record comes again (handed over) */
            return;
        }
        note_stored(&rec);
        added += rc == 0;
    }
    r->rc = (int32_t)added;
}

struct page {
    char *out;
    size_t len, cap;
    uint64_t n;
    bool full;
};

static int put_record(const struct vgpu_acct_record *rec, void *arg)
{
    struct page *p = arg;
    size_t used = vgpu_acct_pack(rec, p->out + p->len, p->cap - p->len);
    if (!used) {
        p->full = true;
        return 1;
    }
    p->len += used;
    p->n++;
    return 0;
}

/* The caller's filter, narrowed to its own user unless it is root. */
static void filter_of(struct arb_acct_work *w, struct vgpu_acct_wire_filter *wf, struct vgpu_acct_filter *f)
{
    memcpy(wf, w->buf, sizeof *wf);   /* its size checked by acct.c */
    vgpu_acct_filter_unpack(wf, f);
    if (w->uid != 0) {
        f->by_uid = true;
        f->uid = w->uid;
    }
}

static void do_query(struct arb_acct_work *w, struct vgpu_arb_rep *r, void *out)
{
    struct vgpu_acct_wire_filter wf;
    struct vgpu_acct_filter f;
    filter_of(w, &wf, &f);
    struct vgpu_acct_store *s = store(w->uid, r);
    if (!s)
        return;
    /* A page: as many one-GPU records as fit (jobs with more GPUs end it sooner: put_record). */
    unsigned most = VGPU_ARB_MAX_PAYLOAD / (offsetof(struct vgpu_acct_record, gpu) + sizeof(struct vgpu_acct_gpu));
    f.limit = f.limit && f.limit < most ? f.limit : most;
    struct page p = { .out = out, .cap = VGPU_ARB_MAX_PAYLOAD };
    struct vgpu_err e = { 0 };
    if (vgpu_acct_query(s, &f, put_record, &p, &e) < 0) {
        refuse_store(w->uid, r, &e);
        return;
    }
    r->len = (uint32_t)p.len;
    r->v[0] = p.n;
    r->v[1] = p.full || p.n == f.limit;
}

struct totals_page {
    struct vgpu_acct_total *out;
    size_t n, cap;
    uint64_t skip;
    bool full;
};

static int put_total(const struct vgpu_acct_total *t, void *arg)
{
    struct totals_page *p = arg;
    if (p->skip) {
        p->skip--;
        return 0;
    }
    if (p->n == p->cap) {
        p->full = true;
        return 1;
    }
    p->out[p->n++] = *t;
    return 0;
}

static void do_totals(struct arb_acct_work *w, struct vgpu_arb_rep *r, void *out)
{
    struct vgpu_acct_wire_filter wf;
    struct vgpu_acct_filter f;
    filter_of(w, &wf, &f);
    struct vgpu_acct_store *s = store(w->uid, r);
    if (!s)
        return;
    /* From the kept aggregates (store.c, totals_by_day and _by_hour): never a pass over every record. */
    struct totals_page p = { .out = out, .cap = VGPU_ARB_MAX_PAYLOAD / sizeof(struct vgpu_acct_total), .skip = w->count };
    struct vgpu_err e = { 0 };
    if (vgpu_acct_totals(s, &f, put_total, &p, &e) < 0) {
        refuse_store(w->uid, r, &e);
        return;
    }
    r->len = (uint32_t)(p.n * sizeof *p.out);
    r->v[0] = p.n;
    r->v[1] = p.full;
}

static void serve(struct arb_acct_work *w)
{
    static struct {
        struct vgpu_arb_rep r;
        char out[VGPU_ARB_MAX_PAYLOAD];
    } rep;
    memset(&rep.r, 0, sizeof rep.r);
    switch (w->op) {
    case VGPU_ARB_ACCT_RECORD: do_record(w, &rep.r); break;
    case VGPU_ARB_ACCT_QUERY: do_query(w, &rep.r, rep.out); break;
    case VGPU_ARB_ACCT_TOTALS: do_totals(w, &rep.r, rep.out); break;
    default: refuse(&rep.r, ENOSYS, "no such accounting request"); break;
    }
    if (rep.r.len > VGPU_ARB_MAX_PAYLOAD)
        rep.r.len = 0;
    /* A client that does not read its answers loses them; the thread never waits for it. */
    if (w->fd >= 0)
        send(w->fd, &rep, sizeof rep.r + rep.r.len, MSG_NOSIGNAL | MSG_DONTWAIT);
}

/* ---- the queue ------------------------------------------------------------------------------------- */

static struct user_turn *turn_of(uid_t uid)
{
    struct user_turn *spare = NULL;
    for (size_t i = 0; i < sizeof W.users / sizeof W.users[0]; i++) {
        struct user_turn *u = &W.users[i];
        if (u->set && u->uid == uid)
            return u;
        if (!spare || (spare->set && (!u->set || u->served < spare->served)))
            spare = u;
    }
    *spare = (struct user_turn){ .set = true, .uid = uid };   /* the longest unserved user is forgotten */
    return spare;
}

/* The next item: the oldest of the user served least recently. */
static int next_item(void)
{
    int best = -1;
    uint64_t best_turn = 0;
    for (int i = 0; i < ARB_ACCT_QUEUE; i++) {
        if (!W.queued[i])
            continue;
        uint64_t t = turn_of(W.items[i].uid)->served;
        if (best < 0 || t < best_turn || (t == best_turn && W.order[i] < W.order[best])) {
            best = i;
            best_turn = t;
        }
    }
    return best;
}

static void *worker(void *arg)
{
    (void)arg;
    /* Below the jobs and the scheduling thread: a flood of records costs the database's CPU time,
     * which on a small machine would otherwise come out of the jobs' own (under ASan, 2 cores:
     * root's --core 30 job at 14 % beside a flood, against 21 % beside as many HELLOs). */
    if (setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), ARB_ACCT_NICE) != 0)
        vgpu_debug("accounting thread: cannot lower its priority: %s", strerror(errno));
    pthread_mutex_lock(&W.mu);
    for (;;) {
        int i = next_item();
        if (i < 0) {
            W.busy = false;
            pthread_cond_broadcast(&W.idle);
            if (W.stopping)
                break;
            pthread_cond_wait(&W.cv, &W.mu);
            continue;
        }
        W.busy = true;
        W.queued[i] = false;
        turn_of(W.items[i].uid)->served = ++W.turns;
        pthread_mutex_unlock(&W.mu);
        serve(&W.items[i]);
        pthread_mutex_lock(&W.mu);
        if (W.items[i].fd >= 0)
            close(W.items[i].fd);
        W.used[i] = false;
    }
    pthread_mutex_unlock(&W.mu);
    return NULL;
}

/* At exit: what is queued is served (records are not lost to a SIGTERM), then the file closed. */
static void stop_worker(void)
{
    pthread_mutex_lock(&W.mu);
    W.stopping = true;
    pthread_cond_broadcast(&W.cv);
    pthread_mutex_unlock(&W.mu);
    pthread_join(W.thread, NULL);
    vgpu_acct_close(W.s);
    W.s = NULL;
}

int arb_acct_worker_start(const char *path)
{
    if (W.started)
        return 0;
    snprintf(W.path, sizeof W.path, "%s", path);
    W.items = calloc(ARB_ACCT_QUEUE, sizeof *W.items);
    if (!W.items)
        return -1;
    int err = pthread_create(&W.thread, NULL, worker, NULL);
    if (err) {
        errno = err;
        return -1;
    }
    W.started = true;
    atexit(stop_worker);
    return 0;
}

struct arb_acct_work *arb_acct_worker_take(uid_t uid)
{
    if (!W.started)
        return NULL;
    pthread_mutex_lock(&W.mu);
    unsigned all = 0, own = 0;
    int free_slot = -1;
    for (int i = 0; i < ARB_ACCT_QUEUE; i++) {
        if (!W.used[i]) {
            if (free_slot < 0)
                free_slot = i;
            continue;
        }
        all++;
        own += W.items[i].uid == uid;
    }
    bool room = free_slot >= 0 && (uid == 0 || (own < ARB_ACCT_USER_QUEUED && all < ARB_ACCT_QUEUE - ARB_ACCT_ROOT_ROOM));
    if (room)
        W.used[free_slot] = true;
    pthread_mutex_unlock(&W.mu);
    if (!room)
        return NULL;
    struct arb_acct_work *w = &W.items[free_slot];
    w->fd = -1;
    w->uid = uid;
    return w;
}

void arb_acct_worker_queue(struct arb_acct_work *w)
{
    int i = (int)(w - W.items);
    pthread_mutex_lock(&W.mu);
    W.order[i] = ++W.next_order;
    W.queued[i] = true;
    pthread_cond_signal(&W.cv);
    pthread_mutex_unlock(&W.mu);
}

void arb_acct_worker_drop(struct arb_acct_work *w)
{
    int i = (int)(w - W.items);
    if (w->fd >= 0)
        close(w->fd);
    w->fd = -1;
    pthread_mutex_lock(&W.mu);
    W.used[i] = false;
    pthread_mutex_unlock(&W.mu);
}

void arb_acct_worker_client_gone(uint64_t client)
{
    if (!W.started)
        return;
    pthread_mutex_lock(&W.mu);
    for (int i = 0; i < ARB_ACCT_QUEUE; i++) {
        if (!W.queued[i] || W.items[i].client != client || W.items[i].op == VGPU_ARB_ACCT_RECORD)
            continue;
        W.queued[i] = false;
        W.used[i] = false;
        close(W.items[i].fd);
        W.items[i].fd = -1;
    }
    pthread_mutex_unlock(&W.mu);
}

unsigned arb_acct_worker_stored(char (*ids)[VGPU_JOB_ID_LEN], uid_t *uids, unsigned cap)
{
    pthread_mutex_lock(&W.mu);
    unsigned n = W.nstored < cap ? W.nstored : cap;
    memcpy(ids, W.stored_id, n * sizeof *ids);
    memcpy(uids, W.stored_uid, n * sizeof *uids);
    memmove(W.stored_id, W.stored_id + n, (W.nstored - n) * sizeof *ids);
    memmove(W.stored_uid, W.stored_uid + n, (W.nstored - n) * sizeof *uids);
    W.nstored -= n;
    pthread_mutex_unlock(&W.mu);
    return n;
}
