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
 * or naming no GPU at all without UUID. Prints "zero=RC" (1: written). (tests/cli/acct_charged.sh) */
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

int main(int argc, char **argv)
{
    if (argc >= 4 && argc <= 5 && !strcmp(argv[1], "--zero"))
        return zero(argc, argv);
    if (argc != 4) {
        fprintf(stderr, "usage: acct_forge ID UID USER | acct_forge --zero ID NAME [UUID]\n");
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
