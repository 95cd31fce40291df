/*
 * h_admin.c - operations endpoints: GET /healthz, GET /metrics (Prometheus
 * text), GET /v1/broker (configuration and runtime figures) and the
 * redirect of GET / to the console.  Later: /v1/cluster.
 */
#include "handlers.h"

#include <stdlib.h>
#include <string.h>

#include "broker.h"
#include "config.h"
#include "metrics.h"
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

typedef struct TrafficSum {
    TopicTraffic sum;
} TrafficSum;

static int add_traffic(void *arg, const MetaTopic *t, const TopicTraffic *tr) {
    (void)t;
    TopicTraffic *s = &((TrafficSum *)arg)->sum;
    s->in_msgs += tr->in_msgs;
    s->in_bytes += tr->in_bytes;
    s->out_msgs += tr->out_msgs;
    s->out_bytes += tr->out_bytes;
    return 0;
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
    TrafficSum ts = {{0}};
    topic_traffic_list(broker_topics(b), add_traffic, &ts);
    const StoreStats *s = &h.store;
    int64_t now = mq_now_ms();
    int64_t rss = gwm_rss_anon();
    const char *refusal = refusal_name(s->refusal);
    json_t *root = json_pack(
        "{s:s, s:s, s:s, s:s, s:I, s:s, s:I, s:I, s:o*,"
        " s:{s:I, s:I, s:I, s:I, s:I, s:I},"
        " s:{s:I, s:I, s:o},"
        " s:{s:b, s:o, s:b, s:I}, s:{s:I, s:I, s:I, s:I},"
        " s:{s:i, s:i}, s:o, s:I}",
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
        "messagesIn", (json_int_t)ts.sum.in_msgs,
        "bytesIn", (json_int_t)ts.sum.in_bytes,
        "messagesOut", (json_int_t)ts.sum.out_msgs,
        "bytesOut", (json_int_t)ts.sum.out_bytes,
        "http",
        "inFlight", rt.in_flight,
        "suspended", rt.suspended,
        "topics", json_integer((json_int_t)topic_count(broker_topics(b))),
        "rssAnonBytes", (json_int_t)rss);
    if (!root) {
        return gw_reply_error(r, MHD_HTTP_SERVICE_UNAVAILABLE, "BUSY",
                              "out of memory while describing the broker");
    }
    return gw_reply_json(r, MHD_HTTP_OK, root);
}
