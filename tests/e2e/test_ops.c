/*
 * test_ops.c - end-to-end tests of the operations endpoints against a real
 * petrel: GET /v1/broker (identity, every configuration key with the
 * value given on the command line, commit log and traffic figures that
 * move with produce and pull) and GET /metrics (Prometheus text: syntax of
 * every line, per-topic traffic, per-route request counts and latency
 * histograms, store flush latency under SYNC_FLUSH).
 */
#define _GNU_SOURCE
#include "testutil.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "e2e.h"

static int setup(void **state) {
    return e2e_case_setup(state, "e2e-ops");
}

/* Produces 'n' JSON messages of 10-byte bodies "body-0000N" to 'topic'
 * queue 0 and waits until they are dispatched. */
static void produce_n(E2eCase *f, const char *topic, int n) {
    char path[256], body[128];
    snprintf(path, sizeof(path), "/v1/topics/%s/messages", topic);
    for (int i = 0; i < n; i++) {
        snprintf(body, sizeof(body), "{\"body\":\"body-%05d\",\"queueId\":0}", i);
        json_decref(e2e_call(f, "POST", path, E2E_JSON, body, 200));
    }
    e2e_wait_queue(f, topic, 0, n);
}

/* ---- /v1/broker ----------------------------------------------------------*/

static void test_broker_describes_itself(void **state) {
    E2eCase *f = *state;
    const char *extra[] = {"--brokerName=ops-b", "--defaultTopicQueueNums=3",
                           "--maxMessageSize=65536", NULL};
    e2e_case_start(f, extra);
    json_t *b = e2e_call(f, "GET", "/v1/broker", NULL, NULL, 200);
    assert_string_equal(e2e_str(b, "mode"), "standalone");
    assert_string_equal(e2e_str(b, "brokerName"), "ops-b");
    assert_string_equal(e2e_str(b, "brokerRole"), "ASYNC_MASTER");
    assert_non_null(e2e_str(b, "version"));
    long long started = e2e_num(b, "startTime");
    assert_true(started > 0 && started <= e2e_wall_ms());
    assert_true(e2e_num(b, "uptimeMs") >= 0);
    assert_true(e2e_num(b, "rssAnonBytes") > 0);
    /* the configuration: typed values, flags honoured */
    json_t *conf = json_object_get(b, "config");
    assert_int_equal(e2e_num(conf, "defaultTopicQueueNums"), 3);
    assert_int_equal(e2e_num(conf, "maxMessageSize"), 65536);
    assert_string_equal(e2e_str(conf, "flushDiskType"), "ASYNC_FLUSH");
    assert_true(json_is_true(json_object_get(conf, "autoCreateTopicEnable")));
    assert_string_equal(e2e_str(conf, "brokerName"), "ops-b");
    assert_true(json_object_size(conf) >= 30);
    json_t *store = json_object_get(b, "store");
    assert_true(json_is_true(json_object_get(store, "writable")));
    assert_true(json_is_null(json_object_get(store, "refusal")));
    json_t *cl = json_object_get(b, "commitLog");
    assert_int_equal(e2e_num(cl, "writeOffset"), 0);
    json_t *disk = json_object_get(b, "disk");
    assert_true(e2e_num(disk, "totalBytes") > 0);
    assert_true(e2e_num(disk, "availableBytes") <= e2e_num(disk, "totalBytes"));
    /* this request itself is in flight */
    assert_true(e2e_num(json_object_get(b, "http"), "inFlight") >= 1);
    json_decref(b);

    produce_n(f, "OpsT", 4);
    json_decref(e2e_call(f, "GET", "/v1/topics/OpsT/queues/0/messages?offset=0&max=32", NULL,
                         NULL, 200));
    b = e2e_call(f, "GET", "/v1/broker", NULL, NULL, 200);
    cl = json_object_get(b, "commitLog");
    assert_true(e2e_num(cl, "writeOffset") > 0);
    assert_int_equal(e2e_num(cl, "dispatchedOffset"), e2e_num(cl, "writeOffset"));
    assert_int_equal(e2e_num(cl, "sizeBytes"),
                     e2e_num(cl, "writeOffset") - e2e_num(cl, "minOffset"));
    json_t *tr = json_object_get(b, "traffic");
    assert_int_equal(e2e_num(tr, "messagesIn"), 4);
    assert_int_equal(e2e_num(tr, "bytesIn"), 40);
    assert_int_equal(e2e_num(tr, "messagesOut"), 4);
    assert_int_equal(e2e_num(tr, "bytesOut"), 40);
    assert_int_equal(e2e_num(b, "topics"), 1);
    assert_int_equal(e2e_num(b, "groups"), 0);
    json_decref(b);
    json_decref(e2e_call(f, "PUT", "/v1/groups/OpsG", E2E_JSON, "{}", 201));
    b = e2e_call(f, "GET", "/v1/broker", NULL, NULL, 200);
    assert_int_equal(e2e_num(b, "groups"), 1);
    json_decref(b);
}

/* `petrel broker` serves the same API and says what it is; a config file
 * sets keys and flags win over it. */
static void test_broker_mode_describes_itself(void **state) {
    E2eCase *f = *state;
    char conf[1200];
    snprintf(conf, sizeof(conf), "%s/broker.conf", f->dir);
    FILE *cf = fopen(conf, "w");
    assert_non_null(cf);
    fprintf(cf, "# a broker of group b\nbrokerName = group-b\nbrokerId=0\n"
                "flushDiskType=SYNC_FLUSH\nautoCreateTopicEnable=false\n");
    fclose(cf);
    const char *extra[] = {"-c", conf, "--flushDiskType=ASYNC_FLUSH", NULL};
    int rc = e2e_start_cmd(&f->srv, f->dir, "broker", extra);
    if (rc != 0) e2e_case_print_log(f);
    assert_int_equal(rc, 0);
    json_t *b = e2e_call(f, "GET", "/v1/broker", NULL, NULL, 200);
    assert_string_equal(e2e_str(b, "mode"), "broker");
    assert_string_equal(e2e_str(b, "brokerName"), "group-b");
    json_t *conf_json = json_object_get(b, "config");
    assert_string_equal(e2e_str(conf_json, "flushDiskType"), "ASYNC_FLUSH"); /* flag wins */
    assert_true(json_is_false(json_object_get(conf_json, "autoCreateTopicEnable")));
    json_decref(b);
    /* no auto-create here: produce to an unknown topic is 404 */
    e2e_expect_error(f, "POST", "/v1/topics/Nope/messages", E2E_JSON, "{\"body\":\"x\"}", 404,
                     "TOPIC_NOT_FOUND");
    char *page = NULL;
    E2eResponse r;
    assert_int_equal(e2e_get(&f->srv, "/metrics", &r), 0);
    page = strdup(r.body);
    e2e_response_free(&r);
    assert_non_null(strstr(page, "mode=\"broker\""));
    free(page);
}

/* ---- /metrics ------------------------------------------------------------*/

/* The value of the sample line that starts with 'series' followed by a
 * space (exact series: name plus labels), or -1 when absent. */
static double sample(const char *page, const char *series) {
    size_t n = strlen(series);
    for (const char *p = page; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
        if (strncmp(p, series, n) == 0 && p[n] == ' ') return strtod(p + n + 1, NULL);
    }
    return -1;
}

/* Every line is a comment (# HELP / # TYPE) or `name{labels} value`; each
 * sample's metric family was announced by a # TYPE line before it. */
static void check_exposition_syntax(const char *page) {
    char typed[8192] = " ";
    const char *p = page;
    int samples = 0;
    while (*p) {
        const char *eol = strchr(p, '\n');
        assert_non_null(eol); /* every line ends with a newline */
        size_t len = (size_t)(eol - p);
        char line[1024];
        assert_true(len > 0 && len < sizeof(line));
        memcpy(line, p, len);
        line[len] = '\0';
        if (line[0] == '#') {
            char name[256], type[32];
            if (sscanf(line, "# TYPE %255s %31s", name, type) == 2) {
                assert_true(strcmp(type, "counter") == 0 || strcmp(type, "gauge") == 0 ||
                            strcmp(type, "histogram") == 0);
                strcat(typed, name);
                strcat(typed, " ");
            } else {
                assert_int_equal(strncmp(line, "# HELP ", 7), 0);
            }
        } else {
            size_t nl = strspn(line, "abcdefghijklmnopqrstuvwxyz_");
            assert_true(nl > 0);
            char family[256];
            snprintf(family, sizeof(family), " %.*s ", (int)nl, line);
            /* histogram series carry a suffix after the family name */
            char *suffix = strstr(family, "_bucket ");
            if (!suffix) suffix = strstr(family, "_sum ");
            if (!suffix) suffix = strstr(family, "_count ");
            if (suffix && !strstr(typed, family)) strcpy(suffix, " ");
            if (!strstr(typed, family)) fail_msg("sample before its # TYPE: %s", line);
            const char *rest = line + nl;
            if (*rest == '{') { /* label values may hold '}' and escapes */
                bool quoted = false;
                for (rest++; *rest && (quoted || *rest != '}'); rest++) {
                    if (quoted && *rest == '\\' && rest[1]) rest++;
                    else if (*rest == '"') quoted = !quoted;
                }
                assert_true(*rest == '}');
                rest++;
            }
            assert_true(*rest == ' ');
            char *end = NULL;
            strtod(rest + 1, &end);
            assert_true(end && end != rest + 1 && *end == '\0');
            samples++;
        }
        p = eol + 1;
    }
    assert_true(samples > 20);
}

static char *get_metrics(E2eCase *f) {
    E2eResponse r;
    assert_int_equal(e2e_get(&f->srv, "/metrics", &r), 0);
    assert_int_equal(r.status, 200);
    char ct[128];
    assert_non_null(e2e_header(&r, "Content-Type", ct, sizeof(ct)));
    assert_non_null(strstr(ct, "text/plain"));
    assert_non_null(strstr(ct, "version=0.0.4"));
    char *page = strdup(r.body);
    e2e_response_free(&r);
    check_exposition_syntax(page);
    return page;
}

static void test_metrics_count_traffic_and_requests(void **state) {
    E2eCase *f = *state;
    e2e_case_start(f, NULL);
    produce_n(f, "MetT", 5);
    json_decref(e2e_call(f, "GET", "/v1/topics/MetT/queues/0/messages?offset=0&max=3", NULL,
                         NULL, 200));
    e2e_expect_error(f, "GET", "/no/such/route", NULL, NULL, 404, "NOT_FOUND");
    char *page = get_metrics(f);
    assert_true(sample(page, "petrel_messages_in_total{topic=\"MetT\"}") == 5);
    assert_true(sample(page, "petrel_message_bytes_in_total{topic=\"MetT\"}") == 50);
    assert_true(sample(page, "petrel_messages_out_total{topic=\"MetT\"}") == 3);
    assert_true(sample(page, "petrel_message_bytes_out_total{topic=\"MetT\"}") == 30);
    assert_true(sample(page, "petrel_topics") == 1);
    const char *route = "route=\"POST /v1/topics/{topic}/messages\"";
    char series[256];
    snprintf(series, sizeof(series), "petrel_http_requests_total{%s,code=\"200\"}", route);
    assert_true(sample(page, series) == 5);
    assert_true(sample(page, "petrel_http_requests_total{route=\"(unmatched)\",code=\"404\"}") ==
                1);
    /* the histogram of the produce route: 5 observations, cumulative */
    snprintf(series, sizeof(series), "petrel_http_request_duration_seconds_count{%s}", route);
    assert_true(sample(page, series) == 5);
    snprintf(series, sizeof(series),
             "petrel_http_request_duration_seconds_bucket{%s,le=\"+Inf\"}", route);
    assert_true(sample(page, series) == 5);
    snprintf(series, sizeof(series),
             "petrel_http_request_duration_seconds_bucket{%s,le=\"0.0001\"}", route);
    double first = sample(page, series);
    snprintf(series, sizeof(series), "petrel_http_request_duration_seconds_bucket{%s,le=\"1\"}",
             route);
    double at_1s = sample(page, series);
    assert_true(first >= 0 && first <= at_1s && at_1s <= 5);
    /* store figures */
    assert_true(sample(page, "petrel_commitlog_write_offset_bytes") > 0);
    assert_true(sample(page, "petrel_disk_total_bytes") > 0);
    assert_true(sample(page, "petrel_store_writable") == 1);
    assert_true(sample(page, "petrel_process_rss_anon_bytes") > 0);
    free(page);
    /* the /metrics request itself was counted by the time of the next */
    page = get_metrics(f);
    assert_true(sample(page, "petrel_http_requests_total{route=\"GET /metrics\",code=\"200\"}") >=
                1);
    free(page);
}

static void test_metrics_flush_latency_under_sync_flush(void **state) {
    E2eCase *f = *state;
    const char *extra[] = {"--flushDiskType=SYNC_FLUSH", NULL};
    e2e_case_start(f, extra);
    produce_n(f, "SyncT", 3);
    char *page = get_metrics(f);
    double n = sample(page, "petrel_store_flush_duration_seconds_count");
    assert_true(n >= 1); /* every acknowledged produce waited for a flush */
    assert_true(sample(page, "petrel_store_flush_duration_seconds_bucket{le=\"+Inf\"}") == n);
    assert_true(sample(page, "petrel_store_flush_duration_seconds_sum") > 0);
    assert_true(sample(page, "petrel_commitlog_flushed_offset_bytes") ==
                sample(page, "petrel_commitlog_write_offset_bytes"));
    free(page);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_broker_describes_itself, setup, e2e_case_teardown),
        cmocka_unit_test_setup_teardown(test_broker_mode_describes_itself, setup,
                                        e2e_case_teardown),
        cmocka_unit_test_setup_teardown(test_metrics_count_traffic_and_requests, setup,
                                        e2e_case_teardown),
        cmocka_unit_test_setup_teardown(test_metrics_flush_latency_under_sync_flush, setup,
                                        e2e_case_teardown),
    };
    return cmocka_run_group_tests_name("e2e-ops", tests, NULL, NULL);
}
