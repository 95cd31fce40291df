/*
 * test_delay.c - delay levels (core/delay.c): parsing messageDelayLevel
 * (RocketMQ's default, every unit, the errors) and the retry ladder.
 * Pure functions: no fixture.
 */
#include "testutil.h"

#include <stdio.h>
#include <string.h>

#include "delay.h"
#include "mq.h"

#define S 1000LL
#define M (60 * S)
#define H (60 * M)
#define D (24 * H)

/* parse_ok parses 'spec' into 'out' (DELAY_LEVELS_MAX slots) and returns
 * the level count. */
static size_t parse_ok(const char *spec, int64_t *out) {
    size_t n = 0;
    assert_int_equal(delay_levels_parse(spec, out, DELAY_LEVELS_MAX, &n), MQ_OK);
    return n;
}

/* parse_fails checks that 'spec' is refused and touches nothing. */
static void parse_fails(const char *spec) {
    int64_t out[DELAY_LEVELS_MAX];
    for (int i = 0; i < DELAY_LEVELS_MAX; i++) out[i] = -7;
    size_t n = 99;
    assert_int_equal(delay_levels_parse(spec, out, DELAY_LEVELS_MAX, &n), MQ_ERR_INVAL);
    assert_int_equal(n, 99);
    for (int i = 0; i < DELAY_LEVELS_MAX; i++) assert_true(out[i] == -7);
}

static const int64_t default_ms[18] = {1 * S,  5 * S,  10 * S, 30 * S, 1 * M,  2 * M,
                                       3 * M,  4 * M,  5 * M,  6 * M,  7 * M,  8 * M,
                                       9 * M,  10 * M, 20 * M, 30 * M, 1 * H,  2 * H};

static void test_delay_parse_default_levels(void **state) {
    (void)state;
    int64_t lv[DELAY_LEVELS_MAX];
    assert_int_equal(parse_ok(DELAY_DEFAULT_SPEC, lv), 18);
    for (int i = 0; i < 18; i++) assert_true(lv[i] == default_ms[i]);
    /* the literal RocketMQ string, too */
    assert_int_equal(
        parse_ok("1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h", lv), 18);
    assert_true(lv[17] == 7200000);
}

static void test_delay_parse_every_unit(void **state) {
    (void)state;
    int64_t lv[DELAY_LEVELS_MAX];
    assert_int_equal(parse_ok("100ms 200ms 1s 2m 3h 4d 1ms", lv), 7);
    assert_true(lv[0] == 100);
    assert_true(lv[1] == 200);
    assert_true(lv[2] == 1 * S);
    assert_true(lv[3] == 2 * M);
    assert_true(lv[4] == 3 * H);
    assert_true(lv[5] == 4 * D);
    assert_true(lv[6] == 1);
    /* not ascending is fine; blanks around and between are skipped */
    assert_int_equal(parse_ok("  5s\t1s   007ms ", lv), 3);
    assert_true(lv[0] == 5 * S);
    assert_true(lv[1] == 1 * S);
    assert_true(lv[2] == 7);
    /* one level; the range limits */
    assert_int_equal(parse_ok("40d", lv), 1);
    assert_true(lv[0] == DELAY_LEVEL_MAX_MS);
    assert_int_equal(parse_ok("960h 57600m 3456000s 3456000000ms", lv), 4);
    for (int i = 0; i < 4; i++) assert_true(lv[i] == DELAY_LEVEL_MAX_MS);
}

static void test_delay_parse_rejects_bad_specs(void **state) {
    (void)state;
    const char *bad[] = {
        "", "   ", "\t",                         /* no level */
        "5x", "5", "s", "ms", "5 s", "5S", "1H",  /* no number, no or unknown unit */
        "5sx", "1m30s", "5mss", "5s,10s", "1.5s", /* junk after the unit */
        "0s", "0ms", "0d", "000m",                /* zero */
        "-1s", "+1s", "1s -5s",                   /* signs */
        "41d", "961h", "3456000001ms",            /* over 40 days */
        "99999999999999999999999s",               /* overflows int64 */
        "18446744073709551617ms",                 /* overflows uint64 */
        "1s\n2s",                                 /* only spaces and tabs separate */
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) parse_fails(bad[i]);

    /* at most DELAY_LEVELS_MAX levels */
    char spec[DELAY_LEVELS_MAX * 4 + 8];
    size_t len = 0;
    for (int i = 0; i < DELAY_LEVELS_MAX; i++)
        len += (size_t)snprintf(spec + len, sizeof(spec) - len, "%ds ", i % 9 + 1);
    int64_t lv[DELAY_LEVELS_MAX];
    assert_int_equal(parse_ok(spec, lv), DELAY_LEVELS_MAX);
    snprintf(spec + len, sizeof(spec) - len, "1s");
    parse_fails(spec);
}

static void test_delay_parse_respects_cap_and_arguments(void **state) {
    (void)state;
    int64_t lv[4] = {-7, -7, -7, -7};
    size_t n = 99;
    assert_int_equal(delay_levels_parse("1s 2s 3s", lv, 2, &n), MQ_ERR_INVAL);
    assert_int_equal(n, 99);
    assert_true(lv[0] == -7 && lv[1] == -7);
    assert_int_equal(delay_levels_parse("1s 2s 3s", lv, 3, &n), MQ_OK);
    assert_int_equal(n, 3);
    assert_true(lv[3] == -7); /* nothing past the levels */
    assert_int_equal(delay_levels_parse("1s", lv, 0, &n), MQ_ERR_INVAL);
    assert_int_equal(delay_levels_parse(NULL, lv, 4, &n), MQ_ERR_INVAL);
    assert_int_equal(delay_levels_parse("1s", NULL, 4, &n), MQ_ERR_INVAL);
    assert_int_equal(delay_levels_parse("1s", lv, 4, NULL), MQ_ERR_INVAL);
}

static void test_delay_format_round_trips_through_parse(void **state) {
    (void)state;
    const struct {
        int64_t ms;
        const char *text;
    } cases[] = {{1000, "1s"},       {10000, "10s"},    {60000, "1m"},   {7200000, "2h"},
                 {86400000, "1d"},   {90000, "90s"},    {1500, "1500ms"}, {5400000, "90m"},
                 {172800000, "2d"},  {1, "1ms"}};
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char buf[32];
        delay_format(cases[i].ms, buf, sizeof(buf));
        assert_string_equal(buf, cases[i].text);
        int64_t back[1];
        size_t n = 0;
        assert_int_equal(delay_levels_parse(buf, back, 1, &n), MQ_OK);
        assert_int_equal(n, 1);
        assert_true(back[0] == cases[i].ms);
    }
}

static void test_delay_retry_ladder_follows_rocketmq(void **state) {
    (void)state;
    int64_t lv[DELAY_LEVELS_MAX];
    size_t n = parse_ok(DELAY_DEFAULT_SPEC, lv);
    assert_true(delay_retry_ms(lv, n, 0) == 10 * S); /* level 3 */
    assert_true(delay_retry_ms(lv, n, 1) == 30 * S);
    assert_true(delay_retry_ms(lv, n, 2) == 1 * M);
    assert_true(delay_retry_ms(lv, n, 13) == 30 * M); /* level 16 */
    assert_true(delay_retry_ms(lv, n, 14) == 1 * H);  /* level 17 */
    assert_true(delay_retry_ms(lv, n, 15) == 2 * H);  /* level 18: the 16th retry, the last */
    assert_true(delay_retry_ms(lv, n, 16) == 2 * H);  /* clamped from here on */
    assert_true(delay_retry_ms(lv, n, 100) == 2 * H);
    assert_true(delay_retry_ms(lv, n, UINT32_MAX) == 2 * H);
    for (uint32_t r = 0; r + 3 <= 18; r++) assert_true(delay_retry_ms(lv, n, r) == lv[r + 2]);
}

static void test_delay_retry_ladder_clamps_short_ladders(void **state) {
    (void)state;
    int64_t lv[DELAY_LEVELS_MAX];
    size_t n = parse_ok("100ms 200ms", lv); /* shorter than the first retry level */
    assert_true(delay_retry_ms(lv, n, 0) == 200);
    assert_true(delay_retry_ms(lv, n, 5) == 200);
    n = parse_ok("50ms", lv);
    assert_true(delay_retry_ms(lv, n, 0) == 50);
    n = parse_ok("1ms 2ms 3ms 4ms", lv);
    assert_true(delay_retry_ms(lv, n, 0) == 3);
    assert_true(delay_retry_ms(lv, n, 1) == 4);
    assert_true(delay_retry_ms(lv, n, 2) == 4);
    assert_true(delay_retry_ms(NULL, 4, 0) == MQ_ERR_INVAL);
    assert_true(delay_retry_ms(lv, 0, 0) == MQ_ERR_INVAL);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_delay_parse_default_levels),
        cmocka_unit_test(test_delay_parse_every_unit),
        cmocka_unit_test(test_delay_parse_rejects_bad_specs),
        cmocka_unit_test(test_delay_parse_respects_cap_and_arguments),
        cmocka_unit_test(test_delay_format_round_trips_through_parse),
        cmocka_unit_test(test_delay_retry_ladder_follows_rocketmq),
        cmocka_unit_test(test_delay_retry_ladder_clamps_short_ladders),
    };
    return cmocka_run_group_tests_name("delay", tests, NULL, NULL);
}
