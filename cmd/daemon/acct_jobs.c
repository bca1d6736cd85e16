/* The jobs the daemon saw start (issue 35 item 5): vgpu run names its job's id on its own
 * connection before the command starts (VGPU_ARB_ACCT_START), and from then on the job's record
 * is taken only from that connection, or from root's, or (once that connection is gone: its
 * vgpu run was killed and a reader recovers the record) from a connection of the same user.
 * So no user can send another user's job's record first (its id read off the schedule), or
 * their own job's before its vgpu run does. An id another user registered is refused. A job
 * whose record is stored leaves the table.
 *
 * Bounded: ARB_JOBS_MAX entries; a user other than root holds ARB_JOBS_USER_MAX (its oldest
 * goes first when it wants more), and ARB_JOBS_ROOT_ROOM are left for root. The daemon's memory
 * only: jobs that started before a restart are not here, and their records are taken as before
 * (as their sender's, the first of an id kept). */
#include "daemon/server.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "vgpu/acct.h"

#define ARB_JOBS_MAX       8192
#define ARB_JOBS_USER_MAX  512
#define ARB_JOBS_ROOT_ROOM 1024

struct started {
    char id[VGPU_JOB_ID_LEN];      /* "": free */
    uid_t uid;                     /* the user whose connection named it */
    uint64_t client;               /* that connection (0: gone) */
    uint64_t seq;                  /* when named: the oldest goes first */
};

static struct {
    struct started *t;
    unsigned n;
    uint64_t seq;
} J;

static struct started *find(const char *id)
{
    for (unsigned i = 0; J.t && i < ARB_JOBS_MAX; i++)
        if (J.t[i].id[0] && !strncmp(J.t[i].id, id, VGPU_JOB_ID_LEN))
            return &J.t[i];
    return NULL;
}

int arb_acct_job_start(const struct arb_client *c, const char *id, const char **why)
{
    if (!J.t && !(J.t = calloc(ARB_JOBS_MAX, sizeof *J.t))) {
        *why = "the arbiter is out of memory";
        return -ENOMEM;
    }
    struct started *e = find(id);
    if (e && e->uid != c->uid) {
        *why = "another user's job has that id";
        return -EEXIST;
    }
    if (!e) {
        struct started *free_slot = NULL, *own_oldest = NULL;
        unsigned own = 0;
        for (unsigned i = 0; i < ARB_JOBS_MAX; i++) {
            struct started *s = &J.t[i];
            if (!s->id[0]) {
                free_slot = free_slot ? free_slot : s;
            } else if (s->uid == c->uid) {
                own++;
                if (!own_oldest || s->seq < own_oldest->seq)
                    own_oldest = s;
            }
        }
        if (c->uid != 0 && own >= ARB_JOBS_USER_MAX)
            e = own_oldest;   /* its own oldest job's record is then taken as an unregistered one */
        else if (free_slot && (c->uid == 0 || J.n < ARB_JOBS_MAX - ARB_JOBS_ROOT_ROOM))
            e = free_slot, J.n++;
        else {
            *why = "the arbiter's table of running jobs is full";
            return -ENOSPC;
        }
    }
    memset(e, 0, sizeof *e);
    memcpy(e->id, id, strnlen(id, VGPU_JOB_ID_LEN - 1));
    e->uid = c->uid;
    e->client = c->id;
    e->seq = ++J.seq;
    return 0;
}

int arb_acct_job_may_record(const struct arb_client *c, const char *id, const char **why)
{
    if (c->uid == 0)
        return 0;
    struct started *e = find(id);
    if (!e)
        return 0;   /* a job this daemon did not see start */
    if (e->uid != c->uid) {
        *why = "that job is another user's (or root's, run with --user): its record is not yours to send";
        return -EPERM;
    }
    if (e->client && e->client != c->id) {
        *why = "that job's record comes from its own vgpu run";
        return -EPERM;
    }
    return 0;
}

bool arb_acct_job_seen(const char *id)
{
    return find(id) != NULL;
}

void arb_acct_job_done(const char *id, uid_t uid)
{
    struct started *e = find(id);
    if (e && (e->uid == uid || e->uid == 0)) {
        memset(e, 0, sizeof *e);
        J.n--;
    }
}

void arb_acct_jobs_client_gone(uint64_t client)
{
    for (unsigned i = 0; J.t && i < ARB_JOBS_MAX; i++)
        if (J.t[i].id[0] && J.t[i].client == client)
            J.t[i].client = 0;
}
