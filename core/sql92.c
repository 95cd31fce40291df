/*
 * sql92.c - the SQL92 message selector: see sql92.h for the contract and
 * docs/filters.md for the language.  A recursive-descent parser (bounded
 * by SQL92_DEPTH_MAX) turns the text into a postfix program, which
 * sql92_match runs on a small fixed stack: no recursion, no allocation.
 * Calls only mq.h and libc.
 */
#define _GNU_SOURCE /* memmem */
#include "sql92.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ======================================================================
 * The compiled form
 * ====================================================================== */

/* Three-valued truth.  T3_U is SQL's UNKNOWN. */
enum { T3_F = 0, T3_T = 1, T3_U = 2 };

/* A number: an exact 64-bit integer or a double. */
typedef struct Num {
    bool is_int; /* 'i' holds the value, else 'd' */
    int64_t i;
    double d;
} Num;

enum {
    OPD_PROP, /* a property: its name is pool[off..off+len), then a NUL */
    OPD_STR,  /* a string literal: pool[off..off+len), unescaped */
    OPD_NUM,  /* a number literal: 'n' */
    OPD_BOOL, /* TRUE or FALSE: 'b' */
    OPD_NULL, /* NULL */
};

/* One operand of a predicate. */
typedef struct Operand {
    uint8_t kind; /* OPD_* */
    bool b;       /* OPD_BOOL: the value */
    uint32_t off; /* OPD_PROP, OPD_STR: first byte in the pool */
    uint32_t len; /* OPD_PROP, OPD_STR: bytes (a name's NUL not counted) */
    Num n;        /* OPD_NUM: the value */
} Operand;

enum {
    OP_CONST,      /* push 't' */
    OP_NOT,        /* negate the top of the stack */
    OP_AND,        /* replace the top 'count' values by their AND */
    OP_OR,         /* replace the top 'count' values by their OR */
    OP_EQ,         /* opd[0] = opd[1] */
    OP_LT,         /* opd[0] < opd[1] (GE is its negation) */
    OP_GT,         /* opd[0] > opd[1] (LE is its negation) */
    OP_BETWEEN,    /* opd[1] <= opd[0] <= opd[2] */
    OP_IN,         /* opd[0] equals one of opd[1..count] */
    OP_ISNULL,     /* opd[0] is NULL (never UNKNOWN) */
    OP_CONTAINS,   /* opd[1] occurs in opd[0] */
    OP_STARTSWITH, /* opd[0] starts with opd[1] */
    OP_ENDSWITH,   /* opd[0] ends with opd[1] */
};

/* One instruction of the postfix program.  Predicates (OP_EQ and after)
 * push one value; OP_AND/OP_OR pop 'count' and push one. */
typedef struct Node {
    uint8_t op;     /* OP_* */
    uint8_t neg;    /* 1: negate the predicate's result (<>, NOT IN, IS NOT NULL...) */
    uint8_t t;      /* OP_CONST: T3_* */
    uint16_t count; /* OP_AND, OP_OR: values popped; OP_IN: list items */
    uint32_t opd;   /* predicates: index of the first operand */
} Node;

/* The block sql92_parse returns:
 *
 *   +-------+--------------------+------------------+-----------------+
 *   | Sql92 | Operand[opd_count] | Node[node_count] | pool (pool_len) |
 *   +-------+--------------------+------------------+-----------------+
 */
struct Sql92 {
    uint32_t node_count; /* instructions, >= 1 */
    uint32_t opd_count;  /* operands */
    uint32_t pool_len;   /* bytes of names and strings */
    const Node *nodes;   /* postfix program, in this block */
    const Operand *opds; /* in this block */
    const char *pool;    /* in this block */
};

_Static_assert(SQL92_NODES_MAX <= UINT16_MAX, "Node.count must hold any count");
_Static_assert(sizeof(Operand) % _Alignof(Node) == 0, "nodes follow operands");
_Static_assert(sizeof(struct Sql92) % _Alignof(Operand) == 0, "operands follow the header");

/* ======================================================================
 * Numbers
 * ====================================================================== */

static bool is_digit(char c) { return c >= '0' && c <= '9'; }

/* number_syntax measures the number that starts 'p' ('n' bytes left):
 * digits [. digits] [e [+-] digits], or . digits [e...].  Returns its
 * length (0 when there is none) and sets '*is_int' when it has neither a
 * point nor an exponent. */
static size_t number_syntax(const char *p, size_t n, bool *is_int) {
    size_t i = 0;
    size_t int_digits = 0;
    size_t frac_digits = 0;
    while (i < n && is_digit(p[i])) i++;
    int_digits = i;
    *is_int = true;
    if (i < n && p[i] == '.') {
        size_t j = i + 1;
        while (j < n && is_digit(p[j])) j++;
        frac_digits = j - i - 1;
        if (int_digits == 0 && frac_digits == 0) return 0;
        i = j;
        *is_int = false;
    }
    if (int_digits == 0 && frac_digits == 0) return 0;
    if (i < n && (p[i] == 'e' || p[i] == 'E')) {
        size_t j = i + 1;
        if (j < n && (p[j] == '+' || p[j] == '-')) j++;
        if (j < n && is_digit(p[j])) {
            while (j < n && is_digit(p[j])) j++;
            i = j;
            *is_int = false;
        }
    }
    return i;
}

/* number_value converts 'n' bytes that number_syntax accepted (after an
 * optional sign) into '*out'.  Integers beyond int64 become doubles.
 * Assumes: n <= SQL92_NUM_MAX. */
static void number_value(const char *p, size_t n, bool is_int, Num *out) {
    MQ_ASSERT(n <= SQL92_NUM_MAX);
    bool neg = n > 0 && p[0] == '-';
    if (is_int) {
        size_t i = (n > 0 && (p[0] == '-' || p[0] == '+')) ? 1 : 0;
        uint64_t mag = 0;
        bool fits = true;
        for (; i < n && fits; i++) {
            unsigned d = (unsigned)(p[i] - '0');
            if (mag > (UINT64_MAX - d) / 10)
                fits = false;
            else
                mag = mag * 10 + d;
        }
        if (fits && (neg ? mag <= (uint64_t)INT64_MAX + 1 : mag <= (uint64_t)INT64_MAX)) {
            out->is_int = true;
            out->i = neg ? (int64_t)(0 - mag) : (int64_t)mag;
            out->d = 0;
            return;
        }
    }
    char buf[SQL92_NUM_MAX + 1];
    memcpy(buf, p, n);
    buf[n] = '\0';
    out->is_int = false;
    out->i = 0;
    out->d = strtod(buf, NULL);
}

/* to_number converts a property value strictly: the whole value must be
 * [+-] then a number as number_syntax reads it, at most SQL92_NUM_MAX
 * bytes.  False when it is not a number. */
static bool to_number(MqSlice v, Num *out) {
    const char *p = v.ptr;
    size_t n = v.len;
    if (n == 0 || n > SQL92_NUM_MAX) return false;
    size_t sign = (p[0] == '+' || p[0] == '-') ? 1 : 0;
    bool is_int = true;
    if (n == sign || number_syntax(p + sign, n - sign, &is_int) != n - sign) return false;
    number_value(p, n, is_int, out);
    return true;
}

/* int_dbl_cmp compares 'i' with 'd' exactly (no rounding of 'i'). */
static int int_dbl_cmp(int64_t i, double d) {
    if (d >= 9223372036854775808.0) return -1;
    if (d < -9223372036854775808.0) return 1;
    int64_t t = (int64_t)d; /* toward zero; in range by the checks above */
    if (i != t) return i < t ? -1 : 1;
    double frac = d - (double)t; /* exact: the fractional part of d */
    return frac > 0 ? -1 : frac < 0 ? 1 : 0;
}

static int num_cmp(const Num *a, const Num *b) {
    if (a->is_int && b->is_int) return a->i < b->i ? -1 : a->i > b->i;
    if (a->is_int) return int_dbl_cmp(a->i, b->d);
    if (b->is_int) return -int_dbl_cmp(b->i, a->d);
    return a->d < b->d ? -1 : a->d > b->d;
}

/* ======================================================================
 * Lexer
 * ====================================================================== */

typedef enum TokKind {
    TK_END,
    TK_LPAREN,
    TK_RPAREN,
    TK_COMMA,
    TK_PLUS,
    TK_MINUS,
    TK_EQ,
    TK_NE,
    TK_LT,
    TK_LE,
    TK_GT,
    TK_GE,
    TK_IDENT,
    TK_STRING,
    TK_NUMBER,
    /* keywords, in the order of KEYWORDS */
    TK_NOT,
    TK_AND,
    TK_OR,
    TK_BETWEEN,
    TK_IN,
    TK_IS,
    TK_TRUE,
    TK_FALSE,
    TK_NULL,
    TK_CONTAINS,
    TK_STARTSWITH,
    TK_ENDSWITH,
} TokKind;

static const char *const KEYWORDS[] = {
    "NOT",  "AND",   "OR",   "BETWEEN",  "IN",         "IS",
    "TRUE", "FALSE", "NULL", "CONTAINS", "STARTSWITH", "ENDSWITH",
};

typedef struct Token {
    TokKind kind;
    size_t pos; /* first byte in the source */
    size_t len; /* source bytes (a string's quotes included) */
    Num num;    /* TK_NUMBER */
} Token;

typedef struct Parser {
    const char *src; /* the expression, not NUL-terminated */
    size_t len;      /* its bytes */
    size_t at;       /* lexer cursor */
    Token tok;       /* the current token (one-token lookahead) */
    int depth;       /* open parentheses */
    Sql92Error *err; /* filled on failure */
    Node *nodes;     /* scratch program */
    size_t node_count;
    size_t node_cap;
    Operand *opds; /* scratch operands */
    size_t opd_count;
    size_t opd_cap;
    char *pool; /* scratch names and strings */
    size_t pool_len;
    size_t pool_cap;
} Parser;

static bool is_blank(char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f';
}

static bool is_ident_start(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == '$';
}

static bool is_ident_char(char c) { return is_ident_start(c) || is_digit(c) || c == '.'; }

static bool ascii_ieq(const char *a, size_t n, const char *word) {
    if (strlen(word) != n) return false;
    for (size_t i = 0; i < n; i++) {
        char c = a[i];
        if (c >= 'a' && c <= 'z') c = (char)(c - 'a' + 'A');
        if (c != word[i]) return false;
    }
    return true;
}

static int fail(Parser *p, size_t pos, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static int fail(Parser *p, size_t pos, const char *fmt, ...) {
    p->err->pos = pos;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(p->err->msg, sizeof(p->err->msg), fmt, ap);
    va_end(ap);
    return MQ_ERR_INVAL;
}

/* describe writes token 't' for a message: "end of expression" or its
 * source text in quotes, at most 32 bytes, non-ASCII shown as '?'. */
static void describe(const Parser *p, const Token *t, char *buf, size_t cap) {
    if (t->kind == TK_END) {
        snprintf(buf, cap, "end of expression");
        return;
    }
    char text[40];
    size_t n = t->len > 32 ? 32 : t->len;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)p->src[t->pos + i];
        text[i] = (c < 0x20 || c > 0x7e) ? '?' : (char)c;
    }
    text[n] = '\0';
    const char *q = t->kind == TK_STRING ? "" : "'";
    snprintf(buf, cap, "%s%s%s%s", q, text, t->len > 32 ? "..." : "", q);
}

/* expected_at fails at token 't': "expected <what>, found <t>". */
static int expected_at(Parser *p, const Token *t, const char *what) {
    char found[48];
    describe(p, t, found, sizeof(found));
    return fail(p, t->pos, "expected %s, found %s", what, found);
}

/* expected fails at the current token. */
static int expected(Parser *p, const char *what) { return expected_at(p, &p->tok, what); }

static int lex_number(Parser *p, size_t start) {
    bool is_int = true;
    size_t n = number_syntax(p->src + start, p->len - start, &is_int);
    MQ_ASSERT(n > 0);
    size_t end = start + n;
    if (is_int && end < p->len && (p->src[end] == 'l' || p->src[end] == 'L')) end++;
    if (end < p->len && is_ident_char(p->src[end])) return fail(p, start, "malformed number");
    if (n > SQL92_NUM_MAX) return fail(p, start, "number longer than %d bytes", SQL92_NUM_MAX);
    number_value(p->src + start, n, is_int, &p->tok.num);
    p->tok.kind = TK_NUMBER;
    p->tok.len = end - start;
    p->at = end;
    return MQ_OK;
}

static int lex_string(Parser *p, size_t start) {
    size_t i = start + 1;
    for (;;) {
        if (i >= p->len) return fail(p, start, "unterminated string");
        if (p->src[i] == '\'') {
            if (i + 1 < p->len && p->src[i + 1] == '\'') {
                i += 2;
                continue;
            }
            break;
        }
        i++;
    }
    p->tok.kind = TK_STRING;
    p->tok.len = i + 1 - start;
    p->at = i + 1;
    return MQ_OK;
}

/* lex reads the next token into p->tok. */
static int lex(Parser *p) {
    while (p->at < p->len && is_blank(p->src[p->at])) p->at++;
    size_t s = p->at;
    Token *t = &p->tok;
    t->pos = s;
    t->len = 1;
    if (s >= p->len) {
        t->kind = TK_END;
        t->len = 0;
        return MQ_OK;
    }
    char c = p->src[s];
    char next = s + 1 < p->len ? p->src[s + 1] : '\0';
    switch (c) {
    case '(': t->kind = TK_LPAREN; break;
    case ')': t->kind = TK_RPAREN; break;
    case ',': t->kind = TK_COMMA; break;
    case '+': t->kind = TK_PLUS; break;
    case '-': t->kind = TK_MINUS; break;
    case '=':
        if (next == '=') return fail(p, s, "unknown operator '=='");
        t->kind = TK_EQ;
        break;
    case '<':
        t->kind = next == '=' ? TK_LE : next == '>' ? TK_NE : TK_LT;
        t->len = t->kind == TK_LT ? 1 : 2;
        break;
    case '>':
        t->kind = next == '=' ? TK_GE : TK_GT;
        t->len = t->kind == TK_GT ? 1 : 2;
        break;
    case '!':
        if (next != '=') return fail(p, s, "unknown operator '!', use NOT");
        t->kind = TK_NE;
        t->len = 2;
        break;
    case '&':
        if (next == '&') return fail(p, s, "unknown operator '&&', use AND");
        return fail(p, s, "unexpected character '&'");
    case '|':
        if (next == '|') return fail(p, s, "unknown operator '||', use OR");
        return fail(p, s, "unexpected character '|'");
    case '"': return fail(p, s, "unexpected character '\"', strings take single quotes");
    case '\'': return lex_string(p, s);
    default:
        if (is_digit(c) || (c == '.' && is_digit(next))) return lex_number(p, s);
        if (is_ident_start(c)) {
            size_t e = s + 1;
            while (e < p->len && is_ident_char(p->src[e])) e++;
            t->kind = TK_IDENT;
            t->len = e - s;
            for (size_t k = 0; k < sizeof(KEYWORDS) / sizeof(KEYWORDS[0]); k++) {
                if (ascii_ieq(p->src + s, t->len, KEYWORDS[k])) {
                    t->kind = (TokKind)(TK_NOT + k);
                    break;
                }
            }
            p->at = e;
            return MQ_OK;
        }
        if ((unsigned char)c >= 0x21 && (unsigned char)c <= 0x7e)
            return fail(p, s, "unexpected character '%c'", c);
        return fail(p, s, "unexpected byte 0x%02x", (unsigned char)c);
    }
    p->at = s + t->len;
    return MQ_OK;
}

/* ======================================================================
 * Parser: emits the postfix program into the scratch arrays
 * ====================================================================== */

/* room checks the node limit before one more node or operand made by the
 * token at 'pos'. */
static int room(Parser *p, size_t pos) {
    if (p->node_count + p->opd_count >= SQL92_NODES_MAX)
        return fail(p, pos, "expression has more than %d nodes", SQL92_NODES_MAX);
    return MQ_OK;
}

static int emit(Parser *p, size_t pos, Node n) {
    int rc = room(p, pos);
    if (rc != MQ_OK) return rc;
    MQ_ASSERT(p->node_count < p->node_cap);
    p->nodes[p->node_count++] = n;
    return MQ_OK;
}

/* pool_put copies 'n' bytes of a name (with a NUL after) or, with
 * 'unquote', of a string's inside (each '' becomes ') into the pool and
 * sets o->off and o->len. */
static void pool_put(Parser *p, const char *s, size_t n, bool unquote, Operand *o) {
    size_t start = p->pool_len;
    for (size_t i = 0; i < n; i++) {
        MQ_ASSERT(p->pool_len < p->pool_cap);
        p->pool[p->pool_len++] = s[i];
        if (unquote && s[i] == '\'') i++; /* the lexer checked it is doubled */
    }
    o->off = (uint32_t)start;
    o->len = (uint32_t)(p->pool_len - start);
    if (!unquote) {
        MQ_ASSERT(p->pool_len < p->pool_cap);
        p->pool[p->pool_len++] = '\0';
    }
}

static bool is_literal_num(const Operand *o) { return o->kind == OPD_NUM; }
static bool is_numeric(const Operand *o) { return o->kind == OPD_PROP || o->kind == OPD_NUM; }

/* operand reads a property or a value (a signed number, a string, TRUE,
 * FALSE, NULL) and appends it; '*start' (when not NULL) is its first token. */
static int operand(Parser *p, Token *start) {
    Operand o = {0};
    if (start) *start = p->tok;
    int rc = room(p, p->tok.pos);
    if (rc != MQ_OK) return rc;
    switch (p->tok.kind) {
    case TK_IDENT:
        o.kind = OPD_PROP;
        pool_put(p, p->src + p->tok.pos, p->tok.len, false, &o);
        break;
    case TK_STRING:
        o.kind = OPD_STR;
        pool_put(p, p->src + p->tok.pos + 1, p->tok.len - 2, true, &o);
        break;
    case TK_NUMBER:
        o.kind = OPD_NUM;
        o.n = p->tok.num;
        break;
    case TK_PLUS:
    case TK_MINUS: {
        bool minus = p->tok.kind == TK_MINUS;
        if ((rc = lex(p)) != MQ_OK) return rc;
        if (p->tok.kind != TK_NUMBER)
            return expected(p, minus ? "a number after '-'" : "a number after '+'");
        o.kind = OPD_NUM;
        o.n = p->tok.num;
        if (minus && o.n.is_int) {
            o.n.i = -o.n.i; /* the lexer's integers are >= 0 */
        } else if (minus) {
            o.n.d = -o.n.d;
        }
        break;
    }
    case TK_TRUE:
    case TK_FALSE:
        o.kind = OPD_BOOL;
        o.b = p->tok.kind == TK_TRUE;
        break;
    case TK_NULL: o.kind = OPD_NULL; break;
    default: return expected(p, "a property or a value");
    }
    MQ_ASSERT(p->opd_count < p->opd_cap);
    p->opds[p->opd_count++] = o;
    return lex(p);
}

/* numeric checks that operand 'i', read from token 't', can be compared
 * as a number: a property or a number literal. */
static int numeric(Parser *p, size_t i, const Token *t) {
    if (is_numeric(&p->opds[i])) return MQ_OK;
    return expected_at(p, t, "a number or a property");
}

static int predicate(Parser *p, size_t op_pos, uint8_t op, bool neg, uint16_t count, size_t first) {
    return emit(p, op_pos, (Node){.op = op, .neg = neg, .count = count, .opd = (uint32_t)first});
}

/* in_list reads "( item, ... )" after IN. */
static int in_list(Parser *p, size_t op_pos, bool neg, size_t first) {
    int rc;
    if (p->tok.kind != TK_LPAREN) return expected(p, "'(' after IN");
    if ((rc = lex(p)) != MQ_OK) return rc;
    size_t count = 0;
    for (;;) {
        TokKind k = p->tok.kind;
        if (k != TK_STRING && k != TK_NUMBER && k != TK_PLUS && k != TK_MINUS)
            return expected(p, "a string or a number");
        if (count == SQL92_IN_MAX)
            return fail(p, p->tok.pos, "more than %d items in an IN list", SQL92_IN_MAX);
        if ((rc = operand(p, NULL)) != MQ_OK) return rc;
        count++;
        if (p->tok.kind == TK_RPAREN) break;
        if (p->tok.kind != TK_COMMA) return expected(p, "',' or ')'");
        if ((rc = lex(p)) != MQ_OK) return rc;
    }
    if ((rc = lex(p)) != MQ_OK) return rc;
    return predicate(p, op_pos, OP_IN, neg, (uint16_t)count, first);
}

/* text_op reads the string after CONTAINS, STARTSWITH or ENDSWITH. */
static int text_op(Parser *p, size_t op_pos, uint8_t op, bool neg, size_t first,
                   const Token *first_tok) {
    const char *name = op == OP_CONTAINS     ? "CONTAINS"
                       : op == OP_STARTSWITH ? "STARTSWITH"
                                             : "ENDSWITH";
    int rc;
    uint8_t kind = p->opds[first].kind;
    char what[64];
    snprintf(what, sizeof(what), "a property or a string before %s", name);
    if (kind != OPD_PROP && kind != OPD_STR) return expected_at(p, first_tok, what);
    if ((rc = lex(p)) != MQ_OK) return rc;
    if (p->tok.kind != TK_STRING) return expected(p, "a string");
    if (p->tok.len == 2) return fail(p, p->tok.pos, "empty string after %s", name);
    if ((rc = operand(p, NULL)) != MQ_OK) return rc;
    return predicate(p, op_pos, op, neg, 0, first);
}

static bool starts_comparison(TokKind k) {
    switch (k) {
    case TK_EQ:
    case TK_NE:
    case TK_LT:
    case TK_LE:
    case TK_GT:
    case TK_GE:
    case TK_BETWEEN:
    case TK_IN:
    case TK_IS:
    case TK_NOT:
    case TK_CONTAINS:
    case TK_STARTSWITH:
    case TK_ENDSWITH: return true;
    default: return false;
    }
}

/* comparison reads "operand <op> ..." (or a lone TRUE / FALSE). */
static int comparison(Parser *p) {
    int rc;
    size_t first = p->opd_count;
    Token a;
    Token b;
    if ((rc = operand(p, &a)) != MQ_OK) return rc;
    if ((a.kind == TK_TRUE || a.kind == TK_FALSE) && !starts_comparison(p->tok.kind)) {
        p->opd_count--; /* a boolean constant: no operand */
        return emit(p, a.pos, (Node){.op = OP_CONST, .t = a.kind == TK_TRUE ? T3_T : T3_F});
    }
    size_t op_pos = p->tok.pos;
    TokKind k = p->tok.kind;
    bool neg = false;
    switch (k) {
    case TK_EQ:
    case TK_NE:
        if (p->opds[first].kind == OPD_NULL) return fail(p, a.pos, "use IS NULL to test for null");
        if ((rc = lex(p)) != MQ_OK) return rc;
        if ((rc = operand(p, &b)) != MQ_OK) return rc;
        if (p->opds[first + 1].kind == OPD_NULL)
            return fail(p, b.pos, "use IS NULL to test for null");
        return predicate(p, op_pos, OP_EQ, k == TK_NE, 0, first);
    case TK_LT:
    case TK_GE:
    case TK_GT:
    case TK_LE:
        if ((rc = numeric(p, first, &a)) != MQ_OK) return rc;
        if ((rc = lex(p)) != MQ_OK) return rc;
        if ((rc = operand(p, &b)) != MQ_OK) return rc;
        if ((rc = numeric(p, first + 1, &b)) != MQ_OK) return rc;
        return predicate(p, op_pos, (k == TK_LT || k == TK_GE) ? OP_LT : OP_GT,
                         k == TK_GE || k == TK_LE, 0, first);
    case TK_IS:
        if ((rc = lex(p)) != MQ_OK) return rc;
        if (p->tok.kind == TK_NOT) {
            neg = true;
            if ((rc = lex(p)) != MQ_OK) return rc;
        }
        if (p->tok.kind != TK_NULL)
            return expected(p, neg ? "NULL after IS NOT" : "NULL or NOT NULL after IS");
        if ((rc = lex(p)) != MQ_OK) return rc;
        return predicate(p, op_pos, OP_ISNULL, neg, 0, first);
    case TK_NOT:
        neg = true;
        if ((rc = lex(p)) != MQ_OK) return rc;
        k = p->tok.kind;
        if (k != TK_BETWEEN && k != TK_IN && k != TK_CONTAINS && k != TK_STARTSWITH &&
            k != TK_ENDSWITH)
            return expected(p, "BETWEEN, IN, CONTAINS, STARTSWITH or ENDSWITH after NOT");
        break;
    case TK_BETWEEN:
    case TK_IN:
    case TK_CONTAINS:
    case TK_STARTSWITH:
    case TK_ENDSWITH: break;
    default: return expected(p, "a comparison operator");
    }
    /* BETWEEN, IN and the text operators, maybe after NOT */
    if (k == TK_IN) {
        if ((rc = lex(p)) != MQ_OK) return rc;
        return in_list(p, op_pos, neg, first);
    }
    if (k == TK_CONTAINS) return text_op(p, op_pos, OP_CONTAINS, neg, first, &a);
    if (k == TK_STARTSWITH) return text_op(p, op_pos, OP_STARTSWITH, neg, first, &a);
    if (k == TK_ENDSWITH) return text_op(p, op_pos, OP_ENDSWITH, neg, first, &a);
    MQ_ASSERT(k == TK_BETWEEN);
    if ((rc = numeric(p, first, &a)) != MQ_OK) return rc;
    if ((rc = lex(p)) != MQ_OK) return rc;
    if ((rc = operand(p, &b)) != MQ_OK) return rc;
    if ((rc = numeric(p, first + 1, &b)) != MQ_OK) return rc;
    size_t lo_pos = b.pos;
    if (p->tok.kind != TK_AND) return expected(p, "AND after BETWEEN's lower bound");
    if ((rc = lex(p)) != MQ_OK) return rc;
    if ((rc = operand(p, &b)) != MQ_OK) return rc;
    if ((rc = numeric(p, first + 2, &b)) != MQ_OK) return rc;
    const Operand *lo = &p->opds[first + 1];
    const Operand *hi = &p->opds[first + 2];
    if (is_literal_num(lo) && is_literal_num(hi) && num_cmp(&lo->n, &hi->n) > 0)
        return fail(p, lo_pos, "lower bound of BETWEEN is greater than its upper bound");
    return predicate(p, op_pos, OP_BETWEEN, neg, 0, first);
}

static int or_expr(Parser *p);

/* primary: "(" or_expr ")" or a comparison. */
static int primary(Parser *p) {
    if (p->tok.kind != TK_LPAREN) return comparison(p);
    if (p->depth == SQL92_DEPTH_MAX)
        return fail(p, p->tok.pos, "parentheses nested deeper than %d", SQL92_DEPTH_MAX);
    p->depth++;
    int rc = lex(p);
    if (rc == MQ_OK) rc = or_expr(p);
    if (rc != MQ_OK) return rc;
    if (p->tok.kind != TK_RPAREN) return expected(p, "')'");
    p->depth--;
    return lex(p);
}

/* not_expr: NOT* primary.  An even number of NOTs cancels out (in three-
 * valued logic too: NOT NOT UNKNOWN is UNKNOWN). */
static int not_expr(Parser *p) {
    size_t nots = 0;
    size_t pos = p->tok.pos;
    int rc;
    while (p->tok.kind == TK_NOT) {
        nots++;
        if ((rc = lex(p)) != MQ_OK) return rc;
    }
    if ((rc = primary(p)) != MQ_OK) return rc;
    if (nots % 2) return emit(p, pos, (Node){.op = OP_NOT});
    return MQ_OK;
}

/* logic reads operand (<kw> operand)* for AND (over not_expr) or OR (over
 * and_expr), emitting one n-ary node when there are two or more. */
static int and_expr(Parser *p) {
    size_t count = 1;
    size_t pos = p->tok.pos;
    int rc = not_expr(p);
    while (rc == MQ_OK && p->tok.kind == TK_AND) {
        pos = p->tok.pos;
        if ((rc = lex(p)) == MQ_OK) rc = not_expr(p);
        count++;
    }
    if (rc != MQ_OK || count == 1) return rc;
    return emit(p, pos, (Node){.op = OP_AND, .count = (uint16_t)count});
}

static int or_expr(Parser *p) {
    size_t count = 1;
    size_t pos = p->tok.pos;
    int rc = and_expr(p);
    while (rc == MQ_OK && p->tok.kind == TK_OR) {
        pos = p->tok.pos;
        if ((rc = lex(p)) == MQ_OK) rc = and_expr(p);
        count++;
    }
    if (rc != MQ_OK || count == 1) return rc;
    return emit(p, pos, (Node){.op = OP_OR, .count = (uint16_t)count});
}

/* ======================================================================
 * sql92_parse / sql92_free
 * ====================================================================== */

static int parse_all(Parser *p) {
    int rc = lex(p);
    if (rc != MQ_OK) return rc;
    if (p->tok.kind == TK_END) return fail(p, 0, "empty expression");
    if ((rc = or_expr(p)) != MQ_OK) return rc;
    if (p->tok.kind != TK_END) return expected(p, "AND, OR or end of expression");
    return MQ_OK;
}

int sql92_parse(const char *expr, size_t len, Sql92 **out, Sql92Error *err) {
    Sql92Error scratch_err;
    Parser p = {.src = expr, .len = len, .err = err ? err : &scratch_err};
    if (!out || (!expr && len > 0)) return fail(&p, 0, "no expression");
    if (len > SQL92_EXPR_MAX)
        return fail(&p, SQL92_EXPR_MAX, "expression longer than %d bytes", SQL92_EXPR_MAX);
    if (!expr) p.src = "";

    /* Every node and operand comes from its own token, so there are at
     * most 'len' of each; names need a NUL each, strings lose two quotes. */
    size_t cap = (len < SQL92_NODES_MAX ? len : SQL92_NODES_MAX) + 1;
    p.node_cap = cap;
    p.opd_cap = cap;
    p.pool_cap = 2 * len + 1;
    void *scratch = malloc(cap * sizeof(Operand) + cap * sizeof(Node) + p.pool_cap);
    if (!scratch) return MQ_ERR_NOMEM;
    p.opds = scratch;
    p.nodes = (Node *)(p.opds + cap);
    p.pool = (char *)(p.nodes + cap);

    int rc = parse_all(&p);
    if (rc != MQ_OK) goto err_free_scratch;
    MQ_ASSERT(p.depth == 0 && p.node_count >= 1);

    size_t size =
        sizeof(Sql92) + p.opd_count * sizeof(Operand) + p.node_count * sizeof(Node) + p.pool_len;
    Sql92 *q = malloc(size);
    if (!q) {
        rc = MQ_ERR_NOMEM;
        goto err_free_scratch;
    }
    Operand *opds = (Operand *)(q + 1);
    Node *nodes = (Node *)(opds + p.opd_count);
    char *pool = (char *)(nodes + p.node_count);
    if (p.opd_count) memcpy(opds, p.opds, p.opd_count * sizeof(Operand));
    memcpy(nodes, p.nodes, p.node_count * sizeof(Node));
    if (p.pool_len) memcpy(pool, p.pool, p.pool_len);
    q->node_count = (uint32_t)p.node_count;
    q->opd_count = (uint32_t)p.opd_count;
    q->pool_len = (uint32_t)p.pool_len;
    q->nodes = nodes;
    q->opds = opds;
    q->pool = pool;
    free(scratch);
    *out = q;
    return MQ_OK;

err_free_scratch:
    free(scratch);
    return rc;
}

void sql92_free(Sql92 *q) { free(q); }

/* ======================================================================
 * Evaluation
 * ====================================================================== */

enum { V_NULL, V_STR, V_NUM, V_BOOL };

/* The value of an operand for one message. */
typedef struct Value {
    int kind;  /* V_* */
    MqSlice s; /* V_STR */
    Num n;     /* V_NUM */
    bool b;    /* V_BOOL */
} Value;

static void value_of(const Sql92 *q, const Operand *o, Sql92GetFn get, void *arg, Value *v) {
    switch (o->kind) {
    case OPD_PROP: v->kind = get(arg, q->pool + o->off, &v->s) ? V_STR : V_NULL; break;
    case OPD_STR:
        v->kind = V_STR;
        v->s = mq_slice(q->pool + o->off, o->len);
        break;
    case OPD_NUM:
        v->kind = V_NUM;
        v->n = o->n;
        break;
    case OPD_BOOL:
        v->kind = V_BOOL;
        v->b = o->b;
        break;
    default: v->kind = V_NULL; break;
    }
}

static bool as_num(const Value *v, Num *out) {
    if (v->kind == V_NUM) {
        *out = v->n;
        return true;
    }
    return v->kind == V_STR && to_number(v->s, out);
}

static bool as_bool(const Value *v, bool *out) {
    if (v->kind == V_BOOL) {
        *out = v->b;
        return true;
    }
    if (v->kind != V_STR) return false;
    if (ascii_ieq(v->s.ptr, v->s.len, "TRUE")) {
        *out = true;
        return true;
    }
    if (ascii_ieq(v->s.ptr, v->s.len, "FALSE")) {
        *out = false;
        return true;
    }
    return false;
}

static int t3(bool b) { return b ? T3_T : T3_F; }

/* equal: strings by bytes; with a boolean both sides as booleans; with a
 * number both sides as numbers.  A side that does not convert: UNKNOWN. */
static int equal(const Value *a, const Value *b) {
    if (a->kind == V_NULL || b->kind == V_NULL) return T3_U;
    if (a->kind == V_STR && b->kind == V_STR)
        return t3(a->s.len == b->s.len &&
                  (a->s.len == 0 || memcmp(a->s.ptr, b->s.ptr, a->s.len) == 0));
    if (a->kind == V_BOOL || b->kind == V_BOOL) {
        bool x;
        bool y;
        if (!as_bool(a, &x) || !as_bool(b, &y)) return T3_U;
        return t3(x == y);
    }
    Num x;
    Num y;
    if (!as_num(a, &x) || !as_num(b, &y)) return T3_U;
    return t3(num_cmp(&x, &y) == 0);
}

/* order compares 'a' with 'b' as numbers into '*cmp'; false = UNKNOWN. */
static bool order(const Value *a, const Value *b, int *cmp) {
    Num x;
    Num y;
    if (!as_num(a, &x) || !as_num(b, &y)) return false;
    *cmp = num_cmp(&x, &y);
    return true;
}

static int text_match(uint8_t op, const Value *hay, const Value *needle) {
    if (hay->kind != V_STR || needle->kind != V_STR) return T3_U;
    const char *h = hay->s.ptr;
    const char *n = needle->s.ptr;
    size_t hl = hay->s.len;
    size_t nl = needle->s.len;
    if (nl > hl) return T3_F;
    switch (op) {
    case OP_CONTAINS: return t3(memmem(h, hl, n, nl) != NULL);
    case OP_STARTSWITH: return t3(memcmp(h, n, nl) == 0);
    default: return t3(memcmp(h + hl - nl, n, nl) == 0);
    }
}

static int not3(int v) { return v == T3_U ? T3_U : v == T3_T ? T3_F : T3_T; }

static int leaf(const Sql92 *q, const Node *n, Sql92GetFn get, void *arg) {
    const Operand *o = &q->opds[n->opd];
    Value a;
    Value b;
    Value c;
    int cmp = 0;
    int r;
    value_of(q, &o[0], get, arg, &a);
    switch (n->op) {
    case OP_EQ:
        value_of(q, &o[1], get, arg, &b);
        r = equal(&a, &b);
        break;
    case OP_LT:
    case OP_GT:
        value_of(q, &o[1], get, arg, &b);
        if (!order(&a, &b, &cmp))
            r = T3_U;
        else
            r = t3(n->op == OP_LT ? cmp < 0 : cmp > 0);
        break;
    case OP_BETWEEN: {
        value_of(q, &o[1], get, arg, &b);
        value_of(q, &o[2], get, arg, &c);
        int lo = order(&a, &b, &cmp) ? t3(cmp >= 0) : T3_U;
        int hi = order(&a, &c, &cmp) ? t3(cmp <= 0) : T3_U;
        r = (lo == T3_F || hi == T3_F) ? T3_F : (lo == T3_U || hi == T3_U) ? T3_U : T3_T;
        break;
    }
    case OP_IN:
        r = T3_F;
        if (a.kind == V_NULL) {
            r = T3_U;
            break;
        }
        for (uint16_t i = 1; i <= n->count && r != T3_T; i++) {
            value_of(q, &o[i], get, arg, &b);
            int e = equal(&a, &b);
            if (e != T3_F) r = e;
        }
        break;
    case OP_ISNULL: r = t3(a.kind == V_NULL); break;
    default:
        value_of(q, &o[1], get, arg, &b);
        r = text_match(n->op, &a, &b);
        break;
    }
    return n->neg ? not3(r) : r;
}

bool sql92_match(const Sql92 *q, Sql92GetFn get, void *arg) {
    MQ_ASSERT(q && get);
    uint8_t stack[SQL92_NODES_MAX];
    size_t sp = 0;
    for (uint32_t k = 0; k < q->node_count; k++) {
        const Node *n = &q->nodes[k];
        switch (n->op) {
        case OP_CONST: stack[sp++] = n->t; break;
        case OP_NOT:
            MQ_ASSERT(sp >= 1);
            stack[sp - 1] = (uint8_t)not3(stack[sp - 1]);
            break;
        case OP_AND:
        case OP_OR: {
            MQ_ASSERT(n->count >= 2 && sp >= n->count);
            int stop = n->op == OP_AND ? T3_F : T3_T; /* the value that decides */
            int r = not3(stop);
            for (size_t i = sp - n->count; i < sp; i++) {
                if (stack[i] == stop)
                    r = stop;
                else if (stack[i] == T3_U && r != stop)
                    r = T3_U;
            }
            sp -= n->count;
            stack[sp++] = (uint8_t)r;
            break;
        }
        default:
            MQ_ASSERT(sp < SQL92_NODES_MAX);
            stack[sp++] = (uint8_t)leaf(q, n, get, arg);
            break;
        }
    }
    MQ_ASSERT(sp == 1);
    return stack[0] == T3_T;
}
