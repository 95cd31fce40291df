/*
 * fuzz_sql92.c - the SQL92 selector on arbitrary bytes (core/sql92.c).
 * The whole input is the expression.  A refusal must be MQ_ERR_INVAL with
 * a position inside the text (or SQL92_EXPR_MAX when it is too long) and
 * a NUL-terminated message that starts with a lowercase letter and holds
 * only printable ASCII (the gateway puts it in a JSON body).  An accepted
 * expression is matched against fixed property sets, and so is "NOT (e)"
 * when that parses too: e and NOT (e) are never both TRUE.  The same
 * expression goes through filter_compile, which must agree.  Any
 * violation aborts.  Separately, the input is also used as a property
 * value and must convert to a number exactly when it looks like one.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "filter.h"
#include "msg.h"
#include "sql92.h"

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s:%d: invariant failed: %s\n", __FILE__, __LINE__, #cond);           \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

/* Property sets: name, value, ..., NULL.  Names are the dictionary's. */
static const char *const SET_EMPTY[] = {NULL};
static const char *const SET_NUMBERS[] = {"a",     "1",
                                          "b",     "2.5",
                                          "c",     "-3",
                                          "x",     "1e3",
                                          "price", "9223372036854775807",
                                          "n",     "-9223372036854775808",
                                          "big",   "1e999",
                                          "z",     "0",
                                          NULL};
static const char *const SET_STRINGS[] = {
    "a",  "x", "b",    "true", "c", "FALSE", "TAGS",           "TagA", "region",
    "eu", "s", "it's", "e",    "",  "u",     "M\xc3\xbcnchen", NULL};
static const char *const SET_MIXED[] = {"a",   " 1",   "b", "0x10", "c",   "1.", "x",
                                        ".5",  "TAGS", "1", "y",    "nan", "$v", "inf",
                                        "a.b", "+7",   "_", "--1",  "m",   "-",  NULL};
static const char *const *const SETS[] = {SET_EMPTY, SET_NUMBERS, SET_STRINGS, SET_MIXED};
#define NSETS (sizeof(SETS) / sizeof(SETS[0]))

static bool get_kv(void *arg, const char *name, MqSlice *value) {
    CHECK(name != NULL);
    const char *const *kv = arg;
    for (; kv[0]; kv += 2) {
        if (strcmp(kv[0], name) == 0) {
            *value = mq_slice(kv[1], strlen(kv[1]));
            return true;
        }
    }
    return false;
}

/* Every property is present and its value is its own name. */
static bool get_echo(void *arg, const char *name, MqSlice *value) {
    (void)arg;
    *value = mq_slice(name, strlen(name));
    return true;
}

static void check_error(const Sql92Error *err, size_t len) {
    CHECK(err->pos <= len || (len > SQL92_EXPR_MAX && err->pos == SQL92_EXPR_MAX));
    CHECK(memchr(err->msg, '\0', sizeof(err->msg)) != NULL);
    CHECK(err->msg[0] >= 'a' && err->msg[0] <= 'z');
    for (const char *c = err->msg; *c; c++) CHECK(*c >= 0x20 && *c <= 0x7e);
}

/* Matches 'q' (and 'neg' = NOT (q) when not NULL) against every set. */
static void check_matches(const Sql92 *q, const Sql92 *neg, bool results[NSETS + 1]) {
    for (size_t i = 0; i < NSETS; i++) {
        results[i] = sql92_match(q, get_kv, (void *)SETS[i]);
        if (neg) CHECK(!(results[i] && sql92_match(neg, get_kv, (void *)SETS[i])));
    }
    results[NSETS] = sql92_match(q, get_echo, NULL);
    if (neg) CHECK(!(results[NSETS] && sql92_match(neg, get_echo, NULL)));
}

/* The same expression through filter_compile, over encoded properties. */
static void check_filter(const char *expr, size_t len, bool parsed, const bool results[]) {
    Filter *f = NULL;
    Sql92Error err;
    int rc = filter_compile(FILTER_SQL92, expr, len, &f, &err);
    CHECK((rc == MQ_OK) == parsed);
    if (rc != MQ_OK) return;
    for (size_t i = 0; i < NSETS; i++) {
        MsgProp props[16];
        size_t n = 0;
        for (const char *const *kv = SETS[i]; kv[0]; kv += 2, n++) {
            props[n].name = mq_slice(kv[0], strlen(kv[0]));
            props[n].value = mq_slice(kv[1], strlen(kv[1]));
        }
        uint8_t buf[512];
        size_t blen = 0;
        CHECK(msg_props_encode(props, n, buf, sizeof(buf), &blen) == MQ_OK);
        ClRecord rec = {.props = mq_slice(buf, blen)};
        CHECK(filter_match(f, &rec) == results[i]);
    }
    size_t nh = 1;
    CHECK(filter_tag_hashes(f, &nh) == NULL && nh == 0);
    CHECK(!filter_matches_all(f));
    filter_unref(f);
}

/* is_number says independently of sql92.c whether 'v' is a number as a
 * property value must be: [+-] (d+ [. d*] | . d+) [(e|E) [+-] d+], whole. */
static bool is_number(const char *v, size_t n) {
    if (n == 0 || n > SQL92_NUM_MAX) return false;
    size_t i = 0;
    if (v[i] == '+' || v[i] == '-') i++;
    size_t ints = 0;
    size_t fracs = 0;
    for (; i < n && v[i] >= '0' && v[i] <= '9'; i++) ints++;
    if (i < n && v[i] == '.') {
        for (i++; i < n && v[i] >= '0' && v[i] <= '9'; i++) fracs++;
    }
    if (ints + fracs == 0) return false;
    if (i < n && (v[i] == 'e' || v[i] == 'E')) {
        i++;
        if (i < n && (v[i] == '+' || v[i] == '-')) i++;
        size_t exps = 0;
        for (; i < n && v[i] >= '0' && v[i] <= '9'; i++) exps++;
        if (exps == 0) return false;
    }
    return i == n;
}

/* The input as the value of property "a": a numeric test holds exactly
 * when it is a number, and when it is one without a sign it also parses
 * as a literal equal to itself. */
static void check_value(const char *v, size_t n) {
    static Sql92 *is_num;
    if (!is_num) CHECK(sql92_parse("a >= 0 OR a < 0", 15, &is_num, NULL) == MQ_OK);
    if (memchr(v, '\0', n)) return; /* get_kv takes C strings */
    char *z = malloc(n + 1);
    CHECK(z != NULL);
    memcpy(z, v, n);
    z[n] = '\0';
    const char *kv[] = {"a", z, NULL};
    bool num = is_number(v, n);
    CHECK(sql92_match(is_num, get_kv, (void *)kv) == num);
    if (num && v[0] != '+' && v[0] != '-') {
        char expr[SQL92_NUM_MAX + 8];
        snprintf(expr, sizeof(expr), "a = %s", z);
        Sql92 *q = NULL;
        CHECK(sql92_parse(expr, strlen(expr), &q, NULL) == MQ_OK);
        CHECK(sql92_match(q, get_kv, (void *)kv));
        sql92_free(q);
    }
    free(z);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    /* an exact-size copy so that ASan sees any overread */
    char *expr = malloc(size ? size : 1);
    CHECK(expr != NULL);
    if (size) memcpy(expr, data, size);
    Sql92 *q = NULL;
    Sql92Error err;
    memset(&err, 0x55, sizeof(err));
    check_value(expr, size);
    int rc = sql92_parse(expr, size, &q, &err);
    CHECK(rc == MQ_OK || rc == MQ_ERR_INVAL);
    bool results[NSETS + 1] = {false};
    if (rc != MQ_OK) {
        CHECK(q == NULL);
        check_error(&err, size);
        check_filter(expr, size, false, results);
        free(expr);
        return 0;
    }
    CHECK(q != NULL);
    /* NOT (e): may hit a limit that e did not */
    char *wrapped = malloc(size + 7);
    CHECK(wrapped != NULL);
    memcpy(wrapped, "NOT (", 5);
    if (size) memcpy(wrapped + 5, expr, size);
    wrapped[size + 5] = ')';
    Sql92 *neg = NULL;
    rc = sql92_parse(wrapped, size + 6, &neg, &err);
    CHECK(rc == MQ_OK || rc == MQ_ERR_INVAL);
    check_matches(q, neg, results);
    check_filter(expr, size, true, results);
    sql92_free(neg);
    sql92_free(q);
    free(wrapped);
    free(expr);
    return 0;
}
