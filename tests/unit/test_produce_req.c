/*
 * test_produce_req.c - the produce body decoders (gateway/produce_req.c):
 * the fast path takes plain requests (single and batch, every field it
 * knows, the delay fields, base64 bodies) and decodes them exactly as the jansson path does;
 * it gives up on everything else (escapes, properties, unknown, repeated
 * or bad fields, odd numbers, trailing bytes), leaving the jansson path to
 * decide and word the error.  fuzz_request checks the same on random input.
 */
#include "testutil.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "produce_req.h"

#define MAX_BODY 64

static bool slice_eq(MqSlice a, MqSlice b) {
    return a.len == b.len && (a.len == 0 || memcmp(a.ptr, b.ptr, a.len) == 0);
}

/* Decodes 'json' both ways; returns whether the fast path took it, after
 * checking that the jansson path then agrees message by message. */
static bool fast_takes(const char *json) {
    ProduceReq fast;
    bool ok = pr_decode_json_fast(json, strlen(json), MAX_BODY, &fast);
    if (!ok) {
        assert_null(fast.msgs);
        return false;
    }
    json_t *root = json_loads(json, JSON_REJECT_DUPLICATES, NULL);
    if (!root) fail_msg("fast path took what jansson refuses: %s", json);
    ProduceReq slow;
    GwProblem p = {0};
    if (!pr_decode_json(root, MAX_BODY, &slow, &p))
        fail_msg("fast path took what the jansson path refuses (%s): %s", p.msg, json);
    assert_int_equal(fast.count, slow.count);
    assert_int_equal(fast.batch, slow.batch);
    for (size_t i = 0; i < fast.count; i++) {
        ProduceMsg *a = &fast.msgs[i], *b = &slow.msgs[i];
        assert_string_equal(a->where, b->where);
        assert_true(slice_eq(a->body, b->body));
        assert_true(slice_eq(a->tags, b->tags));
        assert_true(slice_eq(a->sharding_key, b->sharding_key));
        assert_int_equal(a->queue_id, b->queue_id);
        assert_int_equal(a->has_delay_level, b->has_delay_level);
        assert_int_equal(a->delay_level, b->delay_level);
        assert_int_equal(a->has_delay_ms, b->has_delay_ms);
        assert_int_equal(a->delay_ms, b->delay_ms);
        assert_int_equal(a->has_deliver_at, b->has_deliver_at);
        assert_int_equal(a->deliver_at_ms, b->deliver_at_ms);
        assert_int_equal(a->keys == NULL, b->keys == NULL);
        if (a->keys) assert_string_equal(a->keys, b->keys);
    }
    pr_req_clear(&fast);
    pr_req_clear(&slow);
    json_decref(root);
    return true;
}

static void test_fast_path_takes_plain_requests(void **state) {
    (void)state;
    const char *plain[] = {
        "{\"body\":\"hello\"}",
        " \n{ \"body\" : \"hello\" }\t",
        "{\"body\":\"h\xc3\xa9llo\",\"tags\":\"TagA\",\"keys\":[\"k1\",\"k2\"],"
        "\"shardingKey\":\"order 1\",\"queueId\":3}",
        "{\"queueId\":0,\"body\":\"x\",\"keys\":[]}",
        "{\"body\":\"AP8Q\",\"bodyEncoding\":\"base64\"}",
        "{\"body\":\"x\",\"bodyEncoding\":\"utf8\"}",
        "{\"messages\":[{\"body\":\"a\"},{\"body\":\"b\",\"queueId\":1}]}",
        "{\"body\":\"x\",\"delayLevel\":3}",
        "{\"messages\":[{\"body\":\"a\",\"delayLevel\":18},{\"body\":\"b\"}]}",
        "{\"body\":\"x\",\"delayMs\":3}",
        "{\"body\":\"x\",\"delayMs\":0}",
        "{\"body\":\"x\",\"deliverAt\":1767225600000}",
        "{\"messages\":[{\"body\":\"a\",\"deliverAt\":1},{\"body\":\"b\",\"delayMs\":9},"
        "{\"body\":\"c\",\"delayLevel\":2}]}",
        "{\"messages\":[{\"body\":\"a\",\"keys\":[\"x\"]} , {\"body\":\"[{}]\"}]}",
    };
    for (size_t i = 0; i < sizeof(plain) / sizeof(plain[0]); i++) {
        if (!fast_takes(plain[i])) fail_msg("fast path gave up on: %s", plain[i]);
    }
}

static void test_fast_path_gives_up_on_the_rest(void **state) {
    (void)state;
    const char *other[] = {
        "",
        "[]",
        "{}",
        "{\"body\":\"\"}",                                 /* empty body */
        "{\"body\":\"a\\nb\"}",                            /* escape */
        "{\"body\":\"x\",\"properties\":{\"a\":\"b\"}}",   /* properties */
        "{\"body\":\"x\",\"color\":\"red\"}",              /* unknown field */
        "{\"body\":\"x\",\"body\":\"y\"}",                 /* repeated */
        "{\"body\":\"x\",\"delayMs\":3,\"delayLevel\":1}",  /* two delays */
        "{\"body\":\"x\",\"deliverAt\":3,\"delayMs\":1}",
        "{\"body\":\"x\",\"delayMs\":-3}",
        "{\"body\":\"x\",\"deliverAt\":1.5}",
        "{\"body\":\"x\",\"deliverAt\":\"1\"}",
        "{\"body\":\"x\",\"delayLevel\":-1}",              /* not a plain number */
        "{\"body\":\"x\",\"delayLevel\":\"3\"}",
        "{\"body\":\"x\",\"queueId\":-1}",
        "{\"body\":\"x\",\"queueId\":1.0}",
        "{\"body\":\"x\",\"queueId\":01}",
        "{\"body\":\"x\",\"queueId\":9223372036854775807}",
        "{\"body\":\"x\",\"tags\":\"a|b\"}",
        "{\"body\":\"x\",\"keys\":[\"has space\"]}",
        "{\"body\":\"x\",\"bodyEncoding\":\"hex\"}",
        "{\"body\":\"!!!!\",\"bodyEncoding\":\"base64\"}",
        "{\"body\":\"x\"} trailing",
        "{\"body\":\"x\",}",
        "{\"body\":\"\xff\"}",                             /* not UTF-8 */
        "{\"body\":\"" "0123456789012345678901234567890123456789"
        "0123456789012345678901234567890123456789\"}", /* over MAX_BODY */
        "{\"messages\":[]}",
        "{\"messages\":[{\"body\":\"a\"}],\"x\":1}",
        "{\"messages\":[{\"body\":\"a\"},7]}",
        "{\"messages\":[{\"body\":\"a\"},{\"body\":\"[{\\\"}\"}]}", /* escape in a batch */
    };
    for (size_t i = 0; i < sizeof(other) / sizeof(other[0]); i++) {
        if (fast_takes(other[i])) fail_msg("fast path took: %s", other[i]);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fast_path_takes_plain_requests),
        cmocka_unit_test(test_fast_path_gives_up_on_the_rest),
    };
    return cmocka_run_group_tests_name("produce_req", tests, NULL, NULL);
}
