/*
 * namemap.h - an intrusive hash map keyed by NUL-terminated names, for the
 * in-memory registries (topic.c, group.c).  An entry embeds an NmNode;
 * the map links nodes into power-of-two bucket chains by mq_hash64 of the
 * key and grows by doubling at load 1.  It owns only its bucket array:
 * entries belong to the caller, who allocates them, keeps each key valid
 * and unchanged while its node is linked, and frees them once unlinked.
 *
 * No locking inside: the caller serialises changes (nm_insert, nm_remove,
 * nm_free) against every other call on the same map; lookups and walks
 * (nm_find, nm_next, reading 'count') may run concurrently with each
 * other.  The registries hold their rwlock in write mode to change it.
 */
#ifndef PETREL_NAMEMAP_H
#define PETREL_NAMEMAP_H

#include <stddef.h>
#include <stdint.h>

#include "mq.h"

/* The link of one entry, embedded in it.  'hash' and 'key' are set by
 * nm_node_init before the node is inserted; 'next' is the map's. */
typedef struct NmNode {
    struct NmNode *next; /* bucket chain (the map's) */
    uint64_t hash;       /* mq_hash64 of 'key' */
    const char *key;     /* NUL-terminated; borrowed, usually from the entry itself */
} NmNode;

/* The map.  The fields are read-only for callers ('count' may be read
 * under the caller's lock); only nm_* change them. */
typedef struct NameMap {
    NmNode **buckets; /* 'nbuckets' chain heads */
    size_t nbuckets;  /* power of two, >= 1 */
    size_t count;     /* nodes linked */
} NameMap;

/* NM_ENTRY returns the entry of type 'type' whose member 'member' is the
 * NmNode 'node' (not NULL). */
#define NM_ENTRY(node, type, member) ((type *)(void *)((char *)(node) - offsetof(type, member)))

/* nm_hash is the hash nm_node_init gives to a 'len'-byte key, for callers
 * that know the length already (or bound it: strnlen). */
static inline uint64_t nm_hash(const char *key, size_t len) { return mq_hash64(key, len); }

/* nm_node_init sets 'n' up for the key 'key' (NUL-terminated, borrowed:
 * it must outlive the node's time in a map and not change meanwhile). */
void nm_node_init(NmNode *n, const char *key);

/* nm_init makes 'm' an empty map of 'nbuckets' buckets (a power of two,
 * >= 1).  MQ_OK, MQ_ERR_INVAL (NULL 'm', bad 'nbuckets'), MQ_ERR_NOMEM
 * ('m' is then empty and nm_free is optional).  Any thread. */
int nm_init(NameMap *m, size_t nbuckets);

/* nm_free calls 'free_entry' (NULL: none) on each linked node, in no
 * particular order, then frees the bucket array and leaves 'm' empty with
 * no buckets (nm_init again before any other use).  'free_entry' may free
 * the entry holding the node and must not call the map.  NULL 'm' ok. */
void nm_free(NameMap *m, void (*free_entry)(NmNode *n));

/* nm_find returns the node of 'key' ('hash' = nm_hash of it), or NULL.
 * Borrowed: valid while it stays linked. */
NmNode *nm_find(const NameMap *m, const char *key, uint64_t hash);

/* nm_insert links 'n' (set up by nm_node_init, not linked, and no node of
 * the same key linked: the caller checks with nm_find).  When that makes
 * 'count' exceed 'nbuckets' the bucket array doubles first; should that
 * allocation fail the chains just get longer, so insert never fails. */
void nm_insert(NameMap *m, NmNode *n);

/* nm_remove unlinks and returns the node of 'key' ('hash' = nm_hash of it),
 * or NULL when absent.  The caller owns the entry again.  The bucket array
 * never shrinks. */
NmNode *nm_remove(NameMap *m, const char *key, uint64_t hash);

/* nm_next walks the map: the first node when 'prev' is NULL, else the
 * node after 'prev' (linked), NULL after the last.  Every node comes once,
 * in no particular order, provided the map does not change during the
 * walk:
 *     for (NmNode *n = nm_next(m, NULL); n; n = nm_next(m, n)) ...
 * A whole walk is O(nbuckets + count). */
NmNode *nm_next(const NameMap *m, const NmNode *prev);

#endif
