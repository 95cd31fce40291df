/*
 * members.h - the broker's table of live consumers: per consumer group,
 * the clients that sent a heartbeat (classic pull, with their allocation
 * strategy and subscriptions) or that receive by pop with a client id,
 * when each was last seen, and the orderly-consumption queue locks
 * (RocketMQ ConsumerManager + RebalanceLockManager).  It answers which
 * queues a pull client reads now (rebalance.h) and drops silent clients.
 *
 * In memory only, as in RocketMQ: a restart forgets every client and
 * lock, and clients re-register with their next heartbeat.  Time is
 * always an argument ('now_ms', epoch milliseconds, >= 0) so tests drive
 * it; a broker thread calls mb_expire periodically.  One mutex guards
 * everything and is held for in-memory work only (no I/O, no waiting);
 * every function is thread-safe.  Sizes are bounded (MB_*_MAX below).
 */
#ifndef PETREL_MEMBERS_H
#define PETREL_MEMBERS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "mq.h"
#include "rebalance.h"

#define MB_CLIENT_ID_MAX 255      /* longest client id, bytes */
#define MB_NAME_MAX 255           /* longest group or topic name, bytes (= META_NAME_MAX) */
#define MB_SUBS_MAX 64            /* subscriptions per client */
#define MB_EXPR_MAX 4096          /* longest subscription expression, bytes */
#define MB_CONFIG_QUEUES_MAX 1024 /* config_queues per subscription (= TOPIC_QUEUES_MAX) */
#define MB_CLIENTS_MAX 10000      /* clients per group */
#define MB_GROUPS_MAX 100000      /* groups holding a client or a lock */
#define MB_LOCKS_MAX 100000       /* queue locks per group */

#define MB_EXPIRE_MS_DEFAULT 120000    /* RocketMQ clientChannelExpiredMs */
#define MB_LOCK_LEASE_MS_DEFAULT 60000 /* RocketMQ rebalance.lockMaxLiveTime */

/* How a client consumes. */
typedef enum MbKind {
    MB_PULL = 0, /* classic pull: heartbeats, takes part in queue allocation */
    MB_POP = 1,  /* receive/stream client that gave a client id: listed only */
} MbKind;

/* One subscription of a client.  As an argument every pointer is borrowed
 * for the call; as listed by mb_list they are the table's, valid only
 * during the callback. */
typedef struct MbSubscription {
    const char *topic;             /* 1..MB_NAME_MAX bytes */
    const char *expression;        /* tag expression or SQL92, <= MB_EXPR_MAX bytes;
                                      NULL or "" in a heartbeat = "*" */
    const char *filter_type;       /* "TAG" or "SQL92"; NULL in a heartbeat = "TAG" */
    const uint32_t *config_queues; /* RB_CONFIG: the queues the client states; stored
                                      ascending without duplicates */
    size_t n_config_queues;        /* entries in config_queues, <= MB_CONFIG_QUEUES_MAX */
} MbSubscription;

/* Timeouts; a zero field takes the default above. */
typedef struct MbConfig {
    int64_t expire_ms;     /* a client silent this long is dropped (ms) */
    int64_t lock_lease_ms; /* a queue lock not renewed this long is free (ms) */
} MbConfig;

/* One client as mb_list shows it; every pointer is valid only during the
 * callback. */
typedef struct MbClientInfo {
    const char *client_id;
    MbKind kind;
    RbStrategy strategy;        /* MB_PULL: from the last heartbeat; MB_POP: RB_AVG */
    int64_t last_seen_ms;       /* 'now_ms' of the last heartbeat or touch */
    size_t n_subs;              /* entries in subs */
    const MbSubscription *subs; /* MB_PULL: as in the last heartbeat; MB_POP: the topics
                                   it was seen on, expression and filter_type "" */
} MbClientInfo;

typedef struct MbTable MbTable;

/* mb_client_id_valid is true when 'id' is 1..MB_CLIENT_ID_MAX characters
 * of [A-Za-z0-9_.:@-] (RocketMQ's "ip@pid" style ids fit): the rule for
 * every client id the gateway accepts.  Any thread. */
bool mb_client_id_valid(const char *id);

/* mb_open makes an empty table with the timeouts of 'cfg' (NULL = the
 * defaults).  MQ_OK; MQ_ERR_INVAL (NULL 'out', a negative timeout);
 * MQ_ERR_NOMEM.  Caller owns '*out' (mb_close). */
int mb_open(const MbConfig *cfg, MbTable **out);

/* mb_close frees the table and everything in it.  NULL ok.  Call it once
 * no other thread uses 't'. */
void mb_close(MbTable *t);

/* mb_heartbeat registers pull client 'client_id' of 'group', or replaces
 * its strategy and its whole subscription set ('n_subs' entries, deep
 * copied, topics distinct), and sets its last_seen to 'now_ms'.  A pop
 * client of that id becomes a pull client.  Returns MQ_OK; MQ_ERR_INVAL
 * (NULL 't'/'group'/'client_id', an empty or too long group, id or topic,
 * 'strategy' outside RbStrategy, more than MB_SUBS_MAX subscriptions, NULL
 * 'subs' with 'n_subs' > 0, a topic twice, an expression longer than
 * MB_EXPR_MAX, a filter type other than "TAG"/"SQL92", more than
 * MB_CONFIG_QUEUES_MAX config queues or NULL config_queues with a count,
 * 'now_ms' < 0); MQ_ERR_FULL (a new client past MB_CLIENTS_MAX in the
 * group, or a new group past MB_GROUPS_MAX); MQ_ERR_NOMEM.  On error
 * nothing changed. */
int mb_heartbeat(MbTable *t, const char *group, const char *client_id, RbStrategy strategy,
                 const MbSubscription *subs, size_t n_subs, int64_t now_ms);

/* mb_touch records that receive/stream client 'client_id' of 'group' was
 * seen at 'now_ms' on 'topic': creates it as an MB_POP client when new,
 * else sets its last_seen and, for a pop client, adds 'topic' to its
 * topics.  A pull client keeps its heartbeat state (only last_seen
 * changes).  Pop clients never take part in queue allocation.  Returns
 * MQ_OK; MQ_ERR_INVAL (as mb_heartbeat for the names, 'now_ms' < 0);
 * MQ_ERR_FULL (as mb_heartbeat, or a pop client already on MB_SUBS_MAX
 * other topics: its last_seen is updated all the same); MQ_ERR_NOMEM. */
int mb_touch(MbTable *t, const char *group, const char *client_id, const char *topic,
             int64_t now_ms);

/* mb_unregister removes client 'client_id' of 'group' (a graceful
 * shutdown) and releases the queue locks it holds in the group.  MQ_OK;
 * MQ_ERR_NOTFOUND (not registered); MQ_ERR_INVAL (NULL argument). */
int mb_unregister(MbTable *t, const char *group, const char *client_id);

/* mb_assignment writes the queues of 'topic' (0..'n_queues'-1) that pull
 * client 'client_id' of 'group' reads now, ascending, to 'out' (capacity
 * 'n_queues') and their count to '*n_out':
 *   - 'broadcast': every queue (each client reads all of them);
 *   - strategy RB_CONFIG: its config_queues for 'topic' that are < 'n_queues';
 *   - else rb_allocate with the client's own strategy over the ids of
 *     every MB_PULL client of the group subscribed to 'topic' (whatever
 *     their strategy; clients that disagree on the strategy may overlap,
 *     as in RocketMQ).
 * Clients stay in the computation until mb_expire drops them.  Returns
 * MQ_OK; MQ_ERR_NOTFOUND (no such pull client, or it does not subscribe
 * to 'topic'; '*n_out' = 0); MQ_ERR_INVAL (NULL argument, NULL 'out' with
 * 'n_queues' > 0); MQ_ERR_NOMEM.  The allocation runs under the mutex:
 * O(c) for c clients, O(c log c) for consistent hash. */
int mb_assignment(MbTable *t, const char *group, const char *client_id, const char *topic,
                  uint32_t n_queues, bool broadcast, uint32_t *out, size_t *n_out);

/* mb_expire drops every client whose last_seen + expire_ms <= 'now_ms'
 * and the queue locks they hold, forgets locks whose lease ran out, and
 * returns how many clients it dropped.  The broker's housekeeping thread
 * calls it; tests call it with made-up times. */
size_t mb_expire(MbTable *t, int64_t now_ms);

/* mb_list calls 'fn' for each client of 'group' in byte-wise client id
 * order and stops at the first non-zero return, which it returns;
 * otherwise MQ_OK (an unknown group has no clients: no call, MQ_OK).
 * 'fn' runs under the table mutex: it must not block and must not call
 * any mb_ function; the MbClientInfo is valid only during the call.
 * MQ_ERR_INVAL for a NULL 't', 'group' or 'fn'. */
int mb_list(MbTable *t, const char *group, int (*fn)(void *arg, const MbClientInfo *c), void *arg);

/* mb_count returns the number of clients (pull and pop) of 'group'; 0 for
 * an unknown group or a NULL argument. */
size_t mb_count(MbTable *t, const char *group);

/* mb_drop_group forgets every client and lock of 'group' (the group was
 * deleted).  Nothing for an unknown group or a NULL argument. */
void mb_drop_group(MbTable *t, const char *group);

/* mb_lock tries to lock for 'client_id' each queue 'qids[0..n-1]' of
 * 'topic' in 'group' (RocketMQ RebalanceLockManager.tryLockBatch): a queue
 * is granted when nobody holds it, when 'client_id' holds it (the lease is
 * renewed) or when its holder's lease ran out (last renewal +
 * lock_lease_ms <= 'now_ms'); a granted lease starts at 'now_ms'.  The
 * client need not be registered.  Writes the queues of 'qids' now held by
 * 'client_id', ascending and without duplicates, to 'locked' (capacity
 * 'n') and their count to '*n_locked'.  Returns MQ_OK; MQ_ERR_INVAL (NULL
 * or bad names as mb_heartbeat, NULL 'qids'/'locked' with 'n' > 0, NULL
 * 'n_locked', 'now_ms' < 0); MQ_ERR_FULL (the group would hold more than
 * MB_LOCKS_MAX locks, or a new group past MB_GROUPS_MAX: nothing granted);
 * MQ_ERR_NOMEM (some queues may have been granted: their leases run out
 * as usual).  '*n_locked' is 0 on error. */
int mb_lock(MbTable *t, const char *group, const char *client_id, const char *topic,
            const uint32_t *qids, size_t n, int64_t now_ms, uint32_t *locked, size_t *n_locked);

/* mb_unlock releases the locks of 'qids[0..n-1]' of 'topic' in 'group'
 * that 'client_id' holds; locks held by another client (or nobody) are
 * left alone.  MQ_OK; MQ_ERR_INVAL (NULL argument, NULL 'qids' with
 * 'n' > 0). */
int mb_unlock(MbTable *t, const char *group, const char *client_id, const char *topic,
              const uint32_t *qids, size_t n);

/* mb_lock_holder says whether queue 'qid' of 'topic' in 'group' is locked
 * at 'now_ms' (held and its lease not run out) and then copies the
 * holder's id into 'holder' (may be NULL).  False for a NULL argument. */
bool mb_lock_holder(MbTable *t, const char *group, const char *topic, uint32_t qid, int64_t now_ms,
                    char holder[MB_CLIENT_ID_MAX + 1]);

#endif
