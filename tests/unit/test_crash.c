/*
 * test_crash.c - kill -9 under SYNC_FLUSH load.  A child process appends
 * from many threads, each waiting for its sync-flush acknowledgement and
 * reporting it to the parent through a pipe; the parent kills the child at
 * a random moment, reopens the store and checks that every acknowledged
 * message is there, intact, exactly once, at the position it was given.
 * Several rounds run on the same data directory.
 */
#define _GNU_SOURCE
#include "testutil.h"

#include <errno.h>
#include <pthread.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "store.h"

enum { THREADS = 12, ROUNDS = 4, MAX_ACKS = 2000000 };

typedef struct Ack {
    uint32_t tid;
    uint32_t seq;
    uint64_t phys_off;
    uint64_t queue_off;
    uint32_t size;
    uint32_t pad;
} Ack;

static void make_cfg(StoreConfig *cfg, const char *dir) {
    store_config_defaults(cfg, dir);
    cfg->segment_size = 256 * 1024;
    cfg->cq_file_entries = 512;
    cfg->index_slots = 64;
    cfg->index_entries = 4096;
    cfg->flush_interval_ms = 50;
    cfg->flush_cq_interval_ms = 30;
    cfg->sync_flush_timeout_ms = 5000;
    cfg->sync_flush = true; /* SYNC_FLUSH: records are written with pwrite */
}

static size_t body_for(uint32_t tid, uint32_t seq, char *buf) {
    int n = sprintf(buf, "t%u-s%u-", tid, seq);
    size_t len = (size_t)n + (seq * 7 + tid) % 300;
    for (size_t i = (size_t)n; i < len; i++) buf[i] = (char)('a' + (i + seq) % 26);
    return len;
}

/* ---- child ---------------------------------------------------------------*/

typedef struct Producer {
    Store *st;
    uint32_t tid;
    uint32_t first_seq;
    int fd;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int status;   /* 1 = waiting, else the callback's status */
    Ack pending;
} Producer;

static void on_flushed(void *arg, int status) {
    Producer *p = arg;
    if (status == MQ_OK) {
        Ack a = p->pending;
        ssize_t w = write(p->fd, &a, sizeof(a)); /* one atomic pipe write: < PIPE_BUF */
        if (w != (ssize_t)sizeof(a)) _exit(3);
    }
    pthread_mutex_lock(&p->lock);
    p->status = status;
    pthread_cond_signal(&p->cond);
    pthread_mutex_unlock(&p->lock);
}

static void *producer_main(void *arg) {
    Producer *p = arg;
    char topic[] = "crash";
    char body[512];
    char props[64];
    for (uint32_t seq = p->first_seq;; seq++) {
        size_t len = body_for(p->tid, seq, body);
        int plen = snprintf(props, sizeof(props), "KEYS\001k%u-%u\002", p->tid, seq);
        ClMessage m = {.topic = mq_slice(topic, 5), .queue_id = p->tid,
                       .body = mq_slice(body, len), .props = mq_slice(props, (size_t)plen)};
        ClAppendResult r;
        if (store_put(p->st, &m, 1, &r) != MQ_OK) _exit(4);
        p->pending = (Ack){p->tid, seq, r.phys_off, r.queue_off, r.size, 0};
        ClFlushWaiter w;
        pthread_mutex_lock(&p->lock);
        p->status = 1;
        pthread_mutex_unlock(&p->lock);
        int rc = store_wait_flush(p->st, &w, r.phys_off + r.size, on_flushed, p);
        if (rc == 0) {
            on_flushed(p, MQ_OK);
        } else if (rc != 1) {
            _exit(5);
        }
        pthread_mutex_lock(&p->lock);
        while (p->status == 1) pthread_cond_wait(&p->cond, &p->lock);
        int st = p->status;
        pthread_mutex_unlock(&p->lock);
        if (st != MQ_OK) _exit(6);
    }
    return NULL;
}

static void child(const char *dir, int fd, const uint32_t *next_seq) {
    StoreConfig cfg;
    make_cfg(&cfg, dir);
    Store *st = NULL;
    if (store_open(&cfg, &st) != MQ_OK) _exit(2);
    Producer p[THREADS];
    pthread_t t[THREADS];
    for (uint32_t i = 0; i < THREADS; i++) {
        p[i] = (Producer){.st = st, .tid = i, .first_seq = next_seq[i], .fd = fd};
        pthread_mutex_init(&p[i].lock, NULL);
        pthread_cond_init(&p[i].cond, NULL);
        pthread_create(&t[i], NULL, producer_main, &p[i]);
    }
    pause(); /* until SIGKILL */
    _exit(0);
}

/* ---- parent --------------------------------------------------------------*/

static void verify(const char *dir, const Ack *acks, size_t nacks, uint32_t *next_seq) {
    StoreConfig cfg;
    make_cfg(&cfg, dir);
    Store *st = NULL;
    assert_int_equal(store_open(&cfg, &st), MQ_OK);
    StoreStats ss;
    store_stats(st, &ss);
    assert_true(ss.recovered_from_crash);
    MqSlice topic = mq_slice("crash", 5);
    /* Every acknowledged message is where it was acknowledged, intact. */
    for (size_t i = 0; i < nacks; i++) {
        const Ack *a = &acks[i];
        ClRecord rec;
        MappedFile *ref = NULL;
        assert_int_equal(store_read_msg(st, a->phys_off, &rec, &ref), MQ_OK);
        char body[512];
        size_t len = body_for(a->tid, a->seq, body);
        assert_int_equal(rec.body.len, len);
        assert_memory_equal(rec.body.ptr, body, len);
        assert_int_equal(rec.queue_id, a->tid);
        assert_true(rec.queue_off == a->queue_off);
        assert_int_equal(rec.total_size, a->size);
        mf_unref(&ref);
        CqEntry e;
        uint64_t qoff;
        size_t n = 0;
        uint64_t next = 0;
        assert_int_equal(store_read_queue(st, topic, a->tid, a->queue_off, 1, 1, NULL, 0, &e,
                                          &qoff, &n, &next),
                         MQ_OK);
        if (n != 1) {
            uint64_t mn, mx;
            store_queue_range(st, topic, a->tid, &mn, &mx);
            print_message("missing queue entry: tid %u seq %u qoff %ju phys %ju: range [%ju,%ju) next %ju\n",
                          a->tid, a->seq, (uintmax_t)a->queue_off, (uintmax_t)a->phys_off,
                          (uintmax_t)mn, (uintmax_t)mx, (uintmax_t)next);
        }
        assert_int_equal(n, 1);
        assert_true(qoff == a->queue_off && e.phys_off == a->phys_off && e.size == a->size);
    }
    /* Each queue holds its producer's messages in order, each exactly once,
     * every entry pointing at a valid record. */
    for (uint32_t q = 0; q < THREADS; q++) {
        uint64_t min = 0;
        uint64_t max = 0;
        store_queue_range(st, topic, q, &min, &max);
        assert_true(min == 0);
        for (uint64_t off = 0; off < max; off++) {
            CqEntry e;
            uint64_t qoff;
            size_t n = 0;
            uint64_t next;
            assert_int_equal(store_read_queue(st, topic, q, off, 1, 1, NULL, 0, &e, &qoff, &n,
                                              &next),
                             MQ_OK);
            assert_int_equal(n, 1);
            ClRecord rec;
            MappedFile *ref = NULL;
            assert_int_equal(store_read_msg(st, e.phys_off, &rec, &ref), MQ_OK);
            char want[512];
            size_t len = body_for(q, (uint32_t)off, want);
            assert_int_equal(rec.body.len, len);
            assert_memory_equal(rec.body.ptr, want, len);
            mf_unref(&ref);
        }
        next_seq[q] = (uint32_t)max; /* the next round continues the sequence */
    }
    /* A key lookup finds an acknowledged message through the index. */
    if (nacks) {
        const Ack *a = &acks[nacks / 2];
        char key[32];
        int klen = snprintf(key, sizeof(key), "k%u-%u", a->tid, a->seq);
        uint64_t offs[4];
        size_t n = 0;
        assert_int_equal(store_query_key(st, topic, mq_slice(key, (size_t)klen), 0, INT64_MAX,
                                         4, offs, &n),
                         MQ_OK);
        assert_int_equal(n, 1);
        assert_true(offs[0] == a->phys_off);
    }
    store_close(st);
}

static void test_crash_kill9_under_sync_flush_keeps_every_acked_message(void **state) {
    (void)state;
    char *dir = tu_mkdtemp("crash");
    Ack *acks = malloc(MAX_ACKS * sizeof(*acks));
    size_t nacks = 0;
    uint32_t next_seq[THREADS] = {0};
    unsigned seed = (unsigned)time(NULL) ^ (unsigned)getpid();
    if (getenv("CRASH_SEED")) seed = (unsigned)strtoul(getenv("CRASH_SEED"), NULL, 10);
    print_message("crash seed %u (set CRASH_SEED to replay)\n", seed);
    srand(seed);
    for (int round = 0; round < ROUNDS; round++) {
        int fds[2];
        assert_int_equal(pipe(fds), 0);
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
            close(fds[0]);
            child(dir, fds[1], next_seq);
        }
        close(fds[1]);
        /* Read acknowledgements while the child runs (a full pipe would
         * stall it), then kill it at the chosen moment and drain the rest. */
        int delay_ms = 100 + rand() % 600;
        /* The random moment is counted from the first acknowledgement, so
         * that a slow start on a loaded machine still kills under load. */
        int64_t deadline = mq_mono_ms() + 20000;
        bool started = false;
        size_t before = nacks;
        bool killed = false;
        for (;;) {
            if (!started && nacks > before) {
                started = true;
                deadline = mq_mono_ms() + delay_ms;
            }
            int64_t left = deadline - mq_mono_ms();
            if (!killed && left <= 0) {
                kill(pid, SIGKILL);
                killed = true;
            }
            struct pollfd pfd = {.fd = fds[0], .events = POLLIN};
            int pr = poll(&pfd, 1, killed ? 1000 : (int)left);
            if (pr < 0 && errno == EINTR) continue;
            if (pr == 0) continue;
            ssize_t n = read(fds[0], &acks[nacks], sizeof(Ack));
            if (n == 0) break;
            if (n < 0 && errno == EINTR) continue;
            assert_int_equal(n, sizeof(Ack));
            if (nacks + 1 < MAX_ACKS) nacks++;
        }
        close(fds[0]);
        int status = 0;
        assert_int_equal(waitpid(pid, &status, 0), pid);
        assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
        print_message("round %d: killed %d ms after the first ack, %zu acknowledged\n", round,
                      delay_ms, nacks - before);
        assert_true(nacks > before); /* the load really ran */
        verify(dir, acks, nacks, next_seq);
    }
    free(acks);
    tu_rmtree(dir);
    free(dir);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_crash_kill9_under_sync_flush_keeps_every_acked_message),
    };
    return cmocka_run_group_tests_name("crash", tests, NULL, NULL);
}
