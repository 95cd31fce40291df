/*
 * schedule.c - delay levels (see schedule.h).  One thread; each level is
 * a FIFO (one delay per level), so only its head can be due next.
 */
#define _GNU_SOURCE
#include "schedule.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "msg.h"

#define LEVEL_BATCH 1024 /* messages one pass re-puts per level at most */

struct Scheduler {
    SchedConfig cfg;
    int64_t levels[DELAY_LEVELS_MAX];
    _Atomic uint64_t pos[DELAY_LEVELS_MAX]; /* next offset per level; written by the runner */
    size_t n_known;                         /* levels with a position: the configured
                                             * ones and any more saved by an earlier run
                                             * (kept, so growing the levels back does
                                             * not deliver their messages again) */
    int64_t next_due_ms;                    /* earliest due head seen by the last pass */
    int64_t last_save_ns;
    pthread_mutex_t run_mu;                 /* one pass at a time */
    pthread_mutex_t stop_mu;
    pthread_cond_t stop_cv;
    bool stopping;
    bool running;
    pthread_t thread;
};

static const MqSlice SCHED_TOPIC = {MSG_SCHEDULE_TOPIC, sizeof(MSG_SCHEDULE_TOPIC) - 1};

static int64_t now_ms(const Scheduler *s) {
    return s->cfg.clock ? s->cfg.clock(s->cfg.clock_arg) : mq_now_ms();
}

static bool name_is(MqSlice n, const char *s) {
    return n.len == strlen(s) && memcmp(n.ptr, s, n.len) == 0;
}

/* ---- wrap / unwrap ---------------------------------------------------------*/

int sched_wrap(const ClMessage *in, uint32_t level, uint8_t *buf, size_t cap, ClMessage *out) {
    if (!in || !buf || !out || level == 0 || level > DELAY_LEVELS_MAX) return MQ_ERR_INVAL;
    char qid[16], lv[16];
    snprintf(qid, sizeof(qid), "%u", in->queue_id);
    snprintf(lv, sizeof(lv), "%u", level);
    MsgProp add[3] = {
        {mq_slice(MSG_PROP_REAL_TOPIC, strlen(MSG_PROP_REAL_TOPIC)), in->topic},
        {mq_slice(MSG_PROP_REAL_QID, strlen(MSG_PROP_REAL_QID)), mq_slice(qid, strlen(qid))},
        {mq_slice(MSG_PROP_DELAY, strlen(MSG_PROP_DELAY)), mq_slice(lv, strlen(lv))},
    };
    size_t extra = 0;
    int rc = msg_props_encode(add, 3, NULL, 0, &extra);
    if (rc != MQ_OK) return rc;
    if (in->props.len + extra > cap || in->props.len + extra > CL_PROPS_MAX) return MQ_ERR_FULL;
    if (in->props.len) memcpy(buf, in->props.ptr, in->props.len);
    size_t n = 0;
    rc = msg_props_encode(add, 3, buf + in->props.len, cap - in->props.len, &n);
    if (rc != MQ_OK) return rc;
    *out = *in;
    out->topic = SCHED_TOPIC;
    out->queue_id = level - 1;
    out->props = mq_slice(buf, in->props.len + n);
    return MQ_OK;
}

/* Parses the decimal 'v' into '*out' (at most 'max'). */
static bool parse_u64(MqSlice v, uint64_t max, uint64_t *out) {
    if (v.len == 0 || v.len > 20) return false;
    uint64_t x = 0;
    for (size_t i = 0; i < v.len; i++) {
        char c = ((const char *)v.ptr)[i];
        if (c < '0' || c > '9') return false;
        uint64_t d = (uint64_t)(c - '0');
        if (x > (max - d) / 10) return false;
        x = x * 10 + d;
    }
    *out = x;
    return true;
}

/* Re-puts the schedule record 'rec' (at 'off' of level 'level') on its
 * real topic.  MQ_OK (also when dropped: no real topic any more), or the
 * append error (tried again later). */
static int reput(Scheduler *s, const ClRecord *rec, uint32_t level, uint64_t off) {
    MsgProp stack[64];
    size_t n = 0;
    if (msg_props_decode(rec->props, stack, 63, &n) != MQ_OK) {
        MQ_WARN("delay level %u offset %" PRIu64 ": damaged properties, dropped", level, off);
        return MQ_OK;
    }
    MqSlice real_topic = {0}, real_qid = {0};
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (name_is(stack[i].name, MSG_PROP_REAL_TOPIC)) {
            real_topic = stack[i].value;
        } else if (name_is(stack[i].name, MSG_PROP_REAL_QID)) {
            real_qid = stack[i].value;
        } else if (!name_is(stack[i].name, MSG_PROP_DELAY)) {
            stack[k++] = stack[i];
        }
    }
    char topic[CL_TOPIC_MAX + 1];
    uint64_t qid = 0;
    if (real_topic.len == 0 || real_topic.len > CL_TOPIC_MAX ||
        !parse_u64(real_qid, UINT32_MAX, &qid)) {
        MQ_WARN("delay level %u offset %" PRIu64 ": no real topic, dropped", level, off);
        return MQ_OK;
    }
    memcpy(topic, real_topic.ptr, real_topic.len);
    topic[real_topic.len] = '\0';
    MetaTopic t;
    if (topic_get(s->cfg.topics, topic, &t) != MQ_OK || t.write_queues == 0) {
        MQ_WARN("delayed message for topic '%s' dropped: the topic is gone", topic);
        return MQ_OK;
    }
    char src[48];
    snprintf(src, sizeof(src), "%u:%" PRIu64, level, off);
    stack[k++] = (MsgProp){mq_slice(MSG_PROP_DELAY_SRC, strlen(MSG_PROP_DELAY_SRC)),
                           mq_slice(src, strlen(src))};
    uint8_t *buf = malloc(CL_PROPS_MAX);
    size_t plen = 0;
    int rc = buf ? msg_props_encode(stack, k, buf, CL_PROPS_MAX, &plen) : MQ_ERR_NOMEM;
    if (rc == MQ_OK) {
        ClMessage m = {0};
        m.topic = mq_slice(topic, real_topic.len);
        m.queue_id = (uint32_t)(qid % t.write_queues);
        m.flag = rec->flag;
        m.born_ts = rec->born_ts;
        memcpy(m.born_host, rec->born_host, 8);
        m.reconsume_times = rec->reconsume_times;
        m.body = rec->body;
        m.props = mq_slice((const char *)buf, plen);
        ClAppendResult res;
        rc = store_put(s->cfg.store, &m, 1, &res);
    }
    free(buf);
    if (rc == MQ_ERR_FULL && plen == 0) {
        MQ_WARN("delay level %u offset %" PRIu64 ": properties too large, dropped", level, off);
        return MQ_OK;
    }
    return rc;
}

/* ---- the passes --------------------------------------------------------------*/

/* Delivers what is due in level 'level'; updates s->next_due_ms. */
static size_t run_level(Scheduler *s, uint32_t level, int64_t now) {
    Store *st = s->cfg.store;
    int64_t delay = s->levels[level - 1];
    uint64_t pos = atomic_load(&s->pos[level - 1]);
    uint64_t qmin = 0, qmax = 0;
    store_queue_range(st, SCHED_TOPIC, level - 1, &qmin, &qmax);
    if (pos < qmin) pos = qmin; /* retention took what was never delivered */
    size_t done = 0;
    while (pos < qmax && done < LEVEL_BATCH) {
        CqEntry ce;
        uint64_t off = 0, next = pos;
        size_t n = 0;
        if (store_read_queue(st, SCHED_TOPIC, level - 1, pos, 1, 64, NULL, 0, &ce, &off, &n,
                             &next) != MQ_OK)
            break;
        if (n == 0) {
            if (next > pos) pos = next; /* empty slots */
            else break;
            continue;
        }
        ClRecord rec;
        MappedFile *ref = NULL;
        if (store_read_msg(st, ce.phys_off, &rec, &ref) != MQ_OK) {
            mf_unref(&ref);
            pos = off + 1; /* aged out */
            continue;
        }
        /* store_ts is whole milliseconds, cut down: +1 so that no message
         * comes out before its store time + delay, even by a fraction. */
        int64_t due = rec.store_ts + delay + 1;
        if (due > now) {
            mf_unref(&ref);
            if (due < s->next_due_ms) s->next_due_ms = due;
            break;
        }
        int rc = reput(s, &rec, level, off);
        mf_unref(&ref);
        if (rc != MQ_OK) {
            MQ_WARN("delay level %u: cannot deliver offset %" PRIu64 ": %s (retrying)", level,
                    off, mq_strerror(rc));
            if (now + 1000 < s->next_due_ms) s->next_due_ms = now + 1000;
            break;
        }
        pos = off + 1;
        done++;
    }
    atomic_store(&s->pos[level - 1], pos);
    if (done == LEVEL_BATCH) s->next_due_ms = now; /* more right away */
    return done;
}

/* Saves "<W> <pos1> ... <posN>" (W: the log's write offset now). */
static int save(Scheduler *s) {
    char buf[32 + 21 * DELAY_LEVELS_MAX];
    uint64_t w = cl_write_offset(store_commitlog(s->cfg.store));
    int k = snprintf(buf, sizeof(buf), "%" PRIu64, w);
    for (size_t i = 0; i < s->n_known; i++)
        k += snprintf(buf + k, sizeof(buf) - (size_t)k, " %" PRIu64, atomic_load(&s->pos[i]));
    int rc = meta_kv_put(s->cfg.meta, SCHED_PROGRESS_KEY, buf);
    if (rc != MQ_OK) MQ_WARN("cannot save the delay positions: %s", mq_strerror(rc));
    return rc;
}

size_t sched_run_once(Scheduler *s, int64_t now, bool do_save) {
    pthread_mutex_lock(&s->run_mu);
    if (now < 0) now = now_ms(s);
    s->next_due_ms = now + SCHED_TICK_MS;
    size_t n = 0;
    for (uint32_t l = 1; l <= s->cfg.n_levels; l++) n += run_level(s, l, now);
    if (do_save) (void)save(s);
    pthread_mutex_unlock(&s->run_mu);
    return n;
}

static void *sched_main(void *arg) {
    Scheduler *s = arg;
    pthread_mutex_lock(&s->stop_mu);
    while (!s->stopping) {
        pthread_mutex_unlock(&s->stop_mu);
        int64_t t = mq_mono_ns();
        bool do_save = t - s->last_save_ns >= (int64_t)SCHED_SAVE_INTERVAL_MS * 1000000;
        if (do_save) s->last_save_ns = t;
        sched_run_once(s, -1, do_save);
        int64_t wait_ms = s->next_due_ms - now_ms(s);
        if (wait_ms > SCHED_TICK_MS) wait_ms = SCHED_TICK_MS;
        pthread_mutex_lock(&s->stop_mu);
        if (wait_ms <= 0 || s->stopping) continue;
        int64_t dl = mq_mono_ns() + wait_ms * 1000000;
        struct timespec ts = {(time_t)(dl / 1000000000), (long)(dl % 1000000000)};
        while (!s->stopping && pthread_cond_timedwait(&s->stop_cv, &s->stop_mu, &ts) != ETIMEDOUT) {
        }
    }
    pthread_mutex_unlock(&s->stop_mu);
    return NULL;
}

/* ---- open ---------------------------------------------------------------------*/

/* Loads the saved positions into s->pos and the scan start into '*w';
 * false when none were saved. */
static int load(Scheduler *s, bool *found, uint64_t *w) {
    char buf[32 + 21 * DELAY_LEVELS_MAX];
    int rc = meta_kv_get(s->cfg.meta, SCHED_PROGRESS_KEY, buf, sizeof(buf));
    *found = rc == MQ_OK;
    if (rc == MQ_ERR_NOTFOUND) return MQ_OK;
    if (rc != MQ_OK) return rc;
    char *p = buf, *end = NULL;
    errno = 0;
    *w = strtoull(p, &end, 10);
    if (end == p || errno) goto bad;
    for (size_t i = 0; *end == ' '; i++) {
        p = end + 1;
        uint64_t v = strtoull(p, &end, 10);
        if (end == p || errno || i >= DELAY_LEVELS_MAX) goto bad;
        atomic_store(&s->pos[i], v); /* kept even when fewer levels are configured now */
        if (i + 1 > s->n_known) s->n_known = i + 1;
    }
    if (*end != '\0') goto bad;
    return MQ_OK;
bad:
    MQ_ERROR("bad %s '%s' in meta.db", SCHED_PROGRESS_KEY, buf);
    return MQ_ERR_CORRUPT;
}

/* Moves each level past the re-puts written at or after 'w'. */
static void scan_reputs(Scheduler *s, uint64_t w) {
    CommitLog *cl = store_commitlog(s->cfg.store);
    uint64_t end = cl_write_offset(cl);
    uint64_t off = w;
    MappedFile *ref = NULL;
    size_t found = 0;
    while (off < end) {
        ClRecord rec;
        uint64_t next = 0;
        if (cl_next(cl, off, &rec, &next, &ref) != MQ_OK) break;
        MqSlice v;
        if (msg_prop_get(rec.props, MSG_PROP_DELAY_SRC, &v)) {
            const char *vs = v.ptr;
            const char *colon = memchr(vs, ':', v.len);
            uint64_t level = 0, qoff = 0;
            if (colon && parse_u64(mq_slice(vs, (size_t)(colon - vs)), DELAY_LEVELS_MAX, &level) &&
                parse_u64(mq_slice(colon + 1, v.len - (size_t)(colon + 1 - vs)), UINT64_MAX - 1,
                          &qoff) &&
                level >= 1 && level <= s->n_known &&
                atomic_load(&s->pos[level - 1]) <= qoff) {
                atomic_store(&s->pos[level - 1], qoff + 1);
                found++;
            }
        }
        off = next;
    }
    mf_unref(&ref);
    if (found) MQ_INFO("delay levels: %zu re-puts found after the saved positions", found);
}

static void sched_free(Scheduler *s) {
    pthread_cond_destroy(&s->stop_cv);
    pthread_mutex_destroy(&s->stop_mu);
    pthread_mutex_destroy(&s->run_mu);
    free(s);
}

int sched_open(const SchedConfig *cfg, Scheduler **out) {
    if (!cfg || !out || !cfg->store || !cfg->meta || !cfg->topics || !cfg->levels_ms ||
        cfg->n_levels == 0 || cfg->n_levels > DELAY_LEVELS_MAX)
        return MQ_ERR_INVAL;
    Scheduler *s = calloc(1, sizeof(*s));
    if (!s) return MQ_ERR_NOMEM;
    s->cfg = *cfg;
    memcpy(s->levels, cfg->levels_ms, cfg->n_levels * sizeof(int64_t));
    s->cfg.levels_ms = s->levels;
    s->n_known = cfg->n_levels;
    pthread_mutex_init(&s->run_mu, NULL);
    pthread_mutex_init(&s->stop_mu, NULL);
    mq_cond_init_mono(&s->stop_cv);
    bool found = false;
    uint64_t w = 0;
    int rc = store_wait_dispatched(cfg->store, 60000);
    if (rc == MQ_OK) rc = load(s, &found, &w);
    if (rc == MQ_OK && found) scan_reputs(s, w);
    /* Saved at once, so that a crash before the first periodic save finds
     * a scan start from before any re-put of this run. */
    if (rc == MQ_OK) rc = save(s);
    if (rc == MQ_OK && cfg->thread) {
        s->last_save_ns = mq_mono_ns();
        int e = pthread_create(&s->thread, NULL, sched_main, s);
        if (e != 0) {
            MQ_ERROR("cannot start the delay scheduler: %s", strerror(e));
            rc = MQ_ERR_IO;
        } else {
            s->running = true;
        }
    }
    if (rc != MQ_OK) {
        sched_free(s);
        return rc;
    }
    *out = s;
    return MQ_OK;
}

void sched_close(Scheduler *s) {
    if (!s) return;
    if (s->running) {
        pthread_mutex_lock(&s->stop_mu);
        s->stopping = true;
        pthread_cond_signal(&s->stop_cv);
        pthread_mutex_unlock(&s->stop_mu);
        pthread_join(s->thread, NULL);
    }
    pthread_mutex_lock(&s->run_mu);
    (void)save(s);
    pthread_mutex_unlock(&s->run_mu);
    sched_free(s);
}

uint64_t sched_position(Scheduler *s, uint32_t level) {
    if (!s || level == 0 || level > s->cfg.n_levels) return 0;
    return atomic_load(&s->pos[level - 1]);
}

uint64_t sched_pending(Scheduler *s) {
    uint64_t n = 0;
    for (uint32_t l = 1; s && l <= s->cfg.n_levels; l++) {
        uint64_t qmin = 0, qmax = 0;
        store_queue_range(s->cfg.store, SCHED_TOPIC, l - 1, &qmin, &qmax);
        uint64_t p = atomic_load(&s->pos[l - 1]);
        if (qmax > p) n += qmax - (p > qmin ? p : qmin);
    }
    return n;
}
