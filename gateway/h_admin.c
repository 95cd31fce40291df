/*
 * h_admin.c - operations endpoints: GET /healthz, GET /metrics (Prometheus
 * text), GET /v1/broker (configuration and runtime figures) and the
 * redirect of GET / to the console; and what the console and `petrel
 * admin` read about the broker as a whole: GET /v1/broker/rates (the
 * traffic time series), GET /v1/delays (messages waiting per delay level
 * and in the timer wheel) and GET /v1/cluster.
 */
#include "handlers.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "broker.h"
#include "config.h"
#include "delay.h"
#include "metrics.h"
#include "req.h"
#include "rates.h"
#include "schedule.h"
#include "topic.h"
#include "version.h"

/* GET /healthz: 200 {"status":"UP",...}; 503 with "DOWN" when the store
 * refuses appends or the broker is stopping. */
enum MHD_Result h_admin_healthz(GwRequest *r, const RtMatch *m) {
    (void)m;
    Broker *b = gw_broker(r);
    const Config *c = broker_config(b);
    BrokerHealth h;
    broker_health(b, &h);
    bool up = h.writable && !gw_is_stopping(r);
    json_t *ratio = h.store.disk_used_ratio < 0 ? json_null()
                                                : json_real(h.store.disk_used_ratio);
    json_t *root = json_pack("{s:s, s:s, s:s, s:{s:I, s:I, s:I}, s:o, s:b}",
                             "status", up ? "UP" : "DOWN",
                             "role", conf_broker_role_name(c->broker_role),
                             "brokerName", c->broker_name,
                             "commitLog",
                             "minOffset", (json_int_t)h.store.min_offset,
                             "writeOffset", (json_int_t)h.store.write_offset,
                             "flushedOffset", (json_int_t)h.store.flushed_offset,
                             "diskUsedRatio", ratio,
                             "writable", (int)h.writable);
    return gw_reply_json(r, up ? MHD_HTTP_OK : MHD_HTTP_SERVICE_UNAVAILABLE, root);
}

/* GET /: 302 to the console. */
enum MHD_Result h_admin_root(GwRequest *r, const RtMatch *m) {
    (void)m;
    struct MHD_Response *resp = MHD_create_response_from_buffer(0, NULL, MHD_RESPMEM_PERSISTENT);
    if (!resp) return MHD_NO;
    MHD_add_response_header(resp, MHD_HTTP_HEADER_LOCATION, "/console/");
    return gw_reply(r, MHD_HTTP_FOUND, resp);
}

/* GET /metrics: Prometheus text exposition format 0.0.4. */
enum MHD_Result h_admin_metrics(GwRequest *r, const RtMatch *m) {
    (void)m;
    GwRuntime rt;
    gw_runtime(r, &rt);
    GwText t = {0};
    gwm_render(gw_metrics(r), gw_broker(r), &rt, &t);
    if (t.failed) {
        free(t.buf);
        return gw_reply_error(r, MHD_HTTP_SERVICE_UNAVAILABLE, "BUSY",
                              "out of memory while rendering metrics");
    }
    struct MHD_Response *resp =
        MHD_create_response_from_buffer(t.len, t.buf, MHD_RESPMEM_MUST_FREE);
    if (!resp) {
        free(t.buf);
        return MHD_NO;
    }
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE,
                            "text/plain; version=0.0.4; charset=utf-8");
    return gw_reply(r, MHD_HTTP_OK, resp);
}

/* Every configuration key with its value, typed as JSON (numbers, booleans,
 * strings; enums by name). */
static json_t *config_json(const Config *c) {
    json_t *o = json_object();
    size_t n = 0;
    const ConfKey *keys = conf_keys(&n);
    char buf[CONF_PATH_MAX];
    for (size_t i = 0; o && i < n; i++) {
        const ConfKey *k = &keys[i];
        const char *field = (const char *)c + k->offset;
        json_t *v = NULL;
        if (k->type == CONF_INT) {
            int64_t x;
            memcpy(&x, field, sizeof(x));
            v = json_integer((json_int_t)x);
        } else if (k->type == CONF_SIZE) {
            uint64_t x;
            memcpy(&x, field, sizeof(x));
            v = json_integer((json_int_t)x);
        } else if (k->type == CONF_BOOL) {
            bool x;
            memcpy(&x, field, sizeof(x));
            v = json_boolean(x);
        } else {
            v = json_string(conf_format(c, k, buf, sizeof(buf)));
        }
        if (!v || json_object_set_new(o, k->name, v) != 0) {
            json_decref(o);
            return NULL;
        }
    }
    return o;
}

static const char *refusal_name(int refusal) {
    if (refusal == MQ_ERR_FULL) return "DISK_FULL";
    if (refusal == MQ_ERR_RDONLY) return "READ_ONLY";
    return NULL;
}

/* GET /v1/broker: who this broker is, its whole configuration and what it
 * is doing now. */
enum MHD_Result h_admin_broker(GwRequest *r, const RtMatch *m) {
    (void)m;
    Broker *b = gw_broker(r);
    const Config *c = broker_config(b);
    BrokerHealth h;
    broker_health(b, &h);
    GwRuntime rt;
    gw_runtime(r, &rt);
    RateTotals ts;
    broker_traffic(b, &ts);
    const StoreStats *s = &h.store;
    int64_t now = mq_now_ms();
    int64_t rss = gwm_rss_anon();
    const char *refusal = refusal_name(s->refusal);
    json_t *root = json_pack(
        "{s:s, s:s, s:s, s:s, s:I, s:s, s:I, s:I, s:o*,"
        " s:{s:I, s:I, s:I, s:I, s:I, s:I},"
        " s:{s:I, s:I, s:o},"
        " s:{s:b, s:o, s:b, s:I}, s:{s:I, s:I, s:I, s:I},"
        " s:{s:i, s:i}, s:o, s:I, s:I}",
        "version", PETREL_VERSION,
        "mode", c->mode == CONF_MODE_BROKER ? "broker" : "standalone",
        "brokerClusterName", c->broker_cluster_name,
        "brokerName", c->broker_name,
        "brokerId", (json_int_t)c->broker_id,
        "brokerRole", conf_broker_role_name(c->broker_role),
        "startTime", (json_int_t)rt.started_ms,
        "uptimeMs", (json_int_t)(now - rt.started_ms),
        "config", config_json(c),
        "commitLog",
        "minOffset", (json_int_t)s->min_offset,
        "writeOffset", (json_int_t)s->write_offset,
        "flushedOffset", (json_int_t)s->flushed_offset,
        "dispatchedOffset", (json_int_t)s->dispatched_offset,
        "sizeBytes", (json_int_t)(s->write_offset - s->min_offset),
        "segments", (json_int_t)s->segment_count,
        "disk",
        "totalBytes", (json_int_t)s->disk_total_bytes,
        "availableBytes", (json_int_t)s->disk_avail_bytes,
        "usedRatio", s->disk_used_ratio < 0 ? json_null() : json_real(s->disk_used_ratio),
        "store",
        "writable", (int)h.writable,
        "refusal", refusal ? json_string(refusal) : json_null(),
        "recoveredFromCrash", (int)s->recovered_from_crash,
        "recoveryMs", (json_int_t)s->recovery_ms,
        "traffic",
        "messagesIn", (json_int_t)ts.in_msgs,
        "bytesIn", (json_int_t)ts.in_bytes,
        "messagesOut", (json_int_t)ts.out_msgs,
        "bytesOut", (json_int_t)ts.out_bytes,
        "http",
        "inFlight", rt.in_flight,
        "suspended", rt.suspended,
        "topics", json_integer((json_int_t)topic_count(broker_topics(b))),
        "groups", (json_int_t)group_count(broker_groups(b)),
        "rssAnonBytes", (json_int_t)rss);
    if (!root) {
        return gw_reply_error(r, MHD_HTTP_SERVICE_UNAVAILABLE, "BUSY",
                              "out of memory while describing the broker");
    }
    return gw_reply_json(r, MHD_HTTP_OK, root);
}

/* GET /v1/broker/rates[?since=ms]: {"intervalMs","capacity","now",
 * "samples":[{"timestamp","messagesIn","messagesOut","bytesIn",
 * "bytesOut"}]}, oldest first; with 'since' only the newer samples (the
 * console polls with the last timestamp it has). */
enum MHD_Result h_admin_rates(GwRequest *r, const RtMatch *m) {
    (void)m;
    static const char *const known[] = {"since", NULL};
    enum MHD_Result ret;
    if (!gw_query_known(r, known, &ret)) return ret;
    GwProblem prob = {0};
    int64_t since = -1;
    if (!gw_query_int(r, "since", 0, INT64_MAX, &since, &prob)) return gw_reply_problem(r, &prob);
    RateSeries *rs = broker_rates(gw_broker(r));
    RateSample *buf = malloc(RATES_CAPACITY * sizeof(*buf));
    if (!buf) return gw_reply_err(r, MQ_ERR_NOMEM, "rates");
    size_t n = rates_copy(rs, since, buf, RATES_CAPACITY);
    json_t *samples = json_array();
    for (size_t i = 0; samples && i < n; i++) {
        json_t *one = json_pack("{s:I, s:I, s:I, s:I, s:I}", "timestamp", (json_int_t)buf[i].ts_ms,
                                "messagesIn", (json_int_t)buf[i].in_msgs, "messagesOut",
                                (json_int_t)buf[i].out_msgs, "bytesIn",
                                (json_int_t)buf[i].in_bytes, "bytesOut",
                                (json_int_t)buf[i].out_bytes);
        if (!one || json_array_append_new(samples, one) != 0) {
            json_decref(samples);
            samples = NULL;
        }
    }
    free(buf);
    json_t *root = samples ? json_pack("{s:I, s:i, s:I, s:o}", "intervalMs",
                                       (json_int_t)rates_interval_ms(rs), "capacity",
                                       RATES_CAPACITY, "now", (json_int_t)mq_now_ms(),
                                       "samples", samples)
                           : NULL;
    if (!root) return gw_reply_err(r, MQ_ERR_NOMEM, "rates");
    return gw_reply_json(r, MHD_HTTP_OK, root);
}

/* GET /v1/delays: {"levels":[{"level","delay","delayMs","pending"}],
 * "timer":{"pending"},"totalPending"}.  Pending counts are the schedule
 * queues' length past the scheduler's positions: no scan. */
enum MHD_Result h_admin_delays(GwRequest *r, const RtMatch *m) {
    (void)m;
    enum MHD_Result ret;
    if (!gw_query_known(r, NULL, &ret)) return ret;
    Broker *b = gw_broker(r);
    Scheduler *sc = broker_scheduler(b);
    size_t n_levels = 0;
    const int64_t *levels = broker_delay_levels(b, &n_levels);
    json_t *arr = json_array();
    uint64_t total = 0;
    for (size_t i = 0; arr && i < n_levels; i++) {
        char name[32];
        delay_format(levels[i], name, sizeof(name));
        uint64_t pending = sched_level_pending(sc, (uint32_t)(i + 1));
        total += pending;
        json_t *one = json_pack("{s:I, s:s, s:I, s:I}", "level", (json_int_t)(i + 1), "delay",
                                name, "delayMs", (json_int_t)levels[i], "pending",
                                (json_int_t)pending);
        if (!one || json_array_append_new(arr, one) != 0) {
            json_decref(arr);
            arr = NULL;
        }
    }
    uint64_t timers = sched_timer_pending(sc);
    json_t *root = arr ? json_pack("{s:o, s:{s:I}, s:I}", "levels", arr, "timer", "pending",
                                   (json_int_t)timers, "totalPending",
                                   (json_int_t)(total + timers))
                       : NULL;
    if (!root) return gw_reply_err(r, MQ_ERR_NOMEM, "delays");
    return gw_reply_json(r, MHD_HTTP_OK, root);
}

/* Messages per second over the last 10 s of the rate series. */
#define CLUSTER_RATE_SAMPLES 10

/* GET /v1/cluster: {"clusters":[{"clusterName","brokerGroups":[{"brokerName",
 * "brokers":[{"brokerId","role","address","lastHeartbeat","version",
 * "produceTps","consumeTps"}]}]}]}.  Until name servers collect
 * heartbeats from other brokers this is the broker answering, its
 * heartbeat being now. */
enum MHD_Result h_admin_cluster(GwRequest *r, const RtMatch *m) {
    (void)m;
    enum MHD_Result ret;
    if (!gw_query_known(r, NULL, &ret)) return ret;
    Broker *b = gw_broker(r);
    const Config *c = broker_config(b);
    GwRuntime rt;
    gw_runtime(r, &rt);
    RateSample sum;
    int64_t span_ms = rates_average(broker_rates(b), CLUSTER_RATE_SAMPLES, &sum);
    double secs = span_ms > 0 ? (double)span_ms / 1000.0 : 1.0;
    json_t *root = json_pack(
        "{s:[{s:s, s:[{s:s, s:[{s:I, s:s, s:s, s:I, s:s, s:f, s:f}]}]}]}", "clusters",
        "clusterName", c->broker_cluster_name, "brokerGroups", "brokerName", c->broker_name,
        "brokers", "brokerId", (json_int_t)c->broker_id, "role",
        conf_broker_role_name(c->broker_role), "address", rt.listen_addr ? rt.listen_addr : "",
        "lastHeartbeat", (json_int_t)mq_now_ms(), "version", PETREL_VERSION, "produceTps",
        (double)sum.in_msgs / secs, "consumeTps", (double)sum.out_msgs / secs);
    if (!root) return gw_reply_err(r, MQ_ERR_NOMEM, "cluster");
    return gw_reply_json(r, MHD_HTTP_OK, root);
}
