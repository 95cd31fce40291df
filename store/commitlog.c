/*
 * commitlog.c - the append-only commit log (see commitlog.h and FORMAT.md
 * "Commit log").
 *
 * Owns: the segment array, the append position, the queue offset table,
 * the flusher thread (fdatasync, group commit, callbacks of the waiters a
 * sync satisfied) and the completer thread (waiters that time out or whose
 * flush failed).  Calls: mfile.c, crc32c.c, io.c.
 *
 * Locks, never nested except as listed:
 *   append_lock  reservation + copy + queue offsets (may take seg_lock)
 *   seg_lock     the segment array (short; readers take refs under it)
 *   flush_lock   the flusher's wake-up flag and what it waits for
 *   wait_lock    the list of sync-flush waiters (callbacks run without it)
 */
#define _GNU_SOURCE
#include "commitlog.h"

#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "crc32c.h"
#include "io.h"

/* ======================================================================
 * Record codec
 * ====================================================================== */

enum {
    OFF_TOTAL = 0,
    OFF_MAGIC = 4,
    OFF_BODY_CRC = 8,
    OFF_QUEUE_ID = 12,
    OFF_FLAG = 16,
    OFF_QUEUE_OFF = 20,
    OFF_PHYS_OFF = 28,
    OFF_SYSFLAG = 36,
    OFF_BORN_TS = 40,
    OFF_BORN_HOST = 48,
    OFF_STORE_TS = 56,
    OFF_STORE_HOST = 64,
    OFF_RECONSUME = 72,
    OFF_PREPARED = 76,
    OFF_BODY_LEN = 84,
    OFF_BODY = 88,
};
_Static_assert(OFF_BODY + 1 + 2 + 4 == CL_FIXED_SIZE, "fixed part of a record");

/* record_crc covers every byte of the record but the body (body_crc covers
 * it: hashing it twice would double the cost of large bodies) and the
 * trailing CRC itself. */
static uint32_t record_crc(const uint8_t *rec, size_t total, size_t body_len) {
    uint32_t c = mq_crc32c(rec, OFF_BODY);
    size_t tail = OFF_BODY + body_len;
    return mq_crc32c_extend(c, rec + tail, total - 4 - tail);
}

size_t cl_record_size(const ClMessage *m) {
    if (m->topic.len == 0 || m->topic.len > CL_TOPIC_MAX) return 0;
    if (m->props.len > CL_PROPS_MAX) return 0;
    if (m->body.len > UINT32_MAX - CL_FIXED_SIZE - CL_TOPIC_MAX - CL_PROPS_MAX) return 0;
    return CL_FIXED_SIZE + m->body.len + m->topic.len + m->props.len;
}

void cl_encode(uint8_t *dst, size_t size, const ClMessage *m, uint64_t phys_off,
               uint64_t queue_off, int64_t store_ts, const uint8_t store_host[8]) {
    MQ_ASSERT(size == cl_record_size(m));
    mq_put_u32(dst + OFF_TOTAL, (uint32_t)size);
    mq_put_u32(dst + OFF_MAGIC, CL_MAGIC);
    mq_put_u32(dst + OFF_BODY_CRC, mq_crc32c(m->body.ptr, m->body.len));
    mq_put_u32(dst + OFF_QUEUE_ID, m->queue_id);
    mq_put_u32(dst + OFF_FLAG, m->flag);
    mq_put_u64(dst + OFF_QUEUE_OFF, queue_off);
    mq_put_u64(dst + OFF_PHYS_OFF, phys_off);
    mq_put_u32(dst + OFF_SYSFLAG, m->sysflag);
    mq_put_u64(dst + OFF_BORN_TS, (uint64_t)m->born_ts);
    memcpy(dst + OFF_BORN_HOST, m->born_host, 8);
    mq_put_u64(dst + OFF_STORE_TS, (uint64_t)store_ts);
    memcpy(dst + OFF_STORE_HOST, store_host, 8);
    mq_put_u32(dst + OFF_RECONSUME, m->reconsume_times);
    mq_put_u64(dst + OFF_PREPARED, m->prepared_tx_off);
    mq_put_u32(dst + OFF_BODY_LEN, (uint32_t)m->body.len);
    uint8_t *p = dst + OFF_BODY;
    if (m->body.len) memcpy(p, m->body.ptr, m->body.len);
    p += m->body.len;
    *p++ = (uint8_t)m->topic.len;
    memcpy(p, m->topic.ptr, m->topic.len);
    p += m->topic.len;
    mq_put_u16(p, (uint16_t)m->props.len);
    p += 2;
    if (m->props.len) memcpy(p, m->props.ptr, m->props.len);
    p += m->props.len;
    mq_put_u32(p, record_crc(dst, size, m->body.len));
    MQ_ASSERT((size_t)(p + 4 - dst) == size);
}

ClRecKind cl_decode(const uint8_t *p, size_t avail, bool verify_crc, ClRecord *out) {
    if (avail < CL_BLANK_MIN) return CL_REC_BAD;
    uint32_t total = mq_get_u32(p + OFF_TOTAL);
    uint32_t magic = mq_get_u32(p + OFF_MAGIC);
    if (magic == CL_BLANK_MAGIC) return total == avail ? CL_REC_BLANK : CL_REC_BAD;
    if (magic != CL_MAGIC) return (total == 0 && magic == 0) ? CL_REC_EMPTY : CL_REC_BAD;
    if (total < CL_FIXED_SIZE + 1 || total > avail) return CL_REC_BAD;
    uint32_t body_len = mq_get_u32(p + OFF_BODY_LEN);
    if (body_len > total - CL_FIXED_SIZE - 1) return CL_REC_BAD;
    size_t pos = OFF_BODY + body_len;
    uint8_t topic_len = p[pos];
    if (topic_len == 0 || pos + 1 + topic_len + 2 > total - 4) return CL_REC_BAD;
    size_t topic_pos = pos + 1;
    pos = topic_pos + topic_len;
    uint16_t props_len = mq_get_u16(p + pos);
    size_t props_pos = pos + 2;
    if (props_pos + props_len + 4 != total) return CL_REC_BAD;
    if (verify_crc) {
        if (mq_get_u32(p + total - 4) != record_crc(p, total, body_len)) return CL_REC_BAD;
        if (mq_get_u32(p + OFF_BODY_CRC) != mq_crc32c(p + OFF_BODY, body_len)) return CL_REC_BAD;
    }
    if (out) {
        out->total_size = total;
        out->body_crc = mq_get_u32(p + OFF_BODY_CRC);
        out->queue_id = mq_get_u32(p + OFF_QUEUE_ID);
        out->flag = mq_get_u32(p + OFF_FLAG);
        out->queue_off = mq_get_u64(p + OFF_QUEUE_OFF);
        out->phys_off = mq_get_u64(p + OFF_PHYS_OFF);
        out->sysflag = mq_get_u32(p + OFF_SYSFLAG);
        out->born_ts = (int64_t)mq_get_u64(p + OFF_BORN_TS);
        memcpy(out->born_host, p + OFF_BORN_HOST, 8);
        out->store_ts = (int64_t)mq_get_u64(p + OFF_STORE_TS);
        memcpy(out->store_host, p + OFF_STORE_HOST, 8);
        out->reconsume_times = mq_get_u32(p + OFF_RECONSUME);
        out->prepared_tx_off = mq_get_u64(p + OFF_PREPARED);
        out->body = mq_slice(p + OFF_BODY, body_len);
        out->topic = mq_slice(p + topic_pos, topic_len);
        out->props = mq_slice(p + props_pos, props_len);
    }
    return CL_REC_OK;
}

bool cl_prop_find(MqSlice props, const char *key, MqSlice *val) {
    const char *p = props.ptr;
    const char *end = p + props.len;
    size_t klen = strlen(key);
    while (p < end) {
        const char *sep = memchr(p, 1, (size_t)(end - p));
        if (!sep) return false;
        const char *vend = memchr(sep + 1, 2, (size_t)(end - sep - 1));
        if (!vend) vend = end;
        if ((size_t)(sep - p) == klen && memcmp(p, key, klen) == 0) {
            *val = mq_slice(sep + 1, (size_t)(vend - sep - 1));
            return true;
        }
        p = vend + 1;
    }
    return false;
}

/* ======================================================================
 * Queue offset table: (topic, queue id) -> next queue offset.
 * Chained hash, guarded by append_lock.
 * ====================================================================== */

typedef struct QoEntry {
    struct QoEntry *next;
    uint64_t hash;
    uint32_t queue_id;
    uint64_t next_off; /* next queue offset to assign */
    uint8_t topic_len;
    char topic[];
} QoEntry;

typedef struct QoTable {
    QoEntry **buckets;
    size_t nbuckets; /* power of two */
    size_t count;
} QoTable;

static uint64_t qo_hash(MqSlice topic, uint32_t queue_id) {
    uint64_t h = mq_hash64(topic.ptr, topic.len);
    return (h ^ queue_id) * 0x9E3779B97F4A7C15ULL;
}

static QoEntry *qo_find(QoTable *t, MqSlice topic, uint32_t queue_id, uint64_t h) {
    if (!t->nbuckets) return NULL;
    for (QoEntry *e = t->buckets[h & (t->nbuckets - 1)]; e; e = e->next) {
        if (e->hash == h && e->queue_id == queue_id && e->topic_len == topic.len &&
            memcmp(e->topic, topic.ptr, topic.len) == 0)
            return e;
    }
    return NULL;
}

static int qo_grow(QoTable *t) {
    size_t n = t->nbuckets ? t->nbuckets * 2 : 256;
    QoEntry **b = calloc(n, sizeof(*b));
    if (!b) return MQ_ERR_NOMEM;
    for (size_t i = 0; i < t->nbuckets; i++) {
        QoEntry *e = t->buckets[i];
        while (e) {
            QoEntry *next = e->next;
            e->next = b[e->hash & (n - 1)];
            b[e->hash & (n - 1)] = e;
            e = next;
        }
    }
    free(t->buckets);
    t->buckets = b;
    t->nbuckets = n;
    return MQ_OK;
}

/* qo_get returns the entry for (topic, queue_id), adding it at 0. */
static QoEntry *qo_get(QoTable *t, MqSlice topic, uint32_t queue_id) {
    uint64_t h = qo_hash(topic, queue_id);
    QoEntry *e = qo_find(t, topic, queue_id, h);
    if (e) return e;
    if (t->count >= t->nbuckets && qo_grow(t) != MQ_OK) return NULL;
    e = calloc(1, sizeof(*e) + topic.len);
    if (!e) return NULL;
    e->hash = h;
    e->queue_id = queue_id;
    e->topic_len = (uint8_t)topic.len;
    memcpy(e->topic, topic.ptr, topic.len);
    e->next = t->buckets[h & (t->nbuckets - 1)];
    t->buckets[h & (t->nbuckets - 1)] = e;
    t->count++;
    return e;
}

static void qo_remove_topic(QoTable *t, MqSlice topic) {
    for (size_t i = 0; i < t->nbuckets; i++) {
        QoEntry **pp = &t->buckets[i];
        while (*pp) {
            QoEntry *e = *pp;
            if (e->topic_len == topic.len && memcmp(e->topic, topic.ptr, topic.len) == 0) {
                *pp = e->next;
                free(e);
                t->count--;
            } else {
                pp = &e->next;
            }
        }
    }
}

static void qo_free(QoTable *t) {
    for (size_t i = 0; i < t->nbuckets; i++) {
        QoEntry *e = t->buckets[i];
        while (e) {
            QoEntry *next = e->next;
            free(e);
            e = next;
        }
    }
    free(t->buckets);
    memset(t, 0, sizeof(*t));
}

/* ======================================================================
 * The log
 * ====================================================================== */

struct CommitLog {
    ClConfig cfg;
    char *dir;

    pthread_mutex_t seg_lock;
    MappedFile **segs;     /* oldest first, contiguous bases */
    MappedFile *newest;    /* borrowed from segs: the newest segment, NULL if none;
                            * changes only under append_lock (or at open), so an
                            * appender reads it without seg_lock */
    size_t nsegs;
    size_t segs_cap;

    pthread_mutex_t append_lock;
    uint64_t write_pos;    /* atomic: end of the last complete record */
    uint64_t min_off;      /* atomic: base of the oldest segment */
    int refusal;           /* atomic: MQ_OK, MQ_ERR_FULL or MQ_ERR_RDONLY */
    QoTable qo;            /* under append_lock */
    MappedFile *prepared;  /* under append_lock: the segment after 'newest', made
                            * ahead of time by the flusher thread, or NULL */
    bool recovered;        /* atomic: cl_recover has run; segments may be prepared */
    uint8_t *scratch;      /* under append_lock: records encoded for pwrite */
    size_t scratch_cap;    /* bytes */

    uint64_t flushed;      /* atomic: durable below */
    MqHist flush_hist;     /* duration of each flush that synced bytes */
    pthread_mutex_t flush_lock;
    pthread_cond_t flush_cond;
    bool flush_requested;  /* under flush_lock */
    int flusher_wants;     /* under flush_lock: 0 = busy syncing (no wake-up
                            * needed: it looks at flush_requested next), -1 =
                            * asleep (wake on any request), n > 0 = gathering
                            * (wake when n waiters are pending) */
    int pending;           /* atomic: sync waiters queued and not yet completed */
    bool stopping;         /* under flush_lock (flusher) and wait_lock (completer) */
    pthread_t flusher;

    pthread_mutex_t wait_lock;
    pthread_cond_t wait_cond;
    ClFlushWaiter waiters; /* sentinel of a circular list, registration order */
    bool io_failed;        /* under wait_lock: a flush failed; waiters get MQ_ERR_IO */
    bool flusher_done;     /* under wait_lock */
    pthread_t completer;
    bool threads_started;
};

static int64_t wall_ms(const CommitLog *cl) {
    return cl->cfg.clock ? cl->cfg.clock(cl->cfg.clock_arg) : mq_now_ms();
}

static uint64_t load64(const uint64_t *p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }
static void store64(uint64_t *p, uint64_t v) { __atomic_store_n(p, v, __ATOMIC_RELEASE); }

static void seg_path(const CommitLog *cl, uint64_t base, char *buf, size_t cap) {
    char name[21];
    mf_name_for(base, name);
    snprintf(buf, cap, "%s/%s", cl->dir, name);
}

/* seg_for returns a ref on the segment holding 'off', or NULL. */
static MappedFile *seg_for(CommitLog *cl, uint64_t off) {
    MappedFile *mf = NULL;
    pthread_mutex_lock(&cl->seg_lock);
    if (cl->nsegs) {
        uint64_t first = mf_base(cl->segs[0]);
        if (off >= first) {
            uint64_t idx = (off - first) / cl->cfg.segment_size;
            if (idx < cl->nsegs) {
                mf = cl->segs[idx];
                mf_ref(mf);
            }
        }
    }
    pthread_mutex_unlock(&cl->seg_lock);
    return mf;
}

static int push_seg(CommitLog *cl, MappedFile *mf) {
    pthread_mutex_lock(&cl->seg_lock);
    if (cl->nsegs == cl->segs_cap) {
        size_t cap = cl->segs_cap ? cl->segs_cap * 2 : 16;
        MappedFile **s = realloc(cl->segs, cap * sizeof(*s));
        if (!s) {
            pthread_mutex_unlock(&cl->seg_lock);
            return MQ_ERR_NOMEM;
        }
        cl->segs = s;
        cl->segs_cap = cap;
    }
    MQ_ASSERT(cl->nsegs == 0 ||
              mf_base(cl->segs[cl->nsegs - 1]) + cl->cfg.segment_size == mf_base(mf));
    cl->segs[cl->nsegs++] = mf;
    cl->newest = mf;
    if (cl->nsegs == 1) store64(&cl->min_off, mf_base(mf));
    pthread_mutex_unlock(&cl->seg_lock);
    return MQ_OK;
}

/* new_seg creates and maps the segment starting at 'base' and adds it to
 * the array; '*out' is borrowed (the array holds the ref). */
static int new_seg(CommitLog *cl, uint64_t base, MappedFile **out) {
    MappedFile *mf = NULL;
    int rc = MQ_OK;
    if (cl->prepared && mf_base(cl->prepared) == base) {
        mf = cl->prepared; /* made ahead: no disk work under append_lock */
        cl->prepared = NULL;
    } else {
        char path[4096];
        seg_path(cl, base, path, sizeof(path));
        rc = mf_open(path, base, cl->cfg.segment_size, true, &mf);
        if (rc == MQ_ERR_EXISTS) rc = mf_open(path, base, cl->cfg.segment_size, false, &mf);
        if (rc != MQ_OK) return rc;
    }
    rc = push_seg(cl, mf);
    if (rc != MQ_OK) {
        mf_mark_delete(mf);
        mf_unref(&mf);
        return rc;
    }
    *out = mf;
    return MQ_OK;
}

static int load_segments(CommitLog *cl) {
    uint64_t *bases = NULL;
    size_t n = 0;
    int rc = mf_list(cl->dir, &bases, &n);
    for (size_t i = 0; rc == MQ_OK && i < n; i++) {
        if (bases[i] % cl->cfg.segment_size != 0) {
            MQ_ERROR("segment '%s/%020ju' does not start at a multiple of the segment size %zu",
                     cl->dir, (uintmax_t)bases[i], cl->cfg.segment_size);
            rc = MQ_ERR_CORRUPT;
        }
    }
    for (size_t i = 0; rc == MQ_OK && i < n; i++) {
        if (i > 0 && bases[i] != bases[i - 1] + cl->cfg.segment_size) {
            MQ_ERROR("commit log in '%s' has a gap before segment %020ju", cl->dir,
                     (uintmax_t)bases[i]);
            rc = MQ_ERR_CORRUPT;
            break;
        }
        char path[4096];
        seg_path(cl, bases[i], path, sizeof(path));
        MappedFile *mf = NULL;
        rc = mf_open(path, bases[i], cl->cfg.segment_size, false, &mf);
        if (rc == MQ_OK) rc = push_seg(cl, mf);
    }
    free(bases);
    return rc;
}

/* ---- flusher and completer threads ------------------------------------ */

/* advance_flushed raises the flushed offset to 'to', never lowering it:
 * the flusher and cl_flush_now callers may finish out of order. */
static void advance_flushed(CommitLog *cl, uint64_t to) {
    uint64_t cur = load64(&cl->flushed);
    while (cur < to && !__atomic_compare_exchange_n(&cl->flushed, &cur, to, true,
                                                    __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
    }
}

/* flush_to syncs every segment holding bytes in [flushed, target), moving
 * the flushed offset after each one (a checkpoint taken meanwhile can
 * already count the synced segments). */
static int flush_to(CommitLog *cl, uint64_t target) {
    uint64_t from = load64(&cl->flushed);
    if (target <= from) return MQ_OK;
    int64_t t0 = mq_mono_ns();
    uint64_t seg = cl->cfg.segment_size;
    uint64_t first = from / seg * seg;
    for (uint64_t base = first; base < target; base += seg) {
        MappedFile *mf = seg_for(cl, base);
        if (mf) { /* else deleted by retention: nothing left to sync */
            int rc = mf_sync(mf);
            mf_unref(&mf);
            if (rc != MQ_OK) return rc;
        }
        advance_flushed(cl, base + seg < target ? base + seg : target);
    }
    mq_hist_observe(&cl->flush_hist, mq_mono_ns() - t0);
    return MQ_OK;
}

static void flush_failed(CommitLog *cl) {
    /* fsync errors cannot be retried safely: the kernel may have dropped the
     * dirty pages.  The log stops accepting writes until restart, when
     * recovery checks every record past the checkpoint. */
    __atomic_store_n(&cl->refusal, MQ_ERR_RDONLY, __ATOMIC_RELEASE);
    MQ_ERROR("commit log flush failed: store is read-only until restart");
    pthread_mutex_lock(&cl->wait_lock);
    cl->io_failed = true;
    pthread_cond_signal(&cl->wait_cond);
    pthread_mutex_unlock(&cl->wait_lock);
}

static ClFlushWaiter *take_finished(CommitLog *cl, int64_t *next_deadline);
static void run_finished(ClFlushWaiter *ready);

/* prepare_next makes the segment after the newest one ahead of time
 * (fallocate, map, directory fsync), so that rolling over never does disk
 * work while appenders wait on append_lock.  Flusher thread, no lock held
 * while it touches the disk. */
/* next_base is where the next segment starts: after the newest, or, for an
 * empty log, the segment holding the write position.  append_lock held. */
static uint64_t next_base(const CommitLog *cl) {
    uint64_t seg = cl->cfg.segment_size;
    return cl->newest ? mf_base(cl->newest) + seg : load64(&cl->write_pos) / seg * seg;
}

static void prepare_next(CommitLog *cl) {
    if (!__atomic_load_n(&cl->recovered, __ATOMIC_ACQUIRE)) return;
    uint64_t seg = cl->cfg.segment_size;
    pthread_mutex_lock(&cl->append_lock);
    /* An empty log gets its first segment here too (cl_recover calls this
     * once for it): its first append then does no disk work either. */
    bool need = !cl->prepared && __atomic_load_n(&cl->refusal, __ATOMIC_ACQUIRE) == MQ_OK;
    uint64_t base = need ? next_base(cl) : 0;
    pthread_mutex_unlock(&cl->append_lock);
    if (!need) return;
    char path[4096];
    seg_path(cl, base, path, sizeof(path));
    MappedFile *mf = NULL;
    if (mf_open(path, base, seg, true, &mf) != MQ_OK) return; /* the roll will try itself */
    pthread_mutex_lock(&cl->append_lock);
    if (next_base(cl) == base && !cl->prepared) {
        cl->prepared = mf;
        mf = NULL;
    } else {
        /* Not needed after all: the log rolled meanwhile (the appender mapped
         * the same file itself: keep it) or was cut back (the file is extra:
         * delete it, still under append_lock so that no roll can take it). */
        bool in_use = false;
        pthread_mutex_lock(&cl->seg_lock);
        for (size_t i = 0; i < cl->nsegs; i++) in_use |= mf_base(cl->segs[i]) == base;
        pthread_mutex_unlock(&cl->seg_lock);
        if (!in_use) mf_mark_delete(mf);
    }
    pthread_mutex_unlock(&cl->append_lock);
    mf_unref(&mf);
}

static void *flusher_main(void *arg) {
    CommitLog *cl = arg;
    int last_batch = 0;       /* waiters queued when the last sync began */
    int64_t last_sync_ns = 0; /* how long it took */
    pthread_mutex_lock(&cl->flush_lock);
    for (;;) {
        if (!cl->flush_requested && !cl->stopping) {
            cl->flusher_wants = -1;
            struct timespec ts;
            clock_gettime(CLOCK_MONOTONIC, &ts);
            uint64_t ns = (uint64_t)ts.tv_nsec + (uint64_t)cl->cfg.flush_interval_ms * 1000000;
            ts.tv_sec += (time_t)(ns / 1000000000);
            ts.tv_nsec = (long)(ns % 1000000000);
            pthread_cond_timedwait(&cl->flush_cond, &cl->flush_lock, &ts);
            cl->flusher_wants = 0;
        }
        /* Group commit: when the last sync served a crowd, give the crowd a
         * moment (at most one sync's duration, 1 ms) to queue again, so that
         * one fdatasync serves most of it instead of a few early comers. */
        if (cl->flush_requested && !cl->stopping && last_batch > 1) {
            int64_t window = last_sync_ns < 1000000 ? last_sync_ns : 1000000;
            int64_t deadline = mq_mono_ns() + window;
            struct timespec ts = {(time_t)(deadline / 1000000000), (long)(deadline % 1000000000)};
            cl->flusher_wants = last_batch;
            while (__atomic_load_n(&cl->pending, __ATOMIC_ACQUIRE) < last_batch &&
                   !cl->stopping) {
                if (pthread_cond_timedwait(&cl->flush_cond, &cl->flush_lock, &ts) == ETIMEDOUT)
                    break;
            }
            cl->flusher_wants = 0;
        }
        bool stop = cl->stopping;
        cl->flush_requested = false;
        pthread_mutex_unlock(&cl->flush_lock);
        int batch = __atomic_load_n(&cl->pending, __ATOMIC_ACQUIRE);
        int64_t t0 = mq_mono_ns();

        bool failed = false;
        pthread_mutex_lock(&cl->wait_lock);
        failed = cl->io_failed;
        pthread_mutex_unlock(&cl->wait_lock);
        if (!failed) {
            prepare_next(cl);
            if (flush_to(cl, load64(&cl->write_pos)) != MQ_OK) {
                flush_failed(cl);
            } else {
                last_batch = batch;
                last_sync_ns = mq_mono_ns() - t0;
                int64_t unused;
                pthread_mutex_lock(&cl->wait_lock);
                ClFlushWaiter *ready = take_finished(cl, &unused);
                pthread_mutex_unlock(&cl->wait_lock);
                run_finished(ready);
            }
        }
        pthread_mutex_lock(&cl->flush_lock);
        if (stop) break;
    }
    pthread_mutex_unlock(&cl->flush_lock);
    pthread_mutex_lock(&cl->wait_lock);
    cl->flusher_done = true;
    pthread_cond_signal(&cl->wait_cond);
    pthread_mutex_unlock(&cl->wait_lock);
    return NULL;
}

static void list_remove(ClFlushWaiter *w) {
    w->prev->next = w->next;
    w->next->prev = w->prev;
    w->prev = w->next = NULL;
}

/* take_finished moves every waiter whose flush is done (or failed, or
 * timed out) out of the list into a private chain (through 'next', status
 * in 'prev') and returns it; '*next_deadline' = earliest remaining
 * deadline.  Caller holds wait_lock. */
static ClFlushWaiter *take_finished(CommitLog *cl, int64_t *next_deadline) {
    ClFlushWaiter *head = &cl->waiters;
    ClFlushWaiter *ready = NULL;
    ClFlushWaiter **tail = &ready;
    int64_t now = mq_mono_ns();
    uint64_t flushed = load64(&cl->flushed);
    *next_deadline = INT64_MAX;
    for (ClFlushWaiter *w = head->next; w != head;) {
        ClFlushWaiter *next = w->next;
        int st;
        if (w->upto <= flushed)
            st = MQ_OK;
        else if (cl->io_failed || cl->flusher_done)
            st = MQ_ERR_IO;
        else if (w->deadline_ns <= now)
            st = MQ_ERR_TIMEOUT;
        else {
            if (w->deadline_ns < *next_deadline) *next_deadline = w->deadline_ns;
            w = next;
            continue;
        }
        list_remove(w);
        __atomic_sub_fetch(&cl->pending, 1, __ATOMIC_RELEASE);
        w->prev = (ClFlushWaiter *)(intptr_t)st; /* status rides in 'prev' */
        *tail = w;
        tail = &w->next;
        w = next;
    }
    *tail = NULL;
    return ready;
}

/* run_finished calls the callbacks of a chain from take_finished, without
 * any lock held. */
static void run_finished(ClFlushWaiter *ready) {
    while (ready) {
        ClFlushWaiter *w = ready;
        ready = w->next;
        int status = (int)(intptr_t)w->prev;
        w->prev = w->next = NULL;
        w->done(w->arg, status); /* 'w' may be freed by the callee */
    }
}

/* The completer fires callbacks whose deadline passed (even while the
 * flusher sits in a slow fdatasync) and those of failed flushes; the
 * flusher fires the successful ones itself, saving a thread hop per sync. */
static void *completer_main(void *arg) {
    CommitLog *cl = arg;
    ClFlushWaiter *head = &cl->waiters;
    pthread_mutex_lock(&cl->wait_lock);
    for (;;) {
        int64_t next_deadline;
        ClFlushWaiter *ready = take_finished(cl, &next_deadline);
        if (ready) {
            pthread_mutex_unlock(&cl->wait_lock);
            run_finished(ready);
            pthread_mutex_lock(&cl->wait_lock);
            continue;
        }
        if (cl->flusher_done && head->next == head) break;
        if (next_deadline == INT64_MAX) {
            pthread_cond_wait(&cl->wait_cond, &cl->wait_lock);
        } else {
            struct timespec ts;
            ts.tv_sec = (time_t)(next_deadline / 1000000000);
            ts.tv_nsec = (long)(next_deadline % 1000000000);
            pthread_cond_timedwait(&cl->wait_cond, &cl->wait_lock, &ts);
        }
    }
    pthread_mutex_unlock(&cl->wait_lock);
    return NULL;
}

int cl_open(const ClConfig *cfg, CommitLog **out) {
    if (!cfg->dir || cfg->segment_size < 4096 || cfg->segment_size % 4096 != 0)
        return MQ_ERR_INVAL;
    CommitLog *cl = calloc(1, sizeof(*cl));
    if (!cl) return MQ_ERR_NOMEM;
    cl->cfg = *cfg;
    if (!cl->cfg.flush_interval_ms) cl->cfg.flush_interval_ms = 500;
    if (!cl->cfg.sync_flush_timeout_ms) cl->cfg.sync_flush_timeout_ms = 5000;
    cl->dir = strdup(cfg->dir);
    cl->cfg.dir = cl->dir;
    pthread_mutex_init(&cl->seg_lock, NULL);
    pthread_mutex_init(&cl->append_lock, NULL);
    pthread_mutex_init(&cl->flush_lock, NULL);
    pthread_mutex_init(&cl->wait_lock, NULL);
    mq_cond_init_mono(&cl->flush_cond);
    mq_cond_init_mono(&cl->wait_cond);
    cl->waiters.next = cl->waiters.prev = &cl->waiters;
    int rc = cl->dir ? mq_mkdirs(cl->dir) : MQ_ERR_NOMEM;
    if (rc == MQ_OK) rc = load_segments(cl);
    if (rc != MQ_OK) goto err_free;
    if (cl->nsegs) {
        uint64_t first = mf_base(cl->segs[0]);
        store64(&cl->write_pos, first);
        store64(&cl->flushed, first);
    }
    if (pthread_create(&cl->flusher, NULL, flusher_main, cl) != 0) {
        rc = MQ_ERR_NOMEM;
        goto err_free;
    }
    if (pthread_create(&cl->completer, NULL, completer_main, cl) != 0) {
        pthread_mutex_lock(&cl->flush_lock);
        cl->stopping = true;
        pthread_cond_signal(&cl->flush_cond);
        pthread_mutex_unlock(&cl->flush_lock);
        pthread_join(cl->flusher, NULL);
        rc = MQ_ERR_NOMEM;
        goto err_free;
    }
    cl->threads_started = true;
    *out = cl;
    return MQ_OK;

err_free:
    cl_close(cl);
    return rc;
}

void cl_close(CommitLog *cl) {
    if (!cl) return;
    if (cl->threads_started) {
        pthread_mutex_lock(&cl->flush_lock);
        cl->stopping = true;
        pthread_cond_signal(&cl->flush_cond);
        pthread_mutex_unlock(&cl->flush_lock);
        pthread_join(cl->flusher, NULL); /* its last round flushes everything */
        pthread_join(cl->completer, NULL);
    }
    if (cl->prepared) { /* never written: leave no empty segment behind */
        mf_mark_delete(cl->prepared);
        mf_unref(&cl->prepared);
    }
    for (size_t i = 0; i < cl->nsegs; i++) mf_unref(&cl->segs[i]);
    free(cl->segs);
    free(cl->scratch);
    qo_free(&cl->qo);
    pthread_mutex_destroy(&cl->seg_lock);
    pthread_mutex_destroy(&cl->append_lock);
    pthread_mutex_destroy(&cl->flush_lock);
    pthread_mutex_destroy(&cl->wait_lock);
    pthread_cond_destroy(&cl->flush_cond);
    pthread_cond_destroy(&cl->wait_cond);
    free(cl->dir);
    free(cl);
}

/* ---- recovery and truncation ------------------------------------------ */

/* cut_at makes 'end' the end of the log: zero the rest of its segment,
 * delete every later segment.  Caller holds append_lock (or is recovery). */
static int cut_at(CommitLog *cl, uint64_t end) {
    uint64_t seg = cl->cfg.segment_size;
    int rc = MQ_OK;
    if (cl->prepared) { /* prepared for an end that no longer holds */
        mf_mark_delete(cl->prepared);
        mf_unref(&cl->prepared);
    }
    pthread_mutex_lock(&cl->seg_lock);
    while (cl->nsegs && mf_base(cl->segs[cl->nsegs - 1]) > end) {
        MappedFile *mf = cl->segs[--cl->nsegs];
        MQ_INFO("deleting commit log segment '%s' past the end of the log", mf_path(mf));
        if (mf_mark_delete(mf) != MQ_OK) rc = MQ_ERR_IO;
        mf_unref(&mf);
    }
    /* A segment starting exactly at 'end' holds nothing valid: keep it (the
     * next append uses it) but wipe it. */
    MappedFile *last = cl->nsegs ? cl->segs[cl->nsegs - 1] : NULL;
    cl->newest = last;
    if (last) mf_ref(last);
    pthread_mutex_unlock(&cl->seg_lock);
    if (last) {
        uint64_t base = mf_base(last);
        if (end >= base && end < base + seg) {
            size_t from = (size_t)(end - base);
            if (mf_zero(last, from, (size_t)seg) != MQ_OK) rc = MQ_ERR_IO;
        }
        mf_unref(&last);
    }
    return rc;
}

int cl_recover(CommitLog *cl, uint64_t from, uint64_t *end) {
    uint64_t seg = cl->cfg.segment_size;
    uint64_t min = load64(&cl->min_off);
    if (cl->nsegs == 0) {
        /* Empty log: start where the checkpoint says (its segments aged out). */
        uint64_t start = from / seg * seg;
        store64(&cl->write_pos, start);
        store64(&cl->flushed, start);
        store64(&cl->min_off, start);
        *end = start;
        __atomic_store_n(&cl->recovered, true, __ATOMIC_RELEASE);
        /* Make the first segment now, on the opening thread: otherwise the
         * first append would create it (on an HTTP worker in the broker). */
        prepare_next(cl);
        return MQ_OK;
    }
    if (from < min) from = min;
    uint64_t pos = from;
    uint64_t scanned = 0;
    for (;;) {
        MappedFile *mf = seg_for(cl, pos);
        if (!mf) break;
        uint64_t base = mf_base(mf);
        size_t in = (size_t)(pos - base);
        if (in >= seg) { /* exactly at a segment's end (cannot happen) */
            mf_unref(&mf);
            break;
        }
        ClRecKind k = cl_decode(mf_data(mf) + in, (size_t)seg - in, true, NULL);
        if (k == CL_REC_OK) {
            uint32_t size = mq_get_u32(mf_data(mf) + in);
            uint64_t rec_phys = mq_get_u64(mf_data(mf) + in + OFF_PHYS_OFF);
            mf_unref(&mf);
            if (rec_phys != pos) {
                MQ_WARN("record at %ju claims offset %ju: end of log", (uintmax_t)pos,
                        (uintmax_t)rec_phys);
                break;
            }
            pos += size;
            scanned++;
        } else if (k == CL_REC_BLANK) {
            mf_unref(&mf);
            pos = base + seg;
        } else {
            if (k == CL_REC_BAD)
                MQ_WARN("torn or corrupt record at commit log offset %ju: truncating",
                        (uintmax_t)pos);
            mf_unref(&mf);
            break;
        }
    }
    /* A blank at the very end points into a segment that was never made. */
    int rc = cut_at(cl, pos);
    if (rc != MQ_OK) return rc;
    store64(&cl->write_pos, pos);
    /* Bytes between 'from' and 'pos' may sit only in the page cache (after
     * kill -9): the flusher's first round makes them durable. */
    store64(&cl->flushed, from < pos ? from : pos);
    MQ_INFO("commit log recovered: %ju records checked from offset %ju, end %ju",
            (uintmax_t)scanned, (uintmax_t)from, (uintmax_t)pos);
    *end = pos;
    __atomic_store_n(&cl->recovered, true, __ATOMIC_RELEASE);
    return MQ_OK;
}

int cl_truncate(CommitLog *cl, uint64_t to) {
    pthread_mutex_lock(&cl->append_lock);
    int rc = MQ_OK;
    uint64_t pos = load64(&cl->write_pos);
    if (to > pos || to < load64(&cl->min_off)) {
        rc = MQ_ERR_INVAL;
    } else {
        rc = cut_at(cl, to);
        if (rc == MQ_OK) {
            store64(&cl->write_pos, to);
            if (load64(&cl->flushed) > to) store64(&cl->flushed, to);
        }
    }
    pthread_mutex_unlock(&cl->append_lock);
    return rc;
}

/* ---- append ----------------------------------------------------------- */

/* write_bytes puts 'len' bytes at offset 'in' of segment 'mf': a copy into
 * the mapping, or a pwrite in write-through mode.  A failed or short
 * pwrite wipes what it may have left, makes the log read-only and returns
 * MQ_ERR_IO.  Holds append_lock. */
static int write_bytes(CommitLog *cl, MappedFile *mf, size_t in, const uint8_t *p, size_t len) {
    if (!cl->cfg.write_through) {
        memcpy(mf_data(mf) + in, p, len);
        return MQ_OK;
    }
    if (mq_write_all(mf_fd(mf), p, len, (off_t)in) == 0) return MQ_OK;
    MQ_ERROR("cannot write %zu bytes to '%s' at %zu: %s: store is read-only until restart",
             len, mf_path(mf), in, strerror(errno));
    memset(mf_data(mf) + in, 0, len); /* whatever part did land */
    __atomic_store_n(&cl->refusal, MQ_ERR_RDONLY, __ATOMIC_RELEASE);
    return MQ_ERR_IO;
}

/* reserve_locked returns the segment (borrowed) with room for 'total'
 * bytes at the write position, writing a blank marker and rolling to a new
 * segment if needed; '*pos' = where to write.  Holds append_lock. */
static int reserve_locked(CommitLog *cl, size_t total, MappedFile **seg_out, uint64_t *pos_out) {
    uint64_t seg = cl->cfg.segment_size;
    uint64_t pos = load64(&cl->write_pos);
    MappedFile *mf = cl->newest;
    if (mf && pos >= mf_base(mf) + seg) mf = NULL; /* full: a new one is needed */
    if (mf) {
        uint64_t base = mf_base(mf);
        MQ_ASSERT(pos >= base);
        size_t left = (size_t)(base + seg - pos);
        if (total + CL_BLANK_MIN <= left) {
            *seg_out = mf; /* borrowed: see 'newest' */
            *pos_out = pos;
            return MQ_OK;
        }
        /* Roll: make the next segment first, so that a failure leaves the log
         * as it was; then fill the rest of this one with a blank marker. */
        MappedFile *next = NULL;
        int rc = new_seg(cl, base + seg, &next);
        if (rc != MQ_OK) return rc;
        uint8_t blank[CL_BLANK_MIN];
        mq_put_u32(blank, (uint32_t)left);
        mq_put_u32(blank + 4, CL_BLANK_MAGIC);
        rc = write_bytes(cl, mf, (size_t)(pos - base), blank, sizeof(blank));
        if (rc != MQ_OK) return rc;
        pos = base + seg;
        *seg_out = next;
        *pos_out = pos;
        return MQ_OK;
    }
    MappedFile *next = NULL;
    uint64_t base = pos / seg * seg;
    int rc = new_seg(cl, base, &next);
    if (rc != MQ_OK) return rc;
    *seg_out = next;
    *pos_out = base;
    return MQ_OK;
}

int cl_append(CommitLog *cl, const ClMessage *msgs, size_t count, ClAppendResult *res) {
    return cl_append_ex(cl, msgs, count, res, true);
}

int cl_append_ex(CommitLog *cl, const ClMessage *msgs, size_t count, ClAppendResult *res,
                 bool notify) {
    if (count == 0) return MQ_ERR_INVAL;
    size_t total = 0;
    for (size_t i = 0; i < count; i++) {
        size_t sz = cl_record_size(&msgs[i]);
        if (sz == 0) return MQ_ERR_INVAL;
        total += sz;
        res[i].size = (uint32_t)sz;
    }
    if (total + CL_BLANK_MIN > cl->cfg.segment_size) return MQ_ERR_INVAL;
    int refusal = __atomic_load_n(&cl->refusal, __ATOMIC_ACQUIRE);
    if (refusal != MQ_OK) return refusal;

    pthread_mutex_lock(&cl->append_lock);
    refusal = __atomic_load_n(&cl->refusal, __ATOMIC_ACQUIRE);
    if (refusal != MQ_OK) {
        pthread_mutex_unlock(&cl->append_lock);
        return refusal;
    }
    MappedFile *mf = NULL;
    uint64_t pos = 0;
    int rc = reserve_locked(cl, total, &mf, &pos);
    if (rc != MQ_OK) {
        pthread_mutex_unlock(&cl->append_lock);
        return rc;
    }
    /* Look every queue up before writing, so that an allocation failure
     * leaves no half-written batch. */
    QoEntry *qe[count > 64 ? 1 : count];
    QoEntry **q = count > 64 ? malloc(count * sizeof(*q)) : qe;
    if (!q) {
        pthread_mutex_unlock(&cl->append_lock);
        return MQ_ERR_NOMEM;
    }
    for (size_t i = 0; i < count; i++) {
        q[i] = qo_get(&cl->qo, msgs[i].topic, msgs[i].queue_id);
        if (!q[i]) {
            if (q != qe) free(q);
            pthread_mutex_unlock(&cl->append_lock);
            return MQ_ERR_NOMEM;
        }
    }
    /* Mapped mode encodes straight into the segment; write-through mode
     * encodes into a scratch buffer and writes it with one pwrite. */
    uint8_t *base = mf_data(mf) + (pos - mf_base(mf));
    if (cl->cfg.write_through) {
        if (cl->scratch_cap < total) {
            uint8_t *b = realloc(cl->scratch, total);
            if (!b) {
                if (q != qe) free(q);
                pthread_mutex_unlock(&cl->append_lock);
                return MQ_ERR_NOMEM;
            }
            cl->scratch = b;
            cl->scratch_cap = total;
        }
        base = cl->scratch;
    }
    int64_t now = wall_ms(cl);
    size_t at = 0;
    for (size_t i = 0; i < count; i++) {
        res[i].phys_off = pos + at;
        res[i].queue_off = q[i]->next_off++;
        res[i].store_ts = now;
        cl_encode(base + at, res[i].size, &msgs[i], res[i].phys_off, res[i].queue_off, now,
                  cl->cfg.store_host);
        at += res[i].size;
    }
    if (cl->cfg.write_through) {
        rc = write_bytes(cl, mf, (size_t)(pos - mf_base(mf)), base, at);
        if (rc != MQ_OK) {
            for (size_t i = count; i-- > 0;) q[i]->next_off--; /* nothing was appended */
            pthread_mutex_unlock(&cl->append_lock);
            if (q != qe) free(q);
            return rc;
        }
    }
    store64(&cl->write_pos, pos + at);
    pthread_mutex_unlock(&cl->append_lock);
    if (q != qe) free(q);
    if (notify && cl->cfg.on_append) cl->cfg.on_append(cl->cfg.on_append_arg);
    return MQ_OK;
}

int cl_append_raw(CommitLog *cl, uint64_t at, const uint8_t *p, size_t len) {
    uint64_t seg = cl->cfg.segment_size;
    pthread_mutex_lock(&cl->append_lock);
    int rc = MQ_OK;
    if (at != load64(&cl->write_pos)) {
        rc = MQ_ERR_STATE;
        goto out;
    }
    size_t done = 0;
    while (done < len) {
        uint64_t pos = at + done;
        MappedFile *mf = seg_for(cl, pos);
        if (!mf) {
            if (pos % seg != 0) {
                rc = MQ_ERR_CORRUPT;
                goto out;
            }
            MappedFile *fresh = NULL;
            rc = new_seg(cl, pos, &fresh);
            if (rc != MQ_OK) goto out;
            mf = fresh;
            mf_ref(mf);
        }
        size_t in = (size_t)(pos - mf_base(mf));
        ClRecord rec;
        ClRecKind k = cl_decode(p + done, (size_t)(seg - in) < len - done ? (size_t)(seg - in)
                                                                          : len - done,
                                true, &rec);
        if (k == CL_REC_BLANK || (k == CL_REC_OK && rec.phys_off == pos)) {
            uint32_t size = mq_get_u32(p + done);
            if (k == CL_REC_BLANK && size != seg - in) k = CL_REC_BAD;
            if (k != CL_REC_BAD) {
                rc = write_bytes(cl, mf, in, p + done, size);
                if (rc != MQ_OK) {
                    mf_unref(&mf);
                    break;
                }
                if (k == CL_REC_OK) {
                    QoEntry *e = qo_get(&cl->qo, rec.topic, rec.queue_id);
                    if (e && e->next_off <= rec.queue_off) e->next_off = rec.queue_off + 1;
                }
                done += size;
                mf_unref(&mf);
                continue;
            }
        }
        mf_unref(&mf);
        rc = MQ_ERR_CORRUPT;
        break;
    }
    store64(&cl->write_pos, at + done);
out:
    pthread_mutex_unlock(&cl->append_lock);
    if (rc == MQ_OK && cl->cfg.on_append) cl->cfg.on_append(cl->cfg.on_append_arg);
    return rc;
}

/* ---- flush API -------------------------------------------------------- */

int cl_flush_wait(CommitLog *cl, ClFlushWaiter *w, uint64_t upto,
                  void (*done)(void *arg, int status), void *arg) {
    if (upto <= load64(&cl->flushed)) return 0;
    w->upto = upto;
    w->deadline_ns = mq_mono_ns() + (int64_t)cl->cfg.sync_flush_timeout_ms * 1000000;
    w->done = done;
    w->arg = arg;
    pthread_mutex_lock(&cl->wait_lock);
    if (cl->io_failed || cl->flusher_done) {
        pthread_mutex_unlock(&cl->wait_lock);
        return MQ_ERR_RDONLY;
    }
    if (upto <= load64(&cl->flushed)) {
        pthread_mutex_unlock(&cl->wait_lock);
        return 0;
    }
    ClFlushWaiter *head = &cl->waiters;
    bool was_empty = head->next == head;
    w->prev = head->prev;
    w->next = head;
    head->prev->next = w;
    head->prev = w;
    /* Deadlines grow in registration order, so the completer's timer only
     * needs setting when the list was empty. */
    if (was_empty) pthread_cond_signal(&cl->wait_cond);
    __atomic_add_fetch(&cl->pending, 1, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&cl->wait_lock);

    /* Wake the flusher only when it waits for this: not while it syncs (it
     * checks flush_requested next), not for every member of a crowd it is
     * gathering (one wake-up when the crowd is complete). */
    pthread_mutex_lock(&cl->flush_lock);
    cl->flush_requested = true;
    int wants = cl->flusher_wants;
    if (wants < 0 || (wants > 0 && __atomic_load_n(&cl->pending, __ATOMIC_ACQUIRE) >= wants))
        pthread_cond_signal(&cl->flush_cond);
    pthread_mutex_unlock(&cl->flush_lock);
    return 1;
}

int cl_flush_now(CommitLog *cl) {
    int rc = flush_to(cl, load64(&cl->write_pos));
    if (rc != MQ_OK) flush_failed(cl);
    pthread_mutex_lock(&cl->wait_lock);
    pthread_cond_signal(&cl->wait_cond);
    pthread_mutex_unlock(&cl->wait_lock);
    return rc;
}

uint64_t cl_write_offset(CommitLog *cl) { return load64(&cl->write_pos); }
void cl_flush_latency(CommitLog *cl, MqHistSnap *out) {
    mq_hist_read(&cl->flush_hist, out);
}

uint64_t cl_flushed_offset(CommitLog *cl) { return load64(&cl->flushed); }
uint64_t cl_min_offset(CommitLog *cl) { return load64(&cl->min_off); }

void cl_set_refusal(CommitLog *cl, int err) {
    int cur = __atomic_load_n(&cl->refusal, __ATOMIC_ACQUIRE);
    if (cur == MQ_ERR_RDONLY || cur == err) return;
    if (err == MQ_ERR_FULL)
        MQ_WARN("disk is nearly full: refusing appends");
    else if (err == MQ_OK)
        MQ_INFO("disk has room again: accepting appends");
    __atomic_compare_exchange_n(&cl->refusal, &cur, err, false, __ATOMIC_ACQ_REL,
                                __ATOMIC_ACQUIRE);
}

int cl_refusal(CommitLog *cl) { return __atomic_load_n(&cl->refusal, __ATOMIC_ACQUIRE); }

/* ---- reads ------------------------------------------------------------ */

int cl_read(CommitLog *cl, uint64_t phys_off, ClRecord *rec, MappedFile **ref) {
    uint64_t end = load64(&cl->write_pos);
    if (phys_off >= end || phys_off < load64(&cl->min_off)) return MQ_ERR_NOTFOUND;
    MappedFile *mf = seg_for(cl, phys_off);
    if (!mf) return MQ_ERR_NOTFOUND;
    size_t in = (size_t)(phys_off - mf_base(mf));
    size_t avail = mf_size(mf) - in;
    if (phys_off + avail > end) avail = (size_t)(end - phys_off);
    if (cl_decode(mf_data(mf) + in, avail, false, rec) != CL_REC_OK || rec->phys_off != phys_off) {
        mf_unref(&mf);
        return MQ_ERR_CORRUPT;
    }
    *ref = mf;
    return MQ_OK;
}

int cl_next(CommitLog *cl, uint64_t off, ClRecord *rec, uint64_t *next, MappedFile **ref) {
    /* '*ref' may hold the segment of the previous record: reuse it while the
     * walk stays inside it (a sequential reader takes no lock per record). */
    MappedFile *cursor = *ref;
    *ref = NULL;
    for (;;) {
        *next = off; /* where the caller resumes when nothing is found */
        uint64_t end = load64(&cl->write_pos);
        if (off >= end) {
            mf_unref(&cursor);
            return MQ_ERR_NOTFOUND;
        }
        MappedFile *mf = cursor;
        cursor = NULL;
        if (mf && (off < mf_base(mf) || off >= mf_base(mf) + mf_size(mf))) mf_unref(&mf);
        if (!mf) mf = seg_for(cl, off);
        if (!mf) return MQ_ERR_NOTFOUND;
        size_t in = (size_t)(off - mf_base(mf));
        ClRecKind k = cl_decode(mf_data(mf) + in, mf_size(mf) - in, false, rec);
        if (k == CL_REC_BLANK) {
            off = mf_base(mf) + mf_size(mf);
            mf_unref(&mf);
            continue;
        }
        if (k != CL_REC_OK || rec->phys_off != off) {
            MQ_ERROR("no valid record at commit log offset %ju", (uintmax_t)off);
            mf_unref(&mf);
            return MQ_ERR_CORRUPT;
        }
        *next = off + rec->total_size;
        *ref = mf;
        return MQ_OK;
    }
}

int cl_read_raw(CommitLog *cl, uint64_t from, uint8_t *buf, size_t cap, size_t *n) {
    *n = 0;
    uint64_t end = load64(&cl->write_pos);
    if (from >= end) return MQ_OK;
    if (from < load64(&cl->min_off)) return MQ_ERR_NOTFOUND;
    MappedFile *mf = seg_for(cl, from);
    if (!mf) return MQ_ERR_NOTFOUND;
    size_t in = (size_t)(from - mf_base(mf));
    size_t len = mf_size(mf) - in;
    if (from + len > end) len = (size_t)(end - from);
    if (len > cap) len = cap;
    memcpy(buf, mf_data(mf) + in, len);
    mf_unref(&mf);
    *n = len;
    return MQ_OK;
}

/* ---- queue offsets ---------------------------------------------------- */

void cl_set_queue_offset(CommitLog *cl, MqSlice topic, uint32_t queue_id, uint64_t next) {
    pthread_mutex_lock(&cl->append_lock);
    QoEntry *e = qo_get(&cl->qo, topic, queue_id);
    if (e) e->next_off = next;
    pthread_mutex_unlock(&cl->append_lock);
}

uint64_t cl_get_queue_offset(CommitLog *cl, MqSlice topic, uint32_t queue_id) {
    pthread_mutex_lock(&cl->append_lock);
    QoEntry *e = qo_find(&cl->qo, topic, queue_id, qo_hash(topic, queue_id));
    uint64_t v = e ? e->next_off : 0;
    pthread_mutex_unlock(&cl->append_lock);
    return v;
}

void cl_remove_topic(CommitLog *cl, MqSlice topic) {
    pthread_mutex_lock(&cl->append_lock);
    qo_remove_topic(&cl->qo, topic);
    pthread_mutex_unlock(&cl->append_lock);
}

/* ---- retention -------------------------------------------------------- */

size_t cl_segments(CommitLog *cl, ClSegmentInfo *out, size_t cap) {
    size_t n = 0;
    pthread_mutex_lock(&cl->seg_lock);
    for (size_t i = 0; i + 1 < cl->nsegs && n < cap; i++) {
        struct stat st;
        out[n].base = mf_base(cl->segs[i]);
        out[n].mtime_ms = stat(mf_path(cl->segs[i]), &st) == 0
                              ? (int64_t)st.st_mtim.tv_sec * 1000 + st.st_mtim.tv_nsec / 1000000
                              : 0;
        n++;
    }
    pthread_mutex_unlock(&cl->seg_lock);
    return n;
}

int cl_delete_oldest(CommitLog *cl) {
    pthread_mutex_lock(&cl->seg_lock);
    if (cl->nsegs < 2) {
        pthread_mutex_unlock(&cl->seg_lock);
        return MQ_ERR_NOTFOUND;
    }
    MappedFile *mf = cl->segs[0];
    memmove(cl->segs, cl->segs + 1, (cl->nsegs - 1) * sizeof(*cl->segs));
    cl->nsegs--;
    store64(&cl->min_off, mf_base(cl->segs[0]));
    pthread_mutex_unlock(&cl->seg_lock);
    MQ_INFO("deleting commit log segment '%s'", mf_path(mf));
    int rc = mf_mark_delete(mf);
    mf_unref(&mf);
    return rc;
}
