/*
 * namemap.c - the intrusive name-keyed hash map: see namemap.h.  Chained
 * buckets, a power of two of them, indexed by the low bits of the key's
 * mq_hash64 (FNV-1a); new nodes go to the head of their chain.  Owns the
 * bucket array only.  Calls mq_hash64; no locks, no I/O.
 */
#include "namemap.h"

#include <stdlib.h>
#include <string.h>

static size_t slot(const NameMap *m, uint64_t hash) { return hash & (m->nbuckets - 1); }

void nm_node_init(NmNode *n, const char *key) {
    n->next = NULL;
    n->hash = nm_hash(key, strlen(key));
    n->key = key;
}

int nm_init(NameMap *m, size_t nbuckets) {
    if (!m) return MQ_ERR_INVAL;
    memset(m, 0, sizeof(*m));
    if (nbuckets == 0 || (nbuckets & (nbuckets - 1)) != 0) return MQ_ERR_INVAL;
    m->buckets = calloc(nbuckets, sizeof(*m->buckets));
    if (!m->buckets) return MQ_ERR_NOMEM;
    m->nbuckets = nbuckets;
    return MQ_OK;
}

void nm_free(NameMap *m, void (*free_entry)(NmNode *n)) {
    if (!m) return;
    for (size_t i = 0; free_entry && i < m->nbuckets; i++) {
        NmNode *n = m->buckets[i];
        while (n) {
            NmNode *next = n->next;
            free_entry(n);
            n = next;
        }
    }
    free(m->buckets);
    memset(m, 0, sizeof(*m));
}

NmNode *nm_find(const NameMap *m, const char *key, uint64_t hash) {
    for (NmNode *n = m->buckets[slot(m, hash)]; n; n = n->next)
        if (n->hash == hash && strcmp(n->key, key) == 0) return n;
    return NULL;
}

/* grow doubles the bucket array and relinks every node; on allocation
 * failure it leaves the map as it was (longer chains). */
static void grow(NameMap *m) {
    size_t n = m->nbuckets * 2;
    if (n < m->nbuckets) return; /* cannot double any more */
    NmNode **b = calloc(n, sizeof(*b));
    if (!b) return;
    for (size_t i = 0; i < m->nbuckets; i++) {
        NmNode *e = m->buckets[i];
        while (e) {
            NmNode *next = e->next;
            e->next = b[e->hash & (n - 1)];
            b[e->hash & (n - 1)] = e;
            e = next;
        }
    }
    free(m->buckets);
    m->buckets = b;
    m->nbuckets = n;
}

void nm_insert(NameMap *m, NmNode *n) {
    if (m->count + 1 > m->nbuckets) grow(m);
    NmNode **head = &m->buckets[slot(m, n->hash)];
    n->next = *head;
    *head = n;
    m->count++;
}

NmNode *nm_remove(NameMap *m, const char *key, uint64_t hash) {
    for (NmNode **pp = &m->buckets[slot(m, hash)]; *pp; pp = &(*pp)->next) {
        NmNode *n = *pp;
        if (n->hash == hash && strcmp(n->key, key) == 0) {
            *pp = n->next;
            n->next = NULL;
            m->count--;
            return n;
        }
    }
    return NULL;
}

NmNode *nm_next(const NameMap *m, const NmNode *prev) {
    if (prev && prev->next) return prev->next;
    size_t i = prev ? slot(m, prev->hash) + 1 : 0;
    for (; i < m->nbuckets; i++)
        if (m->buckets[i]) return m->buckets[i];
    return NULL;
}
