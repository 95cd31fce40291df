/*
 * router.h - the method + path table of the REST API.  A pattern is a
 * path whose segments are literals, '{name}' (one non-empty segment) or,
 * last only, '{name*}' (the rest of the path, possibly empty, slashes
 * included).  HEAD matches GET routes.  Pure functions: no allocation, no
 * HTTP library calls, so the matcher can be unit-tested and fuzzed.
 */
#ifndef PETREL_ROUTER_H
#define PETREL_ROUTER_H

#include <stddef.h>

#include <microhttpd.h>

#define RT_MAX_PARAMS 4   /* '{..}' segments per pattern */
#define RT_BUF_MAX 2048   /* bytes of all parameter values of one match */

struct GwRequest;
struct RtMatch;

/* A handler answers the request (it runs on an MHD worker, body complete)
 * and returns what MHD_queue_response returned. */
typedef enum MHD_Result (*RtHandler)(struct GwRequest *req, const struct RtMatch *m);

typedef struct RtRoute {
    const char *method;  /* "GET", "POST", ... */
    const char *pattern; /* "/v1/topics/{topic}" */
    RtHandler handler;
} RtRoute;

typedef struct RtParam {
    const char *name;   /* points into the pattern, not NUL-terminated */
    size_t name_len;
    const char *value;  /* NUL-terminated, inside RtMatch.buf */
} RtParam;

typedef struct RtMatch {
    const RtRoute *route;             /* the route found, NULL otherwise */
    size_t n_params;
    RtParam params[RT_MAX_PARAMS];
    char buf[RT_BUF_MAX];             /* parameter values, NUL-separated */
    char allow[64];                   /* RT_METHOD_NOT_ALLOWED: "GET, HEAD" */
} RtMatch;

typedef enum RtResult {
    RT_FOUND,              /* 'm->route' and its parameters are set */
    RT_NOT_FOUND,          /* no pattern matches the path: 404 */
    RT_METHOD_NOT_ALLOWED, /* some do, none for this method: 405, 'm->allow' */
} RtResult;

/* rt_match finds the first of 'count' 'routes' whose pattern matches
 * 'path' (already percent-decoded, without the query) and whose method is
 * 'method'.  A path whose parameters do not fit RT_BUF_MAX does not match. */
RtResult rt_match(const RtRoute *routes, size_t count, const char *method, const char *path,
                  RtMatch *m);

/* rt_param returns the value of parameter 'name' of a match, or NULL.
 * Borrowed from 'm'. */
const char *rt_param(const RtMatch *m, const char *name);

#endif
