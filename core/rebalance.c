/*
 * rebalance.c - queue allocation for classic-pull consumers: see
 * rebalance.h.  Every strategy first sorts (unless already sorted, as
 * members.c passes them) and de-duplicates a copy of the client ids
 * (pointers only; the strings stay the caller's) and finds the index of
 * 'me' in it.  The consistent-hash ring is an array of
 * (hash, client index, node) sorted once per call and searched per queue.
 * Calls mq_hash64 only.
 */
#include "rebalance.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const strategy_names[] = {
    [RB_AVG] = "AVG",
    [RB_AVG_BY_CIRCLE] = "AVG_BY_CIRCLE",
    [RB_CONSISTENT_HASH] = "CONSISTENT_HASH",
    [RB_CONFIG] = "CONFIG",
};
#define N_STRATEGIES (sizeof(strategy_names) / sizeof(strategy_names[0]))

bool rb_strategy_parse(const char *s, RbStrategy *out) {
    if (!s || !out) return false;
    for (size_t i = 0; i < N_STRATEGIES; i++) {
        if (strcmp(s, strategy_names[i]) == 0) {
            *out = (RbStrategy)i;
            return true;
        }
    }
    return false;
}

const char *rb_strategy_name(RbStrategy s) {
    if ((unsigned)s >= N_STRATEGIES) return "UNKNOWN";
    return strategy_names[s];
}

/* ======================================================================
 * Averagely and by circle
 * ====================================================================== */

/* RocketMQ AllocateMessageQueueAveragely for client 'idx' of 'cid'. */
static size_t alloc_avg(uint32_t mq, size_t cid, size_t idx, uint32_t *out) {
    size_t mod = mq % cid;
    size_t avg = mq <= cid ? 1 : (idx < mod ? mq / cid + 1 : mq / cid);
    size_t start = idx < mod ? idx * avg : idx * avg + mod;
    if (start >= mq) return 0; /* more clients than queues: nothing for this one */
    size_t range = avg < mq - start ? avg : mq - start;
    for (size_t i = 0; i < range; i++) out[i] = (uint32_t)(start + i);
    return range;
}

/* RocketMQ AllocateMessageQueueAveragelyByCircle: queue i to client i % cid. */
static size_t alloc_circle(uint32_t mq, size_t cid, size_t idx, uint32_t *out) {
    size_t n = 0;
    for (size_t q = idx; q < mq; q += cid) out[n++] = (uint32_t)q;
    return n;
}

/* ======================================================================
 * Consistent hash
 * ====================================================================== */

typedef struct RingNode {
    uint64_t hash;   /* ring position */
    size_t client;   /* index into the sorted client ids */
    uint32_t vnode;  /* 0..RB_VIRTUAL_NODES-1 */
} RingNode;

/* MurmurHash3 fmix64: spreads FNV-1a's last-byte differences over all 64 bits. */
static uint64_t fmix64(uint64_t h) {
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdULL;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ULL;
    h ^= h >> 33;
    return h;
}

/* Hashes "<prefix><sep><n>" using 'buf' (at least strlen(prefix) + 12 bytes). */
static uint64_t key_hash(const char *prefix, char sep, uint32_t n, char *buf) {
    size_t len = strlen(prefix);
    memcpy(buf, prefix, len);
    len += (size_t)sprintf(buf + len, "%c%u", sep, (unsigned)n);
    return fmix64(mq_hash64(buf, len));
}

static int ring_cmp(const void *a, const void *b) {
    const RingNode *x = a;
    const RingNode *y = b;
    if (x->hash != y->hash) return x->hash < y->hash ? -1 : 1;
    if (x->client != y->client) return x->client < y->client ? -1 : 1;
    return x->vnode < y->vnode ? -1 : x->vnode > y->vnode;
}

/* Index of the first node with hash >= 'h', wrapping to 0. */
static size_t ring_find(const RingNode *ring, size_t n, uint64_t h) {
    size_t lo = 0;
    size_t hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (ring[mid].hash < h) lo = mid + 1;
        else hi = mid;
    }
    return lo == n ? 0 : lo;
}

static int alloc_hash(const char *topic, const char *const *ids, size_t cid, size_t idx,
                      uint32_t mq, uint32_t *out, size_t *n_out) {
    if (cid > SIZE_MAX / sizeof(RingNode) / RB_VIRTUAL_NODES) return MQ_ERR_NOMEM;
    size_t longest = strlen(topic);
    for (size_t c = 0; c < cid; c++) {
        size_t l = strlen(ids[c]);
        if (l > longest) longest = l;
    }
    if (longest > SIZE_MAX - 16) return MQ_ERR_NOMEM;
    size_t n_nodes = cid * RB_VIRTUAL_NODES;
    RingNode *ring = malloc(n_nodes * sizeof(*ring));
    char *buf = malloc(longest + 16);
    if (!ring || !buf) {
        free(ring);
        free(buf);
        return MQ_ERR_NOMEM;
    }
    for (size_t c = 0; c < cid; c++) {
        for (uint32_t v = 0; v < RB_VIRTUAL_NODES; v++) {
            RingNode *node = &ring[c * RB_VIRTUAL_NODES + v];
            node->hash = key_hash(ids[c], '-', v, buf);
            node->client = c;
            node->vnode = v;
        }
    }
    qsort(ring, n_nodes, sizeof(*ring), ring_cmp);
    size_t n = 0;
    for (uint32_t q = 0; q < mq; q++) {
        size_t at = ring_find(ring, n_nodes, key_hash(topic, '@', q, buf));
        if (ring[at].client == idx) out[n++] = q;
    }
    free(buf);
    free(ring);
    *n_out = n;
    return MQ_OK;
}

/* ======================================================================
 * rb_allocate
 * ====================================================================== */

static int id_cmp(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

int rb_allocate(RbStrategy s, const char *topic, const char *const *clients, size_t n_clients,
                const char *me, uint32_t n_queues, uint32_t *out, size_t *n_out) {
    if (!n_out) return MQ_ERR_INVAL;
    *n_out = 0;
    if (s != RB_AVG && s != RB_AVG_BY_CIRCLE && s != RB_CONSISTENT_HASH) return MQ_ERR_INVAL;
    if (!me || (n_clients > 0 && !clients) || (n_queues > 0 && !out)) return MQ_ERR_INVAL;
    if (s == RB_CONSISTENT_HASH && !topic) return MQ_ERR_INVAL;
    for (size_t i = 0; i < n_clients; i++)
        if (!clients[i]) return MQ_ERR_INVAL;
    if (n_clients == 0 || n_queues == 0) return MQ_OK;
    if (n_clients > SIZE_MAX / sizeof(*clients)) return MQ_ERR_NOMEM;

    const char **ids = malloc(n_clients * sizeof(*ids));
    if (!ids) return MQ_ERR_NOMEM;
    memcpy(ids, clients, n_clients * sizeof(*ids));
    bool sorted = true; /* members.c passes its ids sorted: skip the qsort */
    for (size_t i = 1; i < n_clients && sorted; i++) sorted = strcmp(ids[i - 1], ids[i]) < 0;
    if (!sorted) qsort(ids, n_clients, sizeof(*ids), id_cmp);
    size_t cid = 0; /* distinct ids, compacted to the front */
    for (size_t i = 0; i < n_clients; i++)
        if (cid == 0 || strcmp(ids[cid - 1], ids[i]) != 0) ids[cid++] = ids[i];
    const char **hit = bsearch(&me, ids, cid, sizeof(*ids), id_cmp);
    if (!hit) {
        free(ids);
        return MQ_OK;
    }
    size_t idx = (size_t)(hit - ids);

    int rc = MQ_OK;
    switch (s) {
    case RB_AVG: *n_out = alloc_avg(n_queues, cid, idx, out); break;
    case RB_AVG_BY_CIRCLE: *n_out = alloc_circle(n_queues, cid, idx, out); break;
    case RB_CONSISTENT_HASH: rc = alloc_hash(topic, ids, cid, idx, n_queues, out, n_out); break;
    case RB_CONFIG: MQ_ASSERT(!"rejected above"); break;
    }
    free(ids);
    return rc;
}
