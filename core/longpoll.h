/*
 * longpoll.h - the long-polling registry: pulls that found nothing wait
 * here, keyed by (topic, queue id), until the queue grows past their
 * offset, their deadline passes or the broker stops.  Owns one timer
 * thread (CLOCK_MONOTONIC condvar over a deadline heap); the store's
 * dispatcher reports arrivals through lp_arrival (StoreConfig.on_arrival,
 * wired in broker.c).  Knows nothing of HTTP: a waiter carries a callback,
 * and the gateway's callback resumes the suspended connection.
 *
 * Waiters are memory their owner provides (no allocation per arrival);
 * each registered waiter fires exactly once, under the registry mutex, or
 * is cancelled before it fires.
 */
#ifndef PETREL_LONGPOLL_H
#define PETREL_LONGPOLL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "mq.h"

#define LP_TOPIC_MAX 255 /* longest topic name a waiter holds, bytes */

/* A waiter added with this queue id waits for the whole topic: any
 * arrival on any of its queues fires it, whatever its 'queue_off' (the
 * receive path of a consumer group waits this way, core/pop.h). */
#define LP_ANY_QUEUE UINT32_MAX

/* Why a waiter fired. */
typedef enum LpReason {
    LP_ARRIVAL = 1,  /* its queue grew past its offset */
    LP_TIMEOUT = 2,  /* its deadline passed */
    LP_STOPPING = 3, /* lp_wake_all or lp_close */
} LpReason;

/* The callback of a waiter.  Runs on the thread that fires it (the store's
 * dispatcher, the timer thread, or the caller of lp_wake_all/lp_close)
 * with the registry mutex held: it must not block and must not call any
 * lp_ function.  Once it returns the registry no longer touches the
 * waiter. */
typedef void (*LpFireFn)(void *arg, LpReason reason);

/* One waiting pull.  Zero it (or lp_waiter_init) before the first lp_add;
 * it may be added again after it fired or was cancelled.  Every field is
 * the registry's while the waiter is registered. */
typedef struct LpWaiter {
    char topic[LP_TOPIC_MAX + 1]; /* copy of the topic, NUL-terminated */
    size_t topic_len;             /* bytes */
    uint32_t queue_id;
    uint64_t queue_off;      /* fires when the queue's max offset exceeds it */
    int64_t deadline_ns;     /* mq_mono_ns() time at which it times out */
    uint64_t hash;           /* bucket hash of (topic, queue_id) */
    LpFireFn fire;           /* callback, run once */
    void *arg;               /* its argument */
    struct LpWaiter *next;   /* bucket chain */
    struct LpWaiter *prev;
    size_t heap_idx;         /* index in the deadline heap */
    int state;               /* LP_W_IDLE, LP_W_WAITING (registry-private) */
} LpWaiter;

typedef struct LpRegistry LpRegistry;

/* lp_waiter_init zeroes 'w' (idle, never registered). */
void lp_waiter_init(LpWaiter *w);

/* lp_open creates an empty registry.  With 'timer' it starts the timer
 * thread that fires waiters at their deadline; without it deadlines pass
 * only through lp_expire (unit tests drive time that way).  Caller owns
 * '*out'.  MQ_ERR_NOMEM, MQ_ERR_IO (thread creation failed, logged). */
int lp_open(bool timer, LpRegistry **out);

/* lp_close fires every waiter still registered with LP_STOPPING, stops
 * and joins the timer thread and frees.  Call it only once nothing calls
 * lp_arrival/lp_add any more (after store_close).  NULL ok. */
void lp_close(LpRegistry *reg);

/* lp_add registers 'w' for queue ('topic', 'queue_id'): it fires with
 * LP_ARRIVAL once an lp_arrival for that queue reports a max offset above
 * 'queue_off', with LP_TIMEOUT at 'deadline_ns' (mq_mono_ns clock), or
 * with LP_STOPPING.  'fire' may run on another thread before lp_add
 * returns.  Arrivals reported before lp_add are not replayed: the caller
 * re-reads the queue's max offset after lp_add and lp_cancels if it
 * already grew.  Any thread.
 * Returns MQ_OK; MQ_ERR_STATE after lp_wake_all (the broker is stopping:
 * not registered); MQ_ERR_INVAL when the topic is longer than
 * LP_TOPIC_MAX; MQ_ERR_NOMEM when the deadline heap cannot grow. */
int lp_add(LpRegistry *reg, LpWaiter *w, MqSlice topic, uint32_t queue_id, uint64_t queue_off,
           int64_t deadline_ns, LpFireFn fire, void *arg);

/* lp_cancel removes 'w' if it is still registered and returns true: it
 * will not fire.  False when it already fired or was never added; its
 * callback has then returned (it runs under the mutex this takes), so the
 * owner may free 'w' after lp_cancel whatever the result.  Any thread,
 * never from a callback. */
bool lp_cancel(LpRegistry *reg, LpWaiter *w);

/* lp_arrival fires the waiters of ('topic', 'queue_id') whose offset is
 * below 'max_off', and every LP_ANY_QUEUE waiter of 'topic', and returns
 * how many.  Costs one atomic load and a fence when nothing waits
 * anywhere, else one hash lookup (two while topic waiters exist) under
 * the registry mutex.  Core modules also call it to wake waiters when
 * something other than an append makes messages deliverable.  Called by the store's dispatcher per record; never
 * blocks on anything but the registry mutex. */
size_t lp_arrival(LpRegistry *reg, MqSlice topic, uint32_t queue_id, uint64_t max_off);

/* lp_expire fires every waiter whose deadline is at or before 'now_ns'
 * with LP_TIMEOUT and returns how many.  The timer thread calls it; tests
 * call it with made-up times. */
size_t lp_expire(LpRegistry *reg, int64_t now_ns);

/* lp_wake_all fires every registered waiter with LP_STOPPING and makes
 * later lp_add calls fail with MQ_ERR_STATE; returns how many fired.  For
 * shutdown, before the HTTP daemon waits for suspended requests. */
size_t lp_wake_all(LpRegistry *reg);

/* lp_count returns the number of waiters registered now (monitoring,
 * tests). */
size_t lp_count(LpRegistry *reg);

#endif
