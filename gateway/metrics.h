/*
 * metrics.h - what the gateway counts about its own requests (per route:
 * requests by status code and a latency histogram) and the Prometheus
 * text rendering of every figure of /metrics: those, per-topic traffic
 * from the topic registry and the store's flush latency and disk use.
 *
 * Counting is lock-free (relaxed atomics): one call per completed request
 * on the MHD worker that completed it.
 */
#ifndef PETREL_METRICS_H
#define PETREL_METRICS_H

#include <stddef.h>
#include <stdint.h>

#include "broker.h"
#include "hist.h"
#include "router.h"

#define GWM_STATUS_MAX 600 /* statuses 100..599 are counted one by one */

typedef struct GwMetrics GwMetrics;

/* gwm_new makes counters for the 'count' routes of 'routes' (borrowed,
 * static) plus one slot for requests that matched no route.  NULL on
 * allocation failure. */
GwMetrics *gwm_new(const RtRoute *routes, size_t count);
void gwm_free(GwMetrics *m);

/* gwm_request_done counts one answered request: 'route' is an element of
 * the table given to gwm_new or NULL (no route matched), 'status' the HTTP
 * status sent (0: none was sent, e.g. the client went away), 'ns' the time
 * from its headers to its completion.  Any thread. */
void gwm_request_done(GwMetrics *m, const RtRoute *route, unsigned status, int64_t ns);

/* Figures of the HTTP layer that /metrics and /v1/broker show. */
typedef struct GwRuntime {
    int in_flight;      /* requests between headers and completion */
    int suspended;      /* of which suspended (sync flush, long poll) */
    int64_t started_ms; /* wall clock when the daemon started */
    const char *listen_addr; /* "ip:port" bound ("" if unknown); lives as long as the gateway */
} GwRuntime;

/* A growable text buffer.  'failed' is set (and later appends ignored)
 * when memory runs out. */
typedef struct GwText {
    char *buf;
    size_t len, cap;
    int failed;
} GwText;

void gw_text_printf(GwText *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* gwm_render appends the whole /metrics page (Prometheus text format
 * 0.0.4) for broker 'b' to 't'. */
void gwm_render(GwMetrics *m, Broker *b, const GwRuntime *rt, GwText *t);

/* gwm_rss_anon returns the process's anonymous resident memory in bytes
 * (RssAnon of /proc/self/status), or -1 when unknown. */
int64_t gwm_rss_anon(void);

#endif
