/*
 * jobs.h - the gateway's job runner: one dedicated thread that runs the
 * blocking work of requests (sqlite writes, file removal) so that no MHD
 * worker ever waits on the disk or on a lock held across I/O.
 *
 * ---- the mechanism --------------------------------------------------------
 * A handler that must do blocking work:
 *   1. checks and decodes everything it can on the worker (cheap, no I/O;
 *      errors are answered at once, exactly as before),
 *   2. puts the job's inputs in a context of its own, r->ctx (with
 *      r->ctx_free), and returns gw_offload(r, job_fn, resume_fn);
 *   3. gw_offload sets r->resume = resume_fn, suspends the connection
 *      (gw_suspend) and queues the job;
 *   4. the job thread runs job_fn(r->ctx): the blocking work, results
 *      written into the context; job_fn never touches 'r' or MHD;
 *   5. the job thread then calls gw_resume(r) and forgets the request;
 *   6. MHD calls resume_fn on the connection's own worker, which answers
 *      from the results in the context (http.c's dispatch; the context is
 *      freed at completion).
 * The resume's mutex inside MHD orders the job's writes to the context
 * before the resumed call's reads.  Each offload is one suspension and
 * exactly one gw_resume (http.h's rule).
 *
 * Users: PUT and DELETE /v1/topics/{topic} (h_topic.c), and a produce to
 * a topic that does not exist yet with autoCreateTopicEnable on
 * (h_message.c: the creation is the job; no Idempotency-Key claim is
 * held across it; the resumed call runs the produce again from the top,
 * the topic now existing).  Likewise PUT and DELETE /v1/groups/{group}
 * (h_group.c), and a heartbeat to a group that does not exist yet with
 * autoCreateSubscriptionGroup on (h_member.c: the resumed call is the
 * heartbeat again).  The topic and group writes share their context head
 * and resumed answers: req.h's GwNameJob.
 *
 * Why one thread: these writes are rare admin operations and serialise on
 * the topic registry's write_mu and sqlite's single writer anyway; a FIFO
 * queue also makes the gateway's topic writes atomic with respect to each
 * other (a PUT reads the old settings and writes the new ones in one job).
 *
 * ---- shutdown -------------------------------------------------------------
 * The runner belongs to the daemon (http.c): started before MHD, so no
 * handler ever sees it missing.  gw_stop waits while any job is pending,
 * without a deadline (a job is finite: sqlite's busy timeout bounds its
 * lock waits), and the grace periods for the requests the jobs resume
 * start only once the runner is idle.  Then gwj_stop refuses new jobs,
 * runs any still queued and joins the thread (a handler that offloads
 * after that gets 503 SHUTTING_DOWN through its resume), gw_stop waits for
 * those answers, stops MHD and only then frees the runner (gwj_free).  So
 * the runner outlives every request it suspended and never resumes a
 * connection of a stopped daemon.
 *
 * The runner itself (gwj_*) knows nothing of HTTP: it runs GwJob records
 * in FIFO order, and tests/unit/test_jobs.c drives it directly.
 */
#ifndef PETREL_JOBS_H
#define PETREL_JOBS_H

#include <stddef.h>

#include "router.h"

/* One queued job.  Owned by the submitter (no allocation per job: the
 * gateway embeds it in the request); it must stay valid until 'done' is
 * called.  The runner reads every field before calling 'run' and never
 * touches the record after 'done' has been called, so 'done' may free it. */
typedef struct GwJob {
    struct GwJob *next;           /* queue link (the runner's) */
    void (*run)(void *arg);       /* the blocking work: job thread */
    void *arg;                    /* for 'run' */
    void (*done)(void *done_arg); /* called after 'run' (NULL: none): job thread */
    void *done_arg;               /* for 'done' */
} GwJob;

typedef struct GwJobs GwJobs;

/* gwj_start starts the runner and its thread (which inherits the calling
 * thread's signal mask).  Caller owns '*out' (gwj_free).  MQ_OK,
 * MQ_ERR_NOMEM, MQ_ERR_IO (the thread could not be created; logged). */
int gwj_start(GwJobs **out);

/* gwj_submit queues 'job' (see GwJob): its 'run', then its 'done', run on
 * the runner's thread after every job submitted before it.  MQ_OK, or
 * MQ_ERR_STATE once gwj_stop has begun (the job is not queued and none of
 * its callbacks will run).  Any thread. */
int gwj_submit(GwJobs *j, GwJob *job);

/* gwj_pending returns the jobs queued or running (0: idle).  Any thread. */
size_t gwj_pending(GwJobs *j);

/* gwj_stop refuses new jobs (gwj_submit: MQ_ERR_STATE), lets the thread
 * run every job already queued (their 'done' included) and joins it.  The
 * runner stays valid, refusing, until gwj_free; a second call does
 * nothing.  Call from one thread that is not the runner's. */
void gwj_stop(GwJobs *j);

/* gwj_free stops the runner as gwj_stop if that has not been done, then
 * frees it.  NULL ok.  No other thread may use 'j' any more. */
void gwj_free(GwJobs *j);

/* ---- requests -------------------------------------------------------------*/

struct GwRequest;

/* A job of a request: the blocking work on 'ctx' (the request's r->ctx).
 * Runs on the job thread; it must not touch the request or call MHD. */
typedef void (*GwJobFn)(void *ctx);

/* gw_offload hands the blocking work of request 'r' to the daemon's job
 * runner: it sets r->resume = 'resume', suspends the connection, queues
 * 'fn'(r->ctx) and returns MHD_YES.  After 'fn' the job thread resumes the
 * connection; MHD then calls 'resume' on the connection's worker, which
 * answers from r->ctx.  r->ctx (and r->ctx_free) must be set first.  When
 * the runner has stopped (shutdown), 'fn' does not run and the resumed
 * call answers 503 SHUTTING_DOWN instead of 'resume'.  The caller returns
 * this result at once and leaves r->ctx alone meanwhile (the job may
 * already be running on it).  MHD worker, from a handler. */
enum MHD_Result gw_offload(struct GwRequest *r, GwJobFn fn, RtHandler resume);

#endif
