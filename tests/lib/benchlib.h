/*
 * benchlib.h - what the benchmark programs (tests/bench/bench_*.c) share:
 * the SIGINT/SIGTERM flag, BENCH_* settings from the environment, the
 * BENCH_ONLY group filter, the scratch directory, the machine lines of the
 * header, a latency histogram, the raw 4 KiB append + fdatasync loop (the
 * ceiling of every durable write), and the results table with the summary
 * line "bench: N figures, M targets met, K missed" that scripts/run-bench.sh
 * parses.
 *
 * The clock is mq_mono_ns (mq.h).  Linked into every unit, e2e and bench
 * program (the Makefile links all of tests/lib), so it uses only libc, libm,
 * pthreads and libstore's mq.h: no cmocka.  Not thread-safe except for
 * bench_interrupted, bench_sleep_ms and the histogram (one Hist per thread,
 * merged after the join).
 */
#ifndef PETREL_BENCHLIB_H
#define PETREL_BENCHLIB_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* ---- run control ---------------------------------------------------------*/

/* bench_interrupted is set by SIGINT/SIGTERM once bench_catch_signals has
 * run: cases stop early and the program skips to its cleanup and table. */
extern volatile sig_atomic_t bench_interrupted;

/* bench_catch_signals routes SIGINT and SIGTERM to bench_interrupted. */
void bench_catch_signals(void);

/* bench_sleep_ms sleeps 'ms' milliseconds, less when interrupted. */
void bench_sleep_ms(long ms);

/* bench_env_num reads the number in environment variable 'name': 'def'
 * when unset or empty, and (with a note on stderr) when it is not a
 * number within min..max. */
double bench_env_num(const char *name, double def, double min, double max);

/* bench_wanted is true when BENCH_ONLY is unset or empty, or contains
 * 'group' as a substring ("json,pull"; note that "async" contains "sync"). */
bool bench_wanted(const char *group);

/* bench_scratch_root makes a fresh directory <parent>/<name>-XXXXXX, the
 * parent being $PETREL_BENCH_DIR (default /tmp, created if missing), and
 * writes its path into 'root' ('cap' bytes).  Returns 0, or -1 after a
 * message on stderr.  The caller removes it (mq_rmtree) at the end. */
int bench_scratch_root(char *root, size_t cap, const char *name);

/* bench_print_machine prints the first lines of a bench's header:
 * "petrel <prog>  <local date>", the kernel and CPU count, the CPU model. */
void bench_print_machine(const char *prog);

/* ---- latency histogram: 32 sub-buckets per power of two (about 3 % wide) */

enum { HIST_SUB_BITS = 5, HIST_BUCKETS = 64 * 32 };

typedef struct Hist {
    uint64_t n[HIST_BUCKETS];
    uint64_t count;
} Hist; /* all zero = empty */

void hist_add(Hist *h, uint64_t v);
void hist_merge(Hist *into, const Hist *from);

/* hist_pct returns the value below which 'p' (0..1) of the samples fall
 * (the middle of its bucket); NAN when 'h' is empty. */
double hist_pct(const Hist *h, double p);

/* ---- the fdatasync ceiling -----------------------------------------------*/

/* bench_fdatasync_rate appends 4 KiB and fdatasyncs, again and again for
 * 'secs' seconds, to <dir>/fsync.dat preallocated to 'prealloc' bytes like
 * a commit-log segment (wrapping at its end), then removes the file.
 * Returns the rate per second and the p50 and p99 of one append + sync in
 * microseconds; NAN for all three on failure (said on stderr). */
double bench_fdatasync_rate(const char *dir, off_t prealloc, double secs, double *p50_us,
                            double *p99_us);

/* ---- results table -------------------------------------------------------
 * One row per figure: what, value, unit, the ceiling it is compared with
 * (measured in the same run), their ratio, the target and whether it is
 * met.  Up to 64 rows; more are dropped. */

enum { MET_NONE = -1, MET_NO = 0, MET_YES = 1, MET_ERROR = 2 };

typedef struct Row {
    char what[80];
    double value;     /* NAN when the case failed */
    char unit[16];
    char ceiling[64]; /* what the figure is compared with, measured in this run */
    double ratio;     /* value / ceiling, NAN if none */
    char target[24];
    int met;          /* MET_*: MET_ERROR when 'value' is NAN */
} Row;

/* row_add appends a row named by the printf-style 'fmt'; the row stays
 * valid until the end of the program. */
Row *row_add(const char *unit, double value, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* row_ceiling sets the ceiling column to "<ceiling> <unit> <what>" and the
 * ratio to value / ceiling. */
void row_ceiling(Row *r, double ceiling, const char *unit, const char *what);

/* row_target judges 'x' (the value, or the ratio) against 'limit': met
 * when x >= limit ('at_least') or x < limit; 'text' is the target column. */
void row_target(Row *r, double x, bool at_least, double limit, const char *text);

/* bench_report prints a blank line, the table and the summary line
 * "bench: N figures, M targets met, K missed[, some figures failed to run]
 * (<seconds since 't0_ns'> s[, interrupted])", 't0_ns' on the mq_mono_ns
 * clock.  Returns the exit status: 1 when 'case_errors' (cases that could
 * not run or were broken) is not 0, a figure failed or the run was
 * interrupted; else 0 (a missed target does not fail). */
int bench_report(int64_t t0_ns, int case_errors);

#endif
