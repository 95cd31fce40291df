/*
 * test_msg.c - the message model (core/msg.c): name rules, the property
 * codec, offset message ids, unique ids and tag expressions.  No files.
 */
#include "testutil.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "msg.h"
#include "mq.h"
#include "store.h"

#define S(lit) mq_slice(lit, sizeof(lit) - 1)

static bool name_ok(const char *s) { return msg_name_valid(s, strlen(s)); }
static bool reserved(const char *s) { return msg_name_reserved(s, strlen(s)); }

static bool slice_is(MqSlice s, const char *want) {
    return s.len == strlen(want) && memcmp(s.ptr, want, s.len) == 0;
}

/* ---- names ---------------------------------------------------------------*/

static void test_msg_name_valid_accepts_charset_up_to_127_bytes(void **state) {
    (void)state;
    assert_true(name_ok("a"));
    assert_true(name_ok("Orders_2024-eu"));
    assert_true(name_ok("-_-"));
    assert_true(name_ok("0123456789"));
    assert_true(name_ok("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"));
    char buf[MSG_NAME_MAX + 2];
    memset(buf, 'x', sizeof(buf));
    assert_true(msg_name_valid(buf, 127));
    assert_false(msg_name_valid(buf, 128));
    /* only 'len' bytes count: a longer buffer is fine */
    assert_true(msg_name_valid("topic.extra", 5));
}

static void test_msg_name_valid_rejects_empty_and_bad_bytes(void **state) {
    (void)state;
    assert_false(msg_name_valid(NULL, 0));
    assert_false(msg_name_valid(NULL, 3));
    assert_false(msg_name_valid("", 0));
    assert_false(name_ok("a.b"));
    assert_false(name_ok("%RETRY%cg"));
    assert_false(name_ok("a b"));
    assert_false(name_ok("a/b"));
    assert_false(name_ok("a|b"));
    assert_false(name_ok("t\xc3\xb3pico")); /* UTF-8 'ó' */
    assert_false(name_ok("\xff"));
    assert_false(msg_name_valid("ab\0c", 4)); /* embedded NUL */
    assert_false(name_ok("tab\t"));
}

static void test_msg_name_reserved_prefixes_and_names(void **state) {
    (void)state;
    assert_true(reserved("%RETRY%cg"));
    assert_true(reserved("%RETRY%"));
    assert_true(reserved("%DLQ%cg"));
    assert_true(reserved("RMQ_SYS_TRANS_HALF_TOPIC"));
    assert_true(reserved("rmq_sys_anything"));
    assert_true(reserved("Rmq_Sys_x"));
    assert_true(reserved("SCHEDULE_TOPIC_XXXX"));
    assert_true(reserved("TBW102"));
    assert_true(reserved("TRANS_CHECK_MAX_TIME_TOPIC"));

    assert_false(reserved("RMQ_SYS")); /* prefix incomplete */
    assert_false(reserved("RMQ-SYS-x"));
    assert_false(reserved("SCHEDULE_TOPIC_XXXX2"));
    assert_false(reserved("schedule_topic_xxxx")); /* exact names are case-sensitive */
    assert_false(reserved("TBW1020"));
    assert_false(reserved("xRMQ_SYS_"));
    assert_false(reserved("%retry%cg"));
    assert_false(reserved("orders"));
    assert_false(reserved(""));
    assert_false(msg_name_reserved(NULL, 0));
    /* only 'len' bytes count */
    assert_false(msg_name_reserved("TBW102", 5));
}

static void test_msg_name_problem_explains_each_failure(void **state) {
    (void)state;
    assert_null(msg_name_problem("orders", 6));
    assert_string_equal(msg_name_problem("", 0), "name is empty");
    assert_string_equal(msg_name_problem(NULL, 0), "name is empty");
    char buf[200];
    memset(buf, 'a', sizeof(buf));
    assert_null(msg_name_problem(buf, 127));
    assert_string_equal(msg_name_problem(buf, 128), "name is longer than 127 bytes");
    const char *bad = msg_name_problem("a.b", 3);
    assert_non_null(bad);
    assert_non_null(strstr(bad, "only"));
    assert_string_equal(msg_name_problem("rmq_sys_x", 9), "name is reserved for the broker");
    assert_string_equal(msg_name_problem("TBW102", 6), "name is reserved for the broker");
    /* syntax is reported before reservation */
    assert_string_equal(msg_name_problem("%DLQ%cg", 7), bad);
}

static void test_msg_system_name_valid_allows_retry_and_dlq(void **state) {
    (void)state;
    assert_true(msg_system_name_valid("%RETRY%cg", 9));
    assert_true(msg_system_name_valid("%DLQ%cg-1", 9));
    assert_true(msg_system_name_valid("RMQ_SYS_TRANS_HALF_TOPIC", 24));
    assert_true(msg_system_name_valid("a|b", 3));
    char buf[300];
    memset(buf, 'z', sizeof(buf));
    assert_true(msg_system_name_valid(buf, 255));
    assert_false(msg_system_name_valid(buf, 256));
    assert_false(msg_system_name_valid("", 0));
    assert_false(msg_system_name_valid(NULL, 1));
    assert_false(msg_system_name_valid("a.b", 3));
    assert_false(msg_system_name_valid("%RETRY% cg", 10));
}

/* ---- properties ----------------------------------------------------------*/

static void test_msg_props_round_trip(void **state) {
    (void)state;
    static const uint8_t bin[] = {0x00, 0x03, 0xff, 0x7f};
    MsgProp in[] = {
        {S(MSG_PROP_TAGS), S("TagA")},
        {S(MSG_PROP_KEYS), S("order-1 order-2")},
        {S("empty"), S("")},
        {S("bin"), mq_slice(bin, sizeof(bin))},
        {S("caf\xc3\xa9"), S("\xe2\x82\xac 5")},
    };
    size_t n_in = sizeof(in) / sizeof(in[0]);
    uint8_t buf[256];
    size_t len = 0;
    assert_int_equal(msg_props_encode(in, n_in, buf, sizeof(buf), &len), MQ_OK);
    size_t need = 0;
    assert_int_equal(msg_props_encode(in, n_in, NULL, 0, &need), MQ_OK);
    assert_int_equal(need, len);
    static const char head[] = "TAGS\x01TagA\x02KEYS\x01order-1 order-2\x02"
                               "empty\x01\x02";
    assert_memory_equal(buf, head, sizeof(head) - 1);
    assert_int_equal(buf[len - 1], 0x02);

    MsgProp out[8];
    size_t n = 0;
    assert_int_equal(msg_props_decode(mq_slice(buf, len), out, 8, &n), MQ_OK);
    assert_int_equal(n, n_in);
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(out[i].name.len, in[i].name.len);
        assert_memory_equal(out[i].name.ptr, in[i].name.ptr, in[i].name.len);
        assert_int_equal(out[i].value.len, in[i].value.len);
        if (in[i].value.len)
            assert_memory_equal(out[i].value.ptr, in[i].value.ptr, in[i].value.len);
        /* slices point into the input */
        assert_true((const uint8_t *)out[i].name.ptr >= buf &&
                    (const uint8_t *)out[i].name.ptr < buf + len);
    }
    /* count only */
    n = 99;
    assert_int_equal(msg_props_decode(mq_slice(buf, len), NULL, 0, &n), MQ_OK);
    assert_int_equal(n, n_in);
    /* no pairs */
    assert_int_equal(msg_props_encode(NULL, 0, buf, sizeof(buf), &len), MQ_OK);
    assert_int_equal(len, 0);
    assert_int_equal(msg_props_decode(mq_slice(NULL, 0), out, 8, &n), MQ_OK);
    assert_int_equal(n, 0);
}

static void test_msg_props_encode_rejects_separators_and_empty_names(void **state) {
    (void)state;
    uint8_t buf[64];
    size_t len = 77;
    MsgProp empty_name[] = {{S(""), S("v")}};
    assert_int_equal(msg_props_encode(empty_name, 1, buf, sizeof(buf), &len), MQ_ERR_INVAL);
    MsgProp sep_in_name[] = {{S("a\x01"), S("v")}};
    assert_int_equal(msg_props_encode(sep_in_name, 1, buf, sizeof(buf), &len), MQ_ERR_INVAL);
    MsgProp pair_in_name[] = {{S("a\x02"), S("v")}};
    assert_int_equal(msg_props_encode(pair_in_name, 1, buf, sizeof(buf), &len), MQ_ERR_INVAL);
    MsgProp sep_in_value[] = {{S("ok"), S("v")}, {S("a"), S("x\x01y")}};
    assert_int_equal(msg_props_encode(sep_in_value, 2, buf, sizeof(buf), &len), MQ_ERR_INVAL);
    MsgProp pair_in_value[] = {{S("a"), S("x\x02")}};
    assert_int_equal(msg_props_encode(pair_in_value, 1, buf, sizeof(buf), &len), MQ_ERR_INVAL);
    assert_int_equal(msg_props_encode(pair_in_value, 1, buf, sizeof(buf), NULL), MQ_ERR_INVAL);
    assert_int_equal(msg_props_encode(NULL, 1, buf, sizeof(buf), &len), MQ_ERR_INVAL);
    assert_int_equal(len, 77); /* untouched on error */
}

static void test_msg_props_encode_full_at_cap_and_props_max(void **state) {
    (void)state;
    MsgProp p[] = {{S("k"), S("value")}}; /* 1 + 1 + 5 + 1 = 8 bytes */
    uint8_t buf[8];
    size_t len = 0;
    assert_int_equal(msg_props_encode(p, 1, buf, 8, &len), MQ_OK);
    assert_int_equal(len, 8);
    assert_int_equal(msg_props_encode(p, 1, buf, 7, &len), MQ_ERR_FULL);

    size_t big_len = CL_PROPS_MAX + 10;
    uint8_t *big = malloc(big_len);
    char *val = malloc(big_len);
    assert_non_null(big);
    assert_non_null(val);
    memset(val, 'v', big_len);
    MsgProp edge[] = {{S("k"), mq_slice(val, CL_PROPS_MAX - 3)}}; /* exactly CL_PROPS_MAX */
    assert_int_equal(msg_props_encode(edge, 1, big, big_len, &len), MQ_OK);
    assert_int_equal(len, CL_PROPS_MAX);
    edge[0].value.len++;
    assert_int_equal(msg_props_encode(edge, 1, big, big_len, &len), MQ_ERR_FULL);
    assert_int_equal(msg_props_encode(edge, 1, NULL, 0, &len), MQ_ERR_FULL);
    /* a huge pair followed by an invalid one: INVAL wins */
    MsgProp both[] = {{S("k"), mq_slice(val, big_len)}, {S(""), S("x")}};
    assert_int_equal(msg_props_encode(both, 2, big, big_len, &len), MQ_ERR_INVAL);
    free(val);
    free(big);
}

static void test_msg_props_decode_rejects_malformed(void **state) {
    (void)state;
    MsgProp out[4];
    size_t n = 0;
    assert_int_equal(msg_props_decode(S("name"), out, 4, &n), MQ_ERR_CORRUPT);
    assert_int_equal(msg_props_decode(S("a\x01v\x02name\x02"), out, 4, &n), MQ_ERR_CORRUPT);
    assert_int_equal(msg_props_decode(S("\x01v\x02"), out, 4, &n), MQ_ERR_CORRUPT);
    assert_int_equal(msg_props_decode(S("a\x01" "b\x01" "c\x02"), out, 4, &n), MQ_ERR_CORRUPT);
    assert_int_equal(msg_props_decode(S("a\x01" "b\x02\x02"), out, 4, &n), MQ_ERR_CORRUPT);
    assert_int_equal(msg_props_decode(S("\x02"), out, 4, &n), MQ_ERR_CORRUPT);
    assert_int_equal(msg_props_decode(S("a\x01"), NULL, 0, NULL), MQ_ERR_INVAL);

    /* the last 0x02 may be missing, as RocketMQ writes and reads it */
    assert_int_equal(msg_props_decode(S("a\x01" "1\x02" "b\x01" "2"), out, 4, &n), MQ_OK);
    assert_int_equal(n, 2);
    assert_true(slice_is(out[1].name, "b"));
    assert_true(slice_is(out[1].value, "2"));
    assert_int_equal(msg_props_decode(S("a\x01"), out, 4, &n), MQ_OK);
    assert_int_equal(n, 1);
    assert_int_equal(out[0].value.len, 0);

    /* more pairs than room */
    assert_int_equal(msg_props_decode(S("a\x01" "1\x02" "b\x01" "2\x02" "c\x01" "3\x02"),
                                      out, 2, &n),
                     MQ_ERR_FULL);
}

static void test_msg_prop_get_and_reserved_names(void **state) {
    (void)state;
    MsgProp in[] = {{S("TAGS"), S("TagA")}, {S("color"), S("red")}, {S("empty"), S("")}};
    uint8_t buf[64];
    size_t len = 0;
    assert_int_equal(msg_props_encode(in, 3, buf, sizeof(buf), &len), MQ_OK);
    MqSlice v;
    MqSlice props = mq_slice(buf, len);
    assert_true(msg_prop_get(props, MSG_PROP_TAGS, &v));
    assert_true(slice_is(v, "TagA"));
    assert_true(msg_prop_get(props, "color", &v));
    assert_true(slice_is(v, "red"));
    assert_true(msg_prop_get(props, "empty", &v));
    assert_int_equal(v.len, 0);
    assert_false(msg_prop_get(props, "colo", &v));
    assert_false(msg_prop_get(props, "TAG", &v));
    assert_false(msg_prop_get(mq_slice(NULL, 0), "TAGS", &v));
    assert_false(msg_prop_get(props, NULL, &v));

    const char *sys[] = {"TAGS", "KEYS", "UNIQ_KEY", "__SHARDINGKEY", "DELAY",
                         "TIMER_DELIVER_MS", "REAL_TOPIC", "REAL_QID", "RETRY_TOPIC",
                         "ORIGIN_MESSAGE_ID", "RECONSUME_TIME", "MAX_RECONSUME_TIMES",
                         "TRAN_MSG", "PGROUP"};
    for (size_t i = 0; i < sizeof(sys) / sizeof(sys[0]); i++)
        assert_true(msg_prop_name_reserved(mq_slice(sys[i], strlen(sys[i]))));
    assert_false(msg_prop_name_reserved(S("tags")));
    assert_false(msg_prop_name_reserved(S("TAGS2")));
    assert_false(msg_prop_name_reserved(S("color")));
    assert_false(msg_prop_name_reserved(S("")));
    assert_true(msg_prop_name_reserved(mq_slice("DELAYED", 5)));
}

/* ---- offset message id ---------------------------------------------------*/

static void host_of(uint8_t host[8], uint8_t a, uint8_t b, uint8_t c, uint8_t d,
                    uint32_t port) {
    host[0] = a;
    host[1] = b;
    host[2] = c;
    host[3] = d;
    mq_put_u32(host + 4, port); /* the record layout: little-endian */
}

static void test_msg_id_known_vector_and_round_trip(void **state) {
    (void)state;
    uint8_t host[8];
    host_of(host, 127, 0, 0, 1, 8080);
    char id[33];
    msg_id_encode(host, 4096, id);
    assert_string_equal(id, "7F00000100001F900000000000001000");

    uint8_t back[8];
    uint64_t off = 0;
    assert_int_equal(msg_id_decode(id, strlen(id), back, &off), MQ_OK);
    assert_memory_equal(back, host, 8);
    assert_true(off == 4096);

    host_of(host, 10, 200, 3, 254, 65535);
    msg_id_encode(host, UINT64_MAX - 1, id);
    assert_string_equal(id, "0AC803FE0000FFFFFFFFFFFFFFFFFFFE");
    assert_int_equal(msg_id_decode(id, 32, back, &off), MQ_OK);
    assert_memory_equal(back, host, 8);
    assert_true(off == UINT64_MAX - 1);

    /* lower case is accepted */
    assert_int_equal(msg_id_decode("7f00000100001f900000000000001000", 32, back, &off), MQ_OK);
    host_of(host, 127, 0, 0, 1, 8080);
    assert_memory_equal(back, host, 8);
    assert_true(off == 4096);
}

static void test_msg_id_decode_rejects_bad_ids(void **state) {
    (void)state;
    uint8_t host[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    uint64_t off = 42;
    const char *good = "7F00000100001F900000000000001000";
    assert_int_equal(msg_id_decode(good, 31, host, &off), MQ_ERR_INVAL);
    assert_int_equal(msg_id_decode("7F00000100001F9000000000000010000", 33, host, &off),
                     MQ_ERR_INVAL);
    assert_int_equal(msg_id_decode("", 0, host, &off), MQ_ERR_INVAL);
    assert_int_equal(msg_id_decode("7F00000100001F90000000000000100G", 32, host, &off),
                     MQ_ERR_INVAL);
    assert_int_equal(msg_id_decode("7F00000100001F90 000000000001000", 32, host, &off),
                     MQ_ERR_INVAL);
    assert_int_equal(msg_id_decode("-F00000100001F900000000000001000", 32, host, &off),
                     MQ_ERR_INVAL);
    char nul[33];
    memcpy(nul, good, 33);
    nul[5] = '\0';
    assert_int_equal(msg_id_decode(nul, 32, host, &off), MQ_ERR_INVAL);
    assert_int_equal(msg_id_decode(NULL, 32, host, &off), MQ_ERR_INVAL);
    assert_int_equal(msg_id_decode(good, 32, NULL, &off), MQ_ERR_INVAL);
    assert_int_equal(msg_id_decode(good, 32, host, NULL), MQ_ERR_INVAL);
    /* outputs untouched on error */
    static const uint8_t was[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    assert_memory_equal(host, was, 8);
    assert_true(off == 42);
}

/* ---- unique id -----------------------------------------------------------*/

static uint64_t hex_field(const char *id, size_t from, size_t digits) {
    char buf[17];
    memcpy(buf, id + from, digits);
    buf[digits] = '\0';
    return strtoull(buf, NULL, 16);
}

/* ms since 00:00 UTC on the first of the month of 'ms', via gmtime_r. */
static int64_t month_offset_ms(int64_t ms) {
    time_t secs = (time_t)(ms / 1000);
    struct tm tm;
    assert_non_null(gmtime_r(&secs, &tm));
    return ((int64_t)(tm.tm_mday - 1) * 86400 + tm.tm_hour * 3600 + tm.tm_min * 60 +
            tm.tm_sec) * 1000 + ms % 1000;
}

static void test_msg_uniq_id_layout(void **state) {
    (void)state;
    static const uint8_t ip[4] = {192, 168, 1, 20};
    char a[33];
    char b[33];
    int64_t before = month_offset_ms(mq_now_ms());
    msg_uniq_id(ip, a);
    msg_uniq_id(ip, b);
    int64_t after = month_offset_ms(mq_now_ms());
    assert_int_equal(strlen(a), 32);
    for (size_t i = 0; i < 32; i++)
        assert_non_null(strchr("0123456789ABCDEF", a[i]));
    assert_memory_equal(a, "C0A80114", 8);
    assert_int_equal(hex_field(a, 8, 4), (uint64_t)getpid() & 0xFFFF);
    assert_memory_equal(a, b, 20); /* ip, pid and the process's random value */
    assert_string_not_equal(a, b);
    if (after >= before) { /* not across a month boundary */
        int64_t t = (int64_t)hex_field(a, 20, 8);
        assert_true(t >= before);
        assert_true(t <= after + 1000); /* the id clock may run a little ahead */
    }
    /* the id clock (time, counter) grows */
    uint64_t ca = hex_field(a, 20, 12);
    uint64_t cb = hex_field(b, 20, 12);
    assert_true(cb > ca);

    char z[33];
    msg_uniq_id(NULL, z);
    assert_memory_equal(z, "00000000", 8);
}

#define UNIQ_THREADS 4
#define UNIQ_PER_THREAD 250000

typedef struct IdBin {
    uint64_t hi; /* first 8 bytes */
    uint64_t lo; /* last 8 bytes */
} IdBin;

typedef struct UniqArg {
    IdBin *out;
    pthread_barrier_t *start;
} UniqArg;

static void *uniq_worker(void *p) {
    UniqArg *a = p;
    static const uint8_t ip[4] = {10, 0, 0, 1};
    pthread_barrier_wait(a->start);
    char id[33];
    for (size_t i = 0; i < UNIQ_PER_THREAD; i++) {
        msg_uniq_id(ip, id);
        a->out[i].hi = hex_field(id, 0, 16);
        a->out[i].lo = hex_field(id, 16, 16);
    }
    return NULL;
}

static int cmp_id(const void *x, const void *y) {
    const IdBin *a = x;
    const IdBin *b = y;
    if (a->hi != b->hi) return a->hi < b->hi ? -1 : 1;
    if (a->lo != b->lo) return a->lo < b->lo ? -1 : 1;
    return 0;
}

static void test_msg_uniq_id_unique_across_threads(void **state) {
    (void)state;
    size_t total = (size_t)UNIQ_THREADS * UNIQ_PER_THREAD;
    IdBin *all = calloc(total, sizeof(*all));
    assert_non_null(all);
    pthread_barrier_t start;
    pthread_barrier_init(&start, NULL, UNIQ_THREADS);
    pthread_t th[UNIQ_THREADS];
    UniqArg args[UNIQ_THREADS];
    for (int i = 0; i < UNIQ_THREADS; i++) {
        args[i] = (UniqArg){.out = all + (size_t)i * UNIQ_PER_THREAD, .start = &start};
        assert_int_equal(pthread_create(&th[i], NULL, uniq_worker, &args[i]), 0);
    }
    for (int i = 0; i < UNIQ_THREADS; i++) pthread_join(th[i], NULL);
    pthread_barrier_destroy(&start);
    /* each thread sees its ids in increasing (time, counter) order: the
     * last 8 bytes are random (low half), time and counter */
    for (int i = 0; i < UNIQ_THREADS; i++) {
        const IdBin *mine = args[i].out;
        for (size_t j = 1; j < UNIQ_PER_THREAD; j++) assert_true(mine[j].lo > mine[j - 1].lo);
    }
    qsort(all, total, sizeof(*all), cmp_id);
    size_t dups = 0;
    for (size_t i = 1; i < total; i++)
        if (cmp_id(&all[i - 1], &all[i]) == 0) dups++;
    assert_int_equal(dups, 0);
    free(all);
}

/* ---- tags ----------------------------------------------------------------*/

static int parse(const char *expr, MqSlice *tags, size_t cap, size_t *n, bool *all) {
    return msg_tag_expr_parse(expr, strlen(expr), tags, cap, n, all);
}

static void test_msg_tag_expr_parse_star_single_and_list(void **state) {
    (void)state;
    MqSlice tags[8];
    size_t n = 99;
    bool all = false;
    assert_int_equal(parse("*", tags, 8, &n, &all), MQ_OK);
    assert_true(all);
    assert_int_equal(n, 0);
    all = false;
    assert_int_equal(parse("  *  ", tags, 8, &n, &all), MQ_OK);
    assert_true(all);
    all = false;
    assert_int_equal(parse("", tags, 8, &n, &all), MQ_OK); /* RocketMQ: empty = all */
    assert_true(all);
    all = false;
    assert_int_equal(msg_tag_expr_parse(NULL, 0, NULL, 0, &n, &all), MQ_OK);
    assert_true(all);

    assert_int_equal(parse("TagA", tags, 8, &n, &all), MQ_OK);
    assert_false(all);
    assert_int_equal(n, 1);
    assert_true(slice_is(tags[0], "TagA"));

    assert_int_equal(parse(" A || B ||C", tags, 8, &n, &all), MQ_OK);
    assert_false(all);
    assert_int_equal(n, 3);
    assert_true(slice_is(tags[0], "A"));
    assert_true(slice_is(tags[1], "B"));
    assert_true(slice_is(tags[2], "C"));

    assert_int_equal(parse("A||B", tags, 8, &n, &all), MQ_OK);
    assert_int_equal(n, 2);
    assert_true(slice_is(tags[1], "B"));

    /* blanks inside a tag stay; duplicates collapse */
    assert_int_equal(parse("Tag A || B || Tag A", tags, 8, &n, &all), MQ_OK);
    assert_int_equal(n, 2);
    assert_true(slice_is(tags[0], "Tag A"));
    assert_true(slice_is(tags[1], "B"));

    /* matching */
    assert_true(msg_tag_expr_match(tags, n, false, S("B")));
    assert_false(msg_tag_expr_match(tags, n, false, S("C")));
    assert_false(msg_tag_expr_match(tags, n, false, S("")));
    assert_true(msg_tag_expr_match(NULL, 0, true, S("")));
}

static void test_msg_tag_expr_parse_rejects_empty_parts(void **state) {
    (void)state;
    MqSlice tags[8];
    size_t n = 0;
    bool all = false;
    assert_int_equal(parse("A || ||", tags, 8, &n, &all), MQ_ERR_INVAL);
    assert_int_equal(parse("A || || B", tags, 8, &n, &all), MQ_ERR_INVAL);
    assert_int_equal(parse("A ||", tags, 8, &n, &all), MQ_ERR_INVAL);
    assert_int_equal(parse("|| A", tags, 8, &n, &all), MQ_ERR_INVAL);
    assert_int_equal(parse("||", tags, 8, &n, &all), MQ_ERR_INVAL);
    assert_int_equal(parse("A |||| B", tags, 8, &n, &all), MQ_ERR_INVAL);
    assert_int_equal(parse("A ||| B", tags, 8, &n, &all), MQ_ERR_INVAL);
    assert_int_equal(parse("A | B", tags, 8, &n, &all), MQ_ERR_INVAL);
    assert_int_equal(parse("A || *", tags, 8, &n, &all), MQ_ERR_INVAL);
    assert_int_equal(parse("A", tags, 8, NULL, &all), MQ_ERR_INVAL);
    assert_int_equal(parse("A", tags, 8, &n, NULL), MQ_ERR_INVAL);
    assert_int_equal(msg_tag_expr_parse(NULL, 3, tags, 8, &n, &all), MQ_ERR_INVAL);
}

static void test_msg_tag_expr_parse_full_past_cap(void **state) {
    (void)state;
    MqSlice tags[2];
    size_t n = 0;
    bool all = true;
    assert_int_equal(parse("A || B", tags, 2, &n, &all), MQ_OK);
    assert_int_equal(n, 2);
    assert_false(all);
    assert_int_equal(parse("A || B || C", tags, 2, &n, &all), MQ_ERR_FULL);
    assert_int_equal(parse("A || B || A || B", tags, 2, &n, &all), MQ_OK); /* dups */
    assert_int_equal(n, 2);
    assert_int_equal(parse("A", NULL, 0, &n, &all), MQ_ERR_FULL);
}

static void test_msg_tag_hash_is_the_store_hash(void **state) {
    (void)state;
    assert_true(msg_tag_hash(S("TagA")) == store_tag_hash(S("TagA")));
    assert_true(msg_tag_hash(S("TagA")) == mq_hash64("TagA", 4));
    assert_true(msg_tag_hash(S("TagA")) != msg_tag_hash(S("TagB")));
    assert_true(msg_tag_hash(S("")) == 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_msg_name_valid_accepts_charset_up_to_127_bytes),
        cmocka_unit_test(test_msg_name_valid_rejects_empty_and_bad_bytes),
        cmocka_unit_test(test_msg_name_reserved_prefixes_and_names),
        cmocka_unit_test(test_msg_name_problem_explains_each_failure),
        cmocka_unit_test(test_msg_system_name_valid_allows_retry_and_dlq),
        cmocka_unit_test(test_msg_props_round_trip),
        cmocka_unit_test(test_msg_props_encode_rejects_separators_and_empty_names),
        cmocka_unit_test(test_msg_props_encode_full_at_cap_and_props_max),
        cmocka_unit_test(test_msg_props_decode_rejects_malformed),
        cmocka_unit_test(test_msg_prop_get_and_reserved_names),
        cmocka_unit_test(test_msg_id_known_vector_and_round_trip),
        cmocka_unit_test(test_msg_id_decode_rejects_bad_ids),
        cmocka_unit_test(test_msg_uniq_id_layout),
        cmocka_unit_test(test_msg_uniq_id_unique_across_threads),
        cmocka_unit_test(test_msg_tag_expr_parse_star_single_and_list),
        cmocka_unit_test(test_msg_tag_expr_parse_rejects_empty_parts),
        cmocka_unit_test(test_msg_tag_expr_parse_full_past_cap),
        cmocka_unit_test(test_msg_tag_hash_is_the_store_hash),
    };
    return cmocka_run_group_tests_name("msg", tests, NULL, NULL);
}
