/*
 * filter.c - compiled subscription filters and their cache: see filter.h.
 * A Filter is one malloc'd block (header, tags, tag hashes, expression
 * text) plus, for SQL92, the Sql92 block.  The cache is a chained hash map
 * over a fixed array of 'cap' slots with an LRU list threaded through it.
 */
#include "filter.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "msg.h"

/* ======================================================================
 * Filters
 * ====================================================================== */

/* The block:
 *
 *   +--------+------------------+---------------------+------------------+
 *   | Filter | MqSlice[ntags]   | uint64_t[ntags]     | expr bytes, NUL  |
 *   +--------+------------------+---------------------+------------------+
 *
 * The tag slices point into the expression copy at the end. */
struct Filter {
    atomic_uint refs;       /* references; the last filter_unref frees */
    FilterType type;        /* FILTER_TAG or FILTER_SQL92 */
    bool all;               /* TAG "*" (or empty/blank): every message */
    size_t tag_count;       /* TAG: distinct tags (0 when 'all' or SQL92) */
    const MqSlice *tags;    /* TAG: 'tag_count' slices into 'expr' */
    const uint64_t *hashes; /* TAG: msg_tag_hash of each tag */
    Sql92 *sql;             /* SQL92: the compiled selector, owned */
    size_t expr_len;        /* bytes of 'expr' (without the NUL) */
    const char *expr;       /* in this block, NUL-terminated */
};

_Static_assert(sizeof(Filter) % _Alignof(MqSlice) == 0, "tags follow the header");
_Static_assert(sizeof(MqSlice) % _Alignof(uint64_t) == 0, "hashes follow the tags");

bool filter_type_parse(const char *s, FilterType *out) {
    if (!s || !out) return false;
    if (strcasecmp(s, "TAG") == 0) {
        *out = FILTER_TAG;
        return true;
    }
    if (strcasecmp(s, "SQL92") == 0) {
        *out = FILTER_SQL92;
        return true;
    }
    return false;
}

static void set_err(Sql92Error *err, size_t pos, const char *msg) {
    if (!err) return;
    err->pos = pos;
    snprintf(err->msg, sizeof(err->msg), "%s", msg);
}

static bool is_blank(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

/* tag_problem explains why msg_tag_expr_parse refused the 'len' bytes at
 * 'expr', walking the parts as it does. */
static void tag_problem(const char *expr, size_t len, Sql92Error *err) {
    size_t b = 0;
    size_t e = len;
    while (b < e && is_blank(expr[b])) b++;
    while (e > b && is_blank(expr[e - 1])) e--;
    MqSlice seen[FILTER_TAGS_MAX];
    size_t count = 0;
    size_t p = b;
    for (;;) {
        size_t op = p;
        while (op + 1 < e && !(expr[op] == '|' && expr[op + 1] == '|')) op++;
        if (op + 1 >= e) op = e;
        size_t tb = p;
        size_t te = op;
        while (tb < te && is_blank(expr[tb])) tb++;
        while (te > tb && is_blank(expr[te - 1])) te--;
        if (tb == te) {
            if (op < e)
                set_err(err, op, "empty tag before '||'");
            else
                set_err(err, p >= 2 ? p - 2 : 0, "empty tag after '||'");
            return;
        }
        const char *bar = memchr(expr + tb, '|', te - tb);
        if (bar) {
            set_err(err, (size_t)(bar - expr), "single '|' in a tag, tags are joined by '||'");
            return;
        }
        if (te - tb == 1 && expr[tb] == '*') {
            set_err(err, tb, "'*' cannot be combined with tags");
            return;
        }
        MqSlice tag = mq_slice(expr + tb, te - tb);
        bool dup = false;
        for (size_t k = 0; k < count && !dup; k++)
            dup = seen[k].len == tag.len && memcmp(seen[k].ptr, tag.ptr, tag.len) == 0;
        if (!dup && count == FILTER_TAGS_MAX) {
            char msg[64];
            snprintf(msg, sizeof(msg), "more than %d tags", FILTER_TAGS_MAX);
            set_err(err, tb, msg);
            return;
        }
        if (!dup) seen[count++] = tag;
        if (op == e) break;
        p = op + 2;
    }
    set_err(err, 0, "invalid tag expression");
}

/* filter_new allocates the block for 'ntags' tags and a copy of 'expr'. */
static Filter *filter_new(FilterType type, const char *expr, size_t len, size_t ntags) {
    size_t size = sizeof(Filter) + ntags * (sizeof(MqSlice) + sizeof(uint64_t)) + len + 1;
    Filter *f = calloc(1, size);
    if (!f) return NULL;
    MqSlice *tags = (MqSlice *)(f + 1);
    uint64_t *hashes = (uint64_t *)(tags + ntags);
    char *text = (char *)(hashes + ntags);
    if (len) memcpy(text, expr, len);
    text[len] = '\0';
    atomic_init(&f->refs, 1);
    f->type = type;
    f->tags = tags;
    f->hashes = hashes;
    f->expr = text;
    f->expr_len = len;
    return f;
}

static int compile_tag(const char *expr, size_t len, Filter **out, Sql92Error *err) {
    MqSlice tags[FILTER_TAGS_MAX];
    size_t n = 0;
    bool all = false;
    int rc = msg_tag_expr_parse(expr, len, tags, FILTER_TAGS_MAX, &n, &all);
    if (rc == MQ_ERR_INVAL || rc == MQ_ERR_FULL) {
        tag_problem(expr, len, err);
        return MQ_ERR_INVAL;
    }
    if (rc != MQ_OK) return rc;
    Filter *f = filter_new(FILTER_TAG, expr, len, n);
    if (!f) return MQ_ERR_NOMEM;
    f->all = all;
    f->tag_count = n;
    MqSlice *own = (MqSlice *)f->tags;
    uint64_t *hashes = (uint64_t *)f->hashes;
    for (size_t i = 0; i < n; i++) {
        size_t off = (size_t)((const char *)tags[i].ptr - expr);
        own[i] = mq_slice(f->expr + off, tags[i].len);
        hashes[i] = msg_tag_hash(own[i]);
    }
    *out = f;
    return MQ_OK;
}

static int compile_sql(const char *expr, size_t len, Filter **out, Sql92Error *err) {
    Sql92 *q = NULL;
    int rc = sql92_parse(expr, len, &q, err);
    if (rc != MQ_OK) return rc;
    Filter *f = filter_new(FILTER_SQL92, expr, len, 0);
    if (!f) {
        sql92_free(q);
        return MQ_ERR_NOMEM;
    }
    f->sql = q;
    *out = f;
    return MQ_OK;
}

int filter_compile(FilterType type, const char *expr, size_t len, Filter **out, Sql92Error *err) {
    if (!out || (!expr && len > 0)) {
        set_err(err, 0, "no expression");
        return MQ_ERR_INVAL;
    }
    if (len > FILTER_EXPR_MAX) {
        char msg[64];
        snprintf(msg, sizeof(msg), "expression longer than %d bytes", FILTER_EXPR_MAX);
        set_err(err, FILTER_EXPR_MAX, msg);
        return MQ_ERR_INVAL;
    }
    if (!expr) expr = "";
    switch (type) {
    case FILTER_TAG: return compile_tag(expr, len, out, err);
    case FILTER_SQL92: return compile_sql(expr, len, out, err);
    }
    set_err(err, 0, "unknown filter type");
    return MQ_ERR_INVAL;
}

Filter *filter_ref(Filter *f) {
    MQ_ASSERT(f);
    unsigned old = atomic_fetch_add_explicit(&f->refs, 1, memory_order_relaxed);
    MQ_ASSERT(old > 0);
    return f;
}

void filter_unref(Filter *f) {
    if (!f) return;
    unsigned old = atomic_fetch_sub_explicit(&f->refs, 1, memory_order_acq_rel);
    MQ_ASSERT(old > 0);
    if (old != 1) return;
    sql92_free(f->sql);
    free(f);
}

bool filter_matches_all(const Filter *f) { return f->type == FILTER_TAG && f->all; }

const uint64_t *filter_tag_hashes(const Filter *f, size_t *n) {
    if (f->type != FILTER_TAG || f->all) {
        *n = 0;
        return NULL;
    }
    *n = f->tag_count;
    return f->hashes;
}

static bool get_prop(void *arg, const char *name, MqSlice *value) {
    const MqSlice *props = arg;
    return msg_prop_get(*props, name, value);
}

bool filter_match(const Filter *f, const ClRecord *rec) {
    if (f->type == FILTER_SQL92) {
        MqSlice props = rec->props;
        return sql92_match(f->sql, get_prop, &props);
    }
    if (f->all) return true;
    MqSlice tag = {"", 0};
    if (!msg_prop_get(rec->props, MSG_PROP_TAGS, &tag)) return false;
    return msg_tag_expr_match(f->tags, f->tag_count, false, tag);
}

FilterType filter_type(const Filter *f) { return f->type; }

const char *filter_expression(const Filter *f) { return f->expr; }

/* ======================================================================
 * Cache
 * ====================================================================== */

#define NONE UINT32_MAX          /* no slot */
#define CACHE_CAP_MAX (1u << 20) /* largest 'cap' */

typedef struct CacheSlot {
    Filter *f;      /* the cache's reference; NULL while unused */
    uint64_t hash;  /* key_hash of f's type and expression */
    uint32_t chain; /* next slot in the bucket, NONE at the end */
    uint32_t prev;  /* LRU neighbour towards the most recent, NONE at the head */
    uint32_t next;  /* LRU neighbour towards the least recent, NONE at the tail */
} CacheSlot;

struct FilterCache {
    pthread_mutex_t mu; /* guards everything below */
    size_t cap;         /* slots */
    size_t used;        /* slots in use; they are slots[0..used) */
    CacheSlot *slots;   /* 'cap' */
    uint32_t *buckets;  /* 'nbuckets' chain heads, NONE = empty */
    size_t nbuckets;    /* power of two, >= 2 * cap */
    uint32_t head;      /* most recently used slot, NONE when empty */
    uint32_t tail;      /* least recently used slot, NONE when empty */
};

static uint64_t key_hash(FilterType type, const char *expr, size_t len) {
    return mq_hash64(expr, len) ^ ((uint64_t)type * 0x9e3779b97f4a7c15ull);
}

int filter_cache_open(size_t cap, FilterCache **out) {
    if (!out || cap == 0 || cap > CACHE_CAP_MAX) return MQ_ERR_INVAL;
    FilterCache *c = calloc(1, sizeof(*c));
    if (!c) return MQ_ERR_NOMEM;
    c->nbuckets = 16;
    while (c->nbuckets < 2 * cap) c->nbuckets *= 2;
    c->slots = calloc(cap, sizeof(*c->slots));
    if (!c->slots) goto err_free_cache;
    c->buckets = malloc(c->nbuckets * sizeof(*c->buckets));
    if (!c->buckets) goto err_free_slots;
    for (size_t i = 0; i < c->nbuckets; i++) c->buckets[i] = NONE;
    if (pthread_mutex_init(&c->mu, NULL) != 0) goto err_free_buckets;
    c->cap = cap;
    c->head = NONE;
    c->tail = NONE;
    *out = c;
    return MQ_OK;

err_free_buckets:
    free(c->buckets);
err_free_slots:
    free(c->slots);
err_free_cache:
    free(c);
    return MQ_ERR_NOMEM;
}

void filter_cache_close(FilterCache *c) {
    if (!c) return;
    for (size_t i = 0; i < c->used; i++) filter_unref(c->slots[i].f);
    pthread_mutex_destroy(&c->mu);
    free(c->buckets);
    free(c->slots);
    free(c);
}

static void lru_unlink(FilterCache *c, uint32_t i) {
    CacheSlot *s = &c->slots[i];
    if (s->prev != NONE)
        c->slots[s->prev].next = s->next;
    else
        c->head = s->next;
    if (s->next != NONE)
        c->slots[s->next].prev = s->prev;
    else
        c->tail = s->prev;
    s->prev = NONE;
    s->next = NONE;
}

static void lru_push_front(FilterCache *c, uint32_t i) {
    CacheSlot *s = &c->slots[i];
    s->prev = NONE;
    s->next = c->head;
    if (c->head != NONE) c->slots[c->head].prev = i;
    c->head = i;
    if (c->tail == NONE) c->tail = i;
}

/* find returns the slot holding (type, expr) or NONE.  Caller holds 'mu'. */
static uint32_t find(const FilterCache *c, uint64_t hash, FilterType type, const char *expr,
                     size_t len) {
    for (uint32_t i = c->buckets[hash & (c->nbuckets - 1)]; i != NONE; i = c->slots[i].chain) {
        const Filter *f = c->slots[i].f;
        if (c->slots[i].hash == hash && f->type == type && f->expr_len == len &&
            (len == 0 || memcmp(f->expr, expr, len) == 0))
            return i;
    }
    return NONE;
}

/* bucket_unlink takes slot 'i' out of its bucket chain.  Caller holds 'mu'. */
static void bucket_unlink(FilterCache *c, uint32_t i) {
    uint32_t *link = &c->buckets[c->slots[i].hash & (c->nbuckets - 1)];
    while (*link != i) {
        MQ_ASSERT(*link != NONE);
        link = &c->slots[*link].chain;
    }
    *link = c->slots[i].chain;
}

/* hit returns a new reference to slot 'i' and marks it most recent.
 * Caller holds 'mu'. */
static Filter *hit(FilterCache *c, uint32_t i) {
    lru_unlink(c, i);
    lru_push_front(c, i);
    return filter_ref(c->slots[i].f);
}

int filter_cache_get(FilterCache *c, FilterType type, const char *expr, size_t len, Filter **out,
                     Sql92Error *err) {
    if (!c || !out || (!expr && len > 0)) {
        set_err(err, 0, "no expression");
        return MQ_ERR_INVAL;
    }
    if (!expr) expr = "";
    uint64_t hash = key_hash(type, expr, len);
    pthread_mutex_lock(&c->mu);
    uint32_t i = find(c, hash, type, expr, len);
    if (i != NONE) {
        *out = hit(c, i);
        pthread_mutex_unlock(&c->mu);
        return MQ_OK;
    }
    pthread_mutex_unlock(&c->mu);

    Filter *f = NULL;
    int rc = filter_compile(type, expr, len, &f, err);
    if (rc != MQ_OK) return rc;

    Filter *evicted = NULL;
    pthread_mutex_lock(&c->mu);
    i = find(c, hash, type, expr, len);
    if (i != NONE) { /* another thread cached it meanwhile: use that one */
        Filter *cached = hit(c, i);
        pthread_mutex_unlock(&c->mu);
        filter_unref(f);
        *out = cached;
        return MQ_OK;
    }
    if (c->used < c->cap) {
        i = (uint32_t)c->used++;
    } else {
        i = c->tail;
        MQ_ASSERT(i != NONE);
        lru_unlink(c, i);
        bucket_unlink(c, i);
        evicted = c->slots[i].f;
    }
    CacheSlot *s = &c->slots[i];
    s->f = filter_ref(f);
    s->hash = hash;
    uint32_t *bucket = &c->buckets[hash & (c->nbuckets - 1)];
    s->chain = *bucket;
    *bucket = i;
    lru_push_front(c, i);
    pthread_mutex_unlock(&c->mu);
    filter_unref(evicted);
    *out = f;
    return MQ_OK;
}
