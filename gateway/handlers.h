/*
 * handlers.h - the REST handlers, one file per resource (h_<resource>.c),
 * and the route table that http.c dispatches through.  Each handler runs
 * on an MHD worker with the body complete and queues one response.
 */
#ifndef PETREL_HANDLERS_H
#define PETREL_HANDLERS_H

#include <stddef.h>

#include "http.h"
#include "router.h"

/* h_admin.c: operations. */
enum MHD_Result h_admin_healthz(GwRequest *r, const RtMatch *m); /* GET /healthz */
enum MHD_Result h_admin_root(GwRequest *r, const RtMatch *m);    /* GET / -> /console/ */

/* static.c: the console, files under the web root. */
enum MHD_Result h_static_get(GwRequest *r, const RtMatch *m); /* GET /console/{path*} */

/* gw_routes returns the route table (static) and its length. */
const RtRoute *gw_routes(size_t *count);

#endif
