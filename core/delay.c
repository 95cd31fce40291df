/*
 * delay.c - delay levels: see delay.h.  A small hand-written scanner over
 * the messageDelayLevel string (no strtol: it would accept signs and
 * leading blanks and hide overflow behind errno), its inverse for display,
 * and the retry ladder.
 */
#include "delay.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

static bool is_blank(char c) { return c == ' ' || c == '\t'; }

/* parse_one reads one duration at '*p' (not blank, not NUL) into '*ms' and
 * moves '*p' past it.  MQ_OK or MQ_ERR_INVAL.  Assumes: '*p' points at a
 * non-blank byte.  Ensures: on MQ_OK 1 <= '*ms' <= DELAY_LEVEL_MAX_MS. */
static int parse_one(const char **p, int64_t *ms) {
    const char *s = *p;
    int64_t num = 0;
    const char *digits = s;
    while (*s >= '0' && *s <= '9') {
        num = num * 10 + (*s - '0');
        /* every unit is at least 1 ms, so a larger count is out of range;
         * checking per digit also keeps 'num' far from overflow */
        if (num > DELAY_LEVEL_MAX_MS) return MQ_ERR_INVAL;
        s++;
    }
    if (s == digits) return MQ_ERR_INVAL;
    int64_t unit_ms;
    if (s[0] == 'm' && s[1] == 's') {
        unit_ms = 1;
        s += 2;
    } else if (*s == 's') {
        unit_ms = 1000;
        s++;
    } else if (*s == 'm') {
        unit_ms = 60 * 1000;
        s++;
    } else if (*s == 'h') {
        unit_ms = 3600 * 1000;
        s++;
    } else if (*s == 'd') {
        unit_ms = 24LL * 3600 * 1000;
        s++;
    } else {
        return MQ_ERR_INVAL;
    }
    if (*s != '\0' && !is_blank(*s)) return MQ_ERR_INVAL; /* "5sx", "1m30s" */
    /* num <= 3.5e9 and unit_ms <= 8.64e7: the product fits in int64 */
    int64_t v = num * unit_ms;
    if (v < 1 || v > DELAY_LEVEL_MAX_MS) return MQ_ERR_INVAL;
    *ms = v;
    *p = s;
    return MQ_OK;
}

int delay_levels_parse(const char *spec, int64_t *levels_ms, size_t cap, size_t *n) {
    if (!spec || !levels_ms || !n) return MQ_ERR_INVAL;
    size_t limit = cap < DELAY_LEVELS_MAX ? cap : DELAY_LEVELS_MAX;
    int64_t tmp[DELAY_LEVELS_MAX];
    size_t count = 0;
    const char *p = spec;
    for (;;) {
        while (is_blank(*p)) p++;
        if (*p == '\0') break;
        if (count == limit) return MQ_ERR_INVAL;
        if (parse_one(&p, &tmp[count]) != MQ_OK) return MQ_ERR_INVAL;
        count++;
    }
    if (count == 0) return MQ_ERR_INVAL;
    memcpy(levels_ms, tmp, count * sizeof(tmp[0]));
    *n = count;
    return MQ_OK;
}

int64_t delay_retry_ms(const int64_t *levels_ms, size_t n, uint32_t reconsume_times) {
    if (!levels_ms || n == 0) return MQ_ERR_INVAL;
    uint64_t level = (uint64_t)DELAY_RETRY_FIRST_LEVEL + reconsume_times; /* 1-based */
    if (level > n) level = n;
    return levels_ms[level - 1];
}

void delay_format(int64_t ms, char *buf, size_t cap) {
    static const struct {
        int64_t ms;
        const char *unit;
    } units[] = {{86400000, "d"}, {3600000, "h"}, {60000, "m"}, {1000, "s"}};
    for (size_t i = 0; ms > 0 && i < sizeof(units) / sizeof(units[0]); i++) {
        if (ms % units[i].ms == 0) {
            snprintf(buf, cap, "%lld%s", (long long)(ms / units[i].ms), units[i].unit);
            return;
        }
    }
    snprintf(buf, cap, "%lldms", (long long)ms);
}
