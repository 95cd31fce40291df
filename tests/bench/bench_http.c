/*
 * bench_http.c - the broker over HTTP, side by side with ceilings measured
 * in the same run: a bare libmicrohttpd server built into this binary with
 * the gateway's threading model (epoll, pool of 2, suspend/resume) that
 * reads the POST body and answers 204, and the raw 4 KiB append +
 * fdatasync rate of the scratch filesystem.  Then, against real
 * `petrel standalone` processes (PETREL_BIN): single JSON produce, raw-body
 * produce, batches of 100, pull of 32 from the page cache, SYNC_FLUSH
 * produce, produce -> long-poll latency at a paced rate, and the broker's
 * anonymous RSS idle and under load.  The loads come from wrk (BENCH_WRK,
 * default "wrk") with Lua scripts written into the scratch directory; the
 * paced latency case is C (plain keep-alive HTTP/1.1 over a socket).
 *
 * A case whose first request is not a 200 (checked before measuring), or
 * whose wrk run saw non-2xx answers or socket errors, is reported broken
 * (ERROR in the table).  Never fails on a missed target: exit 1 only when a
 * case could not run or was broken.  Output: per-case diagnostics (CPU
 * used by the server and by wrk, latency, RSS peak), then one table and the
 * line "bench: N figures, M targets met, K missed" (scripts/run-bench.sh).
 *
 * Env (default):
 *   PETREL_BIN (bin/petrel)        the broker binary
 *   PETREL_BENCH_DIR (/tmp)        parent of the scratch directory
 *   BENCH_SECS (5)                 each wrk run, whole seconds
 *   BENCH_ROUNDS (2)               the ceiling, JSON and raw cases run this many
 *                                  times, interleaved; the best run counts
 *   BENCH_CONNS (64), BENCH_WRK_THREADS (1), BENCH_WRK (wrk)
 *   BENCH_PULL_MSGS (1000000)      messages in the topic before the pull
 *   BENCH_LAT_RATE (10000)         msgs/s of the paced latency case
 *   BENCH_LAT_PRODUCERS (8)        producer connections sharing that rate
 *   BENCH_LAT_WARMUP_MS (500)      latencies of messages sent earlier are
 *                                  printed, not judged
 *   BENCH_SYNC_SECS (2)            the raw fdatasync loop
 *   BENCH_ONLY (all)               groups, e.g. "json,pull": ceiling json raw
 *                                  batch pull sync latency memory txn (the ceiling
 *                                  also runs with json, pull and memory)
 *   BENCH_BROKER_FLAGS ()          more --key=value flags for every broker
 *   BENCH_LAT_DUMP ()              a file for every latency sample,
 *                                  "<send ms since start> <latency us>"
 *   BENCH_KEEP ()                  set: keep the scratch dir (wrk outputs,
 *                                  scripts, broker logs and data)
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>
#include <microhttpd.h>

#include "benchlib.h"
#define E2E_NO_CMOCKA /* e2e_read_port, e2e_exit_status */
#include "e2e.h"
#include "http.h"
#include "mq.h"

#define BODY_LEN BENCH_BODY_LEN /* bytes of every message body */
#define BATCH_COUNT 100     /* messages per batch request */
#define PULL_MAX 32         /* messages per pull request */
#define SAMPLE_MS 50        /* RSS sampling period during a wrk run */
#define TOPIC "bench"       /* topic of the produce and pull cases */
#define LAT_TOPIC "latency" /* one-queue topic of the latency case */

/* ======================================================================
 * Settings, scratch directory, helpers
 * ====================================================================== */

typedef struct Settings {
    int secs;             /* BENCH_SECS: each wrk run */
    double sync_secs;     /* BENCH_SYNC_SECS: raw fdatasync loop */
    int conns;            /* BENCH_CONNS: wrk connections */
    int wrk_threads;      /* BENCH_WRK_THREADS */
    int rounds;           /* BENCH_ROUNDS: interleaved runs of ceiling, JSON, raw */
    long pull_msgs;       /* BENCH_PULL_MSGS: topic size before the pull */
    double lat_rate;      /* BENCH_LAT_RATE: msgs/s of the paced producer */
    int lat_producers;    /* BENCH_LAT_PRODUCERS: connections sharing that rate */
    long lat_warmup_ms;   /* BENCH_LAT_WARMUP_MS: not judged at the start */
    const char *wrk;      /* BENCH_WRK */
    char petrel[PATH_MAX]; /* PETREL_BIN, absolute */
    bool keep;            /* BENCH_KEEP */
    char root[PATH_MAX];  /* scratch directory, removed at the end */
} Settings;

static Settings cfg_g;
static int case_errors; /* cases that could not run or were broken */

/* scratch_path joins the scratch root and 'name'; caller frees. */
static char *scratch_path(const char *name) {
    char *p = NULL;
    if (asprintf(&p, "%s/%s", cfg_g.root, name) < 0) return NULL;
    return p;
}

/* ======================================================================
 * Header: machine and settings
 * ====================================================================== */

static void print_header(void) {
    bench_print_machine("bench_http");
    struct stat st;
    struct tm tm;
    char built[64] = "?";
    if (stat(cfg_g.petrel, &st) == 0 && localtime_r(&st.st_mtime, &tm))
        strftime(built, sizeof(built), "%Y-%m-%d %H:%M:%S", &tm);
    printf("broker  %s (built %s); libmicrohttpd %s (ceiling); load: %s\n", cfg_g.petrel,
           built, MHD_get_version(), cfg_g.wrk);
    printf("data    %s\n", cfg_g.root);
    if (getenv("BENCH_BROKER_FLAGS") && *getenv("BENCH_BROKER_FLAGS"))
        printf("flags   BENCH_BROKER_FLAGS=%s\n", getenv("BENCH_BROKER_FLAGS"));
    printf("settings BENCH_SECS=%d BENCH_CONNS=%d BENCH_WRK_THREADS=%d BENCH_ROUNDS=%d "
           "BENCH_PULL_MSGS=%ld\n         BENCH_LAT_RATE=%g BENCH_LAT_PRODUCERS=%d "
           "BENCH_LAT_WARMUP_MS=%ld BENCH_SYNC_SECS=%g\n",
           cfg_g.secs, cfg_g.conns, cfg_g.wrk_threads, cfg_g.rounds, cfg_g.pull_msgs,
           cfg_g.lat_rate, cfg_g.lat_producers, cfg_g.lat_warmup_ms, cfg_g.sync_secs);
    bench_print_load();
    printf("notes   wrk, the servers and this program share the same CPUs; every message "
           "body is %d B; MiB = 2^20 bytes\n\n", BODY_LEN);
    fflush(stdout);
}

/* ======================================================================
 * The ceiling: bare libmicrohttpd with the gateway's model (gw_start in
 * gateway/http.c, at the broker's defaults httpThreads=2,
 * httpMaxConnections=4096, httpConnectionTimeout=60): epoll, internal pool
 * of 2 workers, suspend/resume on, 64 KiB of memory per connection; the
 * listen socket bound and listening (backlog 1024) as gw_listen does.  It
 * collects the POST body as the gateway does (a buffer of at least 4 KiB,
 * one copy) and answers 204 on the final call: never in the first call,
 * which would make MHD close the connection (NOTES-libs).
 * ====================================================================== */

typedef struct CeilReq {
    char *body;  /* collected request body */
    size_t len;  /* bytes */
    size_t cap;  /* bytes allocated */
} CeilReq;

static enum MHD_Result ceil_on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                       const char *method, const char *version,
                                       const char *upload_data, size_t *upload_data_size,
                                       void **con_cls) {
    (void)cls;
    (void)url;
    (void)method;
    (void)version;
    CeilReq *r = *con_cls;
    if (!r) { /* call 1: headers only; set up, never answer here */
        r = calloc(1, sizeof(*r));
        if (!r) return MHD_NO;
        *con_cls = r;
        return MHD_YES;
    }
    if (*upload_data_size > 0) {
        size_t need = r->len + *upload_data_size;
        if (need > r->cap) {
            size_t cap = r->cap ? r->cap : 4096;
            while (cap < need) cap *= 2;
            char *nb = realloc(r->body, cap);
            if (!nb) return MHD_NO;
            r->body = nb;
            r->cap = cap;
        }
        memcpy(r->body + r->len, upload_data, *upload_data_size);
        r->len = need;
        *upload_data_size = 0;
        return MHD_YES;
    }
    struct MHD_Response *resp = MHD_create_response_from_buffer(0, NULL, MHD_RESPMEM_PERSISTENT);
    if (!resp) return MHD_NO;
    enum MHD_Result ret = MHD_queue_response(conn, MHD_HTTP_NO_CONTENT, resp);
    MHD_destroy_response(resp);
    return ret;
}

static void ceil_on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                              enum MHD_RequestTerminationCode toe) {
    (void)cls;
    (void)conn;
    (void)toe;
    CeilReq *r = *con_cls;
    if (!r) return;
    free(r->body);
    free(r);
    *con_cls = NULL;
}

/* ceil_start starts the server on 127.0.0.1 and a free port ('*port'). */
static struct MHD_Daemon *ceil_start(int *port) {
    int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (s < 0) return NULL;
    int one = 1;
    setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    struct sockaddr_in sa;
    memset(&sa, 0, sizeof(sa));
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t sl = sizeof(sa);
    if (bind(s, (struct sockaddr *)&sa, sizeof(sa)) != 0 || listen(s, 1024) != 0 ||
        getsockname(s, (struct sockaddr *)&sa, &sl) != 0) {
        fprintf(stderr, "bench: ceiling: cannot listen: %s\n", strerror(errno));
        close(s);
        return NULL;
    }
    *port = ntohs(sa.sin_port);
    unsigned int flags =
        MHD_USE_EPOLL_INTERNAL_THREAD | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG;
    /* The gateway's own defaults (http.h), so the two differ only in what
     * the handler does. */
    GwConfig gc;
    gw_config_defaults(&gc);
    struct MHD_Daemon *d = MHD_start_daemon(
        flags, 0, NULL, NULL, ceil_on_request, NULL,
        MHD_OPTION_LISTEN_SOCKET, (MHD_socket)s,
        MHD_OPTION_THREAD_POOL_SIZE, (unsigned int)gc.threads,
        MHD_OPTION_CONNECTION_LIMIT, (unsigned int)gc.conn_limit,
        MHD_OPTION_CONNECTION_TIMEOUT, (unsigned int)gc.conn_timeout_s,
        MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)gc.conn_memory,
        MHD_OPTION_NOTIFY_COMPLETED, ceil_on_completed, NULL,
        MHD_OPTION_END);
    if (!d) {
        fprintf(stderr, "bench: ceiling: cannot start the daemon\n");
        close(s);
    }
    return d;
}

/* ======================================================================
 * wrk: run, sample the server meanwhile, parse the output
 * ====================================================================== */

typedef struct WrkResult {
    bool ran;              /* wrk printed Requests/sec */
    double rps;            /* Requests/sec */
    double secs;           /* the run's length as wrk reports it */
    uint64_t requests;     /* completed requests */
    uint64_t non2xx;       /* "Non-2xx or 3xx responses" */
    uint64_t sock_errors;  /* connect + read + write + timeout */
    double p50_us;         /* latency percentiles, NAN if absent */
    double p90_us;
    double p99_us;
    char script_line[256]; /* the script's own "RESULT ..." line, "" if none */
    double server_cores;   /* server CPU seconds / wall seconds, NAN if unknown */
    double wrk_cores;      /* wrk's CPU seconds / wall seconds */
    double other_cores;    /* all the rest (other processes, ksoftirqd) / wall seconds */
    double softirq_cores;  /* softirq time (loopback TCP; mostly inside the above) */
    double steal_cores;    /* hypervisor steal / wall seconds */
    long peak_anon_kib;    /* largest RssAnon sampled (a broker), -1 = none */
} WrkResult;

/* What one case measured: its rate and what each message cost the server. */
typedef struct Figure {
    double rate;   /* msgs/s (req/s for the ceiling); NAN = failed or broken */
    double cpu_us; /* server CPU time per message (per request for the ceiling), us */
} Figure;

static const Figure NO_FIGURE = {NAN, NAN};

static Figure wrk_figure(const WrkResult *w, double per_req) {
    return (Figure){w->rps * per_req, w->server_cores / (w->rps * per_req) * 1e6};
}

/* wrk_time_us reads "2.89ms", "812.00us", "1.02s", "1.50m" as microseconds. */
static double wrk_time_us(const char *s) {
    char *end = NULL;
    double v = strtod(s, &end);
    if (end == s) return NAN;
    if (strncmp(end, "us", 2) == 0) return v;
    if (strncmp(end, "ms", 2) == 0) return v * 1e3;
    if (strncmp(end, "s", 1) == 0) return v * 1e6;
    if (strncmp(end, "m", 1) == 0) return v * 60e6;
    if (strncmp(end, "h", 1) == 0) return v * 3600e6;
    return NAN;
}

static void wrk_parse(const char *path, WrkResult *w) {
    FILE *f = fopen(path, "r");
    if (!f) return;
    char line[512];
    while (fgets(line, sizeof(line), f)) {
        char num[64];
        int pct = 0;
        unsigned long long a = 0, b = 0, c = 0, d = 0;
        if (sscanf(line, "Requests/sec: %lf", &w->rps) == 1) {
            w->ran = true;
        } else if (sscanf(line, " %llu requests in %63[^,]", &a, num) == 2) {
            w->requests = a;
            w->secs = wrk_time_us(num) / 1e6;
        } else if (sscanf(line, " Non-2xx or 3xx responses: %llu", &a) == 1) {
            w->non2xx = a;
        } else if (sscanf(line, " Socket errors: connect %llu, read %llu, write %llu, "
                                "timeout %llu", &a, &b, &c, &d) == 4) {
            w->sock_errors = a + b + c + d;
        } else if (sscanf(line, " %d%% %63s", &pct, num) == 2) {
            if (pct == 50) w->p50_us = wrk_time_us(num);
            if (pct == 90) w->p90_us = wrk_time_us(num);
            if (pct == 99) w->p99_us = wrk_time_us(num);
        } else if (strncmp(line, "RESULT ", 7) == 0) {
            size_t n = strcspn(line + 7, "\n");
            if (n >= sizeof(w->script_line)) n = sizeof(w->script_line) - 1;
            memcpy(w->script_line, line + 7, n);
            w->script_line[n] = '\0';
        }
    }
    fclose(f);
}

/* wrk_run runs wrk with 'script' against 'url' for BENCH_SECS with
 * BENCH_CONNS connections and --latency.  'server' is the pid of the
 * server (0 = the ceiling in this process): its CPU time is measured, and
 * a broker's RssAnon is sampled every SAMPLE_MS.  The output is kept in
 * <scratch>/wrk-<label>.txt.  Returns 0 when wrk ran and reported. */
static int wrk_run(const char *label, const char *script, const char *url, pid_t server,
                   WrkResult *w) {
    memset(w, 0, sizeof(*w));
    w->p50_us = w->p90_us = w->p99_us = w->server_cores = w->wrk_cores = w->other_cores = NAN;
    w->softirq_cores = w->steal_cores = NAN;
    w->peak_anon_kib = -1;
    char name[96];
    snprintf(name, sizeof(name), "wrk-%s.txt", label);
    char *out = scratch_path(name);
    if (!out) return -1;
    unlink(out);
    char threads[16], conns[16], secs[16];
    snprintf(threads, sizeof(threads), "-t%d", cfg_g.wrk_threads);
    snprintf(conns, sizeof(conns), "-c%d", cfg_g.conns);
    snprintf(secs, sizeof(secs), "-d%ds", cfg_g.secs);
    char *argv[] = {(char *)cfg_g.wrk, threads, conns, secs, "--timeout", "10s", "--latency",
                    "-s", (char *)script, (char *)url, NULL};
    double cpu0 = bench_cpu_secs(server);
    double self0 = bench_cpu_secs(0);
    SysCpu sys0 = bench_sys_cpu();
    int64_t t0 = mq_mono_ns();
    pid_t pid = bench_spawn(argv, out);
    if (pid < 0) {
        free(out);
        return -1;
    }
    int ws = 0;
    struct rusage ru;
    memset(&ru, 0, sizeof(ru));
    bool killed = false;
    for (;;) {
        pid_t r = wait4(pid, &ws, WNOHANG, &ru);
        if (r == pid) break;
        if (r < 0 && errno != EINTR) break;
        if (server > 0) {
            long kib = bench_rss_anon_kib(server);
            if (kib > w->peak_anon_kib) w->peak_anon_kib = kib;
        }
        if (bench_interrupted && !killed) {
            kill(pid, SIGTERM);
            killed = true;
        }
        struct timespec ts = {0, SAMPLE_MS * 1000000};
        nanosleep(&ts, NULL);
    }
    double wall = (double)(mq_mono_ns() - t0) / 1e9;
    double cpu1 = bench_cpu_secs(server);
    double self = server > 0 ? bench_cpu_secs(0) - self0 : 0; /* the ceiling is this process */
    w->server_cores = (cpu1 - cpu0) / wall;
    w->wrk_cores = ((double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 +
                    (double)ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6) / wall;
    SysCpu sys1 = bench_sys_cpu();
    w->other_cores = (sys1.procs - sys0.procs + sys1.softirq - sys0.softirq - self) / wall -
                     w->server_cores - w->wrk_cores;
    w->softirq_cores = (sys1.softirq - sys0.softirq) / wall;
    w->steal_cores = (sys1.steal - sys0.steal) / wall;
    wrk_parse(out, w);
    if (!w->ran) {
        fprintf(stderr, "bench: %s: wrk exited with status %d and no figures; its output:\n",
                label, e2e_exit_status(ws));
        FILE *f = fopen(out, "r");
        char line[512];
        while (f && fgets(line, sizeof(line), f)) fprintf(stderr, "    %s", line);
        if (f) fclose(f);
    }
    free(out);
    return w->ran ? 0 : -1;
}

/* wrk_broken is true (and says why) when the run saw error answers. */
static bool wrk_broken(const char *label, const WrkResult *w) {
    if (w->non2xx == 0 && w->sock_errors == 0) return false;
    fprintf(stderr, "bench: %s: BROKEN: %" PRIu64 " non-2xx answers, %" PRIu64
            " socket errors in %" PRIu64 " requests\n", label, w->non2xx, w->sock_errors,
            w->requests);
    return true;
}

static void wrk_print(const char *label, const WrkResult *w, double msgs_per_req) {
    printf("  %-10s %9.0f req/s (%" PRIu64 " in %.2f s) = %10.0f msgs/s; latency p50 %.2f ms, "
           "p90 %.2f ms, p99 %.2f ms; server CPU %.1f us/request\n"
           "  %-10s cpu (cores of %ld): server %.2f, wrk %.2f, others %.2f (softirq %.2f in all, "
           "steal %.2f)%s%s; non-2xx %" PRIu64 ", socket errors %" PRIu64 "\n",
           label, w->rps, w->requests, w->secs, w->rps * msgs_per_req, w->p50_us / 1e3,
           w->p90_us / 1e3, w->p99_us / 1e3, w->server_cores / w->rps * 1e6, "",
           sysconf(_SC_NPROCESSORS_ONLN), w->server_cores,
           w->wrk_cores, w->other_cores, w->softirq_cores, w->steal_cores,
           w->script_line[0] ? "; script: " : "",
           w->script_line, w->non2xx, w->sock_errors);
    if (w->peak_anon_kib >= 0)
        printf("  %-10s broker RssAnon peak %.1f MiB\n", "", (double)w->peak_anon_kib / 1024);
    fflush(stdout);
}

/* ======================================================================
 * Request bodies and the wrk scripts (written into the scratch dir)
 * ====================================================================== */

/* Lua: sum the thread-local counters 'ok' and 'bad' in done(). */
static const char LUA_COUNTERS[] =
    "local threads = {}\n"
    "local nthreads = 0\n"
    "function setup(thread)\n"
    "  thread:set(\"tid\", nthreads)\n"
    "  nthreads = nthreads + 1\n"
    "  table.insert(threads, thread)\n"
    "end\n"
    "function done(summary, latency, requests)\n"
    "  local ok, bad = 0, 0\n"
    "  for _, t in ipairs(threads) do ok = ok + t:get(\"ok\"); bad = bad + t:get(\"bad\") end\n"
    "  io.write(string.format(\"RESULT ok=%d bad=%d\\n\", ok, bad))\n"
    "end\n";

/* write_post_script writes a POST script with a fixed body; with 'expect'
 * each answer is checked to contain it (counted ok / bad). */
static char *write_post_script(const char *name, const char *ctype, const char *body,
                               const char *expect) {
    char *path = scratch_path(name);
    FILE *f = path ? fopen(path, "w") : NULL;
    if (!f) {
        fprintf(stderr, "bench: cannot write a wrk script: %s\n", strerror(errno));
        free(path);
        return NULL;
    }
    /* The body is JSON-safe ASCII without quotes or backslashes, so a
     * Lua long string holds it as is. */
    fprintf(f, "wrk.method = \"POST\"\nwrk.headers[\"Content-Type\"] = \"%s\"\n"
               "wrk.body = [==[%s]==]\n", ctype, body);
    if (expect) {
        fputs(LUA_COUNTERS, f);
        fprintf(f, "function init(args) ok = 0; bad = 0 end\n"
                   "function response(status, headers, body)\n"
                   "  if status == 200 and string.find(body, '%s', 1, true) then ok = ok + 1\n"
                   "  else bad = bad + 1 end\n"
                   "end\n", expect);
    }
    fclose(f);
    return path;
}

/* write_txn_script writes the transactional producer: each connection
 * sends a half message, then commits the transaction id of the answer
 * (ids wait in a per-thread list; a commit is sent whenever one waits).
 * One transaction = two requests; "ok" counts the commits answered
 * COMMITTED, "bad" anything unexpected. */
static char *write_txn_script(const char *body) {
    char *path = scratch_path("txn.lua");
    FILE *f = path ? fopen(path, "w") : NULL;
    if (!f) {
        fprintf(stderr, "bench: cannot write a wrk script: %s\n", strerror(errno));
        free(path);
        return NULL;
    }
    fprintf(f, "wrk.method = \"POST\"\nwrk.headers[\"Content-Type\"] = \"application/json\"\n"
               "local msg = [==[%s]==]\n", body);
    fputs(LUA_COUNTERS, f);
    fputs("local ids = {}\n"
          "function init(args) ok = 0; bad = 0 end\n"
          "function request()\n"
          "  local id = table.remove(ids)\n"
          "  if id then return wrk.format(nil, '/v1/transactions/' .. id .. '/commit', nil, '') end\n"
          "  return wrk.format(nil, '/v1/topics/" TOPIC "/transactions', nil, msg)\n"
          "end\n"
          /* Plain finds, no patterns: the generator shares the CPUs. A
           * commit answer starts with the id, a produce answer has it
           * after its status (32 hex digits). */
          "function response(status, headers, body)\n"
          "  if status ~= 200 then bad = bad + 1; return end\n"
          "  local s = string.find(body, '\"transactionId\":\"', 1, true)\n"
          "  if s == 2 then\n"
          "    if string.find(body, '\"COMMITTED\"', 20, true) then ok = ok + 1\n"
          "    else bad = bad + 1 end\n"
          "  elseif s and string.find(body, '\"SEND_OK\"', 1, true) then\n"
          "    table.insert(ids, string.sub(body, s + 17, s + 48))\n"
          "  else bad = bad + 1 end\n"
          "end\n", f);
    fclose(f);
    return path;
}

/* write_pull_script writes the pull walker: request k reads queue k % nq
 * at offset min + 32 * chunk, walking each queue front to back and
 * wrapping at its end; every offset leaves at least 32 messages, so every
 * FOUND answer carries exactly PULL_MAX. */
static char *write_pull_script(const uint64_t *qmin, const uint64_t *chunks, size_t nq) {
    char *path = scratch_path("pull.lua");
    FILE *f = path ? fopen(path, "w") : NULL;
    if (!f) {
        fprintf(stderr, "bench: cannot write a wrk script: %s\n", strerror(errno));
        free(path);
        return NULL;
    }
    fprintf(f, "wrk.method = \"GET\"\nlocal mins = {");
    for (size_t q = 0; q < nq; q++) fprintf(f, "%s%" PRIu64, q ? ", " : "", qmin[q]);
    fprintf(f, "}\nlocal chunks = {");
    for (size_t q = 0; q < nq; q++) fprintf(f, "%s%" PRIu64, q ? ", " : "", chunks[q]);
    fprintf(f, "}\nlocal nq = %zu\n", nq);
    fputs(LUA_COUNTERS, f);
    fprintf(f,
            "function init(args) ok = 0; bad = 0; k = tid * 7919 end\n"
            "function request()\n"
            "  local q = k %% nq\n"
            "  local c = math.floor(k / nq) %% chunks[q + 1]\n"
            "  k = k + 1\n"
            "  return wrk.format(nil, \"/v1/topics/%s/queues/\" .. q .. \"/messages?offset=\" "
            ".. (mins[q + 1] + c * %d) .. \"&max=%d\")\n"
            "end\n"
            "function response(status, headers, body)\n"
            "  if status == 200 and string.find(body, '\"status\":\"FOUND\"', 1, true) then\n"
            "    ok = ok + 1 else bad = bad + 1 end\n"
            "end\n",
            TOPIC, PULL_MAX, PULL_MAX);
    fclose(f);
    return path;
}

/* ======================================================================
 * 1. Ceiling: bare libmicrohttpd, POST the produce body, 204
 * ====================================================================== */

typedef struct Scripts {
    char *json;  /* one JSON message */
    char *raw;   /* one raw body */
    char *batch; /* BATCH_COUNT JSON messages */
    char *sync;  /* one JSON message, answers checked for SEND_OK */
    char *txn;   /* transactional produce + commit */
    char *batch_body; /* the batch request, also sent by the bench's own check */
    size_t batch_len; /* bytes */
} Scripts;

static double ceiling_rps = NAN; /* req/s, the best run; NAN if not measured */

/* run_ceiling starts the server, checks one request, runs wrk with the
 * produce script against it and stops it.  Req/s, NAN on failure. */
static Figure run_ceiling(const char *json_script, int round) {
    char label[32];
    snprintf(label, sizeof(label), "ceiling-%d", round);
    WrkResult w;
    memset(&w, 0, sizeof(w));
    int port = 0;
    struct MHD_Daemon *d = ceil_start(&port);
    bool ok = d != NULL;
    if (ok) {
        Http h;
        http_init(&h, port);
        char body[BODY_LEN + 16];
        size_t len = bench_json_msg(body, 0);
        ok = http_expect(&h, label, "POST", "/v1/topics/" TOPIC "/messages", "application/json",
                         body, len, 204, NULL, NULL);
        http_free(&h);
    }
    char url[96];
    snprintf(url, sizeof(url), "http://127.0.0.1:%d/v1/topics/%s/messages", port, TOPIC);
    if (ok) ok = wrk_run(label, json_script, url, 0, &w) == 0;
    if (d) MHD_stop_daemon(d);
    if (ok) wrk_print(label, &w, 1);
    if (ok && wrk_broken(label, &w)) ok = false;
    if (!ok) case_errors++;
    return ok ? wrk_figure(&w, 1) : NO_FIGURE;
}

/* ======================================================================
 * 2-4. Produce: one JSON message, one raw body, batches of 100
 * ====================================================================== */

static double json_rps = NAN;     /* figure 2, for the raw and batch rows */
static long load_peak_kib = -1;   /* broker RssAnon peak over the load cases */
static char load_peak_case[16];   /* the case that had it */

static void note_peak(const char *label, const WrkResult *w) {
    if (w->peak_anon_kib > load_peak_kib) {
        load_peak_kib = w->peak_anon_kib;
        snprintf(load_peak_case, sizeof(load_peak_case), "%s", label);
    }
}

/* batch_ok checks a batch answer: 'count' results, each SEND_OK. */
static bool batch_ok(json_t *root, size_t count) {
    json_t *res = json_object_get(root, "results");
    if (json_array_size(res) != count) return false;
    size_t i;
    json_t *v;
    json_array_foreach(res, i, v) {
        const char *st = json_string_value(json_object_get(v, "status"));
        if (!st || strcmp(st, "SEND_OK") != 0) return false;
    }
    return true;
}

/* produce_case checks one request, runs wrk and returns what it measured
 * (NO_FIGURE when the case could not run or was broken). */
static Figure produce_case(const Srv *a, const char *label, const char *script,
                           const char *ctype, const char *body, size_t len, size_t per_req) {
    Http h;
    http_init(&h, a->port);
    json_t *root = NULL;
    bool ok = http_expect(&h, label, "POST", "/v1/topics/" TOPIC "/messages", ctype, body, len,
                          200, "SEND_OK", per_req > 1 ? &root : NULL);
    if (ok && per_req > 1 && !batch_ok(root, per_req)) {
        fprintf(stderr, "bench: %s: the batch answer does not hold %zu SEND_OK results\n", label,
                per_req);
        ok = false;
    }
    json_decref(root);
    http_free(&h);
    char url[128];
    snprintf(url, sizeof(url), "%s/v1/topics/%s/messages", a->url, TOPIC);
    WrkResult w;
    if (ok) ok = wrk_run(label, script, url, a->pid, &w) == 0;
    if (ok) {
        wrk_print(label, &w, (double)per_req);
        note_peak(label, &w);
        if (wrk_broken(label, &w)) ok = false;
    }
    if (!ok) case_errors++;
    return ok ? wrk_figure(&w, (double)per_req) : NO_FIGURE;
}

/* A figure measured in BENCH_ROUNDS interleaved rounds: the best run
 * counts (background load only ever slows a run down); a failed or broken
 * run makes the figure an error. */
typedef struct Best {
    Figure best;  /* the fastest run so far, rate NAN = none */
    bool failed;  /* some run failed or was broken */
} Best;

static void best_add(Best *b, Figure f) {
    if (isnan(f.rate))
        b->failed = true;
    else if (isnan(b->best.rate) || f.rate > b->best.rate)
        b->best = f;
}

static Figure best_of(const Best *b) {
    return b->failed ? NO_FIGURE : b->best;
}

/* cpu_row adds the sub-row "server CPU per message" of a figure. */
static void cpu_row(Figure f, const char *what) {
    row_add("us", f.cpu_us, "  %s", what);
}

/* txn_run: one run of transactional produce + commit (label "txn-N");
 * the rate counts committed transactions. */
static Figure txn_run(const Srv *a, const char *script, int round) {
    char url[128], label[16];
    snprintf(url, sizeof(url), "%s/v1/topics/%s/transactions", a->url, TOPIC);
    snprintf(label, sizeof(label), "txn-%d", round);
    WrkResult w;
    bool ok = script && wrk_run(label, script, url, a->pid, &w) == 0;
    unsigned long long good = 0, bad = 0;
    if (ok) {
        wrk_print(label, &w, 0.5);
        note_peak(label, &w);
        if (sscanf(w.script_line, "ok=%llu bad=%llu", &good, &bad) != 2 || bad > 0 ||
            good == 0 || wrk_broken(label, &w)) {
            fprintf(stderr, "bench: %s: BROKEN: %s\n", label, w.script_line);
            ok = false;
        }
    }
    if (!ok) case_errors++;
    Figure f = ok ? wrk_figure(&w, 0.5) : NO_FIGURE;
    if (ok) {
        f.rate = (double)good / w.secs; /* committed transactions, not requests / 2 */
        f.cpu_us = w.server_cores / f.rate * 1e6;
    }
    return f;
}

/* txn_row: the best run against plain JSON produce of the same rounds
 * (issue 5's target: >= 40 %; one transaction is two requests). */
static void txn_row(Figure f) {
    Row *r = row_add("msgs/s", f.rate, "transactional produce + commit (2 requests), %d conns",
                     cfg_g.conns);
    if (!isnan(json_rps)) row_ceiling(r, json_rps, "msgs/s", "JSON produce");
    row_target(r, r->ratio, true, 0.4, ">= 0.40x JSON produce");
    cpu_row(f, "broker CPU per transaction");
}

/* single_rounds runs the ceiling and (with a broker 'a') the JSON and raw
 * produce cases in BENCH_ROUNDS rounds, then adds their rows. */
static void single_rounds(const Srv *a, const Scripts *sc) {
    bool bare = bench_wanted("ceiling") || bench_wanted("json") || bench_wanted("pull") ||
                bench_wanted("memory") || bench_wanted("txn");
    bool json = a && (bench_wanted("json") || bench_wanted("memory") || bench_wanted("txn"));
    bool raw = a && bench_wanted("raw");
    bool txn = a && bench_wanted("txn");
    char jbody[BODY_LEN + 16];
    size_t jlen = bench_json_msg(jbody, 0);
    char rbody[BODY_LEN];
    bench_make_body(rbody, BODY_LEN, 0);
    Best bc = {NO_FIGURE, false}, bj = {NO_FIGURE, false}, br = {NO_FIGURE, false};
    Best bt = {NO_FIGURE, false};
    for (int i = 1; i <= cfg_g.rounds && !bench_interrupted; i++) {
        char label[16];
        if (bare) best_add(&bc, run_ceiling(sc->json, i));
        snprintf(label, sizeof(label), "json-%d", i);
        if (json && !bench_interrupted)
            best_add(&bj, produce_case(a, label, sc->json, "application/json", jbody, jlen, 1));
        snprintf(label, sizeof(label), "raw-%d", i);
        if (raw && !bench_interrupted)
            best_add(&br, produce_case(a, label, sc->raw, "application/octet-stream", rbody,
                                       BODY_LEN, 1));
        if (txn && !bench_interrupted) best_add(&bt, txn_run(a, sc->txn, i));
    }
    ceiling_rps = best_of(&bc).rate;
    json_rps = best_of(&bj).rate;
    if (bare) {
        row_add("req/s", ceiling_rps, "bare MHD (gateway model), POST 111 B -> 204");
        cpu_row(best_of(&bc), "bare MHD CPU per request");
    }
    if (json) {
        Row *r = row_add("msgs/s", json_rps, "produce JSON, 1 msg/request, %d conns",
                         cfg_g.conns);
        if (!isnan(ceiling_rps)) row_ceiling(r, ceiling_rps, "req/s", "bare MHD");
        row_target(r, r->ratio, true, 0.7, ">= 0.70x bare MHD");
        cpu_row(best_of(&bj), "broker CPU per message (JSON)");
    }
    if (raw) {
        Row *r = row_add("msgs/s", best_of(&br).rate,
                         "produce raw body (octet-stream), 1 msg/request");
        if (!isnan(json_rps)) row_ceiling(r, json_rps, "msgs/s", "JSON produce");
        row_target(r, r->ratio, true, 1.0, ">= 1.00x JSON");
        cpu_row(best_of(&br), "broker CPU per message (raw)");
    }
    if (txn) txn_row(best_of(&bt));
}

static void case_batch(const Srv *a, const char *script, const char *body, size_t len) {
    Figure f = produce_case(a, "batch", script, "application/json", body, len, BATCH_COUNT);
    Row *r = row_add("msgs/s", f.rate, "produce JSON batch, %d msgs/request", BATCH_COUNT);
    if (!isnan(json_rps)) row_ceiling(r, json_rps, "msgs/s", "JSON produce");
    row_target(r, f.rate, true, 1.5e6, ">= 1,500,000/s");
    cpu_row(f, "broker CPU per message (batch)");
}

/* ======================================================================
 * 5. Pull 32 at a time from the page cache
 * ====================================================================== */

/* pull_check reads one pull and checks it is FOUND with PULL_MAX bodies of
 * BODY_LEN bytes. */
static bool pull_check(Http *h, uint64_t offset) {
    char path[160];
    snprintf(path, sizeof(path), "/v1/topics/%s/queues/0/messages?offset=%" PRIu64 "&max=%d",
             TOPIC, offset, PULL_MAX);
    json_t *root = NULL;
    bool ok = http_expect(h, "pull", "GET", path, NULL, NULL, 0, 200, "\"FOUND\"", &root);
    json_t *msgs = json_object_get(root, "messages");
    if (ok && (json_array_size(msgs) != PULL_MAX ||
               json_string_length(json_object_get(json_array_get(msgs, 0), "body")) != BODY_LEN)) {
        fprintf(stderr, "bench: pull: wanted %d messages of %d B, got %zu\n", PULL_MAX, BODY_LEN,
                json_array_size(msgs));
        ok = false;
    }
    json_decref(root);
    return ok;
}

static void case_pull(const Srv *a) {
    Figure f = NO_FIGURE;
    char *script = NULL;
    Http h;
    http_init(&h, a->port);
    uint64_t qmin[64], qmax[64], chunks[64];
    bool ok = bench_prefill(a->port, &h, TOPIC, cfg_g.pull_msgs);
    int nq = ok ? bench_settle_queues(&h, TOPIC, qmin, qmax, 64) : -1;
    uint64_t total = 0;
    for (int q = 0; q < nq; q++) {
        chunks[q] = (qmax[q] - qmin[q]) / PULL_MAX;
        if (chunks[q] == 0) ok = false; /* every queue must hold 32 */
        total += chunks[q] * PULL_MAX;
    }
    ok = ok && nq > 0 && pull_check(&h, qmin[0]);
    http_free(&h);
    if (ok) {
        printf("  pull       walking %" PRIu64 " messages in %d queues, %d per request\n", total,
               nq, PULL_MAX);
        script = write_pull_script(qmin, chunks, (size_t)nq);
    }
    WrkResult w;
    char url[96];
    snprintf(url, sizeof(url), "%s/", a->url);
    if (ok && script) ok = wrk_run("pull", script, url, a->pid, &w) == 0;
    if (ok && script) {
        wrk_print("pull", &w, PULL_MAX);
        note_peak("pull", &w);
        unsigned long long good = 0, bad = 0;
        if (sscanf(w.script_line, "ok=%llu bad=%llu", &good, &bad) != 2 || bad > 0) {
            fprintf(stderr, "bench: pull: BROKEN: answers not FOUND (%s)\n", w.script_line);
            ok = false;
        }
        if (wrk_broken("pull", &w)) ok = false;
        if (ok) f = wrk_figure(&w, PULL_MAX);
    }
    if (!ok || !script) case_errors++;
    free(script);
    Row *r = row_add("msgs/s", f.rate, "pull %d msgs/request from page cache", PULL_MAX);
    if (!isnan(ceiling_rps)) row_ceiling(r, ceiling_rps * PULL_MAX, "msgs/s", "bare MHD x 32");
    row_target(r, f.rate, true, 1e6, ">= 1,000,000/s");
    cpu_row(f, "broker CPU per message (pull)");
}

/* ======================================================================
 * 6. SYNC_FLUSH produce next to the raw fdatasync rate
 * ====================================================================== */

static void case_sync(const char *script) {
    double p50 = NAN, p99 = NAN;
    double fsync = bench_fdatasync_rate(cfg_g.root, 64 << 20, cfg_g.sync_secs, &p50, &p99);
    Row *r = row_add("fsync/s", fsync, "4 KiB append + fdatasync (scratch dir)");
    printf("  fdatasync  %.0f/s, p50 %.0f us, p99 %.0f us\n", fsync, p50, p99);
    Figure f = NO_FIGURE;
    WrkResult w;
    memset(&w, 0, sizeof(w));
    w.p50_us = w.p99_us = NAN;
    Srv b;
    bool ok = srv_start(&b, cfg_g.petrel, cfg_g.root, "sync",
                        (const char *const[]){"--flushDiskType=SYNC_FLUSH", NULL}) == 0;
    if (ok) {
        Http h;
        http_init(&h, b.port);
        char body[BODY_LEN + 16];
        size_t len = bench_json_msg(body, 0);
        ok = http_expect(&h, "sync", "POST", "/v1/topics/" TOPIC "/messages", "application/json",
                         body, len, 200, "\"SEND_OK\"", NULL);
        http_free(&h);
        char url[128];
        snprintf(url, sizeof(url), "%s/v1/topics/%s/messages", b.url, TOPIC);
        if (ok) ok = wrk_run("sync", script, url, b.pid, &w) == 0;
        if (ok) {
            wrk_print("sync", &w, 1);
            unsigned long long good = 0, bad = 0;
            if (sscanf(w.script_line, "ok=%llu bad=%llu", &good, &bad) != 2 || bad > 0) {
                fprintf(stderr, "bench: sync: BROKEN: answers without SEND_OK (%s)\n",
                        w.script_line);
                ok = false;
            }
            if (wrk_broken("sync", &w)) ok = false;
            if (ok) {
                f = wrk_figure(&w, 1);
                printf("  sync       %.1f acks per raw fdatasync\n", f.rate / fsync);
            }
        }
    }
    srv_stop(&b, cfg_g.keep);
    if (!ok) case_errors++;
    r = row_add("msgs/s", f.rate, "SYNC_FLUSH produce JSON, %d conns", cfg_g.conns);
    if (!isnan(fsync)) row_ceiling(r, fsync, "fsync/s", "raw");
    cpu_row(f, "broker CPU per message (SYNC_FLUSH)");
    row_add("ms", ok ? w.p50_us / 1e3 : NAN, "  SYNC_FLUSH produce latency p50");
    row_add("ms", ok ? w.p99_us / 1e3 : NAN, "  SYNC_FLUSH produce latency p99");
}

/* ======================================================================
 * 7. Produce -> long-polling pull latency at a paced rate
 *
 * BENCH_LAT_PRODUCERS paced producers (benchlib's LatRun) send each
 * body with its sequence number; one consumer thread (lat_pull_main)
 * long-polls the one-queue topic (waitMs) and, when an answer has arrived,
 * takes the latency of every message in it: arrival - send time.  Messages
 * sent in the first BENCH_LAT_WARMUP_MS are left out of the judged
 * percentiles (printed apart): the first message of a fresh broker or
 * queue waits tens of ms while the store creates and preallocates its
 * files.
 * ====================================================================== */

/* lat_topic creates the one-queue topic of the case. */
static bool lat_topic(int port) {
    Http h;
    http_init(&h, port);
    const char *resp = NULL;
    size_t n = 0;
    const char body[] = "{\"queues\":1}";
    int st = http_call(&h, "PUT", "/v1/topics/" LAT_TOPIC, "application/json", body,
                       sizeof(body) - 1, &resp, &n);
    if (st != 200 && st != 201) fprintf(stderr, "bench: latency: PUT topic: %d %.200s\n", st, resp);
    http_free(&h);
    return st == 200 || st == 201;
}

static void case_latency(const Srv *a) {
    LatRun run;
    bool run_ok = lat_run_init(&run, a->port, LAT_TOPIC, cfg_g.lat_rate, cfg_g.lat_producers,
                               cfg_g.secs, (int64_t)cfg_g.lat_warmup_ms * 1000000);
    LatProducer *prod = calloc((size_t)run.producers, sizeof(*prod));
    LatConsumer *cons = calloc(1, sizeof(*cons));
    pthread_t *tid = calloc((size_t)run.producers + 1, sizeof(*tid));
    bool ok = run_ok && prod && cons && tid && lat_topic(a->port);
    double rate = NAN, p50 = NAN, p99 = NAN;
    int started = 0;
    double srv0 = bench_cpu_secs(a->pid), self0 = bench_cpu_secs(0);
    SysCpu sys0 = bench_sys_cpu();
    int64_t wall0 = mq_mono_ns();
    const char *dump = getenv("BENCH_LAT_DUMP");
    if (ok && dump && *dump && !(cons->dump = fopen(dump, "w")))
        fprintf(stderr, "bench: cannot write '%s': %s\n", dump, strerror(errno));
    if (ok) {
        cons->run = &run;
        run.t0 = mq_mono_ns() + 100 * 1000000; /* the threads start meanwhile */
        run.end = run.t0 + (int64_t)cfg_g.secs * 1000000000;
        ok = pthread_create(&tid[0], NULL, lat_pull_main, cons) == 0;
        started = ok ? 1 : 0;
        for (int i = 0; ok && i < run.producers; i++) {
            prod[i].run = &run;
            prod[i].idx = i;
            if (pthread_create(&tid[i + 1], NULL, lat_producer_main, &prod[i]) != 0) {
                atomic_store(&run.failed, true);
                atomic_fetch_sub(&run.producers_left, run.producers - i);
                ok = false;
                break;
            }
            started++;
        }
    }
    for (int i = 0; i < started; i++) pthread_join(tid[i], NULL);
    double wall = (double)(mq_mono_ns() - wall0) / 1e9;
    double srv = (bench_cpu_secs(a->pid) - srv0) / wall, self = (bench_cpu_secs(0) - self0) / wall;
    SysCpu sys1 = bench_sys_cpu();
    double others = (sys1.procs - sys0.procs + sys1.softirq - sys0.softirq) / wall - srv - self;
    printf("  %-10s cpu (cores of %ld): server %.2f, this bench %.2f, others %.2f\n", "latency",
           sysconf(_SC_NPROCESSORS_ONLN), srv, self, others);
    if (ok && !atomic_load(&run.failed)) {
        Hist rtt;
        memset(&rtt, 0, sizeof(rtt));
        uint64_t late = 0;
        for (int i = 0; i < run.producers; i++) {
            hist_merge(&rtt, &prod[i].rtt);
            late += prod[i].late;
        }
        uint64_t sent = atomic_load(&run.sent);
        uint64_t got = cons->all.count;
        /* Over the schedule, or longer when the producers fell behind it. */
        int64_t last = atomic_load(&run.last_ns);
        int64_t span = last > run.end ? last - run.t0 : run.end - run.t0;
        rate = (double)sent / ((double)span / 1e9);
        printf("  latency    %" PRIu64 " sent (%.0f msgs/s, %" PRIu64 " sends > 1 ms late), "
               "produce round trip p50 %.0f us, p99 %.0f us\n"
               "  %-10s %" PRIu64 " received in %" PRIu64 " polls (%" PRIu64 " empty), "
               "%" PRIu64 " duplicates, %" PRIu64 " unknown\n"
               "  %-10s after the first %ld ms: latency p50 %.0f us, p90 %.0f us, p99 %.0f us, "
               "p99.9 %.0f us, max %.0f us\n"
               "  %-10s whole run: p99 %.0f us, max %.0f us (the first messages of a fresh "
               "queue wait for its files)\n",
               sent, rate, late, hist_pct(&rtt, 0.5) / 1e3, hist_pct(&rtt, 0.99) / 1e3, "", got,
               cons->polls, cons->empty, cons->dups, cons->unknown, "", cfg_g.lat_warmup_ms,
               hist_pct(&cons->lat, 0.5) / 1e3, hist_pct(&cons->lat, 0.9) / 1e3,
               hist_pct(&cons->lat, 0.99) / 1e3, hist_pct(&cons->lat, 0.999) / 1e3,
               hist_pct(&cons->lat, 1.0) / 1e3, "", hist_pct(&cons->all, 0.99) / 1e3,
               hist_pct(&cons->all, 1.0) / 1e3);
        if (got != sent || cons->dups || cons->unknown) {
            fprintf(stderr, "bench: latency: BROKEN: %" PRIu64 " sent, %" PRIu64
                    " received once\n", sent, got);
            ok = false;
        } else {
            p50 = hist_pct(&cons->lat, 0.5) / 1e3;
            p99 = hist_pct(&cons->lat, 0.99) / 1e3;
        }
    } else {
        ok = false;
    }
    if (!ok) {
        case_errors++;
        rate = NAN;
    }
    if (cons && cons->dump) fclose(cons->dump);
    lat_run_free(&run);
    free(prod);
    free(cons);
    free(tid);
    Row *r = row_add("msgs/s", rate, "paced produce for the latency case");
    row_ceiling(r, cfg_g.lat_rate, "/s", "scheduled");
    cpu_row((Figure){rate, srv / rate * 1e6}, "broker CPU per message (produce + long poll)");
    row_add("ms", p50 / 1e3, "  produce -> long-poll pull latency p50");
    r = row_add("ms", p99 / 1e3, "  produce -> long-poll pull latency p99");
    row_target(r, p99 / 1e3, false, 5, "< 5 ms");
}

/* ======================================================================
 * main
 * ====================================================================== */

static int setup(void) {
    cfg_g.secs = (int)bench_env_num("BENCH_SECS", 5, 1, 600);
    cfg_g.sync_secs = bench_env_num("BENCH_SYNC_SECS", 2, 0.1, 600);
    cfg_g.conns = (int)bench_env_num("BENCH_CONNS", 64, 1, 4000);
    cfg_g.wrk_threads = (int)bench_env_num("BENCH_WRK_THREADS", 1, 1, 64);
    cfg_g.rounds = (int)bench_env_num("BENCH_ROUNDS", 2, 1, 20);
    if (cfg_g.wrk_threads > cfg_g.conns) cfg_g.wrk_threads = cfg_g.conns;
    cfg_g.pull_msgs = (long)bench_env_num("BENCH_PULL_MSGS", 1000000, 1000, 1e9);
    cfg_g.lat_rate = bench_env_num("BENCH_LAT_RATE", 10000, 1, 1e6);
    cfg_g.lat_producers = (int)bench_env_num("BENCH_LAT_PRODUCERS", 8, 1, 64);
    cfg_g.lat_warmup_ms = (long)bench_env_num("BENCH_LAT_WARMUP_MS", 500, 0, 60000);
    cfg_g.wrk = getenv("BENCH_WRK") && *getenv("BENCH_WRK") ? getenv("BENCH_WRK") : "wrk";
    cfg_g.keep = getenv("BENCH_KEEP") && *getenv("BENCH_KEEP");
    if (bench_prepare(cfg_g.petrel, cfg_g.root, sizeof(cfg_g.root), "petrel-bench-http") != 0) return -1;
    json_object_seed(0); /* before any thread uses jansson */
    return 0;
}


static bool write_scripts(Scripts *s) {
    char json[BODY_LEN + 16];
    bench_json_msg(json, 0);
    char raw[BODY_LEN + 1];
    bench_make_body(raw, BODY_LEN, 0);
    raw[BODY_LEN] = '\0';
    s->batch_body = bench_json_batch(BATCH_COUNT, &s->batch_len);
    s->json = write_post_script("post-json.lua", "application/json", json, NULL);
    s->raw = write_post_script("post-raw.lua", "application/octet-stream", raw, NULL);
    s->batch = s->batch_body
                   ? write_post_script("post-batch.lua", "application/json", s->batch_body, NULL)
                   : NULL;
    s->sync = write_post_script("post-sync.lua", "application/json", json, "\"SEND_OK\"");
    s->txn = write_txn_script(json);
    return s->json && s->raw && s->batch && s->sync && s->txn;
}

static void free_scripts(Scripts *s) {
    free(s->json);
    free(s->raw);
    free(s->batch);
    free(s->sync);
    free(s->txn);
    free(s->batch_body);
}

/* The async broker's cases, its memory rows around them. */
static void async_cases(const Scripts *sc) {
    Srv a;
    long idle_kib = -1;
    long after_kib = -1;
    bool up = srv_start(&a, cfg_g.petrel, cfg_g.root, "async", NULL) == 0;
    if (up) {
        bench_sleep_ms(500); /* let start-up finish: segment preparation, threads */
        idle_kib = bench_rss_anon_kib(a.pid);
        printf("  broker async on port %d (pid %d); RssAnon idle %.1f MiB\n", a.port, (int)a.pid,
               (double)idle_kib / 1024);
        single_rounds(&a, sc);
        /* The latency case before the bulk writes of batch and pull, whose
         * writeback (hundreds of MB) would otherwise overlap it. */
        if (!bench_interrupted && bench_wanted("latency")) case_latency(&a);
        if (!bench_interrupted && bench_wanted("batch"))
            case_batch(&a, sc->batch, sc->batch_body, sc->batch_len);
        if (!bench_interrupted && bench_wanted("pull")) case_pull(&a);
        bench_sleep_ms(1000);
        after_kib = bench_rss_anon_kib(a.pid);
    } else {
        case_errors++;
    }
    srv_stop(&a, cfg_g.keep);
    Row *r = row_add("MiB", idle_kib >= 0 ? (double)idle_kib / 1024 : NAN,
                     "broker RssAnon idle (after start)");
    row_target(r, r->value, false, 16, "< 16 MiB");
    if (load_peak_kib >= 0) { /* sampled during the wrk runs that ran */
        r = row_add("MiB", (double)load_peak_kib / 1024, "broker RssAnon peak under load (%s)",
                    load_peak_case);
        row_target(r, r->value, false, 64, "< 64 MiB");
    }
    row_add("MiB", after_kib >= 0 ? (double)after_kib / 1024 : NAN,
            "broker RssAnon idle after the load");
}

int main(void) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (setup() != 0) return 1;
    int64_t t0 = mq_mono_ns();
    print_header();
    Scripts sc;
    memset(&sc, 0, sizeof(sc));
    if (!write_scripts(&sc)) {
        case_errors++;
        goto out;
    }
    bool async = bench_wanted("json") || bench_wanted("raw") || bench_wanted("batch") ||
                 bench_wanted("pull") || bench_wanted("latency") || bench_wanted("memory") ||
                 bench_wanted("txn");
    if (async) {
        printf("bare libmicrohttpd ceiling, then the broker with ASYNC_FLUSH...\n");
        async_cases(&sc);
    } else if (bench_wanted("ceiling")) {
        printf("bare libmicrohttpd ceiling...\n");
        single_rounds(NULL, &sc);
    }
    if (bench_wanted("sync") && !bench_interrupted) {
        printf("broker, SYNC_FLUSH...\n");
        case_sync(sc.sync);
    }
out:
    free_scripts(&sc);
    if (!cfg_g.keep) mq_rmtree(cfg_g.root);
    return bench_report(t0, case_errors);
}
