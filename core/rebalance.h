/*
 * rebalance.h - queue allocation for classic-pull consumers: which of a
 * topic's queues one client of a consumer group reads, given every client
 * id of the group that subscribes to the topic.  RocketMQ clients compute
 * this themselves (client/.../consumer/rebalance/, REFERENCE.md A4); Petrel's
 * broker computes it and answers it in the heartbeat (core/members.c).
 *
 * Pure functions: no state, no locks, no I/O; any thread.  The result
 * depends only on the arguments (never on the order of the client ids),
 * so every client computing it from the same list gets a disjoint share.
 */
#ifndef PETREL_REBALANCE_H
#define PETREL_REBALANCE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "mq.h"

#define RB_VIRTUAL_NODES 10 /* ring nodes per client (RocketMQ virtualNodeCnt) */

/* An allocation strategy; the names are RocketMQ's getName() values. */
typedef enum RbStrategy {
    RB_AVG = 0,         /* "AVG": contiguous blocks, the default */
    RB_AVG_BY_CIRCLE,   /* "AVG_BY_CIRCLE": round robin */
    RB_CONSISTENT_HASH, /* "CONSISTENT_HASH": hash ring, RB_VIRTUAL_NODES per client */
    RB_CONFIG,          /* "CONFIG": the client states its queues (not computed here) */
} RbStrategy;

/* rb_strategy_parse maps the exact (case-sensitive) names "AVG",
 * "AVG_BY_CIRCLE", "CONSISTENT_HASH" and "CONFIG" to '*out' and returns
 * true; false for anything else, NULL included ('*out' untouched). */
bool rb_strategy_parse(const char *s, RbStrategy *out);

/* rb_strategy_name returns the static name of 's' (as parsed above), or
 * "UNKNOWN" for a value outside the enum. */
const char *rb_strategy_name(RbStrategy s);

/* rb_allocate shares the queues 0..'n_queues'-1 of 'topic' among the
 * 'n_clients' ids in 'clients' (any order; a byte-wise sorted, de-duplicated
 * copy is used, as RocketMQ sorts cidAll) and writes the queue ids that
 * go to the client 'me', ascending, to 'out' (capacity 'n_queues') and
 * their count to '*n_out'.  'me' not among 'clients' (or no clients):
 * '*n_out' = 0 and MQ_OK.  Every queue goes to exactly one client.
 *   RB_AVG: RocketMQ AllocateMessageQueueAveragely; with mq queues, cid
 *     clients and 'me' at index idx: mod = mq % cid, avg = mq <= cid ? 1 :
 *     (idx < mod ? mq/cid + 1 : mq/cid), start = idx < mod ? idx*avg :
 *     idx*avg + mod, and 'me' gets [start, start + min(avg, mq - start)).
 *   RB_AVG_BY_CIRCLE: queue i goes to the client at index i % cid.
 *   RB_CONSISTENT_HASH: a ring of RB_VIRTUAL_NODES nodes per client keyed
 *     "<clientId>-<i>" (i = 0..9); the queue keyed "<topic>@<queueId>"
 *     (decimal) goes to the first node clockwise, i.e. the node with the
 *     smallest hash >= the queue's hash, wrapping to the smallest.  The
 *     hash is mq_hash64 (FNV-1a 64) of the key passed through MurmurHash3's
 *     fmix64 finaliser (FNV-1a alone keeps keys that differ only in their
 *     last character close together on the ring), compared as unsigned;
 *     equal node hashes are ordered by client id, then by i.  Adding a
 *     client moves queues only to it; removing one moves only its queues.
 * Returns MQ_OK; MQ_ERR_INVAL for RB_CONFIG or an unknown strategy, a
 * NULL 'me', 'n_out', 'topic' (consistent hash only), 'clients' or an
 * element of it (with 'n_clients' > 0), or 'out' (with 'n_queues' > 0);
 * MQ_ERR_NOMEM ('*n_out' = 0).  The caller owns every buffer. */
int rb_allocate(RbStrategy s, const char *topic, const char *const *clients, size_t n_clients,
                const char *me, uint32_t n_queues, uint32_t *out, size_t *n_out);

#endif
