/*
 * test_router.c - the route matcher (literals, {param}, {rest*}, 404 vs
 * 405 with Allow) and the gateway's error mapping and error body.
 */
#include "testutil.h"

#include <string.h>

#include "json.h"
#include "mq.h"
#include "router.h"

static enum MHD_Result h_a(struct GwRequest *r, const RtMatch *m) {
    (void)r, (void)m;
    return MHD_YES;
}
static enum MHD_Result h_b(struct GwRequest *r, const RtMatch *m) {
    (void)r, (void)m;
    return MHD_YES;
}

static const RtRoute routes[] = {
    {"GET", "/healthz", h_a},
    {"GET", "/", h_a},
    {"GET", "/console/{path*}", h_a},
    {"GET", "/v1/topics/{topic}", h_a},
    {"PUT", "/v1/topics/{topic}", h_b},
    {"DELETE", "/v1/topics/{topic}", h_b},
    {"GET", "/v1/topics/{topic}/queues/{queueId}/messages", h_b},
    {"POST", "/v1/topics/{topic}/messages", h_b},
};
#define N (sizeof(routes) / sizeof(routes[0]))

static void test_rt_literal_and_root_paths_match(void **state) {
    (void)state;
    RtMatch m;
    assert_int_equal(rt_match(routes, N, "GET", "/healthz", &m), RT_FOUND);
    assert_ptr_equal(m.route, &routes[0]);
    assert_int_equal(m.n_params, 0);
    assert_int_equal(rt_match(routes, N, "GET", "/", &m), RT_FOUND);
    assert_ptr_equal(m.route, &routes[1]);
    assert_int_equal(rt_match(routes, N, "HEAD", "/healthz", &m), RT_FOUND);
    assert_int_equal(rt_match(routes, N, "GET", "/healthz/", &m), RT_NOT_FOUND);
    assert_int_equal(rt_match(routes, N, "GET", "/healthzz", &m), RT_NOT_FOUND);
    assert_int_equal(rt_match(routes, N, "GET", "", &m), RT_NOT_FOUND);
    assert_int_equal(rt_match(routes, N, "GET", "healthz", &m), RT_NOT_FOUND);
}

static void test_rt_params_are_captured(void **state) {
    (void)state;
    RtMatch m;
    assert_int_equal(rt_match(routes, N, "GET", "/v1/topics/orders/queues/3/messages", &m),
                     RT_FOUND);
    assert_ptr_equal(m.route, &routes[6]);
    assert_string_equal(rt_param(&m, "topic"), "orders");
    assert_string_equal(rt_param(&m, "queueId"), "3");
    assert_null(rt_param(&m, "topi"));
    assert_null(rt_param(&m, "group"));
    assert_int_equal(rt_match(routes, N, "PUT", "/v1/topics/t1", &m), RT_FOUND);
    assert_ptr_equal(m.route, &routes[4]);
    assert_string_equal(rt_param(&m, "topic"), "t1");
    /* a {param} never matches an empty segment */
    assert_int_equal(rt_match(routes, N, "GET", "/v1/topics/", &m), RT_NOT_FOUND);
    assert_int_equal(rt_match(routes, N, "GET", "/v1/topics//queues/1/messages", &m),
                     RT_NOT_FOUND);
}

static void test_rt_rest_param_takes_the_rest(void **state) {
    (void)state;
    RtMatch m;
    assert_int_equal(rt_match(routes, N, "GET", "/console/", &m), RT_FOUND);
    assert_string_equal(rt_param(&m, "path"), "");
    assert_int_equal(rt_match(routes, N, "GET", "/console/js/app.js", &m), RT_FOUND);
    assert_string_equal(rt_param(&m, "path"), "js/app.js");
    assert_int_equal(rt_match(routes, N, "GET", "/console/../x", &m), RT_FOUND);
    assert_string_equal(rt_param(&m, "path"), "../x");
    assert_int_equal(rt_match(routes, N, "GET", "/console", &m), RT_NOT_FOUND);
}

static void test_rt_wrong_method_lists_allowed_methods(void **state) {
    (void)state;
    RtMatch m;
    assert_int_equal(rt_match(routes, N, "POST", "/healthz", &m), RT_METHOD_NOT_ALLOWED);
    assert_string_equal(m.allow, "GET, HEAD");
    assert_null(m.route);
    assert_int_equal(rt_match(routes, N, "POST", "/v1/topics/t", &m), RT_METHOD_NOT_ALLOWED);
    assert_string_equal(m.allow, "GET, HEAD, PUT, DELETE");
    assert_int_equal(rt_match(routes, N, "PUT", "/v1/topics/t/messages", &m),
                     RT_METHOD_NOT_ALLOWED);
    assert_string_equal(m.allow, "POST");
    assert_int_equal(rt_match(routes, N, "POST", "/nowhere", &m), RT_NOT_FOUND);
}

static void test_rt_overlong_params_do_not_match(void **state) {
    (void)state;
    static char path[RT_BUF_MAX + 64];
    strcpy(path, "/v1/topics/");
    memset(path + strlen(path), 'a', RT_BUF_MAX);
    path[sizeof(path) - 1] = '\0';
    RtMatch m;
    assert_int_equal(rt_match(routes, N, "GET", path, &m), RT_NOT_FOUND);
}

static void test_gw_status_for_maps_every_error(void **state) {
    (void)state;
    assert_int_equal(gw_status_for(MQ_ERR_INVAL), 400);
    assert_int_equal(gw_status_for(MQ_ERR_NOTFOUND), 404);
    assert_int_equal(gw_status_for(MQ_ERR_EXISTS), 409);
    assert_int_equal(gw_status_for(MQ_ERR_STATE), 409);
    assert_int_equal(gw_status_for(MQ_ERR_BUSY), 429);
    assert_int_equal(gw_status_for(MQ_ERR_FULL), 507);
    assert_int_equal(gw_status_for(MQ_ERR_RDONLY), 503);
    assert_int_equal(gw_status_for(MQ_ERR_IO), 500);
    assert_int_equal(gw_status_for(MQ_ERR_NOMEM), 500);
    assert_int_equal(gw_status_for(MQ_ERR_CORRUPT), 500);
    assert_int_equal(gw_status_for(MQ_ERR_DB), 500);
    assert_int_equal(gw_status_for(MQ_ERR_TIMEOUT), 500);
}

static void test_js_error_builds_the_api_error_body(void **state) {
    (void)state;
    json_t *e = js_error("TOPIC_NOT_FOUND", "no topic 'x'", 404);
    size_t len = 0;
    char *s = js_dump(e, &len);
    assert_non_null(s);
    assert_int_equal(len, strlen("{\"error\":{\"code\":\"TOPIC_NOT_FOUND\","
                                 "\"message\":\"no topic 'x'\",\"status\":404}}"));
    assert_memory_equal(s, "{\"error\":{\"code\":\"TOPIC_NOT_FOUND\","
                           "\"message\":\"no topic 'x'\",\"status\":404}}", len);
    free(s);
    json_decref(e);

    /* invalid UTF-8 in a message (e.g. an echoed path) still gives JSON */
    e = js_error("NOT_FOUND", "no such path '\xff'", 404);
    assert_non_null(e);
    assert_string_equal(json_string_value(json_object_get(json_object_get(e, "error"),
                                                          "message")),
                        "no such path '?'");
    json_decref(e);
    /* a name cut inside a 2-byte character by %.Ns keeps its other words */
    e = js_error("INVALID_NAME", "name 'caf\xc3' is bad", 400);
    assert_string_equal(json_string_value(json_object_get(json_object_get(e, "error"),
                                                          "message")),
                        "name 'caf?' is bad");
    json_decref(e);
    /* overlong forms, surrogates and valid 4-byte characters */
    char out[64];
    js_utf8_clean("a\xc0\xaf" "b", out, sizeof(out));
    assert_string_equal(out, "a??b");
    js_utf8_clean("\xed\xa0\x80x", out, sizeof(out));
    assert_string_equal(out, "???x");
    js_utf8_clean("\xf0\x9f\x98\x80 \xc3\xa9", out, sizeof(out));
    assert_string_equal(out, "\xf0\x9f\x98\x80 \xc3\xa9");
    js_utf8_clean("abcdef", out, 4); /* truncated, NUL-terminated */
    assert_string_equal(out, "abc");
    assert_string_equal(js_code_for_status(405), "METHOD_NOT_ALLOWED");
    assert_string_equal(js_code_for_status(413), "PAYLOAD_TOO_LARGE");
    assert_string_equal(js_code_for_status(500), "INTERNAL_ERROR");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rt_literal_and_root_paths_match),
        cmocka_unit_test(test_rt_params_are_captured),
        cmocka_unit_test(test_rt_rest_param_takes_the_rest),
        cmocka_unit_test(test_rt_wrong_method_lists_allowed_methods),
        cmocka_unit_test(test_rt_overlong_params_do_not_match),
        cmocka_unit_test(test_gw_status_for_maps_every_error),
        cmocka_unit_test(test_js_error_builds_the_api_error_body),
    };
    return cmocka_run_group_tests_name("router", tests, NULL, NULL);
}
