/*
 * test_sql92.c - the SQL92 message selector (core/sql92.c): every
 * operator, precedence, three-valued logic, numeric versus string
 * comparison, quoting, keyword case, the limits and the exact position
 * and text of parse errors.  Properties come from a name/value list; no
 * files.
 */
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mq.h"
#include "sql92.h"

/* A property list: name, value, name, value, ..., NULL. */
#define P(...) ((const char *const[]){__VA_ARGS__, NULL})
#define NONE ((const char *const[]){NULL})

static bool get_kv(void *arg, const char *name, MqSlice *value) {
    const char *const *kv = arg;
    for (; kv[0]; kv += 2) {
        if (strcmp(kv[0], name) == 0) {
            *value = mq_slice(kv[1], strlen(kv[1]));
            return true;
        }
    }
    return false;
}

static Sql92 *parse_ok(const char *expr) {
    Sql92 *q = NULL;
    Sql92Error err = {0};
    int rc = sql92_parse(expr, strlen(expr), &q, &err);
    if (rc != MQ_OK) fail_msg("'%s' at %zu: %s", expr, err.pos, err.msg);
    assert_non_null(q);
    return q;
}

/* match parses 'expr', matches it against 'kv' and frees it. */
static bool match(const char *expr, const char *const *kv) {
    Sql92 *q = parse_ok(expr);
    bool r = sql92_match(q, get_kv, (void *)kv);
    sql92_free(q);
    return r;
}

/* unknown is true when neither 'expr' nor NOT ('expr') matches: the
 * expression is UNKNOWN for 'kv' (it must be a boolean expression). */
static bool unknown(const char *expr, const char *const *kv) {
    char neg[512];
    snprintf(neg, sizeof(neg), "NOT (%s)", expr);
    return !match(expr, kv) && !match(neg, kv);
}

/* bad asserts that 'expr' is refused at 'pos' with exactly 'msg'. */
static void bad_len(const char *expr, size_t len, size_t pos, const char *msg) {
    Sql92 *q = (Sql92 *)0x1;
    Sql92Error err = {.pos = 9999, .msg = "unset"};
    int rc = sql92_parse(expr, len, &q, &err);
    if (rc != MQ_ERR_INVAL) fail_msg("'%s' parsed (rc %d)", expr, rc);
    assert_ptr_equal(q, (Sql92 *)0x1);
    if (err.pos != pos || strcmp(err.msg, msg) != 0)
        fail_msg("'%s': got %zu '%s', want %zu '%s'", expr, err.pos, err.msg, pos, msg);
}

static void bad(const char *expr, size_t pos, const char *msg) {
    bad_len(expr, strlen(expr), pos, msg);
}

/* ---- comparison operators ------------------------------------------------*/

static void test_sql92_equality_compares_strings_by_bytes(void **state) {
    (void)state;
    assert_true(match("a = 'x'", P("a", "x")));
    assert_false(match("a = 'x'", P("a", "X")));
    assert_false(match("a = 'x'", P("a", "x ")));
    assert_true(match("a <> 'x'", P("a", "y")));
    assert_true(match("a != 'x'", P("a", "y")));
    assert_false(match("a <> 'x'", P("a", "x")));
    assert_true(match("a = ''", P("a", "")));
    assert_false(match("a = ''", P("a", "x")));
    assert_true(match("'x' = a", P("a", "x")));
    /* two properties: bytes too, even when both look like numbers */
    assert_true(match("a = b", P("a", "q", "b", "q")));
    assert_false(match("a = b", P("a", "1", "b", "2")));
    /* a string literal that looks like a number is still a string */
    assert_false(match("a = '1'", P("a", "1.0")));
    assert_true(match("a = '1'", P("a", "1")));
    /* UTF-8 bytes */
    assert_true(match("city = 'M\xc3\xbcnchen'", P("city", "M\xc3\xbcnchen")));
}

static void test_sql92_numeric_comparisons_convert_values_strictly(void **state) {
    (void)state;
    assert_true(match("a > 5", P("a", "6")));
    assert_false(match("a > 5", P("a", "5")));
    assert_true(match("a >= 5", P("a", "5")));
    assert_true(match("a < 5", P("a", "4.99")));
    assert_false(match("a < 5", P("a", "5.0")));
    assert_true(match("a <= 5", P("a", "5.0")));
    assert_true(match("a > -1", P("a", "0")));
    assert_true(match("a < -1.5", P("a", "-2")));
    assert_true(match("a > 1e3", P("a", "1001")));
    assert_true(match("a >= 1000", P("a", "1e3")));
    assert_true(match("a > 0.5", P("a", ".6")));
    assert_true(match("a > 4", P("a", "5.")));
    assert_true(match("a = 5", P("a", "+5")));
    assert_true(match("a > b", P("a", "10", "b", "9"))); /* numbers, not bytes */
    assert_true(match("10 > a", P("a", "9")));
    /* exact across int64 and double: 2^53 + 1 is not 2^53 */
    assert_true(match("a > 9007199254740992.0", P("a", "9007199254740993")));
    assert_false(match("a = 9007199254740992.0", P("a", "9007199254740993")));
    assert_true(match("a = 9223372036854775807", P("a", "9223372036854775807")));
    assert_true(match("a < 9223372036854775807", P("a", "9223372036854775806")));
    assert_true(match("a = -9223372036854775808", P("a", "-9223372036854775808")));
    /* beyond int64 a value becomes a double */
    assert_true(match("a > 9223372036854775807", P("a", "9223372036854775808")));
    assert_true(match("a > 1e300", P("a", "1e999"))); /* infinity */
    /* not numbers: UNKNOWN */
    assert_true(unknown("a > 5", P("a", "six")));
    assert_true(unknown("a > 5", P("a", " 6")));
    assert_true(unknown("a > 5", P("a", "6 ")));
    assert_true(unknown("a > 5", P("a", "0x10")));
    assert_true(unknown("a > 5", P("a", "")));
    assert_true(unknown("a > 5", P("a", "6L")));
    assert_true(unknown("a > 5", P("a", "1e")));
    assert_true(unknown("a > 5", P("a", "inf")));
    assert_true(unknown("a > 5", P("a", "nan")));
    assert_true(unknown("a > 5", P("a", "--6")));
    assert_true(unknown("a = 0", P("a", "-")));
    assert_true(unknown("a = 0", P("a", "+")));
    assert_true(unknown("a = 0", P("a", "-e1")));
    assert_true(unknown("a = 0", P("a", "-.")));
    assert_true(unknown("a > 5", P("a", ".")));
    assert_true(unknown("a > b", P("a", "6", "b", "x")));
    /* too long to be a number (SQL92_NUM_MAX) */
    char big[SQL92_NUM_MAX + 2];
    memset(big, '0', sizeof(big));
    big[sizeof(big) - 2] = '7';
    big[sizeof(big) - 1] = '\0';
    assert_true(unknown("a = 7", P("a", big)));
    assert_true(match("a = 7", P("a", big + 1))); /* exactly SQL92_NUM_MAX bytes */
}

static void test_sql92_equals_with_a_number_compares_numbers(void **state) {
    (void)state;
    assert_true(match("a = 10", P("a", "10")));
    assert_true(match("a = 10", P("a", "10.0")));
    assert_true(match("a = 10", P("a", "1e1")));
    assert_true(match("a = 10", P("a", "010")));
    assert_true(match("a <> 10", P("a", "11")));
    assert_true(match("a = 0.1", P("a", "0.1")));
    assert_true(match("a = '10'", P("a", "10")));
    assert_false(match("a = '10'", P("a", "10.0")));
    /* a value that is not a number: neither equal nor unequal */
    assert_true(unknown("a = 10", P("a", "ten")));
    assert_true(unknown("a <> 10", P("a", "ten")));
    /* literals on both sides */
    assert_true(match("1 = 1.0", NONE));
    assert_true(match("'2' = 2", NONE));
}

static void test_sql92_between_is_inclusive_and_negatable(void **state) {
    (void)state;
    assert_true(match("a BETWEEN 1 AND 3", P("a", "1")));
    assert_true(match("a BETWEEN 1 AND 3", P("a", "3")));
    assert_true(match("a BETWEEN 1 AND 3", P("a", "2.5")));
    assert_false(match("a BETWEEN 1 AND 3", P("a", "3.01")));
    assert_false(match("a BETWEEN 1 AND 3", P("a", "0")));
    assert_true(match("a NOT BETWEEN 1 AND 3", P("a", "4")));
    assert_false(match("a NOT BETWEEN 1 AND 3", P("a", "2")));
    assert_true(match("a BETWEEN -1.5 AND -1", P("a", "-1.25")));
    assert_true(match("a BETWEEN 2 AND 2", P("a", "2")));
    assert_true(match("a BETWEEN lo AND hi", P("a", "5", "lo", "1", "hi", "9")));
    assert_true(unknown("a BETWEEN 1 AND 3", NONE));
    assert_true(unknown("a NOT BETWEEN 1 AND 3", NONE));
    assert_true(unknown("a BETWEEN 1 AND 3", P("a", "two")));
    /* one unknown bound: still FALSE when the other bound already fails */
    assert_false(match("a BETWEEN lo AND 3", P("a", "5")));
    assert_true(match("a NOT BETWEEN lo AND 3", P("a", "5")));
    assert_true(unknown("a BETWEEN lo AND 3", P("a", "2")));
    /* BETWEEN's AND is not the logical AND */
    assert_true(match("a BETWEEN 1 AND 3 AND b = 'x'", P("a", "2", "b", "x")));
    assert_false(match("a BETWEEN 1 AND 3 AND b = 'x'", P("a", "2", "b", "y")));
}

static void test_sql92_in_lists_of_strings_and_numbers(void **state) {
    (void)state;
    assert_true(match("a IN ('x', 'y')", P("a", "y")));
    assert_false(match("a IN ('x', 'y')", P("a", "z")));
    assert_true(match("a NOT IN ('x', 'y')", P("a", "z")));
    assert_false(match("a NOT IN ('x', 'y')", P("a", "x")));
    assert_true(match("a IN ('x')", P("a", "x")));
    assert_true(match("a IN (1, 2, 3)", P("a", "2.0")));
    assert_true(match("a IN (-1, +2)", P("a", "-1")));
    assert_false(match("a IN (1, 2, 3)", P("a", "4")));
    assert_true(match("a NOT IN (1, 2, 3)", P("a", "4")));
    assert_true(match("a IN ('x', 1)", P("a", "x")));
    assert_true(match("a IN ('x', 1)", P("a", "1")));
    assert_true(unknown("a IN ('x', 'y')", NONE));
    assert_true(unknown("a NOT IN ('x', 'y')", NONE));
    /* a non-number against numbers: UNKNOWN, not FALSE */
    assert_true(unknown("a IN (1, 2)", P("a", "x")));
    assert_true(unknown("a IN ('y', 1)", P("a", "x")));
    assert_true(match("a IN ('x', 1)", P("a", "x")));
}

static void test_sql92_is_null_tests_presence(void **state) {
    (void)state;
    assert_true(match("a IS NULL", NONE));
    assert_false(match("a IS NULL", P("a", "")));
    assert_true(match("a IS NOT NULL", P("a", "")));
    assert_false(match("a IS NOT NULL", NONE));
    assert_true(match("NOT a IS NULL", P("a", "1")));
    assert_true(match("NULL IS NULL", NONE));
    /* IS NULL is never UNKNOWN */
    assert_true(match("NOT (a IS NOT NULL)", NONE));
}

static void test_sql92_contains_startswith_endswith(void **state) {
    (void)state;
    assert_true(match("a CONTAINS 'ell'", P("a", "hello")));
    assert_false(match("a CONTAINS 'elk'", P("a", "hello")));
    assert_true(match("a NOT CONTAINS 'elk'", P("a", "hello")));
    assert_false(match("a NOT CONTAINS 'ell'", P("a", "hello")));
    assert_true(match("a STARTSWITH 'he'", P("a", "hello")));
    assert_false(match("a STARTSWITH 'lo'", P("a", "hello")));
    assert_true(match("a NOT STARTSWITH 'lo'", P("a", "hello")));
    assert_true(match("a ENDSWITH 'lo'", P("a", "hello")));
    assert_false(match("a ENDSWITH 'he'", P("a", "hello")));
    assert_true(match("a NOT ENDSWITH 'he'", P("a", "hello")));
    assert_true(match("a CONTAINS 'hello'", P("a", "hello")));
    assert_false(match("a CONTAINS 'hello!'", P("a", "hello")));
    assert_false(match("a STARTSWITH 'hello!'", P("a", "hello")));
    assert_false(match("a ENDSWITH '!hello'", P("a", "hello")));
    assert_true(match("a CONTAINS 'it''s'", P("a", "so it's done")));
    assert_true(match("'abc' CONTAINS 'b'", NONE));
    assert_true(unknown("a CONTAINS 'x'", NONE));
    assert_true(unknown("a NOT CONTAINS 'x'", NONE));
    assert_true(unknown("a STARTSWITH 'x'", NONE));
    assert_true(unknown("a ENDSWITH 'x'", NONE));
    /* bytes, not letters */
    assert_false(match("a CONTAINS 'ELL'", P("a", "hello")));
}

static void test_sql92_booleans_match_true_and_false_strings(void **state) {
    (void)state;
    assert_true(match("a = TRUE", P("a", "true")));
    assert_true(match("a = TRUE", P("a", "TRUE")));
    assert_true(match("a = TRUE", P("a", "True")));
    assert_false(match("a = TRUE", P("a", "false")));
    assert_true(match("a = FALSE", P("a", "false")));
    assert_true(match("a <> FALSE", P("a", "TRUE")));
    assert_true(match("TRUE = a", P("a", "true")));
    assert_true(unknown("a = TRUE", P("a", "yes")));
    assert_true(unknown("a = TRUE", P("a", "1")));
    assert_true(unknown("a = FALSE", NONE));
    /* constants as whole expressions */
    assert_true(match("TRUE", NONE));
    assert_false(match("FALSE", NONE));
    assert_true(match("NOT FALSE", NONE));
    assert_true(match("FALSE OR a = 1", P("a", "1")));
    assert_false(match("TRUE AND a = 1", P("a", "2")));
    assert_true(match("(TRUE)", NONE));
}

/* ---- logic -----------------------------------------------------------------*/

static void test_sql92_precedence_not_and_or(void **state) {
    (void)state;
    const char *const *kv = P("a", "1", "b", "0", "c", "0");
    /* AND binds tighter than OR */
    assert_true(match("a = 1 OR b = 1 AND c = 1", kv));
    assert_false(match("(a = 1 OR b = 1) AND c = 1", kv));
    assert_true(match("b = 1 AND c = 1 OR a = 1", kv));
    /* NOT binds tighter than AND and applies to the whole comparison */
    assert_false(match("NOT a = 1 AND b = 0", kv));
    assert_true(match("NOT b = 1 AND c = 0", kv));
    assert_true(match("NOT (a = 1 AND b = 1)", kv));
    assert_true(match("NOT a = 1 OR b = 0", kv));
    assert_false(match("NOT (a = 1 OR b = 1)", kv));
    assert_true(match("NOT NOT a = 1", kv));
    assert_false(match("NOT NOT NOT a = 1", kv));
    /* long chains and nesting */
    assert_true(match("b = 1 OR c = 1 OR b = 2 OR a = 1", kv));
    assert_false(match("a = 1 AND a = 1 AND a = 1 AND b = 1", kv));
    assert_true(match("((a = 1) AND ((b = 0) OR (c = 1)))", kv));
}

static void test_sql92_three_valued_logic(void **state) {
    (void)state;
    const char *const *kv = P("a", "1");
    /* x is missing: every comparison with it is UNKNOWN */
    assert_true(unknown("x = 1", kv));
    assert_true(unknown("x <> 1", kv));
    assert_true(unknown("x > 1", kv));
    assert_true(unknown("x = 'q'", kv));
    assert_true(unknown("x = a", kv));
    /* UNKNOWN OR TRUE = TRUE; UNKNOWN OR FALSE = UNKNOWN */
    assert_true(match("x = 1 OR a = 1", kv));
    assert_true(match("a = 1 OR x = 1", kv));
    assert_true(unknown("x = 1 OR a = 2", kv));
    /* UNKNOWN AND FALSE = FALSE; UNKNOWN AND TRUE = UNKNOWN */
    assert_false(match("x = 1 AND a = 2", kv));
    assert_true(match("NOT (x = 1 AND a = 2)", kv));
    assert_true(unknown("x = 1 AND a = 1", kv));
    /* NOT UNKNOWN = UNKNOWN */
    assert_false(match("NOT x = 1", kv));
    assert_false(match("NOT NOT x = 1", kv));
    assert_true(unknown("NOT (x = 1 OR a = 2)", kv));
    assert_false(match("NOT (x = 1 OR a = 1)", kv));
    /* the usual idiom for "missing or different" */
    assert_true(match("x IS NULL OR x <> 1", kv));
    assert_true(match("x IS NULL OR x <> 1", P("x", "2")));
    assert_false(match("x IS NULL OR x <> 1", P("x", "1")));
    /* n-ary: one FALSE decides an AND whatever the others are */
    assert_false(match("x = 1 AND y = 1 AND a = 2 AND z = 1", kv));
    assert_true(match("x = 1 OR y = 1 OR a = 1 OR z = 1", kv));
    assert_true(unknown("x = 1 OR y = 1 OR a = 2", kv));
}

/* ---- lexical -------------------------------------------------------------*/

static void test_sql92_keywords_ignore_case_identifiers_do_not(void **state) {
    (void)state;
    assert_true(match("a = 1 and b = 2", P("a", "1", "b", "2")));
    assert_true(match("a = 1 oR b = 2", P("a", "1", "b", "3")));
    assert_true(match("not a = 2", P("a", "1")));
    assert_true(match("a between 1 and 2", P("a", "1")));
    assert_true(match("a Not In ('x')", P("a", "y")));
    assert_true(match("a is not null", P("a", "y")));
    assert_true(match("a Is Null", NONE));
    assert_true(match("a contains 'x' AND a startswith 'x' AND a endsWith 'x'", P("a", "x")));
    assert_true(match("a = true", P("a", "TRUE")));
    assert_true(match("a = False", P("a", "false")));
    assert_true(match("nuLL is null", NONE));
    /* identifiers: case-sensitive, with _ $ . and digits */
    assert_true(unknown("A = 1", P("a", "1")));
    assert_true(match("A = 1", P("A", "1", "a", "2")));
    assert_true(match("$x.y_z9 = 'v'", P("$x.y_z9", "v")));
    assert_true(match("_ = 'v'", P("_", "v")));
    assert_true(match("TAGS = 'TagA'", P("TAGS", "TagA")));
    /* a keyword as a prefix of a name is a name */
    assert_true(match("notes = 'n' AND order_id = 1 AND island = 'i' AND isx = 2",
                      P("notes", "n", "order_id", "1", "island", "i", "isx", "2")));
    /* blanks anywhere between tokens, none needed around operators */
    assert_true(match("a=1", P("a", "1")));
    assert_true(match("\t a\n=\r1 \f", P("a", "1")));
    assert_true(match("(a>=1)AND(a<=1)", P("a", "1")));
    assert_true(match("a IN('x','y')", P("a", "y")));
}

static void test_sql92_literals_strings_and_numbers(void **state) {
    (void)state;
    assert_true(match("a = 'it''s'", P("a", "it's")));
    assert_true(match("a = ''''", P("a", "'")));
    assert_true(match("a = ''''''", P("a", "''")));
    assert_true(match("a = 'x''''y'", P("a", "x''y")));
    assert_true(match("a = ' spaced '", P("a", " spaced ")));
    assert_true(match("a = 'A AND b = 1'", P("a", "A AND b = 1")));
    assert_true(match("a = '\"'", P("a", "\"")));
    assert_true(match("a = 'x\ny'", P("a", "x\ny")));
    /* a string with a NUL byte in it */
    const char nul_expr[] = "a = 'x\0y'";
    Sql92 *q = NULL;
    Sql92Error err;
    assert_int_equal(sql92_parse(nul_expr, sizeof(nul_expr) - 1, &q, &err), MQ_OK);
    sql92_free(q);
    /* numbers */
    assert_true(match("a = 0", P("a", "0")));
    assert_true(match("a = 007", P("a", "7")));
    assert_true(match("a = 10L", P("a", "10")));
    assert_true(match("a = 10l", P("a", "10")));
    assert_true(match("a = 1.5", P("a", "1.5")));
    assert_true(match("a = .5", P("a", "0.5")));
    assert_true(match("a = 5.", P("a", "5")));
    assert_true(match("a = 1e3", P("a", "1000")));
    assert_true(match("a = 1E+3", P("a", "1000")));
    assert_true(match("a = 25e-2", P("a", "0.25")));
    assert_true(match("a = 1.5e1", P("a", "15")));
    assert_true(match("a = -7", P("a", "-7")));
    assert_true(match("a = - 7", P("a", "-7")));
    assert_true(match("a = +7", P("a", "7")));
    assert_true(match("a = -0.5", P("a", "-.5")));
    assert_true(match("a = 9223372036854775807", P("a", "9223372036854775807")));
    assert_true(match("a > -9223372036854775808", P("a", "-9223372036854775807")));
}

static void test_sql92_parse_copies_what_it_keeps(void **state) {
    (void)state;
    char buf[] = "name = 'value' OR other IN ('x', 'y')";
    Sql92 *q = NULL;
    assert_int_equal(sql92_parse(buf, strlen(buf), &q, NULL), MQ_OK);
    memset(buf, '#', strlen(buf));
    assert_true(sql92_match(q, get_kv, (void *)P("name", "value")));
    assert_true(sql92_match(q, get_kv, (void *)P("other", "y")));
    assert_false(sql92_match(q, get_kv, (void *)P("name", "other")));
    sql92_free(q);
    sql92_free(NULL);
    /* only 'len' bytes are read */
    assert_int_equal(sql92_parse("a = 1 garbage", 5, &q, NULL), MQ_OK);
    assert_true(sql92_match(q, get_kv, (void *)P("a", "1")));
    sql92_free(q);
}

/* ---- limits --------------------------------------------------------------*/

/* Appends 'n' copies of 's' to 'b' at '*len'. */
static void repeat(char *b, size_t *len, const char *s, size_t n) {
    for (size_t i = 0; i < n; i++) {
        memcpy(b + *len, s, strlen(s));
        *len += strlen(s);
    }
    b[*len] = '\0';
}

static void test_sql92_length_limit(void **state) {
    (void)state;
    char *e = malloc(SQL92_EXPR_MAX + 2);
    assert_non_null(e);
    /* a = 'xxx...x' of exactly SQL92_EXPR_MAX bytes */
    size_t len = 0;
    repeat(e, &len, "a = '", 1);
    repeat(e, &len, "x", SQL92_EXPR_MAX - 6);
    repeat(e, &len, "'", 1);
    assert_int_equal(len, SQL92_EXPR_MAX);
    Sql92 *q = NULL;
    assert_int_equal(sql92_parse(e, len, &q, NULL), MQ_OK);
    sql92_free(q);
    e[len - 1] = 'x';
    e[len] = '\'';
    bad_len(e, len + 1, SQL92_EXPR_MAX, "expression longer than 4096 bytes");
    free(e);
}

static void test_sql92_depth_limit(void **state) {
    (void)state;
    char e[2048];
    size_t len = 0;
    repeat(e, &len, "(", SQL92_DEPTH_MAX);
    repeat(e, &len, "a = 1", 1);
    repeat(e, &len, ")", SQL92_DEPTH_MAX);
    assert_true(match(e, P("a", "1")));
    len = 0;
    repeat(e, &len, "(", SQL92_DEPTH_MAX + 1);
    repeat(e, &len, "a = 1", 1);
    repeat(e, &len, ")", SQL92_DEPTH_MAX + 1);
    bad(e, SQL92_DEPTH_MAX, "parentheses nested deeper than 64");
    /* depth is nesting, not the count of parentheses */
    len = 0;
    repeat(e, &len, "(a = 1) AND ", SQL92_DEPTH_MAX + 10);
    repeat(e, &len, "TRUE", 1);
    assert_true(match(e, P("a", "1")));
    /* long NOT chains need no depth; an even number cancels out */
    len = 0;
    repeat(e, &len, "NOT ", 101);
    repeat(e, &len, "a = 2", 1);
    assert_true(match(e, P("a", "1")));
    memset(e, ' ', 4); /* 100 NOTs */
    assert_false(match(e, P("a", "1")));
}

static void test_sql92_in_list_limit(void **state) {
    (void)state;
    char e[4096];
    size_t len = 0;
    repeat(e, &len, "a IN (", 1);
    repeat(e, &len, "'q', ", SQL92_IN_MAX - 1);
    repeat(e, &len, "'x')", 1);
    assert_true(match(e, P("a", "x")));
    len = 0;
    repeat(e, &len, "a IN (", 1);
    repeat(e, &len, "'q', ", SQL92_IN_MAX);
    repeat(e, &len, "'x')", 1);
    /* the 257th item starts after "a IN (" and 256 "'q', " */
    bad(e, 6 + 5 * SQL92_IN_MAX, "more than 256 items in an IN list");
}

static void test_sql92_node_limit(void **state) {
    (void)state;
    char e[4096];
    /* each "a=1" is a comparison and two operands: 341 of them plus the OR
     * node are exactly 1024 nodes */
    size_t len = 0;
    repeat(e, &len, "a=1 OR ", 340);
    repeat(e, &len, "a=1", 1);
    assert_true(match(e, P("a", "1")));
    /* one more: the 1025th node is the '1' of the 342nd "a=1" */
    len = 0;
    repeat(e, &len, "a=1 OR ", 341);
    repeat(e, &len, "a=1", 1);
    bad(e, 7 * 341 + 2, "expression has more than 1024 nodes");
}

/* ---- errors --------------------------------------------------------------*/

static void test_sql92_error_positions_and_messages(void **state) {
    (void)state;
    static const struct {
        const char *expr;
        size_t pos;
        const char *msg;
    } cases[] = {
        {"", 0, "empty expression"},
        {"   ", 0, "empty expression"},
        {"a == 1", 2, "unknown operator '=='"},
        {"a = 1 && b = 2", 6, "unknown operator '&&', use AND"},
        {"a = 1 || b = 2", 6, "unknown operator '||', use OR"},
        {"a | b", 2, "unexpected character '|'"},
        {"!a", 0, "unknown operator '!', use NOT"},
        {"a = \"x\"", 4, "unexpected character '\"', strings take single quotes"},
        {"a = #", 4, "unexpected character '#'"},
        {"a = \x01", 4, "unexpected byte 0x01"},
        {"a = 'abc", 4, "unterminated string"},
        {"a = 'it''s", 4, "unterminated string"},
        {"(a = 1", 6, "expected ')', found end of expression"},
        {"(a = 1 b", 7, "expected ')', found 'b'"},
        {"a = 1)", 5, "expected AND, OR or end of expression, found ')'"},
        {"a = 1 b = 2", 6, "expected AND, OR or end of expression, found 'b'"},
        {"a = 1 = 2", 6, "expected AND, OR or end of expression, found '='"},
        {"a", 1, "expected a comparison operator, found end of expression"},
        {"a AND b = 1", 2, "expected a comparison operator, found 'AND'"},
        {"a = ", 4, "expected a property or a value, found end of expression"},
        {"a = 1 AND", 9, "expected a property or a value, found end of expression"},
        {"a = 1 AND OR b = 2", 10, "expected a property or a value, found 'OR'"},
        {"AND", 0, "expected a property or a value, found 'AND'"},
        {"()", 1, "expected a property or a value, found ')'"},
        {"a = (1)", 4, "expected a property or a value, found '('"},
        {"a IS 1", 5, "expected NULL or NOT NULL after IS, found '1'"},
        {"a IS NOT 'x'", 9, "expected NULL after IS NOT, found 'x'"},
        {"a NOT = 1", 6,
         "expected BETWEEN, IN, CONTAINS, STARTSWITH or ENDSWITH after NOT, "
         "found '='"},
        {"a IN 'x'", 5, "expected '(' after IN, found 'x'"},
        {"a IN ()", 6, "expected a string or a number, found ')'"},
        {"a IN ('x' 'y')", 10, "expected ',' or ')', found 'y'"},
        {"a IN ('x',)", 10, "expected a string or a number, found ')'"},
        {"a IN (b)", 6, "expected a string or a number, found 'b'"},
        {"a IN (TRUE)", 6, "expected a string or a number, found 'TRUE'"},
        {"a IN ('x'", 9, "expected ',' or ')', found end of expression"},
        {"a BETWEEN 1 2", 12, "expected AND after BETWEEN's lower bound, found '2'"},
        {"a BETWEEN 3 AND 1", 10, "lower bound of BETWEEN is greater than its upper bound"},
        {"a BETWEEN 'x' AND 2", 10, "expected a number or a property, found 'x'"},
        {"a BETWEEN 1 AND NULL", 16, "expected a number or a property, found 'NULL'"},
        {"'x' BETWEEN 1 AND 2", 0, "expected a number or a property, found 'x'"},
        {"a > 'x'", 4, "expected a number or a property, found 'x'"},
        {"a < TRUE", 4, "expected a number or a property, found 'TRUE'"},
        {"TRUE >= a", 0, "expected a number or a property, found 'TRUE'"},
        {"a = NULL", 4, "use IS NULL to test for null"},
        {"NULL <> a", 0, "use IS NULL to test for null"},
        {"a = -b", 5, "expected a number after '-', found 'b'"},
        {"a = +'1'", 5, "expected a number after '+', found '1'"},
        {"a CONTAINS b", 11, "expected a string, found 'b'"},
        {"a CONTAINS ''", 11, "empty string after CONTAINS"},
        {"a NOT STARTSWITH ''", 17, "empty string after STARTSWITH"},
        {"1 ENDSWITH 'x'", 0, "expected a property or a string before ENDSWITH, found '1'"},
        {"a = 12abc", 4, "malformed number"},
        {"a = 1.2.3", 4, "malformed number"},
        {"a = 1e", 4, "malformed number"},
        {"a = 1.5L", 4, "malformed number"},
        {"a=1AND b=0", 2, "malformed number"},
        {"NOT", 3, "expected a property or a value, found end of expression"},
        {"a = 'this string is quite a bit longer than thirty-two bytes' x", 62,
         "expected AND, OR or end of expression, found 'x'"},
        {"a x 'this string is quite a bit longer than thirty-two bytes'", 2,
         "expected a comparison operator, found 'x'"},
        {"a = 1 'this string is quite a bit longer than thirty-two bytes'", 6,
         "expected AND, OR or end of expression, found 'this string is quite a bit long..."},
        {"a = 1 '\xc3\xa9\n'", 6, "expected AND, OR or end of expression, found '\?\?\?'"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        bad(cases[i].expr, cases[i].pos, cases[i].msg);
}

static void test_sql92_number_too_long_is_an_error(void **state) {
    (void)state;
    char e[SQL92_NUM_MAX + 16];
    size_t len = 0;
    repeat(e, &len, "a = ", 1);
    repeat(e, &len, "1", SQL92_NUM_MAX);
    assert_true(match(e, P("a", e + 4))); /* 128 ones: a double on both sides */
    assert_false(match(e, P("a", "1")));
    len = 0;
    repeat(e, &len, "a = ", 1);
    repeat(e, &len, "1", SQL92_NUM_MAX + 1);
    bad(e, 4, "number longer than 128 bytes");
}

static void test_sql92_rejects_bad_arguments(void **state) {
    (void)state;
    Sql92 *q = NULL;
    Sql92Error err = {0};
    assert_int_equal(sql92_parse("a = 1", 5, NULL, &err), MQ_ERR_INVAL);
    assert_int_equal(err.pos, 0);
    assert_string_equal(err.msg, "no expression");
    assert_int_equal(sql92_parse(NULL, 3, &q, &err), MQ_ERR_INVAL);
    assert_null(q);
    assert_int_equal(sql92_parse(NULL, 0, &q, &err), MQ_ERR_INVAL);
    assert_string_equal(err.msg, "empty expression");
    /* a NULL 'err' is allowed */
    assert_int_equal(sql92_parse("a ==", 4, &q, NULL), MQ_ERR_INVAL);
    assert_null(q);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sql92_equality_compares_strings_by_bytes),
        cmocka_unit_test(test_sql92_numeric_comparisons_convert_values_strictly),
        cmocka_unit_test(test_sql92_equals_with_a_number_compares_numbers),
        cmocka_unit_test(test_sql92_between_is_inclusive_and_negatable),
        cmocka_unit_test(test_sql92_in_lists_of_strings_and_numbers),
        cmocka_unit_test(test_sql92_is_null_tests_presence),
        cmocka_unit_test(test_sql92_contains_startswith_endswith),
        cmocka_unit_test(test_sql92_booleans_match_true_and_false_strings),
        cmocka_unit_test(test_sql92_precedence_not_and_or),
        cmocka_unit_test(test_sql92_three_valued_logic),
        cmocka_unit_test(test_sql92_keywords_ignore_case_identifiers_do_not),
        cmocka_unit_test(test_sql92_literals_strings_and_numbers),
        cmocka_unit_test(test_sql92_parse_copies_what_it_keeps),
        cmocka_unit_test(test_sql92_length_limit),
        cmocka_unit_test(test_sql92_depth_limit),
        cmocka_unit_test(test_sql92_in_list_limit),
        cmocka_unit_test(test_sql92_node_limit),
        cmocka_unit_test(test_sql92_error_positions_and_messages),
        cmocka_unit_test(test_sql92_number_too_long_is_an_error),
        cmocka_unit_test(test_sql92_rejects_bad_arguments),
    };
    return cmocka_run_group_tests_name("sql92", tests, NULL, NULL);
}
