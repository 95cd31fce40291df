/*
 * benchlib.c - see benchlib.h.
 */
#define _GNU_SOURCE
#include "benchlib.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "mq.h"

/* ======================================================================
 * Run control, settings, scratch directory, header
 * ====================================================================== */

volatile sig_atomic_t bench_interrupted;

static void on_signal(int sig) {
    (void)sig;
    bench_interrupted = 1;
}

void bench_catch_signals(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
}

void bench_sleep_ms(long ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR && !bench_interrupted) {
    }
}

double bench_env_num(const char *name, double def, double min, double max) {
    const char *v = getenv(name);
    if (!v || !*v) return def;
    char *end = NULL;
    double d = strtod(v, &end);
    if (end == v || *end || d < min || d > max) {
        fprintf(stderr, "bench: ignoring %s='%s' (want %g..%g)\n", name, v, min, max);
        return def;
    }
    return d;
}

bool bench_wanted(const char *group) {
    const char *only = getenv("BENCH_ONLY");
    return !only || !*only || strstr(only, group) != NULL;
}

int bench_scratch_root(char *root, size_t cap, const char *name) {
    const char *parent = getenv("PETREL_BENCH_DIR");
    if (!parent || !*parent) parent = "/tmp";
    if (mq_mkdirs(parent) != MQ_OK) {
        fprintf(stderr, "bench: cannot create '%s'\n", parent);
        return -1;
    }
    int n = snprintf(root, cap, "%s/%s-XXXXXX", parent, name);
    if (n < 0 || (size_t)n >= cap || !mkdtemp(root)) {
        fprintf(stderr, "bench: cannot create a directory under '%s': %s\n", parent,
                strerror(errno));
        return -1;
    }
    return 0;
}

static void cpu_model(char *buf, size_t cap) {
    snprintf(buf, cap, "unknown");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return;
    char line[512];
    while (fgets(line, sizeof(line), f)) {
        char *p = strchr(line, ':');
        if (strncmp(line, "model name", 10) == 0 && p) {
            p++;
            while (*p == ' ') p++;
            p[strcspn(p, "\n")] = '\0';
            snprintf(buf, cap, "%s", p);
            break;
        }
    }
    fclose(f);
}

void bench_print_machine(const char *prog) {
    char date[64];
    time_t t = time(NULL);
    struct tm tm;
    localtime_r(&t, &tm);
    strftime(date, sizeof(date), "%Y-%m-%d %H:%M:%S %z", &tm);
    struct utsname u;
    if (uname(&u) != 0) memset(&u, 0, sizeof(u));
    char cpu[256];
    cpu_model(cpu, sizeof(cpu));
    printf("petrel %s  %s\n", prog, date);
    printf("kernel  %s %s %s, %ld online CPUs\n", u.sysname, u.release, u.machine,
           sysconf(_SC_NPROCESSORS_ONLN));
    printf("cpu     %s\n", cpu);
}

/* ======================================================================
 * Latency histogram
 * ====================================================================== */

static size_t h_index(uint64_t v) {
    if (v < (2u << HIST_SUB_BITS)) return (size_t)v;
    int e = 63 - __builtin_clzll(v) - HIST_SUB_BITS;
    return (size_t)e * 32 + (size_t)(v >> e);
}

static double h_value(size_t idx) {
    if (idx < (2u << HIST_SUB_BITS)) return (double)idx;
    int e = (int)(idx / 32) - 1;
    double lo = (double)((idx % 32 + 32) << e);
    return lo + (double)((uint64_t)1 << e) / 2; /* bucket middle */
}

void hist_add(Hist *h, uint64_t v) {
    h->n[h_index(v)]++;
    h->count++;
}

void hist_merge(Hist *into, const Hist *from) {
    for (size_t i = 0; i < HIST_BUCKETS; i++) into->n[i] += from->n[i];
    into->count += from->count;
}

double hist_pct(const Hist *h, double p) {
    if (!h->count) return NAN;
    uint64_t want = (uint64_t)ceil(p * (double)h->count);
    if (want == 0) want = 1;
    uint64_t seen = 0;
    for (size_t i = 0; i < HIST_BUCKETS; i++) {
        seen += h->n[i];
        if (seen >= want) return h_value(i);
    }
    return NAN;
}

/* ======================================================================
 * The fdatasync ceiling
 * ====================================================================== */

double bench_fdatasync_rate(const char *dir, off_t prealloc, double secs, double *p50_us,
                            double *p99_us) {
    double rate = NAN;
    *p50_us = NAN;
    *p99_us = NAN;
    char *path = NULL;
    if (asprintf(&path, "%s/fsync.dat", dir) < 0) path = NULL;
    Hist *hist = calloc(1, sizeof(*hist));
    char *page = aligned_alloc(4096, 4096);
    int fd = path ? open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644) : -1;
    /* Preallocated like a commit-log segment (mfile.c uses fallocate). */
    if (!hist || !page || fd < 0 || fallocate(fd, 0, 0, prealloc) != 0 || fdatasync(fd) != 0) {
        fprintf(stderr, "bench: fdatasync: cannot set up '%s': %s\n", path ? path : "?",
                strerror(errno));
        goto out;
    }
    memset(page, 'f', 4096);
    off_t off = 0;
    uint64_t n = 0;
    int64_t t0 = mq_mono_ns();
    int64_t end = t0 + (int64_t)(secs * 1e9);
    int64_t t = t0;
    while (t < end && !bench_interrupted) {
        if (pwrite(fd, page, 4096, off) != 4096 || fdatasync(fd) != 0) {
            fprintf(stderr, "bench: fdatasync loop: %s\n", strerror(errno));
            goto out;
        }
        int64_t t1 = mq_mono_ns();
        hist_add(hist, (uint64_t)(t1 - t));
        t = t1;
        n++;
        off = (off + 4096) % prealloc;
        page[0]++; /* a different page each time */
    }
    rate = (double)n / ((double)(t - t0) / 1e9);
    *p50_us = hist_pct(hist, 0.50) / 1e3;
    *p99_us = hist_pct(hist, 0.99) / 1e3;
out:
    if (fd >= 0) close(fd);
    if (path) unlink(path);
    free(path);
    free(page);
    free(hist);
    return rate;
}

/* ======================================================================
 * Results table
 * ====================================================================== */

enum { MAX_ROWS = 64, CELL = 96 };
static Row rows[MAX_ROWS];
static size_t nrows;

Row *row_add(const char *unit, double value, const char *fmt, ...) {
    static Row spare;
    if (nrows == MAX_ROWS) return &spare;
    Row *r = &rows[nrows++];
    memset(r, 0, sizeof(*r));
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->what, sizeof(r->what), fmt, ap);
    va_end(ap);
    snprintf(r->unit, sizeof(r->unit), "%s", unit);
    r->value = value;
    r->ratio = NAN;
    r->met = isnan(value) ? MET_ERROR : MET_NONE;
    return r;
}

/* fmt_num prints 'v' with thousands separators above 1000, else with up to
 * two decimals. */
static void fmt_num(char *buf, size_t cap, double v) {
    if (isnan(v)) {
        snprintf(buf, cap, "-");
        return;
    }
    if (fabs(v) < 1000) {
        snprintf(buf, cap, fabs(v) < 10 ? "%.2f" : "%.1f", v);
        return;
    }
    char digits[32];
    snprintf(digits, sizeof(digits), "%.0f", fabs(v));
    size_t n = strlen(digits);
    size_t o = 0;
    if (v < 0 && o + 1 < cap) buf[o++] = '-';
    for (size_t i = 0; i < n && o + 2 < cap; i++) {
        if (i && (n - i) % 3 == 0) buf[o++] = ',';
        buf[o++] = digits[i];
    }
    buf[o] = '\0';
}

void row_ceiling(Row *r, double ceiling, const char *unit, const char *what) {
    char num[32];
    fmt_num(num, sizeof(num), ceiling);
    snprintf(r->ceiling, sizeof(r->ceiling), "%s %s %s", num, unit, what);
    if (!isnan(r->value) && ceiling > 0) r->ratio = r->value / ceiling;
}

void row_target(Row *r, double x, bool at_least, double limit, const char *text) {
    snprintf(r->target, sizeof(r->target), "%s", text);
    if (r->met == MET_ERROR) return;
    if (isnan(x)) {
        r->met = MET_ERROR;
        return;
    }
    r->met = (at_least ? x >= limit : x < limit) ? MET_YES : MET_NO;
}

static void print_table(void) {
    const char *head[7] = {"what", "value", "unit", "ceiling (same run)", "ratio", "target",
                           "met?"};
    static char cell[MAX_ROWS][7][CELL];
    size_t w[7];
    for (int c = 0; c < 7; c++) w[c] = strlen(head[c]);
    for (size_t i = 0; i < nrows; i++) {
        const Row *r = &rows[i];
        snprintf(cell[i][0], CELL, "%s", r->what);
        fmt_num(cell[i][1], CELL, r->value);
        snprintf(cell[i][2], CELL, "%s", r->unit);
        snprintf(cell[i][3], CELL, "%s", r->ceiling[0] ? r->ceiling : "-");
        if (isnan(r->ratio))
            snprintf(cell[i][4], CELL, "-");
        else
            snprintf(cell[i][4], CELL, r->ratio < 10 ? "%.2fx" : "%.1fx", r->ratio);
        snprintf(cell[i][5], CELL, "%s", r->target[0] ? r->target : "-");
        snprintf(cell[i][6], CELL, "%s",
                 r->met == MET_YES     ? "yes"
                 : r->met == MET_NO    ? "NO"
                 : r->met == MET_ERROR ? "ERROR"
                                       : "-");
        for (int c = 0; c < 7; c++)
            if (strlen(cell[i][c]) > w[c]) w[c] = strlen(cell[i][c]);
    }
    /* Text columns are left-aligned, numbers right-aligned. */
    const bool right[7] = {false, true, false, false, true, false, false};
    for (size_t i = 0; i <= nrows + 1; i++) {
        for (int c = 0; c < 7; c++) {
            if (i == 1) {
                for (size_t k = 0; k < w[c] + (c ? 2 : 1); k++) putchar('-');
                if (c < 6) putchar('+');
                continue;
            }
            const char *s = i == 0 ? head[c] : cell[i - 2][c];
            printf(c ? " " : "");
            printf(right[c] && i ? "%*s" : "%-*s", (int)w[c], s);
            printf(c < 6 ? " |" : "");
        }
        putchar('\n');
    }
}

int bench_report(int64_t t0_ns, int case_errors) {
    printf("\n");
    print_table();
    size_t targets = 0;
    size_t met = 0;
    size_t errors = 0;
    for (size_t i = 0; i < nrows; i++) {
        if (rows[i].target[0]) targets++;
        if (rows[i].met == MET_YES) met++;
        if (rows[i].met == MET_ERROR) errors++;
    }
    printf("\nbench: %zu figures, %zu targets met, %zu missed%s (%.0f s%s)\n", nrows, met,
           targets - met, errors || case_errors ? ", some figures failed to run" : "",
           (double)(mq_mono_ns() - t0_ns) / 1e9, bench_interrupted ? ", interrupted" : "");
    fflush(stdout);
    return case_errors || errors || bench_interrupted ? 1 : 0;
}
