/*
 * bench_store.c - store throughput and recovery, side by side with the
 * physical ceilings measured in the same run on the same filesystem:
 * sequential write bandwidth, memcpy bandwidth, raw fdatasync rate; then
 * ASYNC appends (100 B, 1 KiB, 16 KiB bodies; 1 and 2 threads), SYNC_FLUSH
 * group commit (many writers, one fdatasync serves all), and store_open
 * after kill -9 of a child that wrote a 1 GiB log (steady state, no
 * checkpoint, and killed right after the burst).  Each case gets a fresh
 * store directory.  Per-case diagnostics (slowest batch, dispatch lag, the
 * store's own fdatasync count through a counting MqIo table) are printed as
 * the run goes; then one table and a summary line.  Never fails on a missed
 * target: exit 1 only when a case could not run.  Links libstore; no cmocka.
 *
 * Env: PETREL_BENCH_DIR (parent of the scratch dir, default /tmp),
 * BENCH_SECS (2), BENCH_SYNC_SECS (3), BENCH_SEQ_MB (1024),
 * BENCH_SYNC_THREADS (64), BENCH_RECOVERY_MB (1024), BENCH_KILL_DELAY_MS (2000),
 * BENCH_LOG (set: keep the store's info/warning log lines on stderr).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include "benchlib.h"
#include "checkpoint.h"
#include "io.h"
#include "store.h"

#define MIB ((size_t)1 << 20)
#define MB 1e6 /* figures are in decimal MB/GB; sizes in MiB/GiB */

/* ======================================================================
 * Settings, scratch directories
 * ====================================================================== */

typedef struct Settings {
    double secs;            /* BENCH_SECS: each async case */
    double sync_secs;       /* BENCH_SYNC_SECS: fdatasync loop and group commit */
    long seq_mb;            /* BENCH_SEQ_MB: MiB written by the sequential ceiling */
    int sync_threads;       /* BENCH_SYNC_THREADS */
    int sync_drivers;       /* BENCH_SYNC_DRIVERS: threads driving the writers */
    long recovery_mb;       /* BENCH_RECOVERY_MB: log size before the kill */
    long kill_delay_ms;     /* BENCH_KILL_DELAY_MS: steady state before the kill */
    char root[PATH_MAX];    /* scratch directory, removed at the end */
} Settings;

static Settings cfg_g;
static int case_errors; /* cases that could not run */

static double tv_secs(struct timeval tv) { return (double)tv.tv_sec + tv.tv_usec / 1e6; }

/* case_dir makes a fresh directory under the scratch root; caller frees. */
static char *case_dir(const char *tag) {
    char *p = NULL;
    if (asprintf(&p, "%s/%s-XXXXXX", cfg_g.root, tag) < 0) return NULL;
    if (!mkdtemp(p)) {
        fprintf(stderr, "bench: cannot create '%s': %s\n", p, strerror(errno));
        free(p);
        return NULL;
    }
    return p;
}

static void drop_dir(char *dir) {
    if (!dir) return;
    mq_rmtree(dir);
    free(dir);
}

/* ======================================================================
 * Counting I/O table: how many syncs the store itself issues
 * ====================================================================== */

static uint64_t io_fdatasyncs;   /* atomic */
static uint64_t io_fdatasync_ns; /* atomic: time spent in them */
static uint64_t io_fsyncs;       /* atomic */
static MqIo counting_io;

static int counting_fdatasync(int fd) {
    int64_t t0 = mq_mono_ns();
    int rc = mq_io_default.fdatasync(fd);
    __atomic_add_fetch(&io_fdatasync_ns, (uint64_t)(mq_mono_ns() - t0), __ATOMIC_RELAXED);
    __atomic_add_fetch(&io_fdatasyncs, 1, __ATOMIC_RELAXED);
    return rc;
}

static int counting_fsync(int fd) {
    __atomic_add_fetch(&io_fsyncs, 1, __ATOMIC_RELAXED);
    return mq_io_default.fsync(fd);
}

static void install_counting_io(void) {
    counting_io = mq_io_default;
    counting_io.fdatasync = counting_fdatasync;
    counting_io.fsync = counting_fsync;
    mq_io_set(&counting_io);
}

typedef struct SyncCount {
    uint64_t fdatasyncs;
    uint64_t fdatasync_ns;
    uint64_t fsyncs;
} SyncCount;

static SyncCount syncs_now(void) {
    return (SyncCount){__atomic_load_n(&io_fdatasyncs, __ATOMIC_RELAXED),
                       __atomic_load_n(&io_fdatasync_ns, __ATOMIC_RELAXED),
                       __atomic_load_n(&io_fsyncs, __ATOMIC_RELAXED)};
}

static SyncCount syncs_since(SyncCount a) {
    SyncCount b = syncs_now();
    return (SyncCount){b.fdatasyncs - a.fdatasyncs, b.fdatasync_ns - a.fdatasync_ns,
                       b.fsyncs - a.fsyncs};
}

/* ======================================================================
 * Start gate: worker threads wait here until every one has been created
 * ====================================================================== */

typedef struct Gate {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    bool open;             /* under lock */
} Gate;

static void gate_init(Gate *g) {
    pthread_mutex_init(&g->lock, NULL);
    pthread_cond_init(&g->cond, NULL);
    g->open = false;
}

static void gate_wait(Gate *g) {
    pthread_mutex_lock(&g->lock);
    while (!g->open) pthread_cond_wait(&g->cond, &g->lock);
    pthread_mutex_unlock(&g->lock);
}

static void gate_open(Gate *g) {
    pthread_mutex_lock(&g->lock);
    g->open = true;
    pthread_cond_broadcast(&g->cond);
    pthread_mutex_unlock(&g->lock);
}

static void gate_destroy(Gate *g) {
    pthread_mutex_destroy(&g->lock);
    pthread_cond_destroy(&g->cond);
}

/* ======================================================================
 * Header: machine, filesystem, settings
 * ====================================================================== */

/* fs_of finds the mount holding 'path' in /proc/mounts (longest prefix). */
static void fs_of(const char *path, char *buf, size_t cap) {
    char real[PATH_MAX];
    if (!realpath(path, real)) snprintf(real, sizeof(real), "%s", path);
    size_t best = 0;
    snprintf(buf, cap, "unknown");
    FILE *f = fopen("/proc/mounts", "r");
    if (f) {
        char dev[512], mnt[PATH_MAX], type[64];
        while (fscanf(f, "%511s %4095s %63s %*[^\n]", dev, mnt, type) == 3) {
            size_t n = strlen(mnt);
            bool under = strncmp(real, mnt, n) == 0 &&
                         (n == 1 || real[n] == '/' || real[n] == '\0');
            if (under && n >= best) {
                best = n;
                snprintf(buf, cap, "%s on %s (%s)", type, mnt, dev);
            }
        }
        fclose(f);
    }
    struct statfs sf;
    if (best == 0 && statfs(path, &sf) == 0)
        snprintf(buf, cap, "statfs type 0x%lx", (unsigned long)sf.f_type);
}

static void print_header(void) {
    char fs[2 * PATH_MAX];
    fs_of(cfg_g.root, fs, sizeof(fs));
    bench_print_machine("bench_store");
    printf("data    %s  (%s)\n", cfg_g.root, fs);
    printf("settings BENCH_SECS=%g BENCH_SYNC_SECS=%g BENCH_SEQ_MB=%ld BENCH_SYNC_THREADS=%d "
           "BENCH_RECOVERY_MB=%ld BENCH_KILL_DELAY_MS=%ld\n",
           cfg_g.secs, cfg_g.sync_secs, cfg_g.seq_mb, cfg_g.sync_threads, cfg_g.recovery_mb,
           cfg_g.kill_delay_ms);
    printf("units   MB = 10^6 bytes, GB = 10^9 bytes; the page cache is not dropped\n\n");
    fflush(stdout);
}

/* ======================================================================
 * 1. Ceilings
 * ====================================================================== */

static double seq_mbps; /* MB/s, NAN if not measured */
static double memcpy_gbps;
static double fsync_rate;

static void ceiling_seq_write(void) {
    seq_mbps = NAN;
    char *path = NULL;
    if (asprintf(&path, "%s/seq.dat", cfg_g.root) < 0) return;
    char *buf = malloc(MIB);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (!buf || fd < 0) {
        fprintf(stderr, "bench: seq write: cannot open '%s': %s\n", path, strerror(errno));
        goto out;
    }
    for (size_t i = 0; i < MIB; i++) buf[i] = (char)(i * 31 + 7);
    int64_t t0 = mq_mono_ns();
    long done = 0;
    for (; done < cfg_g.seq_mb && !bench_interrupted; done++) {
        size_t off = 0;
        while (off < MIB) {
            ssize_t n = write(fd, buf + off, MIB - off);
            if (n < 0 && errno == EINTR) continue;
            if (n <= 0) {
                fprintf(stderr, "bench: seq write: %s\n", n < 0 ? strerror(errno) : "short");
                goto out;
            }
            off += (size_t)n;
        }
        buf[0]++; /* a different chunk each time */
    }
    if (fdatasync(fd) != 0) {
        fprintf(stderr, "bench: seq write: fdatasync: %s\n", strerror(errno));
        goto out;
    }
    double secs = (double)(mq_mono_ns() - t0) / 1e9;
    seq_mbps = (double)done * (double)MIB / MB / secs;
out:
    if (fd >= 0) close(fd);
    if (path) unlink(path);
    free(path);
    free(buf);
    Row *r = row_add("MB/s", seq_mbps, "seq write %ld MiB + fdatasync", cfg_g.seq_mb);
    (void)r;
}

static void ceiling_memcpy(void) {
    /* 1 GiB to another 1 GiB, far above the last-level cache: memory
     * bandwidth, not cache bandwidth (the store copies into cold pages). */
    const size_t span = 1024 * MIB;
    const size_t total = 1024 * MIB;
    memcpy_gbps = NAN;
    char *a = malloc(span);
    char *b = malloc(span);
    if (a && b) {
        memset(a, 1, span);
        memset(b, 2, span);
        volatile unsigned char sink = 0;
        int64_t t0 = mq_mono_ns();
        for (size_t done = 0; done < total; done += MIB) {
            size_t at = done % span;
            memcpy(b + at, a + at, MIB);
            sink ^= (unsigned char)b[at + (done / MIB) % MIB];
        }
        double secs = (double)(mq_mono_ns() - t0) / 1e9;
        (void)sink;
        memcpy_gbps = (double)total / 1e9 / secs;
    }
    free(a);
    free(b);
    row_add("GB/s", memcpy_gbps, "memcpy 1 GiB in 1 MiB chunks");
}

static void ceiling_fdatasync(void) {
    double p50 = NAN;
    double p99 = NAN;
    fsync_rate =
        bench_fdatasync_rate(cfg_g.root, 1024 * (off_t)MIB, cfg_g.sync_secs, &p50, &p99);
    row_add("fsync/s", fsync_rate, "4 KiB append + fdatasync (prealloc)");
    row_add("us", p50, "  fdatasync latency p50");
    row_add("us", p99, "  fdatasync latency p99");
}

/* ======================================================================
 * Store helpers
 * ====================================================================== */

static const char BENCH_TOPIC[] = "bench";
static const char BENCH_PROPS[] = "TAGS\001TagA\002";

static void bench_config(StoreConfig *sc, const char *dir) {
    store_config_defaults(sc, dir);
    sc->store_host[0] = 127;
    sc->store_host[3] = 1;
    mq_put_u32(sc->store_host + 4, 10911);
}

static ClMessage bench_msg(const char *body, size_t len, uint32_t queue_id) {
    ClMessage m = {
        .topic = mq_slice(BENCH_TOPIC, sizeof(BENCH_TOPIC) - 1),
        .queue_id = queue_id,
        .born_ts = mq_now_ms(),
        .body = mq_slice(body, len),
        .props = mq_slice(BENCH_PROPS, sizeof(BENCH_PROPS) - 1),
    };
    m.born_host[0] = 127;
    m.born_host[3] = 1;
    return m;
}

static char *make_body(size_t len, uint32_t seed) {
    char *b = malloc(len ? len : 1);
    if (b)
        for (size_t i = 0; i < len; i++) b[i] = (char)('a' + (i * 7 + seed) % 26);
    return b;
}

/* ======================================================================
 * 2. ASYNC appends
 * ====================================================================== */

typedef struct Appender {
    Store *st;
    Gate *go;
    uint32_t tid;
    size_t body_len;
    uint64_t max_count;    /* this thread's share of the case's cap */
    int64_t run_ns;
    uint64_t count;        /* out: appends */
    uint64_t rec_bytes;    /* out: sum of ClAppendResult.size */
    int64_t start_ns;      /* out */
    int64_t end_ns;        /* out */
    int64_t worst_ns;      /* out: slowest batch of APPEND_BATCH appends */
    int err;               /* out: first store_put error */
} Appender;

enum { APPEND_BATCH = 128 };

static void *appender_main(void *arg) {
    Appender *a = arg;
    char *body = make_body(a->body_len, a->tid);
    gate_wait(a->go);
    a->start_ns = mq_mono_ns();
    int64_t deadline = a->start_ns + a->run_ns;
    if (!body) {
        a->err = MQ_ERR_NOMEM;
        a->end_ns = a->start_ns;
        return NULL;
    }
    ClMessage m = bench_msg(body, a->body_len, a->tid);
    ClAppendResult r;
    uint64_t count = 0;
    uint64_t bytes = 0;
    int64_t t = a->start_ns;
    while (count < a->max_count && !bench_interrupted) {
        for (int i = 0; i < APPEND_BATCH; i++) {
            int rc = store_put(a->st, &m, 1, &r);
            if (rc != MQ_OK) {
                a->err = rc;
                goto done;
            }
            count++;
            bytes += r.size;
        }
        int64_t t1 = mq_mono_ns();
        if (t1 - t > a->worst_ns) a->worst_ns = t1 - t;
        t = t1;
        if (t >= deadline) break;
    }
done:
    a->end_ns = mq_mono_ns();
    a->count = count;
    a->rec_bytes = bytes;
    free(body);
    return NULL;
}

static void async_case(size_t body_len, int threads) {
    char label[48];
    snprintf(label, sizeof(label), "async %zu %s x%d",
             body_len >= 1024 ? body_len / 1024 : body_len, body_len >= 1024 ? "KiB" : "B",
             threads);
    double rate = NAN;
    double rec_mbps = NAN;
    double body_mbps = NAN;
    char *dir = case_dir("async");
    Store *st = NULL;
    StoreConfig sc;
    int64_t t_open = mq_mono_ns();
    int rc = dir ? MQ_OK : MQ_ERR_IO;
    if (rc == MQ_OK) {
        bench_config(&sc, dir);
        rc = store_open(&sc, &st);
    }
    t_open = mq_mono_ns() - t_open;
    if (rc != MQ_OK) {
        fprintf(stderr, "bench: %s: store_open: %s\n", label, mq_strerror(rc));
        case_errors++;
    } else {
        /* Cap the bytes per case so that a fast disk does not fill up. */
        size_t rec = CL_FIXED_SIZE + body_len + sizeof(BENCH_TOPIC) - 1 + sizeof(BENCH_PROPS) - 1;
        uint64_t cap = ((uint64_t)3 << 30) / rec;
        if (cap > 50000000) cap = 50000000;
        Gate go;
        gate_init(&go);
        Appender ap[2];
        pthread_t tid[2];
        int started = 0;
        for (int i = 0; i < threads; i++) {
            ap[i] = (Appender){.st = st, .go = &go, .tid = (uint32_t)i, .body_len = body_len,
                               .max_count = cap / (uint64_t)threads,
                               .run_ns = (int64_t)(cfg_g.secs * 1e9)};
            if (pthread_create(&tid[i], NULL, appender_main, &ap[i]) != 0) break;
            started++;
        }
        if (started < threads) {
            fprintf(stderr, "bench: %s: cannot start threads\n", label);
            case_errors++;
        }
        gate_open(&go);
        uint64_t count = 0;
        uint64_t bytes = 0;
        int64_t t0 = INT64_MAX;
        int64_t t1 = 0;
        int64_t worst = 0;
        int err = MQ_OK;
        for (int i = 0; i < started; i++) {
            pthread_join(tid[i], NULL);
            if (ap[i].worst_ns > worst) worst = ap[i].worst_ns;
            count += ap[i].count;
            bytes += ap[i].rec_bytes;
            if (ap[i].start_ns < t0) t0 = ap[i].start_ns;
            if (ap[i].end_ns > t1) t1 = ap[i].end_ns;
            if (ap[i].err != MQ_OK) err = ap[i].err;
        }
        gate_destroy(&go);
        StoreStats ss;
        store_stats(st, &ss);
        if (err != MQ_OK) {
            fprintf(stderr, "bench: %s: store_put: %s\n", label, mq_strerror(err));
            case_errors++;
        } else if (started == threads && t1 > t0) {
            double secs = (double)(t1 - t0) / 1e9;
            rate = (double)count / secs;
            rec_mbps = (double)bytes / MB / secs;
            body_mbps = (double)count * (double)body_len / MB / secs;
        }
        int64_t t_close = mq_mono_ns();
        store_close(st);
        t_close = mq_mono_ns() - t_close;
        printf("  %-18s %10ju appends in %5.2f s, slowest %d in %6.2f ms; open %4.0f ms; "
               "at stop: dispatch lag %6.1f MB, unflushed %6.1f MB; close %5.0f ms\n",
               label, (uintmax_t)count, t1 > t0 ? (double)(t1 - t0) / 1e9 : 0.0,
               APPEND_BATCH, (double)worst / 1e6, (double)t_open / 1e6,
               (double)(ss.write_offset - ss.dispatched_offset) / MB,
               (double)(ss.write_offset - ss.flushed_offset) / MB, (double)t_close / 1e6);
        fflush(stdout);
    }
    drop_dir(dir);

    Row *r = row_add("appends/s", rate, "%s appends", label);
    if (body_len == 100 && threads == 1) {
        if (!isnan(memcpy_gbps)) row_ceiling(r, memcpy_gbps * 1e9 / 100, "/s", "100 B memcpy");
        row_target(r, rate, true, 2e6, ">= 2,000,000/s");
    }
    r = row_add("MB/s", rec_mbps, "  %s record MB/s", label);
    if (!isnan(seq_mbps)) row_ceiling(r, seq_mbps, "MB/s", "seq write");
    if (body_len == 16384) row_target(r, r->ratio, true, 0.8, ">= 0.80x seq");
    row_add("MB/s", body_mbps, "  %s body MB/s", label);
}

/* ======================================================================
 * 3. SYNC_FLUSH group commit
 * ====================================================================== */

/* The 64 writers are logical, as HTTP connections are in the broker: a
 * few driver threads (BENCH_SYNC_DRIVERS, 2 by default) each own some
 * writers; a writer appends, registers its flush waiter and is parked; the
 * flush callback (on the store's completer thread) puts it back on its
 * driver's ready list, as the gateway resumes a suspended connection. */
typedef struct SyncDriver SyncDriver;

typedef struct SyncWriter {
    SyncDriver *drv;
    uint32_t tid;
    struct SyncWriter *next; /* ready list link */
    int status;              /* the callback's status */
    int64_t t_start;         /* when its current message was put */
    ClFlushWaiter fw;        /* the waiter of its current message */
} SyncWriter;

struct SyncDriver {
    Store *st;
    Gate *go;
    int64_t run_ns;
    SyncWriter *writers;
    int nwriters;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    SyncWriter *ready;     /* under lock: writers whose message is durable */
    bool sleeping;         /* under lock: the driver waits on cond */
    uint64_t acks;         /* out */
    uint64_t already;      /* out: store_wait_flush returned 0 */
    uint64_t errors;       /* out: callbacks with a status other than MQ_OK */
    int err;               /* out: a store call failed */
    int64_t start_ns;
    int64_t end_ns;
    Hist hist;             /* ack latency, ns */
    Hist put_hist;         /* store_put alone, ns */
};

static void on_durable(void *arg, int status) {
    SyncWriter *w = arg;
    SyncDriver *d = w->drv;
    pthread_mutex_lock(&d->lock);
    w->status = status;
    w->next = d->ready;
    d->ready = w;
    if (d->sleeping) pthread_cond_signal(&d->cond);
    pthread_mutex_unlock(&d->lock);
}

/* issue puts one message for 'w' and registers its waiter; returns true if
 * it is already durable (no callback will come). */
static bool issue(SyncDriver *d, SyncWriter *w, const ClMessage *m) {
    int64_t t = mq_mono_ns();
    ClAppendResult r;
    int rc = store_put(d->st, m, 1, &r);
    hist_add(&d->put_hist, (uint64_t)(mq_mono_ns() - t));
    if (rc != MQ_OK) {
        d->err = rc;
        return false;
    }
    w->t_start = t;
    rc = store_wait_flush(d->st, &w->fw, r.phys_off + r.size, on_durable, w);
    if (rc == 0) {
        d->already++;
        return true;
    }
    if (rc != 1) d->err = rc;
    return false;
}

static void *sync_driver_main(void *arg) {
    SyncDriver *d = arg;
    char body[100];
    memset(body, 's', sizeof(body));
    gate_wait(d->go);
    d->start_ns = mq_mono_ns();
    int64_t deadline = d->start_ns + d->run_ns;
    int in_flight = 0;
    for (int i = 0; i < d->nwriters && d->err == MQ_OK; i++) {
        SyncWriter *w = &d->writers[i];
        ClMessage m = bench_msg(body, sizeof(body), w->tid);
        if (issue(d, w, &m)) {
            on_durable(w, MQ_OK);
            d->already--; /* counted again when it comes round */
        }
        in_flight++;
    }
    while (in_flight > 0) {
        pthread_mutex_lock(&d->lock);
        while (!d->ready) {
            d->sleeping = true;
            pthread_cond_wait(&d->cond, &d->lock);
            d->sleeping = false;
        }
        SyncWriter *list = d->ready;
        d->ready = NULL;
        pthread_mutex_unlock(&d->lock);
        int64_t now = mq_mono_ns();
        bool stop = now >= deadline || bench_interrupted || d->err != MQ_OK;
        while (list) {
            SyncWriter *w = list;
            list = w->next;
            if (w->status == MQ_OK) {
                d->acks++;
                hist_add(&d->hist, (uint64_t)(now - w->t_start));
            } else {
                d->errors++;
            }
            if (stop) {
                in_flight--;
                continue;
            }
            ClMessage m = bench_msg(body, sizeof(body), w->tid);
            while (issue(d, w, &m)) { /* already durable: count it and go again */
                d->acks++;
                hist_add(&d->hist, (uint64_t)(mq_mono_ns() - w->t_start));
            }
            if (d->err != MQ_OK) in_flight--;
        }
    }
    d->end_ns = mq_mono_ns();
    return NULL;
}

static void sync_case(void) {
    int n = cfg_g.sync_threads;
    char label[48];
    snprintf(label, sizeof(label), "sync 100 B x%d", n);
    double rate = NAN;
    double p50 = NAN;
    double p99 = NAN;
    char *dir = case_dir("sync");
    Store *st = NULL;
    StoreConfig sc;
    int rc = dir ? MQ_OK : MQ_ERR_IO;
    if (rc == MQ_OK) {
        bench_config(&sc, dir);
        sc.sync_flush = true; /* as flushDiskType=SYNC_FLUSH configures it */
        rc = store_open(&sc, &st);
    }
    int ndrv = cfg_g.sync_drivers < n ? cfg_g.sync_drivers : n;
    SyncWriter *w = calloc((size_t)n, sizeof(*w));
    SyncDriver *drv = calloc((size_t)ndrv, sizeof(*drv));
    pthread_t *tid = calloc((size_t)ndrv, sizeof(*tid));
    if (rc != MQ_OK || !w || !drv || !tid) {
        fprintf(stderr, "bench: %s: cannot start: %s\n", label, mq_strerror(rc ? rc : -1));
        case_errors++;
        goto out;
    }
    Gate go;
    gate_init(&go);
    int started = 0;
    for (int i = 0; i < ndrv; i++) {
        SyncDriver *d = &drv[i];
        d->st = st;
        d->go = &go;
        d->run_ns = (int64_t)(cfg_g.sync_secs * 1e9);
        d->writers = w + (size_t)n * (size_t)i / (size_t)ndrv;
        d->nwriters = (int)((size_t)n * (size_t)(i + 1) / (size_t)ndrv -
                            (size_t)n * (size_t)i / (size_t)ndrv);
        for (int k = 0; k < d->nwriters; k++) {
            d->writers[k].drv = d;
            d->writers[k].tid = (uint32_t)(d->writers - w + k);
        }
        pthread_mutex_init(&d->lock, NULL);
        pthread_cond_init(&d->cond, NULL);
        if (pthread_create(&tid[i], NULL, sync_driver_main, d) != 0) break;
        started++;
    }
    SyncCount syncs0 = syncs_now();
    struct rusage ru0;
    getrusage(RUSAGE_SELF, &ru0);
    gate_open(&go);
    Hist *all = calloc(1, sizeof(*all));
    Hist *puts = calloc(1, sizeof(*puts));
    uint64_t acks = 0;
    uint64_t already = 0;
    uint64_t errors = 0;
    int err = MQ_OK;
    int64_t t0 = INT64_MAX;
    int64_t t1 = 0;
    for (int i = 0; i < started; i++) {
        pthread_join(tid[i], NULL);
        acks += drv[i].acks;
        already += drv[i].already;
        errors += drv[i].errors;
        if (drv[i].err != MQ_OK) err = drv[i].err;
        if (drv[i].start_ns < t0) t0 = drv[i].start_ns;
        if (drv[i].end_ns > t1) t1 = drv[i].end_ns;
        if (all) hist_merge(all, &drv[i].hist);
        if (puts) hist_merge(puts, &drv[i].put_hist);
    }
    SyncCount syncs = syncs_since(syncs0); /* the store's, all threads joined */
    struct rusage ru1;
    getrusage(RUSAGE_SELF, &ru1);
    for (int i = 0; i < started; i++) {
        pthread_mutex_destroy(&drv[i].lock);
        pthread_cond_destroy(&drv[i].cond);
    }
    gate_destroy(&go);
    if (started < ndrv || err != MQ_OK || errors) {
        fprintf(stderr, "bench: %s: %d/%d drivers, error %s, %ju failed acks\n", label,
                started, ndrv, mq_strerror(err), (uintmax_t)errors);
        case_errors++;
    } else if (t1 > t0) {
        rate = (double)acks / ((double)(t1 - t0) / 1e9);
        if (all) {
            p50 = hist_pct(all, 0.50) / 1e3;
            p99 = hist_pct(all, 0.99) / 1e3;
        }
    }
    double secs = t1 > t0 ? (double)(t1 - t0) / 1e9 : 0.0;
    uint64_t fds = syncs.fdatasyncs;
    printf("  %-18s %10ju acks in %5.2f s (%ju already durable at wait), %ju failed\n"
           "  %-18s store fdatasync %ju (%.0f/s, %.1f acks each, mean %.0f us), fsync %ju\n",
           label, (uintmax_t)acks, secs, (uintmax_t)already, (uintmax_t)errors, "",
           (uintmax_t)fds, secs > 0 ? (double)fds / secs : 0.0,
           fds ? (double)acks / (double)fds : 0.0,
           fds ? (double)syncs.fdatasync_ns / (double)fds / 1e3 : 0.0, (uintmax_t)syncs.fsyncs);
    if (puts && puts->count)
        printf("  %-18s store_put alone: p50 %.1f us, p99 %.1f us, p99.9 %.1f us; "
               "process: %.1f minor faults, %.1f cs per ack; cpu %.2f s user, %.2f s sys\n",
               "", hist_pct(puts, 0.5) / 1e3, hist_pct(puts, 0.99) / 1e3,
               hist_pct(puts, 0.999) / 1e3,
               acks ? (double)(ru1.ru_minflt - ru0.ru_minflt) / (double)acks : 0.0,
               acks ? (double)(ru1.ru_nvcsw - ru0.ru_nvcsw + ru1.ru_nivcsw - ru0.ru_nivcsw) /
                          (double)acks
                    : 0.0,
               tv_secs(ru1.ru_utime) - tv_secs(ru0.ru_utime),
               tv_secs(ru1.ru_stime) - tv_secs(ru0.ru_stime));
    fflush(stdout);
    free(all);
    free(puts);
out:
    store_close(st);
    drop_dir(dir);
    free(w);
    free(drv);
    free(tid);
    Row *r = row_add("msgs/s", rate, "%s acked (group commit)", label);
    if (!isnan(fsync_rate)) row_ceiling(r, fsync_rate, "fsync/s", "raw");
    row_target(r, r->ratio, true, 30, ">= 30x fsync/s");
    row_add("us", p50, "  %s ack latency p50", label);
    row_add("us", p99, "  %s ack latency p99", label);
}

/* ======================================================================
 * 4. Recovery after kill -9
 * ====================================================================== */

typedef struct FillReport {
    uint64_t bytes;     /* record bytes appended in the fast phase */
    uint64_t count;
    int64_t elapsed_ns;
    int32_t err;        /* MQ_OK or the first error */
} FillReport;

typedef struct Filler {
    Store *st;
    uint32_t tid;
    uint64_t target;    /* record bytes for all threads together */
    uint64_t *total;    /* atomic, shared */
    uint64_t *count;    /* atomic, shared */
    int *reported;      /* atomic, shared */
    int fd;             /* pipe to the parent */
    int64_t start_ns;
} Filler;

static void fill_report(Filler *f, int err) {
    int zero = 0;
    if (!__atomic_compare_exchange_n(f->reported, &zero, 1, false, __ATOMIC_ACQ_REL,
                                     __ATOMIC_ACQUIRE))
        return;
    FillReport rep = {__atomic_load_n(f->total, __ATOMIC_ACQUIRE),
                      __atomic_load_n(f->count, __ATOMIC_ACQUIRE), mq_mono_ns() - f->start_ns,
                      err};
    if (write(f->fd, &rep, sizeof(rep)) != (ssize_t)sizeof(rep)) _exit(3);
}

static void *filler_main(void *arg) {
    Filler *f = arg;
    const size_t len = 1024;
    char *body = make_body(len, f->tid);
    if (!body) {
        fill_report(f, MQ_ERR_NOMEM);
        return NULL;
    }
    ClMessage m = bench_msg(body, len, f->tid);
    ClAppendResult r;
    bool slow = false;
    for (;;) {
        int rc = store_put(f->st, &m, 1, &r);
        if (rc != MQ_OK) {
            fill_report(f, rc);
            pause();
        }
        __atomic_add_fetch(f->count, 1, __ATOMIC_RELAXED);
        uint64_t total = __atomic_add_fetch(f->total, r.size, __ATOMIC_ACQ_REL);
        if (!slow && total >= f->target) {
            fill_report(f, MQ_OK);
            slow = true;
        }
        if (slow || __atomic_load_n(f->reported, __ATOMIC_ACQUIRE)) {
            slow = true;
            bench_sleep_ms(1); /* steady trickle until the kill */
        }
    }
    return NULL;
}

/* recovery_child never returns: it fills the log, reports, trickles. */
static void recovery_child(const char *dir, int fd) {
    StoreConfig sc;
    bench_config(&sc, dir);
    sc.segment_size = 256 * MIB;
    Store *st = NULL;
    int rc = store_open(&sc, &st);
    uint64_t total = 0;
    uint64_t count = 0;
    int reported = 0;
    Filler f[2];
    pthread_t tid[2];
    for (uint32_t i = 0; i < 2; i++) {
        f[i] = (Filler){.st = st, .tid = i, .target = (uint64_t)cfg_g.recovery_mb * MIB,
                        .total = &total, .count = &count, .reported = &reported, .fd = fd,
                        .start_ns = mq_mono_ns()};
    }
    if (rc != MQ_OK) {
        fill_report(&f[0], rc);
        _exit(2);
    }
    for (int i = 0; i < 2; i++) {
        if (pthread_create(&tid[i], NULL, filler_main, &f[i]) != 0) {
            fill_report(&f[0], MQ_ERR_NOMEM);
            _exit(2);
        }
    }
    for (;;) pause(); /* until SIGKILL */
}

static void recovery_rows(double wall_ms, double store_ms, const char *what, bool target) {
    Row *r = row_add("ms", wall_ms, "%s: store_open", what);
    if (target) row_target(r, wall_ms, false, 2000, "< 2,000 ms");
    row_add("ms", store_ms, "  %s: recovery_ms", what);
}

/* timed_open opens 'dir' and reports the wall time and the store's own
 * recovery_ms; the store stays open in '*out' (NULL on failure). */
static int timed_open(const char *dir, double *wall_ms, double *store_ms, StoreStats *ss,
                      Store **out) {
    StoreConfig sc;
    bench_config(&sc, dir);
    sc.segment_size = 256 * MIB;
    int64_t t0 = mq_mono_ns();
    int rc = store_open(&sc, out);
    *wall_ms = (double)(mq_mono_ns() - t0) / 1e6;
    if (rc != MQ_OK) {
        *out = NULL;
        *wall_ms = NAN;
        *store_ms = NAN;
        return rc;
    }
    store_stats(*out, ss);
    *store_ms = (double)ss->recovery_ms;
    return MQ_OK;
}

/* recovery_case fills a log in a child, kills it 'delay_ms' after the fill
 * and times store_open.  'steady' is the judged case (the store had time
 * to flush and checkpoint; then the worst case follows on the same log);
 * otherwise the kill lands right after the burst (figure only). */
static void recovery_case(long delay_ms, bool steady) {
    char what[64];
    char worst[64];
    if (steady)
        snprintf(what, sizeof(what), "recover %ld MiB after kill -9", cfg_g.recovery_mb);
    else
        snprintf(what, sizeof(what), "recover %ld MiB, kill -9 mid-burst", cfg_g.recovery_mb);
    snprintf(worst, sizeof(worst), "recover %ld MiB, no checkpoint", cfg_g.recovery_mb);
    double crash_wall = NAN;
    double crash_store = NAN;
    double full_wall = NAN;
    double full_store = NAN;
    char *ckpt = NULL; /* <dir>/checkpoint */
    char *dir = case_dir("recovery");
    int fds[2] = {-1, -1};
    if (!dir || pipe(fds) != 0) {
        fprintf(stderr, "bench: recovery: cannot set up: %s\n", strerror(errno));
        case_errors++;
        goto rows;
    }
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) {
        fprintf(stderr, "bench: recovery: fork: %s\n", strerror(errno));
        case_errors++;
        goto rows;
    }
    if (pid == 0) {
        close(fds[0]);
        signal(SIGINT, SIG_DFL);
        signal(SIGTERM, SIG_DFL);
        recovery_child(dir, fds[1]);
    }
    close(fds[1]);
    fds[1] = -1;
    /* Wait for the fill report, bounded: a stuck child must not hang make. */
    FillReport rep = {0, 0, 0, MQ_ERR_TIMEOUT};
    struct pollfd pfd = {fds[0], POLLIN, 0};
    int64_t give_up = mq_mono_ns() + 120 * (int64_t)1000000000;
    bool got = false;
    while (!bench_interrupted && mq_mono_ns() < give_up) {
        int pr = poll(&pfd, 1, 200);
        if (pr > 0) {
            got = read(fds[0], &rep, sizeof(rep)) == (ssize_t)sizeof(rep);
            break;
        }
        if (pr < 0 && errno != EINTR) break;
    }
    /* Let the store reach its steady state (log flushed, queues dispatched,
     * checkpoint written) with the trickle running, then crash it. */
    if (got && rep.err == MQ_OK) bench_sleep_ms(delay_ms);
    kill(pid, SIGKILL);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (!got || rep.err != MQ_OK) {
        fprintf(stderr, "bench: recovery: child did not fill the log (%s)\n",
                got ? mq_strerror(rep.err) : "no report");
        case_errors++;
        goto rows;
    }
    printf("  recovery fill      %10ju appends, %.0f MB in %5.2f s (%.0f MB/s, 2 threads, "
           "1 KiB); killed %ld ms later\n",
           (uintmax_t)rep.count, (double)rep.bytes / MB, (double)rep.elapsed_ns / 1e9,
           (double)rep.bytes / MB / ((double)rep.elapsed_ns / 1e9), delay_ms);
    if (asprintf(&ckpt, "%s/checkpoint", dir) < 0) ckpt = NULL;
    Checkpoint ck = {0};
    bool have_ck = ckpt && ckpt_read(ckpt, &ck) == MQ_OK;

    /* a. A normal crash: abort file present, checkpoint as the child left it. */
    Store *st = NULL;
    StoreStats ss;
    int rc = timed_open(dir, &crash_wall, &crash_store, &ss, &st);
    if (rc != MQ_OK) {
        fprintf(stderr, "bench: recovery: store_open after kill -9: %s\n", mq_strerror(rc));
        case_errors++;
        goto rows;
    }
    printf("  after kill -9:      log end %.0f MB in %ju segments, crash seen %s; "
           "checkpoint left at %.0f MB (queues), %.0f MB (log flushed)\n",
           (double)ss.write_offset / MB, (uintmax_t)ss.segment_count,
           ss.recovered_from_crash ? "yes" : "NO", have_ck ? (double)ck.cq_flushed / MB : NAN,
           have_ck ? (double)ck.log_flushed / MB : NAN);
    store_close(st);
    if (!steady) goto rows;

    /* b. Worst case: no checkpoint, abort file present: scan and re-dispatch
     *    the whole log. */
    char *abort_path = NULL;
    if (asprintf(&abort_path, "%s/abort", dir) < 0) abort_path = NULL;
    int afd = abort_path ? open(abort_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644) : -1;
    bool ok = ckpt && unlink(ckpt) == 0 && afd >= 0 && write(afd, "bench", 5) == 5;
    if (afd >= 0) close(afd);
    free(abort_path);
    if (!ok) {
        fprintf(stderr, "bench: recovery: cannot reset checkpoint/abort: %s\n", strerror(errno));
        case_errors++;
        goto rows;
    }
    rc = timed_open(dir, &full_wall, &full_store, &ss, &st);
    if (rc != MQ_OK) {
        fprintf(stderr, "bench: recovery: store_open without checkpoint: %s\n",
                mq_strerror(rc));
        case_errors++;
        goto rows;
    }
    store_close(st);
rows:
    free(ckpt);
    if (fds[0] >= 0) close(fds[0]);
    if (fds[1] >= 0) close(fds[1]);
    drop_dir(dir);
    recovery_rows(crash_wall, crash_store, what, steady);
    if (steady) recovery_rows(full_wall, full_store, worst, false);
}

/* ======================================================================
 * main
 * ====================================================================== */

static int setup(void) {
    cfg_g.secs = bench_env_num("BENCH_SECS", 2, 0.05, 600);
    cfg_g.sync_secs = bench_env_num("BENCH_SYNC_SECS", 3, 0.05, 600);
    cfg_g.seq_mb = (long)bench_env_num("BENCH_SEQ_MB", 1024, 1, 1 << 20);
    cfg_g.sync_threads = (int)bench_env_num("BENCH_SYNC_THREADS", 64, 1, 4096);
    cfg_g.sync_drivers = (int)bench_env_num("BENCH_SYNC_DRIVERS", 2, 1, 64);
    cfg_g.recovery_mb = (long)bench_env_num("BENCH_RECOVERY_MB", 1024, 1, 1 << 20);
    cfg_g.kill_delay_ms = (long)bench_env_num("BENCH_KILL_DELAY_MS", 2000, 0, 600000);
    if (bench_scratch_root(cfg_g.root, sizeof(cfg_g.root), "petrel-bench") != 0) return -1;
    bench_catch_signals();
    return 0;
}

/* BENCH_ONLY="sync,recovery" runs only those groups (bench_wanted); the
 * ceilings always run. */
int main(void) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (!getenv("BENCH_LOG")) mq_log_level = MQ_LOG_ERROR; /* BENCH_LOG=1: store's log too */
    if (setup() != 0) return 1;
    install_counting_io();
    int64_t t0 = mq_mono_ns();
    print_header();

    printf("ceilings...\n");
    ceiling_seq_write();
    if (!bench_interrupted) ceiling_memcpy();
    if (!bench_interrupted) ceiling_fdatasync();

    /* The sync case runs right after the ceilings: the async cases leave
     * gigabytes of deleted files whose discards and writeback would
     * otherwise slow the fdatasyncs it is compared with. */
    if (bench_wanted("sync")) {
        printf("sync flush (group commit)...\n");
        if (!bench_interrupted) sync_case();
    }
    const size_t sizes[3] = {100, 1024, 16384};
    if (bench_wanted("async")) {
        printf("async appends (flush every 500 ms, 1 GiB segments)...\n");
        for (int s = 0; s < 3 && !bench_interrupted; s++)
            for (int t = 1; t <= 2 && !bench_interrupted; t++) async_case(sizes[s], t);
    }
    if (bench_wanted("recovery")) {
        printf("recovery (256 MiB segments)...\n");
        if (!bench_interrupted) recovery_case(cfg_g.kill_delay_ms, true);
        if (!bench_interrupted) recovery_case(0, false);
    }

    mq_rmtree(cfg_g.root);
    return bench_report(t0, case_errors);
}
