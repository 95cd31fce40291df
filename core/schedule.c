/*
 * schedule.c - delay levels and the timer wheel (see schedule.h).  One
 * thread walks every lane (a level's queue of SCHEDULE_TOPIC_XXXX or a
 * timer lane of RMQ_SYS_WHEEL_TIMER): each is a FIFO with one wait, so
 * only its head can be due next.  Calls the store (queue reads, appends),
 * the topic registry (real topics) and meta.db (positions).
 * store/FORMAT.md "Schedule topic" and "Timer wheel topic".
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

#define LANE_BATCH 1024 /* records one pass handles per lane at most */
#define PROPS_STACK 64   /* properties decoded without an allocation */
#define SRC_MAX 48       /* a __DELAY_SRC value: "t94:<20 digits>" */

/* The position and cache of one lane, its thread's own. */
typedef struct LaneState {
    uint64_t head_pos; /* the position whose head is due at 'head_due'; UINT64_MAX = none */
    int64_t head_due;  /* epoch ms */
    uint64_t expect;   /* one past the queue offset of the thread's last put into
                        * this lane (a hop); 0 = none */
} LaneState;

enum { LANE_LEVEL, LANE_TIMER };

/* One lane: a queue in which every record waits the same time, so only its
 * head can be due next.  Built for each pass from the tables below. */
typedef struct Lane {
    MqSlice topic;         /* SCHEDULE_TOPIC_XXXX or RMQ_SYS_WHEEL_TIMER */
    uint32_t queue;        /* its queue: level - 1 or the timer lane */
    int64_t wait_ms;       /* a record is due 1 ms after its store time + this */
    int kind;              /* LANE_LEVEL or LANE_TIMER */
    uint32_t id;           /* level (1..) or timer lane (0..): __DELAY_SRC, logs */
    _Atomic uint64_t *pos; /* next offset to handle */
    LaneState *st;
} Lane;

struct Scheduler {
    SchedConfig cfg;
    int64_t levels[DELAY_LEVELS_MAX];
    _Atomic uint64_t pos[DELAY_LEVELS_MAX]; /* next offset per level; written by the runner */
    size_t n_known;                         /* levels with a position: the configured
                                             * ones and any more saved by an earlier run
                                             * (kept, so growing the levels back does
                                             * not deliver their messages again) */
    _Atomic uint64_t tpos[SCHED_TIMER_LANES]; /* next offset per timer lane */
    LaneState lstate[DELAY_LEVELS_MAX];     /* runner only, under run_mu */
    LaneState tstate[SCHED_TIMER_LANES];
    int64_t max_hop_ms;                     /* longest timer hop, 1..SCHED_TIMER_HOP_MAX_MS */
    uint8_t *props_buf;                     /* CL_PROPS_MAX bytes: a re-put's properties */
    int64_t next_due_ms;                    /* earliest due head seen by the last pass */
    _Atomic int64_t kick_ms;                /* earliest due told by sched_notify since
                                             * the last pass began; INT64_MAX = none */
    atomic_uint_fast64_t delivered;         /* SchedStats */
    atomic_uint_fast64_t hops;
    atomic_uint_fast64_t dropped;
    int64_t last_save_ns;
    pthread_mutex_t run_mu;                 /* one pass at a time */
    pthread_mutex_t stop_mu;                /* also orders sched_notify's signal */
    pthread_cond_t stop_cv;
    bool stopping;
    bool running;
    pthread_t thread;
};

static const MqSlice SCHED_TOPIC = {MSG_SCHEDULE_TOPIC, sizeof(MSG_SCHEDULE_TOPIC) - 1};
static const MqSlice TIMER_TOPIC = {SCHED_TIMER_TOPIC, sizeof(SCHED_TIMER_TOPIC) - 1};

static int64_t now_ms(const Scheduler *s) {
    return s->cfg.clock ? s->cfg.clock(s->cfg.clock_arg) : mq_now_ms();
}

static bool name_is(MqSlice n, const char *s) {
    return n.len == strlen(s) && memcmp(n.ptr, s, n.len) == 0;
}

static bool slice_eq(MqSlice a, MqSlice b) {
    return a.len == b.len && memcmp(a.ptr, b.ptr, a.len) == 0;
}

/* ---- wrap ---------------------------------------------------------------------*/

/* Writes the properties of 'in' followed by the 'n' pairs of 'add' into
 * 'buf' and points '*out' (a copy of 'in') at them; 'reserve' more bytes
 * must stay under CL_PROPS_MAX. */
static int wrap_props(const ClMessage *in, const MsgProp *add, size_t n, size_t reserve,
                      uint8_t *buf, size_t cap, ClMessage *out) {
    size_t extra = 0;
    int rc = msg_props_encode(add, n, NULL, 0, &extra);
    if (rc != MQ_OK) return rc;
    if (in->props.len + extra > cap || in->props.len + extra + reserve > CL_PROPS_MAX)
        return MQ_ERR_FULL;
    if (in->props.len) memcpy(buf, in->props.ptr, in->props.len);
    size_t len = 0;
    rc = msg_props_encode(add, n, buf + in->props.len, cap - in->props.len, &len);
    if (rc != MQ_OK) return rc;
    *out = *in;
    out->props = mq_slice(buf, in->props.len + len);
    return MQ_OK;
}

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
    int rc = wrap_props(in, add, 3, 0, buf, cap, out);
    if (rc != MQ_OK) return rc;
    out->topic = SCHED_TOPIC;
    out->queue_id = level - 1;
    return MQ_OK;
}

int64_t sched_timer_hop_ms(uint32_t lane) {
    if (lane >= SCHED_TIMER_LANES) return 0;
    return (int64_t)(lane % 15 + 1) << (4 * (lane / 15));
}

_Static_assert((int64_t)(SCHED_TIMER_LANES - 1) % 15 + 1 == 5 &&
                   (SCHED_TIMER_LANES - 1) / 15 == 6,
               "the last timer lane waits 5 x 16^6 ms");

uint32_t sched_timer_lane(int64_t remaining_ms, int64_t max_hop_ms) {
    if (max_hop_ms > 0 && remaining_ms > max_hop_ms) remaining_ms = max_hop_ms;
    uint32_t lo = 0, hi = SCHED_TIMER_LANES - 1; /* hops ascend with the lane */
    while (lo < hi) {
        uint32_t mid = (lo + hi + 1) / 2;
        if (sched_timer_hop_ms(mid) <= remaining_ms) lo = mid;
        else hi = mid - 1;
    }
    return lo;
}

int sched_timer_wrap(const Scheduler *s, const ClMessage *in, int64_t deliver_at_ms,
                     int64_t now_ms_, uint8_t *buf, size_t cap, ClMessage *out) {
    if (!in || !buf || !out || deliver_at_ms <= now_ms_) return MQ_ERR_INVAL;
    char qid[16], at[24];
    snprintf(qid, sizeof(qid), "%u", in->queue_id);
    snprintf(at, sizeof(at), "%" PRId64, deliver_at_ms);
    MsgProp add[3] = {
        {mq_slice(MSG_PROP_REAL_TOPIC, strlen(MSG_PROP_REAL_TOPIC)), in->topic},
        {mq_slice(MSG_PROP_REAL_QID, strlen(MSG_PROP_REAL_QID)), mq_slice(qid, strlen(qid))},
        {mq_slice(MSG_PROP_TIMER_DELIVER_MS, strlen(MSG_PROP_TIMER_DELIVER_MS)),
         mq_slice(at, strlen(at))},
    };
    /* A hop adds __DELAY_SRC: room for it now, so that no hop can fail. */
    int rc = wrap_props(in, add, 3, sizeof(MSG_PROP_DELAY_SRC) + SRC_MAX, buf, cap, out);
    if (rc != MQ_OK) return rc;
    out->topic = TIMER_TOPIC;
    out->queue_id = sched_timer_lane(deliver_at_ms - now_ms_, s ? s->max_hop_ms : 0);
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

/* ---- a due record ---------------------------------------------------------------*/

/* Drops the record at 'off' of lane 'ln' with a warning saying 'why'. */
static int drop(Scheduler *s, const Lane *ln, uint64_t off, const char *why) {
    MQ_WARN("%s %u offset %" PRIu64 ": %s, dropped",
            ln->kind == LANE_TIMER ? "timer lane" : "delay level", ln->id, off, why);
    atomic_fetch_add(&s->dropped, 1);
    return MQ_OK;
}

/* Handles the due record 'rec' at 'off' of lane 'ln' at 'now': a level's
 * record, or a timer whose time has come, is re-put on its real topic
 * (its wrap properties removed); a timer whose time has not come is put
 * into the lane of what remains (properties kept).  Either way any old
 * __DELAY_SRC goes and "<level>:<off>" or "t<lane>:<off>" is added.
 * MQ_OK (also when dropped: no real topic any more, damaged properties),
 * or the append error (tried again later).
 *
 * Assumes: the caller holds run_mu (s->props_buf, the lane states). */
static int handle_due(Scheduler *s, const Lane *ln, const ClRecord *rec, uint64_t off,
                      int64_t now) {
    size_t n = 0;
    if (msg_props_decode(rec->props, NULL, 0, &n) != MQ_OK)
        return drop(s, ln, off, "damaged properties");
    MsgProp stack[PROPS_STACK];
    MsgProp *props = n + 1 <= PROPS_STACK ? stack : malloc((n + 1) * sizeof(*props));
    if (!props) return MQ_ERR_NOMEM;
    (void)msg_props_decode(rec->props, props, n, &n);
    MqSlice real_topic = {0}, real_qid = {0}, deliver = {0};
    for (size_t i = 0; i < n; i++) {
        if (name_is(props[i].name, MSG_PROP_REAL_TOPIC)) real_topic = props[i].value;
        else if (name_is(props[i].name, MSG_PROP_REAL_QID)) real_qid = props[i].value;
        else if (name_is(props[i].name, MSG_PROP_TIMER_DELIVER_MS)) deliver = props[i].value;
    }
    uint64_t deliver_at = 0;
    bool hop = false;
    if (ln->kind == LANE_TIMER) {
        if (parse_u64(deliver, INT64_MAX, &deliver_at)) hop = (int64_t)deliver_at > now;
        else MQ_WARN("timer lane %u offset %" PRIu64 ": no deliver time, delivered now", ln->id,
                     off);
    }
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        MqSlice nm = props[i].name;
        if (name_is(nm, MSG_PROP_DELAY_SRC)) continue;
        if (!hop && (name_is(nm, MSG_PROP_REAL_TOPIC) || name_is(nm, MSG_PROP_REAL_QID) ||
                     name_is(nm, MSG_PROP_DELAY) || name_is(nm, MSG_PROP_TIMER_DELIVER_MS)))
            continue;
        props[k++] = props[i];
    }
    char src[SRC_MAX];
    snprintf(src, sizeof(src), "%s%u:%" PRIu64, ln->kind == LANE_TIMER ? "t" : "", ln->id, off);
    props[k++] = (MsgProp){mq_slice(MSG_PROP_DELAY_SRC, strlen(MSG_PROP_DELAY_SRC)),
                           mq_slice(src, strlen(src))};

    ClMessage m = {0};
    m.flag = rec->flag;
    m.born_ts = rec->born_ts;
    memcpy(m.born_host, rec->born_host, 8);
    m.reconsume_times = rec->reconsume_times;
    m.body = rec->body;
    char topic[CL_TOPIC_MAX + 1];
    uint64_t qid = 0;
    int rc = MQ_OK;
    if (hop) {
        m.topic = TIMER_TOPIC;
        m.queue_id = sched_timer_lane((int64_t)deliver_at - now, s->max_hop_ms);
    } else if (real_topic.len == 0 || real_topic.len > CL_TOPIC_MAX ||
               !parse_u64(real_qid, UINT32_MAX, &qid)) {
        rc = drop(s, ln, off, "no real topic");
        goto out;
    } else {
        memcpy(topic, real_topic.ptr, real_topic.len);
        topic[real_topic.len] = '\0';
        MetaTopic t;
        if (topic_get(s->cfg.topics, topic, &t) != MQ_OK || t.write_queues == 0) {
            MQ_WARN("delayed message for topic '%s' dropped: the topic is gone", topic);
            atomic_fetch_add(&s->dropped, 1);
            goto out;
        }
        m.topic = mq_slice(topic, real_topic.len);
        m.queue_id = (uint32_t)(qid % t.write_queues);
    }
    size_t plen = 0;
    if (msg_props_encode(props, k, s->props_buf, CL_PROPS_MAX, &plen) != MQ_OK) {
        rc = drop(s, ln, off, "properties too large");
        goto out;
    }
    m.props = mq_slice((const char *)s->props_buf, plen);
    ClAppendResult res;
    rc = store_put(s->cfg.store, &m, 1, &res);
    if (rc != MQ_OK) goto out;
    if (hop) {
        atomic_fetch_add(&s->hops, 1);
        /* Its lane may have been passed already: note when it is due, and
         * that it must be dispatched before that lane can be read. */
        s->tstate[m.queue_id].expect = res.queue_off + 1;
        int64_t due = res.store_ts + sched_timer_hop_ms(m.queue_id) + 1;
        if (due < s->next_due_ms) s->next_due_ms = due;
    } else {
        atomic_fetch_add(&s->delivered, 1);
    }
out:
    if (props != stack) free(props);
    return rc;
}

/* ---- the passes --------------------------------------------------------------*/

/* Handles what is due in lane 'ln'; updates s->next_due_ms. */
static size_t run_lane(Scheduler *s, const Lane *ln, int64_t now) {
    Store *st = s->cfg.store;
    LaneState *ls = ln->st;
    uint64_t pos = atomic_load(ln->pos);
    if (ls->head_pos == pos && ls->head_due > now) { /* known, not due yet */
        if (ls->head_due < s->next_due_ms) s->next_due_ms = ls->head_due;
        return 0;
    }
    uint64_t qmin = 0, qmax = 0;
    store_queue_range(st, ln->topic, ln->queue, &qmin, &qmax);
    if (pos < qmin) pos = qmin; /* retention took what was never delivered */
    /* A hop put here is not in the queue yet: look again soon. */
    if (ls->expect > qmax && now + 1 < s->next_due_ms) s->next_due_ms = now + 1;
    size_t done = 0;
    while (pos < qmax && done < LANE_BATCH) {
        CqEntry ce;
        uint64_t off = 0, next = pos;
        size_t n = 0;
        if (store_read_queue(st, ln->topic, ln->queue, pos, 1, 64, NULL, 0, &ce, &off, &n,
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
        /* store_ts is whole milliseconds, cut down: +1 so that no record
         * comes out before its store time + wait, even by a fraction. */
        int64_t due = rec.store_ts + ln->wait_ms + 1;
        if (due > now) {
            mf_unref(&ref);
            ls->head_pos = pos;
            ls->head_due = due;
            if (due < s->next_due_ms) s->next_due_ms = due;
            break;
        }
        int rc = handle_due(s, ln, &rec, off, now);
        mf_unref(&ref);
        if (rc != MQ_OK) {
            MQ_WARN("%s %u: cannot deliver offset %" PRIu64 ": %s (retrying)",
                    ln->kind == LANE_TIMER ? "timer lane" : "delay level", ln->id, off,
                    mq_strerror(rc));
            if (now + 1000 < s->next_due_ms) s->next_due_ms = now + 1000;
            break;
        }
        pos = off + 1;
        done++;
    }
    atomic_store(ln->pos, pos);
    if (done == LANE_BATCH) s->next_due_ms = now; /* more right away */
    return done;
}

static Lane level_lane(Scheduler *s, uint32_t level) {
    return (Lane){SCHED_TOPIC, level - 1, s->levels[level - 1], LANE_LEVEL, level,
                  &s->pos[level - 1], &s->lstate[level - 1]};
}

static Lane timer_lane(Scheduler *s, uint32_t lane) {
    return (Lane){TIMER_TOPIC, lane, sched_timer_hop_ms(lane), LANE_TIMER, lane, &s->tpos[lane],
                  &s->tstate[lane]};
}

/* Writes "<W> <p0> ... <pn-1>" into 'buf'. */
static void format_positions(char *buf, size_t cap, uint64_t w, _Atomic uint64_t *pos,
                             size_t n) {
    int k = snprintf(buf, cap, "%" PRIu64, w);
    for (size_t i = 0; i < n; i++)
        k += snprintf(buf + k, cap - (size_t)k, " %" PRIu64, atomic_load(&pos[i]));
}

#define POSITIONS_TEXT_MAX (32 + 21 * (SCHED_TIMER_LANES > DELAY_LEVELS_MAX ? SCHED_TIMER_LANES \
                                                                           : DELAY_LEVELS_MAX))

/* Saves the levels' and the timer lanes' positions, each "<W> <pos>...",
 * with the same W: the log's write offset now. */
static int save(Scheduler *s) {
    char buf[POSITIONS_TEXT_MAX];
    uint64_t w = cl_write_offset(store_commitlog(s->cfg.store));
    format_positions(buf, sizeof(buf), w, s->pos, s->n_known);
    int rc = meta_kv_put(s->cfg.meta, SCHED_PROGRESS_KEY, buf);
    if (rc == MQ_OK) {
        format_positions(buf, sizeof(buf), w, s->tpos, SCHED_TIMER_LANES);
        rc = meta_kv_put(s->cfg.meta, SCHED_TIMER_PROGRESS_KEY, buf);
    }
    if (rc != MQ_OK) MQ_WARN("cannot save the delay positions: %s", mq_strerror(rc));
    return rc;
}

size_t sched_run_once(Scheduler *s, int64_t now, bool do_save) {
    pthread_mutex_lock(&s->run_mu);
    if (now < 0) now = now_ms(s);
    s->next_due_ms = now + SCHED_TICK_MS;
    size_t n = 0;
    for (uint32_t l = 1; l <= s->cfg.n_levels; l++) {
        Lane ln = level_lane(s, l);
        n += run_lane(s, &ln, now);
    }
    for (uint32_t q = 0; q < SCHED_TIMER_LANES; q++) {
        Lane ln = timer_lane(s, q);
        n += run_lane(s, &ln, now);
    }
    if (do_save) (void)save(s);
    pthread_mutex_unlock(&s->run_mu);
    return n;
}

void sched_notify(Scheduler *s, const ClMessage *m, int64_t store_ts) {
    if (!s || !m) return;
    int64_t wait = 0;
    if (slice_eq(m->topic, SCHED_TOPIC) && m->queue_id < s->cfg.n_levels)
        wait = s->levels[m->queue_id];
    else if (slice_eq(m->topic, TIMER_TOPIC) && m->queue_id < SCHED_TIMER_LANES)
        wait = sched_timer_hop_ms(m->queue_id);
    else
        return;
    int64_t due = store_ts + wait + 1;
    int64_t k = atomic_load(&s->kick_ms);
    while (due < k) {
        if (atomic_compare_exchange_weak(&s->kick_ms, &k, due)) {
            pthread_mutex_lock(&s->stop_mu); /* the thread reads kick_ms under it */
            pthread_cond_signal(&s->stop_cv);
            pthread_mutex_unlock(&s->stop_mu);
            return;
        }
    }
}

static int64_t min64(int64_t a, int64_t b) {
    return a < b ? a : b;
}

static void *sched_main(void *arg) {
    Scheduler *s = arg;
    pthread_mutex_lock(&s->stop_mu);
    while (!s->stopping) {
        pthread_mutex_unlock(&s->stop_mu);
        int64_t t = mq_mono_ns();
        bool do_save = t - s->last_save_ns >= (int64_t)SCHED_SAVE_INTERVAL_MS * 1000000;
        if (do_save) s->last_save_ns = t;
        /* The pass sees what was notified before it; what is notified
         * meanwhile stays, for the sleep below (a pass at once if due). */
        atomic_store(&s->kick_ms, INT64_MAX);
        sched_run_once(s, -1, do_save);
        int64_t wake = min64(s->next_due_ms, now_ms(s) + SCHED_TICK_MS);
        pthread_mutex_lock(&s->stop_mu);
        /* Sleeps until the earliest due head, or a notified one earlier. */
        while (!s->stopping) {
            int64_t wait_ms = min64(wake, atomic_load(&s->kick_ms)) - now_ms(s);
            if (wait_ms <= 0) break;
            struct timespec ts;
            mq_deadline_mono(&ts, wait_ms);
            if (pthread_cond_timedwait(&s->stop_cv, &s->stop_mu, &ts) == ETIMEDOUT) break;
        }
    }
    pthread_mutex_unlock(&s->stop_mu);
    return NULL;
}

/* ---- open ---------------------------------------------------------------------*/

/* Loads the positions saved under 'key', "<W> <p0> <p1> ...", into 'pos'
 * (at most 'cap'; their number into '*n') and W into '*w'; '*found' false
 * (and nothing changed) when none were saved. */
static int load_key(Scheduler *s, const char *key, _Atomic uint64_t *pos, size_t cap, size_t *n,
                    bool *found, uint64_t *w) {
    char buf[POSITIONS_TEXT_MAX];
    int rc = meta_kv_get(s->cfg.meta, key, buf, sizeof(buf));
    *found = rc == MQ_OK;
    *n = 0;
    if (rc == MQ_ERR_NOTFOUND) return MQ_OK;
    if (rc != MQ_OK) return rc;
    char *p = buf, *end = NULL;
    errno = 0;
    *w = strtoull(p, &end, 10);
    if (end == p || errno) goto bad;
    for (size_t i = 0; *end == ' '; i++) {
        p = end + 1;
        uint64_t v = strtoull(p, &end, 10);
        if (end == p || errno || i >= cap) goto bad;
        atomic_store(&pos[i], v);
        *n = i + 1;
    }
    if (*end != '\0') goto bad;
    return MQ_OK;
bad:
    MQ_ERROR("bad %s '%s' in meta.db", key, buf);
    return MQ_ERR_CORRUPT;
}

/* Loads both keys; '*w' is the smaller W of those found (the scan from it
 * covers both: a re-put before a key's own W is already counted in its
 * positions, and moves nothing). */
static int load(Scheduler *s, bool *found, uint64_t *w) {
    size_t n = 0;
    bool found_t = false;
    uint64_t w_t = 0;
    int rc = load_key(s, SCHED_PROGRESS_KEY, s->pos, DELAY_LEVELS_MAX, &n, found, w);
    /* kept even when fewer levels are configured now */
    if (n > s->n_known) s->n_known = n;
    if (rc == MQ_OK)
        rc = load_key(s, SCHED_TIMER_PROGRESS_KEY, s->tpos, SCHED_TIMER_LANES, &n, &found_t, &w_t);
    if (rc == MQ_OK && found_t && (!*found || w_t < *w)) *w = w_t;
    *found = *found || found_t;
    return rc;
}

/* Parses a __DELAY_SRC value: "<level>:<off>" or "t<lane>:<off>". */
static bool parse_src(MqSlice v, bool *timer, uint64_t *id, uint64_t *qoff) {
    const char *vs = v.ptr;
    *timer = v.len > 0 && vs[0] == 't';
    size_t skip = *timer ? 1 : 0;
    const char *colon = memchr(vs, ':', v.len);
    if (!colon) return false;
    MqSlice ids = mq_slice(vs + skip, (size_t)(colon - vs) - skip);
    MqSlice offs = mq_slice(colon + 1, v.len - (size_t)(colon + 1 - vs));
    return parse_u64(ids, *timer ? SCHED_TIMER_LANES - 1 : DELAY_LEVELS_MAX, id) &&
           parse_u64(offs, UINT64_MAX - 1, qoff);
}

/* Moves each lane past the re-puts written at or after 'w'. */
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
        bool timer = false;
        uint64_t id = 0, qoff = 0;
        if (msg_prop_get(rec.props, MSG_PROP_DELAY_SRC, &v) && parse_src(v, &timer, &id, &qoff)) {
            _Atomic uint64_t *pos = NULL;
            if (timer) pos = &s->tpos[id];
            else if (id >= 1 && id <= s->n_known) pos = &s->pos[id - 1];
            if (pos && atomic_load(pos) <= qoff) {
                atomic_store(pos, qoff + 1);
                found++;
            }
        }
        off = next;
    }
    mf_unref(&ref);
    if (found) MQ_INFO("delay levels and timers: %zu re-puts found after the saved positions",
                       found);
}

static void sched_free(Scheduler *s) {
    pthread_cond_destroy(&s->stop_cv);
    pthread_mutex_destroy(&s->stop_mu);
    pthread_mutex_destroy(&s->run_mu);
    free(s->props_buf);
    free(s);
}

int sched_open(const SchedConfig *cfg, Scheduler **out) {
    if (!cfg || !out || !cfg->store || !cfg->meta || !cfg->topics || !cfg->levels_ms ||
        cfg->n_levels == 0 || cfg->n_levels > DELAY_LEVELS_MAX)
        return MQ_ERR_INVAL;
    Scheduler *s = calloc(1, sizeof(*s));
    if (!s) return MQ_ERR_NOMEM;
    s->props_buf = malloc(CL_PROPS_MAX);
    if (!s->props_buf) {
        free(s);
        return MQ_ERR_NOMEM;
    }
    s->cfg = *cfg;
    memcpy(s->levels, cfg->levels_ms, cfg->n_levels * sizeof(int64_t));
    s->cfg.levels_ms = s->levels;
    s->n_known = cfg->n_levels;
    s->max_hop_ms = cfg->timer_max_hop_ms > 0 && cfg->timer_max_hop_ms < SCHED_TIMER_HOP_MAX_MS
                        ? cfg->timer_max_hop_ms
                        : SCHED_TIMER_HOP_MAX_MS;
    for (size_t i = 0; i < DELAY_LEVELS_MAX; i++) s->lstate[i].head_pos = UINT64_MAX;
    for (size_t i = 0; i < SCHED_TIMER_LANES; i++) s->tstate[i].head_pos = UINT64_MAX;
    atomic_init(&s->kick_ms, INT64_MAX);
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
        mq_stop_signal(&s->stop_cv, &s->stop_mu, &s->stopping);
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

uint64_t sched_timer_position(Scheduler *s, uint32_t lane) {
    if (!s || lane >= SCHED_TIMER_LANES) return 0;
    return atomic_load(&s->tpos[lane]);
}

/* Records of 'topic' queue 'q' at or past 'pos'. */
static uint64_t waiting(Scheduler *s, MqSlice topic, uint32_t q, _Atomic uint64_t *pos) {
    uint64_t qmin = 0, qmax = 0;
    store_queue_range(s->cfg.store, topic, q, &qmin, &qmax);
    uint64_t p = atomic_load(pos);
    if (p < qmin) p = qmin;
    return qmax > p ? qmax - p : 0;
}

uint64_t sched_level_pending(Scheduler *s, uint32_t level) {
    if (!s || level == 0 || level > s->cfg.n_levels) return 0;
    return waiting(s, SCHED_TOPIC, level - 1, &s->pos[level - 1]);
}

uint64_t sched_pending(Scheduler *s) {
    uint64_t n = 0;
    for (uint32_t l = 1; s && l <= s->cfg.n_levels; l++) n += sched_level_pending(s, l);
    return n;
}

uint64_t sched_timer_pending(Scheduler *s) {
    uint64_t n = 0;
    for (uint32_t q = 0; s && q < SCHED_TIMER_LANES; q++)
        n += waiting(s, TIMER_TOPIC, q, &s->tpos[q]);
    return n;
}

int64_t sched_next_due(Scheduler *s) {
    pthread_mutex_lock(&s->run_mu);
    int64_t t = s->next_due_ms;
    pthread_mutex_unlock(&s->run_mu);
    return t;
}

void sched_stats(Scheduler *s, SchedStats *out) {
    memset(out, 0, sizeof(*out));
    if (!s) return;
    out->delivered = atomic_load(&s->delivered);
    out->hops = atomic_load(&s->hops);
    out->dropped = atomic_load(&s->dropped);
}
