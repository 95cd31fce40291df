/*
 * msg.c - the message model: name rules, the property codec, offset and
 * unique message ids, tag expressions.  See msg.h for the formats.  Calls
 * only mq.h, store_tag_hash and cl_prop_find; the only state is the
 * unique-id clock (one atomic) and its per-process random value.
 */
#define _GNU_SOURCE
#include "msg.h"

#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "store.h"

/* ======================================================================
 * Names
 * ====================================================================== */

static bool is_name_char(unsigned char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           c == '_' || c == '-';
}

/* has_prefix compares the first bytes of 'name' with 'prefix', optionally
 * folding ASCII letter case. */
static bool has_prefix(const char *name, size_t len, const char *prefix, bool fold) {
    size_t plen = strlen(prefix);
    if (len < plen) return false;
    for (size_t i = 0; i < plen; i++) {
        unsigned char a = (unsigned char)name[i];
        unsigned char b = (unsigned char)prefix[i];
        if (fold) {
            if (a >= 'a' && a <= 'z') a = (unsigned char)(a - 'a' + 'A');
            if (b >= 'a' && b <= 'z') b = (unsigned char)(b - 'a' + 'A');
        }
        if (a != b) return false;
    }
    return true;
}

static bool is_exactly(const char *name, size_t len, const char *s) {
    return strlen(s) == len && memcmp(name, s, len) == 0;
}

bool msg_name_valid(const char *name, size_t len) {
    if (!name || len == 0 || len > MSG_NAME_MAX) return false;
    for (size_t i = 0; i < len; i++)
        if (!is_name_char((unsigned char)name[i])) return false;
    return true;
}

bool msg_name_reserved(const char *name, size_t len) {
    if (!name) return false;
    return has_prefix(name, len, MSG_RETRY_PREFIX, false) ||
           has_prefix(name, len, MSG_DLQ_PREFIX, false) ||
           has_prefix(name, len, MSG_SYS_PREFIX, true) ||
           is_exactly(name, len, MSG_SCHEDULE_TOPIC) ||
           is_exactly(name, len, MSG_AUTO_CREATE_TOPIC) ||
           is_exactly(name, len, MSG_TRANS_CHECK_MAX_TOPIC);
}

const char *msg_name_problem(const char *name, size_t len) {
    if (!name || len == 0) return "name is empty";
    if (len > MSG_NAME_MAX) return "name is longer than 127 bytes";
    if (!msg_name_valid(name, len))
        return "name may contain only letters a-z and A-Z, digits, '_' and '-'";
    if (msg_name_reserved(name, len)) return "name is reserved for the broker";
    return NULL;
}

bool msg_system_name_valid(const char *name, size_t len) {
    if (!name || len == 0 || len > MSG_SYSTEM_NAME_MAX) return false;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)name[i];
        if (!is_name_char(c) && c != '%' && c != '|') return false;
    }
    return true;
}

/* ======================================================================
 * Properties
 * ====================================================================== */

/* The system property names a user property may not take. */
static const char *const system_props[] = {
    MSG_PROP_TAGS,           MSG_PROP_KEYS,           MSG_PROP_UNIQ_KEY,
    MSG_PROP_SHARDING_KEY,   MSG_PROP_DELAY,          MSG_PROP_TIMER_DELIVER_MS,
    MSG_PROP_REAL_TOPIC,     MSG_PROP_REAL_QID,       MSG_PROP_RETRY_TOPIC,
    MSG_PROP_ORIGIN_MSG_ID,  MSG_PROP_RECONSUME_TIME, MSG_PROP_MAX_RECONSUME,
    MSG_PROP_TRAN_MSG,       MSG_PROP_PGROUP,         MSG_PROP_TRAN_CHECK_TIMES,
    MSG_PROP_CHECK_IMMUNITY, MSG_PROP_DELAY_SRC,     MSG_PROP_TRANSACTION_ID,
    MSG_PROP_TXN_CHECK_URL,
};

static bool has_separator(MqSlice s) {
    if (s.len == 0) return false;
    return memchr(s.ptr, MSG_PROP_NAME_SEP, s.len) || memchr(s.ptr, MSG_PROP_PAIR_SEP, s.len);
}

static bool slice_ok(MqSlice s) { return s.ptr || s.len == 0; }

int msg_props_encode(const MsgProp *props, size_t n, uint8_t *buf, size_t cap, size_t *len) {
    if (!len || (n > 0 && !props)) return MQ_ERR_INVAL;
    size_t need = 0;
    bool too_big = false;
    for (size_t i = 0; i < n; i++) {
        const MsgProp *p = &props[i];
        if (p->name.len == 0 || !slice_ok(p->name) || !slice_ok(p->value)) return MQ_ERR_INVAL;
        if (has_separator(p->name) || has_separator(p->value)) return MQ_ERR_INVAL;
        if (too_big) continue; /* keep validating: INVAL wins over FULL */
        if (p->name.len > CL_PROPS_MAX || p->value.len > CL_PROPS_MAX) {
            too_big = true;
            continue;
        }
        need += p->name.len + p->value.len + 2;
        if (need > CL_PROPS_MAX) too_big = true;
    }
    if (too_big) return MQ_ERR_FULL;
    if (!buf) {
        *len = need;
        return MQ_OK;
    }
    if (need > cap) return MQ_ERR_FULL;
    uint8_t *w = buf;
    for (size_t i = 0; i < n; i++) {
        const MsgProp *p = &props[i];
        memcpy(w, p->name.ptr, p->name.len);
        w += p->name.len;
        *w++ = MSG_PROP_NAME_SEP;
        if (p->value.len) memcpy(w, p->value.ptr, p->value.len);
        w += p->value.len;
        *w++ = MSG_PROP_PAIR_SEP;
    }
    MQ_ASSERT((size_t)(w - buf) == need);
    *len = need;
    return MQ_OK;
}

int msg_props_decode(MqSlice props, MsgProp *out, size_t cap, size_t *n) {
    if (!n || !slice_ok(props)) return MQ_ERR_INVAL;
    *n = 0;
    if (props.len == 0) return MQ_OK;
    const uint8_t *p = props.ptr;
    const uint8_t *end = p + props.len;
    size_t count = 0;
    while (p < end) {
        const uint8_t *pair_end = memchr(p, MSG_PROP_PAIR_SEP, (size_t)(end - p));
        if (!pair_end) pair_end = end; /* tolerated: the last 0x02 missing */
        const uint8_t *sep = memchr(p, MSG_PROP_NAME_SEP, (size_t)(pair_end - p));
        if (!sep || sep == p) return MQ_ERR_CORRUPT;
        const uint8_t *value = sep + 1;
        if (memchr(value, MSG_PROP_NAME_SEP, (size_t)(pair_end - value))) return MQ_ERR_CORRUPT;
        if (out) {
            if (count >= cap) return MQ_ERR_FULL;
            out[count].name = mq_slice(p, (size_t)(sep - p));
            out[count].value = mq_slice(value, (size_t)(pair_end - value));
        }
        count++;
        if (pair_end == end) break;
        p = pair_end + 1;
    }
    *n = count;
    return MQ_OK;
}

bool msg_prop_get(MqSlice props, const char *name, MqSlice *value) {
    if (!name || !value || !slice_ok(props)) return false;
    if (props.len == 0) return false;
    return cl_prop_find(props, name, value);
}

bool msg_prop_name_reserved(MqSlice name) {
    if (!slice_ok(name)) return false;
    for (size_t i = 0; i < sizeof(system_props) / sizeof(system_props[0]); i++)
        if (is_exactly(name.ptr, name.len, system_props[i])) return true;
    return false;
}

/* ======================================================================
 * Offset message id
 * ====================================================================== */

static const char hex_digits[] = "0123456789ABCDEF";

static void hex_upper(const uint8_t *b, size_t n, char *out) {
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = hex_digits[b[i] >> 4];
        out[2 * i + 1] = hex_digits[b[i] & 0xF];
    }
    out[2 * n] = '\0';
}

static int hex_value(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
}

static void put_be(uint8_t *p, uint64_t v, size_t n) {
    for (size_t i = 0; i < n; i++) p[i] = (uint8_t)(v >> (8 * (n - 1 - i)));
}

static uint64_t get_be(const uint8_t *p, size_t n) {
    uint64_t v = 0;
    for (size_t i = 0; i < n; i++) v = (v << 8) | p[i];
    return v;
}

void msg_id_encode(const uint8_t store_host[8], uint64_t phys_off, char out[33]) {
    uint8_t raw[16];
    memcpy(raw, store_host, 4);
    put_be(raw + 4, mq_get_u32(store_host + 4), 4);
    put_be(raw + 8, phys_off, 8);
    hex_upper(raw, sizeof(raw), out);
}

int msg_id_decode(const char *id, size_t len, uint8_t store_host[8], uint64_t *phys_off) {
    if (!id || !store_host || !phys_off || len != MSG_ID_LEN) return MQ_ERR_INVAL;
    uint8_t raw[16];
    for (size_t i = 0; i < sizeof(raw); i++) {
        int hi = hex_value(id[2 * i]);
        int lo = hex_value(id[2 * i + 1]);
        if (hi < 0 || lo < 0) return MQ_ERR_INVAL;
        raw[i] = (uint8_t)(hi << 4 | lo);
    }
    memcpy(store_host, raw, 4);
    mq_put_u32(store_host + 4, (uint32_t)get_be(raw + 4, 4));
    *phys_off = get_be(raw + 8, 8);
    return MQ_OK;
}

/* ======================================================================
 * Unique id
 * ====================================================================== */

/* (epoch ms << 16) | counter of the last id made: strictly increasing. */
static _Atomic uint64_t uniq_clock;
static uint32_t uniq_random; /* written once under uniq_once */
static pthread_once_t uniq_once = PTHREAD_ONCE_INIT;

static void uniq_init(void) {
    uint32_t r = 0;
    if (getrandom(&r, sizeof(r), GRND_NONBLOCK) != (ssize_t)sizeof(r)) {
        /* no entropy yet: mix the clocks and the pid instead */
        uint64_t mix = (uint64_t)mq_mono_ns() ^ ((uint64_t)mq_now_ms() << 20) ^ (uint64_t)getpid();
        r = (uint32_t)mq_hash64(&mix, sizeof(mix));
    }
    uniq_random = r;
}

/* Days since 1970-01-01 of year 'y', month 'm' (1..12), day 'd'
 * (H. Hinnant's days_from_civil; proleptic Gregorian). */
static int64_t days_from_civil(int64_t y, int64_t m, int64_t d) {
    y -= m <= 2;
    int64_t era = (y >= 0 ? y : y - 399) / 400;
    int64_t yoe = y - era * 400;
    int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

/* month_start_ms is the epoch ms of 00:00 UTC on the first day of the
 * month holding 'ms' (>= 0): civil_from_days, then day 1 of that month. */
static int64_t month_start_ms(int64_t ms) {
    int64_t z = ms / 86400000 + 719468;
    int64_t era = (z >= 0 ? z : z - 146096) / 146097;
    int64_t doe = z - era * 146097;
    int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    int64_t mp = (5 * doy + 2) / 153;
    int64_t m = mp < 10 ? mp + 3 : mp - 9;
    int64_t y = yoe + era * 400 + (m <= 2);
    return days_from_civil(y, m, 1) * 86400000;
}

void msg_uniq_id(const uint8_t ip[4], char out[33]) {
    pthread_once(&uniq_once, uniq_init);
    int64_t now_ms = mq_now_ms();
    uint64_t now = (uint64_t)(now_ms > 0 ? now_ms : 0) << 16;
    uint64_t old = atomic_load_explicit(&uniq_clock, memory_order_relaxed);
    uint64_t next;
    do {
        next = old + 1 > now ? old + 1 : now;
    } while (!atomic_compare_exchange_weak_explicit(&uniq_clock, &old, next,
                                                    memory_order_relaxed,
                                                    memory_order_relaxed));
    int64_t ms = (int64_t)(next >> 16);
    uint8_t raw[16];
    if (ip)
        memcpy(raw, ip, 4);
    else
        memset(raw, 0, 4);
    put_be(raw + 4, (uint64_t)getpid() & 0xFFFF, 2);
    put_be(raw + 6, uniq_random, 4);
    put_be(raw + 10, (uint64_t)(ms - month_start_ms(ms)) & 0xFFFFFFFFu, 4);
    put_be(raw + 14, next & 0xFFFF, 2);
    hex_upper(raw, sizeof(raw), out);
}

/* ======================================================================
 * Tags
 * ====================================================================== */

uint64_t msg_tag_hash(MqSlice tag) { return store_tag_hash(tag); }

static bool is_blank(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

static bool slice_eq(MqSlice a, MqSlice b) {
    return a.len == b.len && (a.len == 0 || memcmp(a.ptr, b.ptr, a.len) == 0);
}

/* trimmed returns [b, e) without blanks at either end. */
static MqSlice trimmed(const char *b, const char *e) {
    while (b < e && is_blank(*b)) b++;
    while (e > b && is_blank(e[-1])) e--;
    return mq_slice(b, (size_t)(e - b));
}

/* find_or_or returns the first "||" in [p, e), or 'e'. */
static const char *find_or_or(const char *p, const char *e) {
    for (; p + 1 < e; p++)
        if (p[0] == '|' && p[1] == '|') return p;
    return e;
}

int msg_tag_expr_parse(const char *expr, size_t len, MqSlice *tags, size_t cap, size_t *n,
                       bool *all) {
    if (!n || !all || (len > 0 && !expr) || (cap > 0 && !tags)) return MQ_ERR_INVAL;
    if (len == 0) {
        *all = true;
        *n = 0;
        return MQ_OK;
    }
    MqSlice whole = trimmed(expr, expr + len);
    if (whole.len == 0 || (whole.len == 1 && *(const char *)whole.ptr == '*')) {
        *all = true;
        *n = 0;
        return MQ_OK;
    }
    const char *p = whole.ptr;
    const char *end = p + whole.len;
    size_t count = 0;
    for (;;) {
        const char *op = find_or_or(p, end);
        MqSlice tag = trimmed(p, op);
        if (tag.len == 0) return MQ_ERR_INVAL;
        if (memchr(tag.ptr, '|', tag.len)) return MQ_ERR_INVAL;
        if (tag.len == 1 && *(const char *)tag.ptr == '*') return MQ_ERR_INVAL;
        bool dup = false;
        for (size_t i = 0; i < count && !dup; i++) dup = slice_eq(tags[i], tag);
        if (!dup) {
            if (count >= cap) return MQ_ERR_FULL;
            tags[count++] = tag;
        }
        if (op == end) break;
        p = op + 2;
    }
    *all = false;
    *n = count;
    return MQ_OK;
}

bool msg_tag_expr_match(const MqSlice *tags, size_t n, bool all, MqSlice tag) {
    if (all) return true;
    for (size_t i = 0; i < n; i++)
        if (slice_eq(tags[i], tag)) return true;
    return false;
}
