/*
 * pop.c - receive/ack consumption (see pop.h).
 *
 * Locks: 'map_rw' guards the queue map (read: lookups; write: insert).
 * Each PopQueue has its own mutex, held for its memory work and its
 * journal append; never two queue mutexes at once, never a queue mutex
 * while calling sqlite (topic creation, snapshots copy under the mutex
 * and write after).  PopQueues are freed only at close, so a pointer
 * taken under the map lock stays valid; a dropped queue is marked dead
 * and left in place.
 *
 * Journal invariant: a change is appended to the journal and then applied
 * in memory under the queue mutex, and the queue remembers the journal
 * offset of its last change.  'journal_next' (an atomic maximum of the
 * appended offsets + 1) read before a snapshot bounds every change
 * already applied, so replaying from it, skipping each queue's records at
 * or below its saved journal offset, rebuilds exactly the state at the
 * crash.
 */
#define _GNU_SOURCE
#include "pop.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "delay.h"
#include "msg.h"

#define MAP_BUCKETS_MIN 256
#define SCAN_MAX 4096          /* consume-queue entries one receive scans per queue */
#define KEEP_BATCH 256         /* expired deliveries one keeper pass takes per queue */
#define JOURNAL_READ 256       /* entries per journal read at replay */
#define KEY_NAME "pop_receipt_key"

/* Entry states.  Values are on disk (journal, pop_state). */
enum { ENT_DONE = 0, ENT_INFLIGHT = 1, ENT_WAIT = 2 };

/* Journal record types and flags (FORMAT.md "pop journal"). */
enum { REC_VERSION = 1, REC_STATE = 1, REC_DROP = 2 };
enum { RF_RETRY = 1, RF_CLEAR = 2 };
#define ENT_BYTES 23
#define NACK_GUARD_MS 10000    /* a nack sent through the scheduler keeps its entry in
                                * flight at least this long while it writes the copy */

typedef struct PopEntry {
    uint64_t queue_off;
    int64_t visible_ms; /* INFLIGHT: due (invisible until); WAIT: deliverable from */
    uint32_t seq;       /* delivery number, in receipt handles */
    uint16_t reconsume; /* failed deliveries before the current one */
    uint8_t state;
} PopEntry;

typedef struct PopQueue {
    pthread_mutex_t mu;
    struct PopQueue *next; /* map chain */
    struct PopQueue *all;  /* list of every queue, for the keeper */
    uint64_t hash;
    char group[MSG_NAME_MAX + 1];
    char topic[MSG_SYSTEM_NAME_MAX + 1];     /* subscribed topic */
    char src[MSG_SYSTEM_NAME_MAX + 1];       /* topic read: 'topic' or the retry topic */
    bool retry;
    uint32_t queue_id;
    /* guarded by mu: */
    uint64_t ack_off;
    uint64_t next_off;
    PopEntry *ents; /* ring of 'len' entries from 'head', ascending queue_off */
    size_t head, len, cap;
    size_t live;         /* entries not DONE */
    int64_t min_due_ms;  /* <= earliest INFLIGHT visible_ms; INT64_MAX none */
    int64_t journal_off; /* last journal record applied, -1 none */
    bool dirty;          /* changed since the last snapshot */
    bool dead;           /* dropped: ignored, deleted from meta.db at the next save */
    bool dead_saved;     /* its row deletion was saved */
} PopQueue;

struct PopEngine {
    PopConfig cfg;
    int64_t levels[DELAY_LEVELS_MAX];
    uint8_t key[RECEIPT_KEY_LEN];
    pthread_rwlock_t map_rw;
    PopQueue **buckets;
    size_t nbuckets, count;
    PopQueue *all;
    atomic_uint_fast64_t rr;          /* receive start rotation */
    atomic_int_fast64_t journal_next; /* max appended journal offset + 1 */
    pthread_mutex_t keep_mu;          /* one keeper round at a time */
    pthread_mutex_t stop_mu;
    pthread_cond_t stop_cv;
    bool stopping;
    bool keeper_running;
    pthread_t keeper;
    atomic_uint_fast64_t st_received, st_acked, st_nacked, st_expired, st_retried, st_dead,
        st_records;
};

/* ======================================================================
 * Small helpers
 * ====================================================================== */

static int64_t now_ms(const PopEngine *e) {
    return e->cfg.clock ? e->cfg.clock(e->cfg.clock_arg) : mq_now_ms();
}

/* One entry as stored in journal records and pop_state (ENT_BYTES,
 * little-endian; store/FORMAT.md "pop_state"). */
static void put_entry(uint8_t *p, const PopEntry *en) {
    mq_put_u64(p, en->queue_off);
    mq_put_u64(p + 8, (uint64_t)en->visible_ms);
    mq_put_u32(p + 16, en->seq);
    mq_put_u16(p + 20, en->reconsume);
    p[22] = en->state;
}

static PopEntry get_entry(const uint8_t *p) {
    return (PopEntry){.queue_off = mq_get_u64(p),
                      .visible_ms = (int64_t)mq_get_u64(p + 8),
                      .seq = mq_get_u32(p + 16),
                      .reconsume = mq_get_u16(p + 20),
                      .state = p[22]};
}

static uint64_t key_hash(const char *group, const char *topic, bool retry, uint32_t qid) {
    uint64_t h = mq_hash64(group, strlen(group));
    h = h * 31 + mq_hash64(topic, strlen(topic));
    return h ^ ((uint64_t)qid * 0x9e3779b97f4a7c15ull) ^ (retry ? 0x5bd1e995u : 0);
}

static PopEntry *ent_at(PopQueue *q, size_t i) {
    return &q->ents[(q->head + i) % q->cap];
}

/* Index of the entry for 'off', or -1. */
static ptrdiff_t ent_find(PopQueue *q, uint64_t off) {
    size_t lo = 0, hi = q->len;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        uint64_t v = ent_at(q, mid)->queue_off;
        if (v == off) return (ptrdiff_t)mid;
        if (v < off)
            lo = mid + 1;
        else
            hi = mid;
    }
    return -1;
}

static int ent_push(PopQueue *q, const PopEntry *en) {
    if (q->len == q->cap) {
        size_t cap = q->cap ? q->cap * 2 : 16;
        PopEntry *n = malloc(cap * sizeof(*n));
        if (!n) return MQ_ERR_NOMEM;
        for (size_t i = 0; i < q->len; i++) n[i] = *ent_at(q, i);
        free(q->ents);
        q->ents = n;
        q->cap = cap;
        q->head = 0;
    }
    MQ_ASSERT(q->len == 0 || ent_at(q, q->len - 1)->queue_off < en->queue_off);
    q->ents[(q->head + q->len) % q->cap] = *en;
    q->len++;
    if (en->state != ENT_DONE) q->live++;
    return MQ_OK;
}

/* Drops DONE entries from the front and moves ack_off up to the first
 * live entry (or next_off). */
static void compact(PopQueue *q) {
    while (q->len > 0 && ent_at(q, 0)->state == ENT_DONE) {
        q->head = (q->head + 1) % q->cap;
        q->len--;
    }
    uint64_t ack = q->len > 0 ? ent_at(q, 0)->queue_off : q->next_off;
    if (ack > q->ack_off) q->ack_off = ack;
}

static void clear_entries(PopQueue *q) {
    q->head = q->len = q->live = 0;
    q->min_due_ms = INT64_MAX;
}

/* Sets an existing entry's state, keeping 'live' and 'min_due_ms'. */
static void ent_set(PopQueue *q, PopEntry *en, const PopEntry *to) {
    if (en->state != ENT_DONE) q->live--;
    *en = *to;
    if (en->state != ENT_DONE) q->live++;
    if (en->state == ENT_INFLIGHT && en->visible_ms < q->min_due_ms)
        q->min_due_ms = en->visible_ms;
}

/* ======================================================================
 * Journal records
 * ====================================================================== */

/* A change of one queue, built under its mutex before it is appended. */
typedef struct Change {
    uint8_t flags;
    uint64_t ack_off, next_off;
    PopEntry *ents;
    size_t n, cap;
} Change;

static int change_add(Change *c, const PopEntry *en) {
    if (c->n == c->cap) {
        size_t cap = c->cap ? c->cap * 2 : 32;
        PopEntry *n = realloc(c->ents, cap * sizeof(*n));
        if (!n) return MQ_ERR_NOMEM;
        c->ents = n;
        c->cap = cap;
    }
    c->ents[c->n++] = *en;
    return MQ_OK;
}

static uint8_t *encode_head(uint8_t *p, uint8_t type, uint8_t flags, const char *group,
                            const char *topic) {
    size_t gl = strlen(group), tl = strlen(topic);
    MQ_ASSERT(gl <= 255 && tl <= 255);
    *p++ = REC_VERSION;
    *p++ = type;
    *p++ = flags;
    *p++ = (uint8_t)gl;
    *p++ = (uint8_t)tl;
    memcpy(p, group, gl);
    p += gl;
    memcpy(p, topic, tl);
    return p + tl;
}

static int journal_append(PopEngine *e, const uint8_t *body, size_t len, int64_t *journal_off) {
    ClMessage m = {0};
    m.topic = mq_slice(POP_JOURNAL_TOPIC, sizeof(POP_JOURNAL_TOPIC) - 1);
    m.queue_id = 0;
    m.born_ts = now_ms(e);
    memcpy(m.born_host, e->cfg.store_host, 8);
    m.body = mq_slice((const char *)body, len);
    m.props = mq_slice("", 0);
    ClAppendResult res;
    /* Nobody waits for journal records to be dispatched (replay reads
     * them after store_wait_dispatched): don't wake the dispatcher. */
    int rc = store_put_lazy(e->cfg.store, &m, 1, &res, true);
    if (rc != MQ_OK) return rc;
    int64_t next = (int64_t)res.queue_off + 1;
    int_fast64_t cur = atomic_load(&e->journal_next);
    while (cur < next && !atomic_compare_exchange_weak(&e->journal_next, &cur, next)) {
    }
    atomic_fetch_add(&e->st_records, 1);
    *journal_off = (int64_t)res.queue_off;
    return MQ_OK;
}

/* Appends the STATE record of 'c' for 'q'.  Queue mutex held. */
static int journal_state(PopEngine *e, PopQueue *q, const Change *c, int64_t *journal_off) {
    size_t len = 5 + strlen(q->group) + strlen(q->topic) + 4 + 8 + 8 + 4 + c->n * ENT_BYTES;
    uint8_t stack[2048];
    uint8_t *buf = len <= sizeof(stack) ? stack : malloc(len);
    if (!buf) return MQ_ERR_NOMEM;
    uint8_t flags = (uint8_t)(c->flags | (q->retry ? RF_RETRY : 0));
    uint8_t *p = encode_head(buf, REC_STATE, flags, q->group, q->topic);
    mq_put_u32(p, q->queue_id);
    mq_put_u64(p + 4, c->ack_off);
    mq_put_u64(p + 12, c->next_off);
    mq_put_u32(p + 20, (uint32_t)c->n);
    p += 24;
    for (size_t i = 0; i < c->n; i++, p += ENT_BYTES) put_entry(p, &c->ents[i]);
    MQ_ASSERT((size_t)(p - buf) == len);
    int rc = journal_append(e, buf, len, journal_off);
    if (buf != stack) free(buf);
    return rc;
}

/* Applies 'c' to 'q' (after its journal append, or at replay). */
static int apply_change(PopQueue *q, const Change *c, int64_t journal_off) {
    if (c->flags & RF_CLEAR) {
        clear_entries(q);
        q->ack_off = c->ack_off;
        q->next_off = c->next_off;
    }
    if (c->next_off > q->next_off) q->next_off = c->next_off;
    for (size_t i = 0; i < c->n; i++) {
        const PopEntry *en = &c->ents[i];
        if (en->queue_off < q->ack_off) continue; /* done long ago */
        ptrdiff_t at = ent_find(q, en->queue_off);
        if (at >= 0) {
            ent_set(q, ent_at(q, (size_t)at), en);
        } else if (q->len == 0 || ent_at(q, q->len - 1)->queue_off < en->queue_off) {
            int rc = ent_push(q, en);
            if (rc != MQ_OK) return rc;
            if (en->state == ENT_INFLIGHT && en->visible_ms < q->min_due_ms)
                q->min_due_ms = en->visible_ms;
        }
        /* else: an entry already compacted away (done) */
    }
    compact(q);
    if (c->ack_off > q->ack_off && q->len == 0) q->ack_off = c->ack_off;
    q->journal_off = journal_off;
    q->dirty = true;
    return MQ_OK;
}

/* Appends 'c' then applies it.  Queue mutex held.  Nothing changes when
 * the append fails. */
static int commit_change(PopEngine *e, PopQueue *q, Change *c) {
    int64_t joff = -1;
    int rc = journal_state(e, q, c, &joff);
    if (rc != MQ_OK) return rc;
    return apply_change(q, c, joff);
}

/* ======================================================================
 * The queue map
 * ====================================================================== */

static PopQueue *map_find(PopEngine *e, uint64_t h, const char *group, const char *topic,
                          bool retry, uint32_t qid) {
    for (PopQueue *q = e->buckets[h & (e->nbuckets - 1)]; q; q = q->next) {
        if (q->hash == h && q->queue_id == qid && q->retry == retry && !q->dead &&
            strcmp(q->group, group) == 0 && strcmp(q->topic, topic) == 0)
            return q;
    }
    return NULL;
}

static void map_grow(PopEngine *e) {
    size_t nb = e->nbuckets * 2;
    PopQueue **b = calloc(nb, sizeof(*b));
    if (!b) return; /* chains just get longer */
    for (size_t i = 0; i < e->nbuckets; i++) {
        for (PopQueue *q = e->buckets[i], *nx; q; q = nx) {
            nx = q->next;
            q->next = b[q->hash & (nb - 1)];
            b[q->hash & (nb - 1)] = q;
        }
    }
    free(e->buckets);
    e->buckets = b;
    e->nbuckets = nb;
}

/* The start of a queue never received from: the group's consumer offset
 * when it has one (pull commits, resets); else, as RocketMQ does for a
 * new group, the first message when the queue still holds its first
 * message ever (min 0), otherwise only new messages.  A retry source
 * starts at its first message: retries exist only for groups that
 * received. */
static uint64_t initial_offset(PopEngine *e, PopQueue *q) {
    uint64_t qmin = 0, qmax = 0;
    store_queue_range(e->cfg.store, mq_slice(q->src, strlen(q->src)), q->queue_id, &qmin, &qmax);
    if (q->retry) return qmin;
    uint64_t off = 0;
    if (meta_offset_get(e->cfg.meta, q->group, q->topic, q->queue_id, &off) == MQ_OK) return off;
    return qmin == 0 ? 0 : qmax;
}

enum { GET_ONLY, GET_CREATE, GET_CREATE_BARE };

/* Looks the queue up; GET_CREATE creates a missing one at its
 * initial_offset, GET_CREATE_BARE at 0 for the caller to set (loading:
 * meta must not be called then).  NULL when absent and not created, or
 * out of memory. */
static PopQueue *queue_get(PopEngine *e, const char *group, const char *topic, bool retry,
                           uint32_t qid, int create) {
    uint64_t h = key_hash(group, topic, retry, qid);
    pthread_rwlock_rdlock(&e->map_rw);
    PopQueue *q = map_find(e, h, group, topic, retry, qid);
    pthread_rwlock_unlock(&e->map_rw);
    if (q || create == GET_ONLY) return q;
    if (strlen(group) > MSG_NAME_MAX || strlen(topic) > MSG_SYSTEM_NAME_MAX) return NULL;
    PopQueue *nq = calloc(1, sizeof(*nq));
    if (!nq) return NULL;
    pthread_mutex_init(&nq->mu, NULL);
    nq->hash = h;
    snprintf(nq->group, sizeof(nq->group), "%s", group);
    snprintf(nq->topic, sizeof(nq->topic), "%s", topic);
    if (retry)
        group_retry_topic(group, nq->src, sizeof(nq->src));
    else
        snprintf(nq->src, sizeof(nq->src), "%s", topic);
    nq->retry = retry;
    nq->queue_id = qid;
    nq->min_due_ms = INT64_MAX;
    nq->journal_off = -1;
    if (create == GET_CREATE) nq->ack_off = nq->next_off = initial_offset(e, nq);
    pthread_rwlock_wrlock(&e->map_rw);
    q = map_find(e, h, group, topic, retry, qid);
    if (q) {
        pthread_rwlock_unlock(&e->map_rw);
        pthread_mutex_destroy(&nq->mu);
        free(nq);
        return q;
    }
    if (e->count >= e->nbuckets) map_grow(e);
    nq->next = e->buckets[h & (e->nbuckets - 1)];
    e->buckets[h & (e->nbuckets - 1)] = nq;
    nq->all = e->all;
    e->all = nq;
    e->count++;
    pthread_rwlock_unlock(&e->map_rw);
    return nq;
}

/* A snapshot of the list of every queue (dead ones too). */
static PopQueue **queue_list(PopEngine *e, size_t *n) {
    pthread_rwlock_rdlock(&e->map_rw);
    PopQueue **v = malloc((e->count + 1) * sizeof(*v));
    size_t k = 0;
    if (v)
        for (PopQueue *q = e->all; q; q = q->all) v[k++] = q;
    pthread_rwlock_unlock(&e->map_rw);
    *n = k;
    return v;
}

/* ======================================================================
 * Receive
 * ====================================================================== */

/* The state of one receive while it walks the sources. */
typedef struct Walk {
    PopEngine *e;
    const PopRequest *req;
    PopDelivery *out;
    size_t n;
    int64_t now;
    int err;         /* first append error */
    bool more;       /* a queue was left with messages not looked at */
    ReceiptKey rkey; /* MAC key of the group and topic */
} Walk;

static void deliver(Walk *w, PopQueue *q, const PopEntry *en, uint64_t phys_off) {
    PopDelivery *d = &w->out[w->n++];
    d->phys_off = phys_off;
    d->reconsume_times = en->reconsume;
    d->retry = q->retry;
    Receipt r = {.retry = q->retry, .queue_id = q->queue_id, .queue_off = en->queue_off,
                 .seq = en->seq};
    receipt_encode(&w->rkey, &r, d->handle);
}

/* Is the record one this receive wants: the filter, and for a retry
 * source, meant for the subscribed topic. */
static bool wanted(const Walk *w, const PopQueue *q, const ClRecord *rec) {
    if (q->retry) {
        MqSlice t;
        if (!msg_prop_get(rec->props, MSG_PROP_RETRY_TOPIC, &t) || t.len != strlen(q->topic) ||
            memcmp(t.ptr, q->topic, t.len) != 0)
            return false;
    }
    return filter_matches_all(w->req->filter) || filter_match(w->req->filter, rec);
}

/* Physical offset of the message at 'off' of 'q's source; false if gone. */
static bool phys_of(PopEngine *e, PopQueue *q, uint64_t off, uint64_t *phys) {
    CqEntry ce;
    size_t n = 0;
    uint64_t next = 0;
    if (store_read_queue(e->cfg.store, mq_slice(q->src, strlen(q->src)), q->queue_id, off, 1, 1,
                         NULL, 0, &ce, NULL, &n, &next) != MQ_OK || n != 1)
        return false;
    *phys = ce.phys_off;
    return true;
}

/* Orderly: redelivers the WAIT entries at the front that are due.  Sets
 * '*blocked' when the queue must not hand out new messages yet.  Builds
 * 'c' (and the matching deliveries in 'pend'). */
typedef struct Pending {
    PopEntry en;
    uint64_t phys_off;
} Pending;

static int pend_add(Pending **p, size_t *n, size_t *cap, const PopEntry *en, uint64_t phys) {
    if (*n == *cap) {
        size_t c = *cap ? *cap * 2 : 32;
        Pending *v = realloc(*p, c * sizeof(*v));
        if (!v) return MQ_ERR_NOMEM;
        *p = v;
        *cap = c;
    }
    (*p)[(*n)++] = (Pending){*en, phys};
    return MQ_OK;
}

/* Takes what 'q' can give to this receive.  Queue mutex held. */
static void take_from(Walk *w, PopQueue *q) {
    PopEngine *e = w->e;
    const PopRequest *req = w->req;
    bool orderly = req->group->orderly && !q->retry;
    size_t want = req->max_messages - w->n;
    if (q->live >= e->cfg.inflight_max) return;
    if (want > e->cfg.inflight_max - q->live) want = e->cfg.inflight_max - q->live;

    Change c = {.ack_off = q->ack_off, .next_off = q->next_off};
    uint64_t ack_before = q->ack_off;
    Pending *pend = NULL;
    size_t np = 0, pcap = 0;
    int rc = MQ_OK;

    if (orderly && q->live > 0) {
        /* Anything in flight: the queue waits.  Else its WAIT entries go
         * first, in order, once due; new messages only after all of them. */
        for (size_t i = 0; i < q->len; i++)
            if (ent_at(q, i)->state == ENT_INFLIGHT) goto out_free;
        size_t i = 0;
        for (; i < q->len && rc == MQ_OK && np < want; i++) {
            PopEntry *en = ent_at(q, i);
            if (en->state != ENT_WAIT) continue;
            if (en->visible_ms > w->now) break;
            uint64_t phys = 0;
            PopEntry to = *en;
            to.state = ENT_INFLIGHT;
            to.seq = en->seq + 1;
            to.visible_ms = w->now + req->invisible_ms;
            if (!phys_of(e, q, en->queue_off, &phys)) {
                to.state = ENT_DONE; /* aged out: nothing to wait for */
                rc = change_add(&c, &to);
                continue;
            }
            rc = change_add(&c, &to);
            if (rc == MQ_OK) rc = pend_add(&pend, &np, &pcap, &to, phys);
        }
        for (; i < q->len; i++)
            if (ent_at(q, i)->state == ENT_WAIT) goto commit; /* still waiting */
        want -= np;
    }

    if (want > 0) {
        /* The first delivery number of a message: the journal position
         * now, + 1.  Each record of this queue moves it up, so a message
         * delivered again after an offset reset or a drop (when its entry
         * starts afresh) never gets a number an old handle carries. */
        uint32_t fresh_seq = (uint32_t)atomic_load(&e->journal_next) + 1;
        if (fresh_seq == 0) fresh_seq = 1;
        MqSlice src = mq_slice(q->src, strlen(q->src));
        uint64_t qmin = 0, qmax = 0;
        store_queue_range(e->cfg.store, src, q->queue_id, &qmin, &qmax);
        if (c.next_off < qmin) {
            /* Retention removed messages never handed out. */
            c.next_off = qmin;
            if (q->len == 0) c.ack_off = qmin;
        }
        if (c.next_off < qmax) {
            /* Read until 'want' are taken, the scan budget is spent or the
             * queue ends: an SQL92 filter (no tag prefilter) may reject a
             * long run before it matches. */
            size_t nh = 0;
            const uint64_t *hashes = filter_tag_hashes(req->filter, &nh);
            CqEntry *ces = malloc(want * sizeof(*ces));
            uint64_t *offs = malloc(want * sizeof(*offs));
            if (!ces || !offs) rc = MQ_ERR_NOMEM;
            size_t taken = 0, scanned = 0;
            while (rc == MQ_OK && taken < want && scanned < SCAN_MAX && c.next_off < qmax) {
                size_t n = 0;
                uint64_t next = c.next_off;
                rc = store_read_queue(e->cfg.store, src, q->queue_id, c.next_off, want - taken,
                                      SCAN_MAX - scanned, nh ? hashes : NULL, nh, ces, offs, &n,
                                      &next);
                if (rc != MQ_OK || next <= c.next_off) break;
                scanned += next - c.next_off;
                c.next_off = next;
                for (size_t i = 0; rc == MQ_OK && i < n; i++) {
                    ClRecord rec;
                    MappedFile *ref = NULL;
                    bool ok = store_read_msg(e->cfg.store, ces[i].phys_off, &rec, &ref) ==
                                  MQ_OK &&
                              wanted(w, q, &rec);
                    uint16_t rt = ok ? (uint16_t)(rec.reconsume_times > 65535
                                                      ? 65535
                                                      : rec.reconsume_times)
                                     : 0;
                    mf_unref(&ref);
                    if (!ok) continue;
                    PopEntry en = {.queue_off = offs[i],
                                   .visible_ms = w->now + req->invisible_ms,
                                   .seq = fresh_seq,
                                   .reconsume = rt,
                                   .state = ENT_INFLIGHT};
                    rc = change_add(&c, &en);
                    if (rc == MQ_OK) rc = pend_add(&pend, &np, &pcap, &en, ces[i].phys_off);
                    taken++;
                }
            }
            if (c.next_off < qmax) w->more = true;
            free(ces);
            free(offs);
        }
    }

commit:
    if (rc == MQ_OK && (c.n > 0 || c.next_off != q->next_off || c.ack_off != q->ack_off)) {
        if (c.n == 0 && q->len == 0 && c.next_off > c.ack_off) c.ack_off = c.next_off;
        rc = commit_change(e, q, &c);
        if (rc == MQ_OK) {
            for (size_t i = 0; i < np; i++) deliver(w, q, &pend[i].en, pend[i].phys_off);
            atomic_fetch_add(&e->st_received, np);
            if (!q->retry && q->ack_off != ack_before)
                meta_offset_set(e->cfg.meta, q->group, q->topic, q->queue_id, q->ack_off);
        }
    }
    if (rc != MQ_OK && w->err == MQ_OK) w->err = rc;
out_free:
    free(pend);
    free(c.ents);
}

int pop_receive(PopEngine *e, const PopRequest *req, PopDelivery *out, size_t *n) {
    if (!e || !req || !req->group || !req->topic || !req->filter || !out || !n ||
        req->max_messages == 0 || req->max_messages > POP_MAX_MESSAGES || req->invisible_ms <= 0)
        return MQ_ERR_INVAL;
    *n = 0;
    char retry_topic[MSG_SYSTEM_NAME_MAX + 1];
    group_retry_topic(req->group->name, retry_topic, sizeof(retry_topic));
    MetaTopic rt;
    uint32_t retry_queues = 0;
    if (!req->group->orderly && topic_get(e->cfg.topics, retry_topic, &rt) == MQ_OK)
        retry_queues = rt.read_queues;
    size_t total = (size_t)req->read_queues + retry_queues;
    if (total == 0) return MQ_OK;
    Walk w = {.e = e, .req = req, .out = out, .n = 0, .now = now_ms(e), .err = MQ_OK};
    receipt_key_derive(e->key, req->group->name, req->topic, &w.rkey);
    size_t start = (size_t)(atomic_fetch_add(&e->rr, 1) % total);
    for (size_t k = 0; k < total && w.n < req->max_messages; k++) {
        size_t i = (start + k) % total;
        bool retry = i >= req->read_queues;
        uint32_t qid = (uint32_t)(retry ? i - req->read_queues : i);
        PopQueue *q = queue_get(e, req->group->name, req->topic, retry, qid, GET_CREATE);
        if (!q) {
            if (w.err == MQ_OK) w.err = MQ_ERR_NOMEM;
            continue;
        }
        pthread_mutex_lock(&q->mu);
        if (!q->dead) take_from(&w, q);
        pthread_mutex_unlock(&q->mu);
    }
    *n = w.n;
    if (req->more) *req->more = w.more;
    return w.n > 0 ? MQ_OK : w.err;
}

/* ======================================================================
 * Ack and nack
 * ====================================================================== */

const char *pop_result_name(PopResult r) {
    switch (r) {
    case POP_OK: return "OK";
    case POP_EXPIRED: return "EXPIRED";
    default: return "INVALID";
    }
}

typedef struct Handle {
    Receipt r;
    size_t idx;
} Handle;

static int cmp_handle(const void *a, const void *b) {
    const Receipt *x = &((const Handle *)a)->r, *y = &((const Handle *)b)->r;
    if (x->retry != y->retry) return x->retry ? 1 : -1;
    if (x->queue_id != y->queue_id) return x->queue_id < y->queue_id ? -1 : 1;
    if (x->queue_off != y->queue_off) return x->queue_off < y->queue_off ? -1 : 1;
    if (x->seq != y->seq) return x->seq < y->seq ? -1 : 1;
    /* qsort need not be stable: the earlier of two equal handles wins */
    size_t i = ((const Handle *)a)->idx, j = ((const Handle *)b)->idx;
    return i < j ? -1 : i > j;
}

/* Wakes receivers of an orderly topic after its queue freed up. */
static void kick(PopEngine *e, const PopQueue *q) {
    if (e->cfg.longpoll)
        lp_arrival(e->cfg.longpoll, mq_slice(q->topic, strlen(q->topic)), q->queue_id,
                   UINT64_MAX);
}

int pop_ack(PopEngine *e, const MetaGroup *group, const char *topic, const char *const *handles,
            const size_t *lens, size_t n, PopResult *results) {
    if (!e || !group || !topic || (n && (!handles || !lens || !results))) return MQ_ERR_INVAL;
    Handle *hs = malloc((n ? n : 1) * sizeof(*hs));
    if (!hs) return MQ_ERR_NOMEM;
    size_t nh = 0;
    ReceiptKey rkey;
    receipt_key_derive(e->key, group->name, topic, &rkey);
    for (size_t i = 0; i < n; i++) {
        results[i] = POP_INVALID;
        Receipt r;
        if (receipt_decode(&rkey, handles[i], lens[i], &r) == MQ_OK)
            hs[nh++] = (Handle){r, i};
    }
    /* Clients ack in the order they received: usually sorted already. */
    bool sorted = true;
    for (size_t i = 1; i < nh && sorted; i++) sorted = cmp_handle(&hs[i - 1], &hs[i]) < 0;
    if (!sorted) qsort(hs, nh, sizeof(*hs), cmp_handle);
    int64_t now = now_ms(e);
    int err = MQ_OK;
    for (size_t i = 0; i < nh;) {
        size_t j = i;
        while (j < nh && hs[j].r.retry == hs[i].r.retry && hs[j].r.queue_id == hs[i].r.queue_id)
            j++;
        PopQueue *q = queue_get(e, group->name, topic, hs[i].r.retry, hs[i].r.queue_id, GET_ONLY);
        for (size_t k = i; k < j; k++) results[hs[k].idx] = POP_EXPIRED;
        if (!q) {
            i = j;
            continue;
        }
        pthread_mutex_lock(&q->mu);
        Change c = {.ack_off = q->ack_off, .next_off = q->next_off};
        bool was_full = q->live >= e->cfg.inflight_max;
        int rc = MQ_OK;
        for (size_t k = i; k < j && rc == MQ_OK && !q->dead; k++) {
            ptrdiff_t at = ent_find(q, hs[k].r.queue_off);
            if (at < 0) continue;
            PopEntry *en = ent_at(q, (size_t)at);
            if (en->state != ENT_INFLIGHT || en->seq != hs[k].r.seq || en->visible_ms <= now)
                continue;
            if (c.n > 0 && c.ents[c.n - 1].queue_off == en->queue_off) continue; /* twice */
            PopEntry to = *en;
            to.state = ENT_DONE;
            rc = change_add(&c, &to);
        }
        if (rc == MQ_OK && c.n > 0) rc = commit_change(e, q, &c);
        if (rc == MQ_OK) {
            /* Every handle whose entry is now done by this change is OK. */
            for (size_t k = i, m = 0; k < j && m < c.n; k++) {
                if (hs[k].r.queue_off == c.ents[m].queue_off && hs[k].r.seq == c.ents[m].seq) {
                    results[hs[k].idx] = POP_OK;
                    m++;
                }
            }
            atomic_fetch_add(&e->st_acked, c.n);
            if (c.n > 0 && !q->retry)
                meta_offset_set(e->cfg.meta, q->group, q->topic, q->queue_id, q->ack_off);
        } else if (err == MQ_OK) {
            err = rc;
        }
        /* Receivers may wait for this queue: an orderly one that is done
         * with its run, or one that was at the in-flight limit. */
        bool freed = c.n > 0 && ((group->orderly && q->live == 0) ||
                                 (was_full && q->live < e->cfg.inflight_max));
        pthread_mutex_unlock(&q->mu);
        if (freed) kick(e, q);
        free(c.ents);
        i = j;
    }
    free(hs);
    return err;
}

/* How long a copy waits before it reaches its topic (the scheduler's
 * delay level or timer lane); zero: at once. */
typedef struct SendDelay {
    uint32_t level;     /* 1..n: that delay level */
    int64_t deliver_at; /* > 0: a timer, epoch ms */
} SendDelay;

static int send_back(PopEngine *e, const PopQueue *q, uint64_t phys_off, const char *dest,
                     uint32_t dest_queues, uint32_t reconsume, SendDelay delay);
static bool phys_of(PopEngine *e, PopQueue *q, uint64_t off, uint64_t *phys);

/* Ends the in-flight entry of 'queue_off' with sequence 'seq' (its copy
 * went to the retry or dead-letter topic): done, journaled; the group's
 * offset follows; waiters of a full queue are woken. */
static void end_delivery(PopEngine *e, PopQueue *q, uint64_t queue_off, uint32_t seq) {
    pthread_mutex_lock(&q->mu);
    ptrdiff_t at = q->dead ? -1 : ent_find(q, queue_off);
    PopEntry *en = at >= 0 ? ent_at(q, (size_t)at) : NULL;
    bool freed = false;
    int rc = MQ_OK;
    if (en && en->state == ENT_INFLIGHT && en->seq == seq) {
        bool was_full = q->live >= e->cfg.inflight_max;
        PopEntry to = *en;
        to.state = ENT_DONE;
        Change c = {.ack_off = q->ack_off, .next_off = q->next_off};
        rc = change_add(&c, &to);
        if (rc == MQ_OK) rc = commit_change(e, q, &c);
        if (rc == MQ_OK && !q->retry)
            meta_offset_set(e->cfg.meta, q->group, q->topic, q->queue_id, q->ack_off);
        freed = rc == MQ_OK && was_full && q->live < e->cfg.inflight_max;
        free(c.ents);
    }
    pthread_mutex_unlock(&q->mu);
    /* Not journaled: the entry stays in flight and the keeper moves it
     * when its guard ends (a second copy; at least once). */
    if (rc != MQ_OK) MQ_WARN("cannot journal a nacked delivery: %s", mq_strerror(rc));
    if (freed) kick(e, q);
}

int pop_nack(PopEngine *e, const MetaGroup *group, const char *topic, const char *handle,
             size_t len, int64_t delay_ms, PopResult *result) {
    if (!e || !group || !topic || !handle || !result) return MQ_ERR_INVAL;
    *result = POP_INVALID;
    Receipt r;
    ReceiptKey rkey;
    receipt_key_derive(e->key, group->name, topic, &rkey);
    if (receipt_decode(&rkey, handle, len, &r) != MQ_OK) return MQ_OK;
    *result = POP_EXPIRED;
    PopQueue *q = queue_get(e, group->name, topic, r.retry, r.queue_id, GET_ONLY);
    if (!q) return MQ_OK;
    int64_t now = now_ms(e);
    int rc = MQ_OK;
    bool orderly = group->orderly && !q->retry;
    SendDelay sd = {0, 0};
    bool via_sched = false;
    PopEntry to = {0};
    pthread_mutex_lock(&q->mu);
    ptrdiff_t at = q->dead ? -1 : ent_find(q, r.queue_off);
    PopEntry *en = at >= 0 ? ent_at(q, (size_t)at) : NULL;
    if (en && en->state == ENT_INFLIGHT && en->seq == r.seq && en->visible_ms > now) {
        if (delay_ms < 0 && group->orderly) {
            delay_ms = e->cfg.orderly_retry_delay_ms;
        } else if (delay_ms < 0) {
            delay_ms = delay_retry_ms(e->levels, e->cfg.n_delay_levels, en->reconsume);
            sd.level = DELAY_RETRY_FIRST_LEVEL + en->reconsume;
            if (sd.level > e->cfg.n_delay_levels) sd.level = (uint32_t)e->cfg.n_delay_levels;
        } else if (delay_ms > 0) {
            sd.deliver_at = now + delay_ms;
        }
        /* A normal group's retry goes through the scheduler (the delay
         * levels: RocketMQ's retry ladder) and the delivery ends at once;
         * it stays in flight only while the copy is written (the guard,
         * also what a crash in between falls back to). */
        via_sched = e->cfg.sched && !orderly && delay_ms > 0;
        to = *en;
        to.visible_ms = now + (via_sched && delay_ms < NACK_GUARD_MS ? NACK_GUARD_MS : delay_ms);
        to.seq = en->seq + 1; /* the handle is spent */
        Change c = {.ack_off = q->ack_off, .next_off = q->next_off};
        rc = change_add(&c, &to);
        if (rc == MQ_OK) rc = commit_change(e, q, &c);
        if (rc == MQ_OK) {
            *result = POP_OK;
            atomic_fetch_add(&e->st_nacked, 1);
        }
        free(c.ents);
    }
    pthread_mutex_unlock(&q->mu);
    if (*result != POP_OK || !via_sched) return rc;

    uint64_t phys = 0;
    if (!phys_of(e, q, to.queue_off, &phys)) return MQ_OK; /* aged out: the keeper drops it */
    bool dlq = to.reconsume >= group->retry_max_times;
    char dest[MSG_SYSTEM_NAME_MAX + 1];
    if (dlq) {
        group_dlq_topic(q->group, dest, sizeof(dest));
        sd = (SendDelay){0, 0}; /* past the last retry: dead at once */
    } else {
        group_retry_topic(q->group, dest, sizeof(dest));
    }
    int src = send_back(e, q, phys, dest, dlq ? 1 : group->retry_queue_nums,
                        (uint32_t)to.reconsume + 1, sd);
    if (src != MQ_OK) {
        MQ_WARN("cannot move a nacked message of group '%s' to '%s': %s (the keeper will)",
                q->group, dest, mq_strerror(src));
        return MQ_OK;
    }
    atomic_fetch_add(dlq ? &e->st_dead : &e->st_retried, 1);
    end_delivery(e, q, to.queue_off, to.seq);
    return MQ_OK;
}

/* ======================================================================
 * Offsets and drops
 * ====================================================================== */

int pop_reset_offset(PopEngine *e, const char *group, const char *topic, uint32_t queue_id,
                     uint64_t offset) {
    if (!e || !group || !topic) return MQ_ERR_INVAL;
    PopQueue *q = queue_get(e, group, topic, false, queue_id, GET_ONLY);
    if (!q) return MQ_OK;
    pthread_mutex_lock(&q->mu);
    Change c = {.flags = RF_CLEAR, .ack_off = offset, .next_off = offset};
    int rc = commit_change(e, q, &c);
    pthread_mutex_unlock(&q->mu);
    return rc;
}

/* Journals a DROP of every queue of 'group' ("" = any) and 'topic' ("" =
 * any), then marks them dead. */
static int drop(PopEngine *e, const char *group, const char *topic) {
    uint8_t buf[5 + 255 + 255];
    uint8_t *p = encode_head(buf, REC_DROP, 0, group, topic);
    int64_t joff = -1;
    int rc = journal_append(e, buf, (size_t)(p - buf), &joff);
    if (rc != MQ_OK) return rc;
    size_t n = 0;
    PopQueue **v = queue_list(e, &n);
    if (!v) return MQ_ERR_NOMEM;
    for (size_t i = 0; i < n; i++) {
        PopQueue *q = v[i];
        if ((*group && strcmp(q->group, group) != 0) || (*topic && strcmp(q->topic, topic) != 0))
            continue;
        pthread_mutex_lock(&q->mu);
        q->dead = true;
        q->dirty = true;
        clear_entries(q);
        pthread_mutex_unlock(&q->mu);
    }
    free(v);
    return MQ_OK;
}

int pop_drop_group(PopEngine *e, const char *group) {
    if (!e || !group || !*group || strlen(group) > 255) return MQ_ERR_INVAL;
    return drop(e, group, "");
}

int pop_drop_topic(PopEngine *e, const char *topic) {
    if (!e || !topic || !*topic || strlen(topic) > 255) return MQ_ERR_INVAL;
    return drop(e, "", topic);
}

uint64_t pop_inflight(PopEngine *e, const char *group, const char *topic, uint32_t queue_id) {
    PopQueue *q = queue_get(e, group, topic, false, queue_id, GET_ONLY);
    if (!q) return 0;
    pthread_mutex_lock(&q->mu);
    uint64_t n = q->live;
    pthread_mutex_unlock(&q->mu);
    return n;
}

PopOffsetState pop_offset_state(PopEngine *e, const char *group, const char *topic,
                                uint32_t queue_id, uint64_t off) {
    PopQueue *q = queue_get(e, group, topic, false, queue_id, GET_ONLY);
    if (!q) return POP_OFF_UNKNOWN;
    pthread_mutex_lock(&q->mu);
    PopOffsetState st;
    if (off < q->ack_off) {
        st = POP_OFF_DONE;
    } else if (off >= q->next_off) {
        st = POP_OFF_NOT_YET;
    } else {
        /* Between the two: an entry says how it stands; none means it was
         * skipped by the group's filter, which counts as done. */
        ptrdiff_t i = ent_find(q, off);
        st = i < 0 || ent_at(q, (size_t)i)->state == ENT_DONE ? POP_OFF_DONE : POP_OFF_INFLIGHT;
    }
    pthread_mutex_unlock(&q->mu);
    return st;
}

/* ======================================================================
 * Keeper: expired deliveries, snapshots
 * ====================================================================== */

/* Writes a retry or dead-letter copy of the record at 'phys_off' to
 * 'dest' (created when missing) with 'reconsume' as its reconsume count.
 * No queue mutex held (topic creation writes sqlite). */
static int send_back(PopEngine *e, const PopQueue *q, uint64_t phys_off, const char *dest,
                     uint32_t dest_queues, uint32_t reconsume, SendDelay delay) {
    MetaTopic t;
    if (topic_get(e->cfg.topics, dest, &t) != MQ_OK) {
        int rc = topic_put_system(e->cfg.topics, dest, dest_queues, META_PERM_READ | META_PERM_WRITE,
                                  false, NULL);
        if (rc != MQ_OK && topic_get(e->cfg.topics, dest, &t) != MQ_OK) return rc;
        if (rc == MQ_OK && topic_get(e->cfg.topics, dest, &t) != MQ_OK) return MQ_ERR_STATE;
    }
    ClRecord rec;
    MappedFile *ref = NULL;
    int rc = store_read_msg(e->cfg.store, phys_off, &rec, &ref);
    if (rc != MQ_OK) {
        mf_unref(&ref);
        return rc;
    }
    /* The original properties, plus where it came from (kept from the
     * first time: a retry of a retry still names the original). */
    MsgProp stack[64];
    size_t np = 0;
    MsgProp *props = stack;
    rc = msg_props_decode(rec.props, stack, 62, &np);
    if (rc != MQ_OK) np = 0; /* damaged or very many: keep only ours */
    char origin[MSG_ID_LEN + 1];
    msg_id_encode(rec.store_host, rec.phys_off, origin);
    MqSlice v;
    if (!msg_prop_get(rec.props, MSG_PROP_RETRY_TOPIC, &v))
        props[np++] = (MsgProp){mq_slice(MSG_PROP_RETRY_TOPIC, strlen(MSG_PROP_RETRY_TOPIC)),
                                mq_slice(q->topic, strlen(q->topic))};
    if (!msg_prop_get(rec.props, MSG_PROP_ORIGIN_MSG_ID, &v))
        props[np++] = (MsgProp){mq_slice(MSG_PROP_ORIGIN_MSG_ID, strlen(MSG_PROP_ORIGIN_MSG_ID)),
                                mq_slice(origin, MSG_ID_LEN)};
    size_t plen = 0;
    uint8_t *pbuf = malloc(CL_PROPS_MAX);
    rc = pbuf ? msg_props_encode(props, np, pbuf, CL_PROPS_MAX, &plen) : MQ_ERR_NOMEM;
    if (rc == MQ_OK) {
        ClMessage m = {0};
        m.topic = mq_slice(dest, strlen(dest));
        m.queue_id = (uint32_t)(rec.queue_off % (t.write_queues ? t.write_queues : 1));
        m.flag = rec.flag;
        m.born_ts = rec.born_ts;
        memcpy(m.born_host, rec.born_host, 8);
        m.reconsume_times = reconsume;
        m.body = rec.body;
        m.props = mq_slice((const char *)pbuf, plen);
        ClMessage out = m;
        uint8_t *wbuf = NULL;
        if (e->cfg.sched && (delay.level || delay.deliver_at)) {
            /* Through the scheduler: it puts the copy on 'dest' when due. */
            size_t wcap = plen + (delay.level ? SCHED_WRAP_EXTRA : SCHED_TIMER_WRAP_EXTRA);
            wbuf = malloc(wcap);
            rc = !wbuf ? MQ_ERR_NOMEM
                 : delay.level ? sched_wrap(&m, delay.level, wbuf, wcap, &out)
                               : sched_timer_wrap(e->cfg.sched, &m, delay.deliver_at,
                                                  now_ms(e), wbuf, wcap, &out);
            if (rc == MQ_ERR_INVAL && !delay.level) rc = MQ_OK; /* already due: at once */
            if (rc != MQ_OK || out.props.ptr != (const char *)wbuf) out = m;
            if (rc == MQ_ERR_FULL) rc = MQ_OK; /* too many properties to wrap: at once */
        }
        ClAppendResult res;
        if (rc == MQ_OK) rc = store_put(e->cfg.store, &out, 1, &res);
        if (rc == MQ_OK && out.props.ptr != m.props.ptr)
            sched_notify(e->cfg.sched, &out, res.store_ts);
        free(wbuf);
    }
    free(pbuf);
    mf_unref(&ref);
    return rc;
}

/* Moves the expired deliveries of 'q' on.  Returns how many. */
static size_t revive_queue(PopEngine *e, PopQueue *q, int64_t now) {
    pthread_mutex_lock(&q->mu);
    bool idle = q->dead || q->min_due_ms > now; /* the common case: nothing due */
    pthread_mutex_unlock(&q->mu);
    if (idle) return 0;
    MetaGroup g;
    if (group_get(e->cfg.groups, q->group, &g) != MQ_OK) return 0; /* deleted: dropped soon */
    bool orderly = g.orderly && !q->retry;
    PopEntry due[KEEP_BATCH];
    uint64_t phys[KEEP_BATCH];
    size_t nd = 0;
    pthread_mutex_lock(&q->mu);
    if (q->dead || q->min_due_ms > now) {
        pthread_mutex_unlock(&q->mu);
        return 0;
    }
    int64_t min_due = INT64_MAX;
    for (size_t i = 0; i < q->len; i++) {
        PopEntry *en = ent_at(q, i);
        if (en->state != ENT_INFLIGHT) continue;
        if (en->visible_ms <= now && nd < KEEP_BATCH)
            due[nd++] = *en;
        else if (en->visible_ms < min_due)
            min_due = en->visible_ms;
    }
    q->min_due_ms = nd == KEEP_BATCH ? now : min_due;
    pthread_mutex_unlock(&q->mu);

    /* The copies go out with no queue mutex held. */
    char dest[MSG_SYSTEM_NAME_MAX + 1];
    bool sent[KEEP_BATCH];
    for (size_t i = 0; i < nd; i++) {
        sent[i] = true;
        bool dlq = due[i].reconsume >= g.retry_max_times;
        if (orderly && !dlq) continue;
        if (!phys_of(e, q, due[i].queue_off, &phys[i])) continue; /* aged out */
        if (dlq)
            group_dlq_topic(q->group, dest, sizeof(dest));
        else
            group_retry_topic(q->group, dest, sizeof(dest));
        int rc = send_back(e, q, phys[i], dest, dlq ? 1 : g.retry_queue_nums,
                           (uint32_t)due[i].reconsume + 1, (SendDelay){0, 0});
        if (rc != MQ_OK) {
            MQ_WARN("cannot move a message of group '%s' to '%s': %s", q->group, dest,
                    mq_strerror(rc));
            sent[i] = false; /* tried again next round */
            continue;
        }
        atomic_fetch_add(dlq ? &e->st_dead : &e->st_retried, 1);
    }

    pthread_mutex_lock(&q->mu);
    Change c = {.ack_off = q->ack_off, .next_off = q->next_off};
    bool was_full = q->live >= e->cfg.inflight_max;
    int rc = MQ_OK;
    bool waits = false;
    for (size_t i = 0; i < nd && rc == MQ_OK && !q->dead; i++) {
        ptrdiff_t at = ent_find(q, due[i].queue_off);
        if (at < 0) continue;
        PopEntry *en = ent_at(q, (size_t)at);
        if (en->state != ENT_INFLIGHT || en->seq != due[i].seq) continue;
        if (!sent[i]) {
            if (now + 1000 < q->min_due_ms) q->min_due_ms = now + 1000;
            continue;
        }
        PopEntry to = *en;
        if (orderly && due[i].reconsume < g.retry_max_times) {
            to.state = ENT_WAIT;
            to.reconsume = (uint16_t)(en->reconsume + 1);
            to.visible_ms = now;
            waits = true;
        } else {
            to.state = ENT_DONE;
        }
        rc = change_add(&c, &to);
    }
    if (rc == MQ_OK && c.n > 0) rc = commit_change(e, q, &c);
    if (rc == MQ_OK && c.n > 0 && !q->retry)
        meta_offset_set(e->cfg.meta, q->group, q->topic, q->queue_id, q->ack_off);
    size_t moved = rc == MQ_OK ? c.n : 0;
    bool freed = (orderly && (waits || q->live == 0)) ||
                 (was_full && q->live < e->cfg.inflight_max);
    pthread_mutex_unlock(&q->mu);
    if (rc != MQ_OK) MQ_WARN("cannot journal expired deliveries: %s", mq_strerror(rc));
    free(c.ents);
    atomic_fetch_add(&e->st_expired, moved);
    if (freed && moved) kick(e, q);
    return moved;
}

/* The entry blob of a queue (FORMAT.md "pop_state"): its live entries. */
static uint8_t *entries_blob(PopQueue *q, size_t *len) {
    uint8_t *b = malloc(q->live * ENT_BYTES + 1);
    if (!b) return NULL;
    uint8_t *p = b;
    for (size_t i = 0; i < q->len; i++) {
        const PopEntry *en = ent_at(q, i);
        if (en->state == ENT_DONE) continue;
        put_entry(p, en);
        p += ENT_BYTES;
    }
    *len = (size_t)(p - b);
    return b;
}

/* Saves every changed queue with the journal position they all reflect. */
static int snapshot(PopEngine *e) {
    int64_t replay_from = atomic_load(&e->journal_next);
    size_t n = 0;
    PopQueue **v = queue_list(e, &n);
    if (!v) return MQ_ERR_NOMEM;
    MetaPopRow *rows = calloc(n + 1, sizeof(*rows));
    PopQueue **taken = calloc(n + 1, sizeof(*taken));
    size_t k = 0;
    int rc = rows && taken ? MQ_OK : MQ_ERR_NOMEM;
    /* Two passes, deletions first: a group or topic dropped and made
     * again has a dead queue and a live one under the same row key. */
    for (size_t pass = 0; pass < 2 * n && rc == MQ_OK; pass++) {
        PopQueue *q = v[pass % n];
        bool want_dead = pass < n;
        pthread_mutex_lock(&q->mu);
        if (q->dirty && q->dead == want_dead && !(q->dead && q->dead_saved)) {
            MetaPopRow *r = &rows[k];
            r->group = q->group;
            r->topic = q->topic;
            r->retry = q->retry;
            r->queue_id = q->queue_id;
            r->drop = q->dead;
            r->ack_off = q->ack_off;
            r->next_off = q->next_off;
            r->journal_off = q->journal_off;
            if (!q->dead) {
                uint8_t *blob = entries_blob(q, &r->entries_len);
                if (!blob) rc = MQ_ERR_NOMEM;
                r->entries = blob;
            }
            if (rc == MQ_OK) {
                q->dirty = false;
                taken[k++] = q;
            }
        }
        pthread_mutex_unlock(&q->mu);
    }
    if (rc == MQ_OK) rc = meta_pop_save(e->cfg.meta, rows, k, replay_from);
    for (size_t i = 0; i < k; i++) {
        PopQueue *q = taken[i];
        pthread_mutex_lock(&q->mu);
        if (rc != MQ_OK)
            q->dirty = true;
        else if (q->dead)
            q->dead_saved = true;
        pthread_mutex_unlock(&q->mu);
        free((void *)rows[i].entries);
    }
    free(rows);
    free(taken);
    free(v);
    if (rc != MQ_OK) MQ_WARN("cannot save the receive state: %s", mq_strerror(rc));
    return rc;
}

size_t pop_keep(PopEngine *e, bool snap) {
    pthread_mutex_lock(&e->keep_mu);
    size_t n = 0, moved = 0;
    PopQueue **v = queue_list(e, &n);
    int64_t now = now_ms(e);
    for (size_t i = 0; v && i < n; i++) moved += revive_queue(e, v[i], now);
    free(v);
    if (snap) (void)snapshot(e);
    pthread_mutex_unlock(&e->keep_mu);
    return moved;
}

static void *keeper_main(void *arg) {
    PopEngine *e = arg;
    int64_t last_snap = mq_mono_ns();
    pthread_mutex_lock(&e->stop_mu);
    while (!mq_wait_stop(&e->stop_cv, &e->stop_mu, &e->stopping, e->cfg.revive_interval_ms)) {
        pthread_mutex_unlock(&e->stop_mu);
        int64_t t = mq_mono_ns();
        bool snap = e->cfg.snapshot_interval_ms > 0 &&
                    t - last_snap >= (int64_t)e->cfg.snapshot_interval_ms * 1000000;
        if (snap) last_snap = t;
        pop_keep(e, snap);
        pthread_mutex_lock(&e->stop_mu);
    }
    pthread_mutex_unlock(&e->stop_mu);
    return NULL;
}

/* ======================================================================
 * Open: key, saved state, journal replay
 * ====================================================================== */

static int load_key(PopEngine *e) {
    char hex[2 * RECEIPT_KEY_LEN + 1];
    int rc = meta_kv_get(e->cfg.meta, KEY_NAME, hex, sizeof(hex));
    if (rc == MQ_OK && strlen(hex) == 2 * RECEIPT_KEY_LEN) {
        for (int i = 0; i < RECEIPT_KEY_LEN; i++) {
            unsigned v = 0;
            if (sscanf(hex + 2 * i, "%2x", &v) != 1) return MQ_ERR_CORRUPT;
            e->key[i] = (uint8_t)v;
        }
        return MQ_OK;
    }
    if (rc != MQ_OK && rc != MQ_ERR_NOTFOUND) return rc;
    if (getrandom(e->key, sizeof(e->key), 0) != (ssize_t)sizeof(e->key)) {
        MQ_ERROR("cannot draw the receipt-handle key: %s", strerror(errno));
        return MQ_ERR_IO;
    }
    for (int i = 0; i < RECEIPT_KEY_LEN; i++) snprintf(hex + 2 * i, 3, "%02x", e->key[i]);
    return meta_kv_put(e->cfg.meta, KEY_NAME, hex);
}

/* Decodes the 23-byte entries at 'p' into 'c'. */
static int decode_entries(const uint8_t *p, size_t n, Change *c) {
    for (size_t i = 0; i < n; i++, p += ENT_BYTES) {
        PopEntry en = get_entry(p);
        if (en.state > ENT_WAIT) return MQ_ERR_CORRUPT;
        if (i > 0 && en.queue_off <= c->ents[c->n - 1].queue_off) return MQ_ERR_CORRUPT;
        int rc = change_add(c, &en);
        if (rc != MQ_OK) return rc;
    }
    return MQ_OK;
}

static int load_row(void *arg, const MetaPopRow *r) {
    PopEngine *e = arg;
    if (r->entries_len % ENT_BYTES != 0 || r->next_off < r->ack_off) return MQ_ERR_CORRUPT;
    PopQueue *q = queue_get(e, r->group, r->topic, r->retry, r->queue_id, GET_CREATE_BARE);
    if (!q) return MQ_ERR_NOMEM;
    Change c = {.flags = RF_CLEAR, .ack_off = r->ack_off, .next_off = r->next_off};
    int rc = decode_entries(r->entries, r->entries_len / ENT_BYTES, &c);
    pthread_mutex_lock(&q->mu);
    if (rc == MQ_OK) rc = apply_change(q, &c, r->journal_off);
    q->dirty = false;
    pthread_mutex_unlock(&q->mu);
    free(c.ents);
    return rc;
}

/* Applies one journal record found at journal offset 'joff'. */
static int replay_record(PopEngine *e, MqSlice body, int64_t joff) {
    const uint8_t *p = (const uint8_t *)body.ptr;
    size_t len = body.len;
    if (len < 5 || p[0] != REC_VERSION) return MQ_ERR_CORRUPT;
    uint8_t type = p[1], flags = p[2];
    size_t gl = p[3], tl = p[4];
    if (len < 5 + gl + tl) return MQ_ERR_CORRUPT;
    char group[256], topic[256];
    memcpy(group, p + 5, gl);
    group[gl] = '\0';
    memcpy(topic, p + 5 + gl, tl);
    topic[tl] = '\0';
    p += 5 + gl + tl;
    len -= 5 + gl + tl;
    if (type == REC_DROP) {
        size_t n = 0;
        PopQueue **v = queue_list(e, &n);
        if (!v) return MQ_ERR_NOMEM;
        for (size_t i = 0; i < n; i++) {
            PopQueue *q = v[i];
            if ((gl && strcmp(q->group, group) != 0) || (tl && strcmp(q->topic, topic) != 0))
                continue;
            if (q->journal_off >= joff) continue;
            q->dead = true;
            q->dirty = true;
            clear_entries(q);
        }
        free(v);
        return MQ_OK;
    }
    if (type != REC_STATE || gl == 0 || tl == 0 || len < 24 || (flags & ~(RF_RETRY | RF_CLEAR)))
        return MQ_ERR_CORRUPT;
    uint32_t qid = mq_get_u32(p);
    Change c = {.flags = (uint8_t)(flags & RF_CLEAR), .ack_off = mq_get_u64(p + 4),
                .next_off = mq_get_u64(p + 12)};
    uint64_t n = mq_get_u32(p + 20);
    if (len - 24 != n * ENT_BYTES) return MQ_ERR_CORRUPT;
    PopQueue *q = queue_get(e, group, topic, flags & RF_RETRY, qid, GET_CREATE_BARE);
    if (!q) return MQ_ERR_NOMEM;
    if (q->journal_off >= joff) return MQ_OK; /* in the snapshot already */
    int rc = decode_entries(p + 24, n, &c);
    if (rc == MQ_OK) {
        /* A queue first seen in the journal starts where its record says. */
        if (q->journal_off < 0 && q->len == 0 && !(c.flags & RF_CLEAR)) {
            uint64_t start = c.n > 0 && c.ents[0].queue_off < c.ack_off ? c.ents[0].queue_off
                                                                         : c.ack_off;
            q->ack_off = start;
            if (q->next_off < start || q->next_off > c.next_off) q->next_off = start;
        }
        rc = apply_change(q, &c, joff);
    }
    free(c.ents);
    return rc;
}

static int replay(PopEngine *e, int64_t from) {
    Store *st = e->cfg.store;
    MqSlice jt = mq_slice(POP_JOURNAL_TOPIC, sizeof(POP_JOURNAL_TOPIC) - 1);
    uint64_t qmin = 0, qmax = 0;
    store_queue_range(st, jt, 0, &qmin, &qmax);
    uint64_t off = from < 0 ? qmin : (uint64_t)from;
    if (off < qmin) {
        MQ_WARN("pop journal starts at %llu, after the saved position %llu: replaying what is left",
                (unsigned long long)qmin, (unsigned long long)off);
        off = qmin;
    }
    atomic_store(&e->journal_next, (int64_t)qmax);
    size_t applied = 0;
    CqEntry ces[JOURNAL_READ];
    uint64_t offs[JOURNAL_READ];
    while (off < qmax) {
        size_t n = 0;
        uint64_t next = off;
        int rc = store_read_queue(st, jt, 0, off, JOURNAL_READ, JOURNAL_READ, NULL, 0, ces, offs,
                                  &n, &next);
        if (rc != MQ_OK) return rc;
        if (n == 0) break;
        for (size_t i = 0; i < n; i++) {
            ClRecord rec;
            MappedFile *ref = NULL;
            rc = store_read_msg(st, ces[i].phys_off, &rec, &ref);
            if (rc == MQ_OK) rc = replay_record(e, rec.body, (int64_t)offs[i]);
            mf_unref(&ref);
            if (rc != MQ_OK) {
                MQ_ERROR("pop journal record %llu: %s", (unsigned long long)offs[i],
                         mq_strerror(rc));
                return rc == MQ_ERR_NOTFOUND ? MQ_ERR_CORRUPT : rc;
            }
            applied++;
        }
        off = next;
    }
    if (applied) MQ_INFO("pop journal: %zu records replayed", applied);
    return MQ_OK;
}

/* After loading: every queue's consumer offset agrees with its state. */
static void publish_offsets(PopEngine *e) {
    size_t n = 0;
    PopQueue **v = queue_list(e, &n);
    for (size_t i = 0; v && i < n; i++) {
        PopQueue *q = v[i];
        if (!q->dead && !q->retry)
            meta_offset_set(e->cfg.meta, q->group, q->topic, q->queue_id, q->ack_off);
    }
    free(v);
}

static void engine_free(PopEngine *e) {
    for (PopQueue *q = e->all, *nx; q; q = nx) {
        nx = q->all;
        pthread_mutex_destroy(&q->mu);
        free(q->ents);
        free(q);
    }
    free(e->buckets);
    pthread_rwlock_destroy(&e->map_rw);
    pthread_mutex_destroy(&e->keep_mu);
    pthread_mutex_destroy(&e->stop_mu);
    pthread_cond_destroy(&e->stop_cv);
    free(e);
}

int pop_open(const PopConfig *cfg, PopEngine **out) {
    if (!cfg || !out || !cfg->store || !cfg->meta || !cfg->topics || !cfg->groups ||
        !cfg->store_host || !cfg->delay_levels_ms || cfg->n_delay_levels == 0 ||
        cfg->n_delay_levels > DELAY_LEVELS_MAX || cfg->inflight_max == 0 ||
        cfg->revive_interval_ms == 0)
        return MQ_ERR_INVAL;
    *out = NULL;
    PopEngine *e = calloc(1, sizeof(*e));
    if (!e) return MQ_ERR_NOMEM;
    e->cfg = *cfg;
    memcpy(e->levels, cfg->delay_levels_ms, cfg->n_delay_levels * sizeof(int64_t));
    e->cfg.delay_levels_ms = e->levels;
    pthread_rwlock_init(&e->map_rw, NULL);
    pthread_mutex_init(&e->keep_mu, NULL);
    pthread_mutex_init(&e->stop_mu, NULL);
    mq_cond_init_mono(&e->stop_cv);
    atomic_init(&e->journal_next, 0);
    e->nbuckets = MAP_BUCKETS_MIN;
    e->buckets = calloc(e->nbuckets, sizeof(*e->buckets));
    if (!e->buckets) {
        engine_free(e);
        return MQ_ERR_NOMEM;
    }
    int64_t replay_from = -1;
    int rc = load_key(e);
    if (rc == MQ_OK) rc = meta_pop_load(cfg->meta, load_row, e, &replay_from);
    if (rc == MQ_OK) rc = store_wait_dispatched(cfg->store, 60000);
    if (rc == MQ_OK) rc = replay(e, replay_from);
    if (rc != MQ_OK) {
        MQ_ERROR("cannot load the receive state: %s", mq_strerror(rc));
        engine_free(e);
        return rc;
    }
    publish_offsets(e);
    if (cfg->keeper) {
        int err = pthread_create(&e->keeper, NULL, keeper_main, e);
        if (err != 0) {
            MQ_ERROR("cannot start the receive keeper: %s", strerror(err));
            engine_free(e);
            return MQ_ERR_IO;
        }
        e->keeper_running = true;
    }
    *out = e;
    return MQ_OK;
}

void pop_close(PopEngine *e) {
    if (!e) return;
    if (e->keeper_running) {
        mq_stop_signal(&e->stop_cv, &e->stop_mu, &e->stopping);
        pthread_join(e->keeper, NULL);
    }
    pthread_mutex_lock(&e->keep_mu);
    (void)snapshot(e);
    pthread_mutex_unlock(&e->keep_mu);
    engine_free(e);
}

void pop_stats(PopEngine *e, PopStats *out) {
    memset(out, 0, sizeof(*out));
    out->received = atomic_load(&e->st_received);
    out->acked = atomic_load(&e->st_acked);
    out->nacked = atomic_load(&e->st_nacked);
    out->expired = atomic_load(&e->st_expired);
    out->retried = atomic_load(&e->st_retried);
    out->dead = atomic_load(&e->st_dead);
    out->journal_records = atomic_load(&e->st_records);
    size_t n = 0;
    PopQueue **v = queue_list(e, &n);
    for (size_t i = 0; v && i < n; i++) {
        pthread_mutex_lock(&v[i]->mu);
        if (!v[i]->dead) {
            out->inflight += v[i]->live;
            out->queues++;
        }
        pthread_mutex_unlock(&v[i]->mu);
    }
    free(v);
}
