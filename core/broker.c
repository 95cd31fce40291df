/*
 * broker.c - opens and closes the store and the metadata of one broker:
 * see broker.h.  Order matters: the long-polling registry before the store
 * (the store's dispatcher calls it), then the store (it recovers the log
 * that the metadata's offsets point into), the metadata last; close in
 * reverse.
 */
#define _GNU_SOURCE
#include "broker.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include "delay.h"
#include "mq.h"

struct Broker {
    Config conf; /* private copy */
    int lock_fd; /* '<data>/lock', flock'ed while open */
    Store *store;
    Meta *meta;
    TopicRegistry *topics;
    LpRegistry *longpoll; /* waiting pulls; outlives the store's dispatcher */
    uint8_t store_host[8]; /* StoreConfig.store_host of the open store */
    IdemTable *idem;       /* Idempotency-Key answers */
    GroupRegistry *groups;
    MbTable *members;      /* live consumers and orderly locks */
    FilterCache *filters;  /* compiled subscriptions */
    PopEngine *pop;        /* receive/ack */
    Scheduler *sched;      /* delay levels and timers */
    TxnEngine *txn;        /* transactional messages */
    RateSeries *rates;     /* traffic per second for the console */
    int64_t delay_levels[DELAY_LEVELS_MAX];
    size_t n_delay_levels;
};

/* Takes an exclusive flock on '<data>/lock' so that two processes never
 * open the same data directory.  The kernel drops it when the process
 * dies, so a crash leaves no stale lock. */
static int lock_data_dir(const char *data, int *out) {
    int rc = mq_mkdirs(data);
    if (rc != MQ_OK) return rc;
    char path[CONF_PATH_MAX + 16];
    snprintf(path, sizeof(path), "%s/lock", data);
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) {
        MQ_ERROR("cannot open '%s': %s", path, strerror(errno));
        return MQ_ERR_IO;
    }
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        int e = errno;
        close(fd);
        if (e == EWOULDBLOCK) {
            MQ_ERROR("data directory '%s' is in use by another process", data);
            return MQ_ERR_BUSY;
        }
        MQ_ERROR("cannot lock '%s': %s", path, strerror(e));
        return MQ_ERR_IO;
    }
    *out = fd;
    return MQ_OK;
}

/* StoreConfig.on_arrival: the dispatcher thread, per dispatched record. */
static void on_arrival(void *arg, MqSlice topic, uint32_t queue_id, uint64_t max_off) {
    lp_arrival(arg, topic, queue_id, max_off);
}

static int add_traffic(void *arg, const MetaTopic *t, const TopicTraffic *tr) {
    (void)t;
    RateTotals *sum = arg;
    sum->in_msgs += tr->in_msgs;
    sum->in_bytes += tr->in_bytes;
    sum->out_msgs += tr->out_msgs;
    sum->out_bytes += tr->out_bytes;
    return 0;
}

void broker_traffic(Broker *b, RateTotals *out) {
    memset(out, 0, sizeof(*out));
    topic_traffic_list(b->topics, add_traffic, out);
}

/* RatesConfig.read */
static void read_traffic(void *arg, RateTotals *out) {
    broker_traffic(arg, out);
}

int broker_open(const Config *conf, Broker **out) {
    Broker *b = calloc(1, sizeof(*b));
    if (!b) return MQ_ERR_NOMEM;
    b->conf = *conf;
    int rc = lock_data_dir(b->conf.data, &b->lock_fd);
    if (rc != MQ_OK) goto err_free;
    rc = idem_open(b->conf.idempotency_window_ms, (size_t)b->conf.idempotency_max_keys,
                   BROKER_IDEM_MAX_BYTES, &b->idem);
    if (rc != MQ_OK) goto err_unlock;
    rc = lp_open(true, &b->longpoll);
    if (rc != MQ_OK) goto err_close_idem;

    StoreConfig sc;
    conf_store_config(&b->conf, &sc);
    sc.on_arrival = on_arrival;
    sc.on_arrival_arg = b->longpoll;
    memcpy(b->store_host, sc.store_host, sizeof(b->store_host));
    rc = store_open(&sc, &b->store);
    if (rc != MQ_OK) {
        MQ_ERROR("cannot open store in '%s': %s", b->conf.data, mq_strerror(rc));
        goto err_close_longpoll;
    }

    char path[CONF_PATH_MAX + 16];
    snprintf(path, sizeof(path), "%s/meta.db", b->conf.data);
    rc = meta_open(path, (uint32_t)b->conf.offset_flush_interval_ms, &b->meta);
    if (rc != MQ_OK) {
        MQ_ERROR("cannot open metadata '%s': %s", path, mq_strerror(rc));
        goto err_close_store;
    }
    rc = topic_registry_open(b->meta, (uint32_t)b->conf.default_topic_queue_nums, &b->topics);
    if (rc != MQ_OK) {
        MQ_ERROR("cannot load topics from '%s': %s", path, mq_strerror(rc));
        goto err_close_meta;
    }
    rc = group_registry_open(b->meta, &b->groups);
    if (rc != MQ_OK) {
        MQ_ERROR("cannot load groups from '%s': %s", path, mq_strerror(rc));
        goto err_close_topics;
    }
    MbConfig mc = {.expire_ms = b->conf.client_channel_expired_ms,
                   .lock_lease_ms = b->conf.rebalance_lock_max_live_ms};
    rc = mb_open(&mc, &b->members);
    if (rc == MQ_OK) rc = filter_cache_open(BROKER_FILTER_CACHE, &b->filters);
    if (rc == MQ_OK)
        rc = delay_levels_parse(b->conf.message_delay_level, b->delay_levels, DELAY_LEVELS_MAX,
                                &b->n_delay_levels);
    if (rc != MQ_OK) goto err_close_groups;
    /* A waiting timer is rewritten at least every hop: at most a day, and
     * half the retention time, so that it never ages out while it waits. */
    int64_t max_hop_ms = 24 * 3600000LL;
    if (b->conf.file_reserved_hours > 0 && b->conf.file_reserved_hours * 1800000LL < max_hop_ms)
        max_hop_ms = b->conf.file_reserved_hours * 1800000LL;
    SchedConfig sch = {.store = b->store,
                       .meta = b->meta,
                       .topics = b->topics,
                       .levels_ms = b->delay_levels,
                       .n_levels = b->n_delay_levels,
                       .timer_max_hop_ms = max_hop_ms,
                       .thread = true};
    rc = sched_open(&sch, &b->sched);
    if (rc != MQ_OK) goto err_close_groups;
    PopConfig pc = {
        .store = b->store,
        .meta = b->meta,
        .topics = b->topics,
        .groups = b->groups,
        .longpoll = b->longpoll,
        .delay_levels_ms = b->delay_levels,
        .n_delay_levels = b->n_delay_levels,
        .inflight_max = (uint32_t)b->conf.pop_inflight_threshold,
        .revive_interval_ms = (uint32_t)b->conf.revive_interval_ms,
        .snapshot_interval_ms = (uint32_t)b->conf.offset_flush_interval_ms,
        .orderly_retry_delay_ms = b->conf.suspend_queue_ms,
        .store_host = b->store_host,
        .sched = b->sched, /* nacked messages' retries go through it */
        .keeper = true,
    };
    rc = pop_open(&pc, &b->pop);
    if (rc != MQ_OK) {
        sched_close(b->sched);
        goto err_close_groups;
    }
    TxnConfig tc = {
        .store = b->store,
        .meta = b->meta,
        .topics = b->topics,
        .store_host = b->store_host,
        .sync_flush = b->conf.flush_disk_type == CONF_SYNC_FLUSH,
        .timeout_ms = b->conf.transaction_timeout_ms,
        .check_interval_ms = b->conf.transaction_check_interval_ms,
        .check_max = (uint32_t)b->conf.transaction_check_max,
        .keep_resolved_ms = b->conf.transaction_keep_resolved_ms,
        .check_connect_timeout_ms = b->conf.transaction_check_connect_timeout_ms,
        .check_request_timeout_ms = b->conf.transaction_check_request_timeout_ms,
        .check_allowed_hosts = b->conf.transaction_check_allowed_hosts,
        .thread = true,
    };
    rc = txn_open(&tc, &b->txn);
    if (rc != MQ_OK) {
        pop_close(b->pop);
        sched_close(b->sched);
        goto err_close_groups;
    }
    RatesConfig rcfg = {.interval_ms = 1000, .read = read_traffic, .arg = b};
    rc = rates_open(&rcfg, &b->rates);
    if (rc != MQ_OK) {
        txn_close(b->txn);
        pop_close(b->pop);
        sched_close(b->sched);
        goto err_close_groups;
    }
    *out = b;
    return MQ_OK;

err_close_groups:
    filter_cache_close(b->filters);
    mb_close(b->members);
    group_registry_close(b->groups);
err_close_topics:
    topic_registry_close(b->topics);
err_close_meta:
    meta_close(b->meta);
err_close_store:
    store_close(b->store);
err_close_longpoll:
    lp_close(b->longpoll);
err_close_idem:
    idem_close(b->idem);
err_unlock:
    close(b->lock_fd);
err_free:
    free(b);
    return rc;
}

void broker_close(Broker *b) {
    if (!b) return;
    rates_close(b->rates);
    txn_close(b->txn);
    pop_close(b->pop); /* its nacks write through the scheduler */
    sched_close(b->sched);
    filter_cache_close(b->filters);
    mb_close(b->members);
    group_registry_close(b->groups);
    topic_registry_close(b->topics);
    meta_close(b->meta);
    store_close(b->store);
    lp_close(b->longpoll);
    idem_close(b->idem);
    close(b->lock_fd);
    free(b);
}

GroupRegistry *broker_groups(Broker *b) {
    return b->groups;
}

MbTable *broker_members(Broker *b) {
    return b->members;
}

FilterCache *broker_filters(Broker *b) {
    return b->filters;
}

PopEngine *broker_pop(Broker *b) {
    return b->pop;
}

TxnEngine *broker_txn(Broker *b) {
    return b->txn;
}

RateSeries *broker_rates(Broker *b) {
    return b->rates;
}

Scheduler *broker_scheduler(Broker *b) {
    return b->sched;
}

const int64_t *broker_delay_levels(const Broker *b, size_t *n) {
    *n = b->n_delay_levels;
    return b->delay_levels;
}

IdemTable *broker_idempotency(Broker *b) {
    return b->idem;
}

Store *broker_store(Broker *b) {
    return b->store;
}

Meta *broker_meta(Broker *b) {
    return b->meta;
}

const Config *broker_config(const Broker *b) {
    return &b->conf;
}

TopicRegistry *broker_topics(Broker *b) {
    return b->topics;
}

LpRegistry *broker_longpoll(Broker *b) {
    return b->longpoll;
}

const uint8_t *broker_store_host(const Broker *b) {
    return b->store_host;
}

void broker_health(Broker *b, BrokerHealth *out) {
    store_stats(b->store, &out->store);
    out->writable = out->store.refusal == MQ_OK;
}
