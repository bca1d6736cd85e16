/* acct_forge: a user who sends the arbiter forged accounting records (the daemon's side is
 * cmd/daemon/acct.c).
 *
 *   acct_forge ID UID USER
 *
 * Sends one record of job ID that says it is UID's (USER), run with vgpu run --user, then a
 * damaged one (a GPU count past the limit). Prints one line:
 *   forged=RC damaged=RC
 * RC the daemon's answers (forged 1: written, under the sender's own user; damaged < 0).
 * (tests/cli/acct_daemon.sh)
 *
 *   acct_forge --zero ID NAME [UUID]
 *
 * Sends the record of the caller's own job ID (its name NAME) before its vgpu run does (the first
 * record of a job is kept), saying the job used 0 GPU-seconds on GPU UUID under a --core 30 cap,
 * or naming no GPU at all without UUID. Prints "zero=RC" (1: written). (tests/cli/acct_charged.sh)
 *
 *   acct_forge --garbage ID1 ID2 UUID
 *
 * Sends two records of impossible figures on GPU UUID, as a damaged job region gives them (issue 36
 * N13): ID1 a 4 s job with a memory limit of 1.8e19 bytes, a core limit of 1753333957 %, 3600
 * GPU-seconds, a peak of 2^62 bytes and 1.2 million GiB-hours; ID2 a job that ends 5 s before it
 * starts. Prints "garbage=RC1,RC2" (1: written). (tests/cli/acct_bounds.sh) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "vgpu/acct.h"
#include "vgpu/arbiter.h"

static int zero(int argc, char **argv)
{
    static struct vgpu_acct_record rec;
    snprintf(rec.id, sizeof rec.id, "%s", argv[2]);
    snprintf(rec.name, sizeof rec.name, "%s", argv[3]);
    snprintf(rec.command, sizeof rec.command, "forge");
    rec.start_ns = (uint64_t)time(NULL) * 1000000000ULL;
    rec.end_ns = rec.start_ns + 1000000000ULL;
    if (argc == 5) {
        rec.gpu_count = 1;
        snprintf(rec.gpu[0].uuid, sizeof rec.gpu[0].uuid, "%s", argv[4]);
        rec.gpu[0].core_limit = 30;
        snprintf(rec.gpu[0].core_policy, sizeof rec.gpu[0].core_policy, "hard");
        snprintf(rec.gpu[0].gpu_time_source, sizeof rec.gpu[0].gpu_time_source, "schedule");
    }
    static char buf[VGPU_ARB_MAX_PAYLOAD];
    size_t len = vgpu_acct_pack(&rec, buf, sizeof buf);
    uint64_t a[4] = { 1, sizeof rec };
    printf("zero=%lld\n", (long long)vgpu_arb_call_data(VGPU_ARB_ACCT_RECORD, a, buf, len, NULL, 0, NULL, NULL));
    return 0;
}

static long long send_one(const struct vgpu_acct_record *rec)
{
    static char buf[VGPU_ARB_MAX_PAYLOAD];
    size_t len = vgpu_acct_pack(rec, buf, sizeof buf);
    uint64_t a[4] = { 1, sizeof *rec };
    return vgpu_arb_call_data(VGPU_ARB_ACCT_RECORD, a, buf, len, NULL, 0, NULL, NULL);
}

static int garbage(char **argv)
{
    static struct vgpu_acct_record rec;
    snprintf(rec.name, sizeof rec.name, "garbage");
    snprintf(rec.command, sizeof rec.command, "forge");
    uint64_t now = (uint64_t)time(NULL) * 1000000000ULL;
    rec.gpu_count = 1;
    struct vgpu_acct_gpu *g = &rec.gpu[0];
    snprintf(g->uuid, sizeof g->uuid, "%s", argv[4]);
    snprintf(g->core_policy, sizeof g->core_policy, "hard");
    snprintf(g->gpu_time_source, sizeof g->gpu_time_source, "nvml");
    snprintf(rec.id, sizeof rec.id, "%s", argv[2]);
    rec.start_ns = now - 4000000000ULL;
    rec.end_ns = now;
    g->mem_limit_bytes = 18014398509481984000ULL;
    g->core_limit = 1753333957u;
    g->gpu_ns = 3600000000000ULL;
    g->mem_peak_bytes = 1ULL << 62;
    g->mem_byte_seconds = 1.2e6 * 3600.0 * 1073741824.0;
    long long rc1 = send_one(&rec);
    memset(g, 0, sizeof *g);
    snprintf(g->uuid, sizeof g->uuid, "%s", argv[4]);
    snprintf(g->core_policy, sizeof g->core_policy, "hard");
    snprintf(g->gpu_time_source, sizeof g->gpu_time_source, "none");
    snprintf(rec.id, sizeof rec.id, "%s", argv[3]);
    rec.start_ns = now;
    rec.end_ns = now - 5000000000ULL;
    long long rc2 = send_one(&rec);
    printf("garbage=%lld,%lld\n", rc1, rc2);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 5 && !strcmp(argv[1], "--garbage"))
        return garbage(argv);
    if (argc >= 4 && argc <= 5 && !strcmp(argv[1], "--zero"))
        return zero(argc, argv);
    if (argc != 4) {
        fprintf(stderr, "usage: acct_forge ID UID USER | acct_forge --zero ID NAME [UUID]\n"
                        "       acct_forge --garbage ID1 ID2 UUID\n");
        return 2;
    }
    static struct vgpu_acct_record rec;
    snprintf(rec.id, sizeof rec.id, "%s", argv[1]);
    snprintf(rec.name, sizeof rec.name, "forged");
    rec.uid = (uint32_t)strtoul(argv[2], NULL, 10);
    snprintf(rec.user, sizeof rec.user, "%s", argv[3]);
    snprintf(rec.command, sizeof rec.command, "forge");
    rec.start_ns = (uint64_t)time(NULL) * 1000000000ULL;
    rec.end_ns = rec.start_ns + 1000000000ULL;
    rec.run_as_user = true;
    rec.gpu_count = 1;
    snprintf(rec.gpu[0].uuid, sizeof rec.gpu[0].uuid, "GPU-forged");
    snprintf(rec.gpu[0].gpu_time_source, sizeof rec.gpu[0].gpu_time_source, "schedule");
    rec.gpu[0].gpu_ns = 3600000000000ULL;
    static char buf[VGPU_ARB_MAX_PAYLOAD];
    size_t len = vgpu_acct_pack(&rec, buf, sizeof buf);
    uint64_t a[4] = { 1, sizeof rec };
    long long forged = vgpu_arb_call_data(VGPU_ARB_ACCT_RECORD, a, buf, len, NULL, 0, NULL, NULL);
    ((struct vgpu_acct_record *)buf)->gpu_count = 1000;
    long long damaged = vgpu_arb_call_data(VGPU_ARB_ACCT_RECORD, a, buf, len, NULL, 0, NULL, NULL);
    printf("forged=%lld damaged=%lld\n", forged, damaged);
    return 0;
}
