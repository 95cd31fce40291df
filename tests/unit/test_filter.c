/*
 * test_filter.c - compiled subscription filters (core/filter.c): TAG
 * filters (all, one, several, tag hashes, error positions), SQL92 filters
 * over real encoded property blocks and the TAGS property, reference
 * counts, and the filter cache (hits, LRU eviction, errors not cached, two
 * threads sharing it).  No files.
 */
#include "testutil.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "filter.h"
#include "msg.h"
#include "mq.h"

#define S(lit) mq_slice(lit, sizeof(lit) - 1)

/* A record whose props slice points at its own encoded properties. */
typedef struct TestRec {
    uint8_t buf[1024];
    ClRecord rec;
} TestRec;

/* rec_make encodes the 'n' name/value pairs of 'kv' into 'r'. */
static void rec_make(TestRec *r, const char *const *kv, size_t n) {
    MsgProp props[16];
    assert_true(n <= 16);
    for (size_t i = 0; i < n; i++) {
        props[i].name = mq_slice(kv[2 * i], strlen(kv[2 * i]));
        props[i].value = mq_slice(kv[2 * i + 1], strlen(kv[2 * i + 1]));
    }
    size_t len = 0;
    assert_int_equal(msg_props_encode(props, n, r->buf, sizeof(r->buf), &len), MQ_OK);
    memset(&r->rec, 0, sizeof(r->rec));
    r->rec.topic = S("T");
    r->rec.body = S("body");
    r->rec.props = mq_slice(r->buf, len);
}

#define REC(r, ...)                                                                                \
    do {                                                                                           \
        static const char *const kv_[] = {__VA_ARGS__};                                            \
        rec_make((r), kv_, sizeof(kv_) / sizeof(kv_[0]) / 2);                                      \
    } while (0)

static Filter *compile_ok(FilterType type, const char *expr) {
    Filter *f = NULL;
    Sql92Error err = {0};
    int rc = filter_compile(type, expr, strlen(expr), &f, &err);
    if (rc != MQ_OK) fail_msg("'%s' at %zu: %s", expr, err.pos, err.msg);
    assert_non_null(f);
    return f;
}

static void compile_bad(FilterType type, const char *expr, size_t pos, const char *msg) {
    Filter *f = (Filter *)0x1;
    Sql92Error err = {.pos = 9999, .msg = "unset"};
    assert_int_equal(filter_compile(type, expr, strlen(expr), &f, &err), MQ_ERR_INVAL);
    assert_ptr_equal(f, (Filter *)0x1);
    if (err.pos != pos || strcmp(err.msg, msg) != 0)
        fail_msg("'%s': got %zu '%s', want %zu '%s'", expr, err.pos, err.msg, pos, msg);
}

/* ---- type names ----------------------------------------------------------*/

static void test_filter_type_parse_names(void **state) {
    (void)state;
    FilterType t = FILTER_SQL92;
    assert_true(filter_type_parse("TAG", &t));
    assert_int_equal(t, FILTER_TAG);
    assert_true(filter_type_parse("sql92", &t));
    assert_int_equal(t, FILTER_SQL92);
    assert_true(filter_type_parse("Tag", &t));
    assert_int_equal(t, FILTER_TAG);
    assert_false(filter_type_parse("SQL", &t));
    assert_false(filter_type_parse("", &t));
    assert_false(filter_type_parse("TAG ", &t));
    assert_false(filter_type_parse(NULL, &t));
    assert_false(filter_type_parse("TAG", NULL));
    assert_int_equal(t, FILTER_TAG);
}

/* ---- TAG -----------------------------------------------------------------*/

static void test_filter_tag_star_and_empty_match_all(void **state) {
    (void)state;
    static const char *const exprs[] = {"*", "", "  ", " * "};
    TestRec with;
    TestRec without;
    REC(&with, "TAGS", "TagA");
    REC(&without, "KEYS", "k1");
    for (size_t i = 0; i < sizeof(exprs) / sizeof(exprs[0]); i++) {
        Filter *f = compile_ok(FILTER_TAG, exprs[i]);
        assert_true(filter_matches_all(f));
        size_t n = 99;
        assert_null(filter_tag_hashes(f, &n));
        assert_int_equal(n, 0);
        assert_true(filter_match(f, &with.rec));
        assert_true(filter_match(f, &without.rec));
        assert_int_equal(filter_type(f), FILTER_TAG);
        assert_string_equal(filter_expression(f), exprs[i]);
        filter_unref(f);
    }
    /* NULL with length 0 is the empty expression */
    Filter *f = NULL;
    assert_int_equal(filter_compile(FILTER_TAG, NULL, 0, &f, NULL), MQ_OK);
    assert_true(filter_matches_all(f));
    assert_string_equal(filter_expression(f), "");
    filter_unref(f);
}

static void test_filter_tag_one_and_several(void **state) {
    (void)state;
    TestRec a;
    TestRec b;
    TestRec c;
    TestRec none;
    TestRec lower;
    REC(&a, "KEYS", "k", "TAGS", "TagA", "UNIQ_KEY", "u");
    REC(&b, "TAGS", "TagB");
    REC(&c, "TAGS", "TagC");
    REC(&none, "KEYS", "k");
    REC(&lower, "TAGS", "taga");

    Filter *one = compile_ok(FILTER_TAG, "TagA");
    assert_false(filter_matches_all(one));
    assert_true(filter_match(one, &a.rec));
    assert_false(filter_match(one, &b.rec));
    assert_false(filter_match(one, &none.rec));
    assert_false(filter_match(one, &lower.rec)); /* tags are case-sensitive */
    filter_unref(one);

    Filter *two = compile_ok(FILTER_TAG, " TagA ||TagB|| TagA ");
    assert_true(filter_match(two, &a.rec));
    assert_true(filter_match(two, &b.rec));
    assert_false(filter_match(two, &c.rec));
    assert_false(filter_match(two, &none.rec));
    assert_string_equal(filter_expression(two), " TagA ||TagB|| TagA ");
    filter_unref(two);
}

static void test_filter_tag_hashes_are_the_consume_queue_hashes(void **state) {
    (void)state;
    Filter *f = compile_ok(FILTER_TAG, "TagA || TagB || TagA");
    size_t n = 0;
    const uint64_t *h = filter_tag_hashes(f, &n);
    assert_non_null(h);
    assert_int_equal(n, 2); /* distinct tags only */
    assert_true(h[0] == msg_tag_hash(S("TagA")));
    assert_true(h[1] == msg_tag_hash(S("TagB")));
    filter_unref(f);

    Filter *sql = compile_ok(FILTER_SQL92, "TAGS = 'TagA'");
    n = 99;
    assert_null(filter_tag_hashes(sql, &n));
    assert_int_equal(n, 0);
    assert_false(filter_matches_all(sql));
    filter_unref(sql);
}

static void test_filter_tag_keeps_its_own_copy(void **state) {
    (void)state;
    char expr[] = "TagA || TagB";
    Filter *f = NULL;
    assert_int_equal(filter_compile(FILTER_TAG, expr, strlen(expr), &f, NULL), MQ_OK);
    memset(expr, 'x', strlen(expr));
    TestRec b;
    REC(&b, "TAGS", "TagB");
    assert_true(filter_match(f, &b.rec));
    assert_string_equal(filter_expression(f), "TagA || TagB");
    filter_unref(f);
}

static void test_filter_tag_errors_have_positions(void **state) {
    (void)state;
    compile_bad(FILTER_TAG, "A || || B", 5, "empty tag before '||'");
    compile_bad(FILTER_TAG, "|| A", 0, "empty tag before '||'");
    compile_bad(FILTER_TAG, "A ||", 2, "empty tag after '||'");
    compile_bad(FILTER_TAG, "A ||  ", 2, "empty tag after '||'");
    compile_bad(FILTER_TAG, "A | B", 2, "single '|' in a tag, tags are joined by '||'");
    compile_bad(FILTER_TAG, "A|||B", 3, "single '|' in a tag, tags are joined by '||'");
    compile_bad(FILTER_TAG, "A || *", 5, "'*' cannot be combined with tags");
    /* 65 distinct tags: the 65th is refused; repeats do not count */
    char e[1024];
    size_t len = 0;
    for (int i = 0; i < FILTER_TAGS_MAX; i++) len += (size_t)sprintf(e + len, "t%d||", i);
    len += (size_t)sprintf(e + len, "t0||t1");
    Filter *f = compile_ok(FILTER_TAG, e);
    size_t n = 0;
    assert_non_null(filter_tag_hashes(f, &n));
    assert_int_equal(n, FILTER_TAGS_MAX);
    filter_unref(f);
    size_t at = len + 2;
    sprintf(e + len, "||x64");
    compile_bad(FILTER_TAG, e, at, "more than 64 tags");
}

static void test_filter_compile_rejects_bad_arguments(void **state) {
    (void)state;
    Filter *f = NULL;
    Sql92Error err;
    assert_int_equal(filter_compile(FILTER_TAG, "A", 1, NULL, &err), MQ_ERR_INVAL);
    assert_int_equal(filter_compile(FILTER_SQL92, NULL, 2, &f, &err), MQ_ERR_INVAL);
    assert_int_equal(filter_compile((FilterType)7, "A", 1, &f, &err), MQ_ERR_INVAL);
    assert_string_equal(err.msg, "unknown filter type");
    assert_null(f);
    /* the length limit applies to TAG too */
    char *big = malloc(FILTER_EXPR_MAX + 1);
    assert_non_null(big);
    memset(big, 'a', FILTER_EXPR_MAX + 1);
    assert_int_equal(filter_compile(FILTER_TAG, big, FILTER_EXPR_MAX, &f, &err), MQ_OK);
    filter_unref(f);
    f = NULL;
    assert_int_equal(filter_compile(FILTER_TAG, big, FILTER_EXPR_MAX + 1, &f, &err), MQ_ERR_INVAL);
    assert_int_equal(err.pos, FILTER_EXPR_MAX);
    assert_string_equal(err.msg, "expression longer than 4096 bytes");
    assert_null(f);
    free(big);
}

/* ---- SQL92 ---------------------------------------------------------------*/

static void test_filter_sql92_over_encoded_properties(void **state) {
    (void)state;
    TestRec eu;
    TestRec us;
    TestRec bare;
    REC(&eu, "region", "eu", "price", "15.5", "TAGS", "TagA", "KEYS", "k1 k2", "UNIQ_KEY", "0A0B");
    REC(&us, "region", "us", "price", "9", "TAGS", "TagB");
    REC(&bare, "other", "x");
    Filter *f = compile_ok(FILTER_SQL92, "region = 'eu' AND price BETWEEN 10 AND 20");
    assert_int_equal(filter_type(f), FILTER_SQL92);
    assert_false(filter_matches_all(f));
    assert_true(filter_match(f, &eu.rec));
    assert_false(filter_match(f, &us.rec));
    assert_false(filter_match(f, &bare.rec));
    assert_string_equal(filter_expression(f), "region = 'eu' AND price BETWEEN 10 AND 20");
    filter_unref(f);

    f = compile_ok(FILTER_SQL92, "region IS NULL OR price < 10");
    assert_false(filter_match(f, &eu.rec));
    assert_true(filter_match(f, &us.rec));
    assert_true(filter_match(f, &bare.rec));
    filter_unref(f);

    f = compile_ok(FILTER_SQL92, "KEYS CONTAINS 'k2'");
    assert_true(filter_match(f, &eu.rec));
    assert_false(filter_match(f, &us.rec));
    filter_unref(f);
}

static void test_filter_sql92_sees_the_tag_as_TAGS(void **state) {
    (void)state;
    TestRec a;
    TestRec b;
    TestRec none;
    REC(&a, "TAGS", "TagA", "n", "1");
    REC(&b, "n", "1", "TAGS", "TagB");
    REC(&none, "n", "1");
    Filter *f = compile_ok(FILTER_SQL92, "TAGS IN ('TagA', 'TagC') AND n = 1");
    assert_true(filter_match(f, &a.rec));
    assert_false(filter_match(f, &b.rec));
    assert_false(filter_match(f, &none.rec));
    filter_unref(f);
    f = compile_ok(FILTER_SQL92, "TAGS IS NULL");
    assert_false(filter_match(f, &a.rec));
    assert_true(filter_match(f, &none.rec));
    filter_unref(f);
    f = compile_ok(FILTER_SQL92, "TAGS <> 'TagA'");
    assert_false(filter_match(f, &a.rec));
    assert_true(filter_match(f, &b.rec));
    assert_false(filter_match(f, &none.rec)); /* NULL <> x is UNKNOWN */
    filter_unref(f);
}

static void test_filter_sql92_errors_are_sql92_errors(void **state) {
    (void)state;
    compile_bad(FILTER_SQL92, "a == 1", 2, "unknown operator '=='");
    compile_bad(FILTER_SQL92, "", 0, "empty expression");
    compile_bad(FILTER_SQL92, "*", 0, "unexpected character '*'");
}

/* ---- references ----------------------------------------------------------*/

static void test_filter_refcount_frees_at_zero(void **state) {
    (void)state;
    /* run under ASan/LSan: a leak or a use after free fails the build */
    Filter *f = compile_ok(FILTER_SQL92, "a = 1");
    assert_ptr_equal(filter_ref(f), f);
    assert_ptr_equal(filter_ref(f), f);
    filter_unref(f);
    filter_unref(f);
    TestRec r;
    REC(&r, "a", "1");
    assert_true(filter_match(f, &r.rec)); /* one reference left */
    filter_unref(f);
    filter_unref(NULL);
}

/* ---- cache ---------------------------------------------------------------*/

static void test_filter_cache_hit_returns_the_same_filter(void **state) {
    (void)state;
    FilterCache *c = NULL;
    assert_int_equal(filter_cache_open(8, &c), MQ_OK);
    Filter *a = NULL;
    Filter *b = NULL;
    Filter *t = NULL;
    assert_int_equal(filter_cache_get(c, FILTER_SQL92, "a = 1", 5, &a, NULL), MQ_OK);
    assert_int_equal(filter_cache_get(c, FILTER_SQL92, "a = 1", 5, &b, NULL), MQ_OK);
    assert_ptr_equal(a, b);
    /* the key is (type, bytes): same text as TAG is another filter */
    assert_int_equal(filter_cache_get(c, FILTER_TAG, "a = 1", 5, &t, NULL), MQ_OK);
    assert_ptr_not_equal(a, t);
    assert_int_equal(filter_type(t), FILTER_TAG);
    /* only 'len' bytes are the key */
    Filter *d = NULL;
    assert_int_equal(filter_cache_get(c, FILTER_SQL92, "a = 1 OR b = 2", 5, &d, NULL), MQ_OK);
    assert_ptr_equal(a, d);
    filter_unref(d);
    /* the caller's references outlive the cache */
    filter_cache_close(c);
    TestRec r;
    REC(&r, "a", "1");
    assert_true(filter_match(a, &r.rec));
    filter_unref(a);
    filter_unref(b);
    filter_unref(t);
    filter_cache_close(NULL);
}

static void test_filter_cache_does_not_cache_errors(void **state) {
    (void)state;
    FilterCache *c = NULL;
    assert_int_equal(filter_cache_open(4, &c), MQ_OK);
    Filter *f = (Filter *)0x1;
    Sql92Error err = {0};
    for (int i = 0; i < 2; i++) {
        memset(&err, 0, sizeof(err));
        assert_int_equal(filter_cache_get(c, FILTER_SQL92, "a = (", 5, &f, &err), MQ_ERR_INVAL);
        assert_int_equal(err.pos, 4);
        assert_string_equal(err.msg, "expected a property or a value, found '('");
        assert_ptr_equal(f, (Filter *)0x1);
    }
    assert_int_equal(filter_cache_get(c, FILTER_TAG, "A ||", 4, &f, &err), MQ_ERR_INVAL);
    assert_int_equal(filter_cache_get(NULL, FILTER_TAG, "A", 1, &f, &err), MQ_ERR_INVAL);
    assert_int_equal(filter_cache_get(c, FILTER_TAG, NULL, 1, &f, &err), MQ_ERR_INVAL);
    assert_int_equal(filter_cache_get(c, FILTER_TAG, "A", 1, NULL, &err), MQ_ERR_INVAL);
    filter_cache_close(c);
    assert_int_equal(filter_cache_open(0, &c), MQ_ERR_INVAL);
    assert_int_equal(filter_cache_open(4, NULL), MQ_ERR_INVAL);
}

static Filter *cache_get(FilterCache *c, const char *expr) {
    Filter *f = NULL;
    assert_int_equal(filter_cache_get(c, FILTER_TAG, expr, strlen(expr), &f, NULL), MQ_OK);
    return f;
}

static void test_filter_cache_evicts_least_recently_used(void **state) {
    (void)state;
    FilterCache *c = NULL;
    assert_int_equal(filter_cache_open(2, &c), MQ_OK);
    Filter *a = cache_get(c, "A");
    Filter *b = cache_get(c, "B");
    Filter *a2 = cache_get(c, "A"); /* A is now the most recent */
    assert_ptr_equal(a, a2);
    Filter *x = cache_get(c, "X"); /* evicts B */
    Filter *a3 = cache_get(c, "A");
    assert_ptr_equal(a, a3);
    Filter *b2 = cache_get(c, "B"); /* compiled again (we still hold the old one) */
    assert_ptr_not_equal(b, b2);
    assert_string_equal(filter_expression(b2), "B");
    /* that evicted X (A was used after X) */
    Filter *a4 = cache_get(c, "A");
    assert_ptr_equal(a, a4);
    Filter *x2 = cache_get(c, "X");
    assert_ptr_not_equal(x, x2);
    /* every reference we got is still usable after eviction */
    TestRec r;
    REC(&r, "TAGS", "B");
    assert_true(filter_match(b, &r.rec));
    assert_true(filter_match(b2, &r.rec));
    assert_false(filter_match(x, &r.rec));
    Filter *all[] = {a, b, a2, x, a3, b2, a4, x2};
    for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++) filter_unref(all[i]);
    filter_cache_close(c);
}

static void test_filter_cache_survives_many_keys(void **state) {
    (void)state;
    FilterCache *c = NULL;
    assert_int_equal(filter_cache_open(16, &c), MQ_OK);
    char expr[32];
    for (int round = 0; round < 3; round++) {
        for (int i = 0; i < 200; i++) {
            snprintf(expr, sizeof(expr), "n = %d", i % 40);
            Filter *f = NULL;
            assert_int_equal(filter_cache_get(c, FILTER_SQL92, expr, strlen(expr), &f, NULL),
                             MQ_OK);
            assert_string_equal(filter_expression(f), expr);
            filter_unref(f);
        }
    }
    filter_cache_close(c);
}

/* Two threads get the same expressions from one small cache, match with
 * them and drop them, while other keys keep evicting. */
#define SMOKE_ROUNDS 2000

typedef struct SmokeArg {
    FilterCache *cache;
    pthread_barrier_t *start;
    int id;
    int matched; /* filter_match results that were true */
} SmokeArg;

static void *smoke_worker(void *p) {
    SmokeArg *a = p;
    TestRec r;
    REC(&r, "TAGS", "TagA", "n", "5");
    char other[32];
    pthread_barrier_wait(a->start);
    for (int i = 0; i < SMOKE_ROUNDS; i++) {
        Filter *f = NULL;
        static const char shared[] = "TAGS = 'TagA' AND n BETWEEN 1 AND 9";
        if (filter_cache_get(a->cache, FILTER_SQL92, shared, sizeof(shared) - 1, &f, NULL) != MQ_OK)
            return NULL;
        if (filter_match(f, &r.rec)) a->matched++;
        filter_unref(f);
        snprintf(other, sizeof(other), "T%d_%d", a->id, i % 7);
        if (filter_cache_get(a->cache, FILTER_TAG, other, strlen(other), &f, NULL) != MQ_OK)
            return NULL;
        filter_unref(f);
    }
    return NULL;
}

static void test_filter_cache_two_threads_share_filters(void **state) {
    (void)state;
    FilterCache *c = NULL;
    assert_int_equal(filter_cache_open(4, &c), MQ_OK);
    pthread_barrier_t start;
    pthread_barrier_init(&start, NULL, 2);
    pthread_t th[2];
    SmokeArg args[2];
    for (int i = 0; i < 2; i++) {
        args[i] = (SmokeArg){.cache = c, .start = &start, .id = i};
        assert_int_equal(pthread_create(&th[i], NULL, smoke_worker, &args[i]), 0);
    }
    for (int i = 0; i < 2; i++) pthread_join(th[i], NULL);
    pthread_barrier_destroy(&start);
    assert_int_equal(args[0].matched, SMOKE_ROUNDS);
    assert_int_equal(args[1].matched, SMOKE_ROUNDS);
    filter_cache_close(c);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_filter_type_parse_names),
        cmocka_unit_test(test_filter_tag_star_and_empty_match_all),
        cmocka_unit_test(test_filter_tag_one_and_several),
        cmocka_unit_test(test_filter_tag_hashes_are_the_consume_queue_hashes),
        cmocka_unit_test(test_filter_tag_keeps_its_own_copy),
        cmocka_unit_test(test_filter_tag_errors_have_positions),
        cmocka_unit_test(test_filter_compile_rejects_bad_arguments),
        cmocka_unit_test(test_filter_sql92_over_encoded_properties),
        cmocka_unit_test(test_filter_sql92_sees_the_tag_as_TAGS),
        cmocka_unit_test(test_filter_sql92_errors_are_sql92_errors),
        cmocka_unit_test(test_filter_refcount_frees_at_zero),
        cmocka_unit_test(test_filter_cache_hit_returns_the_same_filter),
        cmocka_unit_test(test_filter_cache_does_not_cache_errors),
        cmocka_unit_test(test_filter_cache_evicts_least_recently_used),
        cmocka_unit_test(test_filter_cache_survives_many_keys),
        cmocka_unit_test(test_filter_cache_two_threads_share_filters),
    };
    return cmocka_run_group_tests_name("filter", tests, NULL, NULL);
}
