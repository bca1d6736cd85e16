/* vgpu acct: the output (output.h). Records print one row per job and GPU, as sacct prints a
 * job's steps; a GPU whose time nothing measured shows '-', never 0. */
#include "acct/output.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common.h"
#include "vgpu/json.h"
#include "vgpu/log.h"
#include "vgpu/units.h"

struct vgpu_acct_out {
    enum vgpu_acct_format f;
    bool totals;
    unsigned rows;
    struct json_object *doc, *list;
    bool have_origin;
    struct vgpu_acct_origin from;
    /* --totals: the user whose rows come now (rows come by uid), added up over their GPUs, so
     * that a job of several GPUs counts once in the user's jobs (issue 36). */
    struct vgpu_acct_total user;
    unsigned user_rows;
    struct json_object *users;
};

void vgpu_acct_out_origin(struct vgpu_acct_out *o, const struct vgpu_acct_origin *from)
{
    o->have_origin = true;
    o->from = *from;
}

struct vgpu_acct_out *vgpu_acct_out_begin(enum vgpu_acct_format f, bool totals)
{
    struct vgpu_acct_out *o = calloc(1, sizeof *o);
    if (!o)
        return NULL;
    o->f = f;
    o->totals = totals;
    if (f == VGPU_ACCT_JSON) {
        o->doc = vgpu_json_doc();
        o->list = json_object_new_array();
        if (totals)
            o->users = json_object_new_array();
    }
    return o;
}

static void local_time(uint64_t ns, char *buf, size_t len)
{
    time_t t = (time_t)(ns / 1000000000ULL);
    struct tm tm;
    if (!localtime_r(&t, &tm) || !strftime(buf, len, "%Y-%m-%dT%H:%M:%S", &tm))
        snprintf(buf, len, "@%llu", (unsigned long long)t);
}

static bool gpu_measured(const struct vgpu_acct_gpu *g)
{
    return strcmp(g->gpu_time_source, "none") != 0;
}

/* What vgpu_acct_bound cut in a record, "memory limit, core limit" (json: their field names). */
static void bounded_text(unsigned bounded, bool json, char *buf, size_t len, struct json_object *arr)
{
    size_t n = 0;
    buf[0] = 0;
    for (unsigned bit = 1; bit <= VGPU_ACCT_BOUND_ALL; bit <<= 1) {
        const char *name = bounded & bit ? vgpu_acct_bound_name(bit, json) : NULL;
        if (!name)
            continue;
        if (arr)
            json_object_array_add(arr, json_object_new_string(name));
        if (n < len)
            n += (size_t)snprintf(buf + n, len - n, "%s%s", n ? (json ? "+" : ", ") : "", name);
    }
}

static void exit_text(const struct vgpu_acct_record *r, char *buf, size_t len)
{
    if (r->exit_signal)
    {
        char tmp[16];
        snprintf(buf, len, "%s", vgpu_signal_name(r->exit_signal, tmp, sizeof tmp));
    }
    else if (r->exit_code < 0)
        snprintf(buf, len, "unknown");
    else
        snprintf(buf, len, "%d", r->exit_code);
}

/* A CSV field: quoted when it holds a comma, quote or line break (RFC 4180). Control bytes (a
 * command named with ESC or BEL) are written escaped (\x1b, as vgpu's messages write them), and a
 * cell that starts with = + - or @ is quoted with a leading apostrophe, so that a spreadsheet
 * shows it as text instead of running it as a formula. */
static void csv_field(const char *s, bool last)
{
    char esc[4 * VGPU_JOB_CMDLINE_LEN + 1];
    vgpu_escape_controls(s, strlen(s), esc, sizeof esc, false);
    bool formula = strchr("=+-@", esc[0]) && esc[0];
    if (formula || strpbrk(esc, ",\"")) {
        putchar('"');
        if (formula)
            putchar('\'');
        for (const char *p = esc; *p; p++) {
            if (*p == '"')
                putchar('"');
            putchar(*p);
        }
        putchar('"');
    } else {
        fputs(esc, stdout);
    }
    putchar(last ? '\n' : ',');
}

static void record_json(struct vgpu_acct_out *o, const struct vgpu_acct_record *r)
{
    struct json_object *j = json_object_new_object();
    vgpu_json_str(j, "id", r->id);
    vgpu_json_str(j, "name", r->name[0] ? r->name : NULL);
    vgpu_json_u64(j, "uid", r->uid);
    vgpu_json_str(j, "user", r->user[0] ? r->user : NULL);
    vgpu_json_str(j, "command", r->command);
    vgpu_json_u64(j, "start_time_ns", r->start_ns);
    vgpu_json_u64(j, "end_time_ns", r->end_ns);
    vgpu_json_dbl(j, "duration_seconds", (double)(r->end_ns - r->start_ns) / 1e9);
    if (r->exit_code >= 0)
        vgpu_json_i64(j, "exit_code", r->exit_code);
    else
        vgpu_json_null(j, "exit_code");
    if (r->exit_signal)
        vgpu_json_i64(j, "exit_signal", r->exit_signal);
    else
        vgpu_json_null(j, "exit_signal");
    vgpu_json_bool(j, "run_as_user", r->run_as_user);
    vgpu_json_bool(j, "recovered", r->recovered);
    vgpu_json_bool(j, "end_time_approximate", r->end_approximate);
    struct json_object *bounded = json_object_new_array();
    char btext[160];
    bounded_text(r->bounded, true, btext, sizeof btext, bounded);
    json_object_object_add(j, "bounded", bounded);
    struct json_object *gpus = json_object_new_array();
    for (unsigned d = 0; d < r->gpu_count; d++) {
        const struct vgpu_acct_gpu *g = &r->gpu[d];
        struct json_object *x = json_object_new_object();
        vgpu_json_u64(x, "index", g->ordinal);
        vgpu_json_str(x, "uuid", g->uuid);
        vgpu_json_i64(x, "nvml_index", g->nvml_index);
        vgpu_json_u64_or_null(x, "mem_limit_bytes", g->mem_limit_bytes, g->mem_limit_bytes);
        vgpu_json_u64_or_null(x, "core_limit_percent", g->core_limit, g->core_limit);
        vgpu_json_str(x, "core_policy", g->core_policy);
        vgpu_json_str(x, "priority", vgpu_priority_name(g->priority));
        vgpu_json_u64_or_null(x, "oversubscribe_device_bytes", g->oversub_device_bytes, g->oversub_device_bytes);
        if (gpu_measured(g))
            vgpu_json_dbl(x, "gpu_seconds", (double)g->gpu_ns / 1e9);
        else
            vgpu_json_null(x, "gpu_seconds");
        vgpu_json_str(x, "gpu_time_source", g->gpu_time_source);
        vgpu_json_dbl(x, "throttled_seconds", (double)g->throttled_ns / 1e9);
        vgpu_json_u64(x, "mem_peak_bytes", g->mem_peak_bytes);
        vgpu_json_dbl(x, "mem_gib_hours", g->mem_byte_seconds / VGPU_GIB / 3600.0);
        vgpu_json_u64_or_null(x, "mem_request_bytes", g->mem_request_bytes, g->mem_request_bytes);
        vgpu_json_dbl(x, "mem_requested_gib_hours", g->mem_requested_byte_seconds / VGPU_GIB / 3600.0);
        vgpu_json_dbl(x, "mem_borrowed_gib_hours", g->mem_borrowed_byte_seconds / VGPU_GIB / 3600.0);
        if (g->energy_known)
            vgpu_json_dbl(x, "energy_joules", g->energy_j);
        else
            vgpu_json_null(x, "energy_joules");
        vgpu_json_u64_or_null(x, "migrated_bytes", g->migrated_known, g->migrated_bytes);
        json_object_array_add(gpus, x);
    }
    json_object_object_add(j, "gpus", gpus);
    json_object_array_add(o->list, j);
}

int vgpu_acct_out_record(const struct vgpu_acct_record *r, void *arg)
{
    struct vgpu_acct_out *o = arg;
    if (o->f == VGPU_ACCT_JSON) {
        record_json(o, r);
        o->rows++;
        return 0;
    }
    char start[32], end[32], ex[24], dur[32], name[VGPU_JOB_NAME_LEN], user[64];
    local_time(r->start_ns, start, sizeof start);
    local_time(r->end_ns, end, sizeof end);
    exit_text(r, ex, sizeof ex);
    vgpu_format_duration((r->end_ns - r->start_ns) / 1000000000ULL, dur, sizeof dur);
    snprintf(name, sizeof name, "%s", r->name[0] ? r->name : "-");
    if (r->user[0])
        snprintf(user, sizeof user, "%s", r->user);
    else
        snprintf(user, sizeof user, "%u", (unsigned)r->uid);
    if (o->f == VGPU_ACCT_CSV && !o->rows++)
        printf("id,name,user,uid,command,start,end,duration_seconds,exit,recovered,end_time_approximate,gpu,uuid,"
               "nvml_index,mem_limit_bytes,core_limit_percent,gpu_seconds,gpu_time_source,throttled_seconds,"
               "mem_peak_bytes,mem_gib_hours,mem_request_bytes,mem_requested_gib_hours,mem_borrowed_gib_hours,"
               "energy_joules,migrated_bytes,bounded\n");
    else if (o->f == VGPU_ACCT_TABLE && !o->rows++)
        printf("%-12s %-14s %-10s %-19s %9s %-8s %3s %10s %10s %10s %10s %10s %s\n", "ID", "NAME", "USER", "END",
               "ELAPSED", "EXIT", "GPU", "GPU-SEC", "THROTTLED", "MEM-PEAK", "GIB-HOURS", "ENERGY-KJ", "NOTE");
    for (unsigned d = 0; d < (r->gpu_count ? r->gpu_count : 1); d++) {
        const struct vgpu_acct_gpu *g = r->gpu_count ? &r->gpu[d] : NULL;
        char gsec[32] = "-", thr[32] = "-", peak[32] = "-", gib[32] = "-", idx[16] = "-", kj[32] = "-";
        if (g) {
            if (gpu_measured(g))
                snprintf(gsec, sizeof gsec, "%.1f", (double)g->gpu_ns / 1e9);
            snprintf(thr, sizeof thr, "%.1f", (double)g->throttled_ns / 1e9);
            vgpu_format_size_short(g->mem_peak_bytes, peak, sizeof peak);
            snprintf(gib, sizeof gib, "%.4f", g->mem_byte_seconds / VGPU_GIB / 3600.0);
            snprintf(idx, sizeof idx, "%d", g->nvml_index);
            if (g->energy_known)
                snprintf(kj, sizeof kj, "%.3f", g->energy_j / 1000.0);
        }
        if (o->f == VGPU_ACCT_TABLE) {
            /* A record cut to its bounds says so (issue 36 N13): its figures are not what it held. */
            char note[300], cut[160], lent[96] = "";
            bounded_text(r->bounded, false, cut, sizeof cut, NULL);
            /* A job that could borrow (--mem REQUEST:LIMIT) says how much it did, per GPU. */
            if (g && g->mem_request_bytes && g->mem_request_bytes < g->mem_limit_bytes)
                snprintf(lent, sizeof lent, "borrowed %.4f GiB-h past its request (%.4f)",
                         g->mem_borrowed_byte_seconds / VGPU_GIB / 3600.0,
                         g->mem_requested_byte_seconds / VGPU_GIB / 3600.0);
            snprintf(note, sizeof note, "%s%s%s%s%s%s", r->end_approximate ? "recovered, end approximate" : r->recovered
                     ? "recovered" : "", r->bounded && r->recovered ? "; " : "", r->bounded ? "bounded: " : "", cut,
                     lent[0] && (r->bounded || r->recovered) ? "; " : "", lent);
            /* A cut name ends in '+', as in vgpu ps and top: it never passes for a whole one. */
            char cid[16], cname[16], cuser[16];
            if (d == 0)
                printf("%-12s %-14s %-10s %-19s %9s %-8s %3s %10s %10s %10s %10s %10s %s\n",
                       vgpu_fit_text(r->id, 12, cid, sizeof cid), vgpu_fit_text(name, 14, cname, sizeof cname),
                       vgpu_fit_text(user, 10, cuser, sizeof cuser), end, dur, ex, idx, gsec, thr, peak, gib, kj, note);
            else
                printf("%-12s %-14s %-10s %-19s %9s %-8s %3s %10s %10s %10s %10s %10s %s\n", "", "", "", "", "", "", idx,
                       gsec, thr, peak, gib, kj, lent);
            continue;
        }
        char uid[16], dsec[32], lim[32] = "", core[16] = "", energy[32] = "", peakb[32] = "";
        snprintf(uid, sizeof uid, "%u", (unsigned)r->uid);
        snprintf(dsec, sizeof dsec, "%.3f", (double)(r->end_ns - r->start_ns) / 1e9);
        csv_field(r->id, false);
        csv_field(r->name, false);
        csv_field(r->user, false);
        csv_field(uid, false);
        csv_field(r->command, false);
        csv_field(start, false);
        csv_field(end, false);
        csv_field(dsec, false);
        csv_field(ex, false);
        csv_field(r->recovered ? "1" : "0", false);
        csv_field(r->end_approximate ? "1" : "0", false);
        char cut[160];
        bounded_text(r->bounded, true, cut, sizeof cut, NULL);
        if (!g) {
            fputs(",,,,,,,,,,,,,,,", stdout);   /* the 15 GPU fields */
            csv_field(cut, true);
            continue;
        }
        char ord[16];
        snprintf(ord, sizeof ord, "%u", g->ordinal);
        if (g->mem_limit_bytes)
            snprintf(lim, sizeof lim, "%llu", (unsigned long long)g->mem_limit_bytes);
        if (g->core_limit)
            snprintf(core, sizeof core, "%u", g->core_limit);
        if (g->energy_known)
            snprintf(energy, sizeof energy, "%.3f", g->energy_j);
        snprintf(peakb, sizeof peakb, "%llu", (unsigned long long)g->mem_peak_bytes);
        if (!gpu_measured(g))
            gsec[0] = 0;
        else
            snprintf(gsec, sizeof gsec, "%.3f", (double)g->gpu_ns / 1e9);
        snprintf(thr, sizeof thr, "%.3f", (double)g->throttled_ns / 1e9);
        snprintf(gib, sizeof gib, "%.6f", g->mem_byte_seconds / VGPU_GIB / 3600.0);
        csv_field(ord, false);
        csv_field(g->uuid, false);
        csv_field(idx, false);
        csv_field(lim, false);
        csv_field(core, false);
        csv_field(gsec, false);
        csv_field(g->gpu_time_source, false);
        csv_field(thr, false);
        csv_field(peakb, false);
        csv_field(gib, false);
        char req[32] = "", reqh[32], borh[32];
        if (g->mem_request_bytes)
            snprintf(req, sizeof req, "%llu", (unsigned long long)g->mem_request_bytes);
        snprintf(reqh, sizeof reqh, "%.6f", g->mem_requested_byte_seconds / VGPU_GIB / 3600.0);
        snprintf(borh, sizeof borh, "%.6f", g->mem_borrowed_byte_seconds / VGPU_GIB / 3600.0);
        csv_field(req, false);
        csv_field(reqh, false);
        csv_field(borh, false);
        csv_field(energy, false);
        char mig[32] = "";
        if (g->migrated_known)
            snprintf(mig, sizeof mig, "%llu", (unsigned long long)g->migrated_bytes);
        csv_field(mig, false);
        csv_field(cut, true);
    }
    return 0;
}

static void user_name_of(const struct vgpu_acct_total *t, char *buf, size_t len)
{
    if (t->user[0])
        snprintf(buf, len, "%s", t->user);
    else
        snprintf(buf, len, "%u", (unsigned)t->uid);
}

/* The user's rows added up: JSON's "users", and in the table a line "all" under a user of more
 * than one GPU. Its jobs count each job once (user_jobs: a job at its first GPU only). */
static void flush_user(struct vgpu_acct_out *o)
{
    const struct vgpu_acct_total *u = &o->user;
    if (!o->user_rows)
        return;
    if (o->f == VGPU_ACCT_JSON) {
        struct json_object *j = json_object_new_object();
        vgpu_json_u64(j, "uid", u->uid);
        vgpu_json_str(j, "user", u->user[0] ? u->user : NULL);
        vgpu_json_u64(j, "jobs", u->user_jobs);
        vgpu_json_u64(j, "gpus", o->user_rows);
        vgpu_json_dbl(j, "gpu_hours", u->gpu_seconds / 3600.0);
        vgpu_json_dbl(j, "mem_gib_hours", u->mem_gib_seconds / 3600.0);
        vgpu_json_dbl(j, "mem_requested_gib_hours", u->mem_requested_gib_seconds / 3600.0);
        vgpu_json_dbl(j, "mem_borrowed_gib_hours", u->mem_borrowed_gib_seconds / 3600.0);
        if (u->energy_known)
            vgpu_json_dbl(j, "energy_joules", u->energy_j);
        else
            vgpu_json_null(j, "energy_joules");
        json_object_array_add(o->users, j);
    } else if (o->f == VGPU_ACCT_TABLE && o->user_rows > 1) {
        char user[64], cuser[16], en[32] = "-", gpus[48];
        user_name_of(u, user, sizeof user);
        if (u->energy_known)
            snprintf(en, sizeof en, "%.3f", u->energy_j / 1000.0);
        snprintf(gpus, sizeof gpus, "(%u GPUs; each job once)", o->user_rows);
        printf("%-12s %3s %-40.40s %8llu %12.4f %12.4f %12.4f %12.4f %12s\n",
               vgpu_fit_text(user, 12, cuser, sizeof cuser), "all", gpus, (unsigned long long)u->user_jobs,
               u->gpu_seconds / 3600.0, u->mem_gib_seconds / 3600.0, u->mem_requested_gib_seconds / 3600.0,
               u->mem_borrowed_gib_seconds / 3600.0, en);
    }
    o->user_rows = 0;
}

/* After flush_user when t is another user's (vgpu_acct_out_total). */
static void add_to_user(struct vgpu_acct_out *o, const struct vgpu_acct_total *t)
{
    struct vgpu_acct_total *u = &o->user;
    if (!o->user_rows) {
        memset(u, 0, sizeof *u);
        u->uid = t->uid;
    }
    if (strcmp(t->user, u->user) > 0)
        snprintf(u->user, sizeof u->user, "%s", t->user);
    u->user_jobs += t->user_jobs;
    u->gpu_seconds += t->gpu_seconds;
    u->mem_gib_seconds += t->mem_gib_seconds;
    u->mem_requested_gib_seconds += t->mem_requested_gib_seconds;
    u->mem_borrowed_gib_seconds += t->mem_borrowed_gib_seconds;
    u->energy_j += t->energy_j;
    u->energy_known |= t->energy_known;
    o->user_rows++;
}

int vgpu_acct_out_total(const struct vgpu_acct_total *t, void *arg)
{
    struct vgpu_acct_out *o = arg;
    if (o->user_rows && o->user.uid != t->uid)
        flush_user(o);
    char user[64];
    user_name_of(t, user, sizeof user);
    double gpu_h = t->gpu_seconds / 3600.0, gib_h = t->mem_gib_seconds / 3600.0;
    double req_h = t->mem_requested_gib_seconds / 3600.0, bor_h = t->mem_borrowed_gib_seconds / 3600.0;
    if (o->f == VGPU_ACCT_JSON) {
        struct json_object *j = json_object_new_object();
        vgpu_json_u64(j, "uid", t->uid);
        vgpu_json_str(j, "user", t->user[0] ? t->user : NULL);
        vgpu_json_str(j, "gpu_uuid", t->uuid);
        vgpu_json_i64(j, "nvml_index", t->nvml_index);
        vgpu_json_u64(j, "jobs", t->jobs);
        vgpu_json_dbl(j, "gpu_hours", gpu_h);
        vgpu_json_dbl(j, "mem_gib_hours", gib_h);
        vgpu_json_dbl(j, "mem_requested_gib_hours", req_h);
        vgpu_json_dbl(j, "mem_borrowed_gib_hours", bor_h);
        if (t->energy_known)
            vgpu_json_dbl(j, "energy_joules", t->energy_j);
        else
            vgpu_json_null(j, "energy_joules");
        json_object_array_add(o->list, j);
    } else if (o->f == VGPU_ACCT_CSV) {
        if (!o->rows)
            printf("user,uid,gpu_uuid,nvml_index,jobs,gpu_hours,mem_gib_hours,mem_requested_gib_hours,"
                   "mem_borrowed_gib_hours,energy_joules,user_jobs\n");
        char uid[16], idx[16], jobs[24], gh[32], mh[32], rh[32], bh[32], en[32] = "", uj[24];
        snprintf(uj, sizeof uj, "%llu", (unsigned long long)t->user_jobs);
        snprintf(uid, sizeof uid, "%u", (unsigned)t->uid);
        snprintf(idx, sizeof idx, "%d", t->nvml_index);
        snprintf(jobs, sizeof jobs, "%llu", (unsigned long long)t->jobs);
        snprintf(gh, sizeof gh, "%.6f", gpu_h);
        snprintf(mh, sizeof mh, "%.6f", gib_h);
        snprintf(rh, sizeof rh, "%.6f", req_h);
        snprintf(bh, sizeof bh, "%.6f", bor_h);
        if (t->energy_known)
            snprintf(en, sizeof en, "%.3f", t->energy_j);
        csv_field(user, false);
        csv_field(uid, false);
        csv_field(t->uuid, false);
        csv_field(idx, false);
        csv_field(jobs, false);
        csv_field(gh, false);
        csv_field(mh, false);
        csv_field(rh, false);
        csv_field(bh, false);
        csv_field(en, false);
        csv_field(uj, true);
    } else {
        if (!o->rows)
            printf("%-12s %3s %-40s %8s %12s %12s %12s %12s %12s\n", "USER", "GPU", "UUID", "JOBS", "GPU-HOURS",
                   "GIB-HOURS", "REQ-GIB-H", "BORROW-GIB-H", "ENERGY-KJ");
        char en[32] = "-";
        if (t->energy_known)
            snprintf(en, sizeof en, "%.3f", t->energy_j / 1000.0);
        char cuser[16];
        printf("%-12s %3d %-40.40s %8llu %12.4f %12.4f %12.4f %12.4f %12s\n",
               vgpu_fit_text(user, 12, cuser, sizeof cuser), t->nvml_index, t->uuid, (unsigned long long)t->jobs, gpu_h,
               gib_h, req_h, bor_h, en);
    }
    add_to_user(o, t);
    o->rows++;
    return 0;
}

int vgpu_acct_out_end(struct vgpu_acct_out *o, bool failed)
{
    int rc = 0;
    if (!failed)
        flush_user(o);
    if (failed) {
        /* A half-read list must not pass for a whole one, nor an unread one for an empty one. */
        if (o->f == VGPU_ACCT_JSON) {
            json_object_put(o->list);
            json_object_put(o->users);
            json_object_put(o->doc);
        }
        rc = fflush(stdout) == EOF ? -1 : 0;
    } else if (o->f == VGPU_ACCT_JSON) {
        if (o->have_origin) {
            vgpu_json_str(o->doc, "source", vgpu_acct_source_name(o->from.source));
            vgpu_json_bool(o->doc, "partial", o->from.source != VGPU_ACCT_FROM_ARBITER && o->from.partial);
        }
        json_object_object_add(o->doc, o->totals ? "totals" : "jobs", o->list);
        if (o->users)
            json_object_object_add(o->doc, "users", o->users);
        rc = vgpu_json_emit(o->doc, true);
    } else {
        if (o->f == VGPU_ACCT_TABLE && !o->rows)
            printf("no %s\n", o->totals ? "records to add up" : "records");
        rc = fflush(stdout) == EOF ? -1 : 0;
    }
    free(o);
    return rc;
}
