/*
 * benchlib.h - what the benchmark programs (tests/bench/bench_*.c) share:
 * the SIGINT/SIGTERM flag, BENCH_* settings from the environment, the
 * BENCH_ONLY group filter, the scratch directory, the machine lines of the
 * header, a latency histogram, the raw 4 KiB append + fdatasync loop (the
 * ceiling of every durable write), and the results table with the summary
 * line "bench: N figures, M targets met, K missed" that scripts/run-bench.sh
 * parses.  For the benches that drive a real broker: child processes and
 * their CPU time, a keep-alive HTTP/1.1 client over a plain socket,
 * `petrel standalone` started on a free port, message bodies, topic
 * prefill, and the paced producers of the latency cases.
 *
 * The clock is mq_mono_ns (mq.h).  Linked into every unit, e2e and bench
 * program (the Makefile links all of tests/lib), so it uses only libc, libm,
 * pthreads, jansson (linked into every test program) and libstore's mq.h
 * and e2e_read_port/e2e_exit_status: no cmocka.  Not thread-safe except for
 * bench_interrupted, bench_sleep_ms, the histogram (one Hist per thread,
 * merged after the join), one Http per thread, and the latency run (LatRun
 * is shared by its threads).
 */
#ifndef PETREL_BENCHLIB_H
#define PETREL_BENCHLIB_H

#include <limits.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include <jansson.h>

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

/* bench_wanted_word is bench_wanted for group names that contain one
 * another ("receive", "receivelat"): true when BENCH_ONLY is unset or
 * empty, or one of its words (separated by commas or spaces) is 'group'. */
bool bench_wanted_word(const char *group);

/* bench_scratch_root makes a fresh directory <parent>/<name>-XXXXXX, the
 * parent being $PETREL_BENCH_DIR (default /tmp, created if missing), and
 * writes its path into 'root' ('cap' bytes).  Returns 0, or -1 after a
 * message on stderr.  The caller removes it (mq_rmtree) at the end. */
int bench_scratch_root(char *root, size_t cap, const char *name);

/* bench_prepare is the common start of a bench that runs brokers: the
 * absolute path of $PETREL_BIN (default bin/petrel; it must be
 * executable) into 'petrel' (PATH_MAX bytes), a scratch root as
 * bench_scratch_root, SIGINT/SIGTERM caught and SIGPIPE ignored.  Returns
 * 0, or -1 after a message on stderr. */
int bench_prepare(char *petrel, char *root, size_t cap, const char *name);

/* bench_print_machine prints the first lines of a bench's header:
 * "petrel <prog>  <local date>", the kernel and CPU count, the CPU model. */
void bench_print_machine(const char *prog);

/* bench_print_load measures, over one second, how busy the machine is
 * before anything starts (other processes, steal) and prints it as the
 * header's "load" line: a busy machine explains low figures. */
void bench_print_load(void);

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

/* ---- child processes, CPU time, memory ----------------------------------*/

/* CPU time of all CPUs since boot (/proc/stat), seconds.  Softirq work
 * (loopback TCP delivery, mostly) is booked apart here, while a process's
 * own CPU time (/proc/PID/stat, getrusage) includes the softirq work done
 * inline on its threads: compare process times with procs + softirq. */
typedef struct SysCpu {
    double procs;   /* user + nice + system + irq: processes and threads */
    double softirq;
    double steal;   /* taken by the hypervisor for other guests */
} SysCpu;

/* bench_sys_cpu reads /proc/stat; NAN fields when it cannot. */
SysCpu bench_sys_cpu(void);

/* bench_cpu_secs is the user + system CPU time of 'pid' so far (0 = this
 * process, all threads); NAN when unknown. */
double bench_cpu_secs(pid_t pid);

/* CPU time of one thread of a process. */
typedef struct ThreadCpu {
    int tid;
    char comm[24];  /* its name (/proc/PID/task/TID/comm) */
    double secs;    /* user + system CPU seconds so far */
} ThreadCpu;

/* bench_thread_cpu reads the CPU time of up to 'cap' threads of 'pid'
 * into 'out'; their number (0 when unknown). */
int bench_thread_cpu(pid_t pid, ThreadCpu *out, int cap);

/* bench_thread_cores prints "<comm>/<tid> <cores>, ..." into 'buf' for
 * the threads of 'after' that used at least 0.01 cores over 'wall'
 * seconds since 'before' (busiest first, at most 6). */
void bench_thread_cores(const ThreadCpu *before, int nbefore, const ThreadCpu *after,
                        int nafter, double wall, char *buf, size_t cap);

/* bench_rss_anon_kib reads RssAnon of 'pid' from /proc; -1 when unknown. */
long bench_rss_anon_kib(pid_t pid);

/* bench_spawn runs 'argv' (argv[0] searched in PATH) with stdout and
 * stderr appended to 'out_path'; the child dies with this program
 * (PDEATHSIG), so an interrupted bench leaves nothing behind.  The pid, or
 * -1 on failure (said on stderr). */
pid_t bench_spawn(char *const *argv, const char *out_path);

/* bench_stop_pid sends SIGTERM to 'pid' (a child of ours), waits up to
 * 'wait_ms', then SIGKILLs it.  Returns its exit status as
 * e2e_exit_status does, -1 when 'pid' <= 0. */
int bench_stop_pid(pid_t pid, long wait_ms);

/* ---- a minimal HTTP/1.1 client -------------------------------------------
 * One keep-alive connection to 127.0.0.1:'port', one request at a time,
 * Content-Length bodies only (what the gateway sends outside a stream),
 * TCP_NODELAY, HTTP_IO_TIMEOUT_S socket timeouts.  One Http per thread. */

enum { HTTP_IO_TIMEOUT_S = 15 };

typedef struct Http {
    int fd;          /* -1 = not connected */
    int port;
    char *buf;       /* the last response, head and body */
    size_t cap;      /* bytes allocated at 'buf' */
    char *out;       /* the request being sent */
    size_t out_cap;  /* bytes allocated at 'out' */
} Http;

void http_init(Http *h, int port);

/* http_connect opens the connection (h->fd); 0 or -1. */
int http_connect(Http *h);

void http_close(Http *h);

/* http_free closes the connection and frees the buffers ('h' may be
 * initialised again). */
void http_free(Http *h);

/* http_send_all writes 'len' bytes to 'fd' (no SIGPIPE); false on error. */
bool http_send_all(int fd, const char *p, size_t len);

/* http_call sends one request ('ctype' and 'body' may be NULL) and reads
 * the answer.  Returns the HTTP status, or -1 when the connection failed
 * (it is reopened on the next call).  '*resp' (NUL-terminated) points into
 * 'h' and stays valid until the next call. */
int http_call(Http *h, const char *method, const char *path, const char *ctype,
              const char *body, size_t len, const char **resp, size_t *resp_len);

/* http_expect sends one request and checks the status and that the answer
 * contains 'needle' (NULL: anything); prints the answer on stderr
 * otherwise, 'what' first.  With 'root' the answer is also parsed (caller
 * owns *root).  A bench checks the first request of each case this way:
 * a bench that measures 400s is useless. */
bool http_expect(Http *h, const char *what, const char *method, const char *path,
                 const char *ctype, const char *body, size_t len, int status,
                 const char *needle, json_t **root);

/* ---- brokers: `petrel standalone` on a free port -------------------------*/

enum { SRV_WAIT_START_MS = 10000, /* longest wait for the port file */
       SRV_WAIT_STOP_MS = 15000 /* longest wait after SIGTERM (SYNC_FLUSH grace is 6 s) */ };

typedef struct Srv {
    pid_t pid;            /* 0 = not running */
    int port;
    char label[32];       /* "async", "sync", ... */
    char dir[PATH_MAX];   /* <root>/broker-<label> */
    char log[PATH_MAX + 16];
    char url[64];         /* http://127.0.0.1:<port> */
} Srv;

/* srv_start starts the broker 'petrel' (`standalone`, listening on
 * 127.0.0.1:0) with its data and log in <root>/broker-<label>, the default
 * store sizes, --logLevel=warn, the flags 'extra' (NULL or a
 * NULL-terminated list of --key=value) and then those of
 * $BENCH_BROKER_FLAGS (space-separated; later ones win); waits for its
 * port file.  0, or -1 after a message on stderr. */
int srv_start(Srv *s, const char *petrel, const char *root, const char *label,
              const char *const *extra);

/* srv_stop stops the broker (SIGTERM, then SIGKILL after
 * SRV_WAIT_STOP_MS), prints its exit status and what it logged (warn level
 * and above: anything is worth a look), and removes its directory unless
 * 'keep'. */
void srv_stop(Srv *s, bool keep);

/* ---- messages and topics -------------------------------------------------*/

enum { BENCH_BODY_LEN = 100,   /* bytes of every message body */
       BENCH_PREFILL_BATCH = 1000 /* messages per prefill request (the broker's maximum) */ };

/* bench_make_body fills 'out' with 'len' JSON-safe bytes (no NUL added). */
void bench_make_body(char *out, size_t len, unsigned seed);

/* bench_json_msg writes {"body":"<BENCH_BODY_LEN bytes>"} and a NUL into
 * 'out' (>= BENCH_BODY_LEN + 12 bytes); returns its length. */
size_t bench_json_msg(char *out, unsigned seed);

/* bench_json_batch returns {"messages":[...'count' messages...]} (caller
 * frees), its length in '*len'. */
char *bench_json_batch(size_t count, size_t *len);

/* bench_queue_ranges reads the queues of 'topic': min and max offsets into
 * the arrays (up to 'cap' queues); the number of queues, or -1. */
int bench_queue_ranges(Http *h, const char *topic, uint64_t *qmin, uint64_t *qmax, int cap);

/* bench_settle_queues waits (up to 10 s) until the queues of 'topic' stop
 * growing (the dispatcher has caught up) and reads them; the queue count
 * or -1. */
int bench_settle_queues(Http *h, const char *topic, uint64_t *qmin, uint64_t *qmax, int cap);

/* bench_prefill tops 'topic' (auto-created by the first batch when it
 * does not exist) up to 'total' messages with batches of
 * BENCH_PREFILL_BATCH over two connections to 'port', and prints what it
 * did.  False on an error answer or when interrupted. */
bool bench_prefill(int port, Http *h, const char *topic, long total);

/* ---- produce -> consume latency at a paced rate ----------------------------
 * 'producers' threads (lat_producer_main), one keep-alive connection each,
 * share the schedule: message 'seq' is due at t0 + seq / rate and is sent
 * by producer seq % producers to 'topic' (late sends go at once; the
 * latency clock starts at the send, so the schedule's slack is not
 * counted).  Each body is "seq=<12 digits>;<padding>" (lat_msg), and a
 * consumer records each message it gets with lat_take: arrival - send
 * time.  Messages sent in the first 'warmup_ns' are left out of the judged
 * histogram 'lat' (kept in 'all'): the first message of a fresh broker or
 * queue waits tens of ms while the store creates and preallocates its
 * files. */

typedef struct LatRun {
    int port;
    const char *topic;           /* produce target */
    double rate;                 /* msgs/s, all producers together */
    int producers;
    uint64_t cap;                /* sequence numbers available */
    _Atomic int64_t *sent_ns;    /* per seq: mq_mono_ns() before its send; 0 = not sent */
    atomic_uchar *seen;          /* per seq: times a consumer got it */
    int64_t t0;                  /* the schedule's origin */
    int64_t warmup_ns;           /* messages sent before t0 + this are not judged */
    int64_t end;                 /* nothing is due at or after this */
    atomic_uint_fast64_t sent;   /* produces answered SEND_OK */
    _Atomic int64_t last_ns;     /* when the last send started */
    atomic_int producers_left;
    atomic_bool failed;
    int delay_level;             /* > 0: every message is produced with this delayLevel */
    int64_t delay_ns;            /* its delay: latencies are counted from send + this */
    int64_t timer_min_ms;        /* timer_max_ms > 0: every message is produced with
                                  * "delayMs" lat_timer_ms(seq), from timer_min_ms to */
    int64_t timer_max_ms;        /* timer_max_ms; latencies count from send + that */
    atomic_uint_fast64_t early;  /* messages received before their time */
} LatRun;

/* lat_timer_ms is the delayMs of message 'seq' of 'run' (a fixed
 * pseudo-random draw from [timer_min_ms, timer_max_ms]); 0 when the run
 * has no timers. */
int64_t lat_timer_ms(const LatRun *run, uint64_t seq);

typedef struct LatProducer {
    LatRun *run;
    int idx;
    Hist rtt;      /* produce round trip, ns */
    uint64_t late; /* sends that started more than 1 ms behind their due time */
} LatProducer;

typedef struct LatConsumer {
    LatRun *run;
    FILE *dump;        /* "<send ms since t0> <latency us>" lines, or NULL */
    Hist lat;          /* produce -> consumer, ns, sent after the warm-up */
    Hist all;          /* the same, every message */
    uint64_t received; /* messages */
    uint64_t dups;     /* messages seen twice */
    uint64_t unknown;  /* bodies that name no sent sequence number */
    uint64_t polls;
    uint64_t empty;    /* polls answered without messages */
} LatConsumer;

/* lat_run_init sets 'run' up for 'secs' seconds at 'rate' with
 * 'producers' producers to 'topic' on 'port' (t0 and end are set by the
 * caller before the threads start); false when out of memory.
 * lat_run_free frees its arrays. */
bool lat_run_init(LatRun *run, int port, const char *topic, double rate, int producers,
                  double secs, int64_t warmup_ns);
void lat_run_free(LatRun *run);

/* lat_producer_main is the thread of LatProducer 'arg'. */
void *lat_producer_main(void *arg);

/* lat_pull_main is a LatConsumer thread ('arg') that long-polls queue 0 of
 * run->topic (pull, waitMs=500, max=1000) until every message sent has
 * arrived, 5 s after the schedule's end, or a failure. */
void *lat_pull_main(void *arg);

/* lat_take records the messages of one answer 'resp' received at 't'.
 * The text is scanned rather than parsed (a full JSON parse of every
 * answer costs a third of a core, on the broker's CPUs): each message's
 * body starts with "seq=<12 digits>;".  Returns the number of messages
 * seen. */
size_t lat_take(LatConsumer *c, const char *resp, int64_t t);

/* bench_sleep_until sleeps until 't_ns' on the mq_mono_ns clock. */
void bench_sleep_until(int64_t t_ns);

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
