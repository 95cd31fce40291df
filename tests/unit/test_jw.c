/*
 * test_jw.c - the JSON text writer (gateway/jw.c) against jansson: strings
 * escape exactly as json_dumps writes them, integers at the int64 edges,
 * UTF-8 validation agrees with jansson's, and a message object parses
 * back to the record's fields (text and base64 bodies, properties).
 */
#include "testutil.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "jw.h"
#include "msg.h"
#include "mq.h"

static char *take_str(JsonW *w) {
    size_t len = 0;
    char *b = jw_take(w, &len);
    assert_non_null(b);
    char *s = malloc(len + 1);
    memcpy(s, b, len);
    s[len] = '\0';
    free(b);
    return s;
}

static void test_strings_escape_like_jansson(void **state) {
    (void)state;
    unsigned seed = 7;
    for (int round = 0; round < 2000; round++) {
        char in[64];
        size_t n = (size_t)(rand_r(&seed) % 40);
        for (size_t i = 0; i < n; i++) {
            int pick = rand_r(&seed) % 6;
            in[i] = pick == 0 ? (char)(rand_r(&seed) % 32) /* controls */
                    : pick == 1 ? "\"\\/"[rand_r(&seed) % 3]
                                : (char)(32 + rand_r(&seed) % 95);
        }
        json_t *j = json_stringn(in, n);
        assert_non_null(j);
        char *want = json_dumps(j, JSON_COMPACT | JSON_ENCODE_ANY);
        JsonW w;
        jw_init(&w, 0);
        jw_str(&w, in, n);
        char *got = take_str(&w);
        assert_string_equal(got, want);
        free(got);
        free(want);
        json_decref(j);
    }
    /* multi-byte characters pass through */
    JsonW w;
    jw_init(&w, 4);
    jw_str(&w, "\xc3\xa9\xf0\x9f\x98\x80", 6);
    char *got = take_str(&w);
    assert_string_equal(got, "\"\xc3\xa9\xf0\x9f\x98\x80\"");
    free(got);
}

static void test_integers(void **state) {
    (void)state;
    JsonW w;
    jw_init(&w, 0);
    jw_int(&w, 0);
    jw_lit(&w, " ");
    jw_int(&w, -1);
    jw_lit(&w, " ");
    jw_int(&w, INT64_MAX);
    jw_lit(&w, " ");
    jw_int(&w, INT64_MIN);
    char *got = take_str(&w);
    assert_string_equal(got, "0 -1 9223372036854775807 -9223372036854775808");
    free(got);
}

static void test_utf8_validation_agrees_with_jansson(void **state) {
    (void)state;
    unsigned seed = 11;
    for (int round = 0; round < 20000; round++) {
        unsigned char in[8];
        size_t n = 1 + (size_t)(rand_r(&seed) % 8);
        for (size_t i = 0; i < n; i++) {
            int pick = rand_r(&seed) % 4;
            in[i] = pick == 0 ? (unsigned char)(0x80 + rand_r(&seed) % 64)
                    : pick == 1 ? (unsigned char)(0xc0 + rand_r(&seed) % 64)
                                : (unsigned char)(rand_r(&seed) % 256);
        }
        json_t *j = json_stringn((const char *)in, n);
        assert_int_equal(jw_utf8_valid((const char *)in, n), j != NULL);
        json_decref(j);
    }
}

static void test_message_object(void **state) {
    (void)state;
    MsgProp props[] = {
        {mq_slice("TAGS", 4), mq_slice("TagA", 4)},
        {mq_slice("KEYS", 4), mq_slice("k1 k2", 5)},
        {mq_slice("color", 5), mq_slice("red \"x\"", 7)},
    };
    uint8_t pbuf[256];
    size_t plen = 0;
    assert_int_equal(msg_props_encode(props, 3, pbuf, sizeof(pbuf), &plen), MQ_OK);
    ClRecord rec;
    memset(&rec, 0, sizeof(rec));
    rec.queue_id = 3;
    rec.queue_off = 41;
    rec.phys_off = 4096;
    rec.born_ts = 1767225600000;
    rec.store_ts = 1767225600001;
    rec.total_size = 200;
    rec.topic = mq_slice("Orders", 6);
    rec.props = mq_slice(pbuf, plen);
    rec.body = mq_slice("hello\n", 6);
    JsonW w;
    jw_init(&w, 16);
    jw_message(&w, &rec);
    char *text = take_str(&w);
    json_error_t je;
    json_t *m = json_loads(text, 0, &je);
    if (!m) fail_msg("not JSON: %s (%s)", text, je.text);
    assert_string_equal(json_string_value(json_object_get(m, "topic")), "Orders");
    assert_int_equal(json_integer_value(json_object_get(m, "queueId")), 3);
    assert_int_equal(json_integer_value(json_object_get(m, "queueOffset")), 41);
    assert_int_equal(json_integer_value(json_object_get(m, "commitLogOffset")), 4096);
    assert_string_equal(json_string_value(json_object_get(m, "tags")), "TagA");
    json_t *keys = json_object_get(m, "keys");
    assert_int_equal(json_array_size(keys), 2);
    assert_string_equal(json_string_value(json_array_get(keys, 1)), "k2");
    json_t *p = json_object_get(m, "properties");
    assert_int_equal(json_object_size(p), 1); /* TAGS and KEYS are not listed */
    assert_string_equal(json_string_value(json_object_get(p, "color")), "red \"x\"");
    assert_string_equal(json_string_value(json_object_get(m, "body")), "hello\n");
    assert_string_equal(json_string_value(json_object_get(m, "bodyEncoding")), "utf8");
    assert_int_equal(json_integer_value(json_object_get(m, "storeSize")), 200);
    assert_int_equal(strlen(json_string_value(json_object_get(m, "msgId"))), MSG_ID_LEN);
    json_decref(m);
    free(text);

    /* a binary body (NUL, invalid UTF-8) goes as base64 */
    rec.body = mq_slice("\x00\xff\x10", 3);
    jw_init(&w, 16);
    jw_message(&w, &rec);
    text = take_str(&w);
    m = json_loads(text, 0, &je);
    assert_non_null(m);
    assert_string_equal(json_string_value(json_object_get(m, "body")), "AP8Q");
    assert_string_equal(json_string_value(json_object_get(m, "bodyEncoding")), "base64");
    json_decref(m);
    free(text);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_strings_escape_like_jansson),
        cmocka_unit_test(test_integers),
        cmocka_unit_test(test_utf8_validation_agrees_with_jansson),
        cmocka_unit_test(test_message_object),
    };
    return cmocka_run_group_tests_name("jw", tests, NULL, NULL);
}
