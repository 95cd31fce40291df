/*
 * group.c - the subscription-group registry: see group.h.  A hash map of
 * MetaGroup by name (namemap.h) under a rwlock, written through to
 * meta.db (meta.h) under a writer mutex, as topic.c.  Each entry carries
 * the generation of its last write, drawn from one registry-wide counter.
 * Calls meta_group_*, msg_name_* and nm_*; no I/O of its own.
 */
#include "group.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "msg.h"
#include "namemap.h"

#define INITIAL_BUCKETS 64

typedef struct GroupEntry {
    NmNode node;             /* in GroupRegistry.map, keyed by g.name */
    uint64_t gen;            /* registry generation of the last put; never 0 */
    MetaGroup g;             /* the settings as stored in meta.db */
} GroupEntry;

struct GroupRegistry {
    Meta *meta;              /* borrowed */
    /* Writers (put, delete, auto-create) hold write_mu across the sqlite
     * write and the map update; the map changes only under write_mu plus
     * rw in write mode, so a holder of write_mu may read it unlocked. */
    pthread_mutex_t write_mu;
    pthread_rwlock_t rw;     /* guards the fields below */
    NameMap map;             /* GroupEntry by name; map.count = groups */
    uint64_t gen;            /* bumped by every put and delete; last one handed out */
};

/* ======================================================================
 * The map (callers hold the locks named in each comment)
 * ====================================================================== */

/* find: rw (either mode), or write_mu. */
static GroupEntry *find(const GroupRegistry *r, const char *name, uint64_t hash) {
    NmNode *n = nm_find(&r->map, name, hash);
    return n ? NM_ENTRY(n, GroupEntry, node) : NULL;
}

/* link_entry adds 'e' (not yet in the map) with a new generation.  rw in
 * write mode. */
static void link_entry(GroupRegistry *r, GroupEntry *e) {
    nm_insert(&r->map, &e->node);
    e->gen = ++r->gen;
}

/* unlink_entry removes and returns the entry 'name' ('len' bytes), or
 * NULL; either way the registry generation moves on.  rw in write mode. */
static GroupEntry *unlink_entry(GroupRegistry *r, const char *name, size_t len) {
    r->gen++;
    NmNode *n = nm_remove(&r->map, name, nm_hash(name, len));
    return n ? NM_ENTRY(n, GroupEntry, node) : NULL;
}

static GroupEntry *entry_new(const MetaGroup *g) {
    GroupEntry *e = calloc(1, sizeof(*e));
    if (!e) return NULL;
    e->g = *g;
    nm_node_init(&e->node, e->g.name);
    return e;
}

/* ======================================================================
 * Open and close
 * ====================================================================== */

typedef struct LoadCtx {
    GroupRegistry *r;
    int rc; /* MQ_OK or MQ_ERR_NOMEM */
} LoadCtx;

static int load_one(void *arg, const MetaGroup *g) {
    LoadCtx *ctx = arg;
    GroupEntry *e = entry_new(g);
    if (!e) {
        ctx->rc = MQ_ERR_NOMEM;
        return 1;
    }
    link_entry(ctx->r, e); /* not shared yet: no lock needed */
    return 0;
}

static void entry_free(NmNode *n) { free(NM_ENTRY(n, GroupEntry, node)); }

int group_registry_open(Meta *meta, GroupRegistry **out) {
    if (!meta || !out) return MQ_ERR_INVAL;
    GroupRegistry *r = calloc(1, sizeof(*r));
    if (!r) return MQ_ERR_NOMEM;
    r->meta = meta;
    int rc = MQ_ERR_NOMEM;
    if (nm_init(&r->map, INITIAL_BUCKETS) != MQ_OK) goto err_free;
    if (pthread_mutex_init(&r->write_mu, NULL) != 0) goto err_free_map;
    if (pthread_rwlock_init(&r->rw, NULL) != 0) goto err_destroy_mutex;

    LoadCtx ctx = {.r = r, .rc = MQ_OK};
    rc = meta_group_list(meta, load_one, &ctx);
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

void group_registry_close(GroupRegistry *r) {
    if (!r) return;
    nm_free(&r->map, entry_free);
    pthread_rwlock_destroy(&r->rw);
    pthread_mutex_destroy(&r->write_mu);
    free(r);
}

/* ======================================================================
 * Writers
 * ====================================================================== */

/* name_len is strlen bounded by META_NAME_MAX + 1 (0 for NULL). */
static size_t name_len(const char *name) {
    return name ? strnlen(name, META_NAME_MAX + 1) : 0;
}

static bool user_name_ok(const char *name) {
    size_t len = name_len(name);
    return msg_name_valid(name, len) && !msg_name_reserved(name, len);
}

/* write_group stores 'want' in meta.db, then in the map, under write_mu.
 * With 'if_absent' an existing group is left alone and copied to '*out'
 * instead.  '*created' (may be NULL) says whether a new group was made.
 * Assumes: 'want' is validated.  Ensures: on MQ_OK the map equals meta.db
 * for this name and, unless an existing group was only copied, the name
 * has a new generation; on an error neither changed. */
static int write_group(GroupRegistry *r, const MetaGroup *want, bool if_absent, bool *created,
                       MetaGroup *out) {
    GroupEntry *fresh = entry_new(want);
    if (!fresh) return MQ_ERR_NOMEM;
    pthread_mutex_lock(&r->write_mu);
    GroupEntry *old = find(r, want->name, fresh->node.hash);
    if (old && if_absent) {
        if (out) *out = old->g;
        if (created) *created = false;
        pthread_mutex_unlock(&r->write_mu);
        free(fresh);
        return MQ_OK;
    }
    int rc = meta_group_put(r->meta, want);
    if (rc != MQ_OK) {
        pthread_mutex_unlock(&r->write_mu);
        free(fresh);
        return rc;
    }
    /* meta.db sets the timestamps; read them back.  Should the read fail,
     * the values meta_group_put wrote are known up to a few microseconds. */
    MetaGroup stored;
    if (meta_group_get(r->meta, want->name, &stored) != MQ_OK) {
        stored = *want;
        stored.updated_ms = mq_now_ms();
        stored.created_ms = old ? old->g.created_ms : stored.updated_ms;
    }
    pthread_rwlock_wrlock(&r->rw);
    if (old) {
        old->g = stored;
        old->gen = ++r->gen;
    } else {
        fresh->g = stored; /* same name: the node's key stays valid */
        link_entry(r, fresh);
        fresh = NULL;
    }
    pthread_rwlock_unlock(&r->rw);
    pthread_mutex_unlock(&r->write_mu);
    free(fresh);
    if (out) *out = stored;
    if (created) *created = !old;
    return MQ_OK;
}

int group_put(GroupRegistry *r, const MetaGroup *g, bool *created) {
    if (!r || !g || !user_name_ok(g->name)) return MQ_ERR_INVAL;
    if (g->retry_max_times > GROUP_RETRY_MAX_TIMES_MAX || g->retry_queue_nums < 1 ||
        g->retry_queue_nums > GROUP_RETRY_QUEUES_MAX)
        return MQ_ERR_INVAL;
    MetaGroup want;
    memset(&want, 0, sizeof(want));
    snprintf(want.name, sizeof(want.name), "%s", g->name);
    want.consume_enable = g->consume_enable;
    want.broadcast = g->broadcast;
    want.orderly = g->orderly;
    want.retry_max_times = g->retry_max_times;
    want.retry_queue_nums = g->retry_queue_nums;
    return write_group(r, &want, false, created, NULL);
}

int group_delete(GroupRegistry *r, const char *name) {
    size_t len = name_len(name);
    if (!r || len == 0 || len > META_NAME_MAX) return MQ_ERR_INVAL;
    pthread_mutex_lock(&r->write_mu);
    int rc = meta_group_delete(r->meta, name);
    GroupEntry *gone = NULL;
    if (rc == MQ_OK || rc == MQ_ERR_NOTFOUND) {
        /* NOTFOUND: meta.db has no such row, so neither may the map */
        pthread_rwlock_wrlock(&r->rw);
        gone = unlink_entry(r, name, len);
        pthread_rwlock_unlock(&r->rw);
    }
    pthread_mutex_unlock(&r->write_mu);
    free(gone);
    return rc;
}

/* ======================================================================
 * Readers
 * ====================================================================== */

/* lookup copies the group 'name' into '*out' (may be NULL) and its
 * generation into '*gen' (may be NULL) under the read lock. */
static int lookup(GroupRegistry *r, const char *name, MetaGroup *out, uint64_t *gen) {
    size_t len = name_len(name);
    if (len == 0 || len > META_NAME_MAX) return MQ_ERR_NOTFOUND;
    uint64_t hash = nm_hash(name, len);
    pthread_rwlock_rdlock(&r->rw);
    GroupEntry *e = find(r, name, hash);
    if (e && out) *out = e->g;
    if (e && gen) *gen = e->gen;
    pthread_rwlock_unlock(&r->rw);
    return e ? MQ_OK : MQ_ERR_NOTFOUND;
}

int group_get(GroupRegistry *r, const char *name, MetaGroup *out) {
    if (!r || !name || !out) return MQ_ERR_INVAL;
    return lookup(r, name, out, NULL);
}

uint64_t group_generation(GroupRegistry *r, const char *name) {
    if (!r || !name) return 0;
    uint64_t gen = 0;
    return lookup(r, name, NULL, &gen) == MQ_OK ? gen : 0;
}

static int group_by_name(const void *a, const void *b) {
    return strcmp(((const MetaGroup *)a)->name, ((const MetaGroup *)b)->name);
}

/* snapshot copies every group, sorted by name, into a malloc'd array
 * ('*out' NULL when empty).  MQ_OK or MQ_ERR_NOMEM. */
static int snapshot(GroupRegistry *r, MetaGroup **out, size_t *count) {
    MetaGroup *snap = NULL;
    size_t n = 0;
    pthread_rwlock_rdlock(&r->rw);
    if (r->map.count > 0) {
        snap = malloc(r->map.count * sizeof(*snap));
        if (!snap) {
            pthread_rwlock_unlock(&r->rw);
            return MQ_ERR_NOMEM;
        }
        for (NmNode *node = nm_next(&r->map, NULL); node; node = nm_next(&r->map, node))
            snap[n++] = NM_ENTRY(node, GroupEntry, node)->g;
    }
    MQ_ASSERT(n == r->map.count);
    pthread_rwlock_unlock(&r->rw);
    if (n > 1) qsort(snap, n, sizeof(*snap), group_by_name);
    *out = snap;
    *count = n;
    return MQ_OK;
}

int group_list(GroupRegistry *r, int (*fn)(void *arg, const MetaGroup *g), void *arg) {
    if (!r || !fn) return MQ_ERR_INVAL;
    MetaGroup *snap = NULL;
    size_t n = 0;
    int rc = snapshot(r, &snap, &n);
    if (rc != MQ_OK) return rc;
    for (size_t i = 0; i < n; i++)
        if (fn(arg, &snap[i]) != 0) break;
    free(snap);
    return MQ_OK;
}

size_t group_count(GroupRegistry *r) {
    if (!r) return 0;
    pthread_rwlock_rdlock(&r->rw);
    size_t n = r->map.count;
    pthread_rwlock_unlock(&r->rw);
    return n;
}

/* ======================================================================
 * Consume path and system topic names
 * ====================================================================== */

int group_for_consume(GroupRegistry *r, const char *name, bool auto_create, MetaGroup *out) {
    if (!r || !name || !out) return MQ_ERR_INVAL;
    int rc = lookup(r, name, out, NULL);
    if (rc != MQ_ERR_NOTFOUND) return rc;
    if (!user_name_ok(name)) return MQ_ERR_INVAL;
    if (!auto_create) return MQ_ERR_NOTFOUND;
    MetaGroup g;
    meta_group_defaults(&g, name);
    bool created = false;
    rc = write_group(r, &g, true, &created, out);
    if (rc == MQ_OK && created) MQ_INFO("auto-created subscription group '%s'", name);
    return rc;
}

static void system_name(const char *prefix, const char *group, char *buf, size_t cap) {
    if (!buf || cap == 0) return;
    snprintf(buf, cap, "%s%s", prefix, group ? group : "");
}

void group_retry_topic(const char *group, char *buf, size_t cap) {
    system_name(MSG_RETRY_PREFIX, group, buf, cap);
}

void group_dlq_topic(const char *group, char *buf, size_t cap) {
    system_name(MSG_DLQ_PREFIX, group, buf, cap);
}
