/*
 * test_server.c - end-to-end tests of the server skeleton against a real
 * petrel binary: /healthz, the console, routing errors (404, 405, 413),
 * clean and crash shutdown with restart, configuration errors and --help.
 * Each case starts its own server in its own temporary directory.
 */
#define _GNU_SOURCE
#include "testutil.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "e2e.h"

static int setup(void **state) {
    return e2e_case_setup(state, "e2e");
}

/* Parses 'r->body' as JSON; fails the test if it is not. */
static json_t *parse(const E2eResponse *r) {
    json_error_t err;
    json_t *root = json_loadb(r->body, r->len, 0, &err);
    if (!root) fprintf(stderr, "not JSON (%s): %.*s\n", err.text, (int)r->len, r->body);
    assert_non_null(root);
    return root;
}

/* Checks the API.md error body: code, message, status == HTTP status. */
static void assert_error_body(const E2eResponse *r, const char *code) {
    char ct[128];
    assert_non_null(e2e_header(r, "Content-Type", ct, sizeof(ct)));
    assert_string_equal(ct, "application/json");
    json_t *root = parse(r);
    json_t *err = json_object_get(root, "error");
    assert_true(json_is_object(err));
    assert_string_equal(json_string_value(json_object_get(err, "code")), code);
    const char *msg = json_string_value(json_object_get(err, "message"));
    assert_non_null(msg);
    assert_true(strlen(msg) > 0);
    assert_int_equal(json_integer_value(json_object_get(err, "status")), r->status);
    json_decref(root);
}

static void assert_healthz_up(const E2eServer *srv) {
    E2eResponse r;
    assert_int_equal(e2e_get(srv, "/healthz", &r), 0);
    assert_int_equal(r.status, 200);
    json_t *h = parse(&r);
    assert_string_equal(json_string_value(json_object_get(h, "status")), "UP");
    assert_true(json_is_true(json_object_get(h, "writable")));
    json_decref(h);
    e2e_response_free(&r);
}

/* ---- routes --------------------------------------------------------------*/

static void test_gw_healthz_reports_up_with_store_figures(void **state) {
    E2eCase *f = *state;
    e2e_case_start(f, NULL);
    E2eResponse r;
    assert_int_equal(e2e_get(&f->srv, "/healthz", &r), 0);
    assert_int_equal(r.status, 200);
    char ct[128];
    assert_string_equal(e2e_header(&r, "Content-Type", ct, sizeof(ct)), "application/json");
    json_t *h = parse(&r);
    assert_string_equal(json_string_value(json_object_get(h, "status")), "UP");
    assert_string_equal(json_string_value(json_object_get(h, "role")), "ASYNC_MASTER");
    assert_string_equal(json_string_value(json_object_get(h, "brokerName")), "broker-a");
    json_t *cl = json_object_get(h, "commitLog");
    assert_true(json_is_object(cl));
    json_t *min = json_object_get(cl, "minOffset");
    json_t *wr = json_object_get(cl, "writeOffset");
    json_t *fl = json_object_get(cl, "flushedOffset");
    assert_true(json_is_integer(min) && json_is_integer(wr) && json_is_integer(fl));
    assert_true(json_integer_value(min) <= json_integer_value(wr));
    assert_true(json_integer_value(fl) <= json_integer_value(wr));
    json_t *ratio = json_object_get(h, "diskUsedRatio");
    assert_true(json_is_null(ratio) || (json_is_number(ratio) && json_number_value(ratio) >= 0 &&
                                        json_number_value(ratio) <= 1));
    assert_true(json_is_true(json_object_get(h, "writable")));
    json_decref(h);
    e2e_response_free(&r);

    E2eRequest head = {.method = "HEAD", .path = "/healthz"};
    assert_int_equal(e2e_http(&f->srv, &head, &r), 0);
    assert_int_equal(r.status, 200);
    assert_int_equal(r.len, 0);
    e2e_response_free(&r);
    assert_int_equal(e2e_stop(&f->srv), 0);
}

static void test_gw_healthz_is_503_down_when_the_store_refuses_writes(void **state) {
    E2eCase *f = *state;
    /* Any real disk is more than 1 % used: the store refuses appends. */
    static const char *const extra[] = {"--diskSpaceWarningLevelRatio=1",
                                        "--flushIntervalConsumeQueue=100",
                                        "--cleanResourceInterval=100", NULL};
    e2e_case_start(f, extra);
    E2eResponse r = {0};
    for (int i = 0; i < 100; i++) {
        e2e_response_free(&r);
        assert_int_equal(e2e_get(&f->srv, "/healthz", &r), 0);
        if (r.status == 503) break;
        json_t *h = parse(&r);
        double ratio = json_number_value(json_object_get(h, "diskUsedRatio"));
        json_decref(h);
        if (ratio < 0.02) {
            e2e_response_free(&r);
            assert_int_equal(e2e_stop(&f->srv), 0);
            skip(); /* a nearly empty file system: nothing to refuse */
        }
        struct timespec ts = {0, 50 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    assert_int_equal(r.status, 503);
    json_t *h = parse(&r);
    assert_string_equal(json_string_value(json_object_get(h, "status")), "DOWN");
    assert_true(json_is_false(json_object_get(h, "writable")));
    assert_string_equal(json_string_value(json_object_get(h, "brokerName")), "broker-a");
    assert_true(json_is_object(json_object_get(h, "commitLog")));
    json_decref(h);
    e2e_response_free(&r);
    assert_int_equal(e2e_stop(&f->srv), 0);
}

static void test_gw_root_redirects_to_console(void **state) {
    E2eCase *f = *state;
    e2e_case_start(f, NULL);
    E2eResponse r;
    assert_int_equal(e2e_get(&f->srv, "/", &r), 0);
    assert_int_equal(r.status, 302);
    char loc[256];
    assert_string_equal(e2e_header(&r, "Location", loc, sizeof(loc)), "/console/");
    e2e_response_free(&r);
    assert_int_equal(e2e_stop(&f->srv), 0);
}

static void test_gw_console_serves_static_files(void **state) {
    E2eCase *f = *state;
    e2e_case_start(f, NULL);
    E2eResponse r;
    char ct[128];
    assert_int_equal(e2e_get(&f->srv, "/console/", &r), 0);
    assert_int_equal(r.status, 200);
    assert_non_null(e2e_header(&r, "Content-Type", ct, sizeof(ct)));
    assert_true(strncmp(ct, "text/html", 9) == 0);
    assert_non_null(strstr(r.body, "Petrel console"));
    assert_non_null(strstr(r.body, "app.js"));
    e2e_response_free(&r);

    assert_int_equal(e2e_get(&f->srv, "/console/app.js", &r), 0);
    assert_int_equal(r.status, 200);
    assert_non_null(e2e_header(&r, "Content-Type", ct, sizeof(ct)));
    assert_true(strncmp(ct, "text/javascript", 15) == 0);
    assert_non_null(strstr(r.body, "/v1/broker/rates"));
    e2e_response_free(&r);

    assert_int_equal(e2e_get(&f->srv, "/console/index.html", &r), 0);
    assert_int_equal(r.status, 200);
    e2e_response_free(&r);

    assert_int_equal(e2e_get(&f->srv, "/console/app.css", &r), 0);
    assert_int_equal(r.status, 200);
    assert_non_null(e2e_header(&r, "Content-Type", ct, sizeof(ct)));
    assert_true(strncmp(ct, "text/css", 8) == 0);
    e2e_response_free(&r);

    assert_int_equal(e2e_get(&f->srv, "/console/missing.js", &r), 0);
    assert_int_equal(r.status, 404);
    assert_error_body(&r, "NOT_FOUND");
    e2e_response_free(&r);
    assert_int_equal(e2e_stop(&f->srv), 0);
}

static void test_gw_console_rejects_path_traversal(void **state) {
    E2eCase *f = *state;
    e2e_case_start(f, NULL);
    static const char *const paths[] = {
        "/console/../Makefile",      "/console/%2e%2e/Makefile", "/console/..%2fMakefile",
        "/console/%2e%2e%2fMakefile", "/console//etc/passwd",     "/console/%2fetc/passwd",
        "/console/./index.html",     "/console/.hidden",          "/console/a/../../Makefile",
    };
    for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++) {
        E2eResponse r;
        assert_int_equal(e2e_get(&f->srv, paths[i], &r), 0);
        if (r.status != 404) fprintf(stderr, "%s -> %ld\n", paths[i], r.status);
        assert_int_equal(r.status, 404);
        assert_error_body(&r, "NOT_FOUND");
        assert_null(strstr(r.body, "PETREL"));
        e2e_response_free(&r);
    }
    assert_int_equal(e2e_stop(&f->srv), 0);
}

static void write_text(const char *path, const char *text) {
    FILE *fp = fopen(path, "w");
    assert_non_null(fp);
    fputs(text, fp);
    fclose(fp);
}

static void test_gw_console_redirects_directories_and_stays_in_web_root(void **state) {
    E2eCase *f = *state;
    /* web/index.html, web/guide/index.html, web/out -> ../secret.txt */
    char *web = tu_path(f->dir, "web");
    char *guide = tu_path(f->dir, "web/guide");
    assert_int_equal(mkdir(web, 0755), 0);
    assert_int_equal(mkdir(guide, 0755), 0);
    char *p = tu_path(f->dir, "web/index.html");
    write_text(p, "<p>top</p>");
    free(p);
    p = tu_path(f->dir, "web/guide/index.html");
    write_text(p, "<p>guide</p>");
    free(p);
    char *secret = tu_path(f->dir, "secret.txt");
    write_text(secret, "SECRET");
    p = tu_path(f->dir, "web/out.txt");
    assert_int_equal(symlink(secret, p), 0);
    free(p);
    char flag[1200];
    snprintf(flag, sizeof(flag), "--webRoot=%s", web);
    const char *const extra[] = {flag, NULL};
    e2e_case_start(f, extra);

    E2eResponse r;
    char loc[256];
    assert_int_equal(e2e_get(&f->srv, "/console/guide", &r), 0);
    assert_int_equal(r.status, 302);
    assert_string_equal(e2e_header(&r, "Location", loc, sizeof(loc)), "/console/guide/");
    e2e_response_free(&r);
    assert_int_equal(e2e_get(&f->srv, "/console/guide/", &r), 0);
    assert_int_equal(r.status, 200);
    assert_string_equal(r.body, "<p>guide</p>");
    e2e_response_free(&r);
    assert_int_equal(e2e_get(&f->srv, "/console/out.txt", &r), 0);
    assert_int_equal(r.status, 404);
    assert_null(strstr(r.body, "SECRET"));
    e2e_response_free(&r);
    assert_int_equal(e2e_stop(&f->srv), 0);
    free(secret);
    free(guide);
    free(web);
}

static void test_gw_unknown_path_is_404_json(void **state) {
    E2eCase *f = *state;
    e2e_case_start(f, NULL);
    static const char *const paths[] = {"/nope", "/healthz/", "/console", "/healthzz"};
    for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++) {
        E2eResponse r;
        assert_int_equal(e2e_get(&f->srv, paths[i], &r), 0);
        assert_int_equal(r.status, 404);
        assert_error_body(&r, "NOT_FOUND");
        e2e_response_free(&r);
    }
    assert_int_equal(e2e_stop(&f->srv), 0);
}

static void test_gw_wrong_method_is_405_with_allow(void **state) {
    E2eCase *f = *state;
    e2e_case_start(f, NULL);
    E2eRequest req = {.method = "POST", .path = "/healthz", .body = "{}", .body_len = 2,
                      .content_type = "application/json"};
    E2eResponse r;
    assert_int_equal(e2e_http(&f->srv, &req, &r), 0);
    assert_int_equal(r.status, 405);
    char allow[128];
    assert_non_null(e2e_header(&r, "Allow", allow, sizeof(allow)));
    assert_non_null(strstr(allow, "GET"));
    assert_error_body(&r, "METHOD_NOT_ALLOWED");
    e2e_response_free(&r);

    E2eRequest del = {.method = "DELETE", .path = "/console/index.html"};
    assert_int_equal(e2e_http(&f->srv, &del, &r), 0);
    assert_int_equal(r.status, 405);
    assert_error_body(&r, "METHOD_NOT_ALLOWED");
    e2e_response_free(&r);
    assert_int_equal(e2e_stop(&f->srv), 0);
}

static void test_gw_oversized_body_is_413(void **state) {
    E2eCase *f = *state;
    /* limit = maxMessageSize + 64 KiB = 66560 bytes */
    static const char *const extra[] = {"--maxMessageSize=1024", NULL};
    e2e_case_start(f, extra);
    size_t big = 2u << 20;
    char *body = malloc(big);
    assert_non_null(body);
    memset(body, 'x', big);

    /* With Content-Length: refused from the headers, before the upload. */
    E2eRequest req = {.method = "POST", .path = "/healthz", .body = body, .body_len = big,
                      .content_type = "application/octet-stream"};
    E2eResponse r;
    assert_int_equal(e2e_http(&f->srv, &req, &r), 0);
    assert_int_equal(r.status, 413);
    assert_error_body(&r, "PAYLOAD_TOO_LARGE");
    e2e_response_free(&r);

    /* Chunked, no length: swallowed while it arrives, then refused. */
    req.body_len = 200 * 1024;
    req.chunked = true;
    assert_int_equal(e2e_http(&f->srv, &req, &r), 0);
    assert_int_equal(r.status, 413);
    assert_error_body(&r, "PAYLOAD_TOO_LARGE");
    e2e_response_free(&r);

    /* Just under the limit: routed as usual (405 on /healthz). */
    req.body_len = 66560;
    req.chunked = false;
    assert_int_equal(e2e_http(&f->srv, &req, &r), 0);
    assert_int_equal(r.status, 405);
    e2e_response_free(&r);
    free(body);

    assert_healthz_up(&f->srv);
    assert_int_equal(e2e_stop(&f->srv), 0);
}

/* ---- process life --------------------------------------------------------*/

static void test_gw_sigterm_exits_cleanly_and_restarts(void **state) {
    E2eCase *f = *state;
    e2e_case_start(f, NULL);
    assert_healthz_up(&f->srv);
    char *abort_file = tu_path(f->srv.data, "abort");
    char *ckpt = tu_path(f->srv.data, "checkpoint");
    char *meta = tu_path(f->srv.data, "meta.db");
    assert_true(tu_exists(abort_file));

    assert_int_equal(e2e_stop(&f->srv), 0);
    assert_false(tu_exists(abort_file));
    assert_true(tu_exists(ckpt));
    assert_true(tu_exists(meta));
    assert_false(tu_exists(f->srv.port_file));

    e2e_case_start(f, NULL);
    assert_true(tu_exists(abort_file));
    assert_healthz_up(&f->srv);
    assert_int_equal(e2e_stop(&f->srv), 0);
    assert_false(tu_exists(abort_file));
    free(abort_file);
    free(ckpt);
    free(meta);
}

static void test_gw_kill9_leaves_abort_file_and_restart_recovers(void **state) {
    E2eCase *f = *state;
    e2e_case_start(f, NULL);
    assert_healthz_up(&f->srv);
    char *abort_file = tu_path(f->srv.data, "abort");
    e2e_kill9(&f->srv);
    assert_true(tu_exists(abort_file));

    e2e_case_start(f, NULL);
    assert_healthz_up(&f->srv);
    assert_int_equal(e2e_stop(&f->srv), 0);
    assert_false(tu_exists(abort_file));
    free(abort_file);
}

static void test_gw_second_process_on_same_data_dir_is_refused(void **state) {
    E2eCase *f = *state;
    e2e_case_start(f, NULL);
    char *out = NULL;
    const char *const again[] = {"standalone", "--listen", "127.0.0.1:0", "--data",
                                 f->srv.data, NULL};
    assert_int_equal(e2e_run(again, &out), 1);
    assert_non_null(strstr(out, "in use"));
    free(out);
    assert_healthz_up(&f->srv);
    assert_int_equal(e2e_stop(&f->srv), 0);
}

/* ---- configuration -------------------------------------------------------*/

static void test_gw_config_file_is_read_and_flags_win(void **state) {
    E2eCase *f = *state;
    char *conf = tu_path(f->dir, "broker.conf");
    FILE *fp = fopen(conf, "w");
    assert_non_null(fp);
    fprintf(fp, "# test config\n\n  brokerName = from-file  \nbrokerRole=SYNC_MASTER\n");
    fclose(fp);
    const char *const extra[] = {"-c", conf, "--brokerRole=SLAVE", NULL};
    e2e_case_start(f, extra);
    E2eResponse r;
    assert_int_equal(e2e_get(&f->srv, "/healthz", &r), 0);
    json_t *h = parse(&r);
    assert_string_equal(json_string_value(json_object_get(h, "brokerName")), "from-file");
    assert_string_equal(json_string_value(json_object_get(h, "role")), "SLAVE");
    json_decref(h);
    e2e_response_free(&r);
    assert_int_equal(e2e_stop(&f->srv), 0);
    free(conf);
}

static void test_gw_bad_config_exits_2_naming_the_key(void **state) {
    E2eCase *f = *state;
    char *data = tu_path(f->dir, "data");
    char *out = NULL;
    const char *const unknown[] = {"standalone", "--data", data, "--noSuchKey=1", NULL};
    assert_int_equal(e2e_run(unknown, &out), 2);
    assert_non_null(strstr(out, "noSuchKey"));
    free(out);

    const char *const bad_value[] = {"standalone", "--data", data, "--brokerId=abc", NULL};
    assert_int_equal(e2e_run(bad_value, &out), 2);
    assert_non_null(strstr(out, "brokerId"));
    free(out);

    const char *const bad_cq[] = {"broker", "--data", data,
                                  "--mappedFileSizeConsumeQueue=1001", NULL};
    assert_int_equal(e2e_run(bad_cq, &out), 2);
    assert_non_null(strstr(out, "mappedFileSizeConsumeQueue"));
    free(out);

    char *conf = tu_path(f->dir, "bad.conf");
    FILE *fp = fopen(conf, "w");
    assert_non_null(fp);
    fprintf(fp, "brokerName=b\n# fine so far\nflushDiskType=SOMETIMES\n");
    fclose(fp);
    const char *const bad_file[] = {"broker", "-c", conf, "--data", data, NULL};
    assert_int_equal(e2e_run(bad_file, &out), 2);
    assert_non_null(strstr(out, "flushDiskType"));
    assert_non_null(strstr(out, ":3:"));
    free(out);

    assert_false(tu_exists(data)); /* nothing was opened */
    free(conf);
    free(data);
}

static void test_gw_help_lists_keys_and_commands(void **state) {
    (void)state;
    char *out = NULL;
    const char *const help[] = {"--help", NULL};
    assert_int_equal(e2e_run(help, &out), 0);
    assert_non_null(strstr(out, "standalone"));
    assert_non_null(strstr(out, "namesrv"));
    free(out);

    const char *const cmd_help[] = {"standalone", "--help", NULL};
    assert_int_equal(e2e_run(cmd_help, &out), 0);
    assert_non_null(strstr(out, "--listen=127.0.0.1:8080"));
    assert_non_null(strstr(out, "--mappedFileSizeCommitLog=1073741824"));
    assert_non_null(strstr(out, "--brokerRole=ASYNC_MASTER"));
    assert_non_null(strstr(out, "--offsetFlushInterval=5000"));
    free(out);

    const char *const broker_help[] = {"broker", "--help", NULL};
    assert_int_equal(e2e_run(broker_help, &out), 0);
    assert_non_null(strstr(out, "--listen=127.0.0.1:10911"));
    free(out);

    const char *const later[] = {"namesrv", NULL};
    assert_int_equal(e2e_run(later, &out), 2);
    assert_non_null(strstr(out, "not implemented yet"));
    free(out);

    const char *const unknown[] = {"frobnicate", NULL};
    assert_int_equal(e2e_run(unknown, &out), 2);
    free(out);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_gw_healthz_reports_up_with_store_figures, setup,
                                        e2e_case_teardown),
        cmocka_unit_test_setup_teardown(test_gw_healthz_is_503_down_when_the_store_refuses_writes,
                                        setup, e2e_case_teardown),
        cmocka_unit_test_setup_teardown(test_gw_root_redirects_to_console, setup,
                                        e2e_case_teardown),
        cmocka_unit_test_setup_teardown(test_gw_console_serves_static_files, setup,
                                        e2e_case_teardown),
        cmocka_unit_test_setup_teardown(test_gw_console_rejects_path_traversal, setup,
                                        e2e_case_teardown),
        cmocka_unit_test_setup_teardown(test_gw_console_redirects_directories_and_stays_in_web_root,
                                        setup, e2e_case_teardown),
        cmocka_unit_test_setup_teardown(test_gw_unknown_path_is_404_json, setup, e2e_case_teardown),
        cmocka_unit_test_setup_teardown(test_gw_wrong_method_is_405_with_allow, setup,
                                        e2e_case_teardown),
        cmocka_unit_test_setup_teardown(test_gw_oversized_body_is_413, setup, e2e_case_teardown),
        cmocka_unit_test_setup_teardown(test_gw_sigterm_exits_cleanly_and_restarts, setup,
                                        e2e_case_teardown),
        cmocka_unit_test_setup_teardown(test_gw_kill9_leaves_abort_file_and_restart_recovers, setup,
                                        e2e_case_teardown),
        cmocka_unit_test_setup_teardown(test_gw_second_process_on_same_data_dir_is_refused, setup,
                                        e2e_case_teardown),
        cmocka_unit_test_setup_teardown(test_gw_config_file_is_read_and_flags_win, setup,
                                        e2e_case_teardown),
        cmocka_unit_test_setup_teardown(test_gw_bad_config_exits_2_naming_the_key, setup,
                                        e2e_case_teardown),
        cmocka_unit_test_setup_teardown(test_gw_help_lists_keys_and_commands, setup,
                                        e2e_case_teardown),
    };
    return cmocka_run_group_tests_name("e2e_server", tests, NULL, NULL);
}
