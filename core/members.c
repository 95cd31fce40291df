/*
 * members.c - the live-consumer table: see members.h.  Three levels of
 * sorted pointer arrays under one mutex: groups by name, and per group
 * its clients by id and its queue locks by (topic, queue id); lookups are
 * binary searches, inserts memmove (a group holds at most MB_CLIENTS_MAX
 * clients and MB_LOCKS_MAX locks).  A client's subscriptions are one
 * malloc'd block (array, config queue ids, strings) built before the
 * mutex is taken and swapped in whole.  A group with neither clients nor
 * locks is freed.  Calls rb_allocate (rebalance.c).
 */
#include "members.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* ======================================================================
 * Types
 * ====================================================================== */

/* A growable array of pointers kept sorted by its owner. */
typedef struct PtrVec {
    void **items;
    size_t len; /* items in use */
    size_t cap; /* items allocated */
} PtrVec;

typedef struct Client {
    MbKind kind;
    RbStrategy strategy;  /* MB_PULL: from the heartbeat; MB_POP: RB_AVG */
    int64_t last_seen_ms; /* epoch ms of the last heartbeat or touch */
    size_t n_subs;        /* entries in subs */
    MbSubscription *subs; /* NULL or one block from subs_copy */
    char id[];            /* NUL-terminated, 1..MB_CLIENT_ID_MAX bytes */
} Client;

typedef struct Lock {
    uint32_t qid;
    int64_t renewed_ms;                /* epoch ms of the last grant or renewal */
    char holder[MB_CLIENT_ID_MAX + 1]; /* client id */
    char topic[];                      /* NUL-terminated */
} Lock;

typedef struct Group {
    PtrVec clients; /* Client *, by id (strcmp) */
    PtrVec locks;   /* Lock *, by topic (strcmp) then qid */
    char name[];    /* NUL-terminated */
} Group;

struct MbTable {
    pthread_mutex_t mu;    /* guards 'groups' and everything under it */
    int64_t expire_ms;     /* from MbConfig */
    int64_t lock_lease_ms; /* from MbConfig */
    PtrVec groups;         /* Group *, by name (strcmp) */
};

/* ======================================================================
 * Sorted pointer arrays
 * ====================================================================== */

static int vec_reserve(PtrVec *v, size_t want) {
    if (want <= v->cap) return MQ_OK;
    size_t cap = v->cap ? v->cap : 8;
    while (cap < want) cap *= 2;
    void **items = realloc(v->items, cap * sizeof(*items));
    if (!items) return MQ_ERR_NOMEM;
    v->items = items;
    v->cap = cap;
    return MQ_OK;
}

static int vec_insert(PtrVec *v, size_t at, void *item) {
    MQ_ASSERT(at <= v->len);
    int rc = vec_reserve(v, v->len + 1);
    if (rc != MQ_OK) return rc;
    memmove(&v->items[at + 1], &v->items[at], (v->len - at) * sizeof(*v->items));
    v->items[at] = item;
    v->len++;
    return MQ_OK;
}

static void vec_remove(PtrVec *v, size_t at) {
    MQ_ASSERT(at < v->len);
    memmove(&v->items[at], &v->items[at + 1], (v->len - at - 1) * sizeof(*v->items));
    v->len--;
}

/* Lower bound of 'key' in 'v' by 'cmp' (key vs item); '*found' says
 * whether the item there equals it. */
static size_t vec_search(const PtrVec *v, const void *key,
                         int (*cmp)(const void *key, const void *item), bool *found) {
    size_t lo = 0;
    size_t hi = v->len;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (cmp(key, v->items[mid]) > 0) lo = mid + 1;
        else hi = mid;
    }
    *found = lo < v->len && cmp(key, v->items[lo]) == 0;
    return lo;
}

static int group_cmp(const void *key, const void *item) {
    return strcmp(key, ((const Group *)item)->name);
}

static int client_cmp(const void *key, const void *item) {
    return strcmp(key, ((const Client *)item)->id);
}

typedef struct LockKey {
    const char *topic;
    uint32_t qid;
} LockKey;

static int lock_cmp(const void *key, const void *item) {
    const LockKey *k = key;
    const Lock *l = item;
    int c = strcmp(k->topic, l->topic);
    if (c != 0) return c;
    return k->qid < l->qid ? -1 : k->qid > l->qid;
}

/* ======================================================================
 * Validation and subscription blocks
 * ====================================================================== */

static bool name_ok(const char *s, size_t max) {
    if (!s) return false;
    size_t len = strnlen(s, max + 1);
    return len > 0 && len <= max;
}

/* True when 'since' + 'span' <= 'now'.  Stored times are >= 0, so the
 * difference cannot overflow. */
static bool due(int64_t since, int64_t span, int64_t now) {
    return now >= since && now - since >= span;
}

static bool subs_valid(const MbSubscription *subs, size_t n) {
    if (n > MB_SUBS_MAX || (n > 0 && !subs)) return false;
    for (size_t i = 0; i < n; i++) {
        const MbSubscription *s = &subs[i];
        if (!name_ok(s->topic, MB_NAME_MAX)) return false;
        if (s->expression && strnlen(s->expression, MB_EXPR_MAX + 1) > MB_EXPR_MAX) return false;
        if (s->filter_type && strcmp(s->filter_type, "TAG") != 0 &&
            strcmp(s->filter_type, "SQL92") != 0)
            return false;
        if (s->n_config_queues > MB_CONFIG_QUEUES_MAX) return false;
        if (s->n_config_queues > 0 && !s->config_queues) return false;
        for (size_t j = 0; j < i; j++)
            if (strcmp(subs[j].topic, s->topic) == 0) return false;
    }
    return true;
}

static int u32_cmp(const void *a, const void *b) {
    uint32_t x = *(const uint32_t *)a;
    uint32_t y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

/* Sorts 'v' ('n' entries) and drops duplicates; returns the count left. */
static size_t sort_unique(uint32_t *v, size_t n) {
    if (n == 0) return 0;
    qsort(v, n, sizeof(*v), u32_cmp);
    size_t m = 1;
    for (size_t i = 1; i < n; i++)
        if (v[i] != v[m - 1]) v[m++] = v[i];
    return m;
}

static char *put_str(char **p, const char *s) {
    size_t len = strlen(s) + 1;
    char *at = *p;
    memcpy(at, s, len);
    *p += len;
    return at;
}

/* Deep-copies 'n' validated subscriptions (no NULL strings) into one
 * malloc'd block: the array, then every config queue list (sorted, no
 * duplicates), then the strings.  '*out' = NULL when 'n' is 0.  Caller
 * owns '*out' (one free).  MQ_OK, MQ_ERR_NOMEM. */
static int subs_copy(const MbSubscription *src, size_t n, MbSubscription **out) {
    *out = NULL;
    if (n == 0) return MQ_OK;
    size_t n_queues = 0;
    size_t n_chars = 0;
    for (size_t i = 0; i < n; i++) {
        n_queues += src[i].n_config_queues;
        n_chars += strlen(src[i].topic) + strlen(src[i].expression) +
                   strlen(src[i].filter_type) + 3;
    }
    MbSubscription *dst = malloc(n * sizeof(*dst) + n_queues * sizeof(uint32_t) + n_chars);
    if (!dst) return MQ_ERR_NOMEM;
    uint32_t *q = (uint32_t *)(dst + n);
    char *p = (char *)(q + n_queues);
    for (size_t i = 0; i < n; i++) {
        size_t nq = src[i].n_config_queues;
        if (nq > 0) memcpy(q, src[i].config_queues, nq * sizeof(*q));
        dst[i].config_queues = nq > 0 ? q : NULL;
        dst[i].n_config_queues = sort_unique(q, nq);
        q += nq;
        dst[i].topic = put_str(&p, src[i].topic);
        dst[i].expression = put_str(&p, src[i].expression);
        dst[i].filter_type = put_str(&p, src[i].filter_type);
    }
    *out = dst;
    return MQ_OK;
}

static const MbSubscription *find_sub(const Client *c, const char *topic) {
    for (size_t i = 0; i < c->n_subs; i++)
        if (strcmp(c->subs[i].topic, topic) == 0) return &c->subs[i];
    return NULL;
}

/* ======================================================================
 * Groups, clients and locks (t->mu held)
 * ====================================================================== */

static void client_free(Client *c) {
    if (!c) return;
    free(c->subs);
    free(c);
}

static void group_free(Group *g) {
    if (!g) return;
    for (size_t i = 0; i < g->clients.len; i++) client_free(g->clients.items[i]);
    for (size_t i = 0; i < g->locks.len; i++) free(g->locks.items[i]);
    free(g->clients.items);
    free(g->locks.items);
    free(g);
}

static Group *find_group(MbTable *t, const char *name, size_t *at) {
    bool found;
    size_t i = vec_search(&t->groups, name, group_cmp, &found);
    if (at) *at = i;
    return found ? t->groups.items[i] : NULL;
}

/* Finds group 'name' or creates it.  MQ_OK, MQ_ERR_FULL, MQ_ERR_NOMEM. */
static int group_get(MbTable *t, const char *name, Group **out) {
    size_t at;
    Group *g = find_group(t, name, &at);
    if (!g) {
        if (t->groups.len >= MB_GROUPS_MAX) return MQ_ERR_FULL;
        size_t len = strlen(name);
        g = calloc(1, sizeof(*g) + len + 1);
        if (!g) return MQ_ERR_NOMEM;
        memcpy(g->name, name, len + 1);
        if (vec_insert(&t->groups, at, g) != MQ_OK) {
            free(g);
            return MQ_ERR_NOMEM;
        }
    }
    *out = g;
    return MQ_OK;
}

/* Frees 'g' when it holds neither clients nor locks. */
static void group_drop_if_empty(MbTable *t, Group *g) {
    if (g->clients.len > 0 || g->locks.len > 0) return;
    size_t at;
    Group *found = find_group(t, g->name, &at);
    MQ_ASSERT(found == g);
    vec_remove(&t->groups, at);
    group_free(g);
}

static Client *find_client(Group *g, const char *id, size_t *at) {
    bool found;
    size_t i = vec_search(&g->clients, id, client_cmp, &found);
    if (at) *at = i;
    return found ? g->clients.items[i] : NULL;
}

/* Finds client 'id' of group 'group' or creates it (zeroed: MB_PULL,
 * RB_AVG, no subscriptions; '*created' set), creating the group as
 * needed.  On error nothing is left behind.  MQ_OK, MQ_ERR_FULL,
 * MQ_ERR_NOMEM. */
static int client_get(MbTable *t, const char *group, const char *id, Group **g_out,
                      Client **out, bool *created) {
    Group *g;
    int rc = group_get(t, group, &g);
    if (rc != MQ_OK) return rc;
    size_t at;
    Client *c = find_client(g, id, &at);
    *created = false;
    if (!c) {
        rc = MQ_ERR_FULL;
        if (g->clients.len >= MB_CLIENTS_MAX) goto err_drop_group;
        rc = MQ_ERR_NOMEM;
        size_t len = strlen(id);
        c = calloc(1, sizeof(*c) + len + 1);
        if (!c) goto err_drop_group;
        memcpy(c->id, id, len + 1);
        c->kind = MB_PULL;
        c->strategy = RB_AVG;
        if (vec_insert(&g->clients, at, c) != MQ_OK) goto err_free_client;
        *created = true;
    }
    *g_out = g;
    *out = c;
    return MQ_OK;

err_free_client:
    free(c);
err_drop_group:
    group_drop_if_empty(t, g);
    return rc;
}

/* Removes the locks of 'g' held by 'id'. */
static void release_locks_of(Group *g, const char *id) {
    size_t kept = 0;
    for (size_t i = 0; i < g->locks.len; i++) {
        Lock *l = g->locks.items[i];
        if (strcmp(l->holder, id) == 0) free(l);
        else g->locks.items[kept++] = l;
    }
    g->locks.len = kept;
}

/* Removes the locks of 'g' whose lease ran out at 'now_ms'. */
static void purge_locks(Group *g, int64_t lease_ms, int64_t now_ms) {
    size_t kept = 0;
    for (size_t i = 0; i < g->locks.len; i++) {
        Lock *l = g->locks.items[i];
        if (due(l->renewed_ms, lease_ms, now_ms)) free(l);
        else g->locks.items[kept++] = l;
    }
    g->locks.len = kept;
}

/* Removes client 'at' of 'g' with its locks; frees 'g' if it is left empty. */
static void client_remove(MbTable *t, Group *g, size_t at) {
    Client *c = g->clients.items[at];
    release_locks_of(g, c->id);
    vec_remove(&g->clients, at);
    client_free(c);
    group_drop_if_empty(t, g);
}

/* ======================================================================
 * Table and clients
 * ====================================================================== */

int mb_open(const MbConfig *cfg, MbTable **out) {
    if (!out) return MQ_ERR_INVAL;
    *out = NULL;
    MbConfig c = cfg ? *cfg : (MbConfig){0, 0};
    if (c.expire_ms < 0 || c.lock_lease_ms < 0) return MQ_ERR_INVAL;
    MbTable *t = calloc(1, sizeof(*t));
    if (!t) return MQ_ERR_NOMEM;
    t->expire_ms = c.expire_ms ? c.expire_ms : MB_EXPIRE_MS_DEFAULT;
    t->lock_lease_ms = c.lock_lease_ms ? c.lock_lease_ms : MB_LOCK_LEASE_MS_DEFAULT;
    pthread_mutex_init(&t->mu, NULL);
    *out = t;
    return MQ_OK;
}

void mb_close(MbTable *t) {
    if (!t) return;
    for (size_t i = 0; i < t->groups.len; i++) group_free(t->groups.items[i]);
    free(t->groups.items);
    pthread_mutex_destroy(&t->mu);
    free(t);
}

int mb_heartbeat(MbTable *t, const char *group, const char *client_id, RbStrategy strategy,
                 const MbSubscription *subs, size_t n_subs, int64_t now_ms) {
    if (!t || !name_ok(group, MB_NAME_MAX) || !name_ok(client_id, MB_CLIENT_ID_MAX) ||
        (unsigned)strategy > RB_CONFIG || now_ms < 0 || !subs_valid(subs, n_subs))
        return MQ_ERR_INVAL;
    MbSubscription norm[MB_SUBS_MAX];
    for (size_t i = 0; i < n_subs; i++) {
        norm[i] = subs[i];
        if (!norm[i].expression || !norm[i].expression[0]) norm[i].expression = "*";
        if (!norm[i].filter_type) norm[i].filter_type = "TAG";
    }
    MbSubscription *copy;
    int rc = subs_copy(norm, n_subs, &copy);
    if (rc != MQ_OK) return rc;

    pthread_mutex_lock(&t->mu);
    Group *g;
    Client *c;
    bool created;
    rc = client_get(t, group, client_id, &g, &c, &created);
    if (rc == MQ_OK) {
        free(c->subs);
        c->subs = copy;
        c->n_subs = n_subs;
        c->kind = MB_PULL;
        c->strategy = strategy;
        c->last_seen_ms = now_ms;
        copy = NULL;
    }
    pthread_mutex_unlock(&t->mu);
    free(copy);
    return rc;
}

int mb_touch(MbTable *t, const char *group, const char *client_id, const char *topic,
             int64_t now_ms) {
    if (!t || !name_ok(group, MB_NAME_MAX) || !name_ok(client_id, MB_CLIENT_ID_MAX) ||
        !name_ok(topic, MB_NAME_MAX) || now_ms < 0)
        return MQ_ERR_INVAL;
    pthread_mutex_lock(&t->mu);
    Group *g;
    Client *c;
    bool created;
    int rc = client_get(t, group, client_id, &g, &c, &created);
    if (rc != MQ_OK) goto out_unlock;
    if (created) c->kind = MB_POP;
    c->last_seen_ms = now_ms;
    if (c->kind != MB_POP || find_sub(c, topic)) goto out_unlock;
    rc = MQ_ERR_FULL;
    if (c->n_subs >= MB_SUBS_MAX) goto out_unlock;

    MbSubscription topics[MB_SUBS_MAX];
    for (size_t i = 0; i <= c->n_subs; i++) {
        const char *name = i < c->n_subs ? c->subs[i].topic : topic;
        topics[i] = (MbSubscription){.topic = name, .expression = "", .filter_type = ""};
    }
    MbSubscription *copy;
    rc = subs_copy(topics, c->n_subs + 1, &copy);
    if (rc != MQ_OK) {
        if (created) {
            size_t at;
            find_client(g, client_id, &at);
            client_remove(t, g, at);
        }
        goto out_unlock;
    }
    free(c->subs);
    c->subs = copy;
    c->n_subs++;

out_unlock:
    pthread_mutex_unlock(&t->mu);
    return rc;
}

int mb_unregister(MbTable *t, const char *group, const char *client_id) {
    if (!t || !group || !client_id) return MQ_ERR_INVAL;
    int rc = MQ_ERR_NOTFOUND;
    pthread_mutex_lock(&t->mu);
    Group *g = find_group(t, group, NULL);
    size_t at;
    if (g && find_client(g, client_id, &at)) {
        client_remove(t, g, at);
        rc = MQ_OK;
    }
    pthread_mutex_unlock(&t->mu);
    return rc;
}

/* Computes the assignment of pull client 'c' of 'g' (see mb_assignment). */
static int assign_locked(Group *g, const Client *c, const MbSubscription *sub, const char *topic,
                         uint32_t n_queues, bool broadcast, uint32_t *out, size_t *n_out) {
    if (broadcast) {
        for (uint32_t q = 0; q < n_queues; q++) out[q] = q;
        *n_out = n_queues;
        return MQ_OK;
    }
    if (c->strategy == RB_CONFIG) {
        size_t n = 0;
        for (size_t i = 0; i < sub->n_config_queues && sub->config_queues[i] < n_queues; i++)
            out[n++] = sub->config_queues[i];
        *n_out = n;
        return MQ_OK;
    }
    const char **ids = malloc(g->clients.len * sizeof(*ids));
    if (!ids) return MQ_ERR_NOMEM;
    size_t n_ids = 0;
    for (size_t i = 0; i < g->clients.len; i++) {
        const Client *other = g->clients.items[i];
        if (other->kind == MB_PULL && find_sub(other, topic)) ids[n_ids++] = other->id;
    }
    int rc = rb_allocate(c->strategy, topic, ids, n_ids, c->id, n_queues, out, n_out);
    free(ids);
    return rc;
}

int mb_assignment(MbTable *t, const char *group, const char *client_id, const char *topic,
                  uint32_t n_queues, bool broadcast, uint32_t *out, size_t *n_out) {
    if (!n_out) return MQ_ERR_INVAL;
    *n_out = 0;
    if (!t || !group || !client_id || !topic || (n_queues > 0 && !out)) return MQ_ERR_INVAL;
    int rc = MQ_ERR_NOTFOUND;
    pthread_mutex_lock(&t->mu);
    Group *g = find_group(t, group, NULL);
    const Client *c = g ? find_client(g, client_id, NULL) : NULL;
    const MbSubscription *sub = c && c->kind == MB_PULL ? find_sub(c, topic) : NULL;
    if (sub) rc = assign_locked(g, c, sub, topic, n_queues, broadcast, out, n_out);
    pthread_mutex_unlock(&t->mu);
    return rc;
}

size_t mb_expire(MbTable *t, int64_t now_ms) {
    if (!t) return 0;
    size_t dropped = 0;
    pthread_mutex_lock(&t->mu);
    for (size_t gi = t->groups.len; gi-- > 0;) {
        Group *g = t->groups.items[gi];
        for (size_t ci = g->clients.len; ci-- > 0;) {
            Client *c = g->clients.items[ci];
            if (!due(c->last_seen_ms, t->expire_ms, now_ms)) continue;
            release_locks_of(g, c->id);
            vec_remove(&g->clients, ci);
            client_free(c);
            dropped++;
        }
        purge_locks(g, t->lock_lease_ms, now_ms);
        group_drop_if_empty(t, g);
    }
    pthread_mutex_unlock(&t->mu);
    return dropped;
}

int mb_list(MbTable *t, const char *group, int (*fn)(void *arg, const MbClientInfo *c),
            void *arg) {
    if (!t || !group || !fn) return MQ_ERR_INVAL;
    int rc = MQ_OK;
    pthread_mutex_lock(&t->mu);
    Group *g = find_group(t, group, NULL);
    for (size_t i = 0; g && i < g->clients.len && rc == 0; i++) {
        const Client *c = g->clients.items[i];
        MbClientInfo info = {
            .client_id = c->id,
            .kind = c->kind,
            .strategy = c->strategy,
            .last_seen_ms = c->last_seen_ms,
            .n_subs = c->n_subs,
            .subs = c->subs,
        };
        rc = fn(arg, &info);
    }
    pthread_mutex_unlock(&t->mu);
    return rc;
}

size_t mb_count(MbTable *t, const char *group) {
    if (!t || !group) return 0;
    pthread_mutex_lock(&t->mu);
    Group *g = find_group(t, group, NULL);
    size_t n = g ? g->clients.len : 0;
    pthread_mutex_unlock(&t->mu);
    return n;
}

void mb_drop_group(MbTable *t, const char *group) {
    if (!t || !group) return;
    pthread_mutex_lock(&t->mu);
    size_t at;
    Group *g = find_group(t, group, &at);
    if (g) {
        vec_remove(&t->groups, at);
        group_free(g);
    }
    pthread_mutex_unlock(&t->mu);
}

/* ======================================================================
 * Orderly queue locks
 * ====================================================================== */

int mb_lock(MbTable *t, const char *group, const char *client_id, const char *topic,
            const uint32_t *qids, size_t n, int64_t now_ms, uint32_t *locked, size_t *n_locked) {
    if (!n_locked) return MQ_ERR_INVAL;
    *n_locked = 0;
    if (!t || !name_ok(group, MB_NAME_MAX) || !name_ok(client_id, MB_CLIENT_ID_MAX) ||
        !name_ok(topic, MB_NAME_MAX) || (n > 0 && (!qids || !locked)) || now_ms < 0)
        return MQ_ERR_INVAL;
    if (n == 0) return MQ_OK;
    if (n > SIZE_MAX / sizeof(*qids)) return MQ_ERR_NOMEM;
    uint32_t *want = malloc(n * sizeof(*want));
    if (!want) return MQ_ERR_NOMEM;
    memcpy(want, qids, n * sizeof(*want));
    size_t n_want = sort_unique(want, n);
    size_t topic_len = strlen(topic);

    pthread_mutex_lock(&t->mu);
    Group *g;
    int rc = group_get(t, group, &g);
    if (rc != MQ_OK) goto out_unlock;
    size_t missing = 0;
    for (size_t i = 0; i < n_want; i++) {
        bool found;
        vec_search(&g->locks, &(LockKey){topic, want[i]}, lock_cmp, &found);
        if (!found) missing++;
    }
    rc = MQ_ERR_FULL;
    if (missing > MB_LOCKS_MAX - g->locks.len) goto out_drop_group;
    rc = vec_reserve(&g->locks, g->locks.len + missing);
    if (rc != MQ_OK) goto out_drop_group;

    size_t k = 0;
    for (size_t i = 0; i < n_want; i++) {
        bool found;
        size_t at = vec_search(&g->locks, &(LockKey){topic, want[i]}, lock_cmp, &found);
        Lock *l;
        if (found) {
            l = g->locks.items[at];
            if (strcmp(l->holder, client_id) != 0 &&
                !due(l->renewed_ms, t->lock_lease_ms, now_ms))
                continue; /* held by another client, lease running */
        } else {
            l = calloc(1, sizeof(*l) + topic_len + 1);
            if (!l) {
                rc = MQ_ERR_NOMEM;
                goto out_drop_group;
            }
            memcpy(l->topic, topic, topic_len + 1);
            l->qid = want[i];
            int ins = vec_insert(&g->locks, at, l);
            MQ_ASSERT(ins == MQ_OK); /* capacity reserved above */
        }
        strcpy(l->holder, client_id);
        l->renewed_ms = now_ms;
        locked[k++] = want[i];
    }
    *n_locked = k;
    rc = MQ_OK;

out_drop_group:
    group_drop_if_empty(t, g);
out_unlock:
    pthread_mutex_unlock(&t->mu);
    free(want);
    return rc;
}

int mb_unlock(MbTable *t, const char *group, const char *client_id, const char *topic,
              const uint32_t *qids, size_t n) {
    if (!t || !group || !client_id || !topic || (n > 0 && !qids)) return MQ_ERR_INVAL;
    pthread_mutex_lock(&t->mu);
    Group *g = find_group(t, group, NULL);
    for (size_t i = 0; g && i < n; i++) {
        bool found;
        size_t at = vec_search(&g->locks, &(LockKey){topic, qids[i]}, lock_cmp, &found);
        if (!found) continue;
        Lock *l = g->locks.items[at];
        if (strcmp(l->holder, client_id) != 0) continue;
        vec_remove(&g->locks, at);
        free(l);
    }
    if (g) group_drop_if_empty(t, g);
    pthread_mutex_unlock(&t->mu);
    return MQ_OK;
}

bool mb_lock_holder(MbTable *t, const char *group, const char *topic, uint32_t qid,
                    int64_t now_ms, char holder[MB_CLIENT_ID_MAX + 1]) {
    if (!t || !group || !topic) return false;
    bool held = false;
    pthread_mutex_lock(&t->mu);
    Group *g = find_group(t, group, NULL);
    if (g) {
        bool found;
        size_t at = vec_search(&g->locks, &(LockKey){topic, qid}, lock_cmp, &found);
        const Lock *l = found ? g->locks.items[at] : NULL;
        if (l && !due(l->renewed_ms, t->lock_lease_ms, now_ms)) {
            held = true;
            if (holder) memcpy(holder, l->holder, sizeof(l->holder));
        }
    }
    pthread_mutex_unlock(&t->mu);
    return held;
}

bool mb_client_id_valid(const char *id) {
    if (!id) return false;
    size_t n = strlen(id);
    if (n == 0 || n > MB_CLIENT_ID_MAX) return false;
    for (size_t i = 0; i < n; i++) {
        char c = id[i];
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                  c == '_' || c == '-' || c == '.' || c == ':' || c == '@';
        if (!ok) return false;
    }
    return true;
}
