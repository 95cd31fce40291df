/*
 * idem.c - the Idempotency-Key table: see idem.h.  A chained hash map
 * (FNV-1a of topic NUL key, power-of-two buckets) plus a FIFO list in
 * claim order, so that expiry and eviction always take the list head.
 */
#include "idem.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "mq.h"

#define INITIAL_BUCKETS 256

typedef struct IdemEntry {
    struct IdemEntry *chain;      /* bucket chain */
    struct IdemEntry *prev, *next; /* FIFO, oldest first */
    uint64_t hash;
    int64_t created_ms;
    bool done;                    /* answered; else claimed */
    unsigned status;
    char *answer;                 /* malloc'd, 'answer_len' bytes */
    size_t answer_len;
    size_t name_len;              /* topic NUL key */
    char name[];                  /* "topic\0key\0" */
} IdemEntry;

struct IdemTable {
    pthread_mutex_t mu;
    int64_t window_ms;
    size_t max_keys, max_bytes;
    IdemEntry **buckets;
    size_t nbuckets; /* power of two */
    size_t count;
    size_t bytes;    /* entry sizes + answers */
    IdemEntry *head, *tail;
};

int idem_open(int64_t window_ms, size_t max_keys, size_t max_bytes, IdemTable **out) {
    if (window_ms <= 0 || max_keys == 0 || max_bytes == 0 || !out) return MQ_ERR_INVAL;
    IdemTable *t = calloc(1, sizeof(*t));
    if (!t) return MQ_ERR_NOMEM;
    t->buckets = calloc(INITIAL_BUCKETS, sizeof(*t->buckets));
    if (!t->buckets) {
        free(t);
        return MQ_ERR_NOMEM;
    }
    t->nbuckets = INITIAL_BUCKETS;
    t->window_ms = window_ms;
    t->max_keys = max_keys;
    t->max_bytes = max_bytes;
    pthread_mutex_init(&t->mu, NULL);
    *out = t;
    return MQ_OK;
}

void idem_close(IdemTable *t) {
    if (!t) return;
    for (IdemEntry *e = t->head; e;) {
        IdemEntry *next = e->next;
        free(e->answer);
        free(e);
        e = next;
    }
    free(t->buckets);
    pthread_mutex_destroy(&t->mu);
    free(t);
}

static size_t entry_bytes(const IdemEntry *e) {
    return sizeof(*e) + e->name_len + e->answer_len;
}

/* Builds "topic\0key" into 'buf' (IDEM name form); returns its length or
 * 0 when it does not fit. */
static size_t make_name(const char *topic, const char *key, char *buf, size_t cap) {
    size_t tl = strlen(topic), kl = strlen(key);
    if (tl + kl + 2 > cap) return 0;
    memcpy(buf, topic, tl + 1);
    memcpy(buf + tl + 1, key, kl + 1);
    return tl + kl + 2;
}

/* ---- the map and the list (t->mu held) ----------------------------------*/

static IdemEntry *find(IdemTable *t, const char *name, size_t len, uint64_t hash) {
    for (IdemEntry *e = t->buckets[hash & (t->nbuckets - 1)]; e; e = e->chain)
        if (e->hash == hash && e->name_len == len && memcmp(e->name, name, len) == 0) return e;
    return NULL;
}

static void unlink_entry(IdemTable *t, IdemEntry *e) {
    IdemEntry **pp = &t->buckets[e->hash & (t->nbuckets - 1)];
    while (*pp != e) pp = &(*pp)->chain;
    *pp = e->chain;
    if (e->prev) e->prev->next = e->next;
    else t->head = e->next;
    if (e->next) e->next->prev = e->prev;
    else t->tail = e->prev;
    t->count--;
    t->bytes -= entry_bytes(e);
    free(e->answer);
    free(e);
}

static void grow(IdemTable *t) {
    size_t n = t->nbuckets * 2;
    IdemEntry **b = calloc(n, sizeof(*b));
    if (!b) return; /* chains just get longer */
    for (IdemEntry *e = t->head; e; e = e->next) {
        e->chain = b[e->hash & (n - 1)];
        b[e->hash & (n - 1)] = e;
    }
    free(t->buckets);
    t->buckets = b;
    t->nbuckets = n;
}

/* trim drops expired entries and, while over a bound, the oldest. */
static void trim(IdemTable *t, int64_t now_ms, size_t extra_bytes) {
    while (t->head && (t->head->created_ms + t->window_ms <= now_ms ||
                       t->count + 1 > t->max_keys || t->bytes + extra_bytes > t->max_bytes)) {
        unlink_entry(t, t->head);
    }
}

/* ---- API -----------------------------------------------------------------*/

IdemState idem_begin(IdemTable *t, const char *topic, const char *key, int64_t now_ms,
                     IdemAnswer *out) {
    char name[2 * 256 + 2 + IDEM_KEY_MAX];
    size_t len = make_name(topic, key, name, sizeof(name));
    if (len == 0) return IDEM_PENDING; /* the gateway validates lengths first */
    uint64_t hash = mq_hash64(name, len);
    pthread_mutex_lock(&t->mu);
    IdemEntry *e = find(t, name, len, hash);
    if (e && e->created_ms + t->window_ms <= now_ms) {
        unlink_entry(t, e);
        e = NULL;
    }
    IdemState st;
    if (e && e->done) {
        out->status = e->status;
        out->len = e->answer_len;
        out->body = malloc(e->answer_len ? e->answer_len : 1);
        if (out->body) {
            memcpy(out->body, e->answer, e->answer_len);
            st = IDEM_DONE;
        } else {
            st = IDEM_PENDING;
        }
    } else if (e) {
        st = IDEM_PENDING;
    } else {
        size_t need = sizeof(IdemEntry) + len;
        trim(t, now_ms, need);
        e = calloc(1, need);
        if (!e) {
            st = IDEM_PENDING;
        } else {
            e->hash = hash;
            e->created_ms = now_ms;
            e->name_len = len;
            memcpy(e->name, name, len);
            if (t->count + 1 > t->nbuckets) grow(t);
            IdemEntry **head = &t->buckets[hash & (t->nbuckets - 1)];
            e->chain = *head;
            *head = e;
            e->prev = t->tail;
            if (t->tail) t->tail->next = e;
            else t->head = e;
            t->tail = e;
            t->count++;
            t->bytes += entry_bytes(e);
            st = IDEM_NEW;
        }
    }
    pthread_mutex_unlock(&t->mu);
    return st;
}

void idem_finish(IdemTable *t, const char *topic, const char *key, unsigned status,
                 const char *body, size_t len) {
    char name[2 * 256 + 2 + IDEM_KEY_MAX];
    size_t nl = make_name(topic, key, name, sizeof(name));
    if (nl == 0) return;
    uint64_t hash = mq_hash64(name, nl);
    char *copy = malloc(len ? len : 1); /* outside the lock */
    if (copy && len) memcpy(copy, body, len);
    pthread_mutex_lock(&t->mu);
    IdemEntry *e = find(t, name, nl, hash);
    if (e && !e->done) {
        /* Make room by dropping older entries, never the claim itself. */
        while (copy && t->bytes + len > t->max_bytes && t->head && t->head != e)
            unlink_entry(t, t->head);
        if (!copy || t->bytes + len > t->max_bytes) {
            unlink_entry(t, e); /* cannot keep the answer: forget the claim */
        } else {
            e->done = true;
            e->status = status;
            e->answer = copy;
            e->answer_len = len;
            t->bytes += len;
            copy = NULL;
        }
    }
    pthread_mutex_unlock(&t->mu);
    free(copy);
}

void idem_abort(IdemTable *t, const char *topic, const char *key) {
    char name[2 * 256 + 2 + IDEM_KEY_MAX];
    size_t nl = make_name(topic, key, name, sizeof(name));
    if (nl == 0) return;
    uint64_t hash = mq_hash64(name, nl);
    pthread_mutex_lock(&t->mu);
    IdemEntry *e = find(t, name, nl, hash);
    if (e && !e->done) unlink_entry(t, e);
    pthread_mutex_unlock(&t->mu);
}

bool idem_key_valid(const char *key) {
    size_t n = 0;
    for (; key[n]; n++) {
        if (n >= IDEM_KEY_MAX || key[n] < 0x21 || key[n] > 0x7e) return false;
    }
    return n > 0;
}

size_t idem_count(IdemTable *t) {
    pthread_mutex_lock(&t->mu);
    size_t n = t->count;
    pthread_mutex_unlock(&t->mu);
    return n;
}
