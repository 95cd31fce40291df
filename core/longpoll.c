/*
 * longpoll.c - the long-polling registry: see longpoll.h.  Registered
 * waiters sit in two intrusive structures under one mutex: a fixed array
 * of hash buckets (doubly linked chains keyed by topic and queue id) for
 * arrivals, and a binary min-heap by deadline for the timer thread.
 * Firing a waiter unlinks it from both, marks it idle and runs its
 * callback, all under the mutex, so each registration fires exactly once
 * and lp_cancel never races a running callback.  Calls mq_hash64 and
 * mq_mono_ns only.
 */
#define _GNU_SOURCE
#include "longpoll.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define N_BUCKETS 1024     /* power of two */
#define HEAP_INITIAL 64    /* deadline heap slots allocated at open */

enum { LP_W_IDLE = 0, LP_W_WAITING = 1 };

struct LpRegistry {
    pthread_mutex_t mu;           /* guards everything below but 'n_waiting' reads */
    pthread_cond_t cond;          /* timer thread: new earliest deadline, or closing */
    LpWaiter *buckets[N_BUCKETS]; /* chains of waiting waiters */
    LpWaiter **heap;              /* min-heap by deadline_ns */
    size_t heap_len;              /* waiters in the heap (= registered) */
    size_t heap_cap;              /* slots allocated */
    atomic_size_t n_waiting;      /* = heap_len; read without the mutex by lp_arrival */
    size_t n_any;                 /* waiters registered for LP_ANY_QUEUE */
    bool stopping;                /* lp_wake_all ran: lp_add refuses */
    bool closing;                 /* lp_close ran: the timer thread exits */
    bool has_timer;               /* the timer thread was started */
    pthread_t timer;
};

/* ======================================================================
 * Hash chains and the deadline heap (mutex held)
 * ====================================================================== */

static uint64_t queue_hash(MqSlice topic, uint32_t queue_id) {
    uint64_t h = mq_hash64(topic.ptr, topic.len);
    return h ^ ((uint64_t)queue_id * 0x9e3779b97f4a7c15ull);
}

static LpWaiter **bucket_of(LpRegistry *reg, uint64_t hash) {
    return &reg->buckets[hash & (N_BUCKETS - 1)];
}

static bool heap_less(const LpRegistry *reg, size_t a, size_t b) {
    return reg->heap[a]->deadline_ns < reg->heap[b]->deadline_ns;
}

static void heap_swap(LpRegistry *reg, size_t a, size_t b) {
    LpWaiter *t = reg->heap[a];
    reg->heap[a] = reg->heap[b];
    reg->heap[b] = t;
    reg->heap[a]->heap_idx = a;
    reg->heap[b]->heap_idx = b;
}

static void heap_up(LpRegistry *reg, size_t i) {
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (!heap_less(reg, i, parent)) break;
        heap_swap(reg, i, parent);
        i = parent;
    }
}

static void heap_down(LpRegistry *reg, size_t i) {
    for (;;) {
        size_t l = 2 * i + 1;
        size_t r = l + 1;
        size_t min = i;
        if (l < reg->heap_len && heap_less(reg, l, min)) min = l;
        if (r < reg->heap_len && heap_less(reg, r, min)) min = r;
        if (min == i) return;
        heap_swap(reg, i, min);
        i = min;
    }
}

static void heap_remove(LpRegistry *reg, LpWaiter *w) {
    size_t i = w->heap_idx;
    MQ_ASSERT(i < reg->heap_len && reg->heap[i] == w);
    size_t last = reg->heap_len - 1;
    if (i != last) {
        heap_swap(reg, i, last);
        reg->heap_len--;
        heap_down(reg, i);
        heap_up(reg, i);
    } else {
        reg->heap_len--;
    }
}

/* Unlinks a waiting 'w' from its chain and the heap and marks it idle. */
static void unlink_waiter(LpRegistry *reg, LpWaiter *w) {
    MQ_ASSERT(w->state == LP_W_WAITING);
    if (w->prev) {
        w->prev->next = w->next;
    } else {
        *bucket_of(reg, w->hash) = w->next;
    }
    if (w->next) w->next->prev = w->prev;
    w->next = w->prev = NULL;
    heap_remove(reg, w);
    if (w->queue_id == LP_ANY_QUEUE) reg->n_any--;
    w->state = LP_W_IDLE;
    atomic_store(&reg->n_waiting, reg->heap_len);
}

/* Unlinks 'w' and runs its callback.  The callback may end the life of
 * the waiter's owner, so 'w' is not touched after it. */
static void fire_locked(LpRegistry *reg, LpWaiter *w, LpReason reason) {
    unlink_waiter(reg, w);
    LpFireFn fire = w->fire;
    void *arg = w->arg;
    fire(arg, reason);
}

/* Fires every registered waiter with 'reason'. */
static size_t fire_all_locked(LpRegistry *reg, LpReason reason) {
    size_t n = 0;
    while (reg->heap_len > 0) {
        fire_locked(reg, reg->heap[reg->heap_len - 1], reason);
        n++;
    }
    return n;
}

static size_t expire_locked(LpRegistry *reg, int64_t now_ns) {
    size_t n = 0;
    while (reg->heap_len > 0 && reg->heap[0]->deadline_ns <= now_ns) {
        fire_locked(reg, reg->heap[0], LP_TIMEOUT);
        n++;
    }
    return n;
}

/* ======================================================================
 * Timer thread
 * ====================================================================== */

static void *timer_main(void *arg) {
    LpRegistry *reg = arg;
    pthread_mutex_lock(&reg->mu);
    while (!reg->closing) {
        if (reg->heap_len == 0) {
            pthread_cond_wait(&reg->cond, &reg->mu);
            continue;
        }
        int64_t deadline = reg->heap[0]->deadline_ns;
        if (deadline <= mq_mono_ns()) {
            expire_locked(reg, mq_mono_ns());
            continue;
        }
        struct timespec ts = {(time_t)(deadline / 1000000000),
                              (long)(deadline % 1000000000)};
        pthread_cond_timedwait(&reg->cond, &reg->mu, &ts);
    }
    pthread_mutex_unlock(&reg->mu);
    return NULL;
}

/* ======================================================================
 * API
 * ====================================================================== */

void lp_waiter_init(LpWaiter *w) {
    memset(w, 0, sizeof(*w));
}

int lp_open(bool timer, LpRegistry **out) {
    LpRegistry *reg = calloc(1, sizeof(*reg));
    if (!reg) return MQ_ERR_NOMEM;
    reg->heap = calloc(HEAP_INITIAL, sizeof(*reg->heap));
    if (!reg->heap) {
        free(reg);
        return MQ_ERR_NOMEM;
    }
    reg->heap_cap = HEAP_INITIAL;
    atomic_init(&reg->n_waiting, 0);
    pthread_mutex_init(&reg->mu, NULL);
    mq_cond_init_mono(&reg->cond);
    if (timer) {
        int e = pthread_create(&reg->timer, NULL, timer_main, reg);
        if (e != 0) {
            MQ_ERROR("cannot start the long-polling timer thread: %s", strerror(e));
            pthread_cond_destroy(&reg->cond);
            pthread_mutex_destroy(&reg->mu);
            free(reg->heap);
            free(reg);
            return MQ_ERR_IO;
        }
        reg->has_timer = true;
    }
    *out = reg;
    return MQ_OK;
}

void lp_close(LpRegistry *reg) {
    if (!reg) return;
    pthread_mutex_lock(&reg->mu);
    reg->stopping = true;
    reg->closing = true;
    fire_all_locked(reg, LP_STOPPING);
    pthread_cond_signal(&reg->cond);
    pthread_mutex_unlock(&reg->mu);
    if (reg->has_timer) pthread_join(reg->timer, NULL);
    pthread_cond_destroy(&reg->cond);
    pthread_mutex_destroy(&reg->mu);
    free(reg->heap);
    free(reg);
}

int lp_add(LpRegistry *reg, LpWaiter *w, MqSlice topic, uint32_t queue_id, uint64_t queue_off,
           int64_t deadline_ns, LpFireFn fire, void *arg) {
    if (topic.len > LP_TOPIC_MAX) return MQ_ERR_INVAL;
    pthread_mutex_lock(&reg->mu);
    MQ_ASSERT(w->state != LP_W_WAITING);
    if (reg->stopping) {
        pthread_mutex_unlock(&reg->mu);
        return MQ_ERR_STATE;
    }
    if (reg->heap_len == reg->heap_cap) {
        size_t cap = reg->heap_cap * 2;
        LpWaiter **nh = realloc(reg->heap, cap * sizeof(*nh));
        if (!nh) {
            pthread_mutex_unlock(&reg->mu);
            return MQ_ERR_NOMEM;
        }
        reg->heap = nh;
        reg->heap_cap = cap;
    }
    memcpy(w->topic, topic.ptr, topic.len);
    w->topic[topic.len] = '\0';
    w->topic_len = topic.len;
    w->queue_id = queue_id;
    w->queue_off = queue_off;
    w->deadline_ns = deadline_ns;
    w->hash = queue_hash(topic, queue_id);
    w->fire = fire;
    w->arg = arg;
    w->state = LP_W_WAITING;
    if (queue_id == LP_ANY_QUEUE) reg->n_any++;
    LpWaiter **head = bucket_of(reg, w->hash);
    w->prev = NULL;
    w->next = *head;
    if (*head) (*head)->prev = w;
    *head = w;
    w->heap_idx = reg->heap_len;
    reg->heap[reg->heap_len++] = w;
    heap_up(reg, w->heap_idx);
    atomic_store(&reg->n_waiting, reg->heap_len);
    if (reg->heap[0] == w) pthread_cond_signal(&reg->cond);
    pthread_mutex_unlock(&reg->mu);
    /* Pairs with the fence in lp_arrival: either the dispatcher sees this
     * waiter, or the caller's re-read of the queue sees its new entries. */
    atomic_thread_fence(memory_order_seq_cst);
    return MQ_OK;
}

bool lp_cancel(LpRegistry *reg, LpWaiter *w) {
    pthread_mutex_lock(&reg->mu);
    bool was = w->state == LP_W_WAITING;
    if (was) unlink_waiter(reg, w);
    pthread_mutex_unlock(&reg->mu);
    return was;
}

/* Fires the waiters of ('topic', 'queue_id') whose offset is below
 * 'max_off'.  Mutex held. */
static size_t arrival_locked(LpRegistry *reg, MqSlice topic, uint32_t queue_id,
                             uint64_t max_off) {
    uint64_t hash = queue_hash(topic, queue_id);
    size_t n = 0;
    LpWaiter *w = *bucket_of(reg, hash);
    while (w) {
        LpWaiter *next = w->next; /* 'w' is gone once fired */
        if (w->hash == hash && w->queue_id == queue_id && w->queue_off < max_off &&
            w->topic_len == topic.len && memcmp(w->topic, topic.ptr, topic.len) == 0) {
            fire_locked(reg, w, LP_ARRIVAL);
            n++;
        }
        w = next;
    }
    return n;
}

size_t lp_arrival(LpRegistry *reg, MqSlice topic, uint32_t queue_id, uint64_t max_off) {
    /* The dispatcher published the queue's new entries before this call;
     * see lp_add for the pairing fence. */
    atomic_thread_fence(memory_order_seq_cst);
    if (atomic_load_explicit(&reg->n_waiting, memory_order_relaxed) == 0) return 0;
    pthread_mutex_lock(&reg->mu);
    size_t n = arrival_locked(reg, topic, queue_id, max_off);
    if (reg->n_any > 0 && queue_id != LP_ANY_QUEUE)
        n += arrival_locked(reg, topic, LP_ANY_QUEUE, UINT64_MAX);
    pthread_mutex_unlock(&reg->mu);
    return n;
}

size_t lp_expire(LpRegistry *reg, int64_t now_ns) {
    pthread_mutex_lock(&reg->mu);
    size_t n = expire_locked(reg, now_ns);
    pthread_mutex_unlock(&reg->mu);
    return n;
}

size_t lp_wake_all(LpRegistry *reg) {
    pthread_mutex_lock(&reg->mu);
    reg->stopping = true;
    size_t n = fire_all_locked(reg, LP_STOPPING);
    pthread_mutex_unlock(&reg->mu);
    return n;
}

size_t lp_count(LpRegistry *reg) {
    return atomic_load(&reg->n_waiting);
}
