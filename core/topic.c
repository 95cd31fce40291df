/*
 * topic.c - the topic registry: see topic.h.  A hash map of MetaTopic by
 * name (namemap.h) under a rwlock, written through to meta.db (meta.h)
 * under a writer mutex.  Calls meta_topic_*, msg_name_* and nm_*; no I/O
 * of its own.
 */
#include "topic.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "msg.h"
#include "namemap.h"

#define INITIAL_BUCKETS 64

typedef struct TopicEntry {
    NmNode node;             /* in TopicRegistry.map, keyed by t.name */
    _Atomic uint64_t rr;     /* round-robin counter of topic_select_queue */
    MetaTopic t;             /* the configuration as stored in meta.db */
    /* Traffic since the broker started (not persisted), relaxed atomics. */
    uint64_t in_msgs, in_bytes, out_msgs, out_bytes;
} TopicEntry;

struct TopicRegistry {
    Meta *meta;              /* borrowed */
    uint32_t default_queues; /* 1..TOPIC_QUEUES_MAX */
    /* Writers (put, delete, auto-create) hold write_mu across the sqlite
     * write and the map update; the map changes only under write_mu plus
     * rw in write mode, so a holder of write_mu may read it unlocked. */
    pthread_mutex_t write_mu;
    pthread_rwlock_t rw;     /* guards the fields below */
    NameMap map;             /* TopicEntry by name; map.count = topics */
    _Atomic uint64_t rr;     /* round robin for topics not in the map */
};

/* ======================================================================
 * The map (callers hold the locks named in each comment)
 * ====================================================================== */

/* find: rw (either mode), or write_mu. */
static TopicEntry *find(const TopicRegistry *r, const char *name, uint64_t hash) {
    NmNode *n = nm_find(&r->map, name, hash);
    return n ? NM_ENTRY(n, TopicEntry, node) : NULL;
}

static TopicEntry *entry_new(const MetaTopic *t) {
    TopicEntry *e = calloc(1, sizeof(*e));
    if (!e) return NULL;
    e->t = *t;
    nm_node_init(&e->node, e->t.name);
    atomic_init(&e->rr, 0);
    return e;
}

/* ======================================================================
 * Open and close
 * ====================================================================== */

typedef struct LoadCtx {
    TopicRegistry *r;
    int rc; /* MQ_OK or MQ_ERR_NOMEM */
} LoadCtx;

static int load_one(void *arg, const MetaTopic *t) {
    LoadCtx *ctx = arg;
    TopicEntry *e = entry_new(t);
    if (!e) {
        ctx->rc = MQ_ERR_NOMEM;
        return 1;
    }
    nm_insert(&ctx->r->map, &e->node); /* not shared yet: no lock needed */
    return 0;
}

static void entry_free(NmNode *n) { free(NM_ENTRY(n, TopicEntry, node)); }

int topic_registry_open(Meta *meta, uint32_t default_queues, TopicRegistry **out) {
    if (!meta || !out || default_queues < 1 || default_queues > TOPIC_QUEUES_MAX)
        return MQ_ERR_INVAL;
    TopicRegistry *r = calloc(1, sizeof(*r));
    if (!r) return MQ_ERR_NOMEM;
    r->meta = meta;
    r->default_queues = default_queues;
    atomic_init(&r->rr, 0);
    int rc = MQ_ERR_NOMEM;
    if (nm_init(&r->map, INITIAL_BUCKETS) != MQ_OK) goto err_free;
    if (pthread_mutex_init(&r->write_mu, NULL) != 0) goto err_free_map;
    if (pthread_rwlock_init(&r->rw, NULL) != 0) goto err_destroy_mutex;

    LoadCtx ctx = {.r = r, .rc = MQ_OK};
    rc = meta_topic_list(meta, load_one, &ctx);
    if (rc == MQ_OK) rc = ctx.rc;
    if (rc != MQ_OK) goto err_destroy_rwlock;
    *out = r;
    return MQ_OK;

err_destroy_rwlock:
    pthread_rwlock_destroy(&r->rw);
err_destroy_mutex:
    pthread_mutex_destroy(&r->write_mu);
err_free_map: /* with the entries loaded */
    nm_free(&r->map, entry_free);
err_free:
    free(r);
    return rc;
}

void topic_registry_close(TopicRegistry *r) {
    if (!r) return;
    nm_free(&r->map, entry_free);
    pthread_rwlock_destroy(&r->rw);
    pthread_mutex_destroy(&r->write_mu);
    free(r);
}

uint32_t topic_default_queues(const TopicRegistry *r) { return r->default_queues; }

/* ======================================================================
 * Writers
 * ====================================================================== */

static bool perm_ok(uint32_t perm) {
    return perm == META_PERM_WRITE || perm == META_PERM_READ ||
           perm == (META_PERM_READ | META_PERM_WRITE);
}

/* name_len is strlen bounded by META_NAME_MAX + 1 (0 for NULL). */
static size_t name_len(const char *name) {
    return name ? strnlen(name, META_NAME_MAX + 1) : 0;
}

/* write_topic stores 'want' in meta.db, then in the map, under write_mu.
 * With 'if_absent' an existing topic is left alone and copied to '*out'
 * instead.  '*created' (may be NULL) says whether a new topic was made.
 * Assumes: 'want' is validated.  Ensures: on MQ_OK the map equals meta.db
 * for this name; on an error neither changed. */
static int write_topic(TopicRegistry *r, const MetaTopic *want, bool if_absent, bool *created,
                       MetaTopic *out) {
    TopicEntry *fresh = entry_new(want);
    if (!fresh) return MQ_ERR_NOMEM;
    pthread_mutex_lock(&r->write_mu);
    TopicEntry *old = find(r, want->name, fresh->node.hash);
    if (old && if_absent) {
        if (out) *out = old->t;
        if (created) *created = false;
        pthread_mutex_unlock(&r->write_mu);
        free(fresh);
        return MQ_OK;
    }
    int rc = meta_topic_put(r->meta, want);
    if (rc != MQ_OK) {
        pthread_mutex_unlock(&r->write_mu);
        free(fresh);
        return rc;
    }
    /* meta.db sets the timestamps; read them back.  Should the read fail,
     * the values meta_topic_put wrote are known up to a few microseconds. */
    MetaTopic stored;
    if (meta_topic_get(r->meta, want->name, &stored) != MQ_OK) {
        stored = *want;
        stored.updated_ms = mq_now_ms();
        stored.created_ms = old ? old->t.created_ms : stored.updated_ms;
    }
    pthread_rwlock_wrlock(&r->rw);
    if (old) {
        old->t = stored;
    } else {
        fresh->t = stored; /* same name: the node's key stays valid */
        nm_insert(&r->map, &fresh->node);
        fresh = NULL;
    }
    pthread_rwlock_unlock(&r->rw);
    pthread_mutex_unlock(&r->write_mu);
    free(fresh);
    if (out) *out = stored;
    if (created) *created = !old;
    return MQ_OK;
}

static int put_checked(TopicRegistry *r, const char *name, uint32_t queues, uint32_t perm,
                       bool order, bool *created) {
    if (queues < 1 || queues > TOPIC_QUEUES_MAX || !perm_ok(perm)) return MQ_ERR_INVAL;
    MetaTopic t;
    memset(&t, 0, sizeof(t));
    snprintf(t.name, sizeof(t.name), "%s", name);
    t.read_queues = queues;
    t.write_queues = queues;
    t.perm = perm;
    t.order = order;
    return write_topic(r, &t, false, created, NULL);
}

int topic_put(TopicRegistry *r, const char *name, uint32_t queues, uint32_t perm, bool order,
              bool *created) {
    if (!r) return MQ_ERR_INVAL;
    size_t len = name_len(name);
    if (!msg_name_valid(name, len) || msg_name_reserved(name, len)) return MQ_ERR_INVAL;
    return put_checked(r, name, queues, perm, order, created);
}

int topic_put_system(TopicRegistry *r, const char *name, uint32_t queues, uint32_t perm,
                     bool order, bool *created) {
    if (!r || !msg_system_name_valid(name, name_len(name))) return MQ_ERR_INVAL;
    return put_checked(r, name, queues, perm, order, created);
}

int topic_delete(TopicRegistry *r, const char *name) {
    size_t len = name_len(name);
    if (!r || len == 0 || len > META_NAME_MAX) return MQ_ERR_INVAL;
    pthread_mutex_lock(&r->write_mu);
    int rc = meta_topic_delete(r->meta, name);
    NmNode *gone = NULL;
    if (rc == MQ_OK || rc == MQ_ERR_NOTFOUND) {
        /* NOTFOUND: meta.db has no such row, so neither may the map */
        pthread_rwlock_wrlock(&r->rw);
        gone = nm_remove(&r->map, name, nm_hash(name, len));
        pthread_rwlock_unlock(&r->rw);
    }
    pthread_mutex_unlock(&r->write_mu);
    if (gone) entry_free(gone);
    return rc;
}

/* ======================================================================
 * Readers
 * ====================================================================== */

/* lookup copies the topic 'name' into '*out' under the read lock. */
static int lookup(TopicRegistry *r, const char *name, MetaTopic *out) {
    size_t len = name_len(name);
    if (len == 0 || len > META_NAME_MAX) return MQ_ERR_NOTFOUND;
    uint64_t hash = nm_hash(name, len);
    pthread_rwlock_rdlock(&r->rw);
    TopicEntry *e = find(r, name, hash);
    if (e) *out = e->t;
    pthread_rwlock_unlock(&r->rw);
    return e ? MQ_OK : MQ_ERR_NOTFOUND;
}

int topic_get(TopicRegistry *r, const char *name, MetaTopic *out) {
    if (!r || !name || !out) return MQ_ERR_INVAL;
    return lookup(r, name, out);
}

/* A copy of one entry, taken under the read lock. */
typedef struct TopicSnap {
    MetaTopic t;
    TopicTraffic traffic;
} TopicSnap;

static int snap_by_name(const void *a, const void *b) {
    return strcmp(((const TopicSnap *)a)->t.name, ((const TopicSnap *)b)->t.name);
}

/* snapshot copies every entry, sorted by name, into a malloc'd array
 * ('*out' NULL when empty).  MQ_OK or MQ_ERR_NOMEM. */
static int snapshot(TopicRegistry *r, TopicSnap **out, size_t *count) {
    TopicSnap *snap = NULL;
    size_t n = 0;
    pthread_rwlock_rdlock(&r->rw);
    if (r->map.count > 0) {
        snap = malloc(r->map.count * sizeof(*snap));
        if (!snap) {
            pthread_rwlock_unlock(&r->rw);
            return MQ_ERR_NOMEM;
        }
        for (NmNode *node = nm_next(&r->map, NULL); node; node = nm_next(&r->map, node)) {
            const TopicEntry *e = NM_ENTRY(node, TopicEntry, node);
            TopicSnap *s = &snap[n++];
            s->t = e->t;
            s->traffic.in_msgs = __atomic_load_n(&e->in_msgs, __ATOMIC_RELAXED);
            s->traffic.in_bytes = __atomic_load_n(&e->in_bytes, __ATOMIC_RELAXED);
            s->traffic.out_msgs = __atomic_load_n(&e->out_msgs, __ATOMIC_RELAXED);
            s->traffic.out_bytes = __atomic_load_n(&e->out_bytes, __ATOMIC_RELAXED);
        }
    }
    MQ_ASSERT(n == r->map.count);
    pthread_rwlock_unlock(&r->rw);
    if (n > 1) qsort(snap, n, sizeof(*snap), snap_by_name);
    *out = snap;
    *count = n;
    return MQ_OK;
}

/* topic_list is topic_traffic_list without the counters. */
typedef struct ListAdapter {
    int (*fn)(void *arg, const MetaTopic *t);
    void *arg;
} ListAdapter;

static int list_adapter(void *arg, const MetaTopic *t, const TopicTraffic *tr) {
    (void)tr;
    ListAdapter *a = arg;
    return a->fn(a->arg, t);
}

int topic_list(TopicRegistry *r, int (*fn)(void *arg, const MetaTopic *t), void *arg) {
    if (!fn) return MQ_ERR_INVAL;
    ListAdapter a = {fn, arg};
    return topic_traffic_list(r, list_adapter, &a);
}

int topic_traffic_list(TopicRegistry *r,
                       int (*fn)(void *arg, const MetaTopic *t, const TopicTraffic *tr),
                       void *arg) {
    if (!r || !fn) return MQ_ERR_INVAL;
    TopicSnap *snap = NULL;
    size_t n = 0;
    int rc = snapshot(r, &snap, &n);
    if (rc != MQ_OK) return rc;
    for (size_t i = 0; i < n; i++)
        if (fn(arg, &snap[i].t, &snap[i].traffic) != 0) break;
    free(snap);
    return MQ_OK;
}

void topic_count_traffic(TopicRegistry *r, const char *name, bool out, uint64_t msgs,
                         uint64_t bytes) {
    if (!r || !name) return;
    size_t len = name_len(name);
    if (len == 0 || len > META_NAME_MAX) return;
    uint64_t hash = nm_hash(name, len);
    pthread_rwlock_rdlock(&r->rw);
    TopicEntry *e = find(r, name, hash);
    if (e) {
        __atomic_fetch_add(out ? &e->out_msgs : &e->in_msgs, msgs, __ATOMIC_RELAXED);
        __atomic_fetch_add(out ? &e->out_bytes : &e->in_bytes, bytes, __ATOMIC_RELAXED);
    }
    pthread_rwlock_unlock(&r->rw);
}

size_t topic_count(TopicRegistry *r) {
    if (!r) return 0;
    pthread_rwlock_rdlock(&r->rw);
    size_t n = r->map.count;
    pthread_rwlock_unlock(&r->rw);
    return n;
}

/* ======================================================================
 * Produce path
 * ====================================================================== */

int topic_for_produce(TopicRegistry *r, const char *name, bool auto_create, uint32_t auto_queues,
                      MetaTopic *out) {
    if (!r || !name || !out) return MQ_ERR_INVAL;
    int rc = lookup(r, name, out);
    if (rc == MQ_ERR_NOTFOUND) {
        if (!auto_create) return MQ_ERR_NOTFOUND;
        size_t len = name_len(name);
        if (!msg_name_valid(name, len) || msg_name_reserved(name, len)) return MQ_ERR_INVAL;
        uint32_t queues = auto_queues ? auto_queues : r->default_queues;
        if (queues > TOPIC_QUEUES_MAX) return MQ_ERR_INVAL;
        MetaTopic t;
        memset(&t, 0, sizeof(t));
        memcpy(t.name, name, len);
        t.read_queues = queues;
        t.write_queues = queues;
        t.perm = META_PERM_READ | META_PERM_WRITE;
        t.order = false;
        bool created = false;
        rc = write_topic(r, &t, true, &created, out);
        if (rc != MQ_OK) return rc;
        if (created) MQ_INFO("auto-created topic '%s' with %u queues", name, queues);
    }
    if (rc != MQ_OK) return rc;
    return (out->perm & META_PERM_WRITE) ? MQ_OK : MQ_ERR_STATE;
}

int topic_select_queue(TopicRegistry *r, const MetaTopic *t, int64_t queue_id,
                       MqSlice sharding_key, uint32_t *out) {
    if (!r || !t || !out || (sharding_key.len > 0 && !sharding_key.ptr)) return MQ_ERR_INVAL;
    uint32_t wq = t->write_queues;
    if (wq == 0) return MQ_ERR_STATE;
    if (queue_id >= 0) {
        if (queue_id >= (int64_t)wq) return MQ_ERR_INVAL;
        *out = (uint32_t)queue_id;
        return MQ_OK;
    }
    if (sharding_key.len > 0) {
        *out = (uint32_t)(mq_hash64(sharding_key.ptr, sharding_key.len) % wq);
        return MQ_OK;
    }
    uint64_t n;
    size_t len = strnlen(t->name, sizeof(t->name));
    pthread_rwlock_rdlock(&r->rw);
    TopicEntry *e = len < sizeof(t->name) ? find(r, t->name, nm_hash(t->name, len)) : NULL;
    n = atomic_fetch_add_explicit(e ? &e->rr : &r->rr, 1, memory_order_relaxed);
    pthread_rwlock_unlock(&r->rw);
    *out = (uint32_t)(n % wq);
    return MQ_OK;
}
