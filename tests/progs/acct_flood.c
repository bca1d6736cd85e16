/* acct_flood: a user who floods the arbiter's accounting (issue 35: 1051 records/s, 7.7 MiB/s of
 * records that end ten years from now, then its own totals asked over and over), in the raw
 * protocol of vgpu/arbiter.h. (tests/cli/acct_forge.sh)
 *
 *   acct_flood records SECONDS   records of made-up jobs, as many a request as fit, for SECONDS
 *   acct_flood totals SECONDS    the caller's totals, asked back to back for SECONDS
 *   acct_flood hello             one HELLO, timed
 *   acct_flood hellos SECONDS    HELLOs back to back for SECONDS: the same traffic with no
 *                                accounting in it, for a control run beside the same load
 *   acct_flood totals-as SIZE    one totals request that says its totals are SIZE bytes (an
 *                                older vgpu's: 0, it named none)
 *
 * Prints one line: "requests=N taken=T refused=R records=K" (records: taken records) for the
 * first two, "hello_ms=F rc=RC" for hello, "rc=RC msg=MSG" for totals-as. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "vgpu/acct.h"
#include "vgpu/arbiter.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static int records(double seconds)
{
    static struct vgpu_acct_record rec;
    static char buf[VGPU_ARB_MAX_PAYLOAD];
    unsigned long long n = 0, taken = 0, refused = 0, stored = 0, serial = 0;
    uint64_t ten_years = 10ULL * 365 * 86400 * 1000000000ULL;
    double end = now_s() + seconds;
    while (now_s() < end) {
        size_t len = 0;
        uint64_t count = 0;
        for (;;) {
            memset(&rec, 0, sizeof rec);
            snprintf(rec.id, sizeof rec.id, "%04x%08llx", (unsigned)getpid() & 0xffff, serial);
            snprintf(rec.name, sizeof rec.name, "flood");
            snprintf(rec.command, sizeof rec.command, "acct_flood");
            rec.start_ns = (uint64_t)time(NULL) * 1000000000ULL;
            rec.end_ns = rec.start_ns + ten_years;   /* never pruned, were it believed */
            rec.gpu_count = 1;
            snprintf(rec.gpu[0].uuid, sizeof rec.gpu[0].uuid, "GPU-flood");
            size_t used = vgpu_acct_pack(&rec, buf + len, sizeof buf - len);
            if (!used)
                break;
            len += used;
            count++;
            serial++;
        }
        uint64_t a[4] = { count, sizeof rec };
        int64_t rc = vgpu_arb_call_data(VGPU_ARB_ACCT_RECORD, a, buf, len, NULL, 0, NULL, NULL);
        n++;
        if (rc >= 0) {
            taken++;
            stored += (unsigned long long)rc;
        } else {
            refused++;
        }
    }
    printf("requests=%llu taken=%llu refused=%llu records=%llu\n", n, taken, refused, stored);
    return 0;
}

static int totals(double seconds)
{
    static struct vgpu_acct_wire_filter w;
    static char page[VGPU_ARB_MAX_PAYLOAD];
    struct vgpu_acct_filter f;
    memset(&f, 0, sizeof f);
    vgpu_acct_filter_pack(&f, &w);
    unsigned long long n = 0, taken = 0, refused = 0;
    double end = now_s() + seconds;
    while (now_s() < end) {
        uint64_t a[4] = { 0, sizeof(struct vgpu_acct_record), sizeof(struct vgpu_acct_total) };
        size_t got = 0;
        int64_t rc = vgpu_arb_call_data(VGPU_ARB_ACCT_TOTALS, a, &w, sizeof w, page, sizeof page, &got, NULL);
        n++;
        if (rc >= 0)
            taken++;
        else
            refused++;
    }
    printf("requests=%llu taken=%llu refused=%llu records=0\n", n, taken, refused);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 3 && !strcmp(argv[1], "records"))
        return records(atof(argv[2]));
    if (argc == 3 && !strcmp(argv[1], "totals"))
        return totals(atof(argv[2]));
    if (argc == 3 && !strcmp(argv[1], "hellos")) {
        unsigned long long n = 0, taken = 0;
        for (double end = now_s() + atof(argv[2]); now_s() < end; n++)
            taken += vgpu_arb_call_data(VGPU_ARB_HELLO, NULL, NULL, 0, NULL, 0, NULL, NULL) >= 0;
        printf("requests=%llu taken=%llu refused=%llu records=0\n", n, taken, n - taken);
        return 0;
    }
    if (argc == 3 && !strcmp(argv[1], "totals-as")) {
        static struct vgpu_acct_wire_filter w;
        static char page[VGPU_ARB_MAX_PAYLOAD];
        struct vgpu_acct_filter f;
        memset(&f, 0, sizeof f);
        vgpu_acct_filter_pack(&f, &w);
        uint64_t a[4] = { 0, sizeof(struct vgpu_acct_record), strtoull(argv[2], NULL, 0) };
        size_t got = 0;
        struct vgpu_arb_rep r;
        memset(&r, 0, sizeof r);
        int64_t rc = vgpu_arb_call_data(VGPU_ARB_ACCT_TOTALS, a, &w, sizeof w, page, sizeof page, &got, &r);
        printf("rc=%lld msg=%s\n", (long long)rc, r.msg);
        return 0;
    }
    if (argc == 2 && !strcmp(argv[1], "hello")) {
        double t = now_s();
        int64_t rc = vgpu_arb_call_data(VGPU_ARB_HELLO, NULL, NULL, 0, NULL, 0, NULL, NULL);
        printf("hello_ms=%.3f rc=%lld\n", (now_s() - t) * 1e3, (long long)rc);
        return 0;
    }
    fprintf(stderr, "usage: acct_flood records|totals|hellos SECONDS | acct_flood hello\n");
    return 2;
}
