/*
 * test_longpoll.c - end-to-end tests of long-polling pulls (waitMs)
 * against a real petrel: wake-up by a produce from another thread,
 * timeout on an empty queue, waitMs out of range, a tag filter that skips
 * non-matching arrivals, 50 concurrent polls woken by one produce,
 * immediate answers for OFFSET_OVERFLOW, and SIGTERM while polls are held.
 * Timing assertions only bound from one side ("before the deadline",
 * "not before the produce", ">= waitMs"); each case has its own server.
 */
#define _GNU_SOURCE
#include "testutil.h"

#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "e2e.h"

static int setup(void **state) {
    return e2e_case_setup(state, "e2e-longpoll");
}

static void produce(E2eCase *f, const char *topic, const char *body) {
    char path[128];
    snprintf(path, sizeof(path), "/v1/topics/%s/messages", topic);
    json_t *res = e2e_call(f, "POST", path, E2E_JSON, body, 200);
    assert_string_equal(e2e_str(res, "status"), "SEND_OK");
    json_decref(res);
}

/* ---- a poll on its own thread ----------------------------------------------*/

typedef E2eCall Poll;

/* A GET of the path printed from the format on its own thread. */
#define poll_start(p, f, ...) \
    assert_int_equal(e2e_call_start((p), &(f)->srv, "GET", NULL, __VA_ARGS__), 0)

static void poll_join(Poll *p) {
    e2e_call_join(p);
}

/* ---- cases -------------------------------------------------------------------*/

static void test_long_poll_returns_found_soon_after_a_produce(void **state) {
    E2eCase *f = *state;
    e2e_case_start(f, NULL);
    e2e_create_topic(f, "Lp", 2);
    Poll p;
    poll_start(&p, f, "/v1/topics/Lp/queues/1/messages?offset=0&waitMs=5000");
    e2e_sleep_ms(300);
    assert_false(atomic_load(&p.done)); /* held, not answered */
    int64_t sent = e2e_now_ms();
    produce(f, "Lp", "{\"body\":\"wake\",\"queueId\":1}");
    poll_join(&p);
    assert_int_equal(p.status, 200);
    assert_non_null(p.json);
    assert_string_equal(e2e_str(p.json, "status"), "FOUND");
    assert_int_equal(e2e_num(p.json, "nextOffset"), 1);
    assert_int_equal(e2e_num(p.json, "maxOffset"), 1);
    json_t *msgs = json_object_get(p.json, "messages");
    assert_int_equal(json_array_size(msgs), 1);
    assert_string_equal(e2e_str(json_array_get(msgs, 0), "body"), "wake");
    assert_true(p.end_ms >= sent);
    /* answered by the arrival, well before the 5 s deadline */
    assert_true(p.end_ms - p.start_ms < 4000);
    json_decref(p.json);
}

static void test_long_poll_on_an_empty_queue_times_out_with_no_new_msg(void **state) {
    E2eCase *f = *state;
    e2e_case_start(f, NULL);
    e2e_create_topic(f, "Empty", 1);
    int64_t t0 = e2e_now_ms();
    json_t *p = e2e_call(f, "GET", "/v1/topics/Empty/queues/0/messages?offset=0&waitMs=300", NULL,
                         NULL, 200);
    int64_t took = e2e_now_ms() - t0;
    assert_string_equal(e2e_str(p, "status"), "NO_NEW_MSG");
    assert_int_equal(json_array_size(json_object_get(p, "messages")), 0);
    assert_int_equal(e2e_num(p, "nextOffset"), 0);
    assert_true(took >= 300);
    json_decref(p);

    /* also at the end of a queue that has messages */
    produce(f, "Empty", "{\"body\":\"one\"}");
    json_t *q = NULL;
    for (int i = 0; i < 500; i++) { /* the dispatcher adds it a moment later */
        q = e2e_call(f, "GET", "/v1/topics/Empty/queues/0/messages?offset=0", NULL, NULL, 200);
        if (strcmp(e2e_str(q, "status"), "FOUND") == 0) break;
        json_decref(q);
        q = NULL;
        e2e_sleep_ms(10);
    }
    assert_non_null(q);
    json_decref(q);
    t0 = e2e_now_ms();
    p = e2e_call(f, "GET", "/v1/topics/Empty/queues/0/messages?offset=1&waitMs=300", NULL, NULL,
                 200);
    took = e2e_now_ms() - t0;
    assert_string_equal(e2e_str(p, "status"), "NO_NEW_MSG");
    assert_int_equal(e2e_num(p, "nextOffset"), 1);
    assert_int_equal(e2e_num(p, "maxOffset"), 1);
    assert_true(took >= 300);
    json_decref(p);
}

static void expect_400(E2eCase *f, const char *path, const char *want_in_message) {
    E2eResponse r;
    assert_int_equal(e2e_get(&f->srv, path, &r), 0);
    json_t *root = e2e_json(&r);
    json_t *err = json_object_get(root, "error");
    if (r.status != 400) fprintf(stderr, "%s: %ld %.*s\n", path, r.status, (int)r.len, r.body);
    assert_int_equal(r.status, 400);
    assert_string_equal(e2e_str(err, "code"), "INVALID_PARAMETER");
    assert_non_null(strstr(e2e_str(err, "message"), want_in_message));
    json_decref(root);
    e2e_response_free(&r);
}

static void test_long_poll_wait_out_of_range_is_400(void **state) {
    E2eCase *f = *state;
    e2e_case_start(f, NULL);
    e2e_create_topic(f, "W", 1);
    expect_400(f, "/v1/topics/W/queues/0/messages?waitMs=30001", "0 to 30000");
    expect_400(f, "/v1/topics/W/queues/0/messages?waitMs=-1", "0 to 30000");
    expect_400(f, "/v1/topics/W/queues/0/messages?waitMs=abc", "waitMs");
    expect_400(f, "/v1/topics/W/queues/0/messages?waitMs=99999999999999999999", "waitMs");
    /* waitMs=0 is a classic pull: answered at once */
    json_t *p = e2e_call(f, "GET", "/v1/topics/W/queues/0/messages?waitMs=0", NULL, NULL, 200);
    assert_string_equal(e2e_str(p, "status"), "NO_NEW_MSG");
    json_decref(p);
}

static void test_long_poll_with_tag_filter_ignores_other_tags(void **state) {
    E2eCase *f = *state;
    e2e_case_start(f, NULL);
    e2e_create_topic(f, "Tg", 1);
    Poll p;
    poll_start(&p, f, "/v1/topics/Tg/queues/0/messages?offset=0&tags=TagB&waitMs=5000");
    e2e_sleep_ms(200);
    produce(f, "Tg", "{\"body\":\"a\",\"tags\":\"TagA\"}");
    e2e_sleep_ms(300);
    assert_false(atomic_load(&p.done)); /* the TagA arrival did not answer it */
    int64_t sent = e2e_now_ms();
    produce(f, "Tg", "{\"body\":\"b\",\"tags\":\"TagB\"}");
    poll_join(&p);
    assert_int_equal(p.status, 200);
    assert_string_equal(e2e_str(p.json, "status"), "FOUND");
    json_t *msgs = json_object_get(p.json, "messages");
    assert_int_equal(json_array_size(msgs), 1);
    assert_string_equal(e2e_str(json_array_get(msgs, 0), "body"), "b");
    assert_string_equal(e2e_str(json_array_get(msgs, 0), "tags"), "TagB");
    assert_int_equal(e2e_num(json_array_get(msgs, 0), "queueOffset"), 1);
    assert_int_equal(e2e_num(p.json, "nextOffset"), 2);
    assert_true(p.end_ms >= sent);
    assert_true(p.end_ms - p.start_ms < 4000);
    json_decref(p.json);

    /* only non-matching arrivals: NO_NEW_MSG at the deadline, past them */
    poll_start(&p, f, "/v1/topics/Tg/queues/0/messages?offset=2&tags=TagB&waitMs=600");
    e2e_sleep_ms(100);
    produce(f, "Tg", "{\"body\":\"c\",\"tags\":\"TagA\"}");
    poll_join(&p);
    assert_int_equal(p.status, 200);
    assert_string_equal(e2e_str(p.json, "status"), "NO_NEW_MSG");
    assert_int_equal(json_array_size(json_object_get(p.json, "messages")), 0);
    assert_true(p.end_ms - p.start_ms >= 600);
    assert_int_equal(e2e_num(p.json, "nextOffset"), 3); /* past the skipped TagA entry */
    json_decref(p.json);
}

static void test_long_poll_offset_overflow_answers_at_once(void **state) {
    E2eCase *f = *state;
    e2e_case_start(f, NULL);
    e2e_create_topic(f, "Ov", 1);
    int64_t t0 = e2e_now_ms();
    json_t *p =
        e2e_call(f, "GET", "/v1/topics/Ov/queues/0/messages?offset=5&waitMs=5000", NULL, NULL, 200);
    assert_string_equal(e2e_str(p, "status"), "OFFSET_OVERFLOW");
    assert_int_equal(e2e_num(p, "nextOffset"), 0);
    assert_true(e2e_now_ms() - t0 < 4000);
    json_decref(p);
}

#define MANY 50

static void test_many_long_polls_all_wake_on_one_produce(void **state) {
    E2eCase *f = *state;
    e2e_case_start(f, NULL);
    e2e_create_topic(f, "Many", 1);
    Poll *ps = calloc(MANY, sizeof(*ps));
    assert_non_null(ps);
    for (int i = 0; i < MANY; i++) {
        poll_start(&ps[i], f, "/v1/topics/Many/queues/0/messages?offset=0&waitMs=8000");
    }
    e2e_sleep_ms(500);
    int64_t sent = e2e_now_ms();
    produce(f, "Many", "{\"body\":\"all\"}");
    for (int i = 0; i < MANY; i++) poll_join(&ps[i]);
    for (int i = 0; i < MANY; i++) {
        Poll *p = &ps[i];
        if (p->status != 200) fprintf(stderr, "poll %d: status %ld\n", i, p->status);
        assert_int_equal(p->status, 200);
        assert_string_equal(e2e_str(p->json, "status"), "FOUND");
        json_t *msgs = json_object_get(p->json, "messages");
        assert_int_equal(json_array_size(msgs), 1);
        assert_string_equal(e2e_str(json_array_get(msgs, 0), "body"), "all");
        assert_true(p->end_ms >= sent);
        assert_true(p->end_ms - p->start_ms < 7000); /* before the deadline */
        json_decref(p->json);
    }
    free(ps);
}

#define HELD 5

static void test_sigterm_answers_held_polls_and_exits_promptly(void **state) {
    E2eCase *f = *state;
    e2e_case_start(f, NULL);
    e2e_create_topic(f, "Stop", 2);
    Poll ps[HELD];
    for (int i = 0; i < HELD; i++) {
        poll_start(&ps[i], f, "/v1/topics/Stop/queues/%d/messages?offset=0&waitMs=30000", i % 2);
    }
    e2e_sleep_ms(500);
    for (int i = 0; i < HELD; i++) assert_false(atomic_load(&ps[i].done));
    int64_t t0 = e2e_now_ms();
    int st = e2e_stop(&f->srv);
    int64_t stop_ms = e2e_now_ms() - t0;
    if (st != 0) e2e_case_print_log(f);
    assert_int_equal(st, 0);
    for (int i = 0; i < HELD; i++) poll_join(&ps[i]);
    for (int i = 0; i < HELD; i++) {
        assert_int_equal(ps[i].status, 200);
        assert_string_equal(e2e_str(ps[i].json, "status"), "NO_NEW_MSG");
        /* answered by the shutdown, not by the 30 s deadline (curl gives up at 10 s) */
        assert_true(ps[i].end_ms - ps[i].start_ms < 9000);
        json_decref(ps[i].json);
    }
    /* prompt: well inside gw_stop's bound for suspended requests */
    assert_true(stop_ms < 5000);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_long_poll_returns_found_soon_after_a_produce,
                                        setup, e2e_case_teardown),
        cmocka_unit_test_setup_teardown(
            test_long_poll_on_an_empty_queue_times_out_with_no_new_msg, setup, e2e_case_teardown),
        cmocka_unit_test_setup_teardown(test_long_poll_wait_out_of_range_is_400, setup,
                                        e2e_case_teardown),
        cmocka_unit_test_setup_teardown(test_long_poll_with_tag_filter_ignores_other_tags, setup,
                                        e2e_case_teardown),
        cmocka_unit_test_setup_teardown(test_long_poll_offset_overflow_answers_at_once, setup,
                                        e2e_case_teardown),
        cmocka_unit_test_setup_teardown(test_many_long_polls_all_wake_on_one_produce, setup,
                                        e2e_case_teardown),
        cmocka_unit_test_setup_teardown(test_sigterm_answers_held_polls_and_exits_promptly,
                                        setup, e2e_case_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
