/* The accounting database (vgpu/acct.h): opening it safely, its schema and migrations, inserting,
 * querying and pruning. Every change is one transaction, so a crash or a full disk mid-write
 * leaves the database as it was before (SQLite's WAL rolls an unfinished transaction back). */
#include "vgpu/acct.h"

#include <errno.h>
#include <fcntl.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "vgpu/exitcode.h"
#include "vgpu/machinedir.h"
#include "vgpu/policy.h"
#include "vgpu/statedir.h"

struct vgpu_acct_store {
    sqlite3 *db;
    char path[4200];
    bool read_only;                     /* on a read-only file system: opened to read only */
};

/* What to do about a failed SQLite call, by its result code. */
static const char *advice(int rc)
{
    switch (rc & 0xff) {
    case SQLITE_BUSY:
    case SQLITE_LOCKED: return " (another program holds the database's write lock: it is tried again by the next "
                               "vgpu acct)";
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB: return " (the database is damaged: move it away; vgpu starts a new one)";
    case SQLITE_READONLY:
    case SQLITE_PERM:
    case SQLITE_CANTOPEN: return " (check the file's owner and mode: it must be yours, 0600)";
    default: return "";
    }
}

/* SQLite says "disk I/O error" when a full file system stops it where it cannot tell (the WAL's
 * shared memory of a new database, a write of its pages): a file system with no block left for
 * a user is full, whatever SQLite called it. */
static bool no_space_left(const char *path)
{
    char dir[4200];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash)
        *(slash == dir ? slash + 1 : slash) = 0;
    struct statvfs v;
    return statvfs(slash ? dir : ".", &v) == 0 && (uint64_t)v.f_bavail * v.f_frsize < 64 * 1024;
}

static int fail(struct vgpu_acct_store *s, int rc, const char *what, struct vgpu_err *e)
{
    /* Not the file's owner or mode: nothing can be written on that file system (issue 36 N11). */
    if (s->read_only) {
        vgpu_err_set(e, VGPU_EXIT_FAIL, "accounting database %s: %s: it is on a read-only file system: nothing can "
                     "be written there until it is writable again (a job's record waits in its region meanwhile)",
                     s->path, what);
        return -1;
    }
    int code = (rc & 0xff) == SQLITE_BUSY || (rc & 0xff) == SQLITE_LOCKED ? VGPU_EXIT_BUSY : VGPU_EXIT_FAIL;
    if ((rc & 0xff) == SQLITE_FULL || ((rc & 0xff) == SQLITE_IOERR && no_space_left(s->path))) {
        vgpu_err_set(e, VGPU_EXIT_FAIL, "accounting database %s: the file system is full (%s failed): free space "
                     "there; a job's record is kept in its region meanwhile and written by the next vgpu acct",
                     s->path, what);
        return -1;
    }
    vgpu_err_set(e, code, "accounting database %s: %s: %s%s", s->path, what,
                 s->db ? sqlite3_errmsg(s->db) : sqlite3_errstr(rc), advice(rc));
    return -1;
}

static int exec(struct vgpu_acct_store *s, const char *sql, const char *what, struct vgpu_err *e)
{
    int rc = sqlite3_exec(s->db, sql, NULL, NULL, NULL);
    return rc == SQLITE_OK ? 0 : fail(s, rc, what, e);
}

/* Version 1: jobs and their GPUs. Version 2 adds how GPU time was measured, the energy, and
 * whether the record was recovered from the region (with an approximate end). A fixture of
 * version 1 is migrated by tests/cli/acct.sh. */
static const char schema_v1[] =
    "CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);"
    "CREATE TABLE IF NOT EXISTS jobs(id TEXT PRIMARY KEY, name TEXT NOT NULL, uid INTEGER NOT NULL,"
    " user TEXT NOT NULL, command TEXT NOT NULL, start_ns INTEGER NOT NULL, end_ns INTEGER NOT NULL,"
    " exit_code INTEGER NOT NULL, exit_signal INTEGER NOT NULL, run_as_user INTEGER NOT NULL);"
    "CREATE INDEX IF NOT EXISTS jobs_by_end ON jobs(end_ns);"
    "CREATE TABLE IF NOT EXISTS job_gpus(job_id TEXT NOT NULL REFERENCES jobs(id) ON DELETE CASCADE,"
    " ordinal INTEGER NOT NULL, uuid TEXT NOT NULL, nvml_index INTEGER NOT NULL, mem_limit_bytes INTEGER NOT NULL,"
    " core_limit INTEGER NOT NULL, core_policy TEXT NOT NULL, priority INTEGER NOT NULL,"
    " oversub_device_bytes INTEGER NOT NULL, gpu_ns INTEGER NOT NULL, throttled_ns INTEGER NOT NULL,"
    " mem_peak_bytes INTEGER NOT NULL, mem_byte_seconds REAL NOT NULL, PRIMARY KEY(job_id, ordinal));"
    "INSERT OR REPLACE INTO meta VALUES('schema_version', '1');";
static const char migrate_v1_v2[] =
    "ALTER TABLE jobs ADD COLUMN recovered INTEGER NOT NULL DEFAULT 0;"
    "ALTER TABLE jobs ADD COLUMN end_approximate INTEGER NOT NULL DEFAULT 0;"
    /* Version 1 recorded GPU time only where the schedule measured it: 'schedule' for capped
     * GPUs, 'none' elsewhere, as version 2 writes it. */
    "ALTER TABLE job_gpus ADD COLUMN gpu_time_source TEXT NOT NULL DEFAULT 'none';"
    "UPDATE job_gpus SET gpu_time_source = 'schedule' WHERE core_limit > 0;"
    "ALTER TABLE job_gpus ADD COLUMN energy_mj INTEGER;"
    "UPDATE meta SET value = '2' WHERE key = 'schema_version';";
/* Version 3: bytes migrated by an oversubscribed job (NULL: unknown, or not oversubscribed). */
static const char migrate_v2_v3[] =
    "ALTER TABLE job_gpus ADD COLUMN migrated_bytes INTEGER;"
    "UPDATE meta SET value = '3' WHERE key = 'schema_version';";
/* Version 4: totals per hour and per day (UTC, by the job's end), user and GPU (with the highest
 * NVML index it had, as --totals shows it, a removed record's included), kept
 * by triggers in the same transaction as the records they add up, whoever writes them (vgpu,
 * root's sqlite3), so that vgpu acct --totals adds up whole days, then whole hours at the edges
 * of [since, until), then the records of the partial hours left (vgpu_acct_totals): 100 000
 * records took 95-130 ms as one join and GROUP BY of them all. A record added adds its GPUs
 * (AFTER INSERT on job_gpus: its job row is there first); a record removed (pruned, handed over
 * to the daemon) subtracts them before they go (BEFORE DELETE on jobs, whose ON DELETE CASCADE
 * then removes the GPUs), and a period that holds no job any more is removed. */
#define ACCT_HOUR_NS "3600000000000"
#define ACCT_DAY_NS "86400000000000"
#define TOTALS_TABLE(T)                                                                                               \
    "CREATE TABLE IF NOT EXISTS " T "(period INTEGER NOT NULL, uid INTEGER NOT NULL, uuid TEXT NOT NULL,"            \
    " nvml_index INTEGER NOT NULL, user TEXT NOT NULL, jobs INTEGER NOT NULL, gpu_ns INTEGER NOT NULL,"            \
    " mem_byte_seconds REAL NOT NULL, energy_mj INTEGER NOT NULL, energy_jobs INTEGER NOT NULL,"                    \
    " PRIMARY KEY(period, uid, uuid)) WITHOUT ROWID;"
/* Version 5: user_jobs, the jobs counted for their user in a row: each job at its first GPU
 * (the lowest ordinal: vgpu inserts a record's GPUs in that order, so the first row of a job the
 * trigger sees is that GPU), so that a sum over a user's GPUs counts a job of several GPUs once. */
#define FIRST_GPU(g) " (" g ".ordinal = (SELECT min(x.ordinal) FROM job_gpus x WHERE x.job_id = " g ".job_id))"
/* Adds rows `g` (job_gpus columns) of job `j` (jobs columns) FROM `src` WHERE `where` to table T
 * of periods of P ns. */
#define TOTALS_ADD(T, P, j, g, src, where)                                                                            \
    " INSERT INTO " T "(period, uid, uuid, nvml_index, user, jobs, gpu_ns, mem_byte_seconds, energy_mj,"            \
    " energy_jobs, user_jobs, mem_requested_byte_seconds, mem_borrowed_byte_seconds) SELECT " j ".end_ns / " P ","  \
    " " j ".uid, " g ".uuid, " g ".nvml_index, " j ".user, 1, " g ".gpu_ns, " g ".mem_byte_seconds,"                 \
    " coalesce(" g ".energy_mj, 0), " g ".energy_mj IS NOT NULL," FIRST_GPU(g) ", " g ".mem_requested_byte_seconds," \
    " " g ".mem_borrowed_byte_seconds"                                                                              \
    " FROM " src " WHERE " where " ON CONFLICT(period, uid, uuid) DO UPDATE SET user = max(user, excluded.user),"   \
    " nvml_index = max(nvml_index, excluded.nvml_index), jobs = jobs + 1, gpu_ns = gpu_ns + excluded.gpu_ns,"      \
    " mem_byte_seconds = mem_byte_seconds + excluded.mem_byte_seconds,"                                             \
    " energy_mj = energy_mj + excluded.energy_mj, energy_jobs = energy_jobs + excluded.energy_jobs,"                \
    " user_jobs = user_jobs + excluded.user_jobs,"                                                                  \
    " mem_requested_byte_seconds = mem_requested_byte_seconds + excluded.mem_requested_byte_seconds,"               \
    " mem_borrowed_byte_seconds = mem_borrowed_byte_seconds + excluded.mem_borrowed_byte_seconds;"
/* Subtracts the GPUs of job OLD (a jobs row), and removes the periods of its user left empty. */
#define TOTALS_SUB_JOB(T, P)                                                                                          \
    " UPDATE " T " SET jobs = jobs - 1, gpu_ns = " T ".gpu_ns - g.gpu_ns,"                                          \
    " mem_byte_seconds = " T ".mem_byte_seconds - g.mem_byte_seconds,"                                              \
    " energy_mj = " T ".energy_mj - coalesce(g.energy_mj, 0), energy_jobs = energy_jobs - (g.energy_mj IS NOT NULL),"\
    " user_jobs = user_jobs -" FIRST_GPU("g") ","                                                                   \
    " mem_requested_byte_seconds = " T ".mem_requested_byte_seconds - g.mem_requested_byte_seconds,"                \
    " mem_borrowed_byte_seconds = " T ".mem_borrowed_byte_seconds - g.mem_borrowed_byte_seconds"                    \
    " FROM job_gpus g WHERE g.job_id = OLD.id AND " T ".period = OLD.end_ns / " P " AND " T ".uid = OLD.uid"          \
    " AND " T ".uuid = g.uuid;"                                                                                     \
    " DELETE FROM " T " WHERE period = OLD.end_ns / " P " AND uid = OLD.uid AND jobs <= 0;"
/* Subtracts job_gpus row OLD. */
#define TOTALS_SUB_GPU(T, P)                                                                                          \
    " UPDATE " T " SET jobs = jobs - 1, gpu_ns = gpu_ns - OLD.gpu_ns,"                                              \
    " mem_byte_seconds = mem_byte_seconds - OLD.mem_byte_seconds, energy_mj = energy_mj - coalesce(OLD.energy_mj, 0),"\
    " energy_jobs = energy_jobs - (OLD.energy_mj IS NOT NULL), user_jobs = user_jobs -" FIRST_GPU("OLD") ","        \
    " mem_requested_byte_seconds = mem_requested_byte_seconds - OLD.mem_requested_byte_seconds,"                    \
    " mem_borrowed_byte_seconds = mem_borrowed_byte_seconds - OLD.mem_borrowed_byte_seconds"                        \
    " WHERE (period, uid) = (SELECT end_ns / " P ", uid FROM jobs WHERE id = OLD.job_id)"                           \
    " AND uuid = OLD.uuid;"                                                                                         \
    " DELETE FROM " T " WHERE jobs <= 0;"
#define TOTALS_FILL(T, P)                                                                                             \
    "INSERT INTO " T "(period, uid, uuid, nvml_index, user, jobs, gpu_ns, mem_byte_seconds, energy_mj, energy_jobs,"  \
    " user_jobs, mem_requested_byte_seconds, mem_borrowed_byte_seconds) SELECT j.end_ns / " P ", j.uid, g.uuid,"    \
    " max(g.nvml_index), max(j.user), count(*), sum(g.gpu_ns), sum(g.mem_byte_seconds), sum(coalesce(g.energy_mj, 0)),"\
    " count(g.energy_mj), sum(" FIRST_GPU("g") "), sum(g.mem_requested_byte_seconds), sum(g.mem_borrowed_byte_seconds)"\
    " FROM jobs j JOIN job_gpus g ON g.job_id = j.id GROUP BY 1, 2, 3;"
#define TOTALS_BOTH(what) what("totals_by_hour", ACCT_HOUR_NS) what("totals_by_day", ACCT_DAY_NS)
#define ADD_NEW_GPU(T, P) TOTALS_ADD(T, P, "j", "NEW", "jobs j", "j.id = NEW.job_id")
#define MOVE_JOB(T, P) TOTALS_SUB_JOB(T, P) TOTALS_ADD(T, P, "NEW", "g", "job_gpus g", "g.job_id = NEW.id")
#define REDO_GPU(T, P) TOTALS_SUB_GPU(T, P) ADD_NEW_GPU(T, P)
static const char migrate_v3_v4[] =
    TOTALS_TABLE("totals_by_hour") TOTALS_TABLE("totals_by_day")
    "UPDATE meta SET value = '4' WHERE key = 'schema_version';";
/* Version 5 (issue 36): the bounds a record was cut to (jobs.bounded, VGPU_ACCT_BOUND_*), and the
 * totals' user_jobs (FIRST_GPU). It drops version 4's triggers (which version 3 databases get no
 * more: the tables come from version 4, the triggers that fill them from version 7 now, which
 * every migration ends with). The records already there are bounded as vgpu_acct_bound bounds a
 * record whose GPUs' memory is unknown (a record of a damaged region stored by an older vgpu: a
 * core limit of 1753333957 %); version 7 then adds the totals up again from the records (0.3 s
 * for 100 000 records, once). */
#define V5_BOUND_MEM "(1 << 50)"
static const char migrate_v4_v5[] =
    "DROP TRIGGER IF EXISTS totals_add; DROP TRIGGER IF EXISTS totals_sub; DROP TRIGGER IF EXISTS totals_move;"
    "DROP TRIGGER IF EXISTS totals_regpu;"
    "ALTER TABLE jobs ADD COLUMN bounded INTEGER NOT NULL DEFAULT 0;"
    "ALTER TABLE totals_by_hour ADD COLUMN user_jobs INTEGER NOT NULL DEFAULT 0;"
    "ALTER TABLE totals_by_day ADD COLUMN user_jobs INTEGER NOT NULL DEFAULT 0;"
    /* SQLite keeps integers signed: a limit of 1.8e19 bytes reads as a negative one. */
    "UPDATE jobs SET end_ns = start_ns, bounded = bounded | 1 WHERE end_ns < start_ns;"
    "UPDATE jobs SET bounded = bounded | 2 WHERE id IN (SELECT job_id FROM job_gpus WHERE mem_limit_bytes < 0"
    " OR mem_limit_bytes > " V5_BOUND_MEM " OR oversub_device_bytes < 0 OR oversub_device_bytes > " V5_BOUND_MEM ");"
    "UPDATE jobs SET bounded = bounded | 4 WHERE id IN (SELECT job_id FROM job_gpus WHERE core_limit < 0"
    " OR core_limit > 100);"
    "UPDATE jobs SET bounded = bounded | 8 WHERE id IN (SELECT g.job_id FROM job_gpus g JOIN jobs j ON j.id = g.job_id"
    " WHERE g.gpu_ns < 0 OR g.gpu_ns > j.end_ns - j.start_ns);"
    "UPDATE jobs SET bounded = bounded | 16 WHERE id IN (SELECT job_id FROM job_gpus WHERE mem_peak_bytes < 0"
    " OR mem_peak_bytes > " V5_BOUND_MEM ");"
    "UPDATE jobs SET bounded = bounded | 32 WHERE id IN (SELECT g.job_id FROM job_gpus g JOIN jobs j ON j.id = g.job_id"
    " WHERE NOT g.mem_byte_seconds >= 0"
    " OR g.mem_byte_seconds > " V5_BOUND_MEM " * ((j.end_ns - j.start_ns) / 1e9 + 1));"
    "UPDATE job_gpus SET"
    " mem_limit_bytes = CASE WHEN mem_limit_bytes < 0 OR mem_limit_bytes > " V5_BOUND_MEM " THEN " V5_BOUND_MEM
    " ELSE mem_limit_bytes END,"
    " oversub_device_bytes = CASE WHEN oversub_device_bytes < 0 OR oversub_device_bytes > " V5_BOUND_MEM " THEN "
    V5_BOUND_MEM " ELSE oversub_device_bytes END,"
    " core_limit = CASE WHEN core_limit < 0 OR core_limit > 100 THEN 100 ELSE core_limit END,"
    " gpu_ns = (SELECT CASE WHEN job_gpus.gpu_ns < 0 OR job_gpus.gpu_ns > j.end_ns - j.start_ns"
    " THEN j.end_ns - j.start_ns ELSE job_gpus.gpu_ns END FROM jobs j WHERE j.id = job_gpus.job_id),"
    " mem_peak_bytes = CASE WHEN mem_peak_bytes < 0 OR mem_peak_bytes > " V5_BOUND_MEM " THEN " V5_BOUND_MEM
    " ELSE mem_peak_bytes END,"
    " mem_byte_seconds = (SELECT CASE WHEN NOT job_gpus.mem_byte_seconds >= 0 THEN 0.0"
    " WHEN job_gpus.mem_byte_seconds > " V5_BOUND_MEM " * ((j.end_ns - j.start_ns) / 1e9 + 1)"
    " THEN " V5_BOUND_MEM " * ((j.end_ns - j.start_ns) / 1e9 + 1) ELSE job_gpus.mem_byte_seconds END"
    " FROM jobs j WHERE j.id = job_gpus.job_id)"
    " WHERE job_id IN (SELECT id FROM jobs WHERE bounded != 0);"
    /* The triggers and the totals added up again: version 7's (migrate_v6_v7), in the same
     * transaction (migrate), from the records as bounded here. */
    "UPDATE meta SET value = '5' WHERE key = 'schema_version';";
/* Version 6: lent memory (--mem REQUEST:LIMIT, issue 37): each GPU's REQUEST and the memory
 * promised and borrowed over time. A record of an older vgpu had no REQUEST: its request is its
 * limit (what --mem SIZE means), promised over the job's life as far as the record can say (the
 * limit at the end, times the duration; no memory limit, nothing), and nothing borrowed. */
static const char migrate_v5_v6[] =
    "ALTER TABLE job_gpus ADD COLUMN mem_request_bytes INTEGER NOT NULL DEFAULT 0;"
    "ALTER TABLE job_gpus ADD COLUMN mem_requested_byte_seconds REAL NOT NULL DEFAULT 0;"
    "ALTER TABLE job_gpus ADD COLUMN mem_borrowed_byte_seconds REAL NOT NULL DEFAULT 0;"
    "UPDATE job_gpus SET mem_request_bytes = mem_limit_bytes, mem_requested_byte_seconds ="
    " (SELECT mem_limit_bytes * ((j.end_ns - j.start_ns) / 1e9) FROM jobs j WHERE j.id = job_gpus.job_id);"
    "UPDATE meta SET value = '6' WHERE key = 'schema_version';";
/* Version 7: the totals by hour and day keep the lent memory too (requested and borrowed
 * byte-seconds, summed as mem_byte_seconds), for vgpu acct --totals, vgpu metrics and the
 * arbiter's totals without a pass over every record. Its triggers replace the earlier ones
 * (version 5 made them until version 7; every migration from before 7 ends here, so they are
 * made once, after the records are bounded and have their version 6 columns), and the totals are
 * added up again from the records (so a version 6 database's lent memory is in them at once). */
static const char migrate_v6_v7[] =
    "DROP TRIGGER IF EXISTS totals_add; DROP TRIGGER IF EXISTS totals_sub; DROP TRIGGER IF EXISTS totals_move;"
    "DROP TRIGGER IF EXISTS totals_regpu;"
    "ALTER TABLE totals_by_hour ADD COLUMN mem_requested_byte_seconds REAL NOT NULL DEFAULT 0;"
    "ALTER TABLE totals_by_hour ADD COLUMN mem_borrowed_byte_seconds REAL NOT NULL DEFAULT 0;"
    "ALTER TABLE totals_by_day ADD COLUMN mem_requested_byte_seconds REAL NOT NULL DEFAULT 0;"
    "ALTER TABLE totals_by_day ADD COLUMN mem_borrowed_byte_seconds REAL NOT NULL DEFAULT 0;"
    "CREATE TRIGGER IF NOT EXISTS totals_add AFTER INSERT ON job_gpus BEGIN" TOTALS_BOTH(ADD_NEW_GPU) " END;"
    "CREATE TRIGGER IF NOT EXISTS totals_sub BEFORE DELETE ON jobs BEGIN" TOTALS_BOTH(TOTALS_SUB_JOB) " END;"
    /* What vgpu never does, but root's sqlite3 may: a record's end or user changed (tests move
     * records back in time), or a GPU row changed. */
    "CREATE TRIGGER IF NOT EXISTS totals_move AFTER UPDATE OF end_ns, uid, user ON jobs BEGIN"
    TOTALS_BOTH(MOVE_JOB) " END;"
    "CREATE TRIGGER IF NOT EXISTS totals_regpu AFTER UPDATE OF job_id, uuid, nvml_index, gpu_ns, mem_byte_seconds,"
    " mem_requested_byte_seconds, mem_borrowed_byte_seconds, energy_mj ON job_gpus BEGIN" TOTALS_BOTH(REDO_GPU)
    " END;"
    "DELETE FROM totals_by_hour; DELETE FROM totals_by_day;"
    TOTALS_BOTH(TOTALS_FILL)
    "UPDATE meta SET value = '7' WHERE key = 'schema_version';";

static int schema_version(struct vgpu_acct_store *s, int *v, struct vgpu_err *e)
{
    sqlite3_stmt *st;
    *v = 0;
    int rc = sqlite3_prepare_v2(s->db, "SELECT value FROM meta WHERE key = 'schema_version'", -1, &st, NULL);
    if (rc != SQLITE_OK) {
        /* No meta table: a new, empty database. */
        if (strstr(sqlite3_errmsg(s->db), "no such table"))
            return 0;
        return fail(s, rc, "reading its schema version", e);
    }
    if ((rc = sqlite3_step(st)) == SQLITE_ROW)
        *v = sqlite3_column_int(st, 0);
    sqlite3_finalize(st);
    return rc == SQLITE_ROW || rc == SQLITE_DONE ? 0 : fail(s, rc, "reading its schema version", e);
}

/* Creates or migrates the schema, in one transaction (BEGIN IMMEDIATE: two first users at once
 * do it one after the other, and the second finds it done). */
static int migrate(struct vgpu_acct_store *s, struct vgpu_err *e)
{
    int v;
    if (schema_version(s, &v, e) < 0)
        return -1;
    if (v == VGPU_ACCT_SCHEMA_VERSION)
        return 0;
    if (exec(s, "BEGIN IMMEDIATE", "starting its schema update", e) < 0)
        return -1;
    if (schema_version(s, &v, e) < 0)
        goto undo;
    if (v > VGPU_ACCT_SCHEMA_VERSION) {
        vgpu_err_set(e, VGPU_EXIT_STATE, "accounting database %s: its schema is version %d, newer than this vgpu's "
                     "(%d): use the vgpu that wrote it", s->path, v, VGPU_ACCT_SCHEMA_VERSION);
        goto undo;
    }
    if (v < 1 && exec(s, schema_v1, "creating its tables", e) < 0)
        goto undo;
    if (v < 2 && exec(s, migrate_v1_v2, "updating its schema from version 1 to 2", e) < 0)
        goto undo;
    if (v < 3 && exec(s, migrate_v2_v3, "updating its schema from version 2 to 3", e) < 0)
        goto undo;
    if (v < 4 && exec(s, migrate_v3_v4, "updating its schema from version 3 to 4", e) < 0)
        goto undo;
    if (v < 5 && exec(s, migrate_v4_v5, "updating its schema from version 4 to 5", e) < 0)
        goto undo;
    if (v < 6 && exec(s, migrate_v5_v6, "updating its schema from version 5 to 6", e) < 0)
        goto undo;
    if (v < 7 && exec(s, migrate_v6_v7, "updating its schema from version 6 to 7", e) < 0)
        goto undo;
    if (exec(s, "COMMIT", "updating its schema", e) < 0)
        goto undo;
    return 0;
undo:
    sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
    return -1;
}

/* The file itself, through the directory handle: created 0600 (O_EXCL, never through a
 * symlink), or an existing regular file of the caller's that nobody else can read. The WAL and
 * shared-memory files SQLite makes beside it get the database file's mode. */
static int check_file(int dirfd, const char *dirpath, const char *file, bool create, struct vgpu_err *e)
{
    struct stat st;
    int fd = vgpu_dir_open(dirfd, file, O_RDONLY, &st);
    if (fd < 0 && errno == ENOENT && create) {
        fd = vgpu_dir_create(dirfd, file, O_RDWR, 0600);
        if (fd < 0 && errno == EEXIST)
            fd = vgpu_dir_open(dirfd, file, O_RDONLY, &st);
        else if (fd >= 0 && fstat(fd, &st) < 0)
            st.st_uid = (uid_t)-1;
    }
    if (fd < 0) {
        int err = errno;
        vgpu_err_set(e, err == ENOENT ? VGPU_EXIT_NOT_FOUND : err == EACCES ? VGPU_EXIT_PERMISSION : VGPU_EXIT_FAIL,
                     "accounting database %s/%s: %s%s", dirpath, file,
                     err == ELOOP || err == EINVAL ? "not a regular file (a symlink?); vgpu never follows one there: "
                                                    "remove it" : strerror(err),
                     err == ENOENT ? " (no job has ended here yet)"
                     : err == ENOSPC || err == EDQUOT ? " (the file system is full: free space there)" : "");
        return -1;
    }
    close(fd);
    if (st.st_uid != geteuid() || (st.st_mode & 077)) {
        vgpu_err_set(e, VGPU_EXIT_PERMISSION, "refusing the accounting database %s/%s: it must be yours (uid %u) and "
                     "0600, and is uid %u's, mode %03o; run chmod 600 on it, or move it away", dirpath, file,
                     (unsigned)geteuid(), (unsigned)st.st_uid, (unsigned)(st.st_mode & 0777));
        return -1;
    }
    return 0;
}

/* A database on a read-only file system (a state directory mounted read-only, issue 36 N11): read
 * as it is. SQLite cannot make the WAL's shared-memory file beside it there, so when the last
 * writer left none, the file is opened immutable (nobody can change it while it is read-only).
 * Its schema cannot be updated there: an older one is refused, saying so. */
static int open_read_only(struct vgpu_acct_store *s, struct vgpu_err *e)
{
    s->read_only = true;
    static const char *const how[] = { "mode=ro", "immutable=1" };
    int rc = SQLITE_CANTOPEN, v = 0;
    for (size_t i = 0; i < sizeof how / sizeof how[0]; i++) {
        char uri[4200 * 3 + 32], esc[4200 * 3], *o = esc;
        /* a URI's path: '%', '?' and '#' escaped */
        for (const char *p = s->path; *p && o < esc + sizeof esc - 4; p++)
            o += strchr("%?#", *p) ? sprintf(o, "%%%02X", (unsigned char)*p) : (*o = *p, 1);
        *o = 0;
        snprintf(uri, sizeof uri, "file:%s?%s", esc, how[i]);
        if (s->db)
            sqlite3_close_v2(s->db);
        s->db = NULL;
        rc = sqlite3_open_v2(uri, &s->db, SQLITE_OPEN_READONLY | SQLITE_OPEN_URI | SQLITE_OPEN_NOFOLLOW |
                             SQLITE_OPEN_NOMUTEX, NULL);
        struct vgpu_err ve = { 0 };
        if (rc == SQLITE_OK && schema_version(s, &v, &ve) == 0 && v > 0)
            break;
        rc = rc == SQLITE_OK ? SQLITE_CANTOPEN : rc;
    }
    if (rc != SQLITE_OK) {
        vgpu_err_set(e, VGPU_EXIT_FAIL, "accounting database %s: cannot be read on its read-only file system: %s",
                     s->path, sqlite3_errstr(rc));
        return -1;
    }
    sqlite3_busy_timeout(s->db, VGPU_ACCT_BUSY_TIMEOUT_MS);
    if (v != VGPU_ACCT_SCHEMA_VERSION) {
        vgpu_err_set(e, VGPU_EXIT_STATE, "accounting database %s: its schema is version %d, this vgpu's %d: it is "
                     "updated at its next open on a writable file system, and this one is read-only", s->path, v,
                     VGPU_ACCT_SCHEMA_VERSION);
        return -1;
    }
    return 0;
}

bool vgpu_acct_is_read_only(const struct vgpu_acct_store *s)
{
    return s->read_only;
}

struct vgpu_acct_store *vgpu_acct_open(int dirfd, const char *dirpath, const char *file, bool create,
                                       struct vgpu_err *e)
{
    struct vgpu_acct_store *s = calloc(1, sizeof *s);
    if (!s) {
        vgpu_err_set(e, VGPU_EXIT_FAIL, "out of memory opening the accounting database");
        return NULL;
    }
    snprintf(s->path, sizeof s->path, "%s/%s", dirpath, file);
    if (check_file(dirfd, dirpath, file, create, e) < 0) {
        free(s);
        return NULL;
    }
    /* By path, as SQLite must name its -wal and -shm files: the directory is checked (the
     * caller's, not writable by others), and SQLITE_OPEN_NOFOLLOW refuses a symlink put in the
     * file's place since. */
    struct statvfs fs;
    if (fstatvfs(dirfd, &fs) == 0 && (fs.f_flag & ST_RDONLY)) {
        if (create) {
            s->read_only = true;
            fail(s, SQLITE_READONLY, "writing a record", e);
            free(s);
            return NULL;
        }
        return open_read_only(s, e) < 0 ? (vgpu_acct_close(s), NULL) : s;
    }
    int rc = sqlite3_open_v2(s->path, &s->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOFOLLOW | SQLITE_OPEN_NOMUTEX,
                             NULL);
    if (rc != SQLITE_OK) {
        fail(s, rc, "opening", e);
        vgpu_acct_close(s);
        return NULL;
    }
    sqlite3_busy_timeout(s->db, VGPU_ACCT_BUSY_TIMEOUT_MS);
    /* WAL: readers never block the writer, and a transaction cut short is rolled back at the
     * next open. synchronous=NORMAL in WAL mode cannot corrupt; a power cut may lose the last
     * records, which the job regions no longer hold by then, a risk taken for < 5 ms a job. */
    sqlite3_stmt *st;
    rc = sqlite3_prepare_v2(s->db, "PRAGMA journal_mode=WAL", -1, &st, NULL);
    if (rc == SQLITE_OK) {
        rc = sqlite3_step(st);
        rc = rc == SQLITE_ROW ? SQLITE_OK : rc;
        sqlite3_finalize(st);
    }
    if (rc != SQLITE_OK || exec(s, "PRAGMA synchronous=NORMAL; PRAGMA foreign_keys=ON", "setting it up", e) < 0 ||
        migrate(s, e) < 0) {
        if (rc != SQLITE_OK)
            fail(s, rc, "setting WAL mode", e);
        vgpu_acct_close(s);
        return NULL;
    }
    return s;
}

void vgpu_acct_busy_timeout(struct vgpu_acct_store *s, unsigned ms)
{
    sqlite3_busy_timeout(s->db, (int)ms);
}

void vgpu_acct_close(struct vgpu_acct_store *s)
{
    if (!s)
        return;
    if (s->db)
        sqlite3_close_v2(s->db);
    free(s);
}

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/* The store's own retention: what vgpu acct --retention set, 0 when never set. */
static int own_retention(struct vgpu_acct_store *s, unsigned *days, struct vgpu_err *e)
{
    sqlite3_stmt *st;
    *days = 0;
    int rc = sqlite3_prepare_v2(s->db, "SELECT value FROM meta WHERE key = 'retention_days'", -1, &st, NULL);
    if (rc != SQLITE_OK)
        return fail(s, rc, "reading its retention", e);
    if ((rc = sqlite3_step(st)) == SQLITE_ROW && sqlite3_column_int(st, 0) > 0)
        *days = (unsigned)sqlite3_column_int(st, 0);
    sqlite3_finalize(st);
    return rc == SQLITE_ROW || rc == SQLITE_DONE ? 0 : fail(s, rc, "reading its retention", e);
}

/* Root's acct-retention-days (vgpu/policy.h), 0 when none. A policy file that cannot be read
 * prunes by the store's own retention meanwhile (said at debug level): vgpu run, which reads
 * the same file before every job, already refuses to start saying what is wrong with it. */
static unsigned policy_retention(void)
{
    struct vgpu_policy p;
    struct vgpu_err e;
    if (vgpu_policy_read(&p, &e) < 0) {
        vgpu_debug("accounting: %s; records are pruned by the store's own retention", e.msg);
        return 0;
    }
    return p.acct_retention_days;
}

int vgpu_acct_retention(struct vgpu_acct_store *s, unsigned *days, struct vgpu_err *e)
{
    unsigned own, root = policy_retention();
    if (own_retention(s, &own, e) < 0)
        return -1;
    /* Root's policy is the default and the most anyone keeps; a user may keep less. */
    *days = own ? own : root ? root : VGPU_ACCT_RETENTION_DEFAULT;
    if (root && *days > root)
        *days = root;
    return 0;
}

static int prune_locked(struct vgpu_acct_store *s, uint64_t now, unsigned *removed, struct vgpu_err *e)
{
    unsigned days;
    if (vgpu_acct_retention(s, &days, e) < 0)
        return -1;
    uint64_t keep = (uint64_t)days * 86400ULL * 1000000000ULL;
    sqlite3_stmt *st;
    int rc = sqlite3_prepare_v2(s->db, "DELETE FROM jobs WHERE end_ns < ?", -1, &st, NULL);
    if (rc != SQLITE_OK)
        return fail(s, rc, "pruning", e);
    sqlite3_bind_int64(st, 1, now > keep ? (sqlite3_int64)(now - keep) : 0);
    rc = sqlite3_step(st);
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE)
        return fail(s, rc, "pruning", e);
    if (removed)
        *removed = (unsigned)sqlite3_changes(s->db);
    return 0;
}

int vgpu_acct_prune(struct vgpu_acct_store *s, uint64_t now, unsigned *removed, struct vgpu_err *e)
{
    if (exec(s, "BEGIN IMMEDIATE", "starting to prune", e) < 0)
        return -1;
    if (prune_locked(s, now, removed, e) < 0 || exec(s, "COMMIT", "pruning", e) < 0) {
        sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
        return -1;
    }
    return 0;
}

int vgpu_acct_set_retention(struct vgpu_acct_store *s, unsigned days, struct vgpu_err *e)
{
    struct vgpu_policy p;
    if (vgpu_policy_read(&p, e) < 0)
        return -1;
    if (p.acct_retention_days && days > p.acct_retention_days) {
        vgpu_err_set(e, VGPU_EXIT_USAGE, "--retention %u: root's policy (%s/policy, acct-retention-days) keeps "
                     "records at most %u days; give %u or fewer", days, vgpu_machinedir_path(),
                     p.acct_retention_days, p.acct_retention_days);
        return -1;
    }
    sqlite3_stmt *st;
    int rc = sqlite3_prepare_v2(s->db, "INSERT OR REPLACE INTO meta VALUES('retention_days', ?)", -1, &st, NULL);
    if (rc != SQLITE_OK)
        return fail(s, rc, "setting its retention", e);
    sqlite3_bind_int(st, 1, (int)days);
    rc = sqlite3_step(st);
    sqlite3_finalize(st);
    return rc == SQLITE_DONE ? 0 : fail(s, rc, "setting its retention", e);
}

static int insert_locked(struct vgpu_acct_store *s, const struct vgpu_acct_record *rec, struct vgpu_err *e)
{
    sqlite3_stmt *st;
    int rc = sqlite3_prepare_v2(s->db,
                                "INSERT OR IGNORE INTO jobs(id, name, uid, user, command, start_ns, end_ns, exit_code,"
                                " exit_signal, run_as_user, recovered, end_approximate, bounded)"
                                " VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?)", -1, &st, NULL);
    if (rc != SQLITE_OK)
        return fail(s, rc, "writing a record", e);
    sqlite3_bind_text(st, 1, rec->id, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, rec->name, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 3, rec->uid);
    sqlite3_bind_text(st, 4, rec->user, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 5, rec->command, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 6, (sqlite3_int64)rec->start_ns);
    sqlite3_bind_int64(st, 7, (sqlite3_int64)rec->end_ns);
    sqlite3_bind_int(st, 8, rec->exit_code);
    sqlite3_bind_int(st, 9, rec->exit_signal);
    sqlite3_bind_int(st, 10, rec->run_as_user);
    sqlite3_bind_int(st, 11, rec->recovered);
    sqlite3_bind_int(st, 12, rec->end_approximate);
    sqlite3_bind_int(st, 13, (int)rec->bounded);
    rc = sqlite3_step(st);
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE)
        return fail(s, rc, "writing a record", e);
    if (sqlite3_changes(s->db) == 0)
        return 1;                       /* recorded already (vgpu run and a recovery raced) */
    rc = sqlite3_prepare_v2(s->db,
                            "INSERT INTO job_gpus(job_id, ordinal, uuid, nvml_index, mem_limit_bytes, core_limit,"
                            " core_policy, priority, oversub_device_bytes, gpu_ns, throttled_ns, mem_peak_bytes,"
                            " mem_byte_seconds, gpu_time_source, energy_mj, migrated_bytes, mem_request_bytes,"
                            " mem_requested_byte_seconds, mem_borrowed_byte_seconds)"
                            " VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                            -1, &st, NULL);
    if (rc != SQLITE_OK)
        return fail(s, rc, "writing a record's GPUs", e);
    /* In ordinal order: the totals count the job for its user at the first GPU row they see
     * (FIRST_GPU), which must be its lowest ordinal (the daemon appends GPUs a record left out). */
    unsigned order[VGPU_REGION_MAX_DEVICES], n = rec->gpu_count < VGPU_REGION_MAX_DEVICES ? rec->gpu_count
                                                                                         : VGPU_REGION_MAX_DEVICES;
    for (unsigned d = 0; d < n; d++) {
        unsigned k = d;
        for (; k > 0 && rec->gpu[order[k - 1]].ordinal > rec->gpu[d].ordinal; k--)
            order[k] = order[k - 1];
        order[k] = d;
    }
    for (unsigned i = 0; i < n; i++) {
        const struct vgpu_acct_gpu *g = &rec->gpu[order[i]];
        sqlite3_reset(st);
        sqlite3_bind_text(st, 1, rec->id, -1, SQLITE_STATIC);
        sqlite3_bind_int(st, 2, (int)g->ordinal);
        sqlite3_bind_text(st, 3, g->uuid, -1, SQLITE_STATIC);
        sqlite3_bind_int(st, 4, g->nvml_index);
        sqlite3_bind_int64(st, 5, (sqlite3_int64)g->mem_limit_bytes);
        sqlite3_bind_int(st, 6, (int)g->core_limit);
        sqlite3_bind_text(st, 7, g->core_policy, -1, SQLITE_STATIC);
        sqlite3_bind_int(st, 8, g->priority);
        sqlite3_bind_int64(st, 9, (sqlite3_int64)g->oversub_device_bytes);
        sqlite3_bind_int64(st, 10, (sqlite3_int64)g->gpu_ns);
        sqlite3_bind_int64(st, 11, (sqlite3_int64)g->throttled_ns);
        sqlite3_bind_int64(st, 12, (sqlite3_int64)g->mem_peak_bytes);
        sqlite3_bind_double(st, 13, g->mem_byte_seconds);
        sqlite3_bind_text(st, 14, g->gpu_time_source, -1, SQLITE_STATIC);
        if (g->energy_known)
            sqlite3_bind_int64(st, 15, (sqlite3_int64)(g->energy_j * 1000.0 + 0.5));
        else
            sqlite3_bind_null(st, 15);
        if (g->migrated_known)
            sqlite3_bind_int64(st, 16, (sqlite3_int64)g->migrated_bytes);
        else
            sqlite3_bind_null(st, 16);
        sqlite3_bind_int64(st, 17, (sqlite3_int64)g->mem_request_bytes);
        sqlite3_bind_double(st, 18, g->mem_requested_byte_seconds);
        sqlite3_bind_double(st, 19, g->mem_borrowed_byte_seconds);
        if ((rc = sqlite3_step(st)) != SQLITE_DONE) {
            sqlite3_finalize(st);
            return fail(s, rc, "writing a record's GPUs", e);
        }
    }
    sqlite3_finalize(st);
    return 0;
}

static int insert_bounded(struct vgpu_acct_store *s, const struct vgpu_acct_record *rec, struct vgpu_err *e)
{
    /* IMMEDIATE: take the write lock first (waiting up to the busy timeout for another writer),
     * so the transaction never has to give up half-way for a lock. */
    if (exec(s, "BEGIN IMMEDIATE", "starting to write a record", e) < 0)
        return -1;
    int rc = insert_locked(s, rec, e);
    if (rc < 0 || prune_locked(s, now_ns(), NULL, e) < 0 || exec(s, "COMMIT", "writing a record", e) < 0) {
        sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
        return -1;
    }
    return rc;
}

int vgpu_acct_insert(struct vgpu_acct_store *s, const struct vgpu_acct_record *given, struct vgpu_err *e)
{
    /* Never an impossible figure in the store, whoever wrote the record (issue 36 N13). */
    struct vgpu_acct_record *rec = malloc(sizeof *rec);
    if (!rec) {
        vgpu_err_set(e, VGPU_EXIT_FAIL, "out of memory writing an accounting record");
        return -1;
    }
    *rec = *given;
    if (vgpu_acct_bound(rec, NULL))
        vgpu_debug("job %s: its record is bounded (%#x) before it is stored", rec->id, rec->bounded);
    int rc = insert_bounded(s, rec, e);
    free(rec);
    return rc;
}

/* The WHERE clause of a filter over jobs j and job_gpus g, with its parameters bound from 1. */
static void where_clause(const struct vgpu_acct_filter *f, char *buf, size_t len)
{
    snprintf(buf, len, " WHERE (?1 = 0 OR j.end_ns >= ?1) AND (?2 = 0 OR j.end_ns < ?2) AND (?3 = 0 OR j.uid = ?4)"
              " AND (?5 IS NULL OR j.name = ?5) AND (?6 IS NULL OR substr(j.id, 1, length(?6)) = ?6)%s%s",
             f->gpu ? " AND (g.uuid = ?7 OR substr(g.uuid, 1, length(?7)) = ?7 OR CAST(g.nvml_index AS TEXT) = ?7)"
                    : "",
             f->after_id ? " AND (j.end_ns > ?9 OR (j.end_ns = ?9 AND j.id > ?8))" : "");
}

static void bind_filter(sqlite3_stmt *st, const struct vgpu_acct_filter *f)
{
    sqlite3_bind_int64(st, 1, (sqlite3_int64)f->since_ns);
    sqlite3_bind_int64(st, 2, (sqlite3_int64)f->until_ns);
    sqlite3_bind_int(st, 3, f->by_uid);
    sqlite3_bind_int64(st, 4, f->uid);
    if (f->name)
        sqlite3_bind_text(st, 5, f->name, -1, SQLITE_STATIC);
    if (f->id)
        sqlite3_bind_text(st, 6, f->id, -1, SQLITE_STATIC);
    if (f->gpu)
        sqlite3_bind_text(st, 7, f->gpu, -1, SQLITE_STATIC);
    if (f->after_id) {
        sqlite3_bind_text(st, 8, f->after_id, -1, SQLITE_STATIC);
        sqlite3_bind_int64(st, 9, (sqlite3_int64)f->after_end_ns);
    }
}

static void copy_text(char *dst, size_t len, sqlite3_stmt *st, int col)
{
    const unsigned char *t = sqlite3_column_text(st, col);
    snprintf(dst, len, "%s", t ? (const char *)t : "");
}

int vgpu_acct_query(struct vgpu_acct_store *s, const struct vgpu_acct_filter *f,
                    int (*fn)(const struct vgpu_acct_record *rec, void *arg), void *arg, struct vgpu_err *e)
{
    char where[700], sql[2200], limit[64] = "";
    where_clause(f, where, sizeof where);
    /* A page (the arbiter's replies): the first `limit` jobs after the cursor, in the order shown. */
    if (f->limit)
        snprintf(limit, sizeof limit, " ORDER BY j.end_ns, j.id LIMIT %u", f->limit);
    /* One row per job and GPU, in job order; a GPU filter keeps the jobs that used that GPU,
     * with all their GPUs. */
    snprintf(sql, sizeof sql,
             "SELECT j.id, j.name, j.uid, j.user, j.command, j.start_ns, j.end_ns, j.exit_code, j.exit_signal,"
             " j.run_as_user, j.recovered, j.end_approximate, g.ordinal, g.uuid, g.nvml_index, g.mem_limit_bytes,"
             " g.core_limit, g.core_policy, g.priority, g.oversub_device_bytes, g.gpu_ns, g.gpu_time_source,"
             " g.throttled_ns, g.mem_peak_bytes, g.mem_byte_seconds, g.energy_mj, g.migrated_bytes, j.bounded,"
             " g.mem_request_bytes, g.mem_requested_byte_seconds, g.mem_borrowed_byte_seconds"
             " FROM jobs j LEFT JOIN job_gpus g ON g.job_id = j.id"
             " WHERE j.id IN (SELECT DISTINCT j.id FROM jobs j LEFT JOIN job_gpus g ON g.job_id = j.id%s%s)"
             " ORDER BY j.end_ns, j.id, g.ordinal", where, limit);
    sqlite3_stmt *st;
    int rc = sqlite3_prepare_v2(s->db, sql, -1, &st, NULL);
    if (rc != SQLITE_OK)
        return fail(s, rc, "reading records", e);
    bind_filter(st, f);
    struct vgpu_acct_record *rec = calloc(1, sizeof *rec);
    if (!rec) {
        sqlite3_finalize(st);
        vgpu_err_set(e, VGPU_EXIT_FAIL, "out of memory reading the accounting records");
        return -1;
    }
    bool have = false;
    int stop = 0;
    while (!stop && (rc = sqlite3_step(st)) == SQLITE_ROW) {
        const unsigned char *id = sqlite3_column_text(st, 0);
        if (have && strcmp(rec->id, id ? (const char *)id : "") != 0) {
            stop = fn(rec, arg);
            have = false;
        }
        if (stop)
            break;
        if (!have) {
            memset(rec, 0, sizeof *rec);
            copy_text(rec->id, sizeof rec->id, st, 0);
            copy_text(rec->name, sizeof rec->name, st, 1);
            rec->uid = (uint32_t)sqlite3_column_int64(st, 2);
            copy_text(rec->user, sizeof rec->user, st, 3);
            copy_text(rec->command, sizeof rec->command, st, 4);
            rec->start_ns = (uint64_t)sqlite3_column_int64(st, 5);
            rec->end_ns = (uint64_t)sqlite3_column_int64(st, 6);
            rec->exit_code = sqlite3_column_int(st, 7);
            rec->exit_signal = sqlite3_column_int(st, 8);
            rec->run_as_user = sqlite3_column_int(st, 9);
            rec->recovered = sqlite3_column_int(st, 10);
            rec->end_approximate = sqlite3_column_int(st, 11);
            rec->bounded = (unsigned)sqlite3_column_int(st, 27) & VGPU_ACCT_BOUND_ALL;
            have = true;
        }
        if (sqlite3_column_type(st, 12) == SQLITE_NULL || rec->gpu_count >= VGPU_REGION_MAX_DEVICES)
            continue;
        struct vgpu_acct_gpu *g = &rec->gpu[rec->gpu_count++];
        g->ordinal = (unsigned)sqlite3_column_int(st, 12);
        copy_text(g->uuid, sizeof g->uuid, st, 13);
        g->nvml_index = sqlite3_column_int(st, 14);
        g->mem_limit_bytes = (uint64_t)sqlite3_column_int64(st, 15);
        g->core_limit = (unsigned)sqlite3_column_int(st, 16);
        copy_text(g->core_policy, sizeof g->core_policy, st, 17);
        g->priority = sqlite3_column_int(st, 18);
        g->oversub_device_bytes = (uint64_t)sqlite3_column_int64(st, 19);
        g->gpu_ns = (uint64_t)sqlite3_column_int64(st, 20);
        copy_text(g->gpu_time_source, sizeof g->gpu_time_source, st, 21);
        g->throttled_ns = (uint64_t)sqlite3_column_int64(st, 22);
        g->mem_peak_bytes = (uint64_t)sqlite3_column_int64(st, 23);
        g->mem_byte_seconds = sqlite3_column_double(st, 24);
        g->energy_known = sqlite3_column_type(st, 25) != SQLITE_NULL;
        g->energy_j = (double)sqlite3_column_int64(st, 25) / 1000.0;
        g->migrated_known = sqlite3_column_type(st, 26) != SQLITE_NULL;
        g->migrated_bytes = (uint64_t)sqlite3_column_int64(st, 26);
        g->mem_request_bytes = (uint64_t)sqlite3_column_int64(st, 28);
        g->mem_requested_byte_seconds = sqlite3_column_double(st, 29);
        g->mem_borrowed_byte_seconds = sqlite3_column_double(st, 30);
    }
    if (have && !stop)
        fn(rec, arg);
    free(rec);
    sqlite3_finalize(st);
    return rc == SQLITE_ROW || rc == SQLITE_DONE ? 0 : fail(s, rc, "reading records", e);
}

/* The totals' SQL and its parameters. A filter of ends and user only (what --totals, vgpu top's
 * u key and vgpu metrics ask) adds up the whole days inside [since, until) from totals_by_day, the
 * whole hours at its edges from totals_by_hour, and the records of the partial hours left (by
 * jobs_by_end): some 10 000 rows at most, whatever the number of records. A filter on GPU, name
 * or id adds up the matching records. */
#define HOUR_NS 3600000000000ULL
static int totals_stmt(struct vgpu_acct_store *s, const struct vgpu_acct_filter *f, sqlite3_stmt **st)
{
    static const char cols[] =
        "SELECT uid, max(user), uuid, max(nvml_index), sum(jobs), sum(gpu_ns) / 1e9, sum(mbs) / 1073741824.0,"
        " sum(emj) / 1000.0, sum(en), sum(uj), sum(rbs) / 1073741824.0, sum(bbs) / 1073741824.0 FROM (";
    static const char tail[] = ") GROUP BY uid, uuid ORDER BY uid, uuid";
    static const char rows[] =
        "SELECT j.uid, j.user, g.uuid, g.nvml_index, 1 AS jobs, g.gpu_ns, g.mem_byte_seconds AS mbs,"
        " coalesce(g.energy_mj, 0) AS emj, g.energy_mj IS NOT NULL AS en,"
        /* the job's first GPU among those the filter keeps (a window over the filtered rows) */
        " g.ordinal = min(g.ordinal) OVER (PARTITION BY j.id) AS uj, g.mem_requested_byte_seconds AS rbs,"
        " g.mem_borrowed_byte_seconds AS bbs FROM jobs j JOIN job_gpus g ON g.job_id = j.id";
    static const char sums[] =
        "SELECT uid, user, uuid, nvml_index, jobs, gpu_ns, mem_byte_seconds AS mbs, energy_mj AS emj,"
        " energy_jobs AS en, user_jobs AS uj, mem_requested_byte_seconds AS rbs, mem_borrowed_byte_seconds AS bbs";
    char sql[4000];
    if (f->gpu || f->name || f->id || f->after_id) {
        char where[700];
        where_clause(f, where, sizeof where);
        int n = snprintf(sql, sizeof sql, "%s%s%s%s", cols, rows, where, tail);
        if (n < 0 || (size_t)n >= sizeof sql)
            return SQLITE_TOOBIG;   /* never: sql holds the longest filter's */
        int rc = sqlite3_prepare_v2(s->db, sql, -1, st, NULL);
        if (rc == SQLITE_OK)
            bind_filter(*st, f);
        return rc;
    }
    uint64_t since = f->since_ns < INT64_MAX ? f->since_ns : INT64_MAX;
    uint64_t until = f->until_ns && f->until_ns < INT64_MAX ? f->until_ns : INT64_MAX;
    /* Whole hours [h0, h1), of which whole days [d0, d1); empty ranges are [0, 0). */
    uint64_t h0 = (since + HOUR_NS - 1) / HOUR_NS, h1 = until / HOUR_NS, d0 = 0, d1 = 0;
    if (h1 <= h0)
        h0 = h1 = 0;
    else if ((h0 + 23) / 24 < h1 / 24)
        d0 = (h0 + 23) / 24, d1 = h1 / 24;
    uint64_t r[10] = {
        d0, d1,                                       /* days */
        h0, d1 > d0 ? d0 * 24 : h1, d1 > d0 ? d1 * 24 : h1, h1,   /* hours before and after the days */
        since, h1 > h0 ? h0 * HOUR_NS : until, h1 > h0 ? h1 * HOUR_NS : until, until,   /* records */
    };
    int n = snprintf(sql, sizeof sql,
             "%s%s FROM totals_by_day WHERE period >= ?1 AND period < ?2 AND (?11 = 0 OR uid = ?12)"
             " UNION ALL %s FROM totals_by_hour WHERE period >= ?3 AND period < ?4 AND (?11 = 0 OR uid = ?12)"
             " UNION ALL %s FROM totals_by_hour WHERE period >= ?5 AND period < ?6 AND (?11 = 0 OR uid = ?12)"
             " UNION ALL %s WHERE j.end_ns >= ?7 AND j.end_ns < ?8 AND (?11 = 0 OR j.uid = ?12)"
             " UNION ALL %s WHERE j.end_ns >= ?9 AND j.end_ns < ?10 AND (?11 = 0 OR j.uid = ?12)%s",
             cols, sums, sums, sums, rows, rows, tail);
    if (n < 0 || (size_t)n >= sizeof sql)
        return SQLITE_TOOBIG;
    int rc = sqlite3_prepare_v2(s->db, sql, -1, st, NULL);
    if (rc != SQLITE_OK)
        return rc;
    for (int i = 0; i < 10; i++)
        sqlite3_bind_int64(*st, i + 1, (sqlite3_int64)r[i]);
    sqlite3_bind_int(*st, 11, f->by_uid);
    sqlite3_bind_int64(*st, 12, f->uid);
    return SQLITE_OK;
}

int vgpu_acct_totals(struct vgpu_acct_store *s, const struct vgpu_acct_filter *f,
                     int (*fn)(const struct vgpu_acct_total *t, void *arg), void *arg, struct vgpu_err *e)
{
    sqlite3_stmt *st;
    int rc = totals_stmt(s, f, &st);
    if (rc != SQLITE_OK)
        return fail(s, rc, "adding up records", e);
    struct vgpu_acct_total t;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        memset(&t, 0, sizeof t);
        t.uid = (uint32_t)sqlite3_column_int64(st, 0);
        copy_text(t.user, sizeof t.user, st, 1);
        copy_text(t.uuid, sizeof t.uuid, st, 2);
        t.nvml_index = sqlite3_column_int(st, 3);
        t.jobs = (uint64_t)sqlite3_column_int64(st, 4);
        t.gpu_seconds = sqlite3_column_double(st, 5);
        t.mem_gib_seconds = sqlite3_column_double(st, 6);
        t.energy_j = sqlite3_column_double(st, 7);
        t.energy_known = sqlite3_column_int(st, 8) > 0;
        t.user_jobs = (uint64_t)sqlite3_column_int64(st, 9);
        t.mem_requested_gib_seconds = sqlite3_column_double(st, 10);
        t.mem_borrowed_gib_seconds = sqlite3_column_double(st, 11);
        if (fn(&t, arg))
            break;
    }
    sqlite3_finalize(st);
    return rc == SQLITE_ROW || rc == SQLITE_DONE ? 0 : fail(s, rc, "adding up records", e);
}

int vgpu_acct_delete(struct vgpu_acct_store *s, char (*ids)[VGPU_JOB_ID_LEN], unsigned n, struct vgpu_err *e)
{
    if (exec(s, "BEGIN IMMEDIATE", "starting to remove records", e) < 0)
        return -1;
    sqlite3_stmt *st = NULL;
    /* Their GPUs go with them (ON DELETE CASCADE, foreign keys on). */
    int rc = sqlite3_prepare_v2(s->db, "DELETE FROM jobs WHERE id = ?", -1, &st, NULL);
    for (unsigned i = 0; rc == SQLITE_OK && i < n; i++) {
        sqlite3_reset(st);
        sqlite3_bind_text(st, 1, ids[i], -1, SQLITE_STATIC);
        rc = sqlite3_step(st) == SQLITE_DONE ? SQLITE_OK : sqlite3_errcode(s->db);
    }
    if (rc != SQLITE_OK)
        fail(s, rc, "removing records", e);
    sqlite3_finalize(st);
    if (rc != SQLITE_OK || exec(s, "COMMIT", "removing records", e) < 0) {
        sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
        return -1;
    }
    return 0;
}
