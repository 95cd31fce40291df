/*
 * jobs.c - the gateway's job runner (see jobs.h): a FIFO of GwJob records
 * under one mutex, one thread that runs them, and gw_offload, which ties
 * a request's suspension to a job.  Owns the thread; calls gw_suspend,
 * gw_resume and gw_reply_error (http.h).
 */
#include "jobs.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "http.h"
#include "mq.h"

struct GwJobs {
    pthread_mutex_t mu;  /* guards the fields below */
    pthread_cond_t cond; /* signalled on submit and on stop */
    GwJob *head;         /* next job to run, NULL = none */
    GwJob *tail;         /* last queued, valid when 'head' is set */
    size_t pending;      /* queued + running */
    bool stopping;       /* gwj_stop has begun: no new jobs */
    bool joined;         /* gwj_stop has joined the thread (its caller's) */
    pthread_t thread;    /* the runner */
};

/* ======================================================================
 * The runner
 * ====================================================================== */

/* The thread: runs jobs in order until stopped and drained.
 * Ensures: every job queued before gwj_stop has had 'run' then 'done'. */
static void *runner_main(void *arg) {
    GwJobs *j = arg;
    pthread_mutex_lock(&j->mu);
    for (;;) {
        while (!j->head && !j->stopping) pthread_cond_wait(&j->cond, &j->mu);
        GwJob *job = j->head;
        if (!job) break; /* stopping, and nothing left */
        j->head = job->next;
        if (!j->head) j->tail = NULL;
        pthread_mutex_unlock(&j->mu);
        /* Read everything first: 'done' may free the record. */
        void (*run)(void *) = job->run;
        void *run_arg = job->arg;
        void (*done)(void *) = job->done;
        void *done_arg = job->done_arg;
        run(run_arg);
        if (done) done(done_arg);
        pthread_mutex_lock(&j->mu);
        j->pending--;
    }
    pthread_mutex_unlock(&j->mu);
    return NULL;
}

int gwj_start(GwJobs **out) {
    GwJobs *j = calloc(1, sizeof(*j));
    if (!j) return MQ_ERR_NOMEM;
    int rc = MQ_ERR_NOMEM;
    if (pthread_mutex_init(&j->mu, NULL) != 0) goto err_free;
    if (pthread_cond_init(&j->cond, NULL) != 0) goto err_destroy_mutex;
    int err = pthread_create(&j->thread, NULL, runner_main, j);
    if (err != 0) {
        MQ_ERROR("cannot start the job thread: %s", strerror(err));
        rc = MQ_ERR_IO;
        goto err_destroy_cond;
    }
    *out = j;
    return MQ_OK;

err_destroy_cond:
    pthread_cond_destroy(&j->cond);
err_destroy_mutex:
    pthread_mutex_destroy(&j->mu);
err_free:
    free(j);
    return rc;
}

int gwj_submit(GwJobs *j, GwJob *job) {
    MQ_ASSERT(job && job->run);
    job->next = NULL;
    pthread_mutex_lock(&j->mu);
    if (j->stopping) {
        pthread_mutex_unlock(&j->mu);
        return MQ_ERR_STATE;
    }
    if (j->tail) {
        j->tail->next = job;
    } else {
        j->head = job;
    }
    j->tail = job;
    j->pending++;
    pthread_cond_signal(&j->cond);
    pthread_mutex_unlock(&j->mu);
    return MQ_OK;
}

size_t gwj_pending(GwJobs *j) {
    pthread_mutex_lock(&j->mu);
    size_t n = j->pending;
    pthread_mutex_unlock(&j->mu);
    return n;
}

void gwj_stop(GwJobs *j) {
    if (!j || j->joined) return;
    pthread_mutex_lock(&j->mu);
    j->stopping = true;
    pthread_cond_signal(&j->cond);
    pthread_mutex_unlock(&j->mu);
    pthread_join(j->thread, NULL);
    j->joined = true;
    MQ_ASSERT(j->pending == 0 && !j->head);
}

void gwj_free(GwJobs *j) {
    if (!j) return;
    gwj_stop(j);
    pthread_cond_destroy(&j->cond);
    pthread_mutex_destroy(&j->mu);
    free(j);
}

/* ======================================================================
 * Requests
 * ====================================================================== */

/* 'done' of an offloaded job: job thread.  Touches nothing after
 * gw_resume (the request may complete and be freed at once). */
static void offload_done(void *arg) {
    gw_resume(arg);
}

/* The resumed call of a request whose job the stopped runner refused. */
static enum MHD_Result offload_refused(GwRequest *r, const RtMatch *m) {
    (void)m;
    return gw_reply_error(r, MHD_HTTP_SERVICE_UNAVAILABLE, "SHUTTING_DOWN",
                          "the broker is shutting down");
}

enum MHD_Result gw_offload(GwRequest *r, GwJobFn fn, RtHandler resume) {
    r->resume = resume;
    r->job = (GwJob){.run = fn, .arg = r->ctx, .done = offload_done, .done_arg = r};
    /* Suspend before queueing: the job may finish (and resume) at once. */
    gw_suspend(r);
    if (gwj_submit(gw_jobs(r), &r->job) != MQ_OK) {
        /* Nothing was queued, so this thread still owns the suspension. */
        r->resume = offload_refused;
        gw_resume(r);
    }
    return MHD_YES;
}
