/*
 * store.c - the message store façade (see store.h): opens and recovers the
 * commit log, consume queues and index; runs the dispatcher and the
 * housekeeper threads; answers reads and key queries.
 *
 * Owns: the queue map ((topic, queue id) -> ConsumeQueue), the abort and
 * checkpoint files, the dispatch position.  Calls: commitlog.c,
 * consumequeue.c, indexfile.c, checkpoint.c.  FORMAT.md "Data directory".
 *
 * Locks: q_lock (rwlock) guards the queue map; readers hold it shared for
 * the duration of a memory-only read; the dispatcher adds queues under it
 * exclusively (after opening the files without it).  disp_lock/disp_cond
 * park the dispatcher when it has caught up.  hk_lock guards a
 * housekeeping round (thread and store_housekeep callers).
 */
#define _GNU_SOURCE
#include "store.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "checkpoint.h"
#include "indexfile.h"
#include "io.h"

/* ======================================================================
 * Queue map
 * ====================================================================== */

typedef struct QueueSlot {
    struct QueueSlot *next; /* hash chain */
    ConsumeQueue *cq;
    int refs;               /* atomic: the map's ref + housekeeper's */
    uint64_t hash;
    uint32_t queue_id;
    size_t topic_len;
    char topic[];
} QueueSlot;

struct Store {
    StoreConfig cfg;
    char *dir;              /* data_dir, owned */
    char *cq_dir;           /* <data>/consumequeue */
    char *ckpt_path;
    char *abort_path;
    CommitLog *cl;
    IndexStore *ix;

    pthread_rwlock_t q_lock;
    QueueSlot **qbuckets;
    size_t qnbuckets;       /* power of two */
    size_t qcount;

    uint64_t dispatched;    /* atomic: records below are in queues and index */
    uint64_t ix_skip_below; /* records below were indexed before a crash */
    pthread_mutex_t disp_lock;
    pthread_cond_t disp_cond;
    int disp_sleeping;      /* atomic: the dispatcher waits on disp_cond */
    bool disp_stop;         /* under disp_lock */
    pthread_cond_t caught_up; /* with disp_lock: dispatched reached the end */
    pthread_t dispatcher;

    pthread_mutex_t hk_lock;
    pthread_cond_t hk_cond;
    bool hk_stop;           /* under hk_lock */
    pthread_t housekeeper;
    int64_t last_clean_ms;  /* monotonic ms of the last retention round */
    int64_t last_ix_sync_ms; /* monotonic ms of the last index sync, 0 = never */
    Checkpoint last_ckpt;   /* as last written */
    double disk_ratio;      /* last measured, -1 unknown; under hk_lock */

    bool threads_started;
    bool crashed;           /* abort file found at open */
    int64_t recovery_ms;
};

static int64_t wall_ms(const Store *st) {
    return st->cfg.clock ? st->cfg.clock(st->cfg.clock_arg) : mq_now_ms();
}

static uint64_t load64(const uint64_t *p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }
static void store64(uint64_t *p, uint64_t v) { __atomic_store_n(p, v, __ATOMIC_RELEASE); }

static uint64_t q_hash(MqSlice topic, uint32_t queue_id) {
    return (mq_hash64(topic.ptr, topic.len) ^ queue_id) * 0x9E3779B97F4A7C15ULL;
}

/* q_find returns the slot (borrowed) or NULL.  Caller holds q_lock. */
static QueueSlot *q_find(Store *st, MqSlice topic, uint32_t queue_id) {
    if (!st->qnbuckets) return NULL;
    uint64_t h = q_hash(topic, queue_id);
    for (QueueSlot *s = st->qbuckets[h & (st->qnbuckets - 1)]; s; s = s->next) {
        if (s->hash == h && s->queue_id == queue_id && s->topic_len == topic.len &&
            memcmp(s->topic, topic.ptr, topic.len) == 0)
            return s;
    }
    return NULL;
}

/* q_insert adds 'cq' to the map.  Caller holds q_lock exclusively. */
static int q_insert(Store *st, MqSlice topic, uint32_t queue_id, ConsumeQueue *cq,
                    QueueSlot **out) {
    if (st->qcount >= st->qnbuckets) {
        size_t n = st->qnbuckets ? st->qnbuckets * 2 : 64;
        QueueSlot **b = calloc(n, sizeof(*b));
        if (!b) return MQ_ERR_NOMEM;
        for (size_t i = 0; i < st->qnbuckets; i++) {
            for (QueueSlot *s = st->qbuckets[i], *next; s; s = next) {
                next = s->next;
                s->next = b[s->hash & (n - 1)];
                b[s->hash & (n - 1)] = s;
            }
        }
        free(st->qbuckets);
        st->qbuckets = b;
        st->qnbuckets = n;
    }
    QueueSlot *s = calloc(1, sizeof(*s) + topic.len + 1);
    if (!s) return MQ_ERR_NOMEM;
    s->cq = cq;
    s->refs = 1;
    s->hash = q_hash(topic, queue_id);
    s->queue_id = queue_id;
    s->topic_len = topic.len;
    memcpy(s->topic, topic.ptr, topic.len);
    s->next = st->qbuckets[s->hash & (st->qnbuckets - 1)];
    st->qbuckets[s->hash & (st->qnbuckets - 1)] = s;
    st->qcount++;
    *out = s;
    return MQ_OK;
}

static void slot_unref(QueueSlot *s, bool destroy_files) {
    if (__atomic_sub_fetch(&s->refs, 1, __ATOMIC_ACQ_REL) > 0) return;
    if (destroy_files)
        cq_destroy(s->cq);
    else
        cq_close(s->cq);
    free(s);
}

/* q_snapshot returns refs on every slot (caller unrefs each and frees the
 * array).  Used by rounds that do disk I/O without holding q_lock. */
static QueueSlot **q_snapshot(Store *st, size_t *n) {
    pthread_rwlock_rdlock(&st->q_lock);
    QueueSlot **arr = malloc((st->qcount ? st->qcount : 1) * sizeof(*arr));
    size_t k = 0;
    for (size_t i = 0; arr && i < st->qnbuckets; i++) {
        for (QueueSlot *s = st->qbuckets[i]; s; s = s->next) {
            __atomic_add_fetch(&s->refs, 1, __ATOMIC_RELAXED);
            arr[k++] = s;
        }
    }
    pthread_rwlock_unlock(&st->q_lock);
    *n = k;
    return arr;
}

static void q_snapshot_free(QueueSlot **arr, size_t n) {
    for (size_t i = 0; i < n; i++) slot_unref(arr[i], false);
    free(arr);
}

static bool topic_is_safe(MqSlice topic) {
    if (topic.len == 0 || topic.len > CL_TOPIC_MAX) return false;
    if ((topic.len == 1 && ((const char *)topic.ptr)[0] == '.') ||
        (topic.len == 2 && memcmp(topic.ptr, "..", 2) == 0))
        return false;
    return !memchr(topic.ptr, '/', topic.len) && !memchr(topic.ptr, '\0', topic.len);
}

static char *queue_dir(Store *st, MqSlice topic, uint32_t queue_id) {
    char *p = NULL;
    if (asprintf(&p, "%s/%.*s/%u", st->cq_dir, (int)topic.len, (const char *)topic.ptr,
                 queue_id) < 0)
        return NULL;
    return p;
}

/* q_get_or_open returns the slot for a queue, opening (and creating) its
 * files if needed.  Dispatcher and open only.  Borrowed. */
static int q_get_or_open(Store *st, MqSlice topic, uint32_t queue_id, QueueSlot **out) {
    pthread_rwlock_rdlock(&st->q_lock);
    QueueSlot *s = q_find(st, topic, queue_id);
    pthread_rwlock_unlock(&st->q_lock);
    if (s) {
        *out = s;
        return MQ_OK;
    }
    char *dir = queue_dir(st, topic, queue_id);
    if (!dir) return MQ_ERR_NOMEM;
    ConsumeQueue *cq = NULL;
    int rc = cq_open(dir, st->cfg.cq_file_entries, &cq);
    free(dir);
    if (rc != MQ_OK) return rc;
    pthread_rwlock_wrlock(&st->q_lock);
    rc = q_insert(st, topic, queue_id, cq, out);
    pthread_rwlock_unlock(&st->q_lock);
    if (rc != MQ_OK) cq_close(cq);
    return rc;
}

/* load_queues opens every consumequeue/<topic>/<queueId> directory. */
static int load_queues(Store *st) {
    DIR *d = opendir(st->cq_dir);
    if (!d) return errno == ENOENT ? MQ_OK : MQ_ERR_IO;
    int rc = MQ_OK;
    struct dirent *te;
    while (rc == MQ_OK && (te = readdir(d))) {
        if (te->d_name[0] == '.') continue;
        MqSlice topic = mq_slice(te->d_name, strlen(te->d_name));
        if (!topic_is_safe(topic)) continue;
        char *tdir = NULL;
        if (asprintf(&tdir, "%s/%s", st->cq_dir, te->d_name) < 0) {
            rc = MQ_ERR_NOMEM;
            break;
        }
        DIR *qd = opendir(tdir);
        free(tdir);
        if (!qd) continue;
        struct dirent *qe;
        while (rc == MQ_OK && (qe = readdir(qd))) {
            char *end = NULL;
            if (qe->d_name[0] < '0' || qe->d_name[0] > '9') continue;
            unsigned long qid = strtoul(qe->d_name, &end, 10);
            if (*end || qid > UINT32_MAX) continue;
            QueueSlot *s = NULL;
            rc = q_get_or_open(st, topic, (uint32_t)qid, &s);
        }
        closedir(qd);
    }
    closedir(d);
    return rc;
}

/* ======================================================================
 * Dispatch: commit log record -> consume queue entry + index entries
 * ====================================================================== */

uint64_t store_tag_hash(MqSlice tag) { return tag.len ? mq_hash64(tag.ptr, tag.len) : 0; }

/* index_put adds one key; a key the index cannot hold (too long) is
 * skipped: it must not stop dispatch. */
static int index_put(Store *st, const ClRecord *rec, MqSlice key) {
    int rc = ix_put(st->ix, rec->topic, key, rec->phys_off, rec->store_ts);
    if (rc == MQ_ERR_INVAL) {
        MQ_DEBUG("key of %zu bytes at offset %ju not indexed", key.len, (uintmax_t)rec->phys_off);
        return MQ_OK;
    }
    return rc;
}

static int index_record(Store *st, const ClRecord *rec) {
    MqSlice v;
    int rc = MQ_OK;
    if (cl_prop_find(rec->props, CL_PROP_KEYS, &v)) {
        const char *p = v.ptr;
        const char *end = p + v.len;
        while (p < end && rc == MQ_OK) {
            const char *sp = memchr(p, ' ', (size_t)(end - p));
            const char *kend = sp ? sp : end;
            if (kend > p) rc = index_put(st, rec, mq_slice(p, (size_t)(kend - p)));
            p = kend + 1;
        }
    }
    if (rc == MQ_OK && cl_prop_find(rec->props, CL_PROP_UNIQ_KEY, &v) && v.len)
        rc = index_put(st, rec, v);
    return rc;
}

/* q_acquire is q_get_or_open plus a reference, dropped with slot_unref:
 * store_delete_topic may take the slot out of the map (and free it) while
 * the dispatcher is still using it. */
static int q_acquire(Store *st, MqSlice topic, uint32_t queue_id, QueueSlot **out) {
    for (;;) {
        pthread_rwlock_rdlock(&st->q_lock);
        QueueSlot *s = q_find(st, topic, queue_id);
        if (s) __atomic_add_fetch(&s->refs, 1, __ATOMIC_RELAXED);
        pthread_rwlock_unlock(&st->q_lock);
        if (s) {
            *out = s;
            return MQ_OK;
        }
        int rc = q_get_or_open(st, topic, queue_id, &s);
        if (rc != MQ_OK) return rc;
    }
}

static int dispatch_one(Store *st, const ClRecord *rec) {
    QueueSlot *s = NULL;
    int rc = q_acquire(st, rec->topic, rec->queue_id, &s);
    if (rc != MQ_OK) return rc;
    MqSlice tag = {0};
    cl_prop_find(rec->props, CL_PROP_TAGS, &tag);
    CqEntry e = {.phys_off = rec->phys_off, .size = rec->total_size, .tag_hash = store_tag_hash(tag)};
    rc = cq_put(s->cq, rec->queue_off, &e);
    if (rc == MQ_OK && rec->phys_off >= st->ix_skip_below) rc = index_record(st, rec);
    if (rc == MQ_OK && st->cfg.on_arrival)
        st->cfg.on_arrival(st->cfg.on_arrival_arg, rec->topic, rec->queue_id,
                           cq_max_offset(s->cq));
    slot_unref(s, false);
    return rc;
}

/* dispatch_available dispatches every record from the dispatch position to
 * the write position.  Returns the number dispatched or an error. */
static long dispatch_available(Store *st) {
    long n = 0;
    uint64_t off = load64(&st->dispatched);
    MappedFile *cursor = NULL; /* segment ref carried from record to record */
    for (;;) {
        ClRecord rec;
        uint64_t next = 0;
        int rc = cl_next(st->cl, off, &rec, &next, &cursor);
        if (rc == MQ_ERR_NOTFOUND) {
            store64(&st->dispatched, next); /* past a blank filler, if any */
            break;
        }
        if (rc != MQ_OK) return rc;
        rc = dispatch_one(st, &rec);
        if (rc != MQ_OK) {
            mf_unref(&cursor);
            MQ_ERROR("cannot dispatch record at offset %ju: %s", (uintmax_t)off,
                     mq_strerror(rc));
            return rc;
        }
        off = next;
        store64(&st->dispatched, off);
        n++;
    }
    return n;
}

static void on_append(void *arg) {
    Store *st = arg;
    /* Only wake the dispatcher when it sleeps: a futex call per append would
     * cost more than the append itself.  The exchange (a full barrier)
     * pairs with the one in dispatcher_main: either we see its flag or it
     * sees our record.  Taking the flag (1 -> 0) makes one appender the
     * waker: the others, finding 0, neither signal again nor queue on
     * disp_lock behind it.  The dispatcher holds disp_lock from setting the
     * flag until it waits, so the signal cannot come too early.  Its
     * 100 ms tick bounds the delay should that ever fail. */
    if (__atomic_exchange_n(&st->disp_sleeping, 0, __ATOMIC_SEQ_CST)) {
        pthread_mutex_lock(&st->disp_lock);
        pthread_cond_signal(&st->disp_cond);
        pthread_mutex_unlock(&st->disp_lock);
    }
}

static void *dispatcher_main(void *arg) {
    Store *st = arg;
    for (;;) {
        long n = dispatch_available(st);
        pthread_mutex_lock(&st->disp_lock);
        pthread_cond_broadcast(&st->caught_up); /* store_wait_dispatched */
        if (st->disp_stop) {
            pthread_mutex_unlock(&st->disp_lock);
            break;
        }
        if (n == 0 || n < 0) {
            __atomic_exchange_n(&st->disp_sleeping, 1, __ATOMIC_SEQ_CST);
            /* Re-check after publishing the flag: an append that missed it
             * has already moved the write offset. */
            if (load64(&st->dispatched) >= cl_write_offset(st->cl) || n < 0) {
                struct timespec ts;
                clock_gettime(CLOCK_MONOTONIC, &ts);
                ts.tv_nsec += n < 0 ? 0 : 100000000; /* 100 ms safety tick */
                ts.tv_sec += n < 0 ? 1 : 0;
                if (ts.tv_nsec >= 1000000000) {
                    ts.tv_sec++;
                    ts.tv_nsec -= 1000000000;
                }
                pthread_cond_timedwait(&st->disp_cond, &st->disp_lock, &ts);
            }
            __atomic_store_n(&st->disp_sleeping, 0, __ATOMIC_SEQ_CST);
        }
        pthread_mutex_unlock(&st->disp_lock);
    }
    return NULL;
}

int store_wait_dispatched(Store *st, uint32_t timeout_ms) {
    uint64_t target = cl_write_offset(st->cl);
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    uint64_t ns = (uint64_t)ts.tv_nsec + (uint64_t)timeout_ms * 1000000;
    ts.tv_sec += (time_t)(ns / 1000000000);
    ts.tv_nsec = (long)(ns % 1000000000);
    int rc = MQ_OK;
    pthread_mutex_lock(&st->disp_lock);
    while (load64(&st->dispatched) < target) {
        pthread_cond_signal(&st->disp_cond);
        if (pthread_cond_timedwait(&st->caught_up, &st->disp_lock, &ts) == ETIMEDOUT) {
            rc = load64(&st->dispatched) < target ? MQ_ERR_TIMEOUT : MQ_OK;
            break;
        }
    }
    pthread_mutex_unlock(&st->disp_lock);
    return rc;
}

/* ======================================================================
 * Housekeeping: queue/index flush, checkpoint, disk watch, retention
 * ====================================================================== */

static bool hour_listed(const char *list, int hour) {
    const char *p = list;
    while (*p) {
        char *end = NULL;
        long h = strtol(p, &end, 10);
        if (end == p) break;
        if (h == hour) return true;
        p = end;
        while (*p == ';' || *p == ',' || *p == ' ') p++;
    }
    return false;
}

/* cleanup_below drops queue and index files that only point below the log
 * minimum. */
static void cleanup_below(Store *st, uint64_t min_phys) {
    size_t n = 0;
    QueueSlot **arr = q_snapshot(st, &n);
    for (size_t i = 0; arr && i < n; i++) cq_delete_below_phys(arr[i]->cq, min_phys);
    q_snapshot_free(arr, n);
    ix_delete_below_phys(st->ix, min_phys);
}

/* retention deletes commit log segments, oldest first:
 *   expired (older than file_reserved_hours) at a deleteWhen hour, or at
 *   once when the disk is over disk_max_used_ratio;
 *   any, one per round, when the disk is over disk_force_clean_ratio.
 * Never a segment that is not yet flushed and dispatched. */
static int retention(Store *st, double ratio) {
    int64_t now = wall_ms(st);
    time_t secs = (time_t)(now / 1000);
    struct tm tm;
    localtime_r(&secs, &tm);
    bool at_hour = hour_listed(st->cfg.delete_when, tm.tm_hour);
    bool pressed = ratio >= 0 && ratio * 100 >= st->cfg.disk_max_used_ratio;
    bool forced = ratio >= 0 && ratio * 100 >= st->cfg.disk_force_clean_ratio;
    int64_t keep_ms = (int64_t)st->cfg.file_reserved_hours * 3600 * 1000;
    uint64_t safe = load64(&st->dispatched);
    if (cl_flushed_offset(st->cl) < safe) safe = cl_flushed_offset(st->cl);
    int deleted = 0;
    for (;;) {
        ClSegmentInfo seg;
        if (cl_segments(st->cl, &seg, 1) == 0) break;
        if (seg.base + st->cfg.segment_size > safe) break;
        bool expired = now - seg.mtime_ms >= keep_ms;

        bool go = (expired && (at_hour || pressed)) || (forced && deleted == 0);
        if (!go) break;
        if (!expired)
            MQ_WARN("disk %.0f%% used: deleting unexpired segment %020ju", ratio * 100,
                    (uintmax_t)seg.base);
        if (cl_delete_oldest(st->cl) != MQ_OK) break;
        deleted++;
    }
    if (deleted) cleanup_below(st, cl_min_offset(st->cl));
    return deleted;
}

static int housekeep_locked(Store *st, bool force_ckpt) {
    int rc = MQ_OK;
    /* 1. Make queue and index entries durable for everything dispatched so
     *    far; never claim more than the log has made durable. */
    uint64_t disp = load64(&st->dispatched);
    size_t n = 0;
    QueueSlot **arr = q_snapshot(st, &n);
    for (size_t i = 0; arr && i < n; i++)
        if (cq_sync(arr[i]->cq) != MQ_OK) rc = MQ_ERR_IO;
    q_snapshot_free(arr, n);
    /* The index is synced less often than the queues: its hash slots take
     * random writes, so a second's worth dirties most slot pages, and that
     * fdatasync (tens of ms, 20 MB) held up the commit log's own syncs
     * behind it (SYNC_FLUSH p99 ~50 ms, docs/bench.md).  Its checkpoint
     * position stays at the last sync; recovery re-indexes from there. */
    int64_t mono_now = mq_mono_ms();
    bool ix_due = force_ckpt || st->last_ix_sync_ms == 0 ||
                  mono_now - st->last_ix_sync_ms >= (int64_t)st->cfg.flush_index_interval_ms;
    if (ix_due) {
        if (ix_sync(st->ix) != MQ_OK) rc = MQ_ERR_IO;
        st->last_ix_sync_ms = mono_now;
    }
    if (rc == MQ_OK) {
        uint64_t logf = cl_flushed_offset(st->cl);
        uint64_t upto = disp < logf ? disp : logf;
        int64_t now = wall_ms(st);
        Checkpoint ck = st->last_ckpt;
        ck.log_flushed = logf;
        ck.cq_flushed = upto;
        if (ix_due) ck.index_flushed = upto;
        if (force_ckpt || memcmp(&ck, &st->last_ckpt, sizeof(ck)) != 0) {
            ck.log_ts = ck.cq_ts = now;
            if (ix_due) ck.index_ts = now;
            if (ckpt_write(st->ckpt_path, &ck) == MQ_OK)
                st->last_ckpt = ck;
            else
                rc = MQ_ERR_IO;
        }
    }
    /* 2. Disk watch: refuse appends above the refusal ratio. */
    double ratio = mq_disk_used_ratio(st->dir);
    st->disk_ratio = ratio;
    if (ratio >= 0) {
        bool full = ratio * 100 >= st->cfg.disk_refuse_ratio;
        cl_set_refusal(st->cl, full ? MQ_ERR_FULL : MQ_OK);
    }
    /* 3. Retention, every clean_interval_ms (or at once under pressure). */
    int64_t mono = mq_mono_ms();
    bool pressed = ratio >= 0 && ratio * 100 >= st->cfg.disk_max_used_ratio;
    if (pressed || st->last_clean_ms == 0 ||
        mono - st->last_clean_ms >= (int64_t)st->cfg.clean_interval_ms) {
        st->last_clean_ms = mono;
        retention(st, ratio);
    }
    return rc;
}

int store_housekeep(Store *st) {
    pthread_mutex_lock(&st->hk_lock);
    int rc = housekeep_locked(st, false);
    pthread_mutex_unlock(&st->hk_lock);
    return rc;
}

static void *housekeeper_main(void *arg) {
    Store *st = arg;
    pthread_mutex_lock(&st->hk_lock);
    while (!st->hk_stop) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        uint64_t ns = (uint64_t)ts.tv_nsec + (uint64_t)st->cfg.flush_cq_interval_ms * 1000000;
        ts.tv_sec += (time_t)(ns / 1000000000);
        ts.tv_nsec = (long)(ns % 1000000000);
        pthread_cond_timedwait(&st->hk_cond, &st->hk_lock, &ts);
        if (st->hk_stop) break;
        housekeep_locked(st, false);
    }
    pthread_mutex_unlock(&st->hk_lock);
    return NULL;
}

/* ======================================================================
 * Open, recover, close
 * ====================================================================== */

void store_config_defaults(StoreConfig *cfg, const char *data_dir) {
    memset(cfg, 0, sizeof(*cfg));
    cfg->data_dir = data_dir;
    cfg->segment_size = (size_t)1 << 30;
    cfg->cq_file_entries = 300000;
    cfg->index_slots = 5000000;
    cfg->index_entries = 20000000;
    cfg->flush_interval_ms = 500;
    cfg->flush_cq_interval_ms = 1000;
    cfg->flush_index_interval_ms = 10000;
    cfg->sync_flush_timeout_ms = 5000;
    cfg->file_reserved_hours = 72;
    snprintf(cfg->delete_when, sizeof(cfg->delete_when), "04");
    cfg->disk_max_used_ratio = 75;
    cfg->disk_force_clean_ratio = 85;
    cfg->disk_refuse_ratio = 90;
    cfg->clean_interval_ms = 10000;
}

static char *join(const char *a, const char *b) {
    char *p = NULL;
    return asprintf(&p, "%s/%s", a, b) < 0 ? NULL : p;
}

static bool dir_exists(const char *p) {
    struct stat s;
    return stat(p, &s) == 0 && S_ISDIR(s.st_mode);
}

/* recover brings queues and index in line with the log: truncate the log's
 * torn tail, drop queue entries past its end, re-dispatch from the
 * checkpoint, then seed the queue offset table. */
static int recover(Store *st, bool rebuild_queues) {
    Checkpoint ck = {0};
    int rc = ckpt_read(st->ckpt_path, &ck);
    if (rc == MQ_ERR_CORRUPT) {
        MQ_WARN("checkpoint is corrupt: recovering from the start of the log");
        memset(&ck, 0, sizeof(ck));
    } else if (rc != MQ_OK && rc != MQ_ERR_NOTFOUND) {
        return rc;
    }
    st->last_ckpt = ck;
    uint64_t from = ck.cq_flushed < ck.index_flushed ? ck.cq_flushed : ck.index_flushed;
    if (rebuild_queues) from = 0; /* clamped to the log's minimum */
    uint64_t end = 0;
    rc = cl_recover(st->cl, from, &end);
    if (rc != MQ_OK) return rc;
    uint64_t min = cl_min_offset(st->cl);
    if (from < min) from = min;

    size_t n = 0;
    QueueSlot **arr = q_snapshot(st, &n);
    for (size_t i = 0; arr && i < n && rc == MQ_OK; i++) rc = cq_truncate_phys(arr[i]->cq, end);
    q_snapshot_free(arr, n);
    if (rc != MQ_OK) return rc;

    /* Records the index already holds (it lives in the page cache across a
     * kill -9) are not indexed twice. */
    uint64_t ixe = ix_end_phys(st->ix);
    st->ix_skip_below = ixe < end ? ixe : end;
    if (st->ix_skip_below < from) st->ix_skip_below = from;
    store64(&st->dispatched, from);
    long count = dispatch_available(st);
    if (count < 0) return (int)count;
    st->ix_skip_below = 0;
    if (count) MQ_INFO("re-dispatched %ld records from offset %ju", count, (uintmax_t)from);

    arr = q_snapshot(st, &n);
    for (size_t i = 0; arr && i < n; i++)
        cl_set_queue_offset(st->cl, mq_slice(arr[i]->topic, arr[i]->topic_len),
                            arr[i]->queue_id, cq_max_offset(arr[i]->cq));
    q_snapshot_free(arr, n);
    return MQ_OK;
}

static int write_abort(const char *path) {
    int fd = mq_io->open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) {
        MQ_ERROR("cannot create '%s': %s", path, strerror(errno));
        return MQ_ERR_IO;
    }
    char pid[32];
    int len = snprintf(pid, sizeof(pid), "%ld\n", (long)getpid());
    int rc = mq_write_all(fd, pid, (size_t)len, 0) == 0 && mq_io->fsync(fd) == 0 ? MQ_OK : MQ_ERR_IO;
    mq_io->close(fd);
    return rc;
}

int store_open(const StoreConfig *cfg, Store **out) {
    if (!cfg->data_dir || cfg->segment_size < 4096 || cfg->cq_file_entries == 0 ||
        cfg->index_slots == 0 || cfg->index_entries == 0)
        return MQ_ERR_INVAL;
    int64_t t0 = mq_mono_ns();
    Store *st = calloc(1, sizeof(*st));
    if (!st) return MQ_ERR_NOMEM;
    st->cfg = *cfg;
    st->cfg.on_arrival = NULL; /* no wake-ups during recovery */
    st->disk_ratio = -1;
    /* Writers first: a steady stream of readers must not starve the
     * dispatcher when it adds a queue (glibc prefers readers by default). */
    pthread_rwlockattr_t rwa;
    pthread_rwlockattr_init(&rwa);
    pthread_rwlockattr_setkind_np(&rwa, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
    pthread_rwlock_init(&st->q_lock, &rwa);
    pthread_rwlockattr_destroy(&rwa);
    pthread_mutex_init(&st->disp_lock, NULL);
    pthread_mutex_init(&st->hk_lock, NULL);
    mq_cond_init_mono(&st->disp_cond);
    mq_cond_init_mono(&st->caught_up);
    mq_cond_init_mono(&st->hk_cond);
    int rc = MQ_ERR_NOMEM;
    st->dir = strdup(cfg->data_dir);
    if (!st->dir) goto err;
    st->cfg.data_dir = st->dir;
    st->cq_dir = join(st->dir, "consumequeue");
    st->ckpt_path = join(st->dir, "checkpoint");
    st->abort_path = join(st->dir, "abort");
    char *cl_dir = join(st->dir, "commitlog");
    char *ix_dir = join(st->dir, "index");
    if (!st->cq_dir || !st->ckpt_path || !st->abort_path || !cl_dir || !ix_dir) {
        free(cl_dir);
        free(ix_dir);
        goto err;
    }
    rc = mq_mkdirs(st->dir);
    struct stat sb;
    st->crashed = stat(st->abort_path, &sb) == 0;
    bool had_log = dir_exists(cl_dir);
    bool rebuild = had_log && !dir_exists(st->cq_dir);
    if (rc == MQ_OK) rc = mq_mkdirs(st->cq_dir);
    ClConfig clc = {
        .dir = cl_dir,
        .segment_size = cfg->segment_size,
        .flush_interval_ms = cfg->flush_interval_ms,
        .sync_flush_timeout_ms = cfg->sync_flush_timeout_ms,
        .write_through = cfg->sync_flush,
        .clock = cfg->clock,
        .clock_arg = cfg->clock_arg,
        .on_append = on_append,
        .on_append_arg = st,
    };
    memcpy(clc.store_host, cfg->store_host, 8);
    if (rc == MQ_OK) rc = cl_open(&clc, &st->cl);
    IndexConfig ixc = {
        .dir = ix_dir,
        .slot_num = cfg->index_slots,
        .max_entries = cfg->index_entries,
        .clock = cfg->clock,
        .clock_arg = cfg->clock_arg,
    };
    if (rc == MQ_OK) rc = ix_open(&ixc, &st->ix);
    free(cl_dir);
    free(ix_dir);
    if (rc == MQ_OK) rc = load_queues(st);
    if (rc != MQ_OK) goto err;

    if (st->crashed) MQ_WARN("abort file found in '%s': recovering after a crash", st->dir);
    if (rebuild) MQ_WARN("consume queues missing in '%s': rebuilding from the log", st->dir);
    rc = recover(st, rebuild);
    if (rc != MQ_OK) goto err;
    /* Bytes recovered from the page cache after a kill -9 are not synced
     * here: the flusher's first round does it (the checkpoint never vouches
     * for more than the flushed offset), so a crash mid-burst reopens fast. */
    /* Queue minimums are not stored: after retention in an earlier run the
     * first queue file may still point below the log's minimum. */
    cleanup_below(st, cl_min_offset(st->cl));
    rc = housekeep_locked(st, true); /* checkpoint the recovered state */
    if (rc != MQ_OK) goto err;
    rc = write_abort(st->abort_path);
    if (rc != MQ_OK) goto err;
    rc = mq_fsync_dir(st->dir);
    if (rc != MQ_OK) goto err;

    st->cfg.on_arrival = cfg->on_arrival;
    if (pthread_create(&st->dispatcher, NULL, dispatcher_main, st) != 0) {
        rc = MQ_ERR_NOMEM;
        goto err;
    }
    if (pthread_create(&st->housekeeper, NULL, housekeeper_main, st) != 0) {
        pthread_mutex_lock(&st->disp_lock);
        st->disp_stop = true;
        pthread_cond_signal(&st->disp_cond);
        pthread_mutex_unlock(&st->disp_lock);
        pthread_join(st->dispatcher, NULL);
        rc = MQ_ERR_NOMEM;
        goto err;
    }
    st->threads_started = true;
    st->recovery_ms = (mq_mono_ns() - t0) / 1000000;
    *out = st;
    return MQ_OK;

err:
    st->threads_started = false;
    store_close(st);
    return rc;
}

static void free_queues(Store *st) {
    for (size_t i = 0; i < st->qnbuckets; i++) {
        for (QueueSlot *s = st->qbuckets[i], *next; s; s = next) {
            next = s->next;
            slot_unref(s, false);
        }
    }
    free(st->qbuckets);
}

void store_close(Store *st) {
    if (!st) return;
    bool clean = st->threads_started;
    if (st->threads_started) {
        pthread_mutex_lock(&st->hk_lock);
        st->hk_stop = true;
        pthread_cond_signal(&st->hk_cond);
        pthread_mutex_unlock(&st->hk_lock);
        pthread_join(st->housekeeper, NULL);
        /* Refuse new appends, let the dispatcher catch up, then stop it. */
        if (st->cl) cl_set_refusal(st->cl, MQ_ERR_RDONLY);
        /* Wait while the dispatcher makes progress: a long backlog is fine,
         * a dispatcher stuck on an error (say, no disk for a queue file) is
         * given up on after 10 s without progress (the next start recovers). */
        uint64_t seen = load64(&st->dispatched);
        while (store_wait_dispatched(st, 10000) == MQ_ERR_TIMEOUT &&
               load64(&st->dispatched) != seen)
            seen = load64(&st->dispatched);
        pthread_mutex_lock(&st->disp_lock);
        st->disp_stop = true;
        pthread_cond_signal(&st->disp_cond);
        pthread_mutex_unlock(&st->disp_lock);
        pthread_join(st->dispatcher, NULL);
    }
    if (clean) {
        bool ok = cl_flush_now(st->cl) == MQ_OK && housekeep_locked(st, true) == MQ_OK &&
                  st->last_ckpt.cq_flushed == cl_write_offset(st->cl);
        if (ok && mq_io->unlink(st->abort_path) == 0 && mq_fsync_dir(st->dir) == MQ_OK)
            MQ_INFO("store closed cleanly at offset %ju", (uintmax_t)cl_write_offset(st->cl));
        else
            MQ_WARN("store closed without a clean checkpoint: next start will recover");
    }
    cl_close(st->cl);
    ix_close(st->ix);
    free_queues(st);
    pthread_rwlock_destroy(&st->q_lock);
    pthread_mutex_destroy(&st->disp_lock);
    pthread_mutex_destroy(&st->hk_lock);
    pthread_cond_destroy(&st->disp_cond);
    pthread_cond_destroy(&st->caught_up);
    pthread_cond_destroy(&st->hk_cond);
    free(st->dir);
    free(st->cq_dir);
    free(st->ckpt_path);
    free(st->abort_path);
    free(st);
}

/* ======================================================================
 * Writes and reads
 * ====================================================================== */

int store_put(Store *st, const ClMessage *msgs, size_t count, ClAppendResult *res) {
    return store_put_lazy(st, msgs, count, res, false);
}

int store_put_lazy(Store *st, const ClMessage *msgs, size_t count, ClAppendResult *res,
                   bool lazy) {
    for (size_t i = 0; i < count; i++)
        if (!topic_is_safe(msgs[i].topic)) return MQ_ERR_INVAL;
    return cl_append_ex(st->cl, msgs, count, res, !lazy);
}

int store_wait_flush(Store *st, ClFlushWaiter *w, uint64_t upto,
                     void (*done)(void *arg, int status), void *arg) {
    return cl_flush_wait(st->cl, w, upto, done, arg);
}

int store_read_msg(Store *st, uint64_t phys_off, ClRecord *rec, MappedFile **ref) {
    return cl_read(st->cl, phys_off, rec, ref);
}

int store_read_queue(Store *st, MqSlice topic, uint32_t queue_id, uint64_t from, size_t max,
                     size_t max_scan, const uint64_t *tags, size_t n_tags, CqEntry *out,
                     uint64_t *offs, size_t *n, uint64_t *next) {
    pthread_rwlock_rdlock(&st->q_lock);
    QueueSlot *s = q_find(st, topic, queue_id);
    int rc = MQ_ERR_NOTFOUND;
    if (s) rc = cq_read(s->cq, from, max, max_scan, tags, n_tags, out, offs, n, next);
    pthread_rwlock_unlock(&st->q_lock);
    if (rc == MQ_ERR_NOTFOUND) {
        *n = 0;
        *next = from;
    }
    return rc;
}

void store_queue_range(Store *st, MqSlice topic, uint32_t queue_id, uint64_t *min,
                       uint64_t *max) {
    pthread_rwlock_rdlock(&st->q_lock);
    QueueSlot *s = q_find(st, topic, queue_id);
    *min = s ? cq_min_offset(s->cq) : 0;
    *max = s ? cq_max_offset(s->cq) : 0;
    pthread_rwlock_unlock(&st->q_lock);
}

/* entry_ts reads the store timestamp of queue entry 'off'; -1 if absent. */
static int64_t entry_ts(Store *st, ConsumeQueue *cq, uint64_t off) {
    CqEntry e;
    if (cq_get(cq, off, &e) != MQ_OK) return -1;
    ClRecord rec;
    MappedFile *ref = NULL;
    if (cl_read(st->cl, e.phys_off, &rec, &ref) != MQ_OK) return -1;
    int64_t ts = rec.store_ts;
    mf_unref(&ref);
    return ts;
}

int64_t store_queue_last_ts(Store *st, MqSlice topic, uint32_t queue_id) {
    pthread_rwlock_rdlock(&st->q_lock);
    QueueSlot *s = q_find(st, topic, queue_id);
    int64_t ts = 0;
    if (s && cq_max_offset(s->cq) > cq_min_offset(s->cq)) {
        ts = entry_ts(st, s->cq, cq_max_offset(s->cq) - 1);
        if (ts < 0) ts = 0;
    }
    pthread_rwlock_unlock(&st->q_lock);
    return ts;
}

int store_offset_for_time(Store *st, MqSlice topic, uint32_t queue_id, int64_t ts_ms,
                          uint64_t *out) {
    pthread_rwlock_rdlock(&st->q_lock);
    QueueSlot *s = q_find(st, topic, queue_id);
    if (!s) {
        pthread_rwlock_unlock(&st->q_lock);
        *out = 0;
        return MQ_ERR_NOTFOUND;
    }
    /* Store timestamps never decrease along a queue (assigned under the
     * append lock), so the first entry at or after 'ts_ms' is found by
     * binary search.  Entries that cannot be read (aged out of the log)
     * count as older. */
    uint64_t lo = cq_min_offset(s->cq);
    uint64_t hi = cq_max_offset(s->cq);
    while (lo < hi) {
        uint64_t mid = lo + (hi - lo) / 2;
        int64_t t = entry_ts(st, s->cq, mid);
        if (t < ts_ms)
            lo = mid + 1;
        else
            hi = mid;
    }
    pthread_rwlock_unlock(&st->q_lock);
    *out = lo;
    return MQ_OK;
}

static bool record_has_key(const ClRecord *rec, MqSlice topic, MqSlice key) {
    if (rec->topic.len != topic.len || memcmp(rec->topic.ptr, topic.ptr, topic.len) != 0)
        return false;
    MqSlice v;
    if (cl_prop_find(rec->props, CL_PROP_UNIQ_KEY, &v) && v.len == key.len &&
        memcmp(v.ptr, key.ptr, key.len) == 0)
        return true;
    if (!cl_prop_find(rec->props, CL_PROP_KEYS, &v)) return false;
    const char *p = v.ptr;
    const char *end = p + v.len;
    while (p < end) {
        const char *sp = memchr(p, ' ', (size_t)(end - p));
        const char *kend = sp ? sp : end;
        if ((size_t)(kend - p) == key.len && memcmp(p, key.ptr, key.len) == 0) return true;
        p = kend + 1;
    }
    return false;
}

int store_query_key(Store *st, MqSlice topic, MqSlice key, int64_t begin_ms, int64_t end_ms,
                    size_t max, uint64_t *offs, size_t *n) {
    *n = 0;
    if (max == 0) return MQ_OK;
    /* Ask the index for more candidates than wanted: some are collisions. */
    size_t want = max * 2 + 16;
    uint64_t *cand = malloc(want * sizeof(*cand));
    if (!cand) return MQ_ERR_NOMEM;
    size_t nc = 0;
    int rc = ix_query(st->ix, topic, key, begin_ms, end_ms, want, cand, &nc);
    for (size_t i = 0; rc == MQ_OK && i < nc && *n < max; i++) {
        ClRecord rec;
        MappedFile *ref = NULL;
        if (cl_read(st->cl, cand[i], &rec, &ref) != MQ_OK) continue;
        if (rec.store_ts >= begin_ms && rec.store_ts <= end_ms && record_has_key(&rec, topic, key))
            offs[(*n)++] = cand[i];
        mf_unref(&ref);
    }
    free(cand);
    return rc;
}

int store_delete_topic(Store *st, MqSlice topic) {
    QueueSlot *dead = NULL;
    pthread_rwlock_wrlock(&st->q_lock);
    for (size_t i = 0; i < st->qnbuckets; i++) {
        QueueSlot **pp = &st->qbuckets[i];
        while (*pp) {
            QueueSlot *s = *pp;
            if (s->topic_len == topic.len && memcmp(s->topic, topic.ptr, topic.len) == 0) {
                *pp = s->next;
                st->qcount--;
                s->next = dead;
                dead = s;
            } else {
                pp = &s->next;
            }
        }
    }
    pthread_rwlock_unlock(&st->q_lock);
    cl_remove_topic(st->cl, topic);
    int count = 0;
    while (dead) {
        QueueSlot *s = dead;
        dead = s->next;
        slot_unref(s, true);
        count++;
    }
    char *tdir = NULL;
    if (asprintf(&tdir, "%s/%.*s", st->cq_dir, (int)topic.len, (const char *)topic.ptr) >= 0) {
        if (topic_is_safe(topic)) mq_rmtree(tdir);
        free(tdir);
    }
    return count ? MQ_OK : MQ_ERR_NOTFOUND;
}

void store_stats(Store *st, StoreStats *out) {
    memset(out, 0, sizeof(*out));
    out->min_offset = cl_min_offset(st->cl);
    out->write_offset = cl_write_offset(st->cl);
    out->flushed_offset = cl_flushed_offset(st->cl);
    out->dispatched_offset = load64(&st->dispatched);
    uint64_t seg = st->cfg.segment_size;
    out->segment_count = out->write_offset > out->min_offset
                             ? (out->write_offset - out->min_offset + seg - 1) / seg
                             : 0;
    out->disk_used_ratio = mq_disk_used_ratio(st->dir);
    out->refusal = cl_refusal(st->cl);
    out->recovered_from_crash = st->crashed;
    out->recovery_ms = st->recovery_ms;
    if (mq_disk_space(st->dir, &out->disk_total_bytes, &out->disk_avail_bytes) != MQ_OK) {
        out->disk_total_bytes = out->disk_avail_bytes = 0;
    }
    cl_flush_latency(st->cl, &out->flush_latency);
}

CommitLog *store_commitlog(Store *st) { return st->cl; }
