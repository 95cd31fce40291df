/*
 * h_admin.c - operations endpoints: GET /healthz and the redirect of GET /
 * to the console.  Later: /metrics, /v1/broker, /v1/cluster.
 */
#include "handlers.h"

#include "broker.h"
#include "config.h"

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
