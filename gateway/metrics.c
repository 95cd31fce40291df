/*
 * metrics.c - request counters and the Prometheus page: see metrics.h.
 *
 * Names follow Prometheus conventions: petrel_ prefix, _total for
 * counters, base units (seconds, bytes).  Histograms are cumulative in the
 * exposition ("le" buckets) although MqHist keeps them per bucket.
 */
#define _GNU_SOURCE
#include "metrics.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "mq.h"
#include "topic.h"
#include "version.h"

typedef struct RouteStats {
    uint64_t by_status[GWM_STATUS_MAX]; /* atomic; [0] = no status / out of range */
    MqHist latency;
} RouteStats;

struct GwMetrics {
    const RtRoute *routes; /* borrowed */
    size_t count;
    RouteStats *stats;     /* count + 1: the last one is "no route matched" */
};

GwMetrics *gwm_new(const RtRoute *routes, size_t count) {
    GwMetrics *m = calloc(1, sizeof(*m));
    if (!m) return NULL;
    m->stats = calloc(count + 1, sizeof(*m->stats));
    if (!m->stats) {
        free(m);
        return NULL;
    }
    m->routes = routes;
    m->count = count;
    return m;
}

void gwm_free(GwMetrics *m) {
    if (!m) return;
    free(m->stats);
    free(m);
}

void gwm_request_done(GwMetrics *m, const RtRoute *route, unsigned status, int64_t ns) {
    if (!m) return;
    size_t i = m->count;
    if (route && route >= m->routes && route < m->routes + m->count) {
        i = (size_t)(route - m->routes);
    }
    RouteStats *s = &m->stats[i];
    unsigned slot = status >= 100 && status < GWM_STATUS_MAX ? status : 0;
    __atomic_fetch_add(&s->by_status[slot], 1, __ATOMIC_RELAXED);
    mq_hist_observe(&s->latency, ns);
}

/* ---- text ----------------------------------------------------------------*/

void gw_text_printf(GwText *t, const char *fmt, ...) {
    if (t->failed) return;
    for (;;) {
        size_t room = t->cap - t->len;
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(t->buf ? t->buf + t->len : NULL, room, fmt, ap);
        va_end(ap);
        if (n < 0) {
            t->failed = 1;
            return;
        }
        if ((size_t)n < room) {
            t->len += (size_t)n;
            return;
        }
        size_t cap = t->cap ? t->cap * 2 : 16384;
        while (cap - t->len <= (size_t)n) cap *= 2;
        char *nb = realloc(t->buf, cap);
        if (!nb) {
            t->failed = 1;
            return;
        }
        t->buf = nb;
        t->cap = cap;
    }
}

/* Label values escape backslash, double quote and newline (exposition
 * format); names here are [a-zA-Z0-9_%|-] but the rule costs nothing. */
static void put_label_value(GwText *t, const char *v) {
    char esc[2 * 256 + 1];
    size_t o = 0;
    for (const char *p = v; *p && o + 2 < sizeof(esc); p++) {
        if (*p == '\\' || *p == '"') {
            esc[o++] = '\\';
            esc[o++] = *p;
        } else if (*p == '\n') {
            esc[o++] = '\\';
            esc[o++] = 'n';
        } else {
            esc[o++] = *p;
        }
    }
    esc[o] = '\0';
    gw_text_printf(t, "%s", esc);
}

static void put_head(GwText *t, const char *name, const char *type, const char *help) {
    gw_text_printf(t, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void put_gauge(GwText *t, const char *name, const char *help, double v) {
    put_head(t, name, "gauge", help);
    gw_text_printf(t, "%s %.15g\n", name, v);
}

/* put_hist_series writes the bucket/sum/count lines of one histogram;
 * 'labels' is "" or 'k="v",' (with the trailing comma). */
static void put_hist_series(GwText *t, const char *name, const char *labels,
                            const MqHistSnap *h) {
    uint64_t cum = 0;
    for (size_t i = 0; i < MQ_HIST_BUCKETS; i++) {
        cum += h->counts[i];
        gw_text_printf(t, "%s_bucket{%sle=\"%g\"} %llu\n", name, labels,
                       (double)mq_hist_bounds_ns[i] / 1e9, (unsigned long long)cum);
    }
    size_t ll = strlen(labels);
    gw_text_printf(t, "%s_bucket{%sle=\"+Inf\"} %llu\n", name, labels,
                   (unsigned long long)h->count);
    /* sum/count take the labels without the trailing comma */
    if (ll) {
        gw_text_printf(t, "%s_sum{%.*s} %.9f\n%s_count{%.*s} %llu\n", name, (int)(ll - 1),
                       labels, (double)h->sum_ns / 1e9, name, (int)(ll - 1), labels,
                       (unsigned long long)h->count);
    } else {
        gw_text_printf(t, "%s_sum %.9f\n%s_count %llu\n", name, (double)h->sum_ns / 1e9, name,
                       (unsigned long long)h->count);
    }
}

/* ---- sections ------------------------------------------------------------*/

static void route_label(const GwMetrics *m, size_t i, char *buf, size_t cap) {
    if (i == m->count) {
        snprintf(buf, cap, "route=\"(unmatched)\",");
    } else {
        snprintf(buf, cap, "route=\"%s %s\",", m->routes[i].method, m->routes[i].pattern);
    }
}

static void render_http(GwMetrics *m, GwText *t) {
    char label[384];
    put_head(t, "petrel_http_requests_total", "counter",
             "HTTP requests answered, by route and status code (0: no answer sent)");
    for (size_t i = 0; i <= m->count; i++) {
        route_label(m, i, label, sizeof(label));
        for (unsigned s = 0; s < GWM_STATUS_MAX; s++) {
            uint64_t n = __atomic_load_n(&m->stats[i].by_status[s], __ATOMIC_RELAXED);
            if (n) gw_text_printf(t, "petrel_http_requests_total{%scode=\"%u\"} %llu\n", label, s,
                                  (unsigned long long)n);
        }
    }
    put_head(t, "petrel_http_request_duration_seconds", "histogram",
             "time from request headers to the end of the answer, by route (long polls and "
             "sync flushes include their wait)");
    for (size_t i = 0; i <= m->count; i++) {
        MqHistSnap h;
        mq_hist_read(&m->stats[i].latency, &h);
        if (h.count == 0) continue;
        route_label(m, i, label, sizeof(label));
        put_hist_series(t, "petrel_http_request_duration_seconds", label, &h);
    }
}

typedef struct TrafficPage {
    GwText *t;
    int pass; /* 0..3: which counter is being written */
} TrafficPage;

static int put_traffic(void *arg, const MetaTopic *mt, const TopicTraffic *tr) {
    TrafficPage *p = arg;
    static const char *const names[] = {
        "petrel_messages_in_total", "petrel_message_bytes_in_total",
        "petrel_messages_out_total", "petrel_message_bytes_out_total"};
    const uint64_t v[] = {tr->in_msgs, tr->in_bytes, tr->out_msgs, tr->out_bytes};
    gw_text_printf(p->t, "%s{topic=\"", names[p->pass]);
    put_label_value(p->t, mt->name);
    gw_text_printf(p->t, "\"} %llu\n", (unsigned long long)v[p->pass]);
    return 0;
}

static void render_topics(Broker *b, GwText *t) {
    static const char *const heads[][2] = {
        {"petrel_messages_in_total", "messages stored by producers since start, by topic"},
        {"petrel_message_bytes_in_total", "message body bytes stored since start, by topic"},
        {"petrel_messages_out_total", "messages delivered to consumers since start, by topic"},
        {"petrel_message_bytes_out_total", "message body bytes delivered since start, by topic"},
    };
    TopicRegistry *reg = broker_topics(b);
    for (int pass = 0; pass < 4; pass++) {
        put_head(t, heads[pass][0], "counter", heads[pass][1]);
        TrafficPage p = {t, pass};
        topic_traffic_list(reg, put_traffic, &p);
    }
    put_gauge(t, "petrel_topics", "topics, system ones included", (double)topic_count(reg));
}

static void render_store(Broker *b, GwText *t) {
    BrokerHealth h;
    broker_health(b, &h);
    const StoreStats *s = &h.store;
    put_gauge(t, "petrel_commitlog_min_offset_bytes", "commit log offset of the oldest byte kept",
              (double)s->min_offset);
    put_gauge(t, "petrel_commitlog_write_offset_bytes", "commit log offset after the last record",
              (double)s->write_offset);
    put_gauge(t, "petrel_commitlog_flushed_offset_bytes", "commit log offset durable on disk",
              (double)s->flushed_offset);
    put_gauge(t, "petrel_commitlog_dispatched_offset_bytes",
              "commit log offset indexed into consume queues", (double)s->dispatched_offset);
    put_gauge(t, "petrel_commitlog_size_bytes", "commit log bytes kept (write - min offset)",
              (double)(s->write_offset - s->min_offset));
    put_gauge(t, "petrel_commitlog_segments", "commit log segment files", (double)s->segment_count);
    put_gauge(t, "petrel_disk_total_bytes", "size of the data directory's filesystem",
              (double)s->disk_total_bytes);
    put_gauge(t, "petrel_disk_available_bytes", "bytes free on it for unprivileged users",
              (double)s->disk_avail_bytes);
    put_gauge(t, "petrel_disk_used_ratio", "used fraction of it, as retention sees it (-1 unknown)",
              s->disk_used_ratio);
    put_gauge(t, "petrel_store_writable", "1 when the store accepts appends", h.writable ? 1 : 0);
    put_head(t, "petrel_store_flush_duration_seconds", "histogram",
             "commit log flushes (fdatasync of the bytes appended since the last one)");
    put_hist_series(t, "petrel_store_flush_duration_seconds", "", &s->flush_latency);
}

static void put_counter(GwText *t, const char *name, const char *help, uint64_t v) {
    put_head(t, name, "counter", help);
    gw_text_printf(t, "%s %llu\n", name, (unsigned long long)v);
}

/* Receive/ack (core/pop.h), all groups together. */
static void render_pop(Broker *b, GwText *t) {
    PopStats ps;
    pop_stats(broker_pop(b), &ps);
    put_counter(t, "petrel_receive_messages_total", "messages handed out by receive and stream",
                ps.received);
    put_counter(t, "petrel_ack_messages_total", "messages acked", ps.acked);
    put_counter(t, "petrel_nack_messages_total", "messages nacked", ps.nacked);
    put_counter(t, "petrel_redelivered_messages_total",
                "deliveries ended by nack or invisibility and moved on", ps.expired);
    put_counter(t, "petrel_retry_messages_total", "messages written to retry topics", ps.retried);
    put_counter(t, "petrel_dlq_messages_total", "messages written to dead-letter topics",
                ps.dead);
    put_gauge(t, "petrel_inflight_messages", "messages received and not yet acked or moved on",
              (double)ps.inflight);
    put_gauge(t, "petrel_consumer_groups", "subscription groups",
              (double)group_count(broker_groups(b)));
    put_gauge(t, "petrel_delayed_messages", "messages waiting in the delay levels",
              (double)sched_pending(broker_scheduler(b)));
    put_gauge(t, "petrel_timer_messages",
              "messages waiting in the timer wheel (deliverAt, delayMs)",
              (double)sched_timer_pending(broker_scheduler(b)));
    TxnStats ts;
    txn_stats(broker_txn(b), &ts);
    put_gauge(t, "petrel_transactions_pending", "transactions prepared and not yet resolved",
              (double)ts.pending);
    put_counter(t, "petrel_transactions_committed_total", "transactions committed",
                ts.committed);
    put_counter(t, "petrel_transactions_rolled_back_total", "transactions rolled back",
                ts.rolled_back);
    put_counter(t, "petrel_transaction_checks_total", "transaction check-backs made",
                ts.checks);
}

int64_t gwm_rss_anon(void) {
    FILE *f = fopen("/proc/self/status", "re");
    if (!f) return -1;
    char line[256];
    long long kb = -1;
    while (fgets(line, sizeof(line), f)) {
        if (sscanf(line, "RssAnon: %lld kB", &kb) == 1) break;
    }
    fclose(f);
    return kb < 0 ? -1 : kb * 1024;
}

void gwm_render(GwMetrics *m, Broker *b, const GwRuntime *rt, GwText *t) {
    const Config *c = broker_config(b);
    put_head(t, "petrel_build_info", "gauge", "always 1; the labels say what runs");
    gw_text_printf(t, "petrel_build_info{version=\"%s\",mode=\"%s\",role=\"%s\",brokerName=\"",
                   PETREL_VERSION, c->mode == CONF_MODE_BROKER ? "broker" : "standalone",
                   conf_broker_role_name(c->broker_role));
    put_label_value(t, c->broker_name);
    gw_text_printf(t, "\"} 1\n");
    put_gauge(t, "petrel_uptime_seconds", "seconds since the HTTP daemon started",
              (double)(mq_now_ms() - rt->started_ms) / 1000.0);
    put_gauge(t, "petrel_process_rss_anon_bytes", "anonymous resident memory (-1 unknown)",
              (double)gwm_rss_anon());
    put_gauge(t, "petrel_http_requests_in_flight", "requests between headers and completion",
              rt->in_flight);
    put_gauge(t, "petrel_http_requests_suspended",
              "requests waiting for a flush, a long poll or a metadata job", rt->suspended);
    render_http(m, t);
    render_topics(b, t);
    render_store(b, t);
    render_pop(b, t);
}
