/*
 * router.c - segment-by-segment path matching: see router.h.
 */
#include "router.h"

#include <stdbool.h>
#include <string.h>

static const char *seg_end(const char *s) {
    while (*s && *s != '/') s++;
    return s;
}

/* Appends a parameter to 'm'; false when it does not fit. */
static bool add_param(RtMatch *m, size_t *used, const char *name, size_t name_len,
                      const char *value, size_t value_len) {
    if (m->n_params >= RT_MAX_PARAMS || *used + value_len + 1 > RT_BUF_MAX) return false;
    char *dst = m->buf + *used;
    memcpy(dst, value, value_len);
    dst[value_len] = '\0';
    m->params[m->n_params++] = (RtParam){name, name_len, dst};
    *used += value_len + 1;
    return true;
}

/* Matches 'path' against 'pattern', filling the parameters of 'm'. */
static bool match_path(const char *pattern, const char *path, RtMatch *m) {
    m->n_params = 0;
    size_t used = 0;
    if (pattern[0] != '/' || path[0] != '/') return false;
    const char *p = pattern + 1;
    const char *u = path + 1;
    for (;;) {
        const char *pe = seg_end(p);
        const char *ue = seg_end(u);
        size_t plen = (size_t)(pe - p);
        size_t ulen = (size_t)(ue - u);
        bool param = plen >= 2 && p[0] == '{' && p[plen - 1] == '}';
        if (param && plen >= 3 && p[plen - 2] == '*') {
            return add_param(m, &used, p + 1, plen - 3, u, strlen(u));
        }
        if (param) {
            if (ulen == 0 || !add_param(m, &used, p + 1, plen - 2, u, ulen)) return false;
        } else if (plen != ulen || memcmp(p, u, plen) != 0) {
            return false;
        }
        if (*pe == '\0' || *ue == '\0') return *pe == '\0' && *ue == '\0';
        p = pe + 1;
        u = ue + 1;
    }
}

static bool method_matches(const char *route_method, const char *method) {
    if (strcmp(route_method, method) == 0) return true;
    return strcmp(method, "HEAD") == 0 && strcmp(route_method, "GET") == 0;
}

/* Adds 'method' to the comma-separated list 'allow' unless present. */
static void allow_add(char *allow, size_t cap, const char *method) {
    size_t ml = strlen(method);
    for (const char *s = allow; *s;) {
        const char *e = strchr(s, ',');
        size_t n = e ? (size_t)(e - s) : strlen(s);
        if (n == ml && memcmp(s, method, n) == 0) return;
        if (!e) break;
        s = e + 2;
    }
    size_t len = strlen(allow);
    size_t need = (len ? 2 : 0) + ml;
    if (len + need + 1 > cap) return;
    if (len) {
        memcpy(allow + len, ", ", 2);
        len += 2;
    }
    memcpy(allow + len, method, ml + 1);
}

RtResult rt_match(const RtRoute *routes, size_t count, const char *method, const char *path,
                  RtMatch *m) {
    m->route = NULL;
    m->allow[0] = '\0';
    bool path_known = false;
    for (size_t i = 0; i < count; i++) {
        if (!match_path(routes[i].pattern, path, m)) continue;
        if (method_matches(routes[i].method, method)) {
            m->route = &routes[i];
            return RT_FOUND;
        }
        path_known = true;
        allow_add(m->allow, sizeof(m->allow), routes[i].method);
        if (strcmp(routes[i].method, "GET") == 0) allow_add(m->allow, sizeof(m->allow), "HEAD");
    }
    m->n_params = 0;
    return path_known ? RT_METHOD_NOT_ALLOWED : RT_NOT_FOUND;
}

const char *rt_param(const RtMatch *m, const char *name) {
    size_t len = strlen(name);
    for (size_t i = 0; i < m->n_params; i++) {
        if (m->params[i].name_len == len && memcmp(m->params[i].name, name, len) == 0) {
            return m->params[i].value;
        }
    }
    return NULL;
}
