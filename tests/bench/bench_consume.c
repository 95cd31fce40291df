/*
 * bench_consume.c - consuming over HTTP with the receive/ack API
 * (gateway/h_consume.c, core/pop.c), each figure next to a ceiling measured
 * in the same run, against real `petrel standalone` processes (PETREL_BIN):
 *
 *   receive     receive + ack throughput: BENCH_CONSUMERS threads, one
 *               keep-alive connection each, loop "receive 32 (waitMs 0) ->
 *               ack all of them" on an 8-queue topic of 100-byte messages
 *               preloaded in the page cache.  Ceiling: classic pull of 32
 *               by the same client model (as many threads, each walking
 *               its own queues, no ack).
 *   stream      Server-Sent Events push to one client (GET .../stream,
 *               BENCH_STREAM_MAX messages per fetch), acked in batches of
 *               up to 1000 on a second connection by another thread.
 *               Ceiling: the same pull rate.
 *   receivelat  produce -> long-poll receive latency at a paced rate
 *               (benchlib's paced producers, BENCH_LAT_CONSUMERS consumers
 *               doing receive waitMs=1000 + ack).  Ceiling: produce ->
 *               long-poll pull latency with the same pacer, measured just
 *               before on the same broker (bench_http's latency case).
 *   delaylat    lateness of delayLevel 1 (1 s) messages at BENCH_DELAY_RATE (2000/s)
 *   delayfill   BENCH_DELAY_PENDING (1,000,000) messages waiting at delayLevel 18: the
 *               produce rate against plain batches, the broker's RssAnon and its
 *               CPU while they wait
 *   timerlat    lateness of timers (delayMs 1..3 s at random: hops through the wheel)
 *               at BENCH_DELAY_RATE (2000/s), never early
 *   timerfill   BENCH_DELAY_PENDING (1,000,000) timers with deliverAt spread over the
 *               next hour: the produce rate against plain batches, the broker's
 *               RssAnon and its CPU while they wait
 *
 * The client is C (plain keep-alive HTTP/1.1 over sockets, benchlib's
 * Http; answers are scanned, not parsed).  A case whose first request is
 * not the expected 200 (checked before measuring), or that saw an error
 * answer, an ack that is not "OK" (EXPIRED, INVALID) or a lost or
 * duplicated message, is reported broken (ERROR in the table).  Never
 * fails on a missed target: exit 1 only when a case could not run or was
 * broken.  Output: per-case diagnostics (CPU used by the broker, by this
 * bench and by the rest), then one table and the line "bench: N figures,
 * M targets met, K missed" (scripts/run-bench.sh).
 *
 * Brokers run with their defaults (ASYNC_FLUSH, offsetFlushInterval) plus
 * BENCH_BROKER_FLAGS, except one flag of the throughput broker, said in
 * its rows: --popInflightMessageThreshold=1000000 (default 10000 per
 * queue), so that the stream's in-flight limit is not what is measured
 * (the receive threads ack at once: they never come near it).  Each
 * case prints the CPU of the broker's busiest threads: one HTTP worker
 * serves a connection for its whole life and uses at most one core, and
 * the workers do not always share the connections out evenly.
 *
 * Env (default):
 *   PETREL_BIN (bin/petrel)        the broker binary
 *   PETREL_BENCH_DIR (/tmp)        parent of the scratch directory
 *   BENCH_SECS (5)                 each measured run, seconds
 *   BENCH_CONSUMERS (4)            receive and pull threads (connections)
 *   BENCH_CONSUME_MSGS (2000000)   messages preloaded; a run that drains
 *                                  them ends early (said so)
 *   BENCH_STREAM_MAX (64)          the stream's maxMessages per fetch
 *   BENCH_LAT_RATE (10000)         msgs/s of the paced latency cases
 *   BENCH_LAT_PRODUCERS (8)        producer connections sharing that rate
 *   BENCH_LAT_CONSUMERS (2)        long-poll receive consumers
 *   BENCH_LAT_WARMUP_MS (500)      latencies of messages sent earlier are
 *                                  printed, not judged
 *   BENCH_ONLY (all)               groups: receive stream receivelat delaylat delayfill
 *                                  timerlat timerfill (whole
 *                                  words; the pull ceiling runs with receive
 *                                  and stream)
 *   BENCH_BROKER_FLAGS ()          more --key=value flags for every broker
 *   BENCH_PERF ()                  a directory: `perf record -g` the broker
 *                                  during the receive and stream runs into
 *                                  <dir>/perf-<case>.data (slows it a bit)
 *   BENCH_KEEP ()                  set: keep the scratch dir (broker logs
 *                                  and data)
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "benchlib.h"
#include "mq.h"
#include "receipt.h"

#define TOPIC "consume"             /* the 8-queue topic of receive, stream and pull */
#define TOPIC_QUEUES 8
#define RECEIVE_GROUP "bench-receive"
#define STREAM_GROUP "bench-stream"
#define LAT_GROUP "bench-lat"
#define LAT_PULL_TOPIC "latpull"    /* one queue: bench_http's latency case */
#define LAT_RECV_TOPIC "latreceive" /* TOPIC_QUEUES queues */
#define BATCH_MAX 32                /* messages per receive and per pull */
#define ACK_MAX 1000                /* receipt handles per ack (the broker's maximum) */
#define INVISIBLE_MS 30000          /* receive */
#define STREAM_INVISIBLE_MS 300000  /* stream: far beyond the run */
#define LAT_WAIT_MS 1000            /* long-poll receive */
#define MAX_THREADS 64
/* popInflightMessageThreshold of the throughput broker: well above what
 * the stream gets ahead of its acker in a run, so that the limit is not
 * what is measured (at the default 10000 per queue a stream that reaches
 * it waits for its keep-alive timer: acks do not wake it). */
#define INFLIGHT_MAX 1000000
#define BENCH_TIMER_MIN_MS 1000 /* timerlat: delayMs from */
#define BENCH_TIMER_MAX_MS 3000 /* to */

/* ======================================================================
 * Settings, helpers
 * ====================================================================== */

typedef struct Settings {
    int secs;              /* BENCH_SECS: each measured run */
    int consumers;         /* BENCH_CONSUMERS: receive and pull threads */
    long msgs;             /* BENCH_CONSUME_MSGS: preloaded */
    int stream_max;        /* BENCH_STREAM_MAX: maxMessages per stream fetch */
    double lat_rate;       /* BENCH_LAT_RATE: msgs/s of the paced producers */
    double delay_rate;     /* BENCH_DELAY_RATE: msgs/s of the delayed case */
    long delay_pending;    /* BENCH_DELAY_PENDING: messages of the delayfill case */
    int lat_producers;     /* BENCH_LAT_PRODUCERS */
    int lat_consumers;     /* BENCH_LAT_CONSUMERS */
    long lat_warmup_ms;    /* BENCH_LAT_WARMUP_MS: not judged at the start */
    const char *perf_dir;  /* BENCH_PERF: NULL = no profile */
    char petrel[PATH_MAX]; /* PETREL_BIN, absolute */
    bool keep;             /* BENCH_KEEP */
    char root[PATH_MAX];   /* scratch directory, removed at the end */
} Settings;

static Settings cfg_g;
static int case_errors; /* cases that could not run or were broken */

/* What one throughput run measured. */
typedef struct Figure {
    double rate;   /* msgs/s; NAN = failed or broken */
    double cpu_us; /* broker CPU time per message, us */
} Figure;

static const Figure NO_FIGURE = {NAN, NAN};

/* CPU use over a measured window: broker, this bench, everything else. */
typedef struct CpuWindow {
    pid_t broker;
    double broker0;  /* CPU seconds at the start */
    double self0;
    SysCpu sys0;
    int64_t t0;      /* mq_mono_ns at the start */
    ThreadCpu threads0[MAX_THREADS]; /* the broker's threads at the start */
    int nthreads0;
    double broker_cores; /* filled by cpu_end */
    double self_cores;
    double other_cores;
    char threads[256];   /* the busiest broker threads over the window, in cores */
} CpuWindow;

static void cpu_begin(CpuWindow *w, pid_t broker) {
    memset(w, 0, sizeof(*w));
    w->broker = broker;
    w->broker0 = bench_cpu_secs(broker);
    w->self0 = bench_cpu_secs(0);
    w->sys0 = bench_sys_cpu();
    w->nthreads0 = bench_thread_cpu(broker, w->threads0, MAX_THREADS);
    w->t0 = mq_mono_ns();
}

/* cpu_end fills the cores and returns the broker's CPU seconds. */
static double cpu_end(CpuWindow *w) {
    double wall = (double)(mq_mono_ns() - w->t0) / 1e9;
    double broker = bench_cpu_secs(w->broker) - w->broker0;
    double self = bench_cpu_secs(0) - w->self0;
    SysCpu s1 = bench_sys_cpu();
    ThreadCpu t1[MAX_THREADS];
    int n1 = bench_thread_cpu(w->broker, t1, MAX_THREADS);
    bench_thread_cores(w->threads0, w->nthreads0, t1, n1, wall, w->threads, sizeof(w->threads));
    w->broker_cores = broker / wall;
    w->self_cores = self / wall;
    w->other_cores = (s1.procs - w->sys0.procs + s1.softirq - w->sys0.softirq) / wall -
                     w->broker_cores - w->self_cores;
    return broker;
}

static void cpu_print(const char *label, const CpuWindow *w) {
    printf("  %-10s cpu (cores of %ld): broker %.2f, this bench %.2f, others %.2f\n"
           "  %-10s broker threads: %s\n", label, sysconf(_SC_NPROCESSORS_ONLN),
           w->broker_cores, w->self_cores, w->other_cores, "", w->threads);
}

/* count_of counts the occurrences of 'needle' in 's'. */
static size_t count_of(const char *s, const char *needle) {
    size_t n = 0;
    size_t len = strlen(needle);
    for (const char *p = strstr(s, needle); p; p = strstr(p + len, needle)) n++;
    return n;
}

static bool is_hex(const char *p, size_t len) {
    for (size_t i = 0; i < len; i++) {
        char c = p[i];
        if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')))
            return false;
    }
    return true;
}

/* Ack request body: {"topic":"<topic>","receiptHandles":["h",...]}. */
typedef struct AckBody {
    char *buf;
    size_t len;   /* bytes used */
    size_t count; /* handles in it */
    size_t prefix; /* bytes of the part before the first handle */
} AckBody;

static bool ack_body_init(AckBody *a, const char *topic, size_t max_handles) {
    a->buf = malloc(64 + strlen(topic) + max_handles * (RECEIPT_LEN + 3));
    if (!a->buf) return false;
    a->prefix = (size_t)sprintf(a->buf, "{\"topic\":\"%s\",\"receiptHandles\":[", topic);
    a->len = a->prefix;
    a->count = 0;
    return true;
}

static void ack_body_reset(AckBody *a) {
    a->len = a->prefix;
    a->count = 0;
}

static void ack_body_add(AckBody *a, const char *handle) {
    if (a->count) a->buf[a->len++] = ',';
    a->buf[a->len++] = '"';
    memcpy(a->buf + a->len, handle, RECEIPT_LEN);
    a->len += RECEIPT_LEN;
    a->buf[a->len++] = '"';
    a->count++;
}

/* ack_body_end closes the JSON (the body is then a->buf, a->len bytes). */
static void ack_body_end(AckBody *a) {
    a->buf[a->len++] = ']';
    a->buf[a->len++] = '}';
}

/* Outcome of the acks of one thread. */
typedef struct AckCount {
    uint64_t ok;
    uint64_t expired;
    uint64_t invalid;
    uint64_t requests;
} AckCount;

/* send_ack posts the ack body 'a' to 'group' and counts its results.
 * False (said on stderr) when the answer is not a 200 with a result per
 * handle. */
static bool send_ack(Http *h, const char *group, AckBody *a, AckCount *ac) {
    char path[128];
    snprintf(path, sizeof(path), "/v1/groups/%s/ack", group);
    ack_body_end(a);
    const char *resp = NULL;
    size_t n = 0;
    int st = http_call(h, "POST", path, "application/json", a->buf, a->len, &resp, &n);
    ac->requests++;
    if (st != 200) {
        fprintf(stderr, "bench: ack of %zu answered %d: %.300s\n", a->count, st, resp);
        return false;
    }
    size_t ok = count_of(resp, "\"status\":\"OK\"");
    size_t expired = ok == a->count ? 0 : count_of(resp, "\"status\":\"EXPIRED\"");
    size_t invalid = ok == a->count ? 0 : count_of(resp, "\"status\":\"INVALID\"");
    ac->ok += ok;
    ac->expired += expired;
    ac->invalid += invalid;
    if (ok + expired + invalid != a->count) {
        fprintf(stderr, "bench: ack of %zu: %zu results: %.300s\n", a->count,
                ok + expired + invalid, resp);
        return false;
    }
    return true;
}

/* take_handles appends every "receiptHandle":"..." of the receive answer
 * 'resp' to 'a'; the number of messages, or -1 for a malformed handle. */
static long take_handles(const char *resp, AckBody *a) {
    static const char key[] = "\"receiptHandle\":\"";
    long n = 0;
    for (const char *p = strstr(resp, key); p; p = strstr(p, key)) {
        p += sizeof(key) - 1;
        if (strnlen(p, RECEIPT_LEN + 1) <= RECEIPT_LEN || p[RECEIPT_LEN] != '"' ||
            !is_hex(p, RECEIPT_LEN))
            return -1;
        ack_body_add(a, p);
        p += RECEIPT_LEN;
        n++;
    }
    return n;
}

/* ======================================================================
 * perf (BENCH_PERF)
 * ====================================================================== */

/* perf_start records 'pid' with call graphs into <BENCH_PERF>/perf-<label>.data;
 * 0 when not asked for or it could not start. */
static pid_t perf_start(pid_t pid, const char *label) {
    if (!cfg_g.perf_dir) return 0;
    char out[PATH_MAX], log[PATH_MAX], spid[16];
    snprintf(out, sizeof(out), "%s/perf-%s.data", cfg_g.perf_dir, label);
    snprintf(log, sizeof(log), "%s/perf-%s.log", cfg_g.perf_dir, label);
    snprintf(spid, sizeof(spid), "%d", (int)pid);
    char *argv[] = {"perf", "record", "--call-graph", "dwarf,16384", "-F", "499", "-p", spid,
                    "-o", out, NULL};
    pid_t p = bench_spawn(argv, log);
    if (p > 0) {
        bench_sleep_ms(300); /* perf attaches */
        printf("  %-10s perf record --call-graph dwarf -p %d -> %s\n", label, (int)pid, out);
    }
    return p > 0 ? p : 0;
}

static void perf_stop(pid_t p) {
    if (p > 0) bench_stop_pid(p, 10000);
}

/* ======================================================================
 * Header
 * ====================================================================== */

static void print_header(void) {
    bench_print_machine("bench_consume");
    struct stat st;
    struct tm tm;
    char built[64] = "?";
    if (stat(cfg_g.petrel, &st) == 0 && localtime_r(&st.st_mtime, &tm))
        strftime(built, sizeof(built), "%Y-%m-%d %H:%M:%S", &tm);
    printf("broker  %s (built %s)\n", cfg_g.petrel, built);
    printf("data    %s\n", cfg_g.root);
    if (getenv("BENCH_BROKER_FLAGS") && *getenv("BENCH_BROKER_FLAGS"))
        printf("flags   BENCH_BROKER_FLAGS=%s\n", getenv("BENCH_BROKER_FLAGS"));
    printf("settings BENCH_SECS=%d BENCH_CONSUMERS=%d BENCH_CONSUME_MSGS=%ld "
           "BENCH_STREAM_MAX=%d\n         BENCH_LAT_RATE=%g BENCH_LAT_PRODUCERS=%d "
           "BENCH_LAT_CONSUMERS=%d BENCH_LAT_WARMUP_MS=%ld\n",
           cfg_g.secs, cfg_g.consumers, cfg_g.msgs, cfg_g.stream_max, cfg_g.lat_rate,
           cfg_g.lat_producers, cfg_g.lat_consumers, cfg_g.lat_warmup_ms);
    bench_print_load();
    printf("notes   the broker and this program share the same CPUs; every message body is "
           "%d B; brokers at their defaults (ASYNC_FLUSH)\n        but "
           "--popInflightMessageThreshold=%d for the throughput cases\n\n", BENCH_BODY_LEN,
           INFLIGHT_MAX);
    fflush(stdout);
}

/* put_topic creates 'topic' with 'queues' queues (200 or 201). */
static bool put_topic(int port, const char *topic, int queues) {
    Http h;
    http_init(&h, port);
    char path[128], body[64];
    snprintf(path, sizeof(path), "/v1/topics/%s", topic);
    int len = snprintf(body, sizeof(body), "{\"queues\":%d}", queues);
    const char *resp = NULL;
    size_t n = 0;
    int st = http_call(&h, "PUT", path, "application/json", body, (size_t)len, &resp, &n);
    if (st != 200 && st != 201)
        fprintf(stderr, "bench: PUT %s: answered %d: %.200s\n", path, st, resp);
    http_free(&h);
    return st == 200 || st == 201;
}

/* receive_body writes the receive request of 'topic' into 'out'. */
static size_t receive_body(char *out, size_t cap, const char *topic, int max, int invisible_ms,
                           int wait_ms) {
    int n = snprintf(out, cap, "{\"topic\":\"%s\",\"maxMessages\":%d,\"invisibleMs\":%d,"
                     "\"waitMs\":%d}", topic, max, invisible_ms, wait_ms);
    return n > 0 ? (size_t)n : 0;
}

/* ======================================================================
 * The throughput runs: shared window
 * ====================================================================== */

typedef struct Window {
    int port;
    int64_t t0;          /* the threads start at this */
    int64_t end;         /* and send no request from this on */
    atomic_bool failed;  /* some thread saw an error: all stop */
    atomic_bool drained; /* a receive found nothing: the topic is used up */
} Window;

static void window_init(Window *w, int port) {
    memset(w, 0, sizeof(*w));
    w->port = port;
    atomic_init(&w->failed, false);
    atomic_init(&w->drained, false);
}

typedef struct Walker {
    Window *win;
    Http *h;             /* its connection (of the pool: see open_pool) */
    int idx;
    /* pull: queues idx, idx + n, ... of the topic */
    int nthreads;
    int nq;
    const uint64_t *qmin;
    const uint64_t *qmax;
    /* out */
    uint64_t msgs;       /* messages received */
    uint64_t requests;   /* pulls or receives */
    uint64_t non200;     /* error answers (the thread stops at the first) */
    uint64_t bad;        /* answers with a wrong count or malformed handles */
    uint64_t empty;      /* receives answered without messages */
    AckCount ack;
    int64_t t_stop;      /* after its last answer */
} Walker;

/* ======================================================================
 * Ceiling: pull 32 at a time, one thread per connection over its queues
 * ====================================================================== */

static void *pull_main(void *arg) {
    Walker *w = arg;
    Window *win = w->win;
    uint64_t off[TOPIC_QUEUES * 8];
    int mine[TOPIC_QUEUES * 8];
    int n = 0;
    for (int q = w->idx; q < w->nq && n < (int)(sizeof(mine) / sizeof(mine[0])); q += w->nthreads) {
        mine[n] = q;
        /* Different offsets: each thread starts at another point of its queues. */
        uint64_t span = w->qmax[q] - w->qmin[q] - BATCH_MAX;
        off[n] = w->qmin[q] + (span * (uint64_t)w->idx / (uint64_t)w->nthreads) / BATCH_MAX *
                                  BATCH_MAX;
        n++;
    }
    bench_sleep_until(win->t0);
    for (int k = 0; n > 0 && !bench_interrupted && !atomic_load(&win->failed); k++) {
        if (mq_mono_ns() >= win->end) break;
        int i = k % n;
        int q = mine[i];
        char path[160];
        snprintf(path, sizeof(path), "/v1/topics/%s/queues/%d/messages?offset=%" PRIu64
                 "&max=%d", TOPIC, q, off[i], BATCH_MAX);
        const char *resp = NULL;
        size_t len = 0;
        int st = http_call(w->h, "GET", path, NULL, NULL, 0, &resp, &len);
        w->requests++;
        if (st != 200 || strncmp(resp, "{\"status\":\"FOUND\"", 17) != 0) {
            fprintf(stderr, "bench: pull: %s answered %d: %.200s\n", path, st, resp);
            w->non200++;
            atomic_store(&win->failed, true);
            break;
        }
        size_t got = count_of(resp, "\"msgId\":\"");
        if (got != BATCH_MAX) w->bad++;
        w->msgs += got;
        off[i] += BATCH_MAX;
        if (off[i] + BATCH_MAX > w->qmax[q]) off[i] = w->qmin[q];
    }
    w->t_stop = mq_mono_ns();
    return NULL;
}

/* ======================================================================
 * Receive + ack, BENCH_CONSUMERS threads
 * ====================================================================== */

static void *receive_main(void *arg) {
    Walker *w = arg;
    Window *win = w->win;
    char body[256];
    size_t blen = receive_body(body, sizeof(body), TOPIC, BATCH_MAX, INVISIBLE_MS, 0);
    AckBody ab;
    bool ok = ack_body_init(&ab, TOPIC, BATCH_MAX);
    bench_sleep_until(win->t0);
    while (ok && !bench_interrupted && !atomic_load(&win->failed) && !atomic_load(&win->drained)) {
        if (mq_mono_ns() >= win->end) break;
        const char *resp = NULL;
        size_t len = 0;
        int st = http_call(w->h, "POST", "/v1/groups/" RECEIVE_GROUP "/receive",
                           "application/json", body, blen, &resp, &len);
        w->requests++;
        if (st != 200 || strncmp(resp, "{\"messages\":[", 13) != 0) {
            fprintf(stderr, "bench: receive answered %d: %.200s\n", st, resp);
            w->non200++;
            atomic_store(&win->failed, true);
            break;
        }
        ack_body_reset(&ab);
        long n = take_handles(resp, &ab);
        if (n < 0 || n > BATCH_MAX) {
            fprintf(stderr, "bench: receive: malformed receipt handles: %.200s\n", resp);
            w->bad++;
            atomic_store(&win->failed, true);
            break;
        }
        if (n == 0) {
            w->empty++;
            atomic_store(&win->drained, true);
            break;
        }
        w->msgs += (uint64_t)n;
        if (!send_ack(w->h, RECEIVE_GROUP, &ab, &w->ack)) {
            w->non200++;
            atomic_store(&win->failed, true);
            break;
        }
    }
    w->t_stop = mq_mono_ns();
    free(ab.buf);
    return NULL;
}

/* run_walkers runs 'n' threads of 'fn' over one window of BENCH_SECS and
 * sums them into 'sum'; the wall time from the window's start to the last
 * thread's stop, seconds, and the broker's CPU seconds in '*broker_cpu'. */
static double run_walkers(const Srv *a, const char *label, void *(*fn)(void *), Walker *ws,
                          int n, Http *pool, Window *win, Walker *sum, double *broker_cpu) {
    pthread_t tid[MAX_THREADS];
    int started = 0;
    pid_t perf = perf_start(a->pid, label);
    win->t0 = mq_mono_ns() + 50 * 1000000; /* the threads start meanwhile */
    win->end = win->t0 + (int64_t)cfg_g.secs * 1000000000;
    for (int i = 0; i < n; i++) {
        ws[i].win = win;
        ws[i].h = &pool[i];
        ws[i].idx = i;
        ws[i].nthreads = n;
        if (pthread_create(&tid[i], NULL, fn, &ws[i]) != 0) {
            atomic_store(&win->failed, true);
            break;
        }
        started++;
    }
    bench_sleep_until(win->t0);
    CpuWindow cw;
    cpu_begin(&cw, a->pid);
    for (int i = 0; i < started; i++) pthread_join(tid[i], NULL);
    *broker_cpu = cpu_end(&cw);
    perf_stop(perf);
    memset(sum, 0, sizeof(*sum));
    int64_t last = win->t0;
    for (int i = 0; i < started; i++) {
        sum->msgs += ws[i].msgs;
        sum->requests += ws[i].requests;
        sum->non200 += ws[i].non200;
        sum->bad += ws[i].bad;
        sum->empty += ws[i].empty;
        sum->ack.ok += ws[i].ack.ok;
        sum->ack.expired += ws[i].ack.expired;
        sum->ack.invalid += ws[i].ack.invalid;
        sum->ack.requests += ws[i].ack.requests;
        if (ws[i].t_stop > last) last = ws[i].t_stop;
    }
    if (started < n) {
        fprintf(stderr, "bench: %s: cannot start %d threads\n", label, n);
        sum->non200++;
    }
    cpu_print(label, &cw);
    return (double)(last - win->t0) / 1e9;
}

typedef struct Topic {
    int nq;
    uint64_t qmin[TOPIC_QUEUES * 8];
    uint64_t qmax[TOPIC_QUEUES * 8];
    uint64_t total; /* messages in all queues */
} Topic;

static Figure case_pull(const Srv *a, const Topic *t, Http *pool) {
    Http h;
    http_init(&h, a->port);
    char path[160];
    snprintf(path, sizeof(path), "/v1/topics/%s/queues/0/messages?offset=%" PRIu64 "&max=%d",
             TOPIC, t->qmin[0], BATCH_MAX);
    bool ok = http_expect(&h, "pull", "GET", path, NULL, NULL, 0, 200, "\"FOUND\"", NULL);
    const char *resp = NULL;
    size_t len = 0;
    if (ok && http_call(&h, "GET", path, NULL, NULL, 0, &resp, &len) == 200 &&
        count_of(resp, "\"msgId\":\"") != BATCH_MAX) {
        fprintf(stderr, "bench: pull: wanted %d messages: %.200s\n", BATCH_MAX, resp);
        ok = false;
    }
    http_free(&h);
    if (!ok) {
        case_errors++;
        return NO_FIGURE;
    }
    Walker ws[MAX_THREADS];
    memset(ws, 0, sizeof(ws));
    int n = cfg_g.consumers < t->nq ? cfg_g.consumers : t->nq;
    for (int i = 0; i < n; i++) {
        ws[i].nq = t->nq;
        ws[i].qmin = t->qmin;
        ws[i].qmax = t->qmax;
    }
    Window win;
    window_init(&win, a->port);
    Walker s;
    double cpu = 0;
    double wall = run_walkers(a, "pull", pull_main, ws, n, pool, &win, &s, &cpu);
    double rate = (double)s.msgs / wall;
    printf("  pull       %.0f msgs/s (%" PRIu64 " in %.2f s, %" PRIu64 " requests of %d, "
           "%d connections over %d queues); broker CPU %.2f us/msg; errors %" PRIu64
           ", short answers %" PRIu64 "\n", rate, s.msgs, wall, s.requests, BATCH_MAX, n, t->nq,
           cpu / (double)s.msgs * 1e6, s.non200, s.bad);
    if (s.non200 || s.bad || s.msgs == 0 || bench_interrupted) {
        fprintf(stderr, "bench: pull: BROKEN\n");
        case_errors++;
        return NO_FIGURE;
    }
    return (Figure){rate, cpu / (double)s.msgs * 1e6};
}

static Figure case_receive(const Srv *a, const Topic *t, Http *pool) {
    /* Check: the first receive of the group hands out 32, acked OK. */
    Http h;
    http_init(&h, a->port);
    char body[256];
    size_t blen = receive_body(body, sizeof(body), TOPIC, BATCH_MAX, INVISIBLE_MS, 0);
    const char *resp = NULL;
    size_t len = 0;
    AckBody ab;
    AckCount ac = {0};
    bool ok = ack_body_init(&ab, TOPIC, BATCH_MAX);
    int st = ok ? http_call(&h, "POST", "/v1/groups/" RECEIVE_GROUP "/receive",
                            "application/json", body, blen, &resp, &len) : -1;
    long n = st == 200 ? take_handles(resp, &ab) : -1;
    if (n != BATCH_MAX) {
        fprintf(stderr, "bench: receive: the first receive answered %d with %ld handles "
                "(wanted %d): %.300s\n", st, n, BATCH_MAX, resp ? resp : "");
        ok = false;
    }
    if (ok && (!send_ack(&h, RECEIVE_GROUP, &ab, &ac) || ac.ok != BATCH_MAX)) {
        fprintf(stderr, "bench: receive: the first ack: %" PRIu64 " of %d OK\n", ac.ok,
                BATCH_MAX);
        ok = false;
    }
    free(ab.buf);
    http_free(&h);
    if (!ok) {
        case_errors++;
        return NO_FIGURE;
    }
    Walker ws[MAX_THREADS];
    memset(ws, 0, sizeof(ws));
    Window win;
    window_init(&win, a->port);
    Walker s;
    double cpu = 0;
    double wall = run_walkers(a, "receive", receive_main, ws, cfg_g.consumers, pool, &win, &s,
                              &cpu);
    double rate = (double)s.ack.ok / wall;
    uint64_t receives = s.requests;
    printf("  receive    %.0f msgs/s acked (%" PRIu64 " received, %" PRIu64 " acked OK in %.2f s; "
           "%" PRIu64 " receives = %.1f msgs each, %" PRIu64 " acks); broker CPU %.2f us/msg\n"
           "  %-10s %.0f receive+ack pairs/s; acks EXPIRED %" PRIu64 ", INVALID %" PRIu64
           ", error answers %" PRIu64 ", malformed %" PRIu64 "%s\n",
           rate, s.msgs, s.ack.ok, wall, receives,
           receives ? (double)s.msgs / (double)receives : 0.0, s.ack.requests,
           s.ack.ok ? cpu / (double)s.ack.ok * 1e6 : NAN, "", (double)s.ack.requests / wall,
           s.ack.expired, s.ack.invalid, s.non200, s.bad,
           atomic_load(&win.drained) ? "; the topic ran dry (raise BENCH_CONSUME_MSGS)" : "");
    if (s.msgs + BATCH_MAX < t->total && atomic_load(&win.drained))
        fprintf(stderr, "bench: receive: found nothing after %" PRIu64 " of %" PRIu64
                " messages\n", s.msgs + BATCH_MAX, t->total);
    if (s.non200 || s.bad || s.ack.expired || s.ack.invalid || s.ack.ok != s.msgs ||
        s.ack.ok == 0 || bench_interrupted) {
        fprintf(stderr, "bench: receive: BROKEN\n");
        case_errors++;
        return NO_FIGURE;
    }
    return (Figure){rate, cpu / (double)s.ack.ok * 1e6};
}

/* ======================================================================
 * SSE stream to one client, acked by another thread
 * ====================================================================== */

/* Receipt handles read from the stream, waiting for the acker. */
typedef struct AckQueue {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    char *h;              /* RECEIPT_LEN bytes each */
    size_t head;          /* first not taken */
    size_t count;         /* handles stored */
    size_t cap;           /* handles allocated */
    bool done;            /* the reader has stopped: ack the rest and end */
    size_t max_backlog;   /* most handles waiting at once */
    atomic_bool failed;   /* acker: an error answer */
    AckCount ack;         /* acker's results */
    int port;
} AckQueue;

static bool aq_push(AckQueue *q, const char *handles, size_t n) {
    pthread_mutex_lock(&q->mu);
    bool ok = true;
    if (q->count + n > q->cap) {
        size_t cap = q->cap ? q->cap : 65536;
        while (cap < q->count + n) cap *= 2;
        char *nh = realloc(q->h, cap * RECEIPT_LEN);
        if (nh) {
            q->h = nh;
            q->cap = cap;
        } else {
            ok = false;
        }
    }
    if (ok) {
        memcpy(q->h + q->count * RECEIPT_LEN, handles, n * RECEIPT_LEN);
        q->count += n;
        if (q->count - q->head > q->max_backlog) q->max_backlog = q->count - q->head;
        pthread_cond_signal(&q->cv);
    }
    pthread_mutex_unlock(&q->mu);
    return ok;
}

static void *acker_main(void *arg) {
    AckQueue *q = arg;
    Http h;
    http_init(&h, q->port);
    http_connect(&h); /* before the stream's connection (http_call retries) */
    AckBody ab;
    if (!ack_body_init(&ab, TOPIC, ACK_MAX)) {
        atomic_store(&q->failed, true);
        return NULL;
    }
    for (;;) {
        pthread_mutex_lock(&q->mu);
        while (q->head == q->count && !q->done) pthread_cond_wait(&q->cv, &q->mu);
        if (q->head == q->count) {
            pthread_mutex_unlock(&q->mu);
            break;
        }
        size_t k = q->count - q->head;
        if (k > ACK_MAX) k = ACK_MAX;
        ack_body_reset(&ab);
        for (size_t i = 0; i < k; i++) ack_body_add(&ab, q->h + (q->head + i) * RECEIPT_LEN);
        q->head += k;
        if (q->head == q->count) q->head = q->count = 0;
        pthread_mutex_unlock(&q->mu);
        if (!atomic_load(&q->failed) && !send_ack(&h, STREAM_GROUP, &ab, &q->ack))
            atomic_store(&q->failed, true);
    }
    free(ab.buf);
    http_free(&h);
    return NULL;
}

/* The stream reader: HTTP head, chunked transfer decoding, SSE events. */
typedef struct Sse {
    int fd;
    char *raw;            /* bytes from the socket */
    size_t raw_cap;
    bool chunked;         /* Transfer-Encoding: chunked */
    int chunk_state;      /* 0 size line, 1 data, 2 CRLF after data */
    uint64_t chunk_left;  /* data bytes left in this chunk */
    char size_line[32];
    size_t size_len;
    char *text;           /* decoded body not yet parsed into lines */
    size_t text_len;
    size_t text_cap;
    /* the event being read */
    char handle[RECEIPT_LEN];
    bool has_id;
    bool is_message;
    /* out */
    uint64_t messages;    /* "event: message" events with an id */
    bool error_event;     /* "event: error" or "event: end" */
    char *batch;          /* handles of this read, RECEIPT_LEN each */
    size_t batch_n;
    size_t batch_cap;
} Sse;

/* sse_line handles one line of the event stream (without its '\n'). */
static bool sse_line(Sse *s, const char *p, size_t n) {
    if (n == 0) { /* end of an event */
        if (s->is_message && s->has_id) {
            if (s->batch_n == s->batch_cap) {
                size_t cap = s->batch_cap ? s->batch_cap * 2 : 1024;
                char *nb = realloc(s->batch, cap * RECEIPT_LEN);
                if (!nb) return false;
                s->batch = nb;
                s->batch_cap = cap;
            }
            memcpy(s->batch + s->batch_n * RECEIPT_LEN, s->handle, RECEIPT_LEN);
            s->batch_n++;
            s->messages++;
        }
        s->has_id = s->is_message = false;
        return true;
    }
    if (n > 4 && memcmp(p, "id: ", 4) == 0) {
        if (n != 4 + RECEIPT_LEN || !is_hex(p + 4, RECEIPT_LEN)) {
            fprintf(stderr, "bench: stream: malformed id line: %.*s\n", (int)n, p);
            return false;
        }
        memcpy(s->handle, p + 4, RECEIPT_LEN);
        s->has_id = true;
    } else if (n == 14 && memcmp(p, "event: message", 14) == 0) {
        s->is_message = true;
    } else if (n > 6 && memcmp(p, "event: ", 7) == 0) {
        fprintf(stderr, "bench: stream: %.*s\n", (int)n, p);
        s->error_event = true;
        return false;
    }
    return true; /* data lines, comments (": keep-alive") */
}

/* sse_text adds decoded body bytes and handles the complete lines. */
static bool sse_text(Sse *s, const char *p, size_t n) {
    if (s->text_len + n > s->text_cap) {
        size_t cap = s->text_cap ? s->text_cap : 1 << 18;
        while (cap < s->text_len + n) cap *= 2;
        char *nt = realloc(s->text, cap);
        if (!nt) return false;
        s->text = nt;
        s->text_cap = cap;
    }
    memcpy(s->text + s->text_len, p, n);
    s->text_len += n;
    size_t pos = 0;
    for (;;) {
        char *nl = memchr(s->text + pos, '\n', s->text_len - pos);
        if (!nl) break;
        size_t len = (size_t)(nl - (s->text + pos));
        if (!sse_line(s, s->text + pos, len)) return false;
        pos += len + 1;
    }
    memmove(s->text, s->text + pos, s->text_len - pos);
    s->text_len -= pos;
    return true;
}

/* sse_body decodes 'n' body bytes from the socket (chunked or not). */
static bool sse_body(Sse *s, const char *p, size_t n) {
    if (!s->chunked) return sse_text(s, p, n);
    while (n > 0) {
        if (s->chunk_state == 0) { /* "<hex>[;ext]\r\n" */
            char c = *p++;
            n--;
            if (c == '\n') {
                s->size_line[s->size_len] = '\0';
                s->chunk_left = strtoull(s->size_line, NULL, 16);
                s->size_len = 0;
                if (s->chunk_left == 0) return false; /* the last chunk: the stream ended */
                s->chunk_state = 1;
            } else if (s->size_len + 1 < sizeof(s->size_line)) {
                s->size_line[s->size_len++] = c;
            }
        } else if (s->chunk_state == 1) {
            size_t k = n < s->chunk_left ? n : (size_t)s->chunk_left;
            if (!sse_text(s, p, k)) return false;
            p += k;
            n -= k;
            s->chunk_left -= k;
            if (s->chunk_left == 0) {
                s->chunk_state = 2;
                s->chunk_left = 2;
            }
        } else { /* "\r\n" */
            p++;
            n--;
            if (--s->chunk_left == 0) s->chunk_state = 0;
        }
    }
    return true;
}

typedef struct StreamResult {
    uint64_t messages;    /* delivered in the window */
    double wall;          /* seconds from the request to the reader's stop */
    double first_ms;      /* the first message's arrival after the request */
    double max_gap_ms;    /* longest time without a message after the first, to the end */
    bool ok;
} StreamResult;

/* stream_read opens the stream and reads it until 'end' or 'want'
 * messages, handing the handles to 'q'. */
static StreamResult stream_read(int port, AckQueue *q, uint64_t want, int64_t t0, int64_t end) {
    StreamResult r = {0, 0, NAN, 0, false};
    Sse s;
    memset(&s, 0, sizeof(s));
    s.raw_cap = 1 << 18;
    s.raw = malloc(s.raw_cap);
    Http h;
    http_init(&h, port);
    if (!s.raw || http_connect(&h) != 0) {
        fprintf(stderr, "bench: stream: cannot connect\n");
        goto out;
    }
    s.fd = h.fd;
    char req[512];
    int rn = snprintf(req, sizeof(req),
                      "GET /v1/groups/%s/stream?topic=%s&maxMessages=%d&invisibleMs=%d HTTP/1.1\r\n"
                      "Host: 127.0.0.1:%d\r\nAccept: text/event-stream\r\n\r\n",
                      STREAM_GROUP, TOPIC, cfg_g.stream_max, STREAM_INVISIBLE_MS, port);
    if (!http_send_all(s.fd, req, (size_t)rn)) goto out;
    /* The head. */
    size_t have = 0;
    char *body = NULL;
    while (!body) {
        ssize_t n = recv(s.fd, s.raw + have, s.raw_cap - have - 1, 0);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            fprintf(stderr, "bench: stream: no answer\n");
            goto out;
        }
        have += (size_t)n;
        s.raw[have] = '\0';
        char *e = strstr(s.raw, "\r\n\r\n");
        if (e) body = e + 4;
        else if (have > 65536) goto out;
    }
    int status = 0;
    if (sscanf(s.raw, "HTTP/1.%*d %d", &status) != 1 || status != 200 ||
        !strcasestr(s.raw, "text/event-stream")) {
        fprintf(stderr, "bench: stream: answered %d: %.300s\n", status, s.raw);
        goto out;
    }
    s.chunked = strcasestr(s.raw, "transfer-encoding: chunked") != NULL;
    bool going = sse_body(&s, body, have - (size_t)(body - s.raw));
    int64_t last_msg_ns = 0; /* when the message count last grew */
    while (going && s.messages < want && !bench_interrupted &&
           !atomic_load(&q->failed)) {
        if (s.batch_n) {
            if (!aq_push(q, s.batch, s.batch_n)) break;
            s.batch_n = 0;
        }
        int64_t now = mq_mono_ns();
        if (now >= end) break;
        if (s.messages && isnan(r.first_ms)) r.first_ms = (double)(now - t0) / 1e6;
        struct pollfd pfd = {s.fd, POLLIN, 0};
        int left_ms = (int)((end - now) / 1000000) + 1;
        int pr = poll(&pfd, 1, left_ms);
        if (pr < 0 && errno == EINTR) continue;
        if (pr <= 0) continue;
        ssize_t n = recv(s.fd, s.raw, s.raw_cap, 0);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            fprintf(stderr, "bench: stream: the broker closed it after %" PRIu64 " messages\n",
                    s.messages);
            going = false;
            break;
        }
        uint64_t before = s.messages;
        going = sse_body(&s, s.raw, (size_t)n);
        if (s.messages > before) {
            int64_t t = mq_mono_ns();
            if (last_msg_ns && (double)(t - last_msg_ns) / 1e6 > r.max_gap_ms)
                r.max_gap_ms = (double)(t - last_msg_ns) / 1e6;
            last_msg_ns = t;
        }
    }
    if (s.batch_n) aq_push(q, s.batch, s.batch_n);
    int64_t stop = mq_mono_ns();
    if (last_msg_ns && s.messages < want && (double)(stop - last_msg_ns) / 1e6 > r.max_gap_ms)
        r.max_gap_ms = (double)(stop - last_msg_ns) / 1e6;
    r.wall = (double)(stop - t0) / 1e9;
    r.messages = s.messages;
    r.ok = going && !s.error_event && !bench_interrupted;
    if (!going && !s.error_event)
        fprintf(stderr, "bench: stream: ended or failed after %" PRIu64 " messages\n",
                s.messages);
out:
    http_free(&h);
    free(s.raw);
    free(s.text);
    free(s.batch);
    return r;
}

static Figure case_stream(const Srv *a, const Topic *t) {
    AckQueue q;
    memset(&q, 0, sizeof(q));
    atomic_init(&q.failed, false);
    pthread_mutex_init(&q.mu, NULL);
    pthread_cond_init(&q.cv, NULL);
    q.port = a->port;
    pthread_t acker;
    bool started = pthread_create(&acker, NULL, acker_main, &q) == 0;
    StreamResult r = {0, 0, NAN, 0, false};
    CpuWindow cw;
    double cpu = NAN;
    int64_t t_window_end = 0; /* the reader stopped */
    int64_t t_acked = 0;      /* the acker has acked everything */
    if (started) {
        bench_sleep_ms(20); /* the acker connects: one accept at a time */
        pid_t perf = perf_start(a->pid, "stream");
        int64_t t0 = mq_mono_ns();
        cpu_begin(&cw, a->pid);
        r = stream_read(a->port, &q, t->total, t0, t0 + (int64_t)cfg_g.secs * 1000000000);
        t_window_end = mq_mono_ns();
        pthread_mutex_lock(&q.mu);
        q.done = true;
        pthread_cond_signal(&q.cv);
        pthread_mutex_unlock(&q.mu);
        pthread_join(acker, NULL);
        t_acked = mq_mono_ns();
        /* Until the last ack: the CPU per message covers the whole work. */
        cpu = cpu_end(&cw);
        perf_stop(perf);
        cpu_print("stream", &cw);
    } else {
        fprintf(stderr, "bench: stream: cannot start the acker\n");
    }
    double rate = r.wall > 0 ? (double)r.messages / r.wall : NAN;
    printf("  stream     %.0f msgs/s (%" PRIu64 " events in %.2f s, maxMessages=%d; first "
           "after %.1f ms, longest pause %.1f ms); broker CPU %.2f us/msg until the last ack%s\n"
           "  %-10s acks: %" PRIu64 " requests, %" PRIu64 " OK, EXPIRED %" PRIu64
           ", INVALID %" PRIu64 ", the last %.2f s after the window: %.0f acks/s; most "
           "handles waiting for the acker %zu (in-flight limit asked: %d per queue)\n",
           rate, r.messages, r.wall, cfg_g.stream_max, r.first_ms, r.max_gap_ms,
           cpu / (double)r.messages * 1e6,
           r.messages >= t->total ? "; the topic ran dry (raise BENCH_CONSUME_MSGS)" : "", "",
           q.ack.requests, q.ack.ok, q.ack.expired, q.ack.invalid,
           (double)(t_acked - t_window_end) / 1e9,
           (double)q.ack.ok / (r.wall + (double)(t_acked - t_window_end) / 1e9), q.max_backlog,
           INFLIGHT_MAX);
    if (r.max_gap_ms > 1000)
        printf("  %-10s the stream STALLED: %.0f ms without a message while the topic had more\n",
               "", r.max_gap_ms);
    bool ok = started && r.ok && !atomic_load(&q.failed) && r.messages > 0 &&
              q.ack.ok == r.messages && !q.ack.expired && !q.ack.invalid;
    pthread_mutex_destroy(&q.mu);
    pthread_cond_destroy(&q.cv);
    free(q.h);
    if (!ok) {
        fprintf(stderr, "bench: stream: BROKEN\n");
        case_errors++;
        return NO_FIGURE;
    }
    return (Figure){rate, cpu / (double)r.messages * 1e6};
}

/* ======================================================================
 * Produce -> long-poll receive latency at a paced rate, next to the pull
 * long-poll latency with the same pacer (one broker, one run each)
 * ====================================================================== */

typedef struct LatReceiver {
    LatConsumer c;                 /* histograms and counters */
    atomic_uint_fast64_t *got;     /* messages received once, all receivers */
    AckCount ack;
    uint64_t non200;
} LatReceiver;

static void *lat_receive_main(void *arg) {
    LatReceiver *lr = arg;
    LatConsumer *c = &lr->c;
    LatRun *run = c->run;
    Http h;
    http_init(&h, run->port);
    char body[256];
    size_t blen = receive_body(body, sizeof(body), LAT_RECV_TOPIC, BATCH_MAX, INVISIBLE_MS,
                               LAT_WAIT_MS);
    AckBody ab;
    bool ok = ack_body_init(&ab, LAT_RECV_TOPIC, BATCH_MAX);
    int64_t give_up = run->end + 5 * (int64_t)1000000000;
    while (ok && !bench_interrupted && mq_mono_ns() < give_up && !atomic_load(&run->failed)) {
        if (atomic_load(&run->producers_left) == 0 &&
            atomic_load(lr->got) >= atomic_load(&run->sent))
            break;
        const char *resp = NULL;
        size_t len = 0;
        int st = http_call(&h, "POST", "/v1/groups/" LAT_GROUP "/receive", "application/json",
                           body, blen, &resp, &len);
        int64_t t = mq_mono_ns(); /* the consumer has the messages */
        if (st != 200 || strncmp(resp, "{\"messages\":[", 13) != 0) {
            fprintf(stderr, "bench: latency: receive answered %d: %.200s\n", st, resp);
            lr->non200++;
            atomic_store(&run->failed, true);
            break;
        }
        c->polls++;
        uint64_t before = c->received - c->dups - c->unknown;
        if (lat_take(c, resp, t) == 0) c->empty++;
        atomic_fetch_add(lr->got, c->received - c->dups - c->unknown - before);
        ack_body_reset(&ab);
        long n = take_handles(resp, &ab);
        if (n < 0) {
            fprintf(stderr, "bench: latency: malformed receipt handles: %.200s\n", resp);
            lr->non200++;
            atomic_store(&run->failed, true);
            break;
        }
        if (n > 0 && !send_ack(&h, LAT_GROUP, &ab, &lr->ack)) {
            lr->non200++;
            atomic_store(&run->failed, true);
            break;
        }
    }
    free(ab.buf);
    http_free(&h);
    return NULL;
}

typedef struct LatFigure {
    double rate; /* msgs/s sent; NAN = failed or broken */
    double cpu_us;
    double p50_ms;
    double p99_ms;
} LatFigure;

/* lat_case runs the pacer against 'topic' with 'nc' consumer threads of
 * 'fn', each given a LatReceiver ('receivers': receive + ack) or its
 * LatConsumer (pull), prints what they saw and returns the figures. */
static LatFigure lat_case(const Srv *a, const char *label, const char *topic,
                          void *(*fn)(void *), int nc, bool receivers, double pace,
                          int delay_level, int64_t delay_ms, int64_t timer_min_ms,
                          int64_t timer_max_ms) {
    LatFigure f = {NAN, NAN, NAN, NAN};
    LatRun run;
    bool ok = lat_run_init(&run, a->port, topic, pace, cfg_g.lat_producers, cfg_g.secs,
                           (int64_t)cfg_g.lat_warmup_ms * 1000000);
    run.delay_level = delay_level;
    run.delay_ns = delay_ms * 1000000;
    run.timer_min_ms = timer_min_ms;
    run.timer_max_ms = timer_max_ms;
    atomic_uint_fast64_t got;
    atomic_init(&got, 0);
    LatProducer *prod = calloc((size_t)run.producers, sizeof(*prod));
    LatReceiver *cons = calloc((size_t)nc, sizeof(*cons));
    pthread_t *tid = calloc((size_t)(run.producers + nc), sizeof(*tid));
    ok = ok && prod && cons && tid;
    int started = 0;
    CpuWindow cw;
    cpu_begin(&cw, a->pid);
    if (ok) {
        run.t0 = mq_mono_ns() + 100 * 1000000; /* the threads start meanwhile */
        run.end = run.t0 + (int64_t)cfg_g.secs * 1000000000;
        for (int i = 0; ok && i < nc; i++) {
            cons[i].c.run = &run;
            cons[i].got = &got;
            void *arg = receivers ? (void *)&cons[i] : (void *)&cons[i].c;
            if (pthread_create(&tid[started], NULL, fn, arg) != 0) {
                atomic_store(&run.failed, true);
                atomic_store(&run.producers_left, 0);
                ok = false;
                break;
            }
            started++;
        }
        for (int i = 0; ok && i < run.producers; i++) {
            prod[i].run = &run;
            prod[i].idx = i;
            if (pthread_create(&tid[started], NULL, lat_producer_main, &prod[i]) != 0) {
                atomic_store(&run.failed, true);
                atomic_fetch_sub(&run.producers_left, run.producers - i);
                ok = false;
                break;
            }
            started++;
        }
    }
    for (int i = 0; i < started; i++) pthread_join(tid[i], NULL);
    double cpu = cpu_end(&cw);
    cpu_print(label, &cw);
    if (ok && !atomic_load(&run.failed)) {
        Hist rtt, lat, all;
        memset(&rtt, 0, sizeof(rtt));
        memset(&lat, 0, sizeof(lat));
        memset(&all, 0, sizeof(all));
        uint64_t late = 0, polls = 0, empty = 0, dups = 0, unknown = 0;
        AckCount ac = {0};
        for (int i = 0; i < run.producers; i++) {
            hist_merge(&rtt, &prod[i].rtt);
            late += prod[i].late;
        }
        for (int i = 0; i < nc; i++) {
            hist_merge(&lat, &cons[i].c.lat);
            hist_merge(&all, &cons[i].c.all);
            polls += cons[i].c.polls;
            empty += cons[i].c.empty;
            dups += cons[i].c.dups;
            unknown += cons[i].c.unknown;
            ac.ok += cons[i].ack.ok;
            ac.expired += cons[i].ack.expired;
            ac.invalid += cons[i].ack.invalid;
            ac.requests += cons[i].ack.requests;
        }
        uint64_t sent = atomic_load(&run.sent);
        int64_t last = atomic_load(&run.last_ns);
        int64_t span = last > run.end ? last - run.t0 : run.end - run.t0;
        double rate = (double)sent / ((double)span / 1e9);
        printf("  %-10s %" PRIu64 " sent (%.0f msgs/s, %" PRIu64 " sends > 1 ms late), "
               "produce round trip p50 %.0f us, p99 %.0f us\n"
               "  %-10s %" PRIu64 " received in %" PRIu64 " polls by %d consumers (%" PRIu64
               " empty), %" PRIu64 " duplicates, %" PRIu64 " unknown",
               label, sent, rate, late, hist_pct(&rtt, 0.5) / 1e3, hist_pct(&rtt, 0.99) / 1e3,
               "", all.count, polls, nc, empty, dups, unknown);
        if (receivers)
            printf("; acks %" PRIu64 " OK, EXPIRED %" PRIu64 ", INVALID %" PRIu64 " in %" PRIu64
                   " requests", ac.ok, ac.expired, ac.invalid, ac.requests);
        printf("\n  %-10s after the first %ld ms: latency p50 %.0f us, p90 %.0f us, p99 %.0f us, "
               "p99.9 %.0f us, max %.0f us\n"
               "  %-10s whole run: p99 %.0f us, max %.0f us; broker CPU %.1f us/msg\n",
               "", cfg_g.lat_warmup_ms, hist_pct(&lat, 0.5) / 1e3, hist_pct(&lat, 0.9) / 1e3,
               hist_pct(&lat, 0.99) / 1e3, hist_pct(&lat, 0.999) / 1e3, hist_pct(&lat, 1.0) / 1e3,
               "", hist_pct(&all, 0.99) / 1e3, hist_pct(&all, 1.0) / 1e3,
               cpu / (double)sent * 1e6);
        uint64_t early = atomic_load(&run.early);
        if (delay_level > 0)
            printf("  %-10s delayLevel %d (%" PRId64 " ms): latencies above count from send + "
                   "delay; %" PRIu64 " delivered early\n", "", delay_level, delay_ms, early);
        if (timer_max_ms > 0)
            printf("  %-10s delayMs %" PRId64 "..%" PRId64 ": latencies above count from send + "
                   "delayMs; %" PRIu64 " delivered early\n", "", timer_min_ms, timer_max_ms,
                   early);
        bool broken = all.count != sent || dups || unknown || early ||
                      (receivers && (ac.ok != sent || ac.expired || ac.invalid));
        if (broken) {
            fprintf(stderr, "bench: %s: BROKEN: %" PRIu64 " sent, %" PRIu64 " received once, "
                    "%" PRIu64 " acked OK\n", label, sent, all.count, ac.ok);
        } else {
            f = (LatFigure){rate, cpu / (double)sent * 1e6, hist_pct(&lat, 0.5) / 1e6,
                            hist_pct(&lat, 0.99) / 1e6};
        }
    }
    if (isnan(f.rate)) case_errors++;
    lat_run_free(&run);
    free(prod);
    free(cons);
    free(tid);
    return f;
}

static void lat_cases(void) {
    Srv a;
    LatFigure pull = {NAN, NAN, NAN, NAN}, recv = {NAN, NAN, NAN, NAN};
    bool up = srv_start(&a, cfg_g.petrel, cfg_g.root, "latency", NULL) == 0;
    if (up) {
        bench_sleep_ms(500); /* let start-up finish */
        printf("  broker latency on port %d (pid %d)\n", a.port, (int)a.pid);
        char body[256];
        size_t blen = receive_body(body, sizeof(body), LAT_RECV_TOPIC, 1, INVISIBLE_MS, 0);
        Http h;
        http_init(&h, a.port);
        /* The topics, and the group made by a first receive (its job thread). */
        bool ok = put_topic(a.port, LAT_PULL_TOPIC, 1) &&
                  put_topic(a.port, LAT_RECV_TOPIC, TOPIC_QUEUES) &&
                  http_expect(&h, "latency", "POST", "/v1/groups/" LAT_GROUP "/receive",
                              "application/json", body, blen, 200, "{\"messages\":[", NULL);
        http_free(&h);
        if (ok) {
            pull = lat_case(&a, "latpull", LAT_PULL_TOPIC, lat_pull_main, 1, false,
                            cfg_g.lat_rate, 0, 0, 0, 0);
            if (!bench_interrupted)
                recv = lat_case(&a, "latrecv", LAT_RECV_TOPIC, lat_receive_main,
                                cfg_g.lat_consumers, true, cfg_g.lat_rate, 0, 0, 0, 0);
        } else {
            case_errors++;
        }
    } else {
        case_errors++;
    }
    srv_stop(&a, cfg_g.keep);
    Row *r = row_add("msgs/s", recv.rate, "paced produce for the receive latency case");
    row_ceiling(r, cfg_g.lat_rate, "/s", "scheduled");
    row_add("us", recv.cpu_us, "  broker CPU per message (produce + receive + ack)");
    row_add("ms", recv.p50_ms, "  produce -> long-poll receive latency p50");
    r = row_add("ms", recv.p99_ms, "  produce -> long-poll receive latency p99, %d consumers",
                cfg_g.lat_consumers);
    if (!isnan(pull.p99_ms)) row_ceiling(r, pull.p99_ms, "ms", "pull long-poll p99");
    row_target(r, recv.p99_ms, false, 5, "< 5 ms");
}

/* Delayed messages: the same pacer produces every message with
 * delayLevel 1 (1 s on this broker) and receivers take them; the latency
 * is counted from send + 1 s: how late the delay scheduler delivers. */
static void delay_case(void) {
    Srv a;
    LatFigure d = {NAN, NAN, NAN, NAN};
    static const char *const flags[] = {"--messageDelayLevel=1s 5s", NULL};
    bool up = srv_start(&a, cfg_g.petrel, cfg_g.root, "delay", flags) == 0;
    if (up) {
        bench_sleep_ms(500);
        printf("  broker delay on port %d (pid %d), --messageDelayLevel=1s 5s\n", a.port,
               (int)a.pid);
        char body[256];
        size_t blen = receive_body(body, sizeof(body), LAT_RECV_TOPIC, 1, INVISIBLE_MS, 0);
        Http h;
        http_init(&h, a.port);
        bool ok = put_topic(a.port, LAT_RECV_TOPIC, TOPIC_QUEUES) &&
                  http_expect(&h, "delay", "POST", "/v1/groups/" LAT_GROUP "/receive",
                              "application/json", body, blen, 200, "{\"messages\":[", NULL);
        http_free(&h);
        if (ok)
            d = lat_case(&a, "delay", LAT_RECV_TOPIC, lat_receive_main, cfg_g.lat_consumers,
                         true, cfg_g.delay_rate, 1, 1000, 0, 0);
        else
            case_errors++;
    } else {
        case_errors++;
    }
    srv_stop(&a, cfg_g.keep);
    Row *r = row_add("msgs/s", d.rate, "paced produce with delayLevel 1 (1 s)");
    row_ceiling(r, cfg_g.delay_rate, "/s", "scheduled");
    row_add("ms", d.p50_ms, "  delayed message lateness p50 (receive - send - 1 s)");
    r = row_add("ms", d.p99_ms, "  delayed message lateness p99");
    row_target(r, d.p99_ms, false, 100, "< 100 ms");
}

/* Timers: the same pacer produces every message with "delayMs" drawn
 * from BENCH_TIMER_MIN_MS..BENCH_TIMER_MAX_MS (1..3 s: two or three hops
 * through the wheel each) and receivers take them; the latency is counted
 * from send + its delayMs. */
static void timer_case(void) {
    Srv a;
    LatFigure d = {NAN, NAN, NAN, NAN};
    bool up = srv_start(&a, cfg_g.petrel, cfg_g.root, "timer", NULL) == 0;
    if (up) {
        bench_sleep_ms(500);
        printf("  broker timer on port %d (pid %d)\n", a.port, (int)a.pid);
        char body[256];
        size_t blen = receive_body(body, sizeof(body), LAT_RECV_TOPIC, 1, INVISIBLE_MS, 0);
        Http h;
        http_init(&h, a.port);
        bool ok = put_topic(a.port, LAT_RECV_TOPIC, TOPIC_QUEUES) &&
                  http_expect(&h, "timer", "POST", "/v1/groups/" LAT_GROUP "/receive",
                              "application/json", body, blen, 200, "{\"messages\":[", NULL);
        http_free(&h);
        if (ok)
            d = lat_case(&a, "timer", LAT_RECV_TOPIC, lat_receive_main, cfg_g.lat_consumers,
                         true, cfg_g.delay_rate, 0, 0, BENCH_TIMER_MIN_MS, BENCH_TIMER_MAX_MS);
        else
            case_errors++;
    } else {
        case_errors++;
    }
    srv_stop(&a, cfg_g.keep);
    Row *r = row_add("msgs/s", d.rate, "paced produce with delayMs %d..%d", BENCH_TIMER_MIN_MS,
                     BENCH_TIMER_MAX_MS);
    row_ceiling(r, cfg_g.delay_rate, "/s", "scheduled");
    row_add("ms", d.p50_ms, "  timer lateness p50 (receive - send - delayMs)");
    r = row_add("ms", d.p99_ms, "  timer lateness p99");
    row_target(r, d.p99_ms, false, 100, "< 100 ms");
}

/* Produces 'total' messages to 'topic' in batches of BENCH_PREFILL_BATCH
 * on one connection, each with "delayLevel":'level' when 'level' > 0, or
 * with "deliverAt" spread at random over the next 'spread_ms' ms when
 * 'spread_ms' > 0; returns msgs/s (NAN on a failed request). */
static double fill_rate(Http *h, const char *topic, long total, int level, int64_t spread_ms) {
    size_t one_cap = BENCH_BODY_LEN + 48;
    char *b = malloc(32 + BENCH_PREFILL_BATCH * (one_cap + 1));
    if (!b) return NAN;
    char path[160];
    snprintf(path, sizeof(path), "/v1/topics/%s/messages", topic);
    int64_t t0 = mq_mono_ns();
    int64_t wall0 = mq_now_ms();
    uint64_t rnd = 0x9E3779B97F4A7C15ull;
    long sent = 0;
    bool ok = true;
    size_t n = 0;
    while (ok && sent < total && !bench_interrupted) {
        if (n == 0 || spread_ms > 0) { /* timers: new times in every batch */
            n = (size_t)sprintf(b, "{\"messages\":[");
            for (int i = 0; i < BENCH_PREFILL_BATCH; i++) {
                if (i) b[n++] = ',';
                size_t l = bench_json_msg(b + n, (unsigned)i);
                if (level > 0)
                    l = l - 1 + (size_t)sprintf(b + n + l - 1, ",\"delayLevel\":%d}", level);
                if (spread_ms > 0) {
                    rnd ^= rnd << 13; /* xorshift64 */
                    rnd ^= rnd >> 7;
                    rnd ^= rnd << 17;
                    long long at = wall0 + 1 + (long long)(rnd % (uint64_t)spread_ms);
                    l = l - 1 + (size_t)sprintf(b + n + l - 1, ",\"deliverAt\":%lld}", at);
                }
                n += l;
            }
            n += (size_t)sprintf(b + n, "]}");
        }
        const char *resp = NULL;
        size_t rlen = 0;
        int st = http_call(h, "POST", path, "application/json", b, n, &resp, &rlen);
        if (st != 200 || !strstr(resp, "SEND_OK")) {
            fprintf(stderr, "bench: delayed fill answered %d: %.200s\n", st, resp);
            ok = false;
        }
        sent += BENCH_PREFILL_BATCH;
    }
    double secs = (double)(mq_mono_ns() - t0) / 1e9;
    free(b);
    return ok && !bench_interrupted ? (double)sent / secs : NAN;
}

/* The value of the gauge 'name' on the broker's /metrics; -1 unknown. */
static long long gauge(Http *h, const char *name) {
    const char *resp = NULL;
    size_t len = 0;
    if (http_call(h, "GET", "/metrics", NULL, NULL, 0, &resp, &len) != 200) return -1;
    char key[128];
    snprintf(key, sizeof(key), "\n%s ", name);
    const char *p = strstr(resp, key);
    return p ? strtoll(p + strlen(key), NULL, 10) : -1;
}

/* One kind of waiting message for fill_case. */
typedef struct FillKind {
    const char *name;  /* the group, also the broker's label */
    int level;         /* fill_rate's 'level' */
    int64_t spread_ms; /* fill_rate's 'spread_ms' */
    const char *what;  /* how they are produced, for the rows */
    const char *gauge; /* the metric counting them while they wait */
} FillKind;

/* A million messages waiting: delay level 18 (2 h), or timers with
 * deliverAt spread over the next hour.  The produce rate against plain
 * batches in the same run, what they cost the broker in anonymous memory
 * (they wait in the commit log; the scheduler keeps positions only), and
 * its CPU while they wait (no scan: only the heads of the queues are
 * looked at). */
static void fill_case(const FillKind *k) {
    Srv a;
    double plain = NAN, delayed = NAN, idle_cores = NAN;
    long rss0 = -1, rss1 = -1;
    long long waiting = -1;
    long total = cfg_g.delay_pending;
    if (srv_start(&a, cfg_g.petrel, cfg_g.root, k->name, NULL) == 0) {
        bench_sleep_ms(500);
        Http h;
        http_init(&h, a.port);
        bool ok = put_topic(a.port, "FillPlain", TOPIC_QUEUES) &&
                  put_topic(a.port, "Fill", TOPIC_QUEUES);
        if (ok) {
            plain = fill_rate(&h, "FillPlain", total, 0, 0);
            rss0 = bench_rss_anon_kib(a.pid);
            delayed = fill_rate(&h, "Fill", total, k->level, k->spread_ms);
            bench_sleep_ms(500);
            rss1 = bench_rss_anon_kib(a.pid);
            waiting = gauge(&h, k->gauge);
            CpuWindow cw;
            cpu_begin(&cw, a.pid);
            bench_sleep_ms(3000);
            cpu_end(&cw);
            idle_cores = cw.broker_cores;
            cpu_print(k->name, &cw);
        }
        http_free(&h);
        printf("  %-10s %ld plain messages at %.0f msgs/s, then %ld with %s at %.0f msgs/s; "
               "broker RssAnon %ld KiB before them, %ld KiB after; %s %lld; broker CPU %.3f "
               "cores while they wait\n", k->name, total, plain, total, k->what, delayed, rss0,
               rss1, k->gauge, waiting, idle_cores);
        if (isnan(plain) || isnan(delayed) || rss1 < 0 || waiting < total * 9 / 10)
            case_errors++;
    } else {
        case_errors++;
    }
    srv_stop(&a, cfg_g.keep);
    Row *r = row_add("msgs/s", delayed, "produce batches of 1000 with %s (%ld)", k->what, total);
    row_ceiling(r, plain, "msgs/s", "plain batches");
    row_add("MiB", rss1 < 0 ? NAN : (double)rss1 / 1024.0, "  broker RssAnon with %ld waiting",
            total);
    row_add("cores", idle_cores, "  broker CPU while they wait (3 s)");
}

/* ======================================================================
 * The throughput cases on one broker
 * ====================================================================== */

/* open_pool connects the 'n' connections of the pull and receive threads,
 * one at a time.  Both runs use the same connections, so they meet the
 * same spread over the broker's HTTP worker threads: libmicrohttpd hands
 * each connection to the worker that accepts it (connections that arrive
 * together tend to go to one worker), and each worker can only use one
 * core. */
static void open_pool(Http *pool, int n, int port) {
    for (int i = 0; i < n; i++) {
        http_init(&pool[i], port);
        if (http_connect(&pool[i]) != 0) fprintf(stderr, "bench: cannot connect\n");
        bench_sleep_ms(20); /* one accept at a time */
    }
}

static void cpu_row(double cpu_us, const char *what) {
    row_add("us", cpu_us, "  %s", what);
}

static void throughput_cases(bool receive, bool stream) {
    Srv a;
    Figure pull = NO_FIGURE, recv = NO_FIGURE, str = NO_FIGURE;
    Topic t;
    memset(&t, 0, sizeof(t));
    char inflight[64];
    snprintf(inflight, sizeof(inflight), "--popInflightMessageThreshold=%d", INFLIGHT_MAX);
    bool up = srv_start(&a, cfg_g.petrel, cfg_g.root, "consume",
                        (const char *const[]){inflight, NULL}) == 0;
    bool ok = up;
    if (up) {
        bench_sleep_ms(500);
        printf("  broker consume on port %d (pid %d), %s\n", a.port, (int)a.pid, inflight);
        Http h;
        http_init(&h, a.port);
        ok = put_topic(a.port, TOPIC, TOPIC_QUEUES) &&
             bench_prefill(a.port, &h, TOPIC, cfg_g.msgs);
        t.nq = ok ? bench_settle_queues(&h, TOPIC, t.qmin, t.qmax, TOPIC_QUEUES * 8) : -1;
        for (int q = 0; q < t.nq; q++) {
            t.total += t.qmax[q] - t.qmin[q];
            if (t.qmax[q] - t.qmin[q] < 2 * BATCH_MAX) ok = false;
        }
        ok = ok && t.nq > 0;
        http_free(&h);
        if (ok)
            printf("  topic      %" PRIu64 " messages in %d queues\n", t.total, t.nq);
    }
    Http pool[MAX_THREADS];
    if (ok) {
        open_pool(pool, cfg_g.consumers, a.port);
        pull = case_pull(&a, &t, pool);
        if (receive && !bench_interrupted) recv = case_receive(&a, &t, pool);
        for (int i = 0; i < cfg_g.consumers; i++) http_free(&pool[i]);
        if (stream && !bench_interrupted) str = case_stream(&a, &t);
    } else {
        case_errors++;
    }
    srv_stop(&a, cfg_g.keep);
    Row *r = row_add("msgs/s", pull.rate, "pull %d msgs/request, %d conns (ceiling)", BATCH_MAX,
                     cfg_g.consumers);
    cpu_row(pull.cpu_us, "broker CPU per message (pull)");
    if (receive) {
        r = row_add("msgs/s", recv.rate, "receive %d + ack, %d conns, %d queues, inflight 1e6",
                    BATCH_MAX, cfg_g.consumers, TOPIC_QUEUES);
        if (!isnan(pull.rate)) row_ceiling(r, pull.rate, "msgs/s", "pull");
        row_target(r, recv.rate, true, 300000, ">= 300,000/s");
        cpu_row(recv.cpu_us, "broker CPU per message (receive+ack)");
    }
    if (stream) {
        r = row_add("msgs/s", str.rate, "SSE stream %d/fetch, acks on 2nd conn, inflight 1e6",
                    cfg_g.stream_max);
        if (!isnan(pull.rate)) row_ceiling(r, pull.rate, "msgs/s", "pull");
        row_target(r, str.rate, true, 200000, ">= 200,000/s");
        cpu_row(str.cpu_us, "broker CPU per message (stream+ack)");
    }
}

/* ======================================================================
 * main
 * ====================================================================== */

static int setup(void) {
    cfg_g.secs = (int)bench_env_num("BENCH_SECS", 5, 1, 600);
    cfg_g.consumers = (int)bench_env_num("BENCH_CONSUMERS", 4, 1, MAX_THREADS);
    cfg_g.msgs = (long)bench_env_num("BENCH_CONSUME_MSGS", 2000000, 10000, 1e9);
    cfg_g.stream_max = (int)bench_env_num("BENCH_STREAM_MAX", 64, 1, 1000);
    cfg_g.lat_rate = bench_env_num("BENCH_LAT_RATE", 10000, 1, 1e6);
    cfg_g.lat_producers = (int)bench_env_num("BENCH_LAT_PRODUCERS", 8, 1, 64);
    cfg_g.lat_consumers = (int)bench_env_num("BENCH_LAT_CONSUMERS", 2, 1, 64);
    cfg_g.delay_rate = bench_env_num("BENCH_DELAY_RATE", 2000, 1, 1e6);
    cfg_g.delay_pending = (long)bench_env_num("BENCH_DELAY_PENDING", 1000000, 1000, 1e9);
    cfg_g.lat_warmup_ms = (long)bench_env_num("BENCH_LAT_WARMUP_MS", 500, 0, 60000);
    cfg_g.keep = getenv("BENCH_KEEP") && *getenv("BENCH_KEEP");
    const char *perf = getenv("BENCH_PERF");
    if (perf && *perf) {
        if (mq_mkdirs(perf) != MQ_OK) {
            fprintf(stderr, "bench: cannot create '%s'\n", perf);
            return -1;
        }
        cfg_g.perf_dir = perf;
    }
    if (bench_prepare(cfg_g.petrel, cfg_g.root, sizeof(cfg_g.root), "petrel-bench-consume") != 0) return -1;
    json_object_seed(0); /* before any thread uses jansson */
    return 0;
}

int main(void) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (setup() != 0) return 1;
    int64_t t0 = mq_mono_ns();
    print_header();
    bool receive = bench_wanted_word("receive");
    bool stream = bench_wanted_word("stream");
    if (receive || stream) {
        printf("receive+ack and SSE stream throughput, pull ceiling...\n");
        throughput_cases(receive, stream);
    }
    if (bench_wanted_word("delayfill") && !bench_interrupted) {
        printf("\ndelayed messages: a million waiting...\n");
        static const FillKind levels = {"delayfill", 18, 0, "delayLevel 18",
                                        "petrel_delayed_messages"};
        fill_case(&levels);
    }
    if (bench_wanted_word("delaylat") && !bench_interrupted) {
        printf("\ndelayed messages: delivery lateness at a paced rate...\n");
        delay_case();
    }
    if (bench_wanted_word("timerfill") && !bench_interrupted) {
        printf("\ntimers: a million waiting within the hour...\n");
        static const FillKind timers = {"timerfill", 0, 3600000, "deliverAt within 1 h",
                                        "petrel_timer_messages"};
        fill_case(&timers);
    }
    if (bench_wanted_word("timerlat") && !bench_interrupted) {
        printf("\ntimers: delivery lateness at a paced rate...\n");
        timer_case();
    }
    if (bench_wanted_word("receivelat") && !bench_interrupted) {
        printf("produce -> long-poll latency: pull (ceiling), then receive + ack...\n");
        lat_cases();
    }
    if (!cfg_g.keep) mq_rmtree(cfg_g.root);
    return bench_report(t0, case_errors);
}
