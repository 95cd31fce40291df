/*
 * test_jobs.c - the gateway's job runner (gateway/jobs.c) alone, without
 * MHD: jobs run in submission order on the runner's own thread, 'done'
 * follows 'run' and may free the job, the pending count covers queued and
 * running jobs, gwj_stop runs what is queued and refuses what comes after,
 * and many submitting threads lose no job.  No sleeps: threads meet at
 * gates (mutex + condition variable).
 */
#include "testutil.h"

#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "jobs.h"
#include "mq.h"

/* ---- gates -----------------------------------------------------------------*/

typedef struct Gate {
    pthread_mutex_t mu;
    pthread_cond_t cond;
    bool open;
} Gate;

static void gate_init(Gate *g) {
    pthread_mutex_init(&g->mu, NULL);
    pthread_cond_init(&g->cond, NULL);
    g->open = false;
}

static void gate_open(Gate *g) {
    pthread_mutex_lock(&g->mu);
    g->open = true;
    pthread_cond_broadcast(&g->cond);
    pthread_mutex_unlock(&g->mu);
}

static void gate_wait(Gate *g) {
    pthread_mutex_lock(&g->mu);
    while (!g->open) pthread_cond_wait(&g->cond, &g->mu);
    pthread_mutex_unlock(&g->mu);
}

static void gate_destroy(Gate *g) {
    pthread_cond_destroy(&g->cond);
    pthread_mutex_destroy(&g->mu);
}

/* ---- jobs that record what ran ---------------------------------------------*/

#define LOG_MAX 4096

/* What the jobs did; written by the runner's thread only, read after a
 * gate or a join. */
typedef struct Log {
    int order[LOG_MAX]; /* job ids in the order they ran */
    size_t n;           /* entries in 'order' */
    pthread_t thread;   /* the thread of the last job */
    size_t done;        /* 'done' callbacks */
    bool done_early;    /* a 'done' came before its 'run' */
} Log;

typedef struct Probe {
    GwJob job;
    Log *log;
    int id;
    bool ran;
    Gate *block;   /* NULL, or the job waits here after it started */
    Gate *started; /* NULL, or opened when the job starts */
    Gate *finish;  /* NULL, or opened by its 'done' */
} Probe;

static void probe_run(void *arg) {
    Probe *p = arg;
    if (p->started) gate_open(p->started);
    if (p->block) gate_wait(p->block);
    p->log->thread = pthread_self();
    MQ_ASSERT(p->log->n < LOG_MAX);
    p->log->order[p->log->n++] = p->id;
    p->ran = true;
}

static void probe_done(void *arg) {
    Probe *p = arg;
    if (!p->ran) p->log->done_early = true;
    p->log->done++;
    if (p->finish) gate_open(p->finish);
}

static void probe_init(Probe *p, Log *log, int id) {
    memset(p, 0, sizeof(*p));
    p->log = log;
    p->id = id;
    p->job = (GwJob){.run = probe_run, .arg = p, .done = probe_done, .done_arg = p};
}

/* ---- cases -----------------------------------------------------------------*/

static void test_gwj_runs_jobs_in_submission_order_on_its_own_thread(void **state) {
    (void)state;
    GwJobs *j = NULL;
    assert_int_equal(gwj_start(&j), MQ_OK);
    static Log log;
    memset(&log, 0, sizeof(log));
    enum { N = 100 };
    static Probe ps[N];
    Gate finish;
    gate_init(&finish);
    for (int i = 0; i < N; i++) {
        probe_init(&ps[i], &log, i);
        if (i == N - 1) ps[i].finish = &finish;
        assert_int_equal(gwj_submit(j, &ps[i].job), MQ_OK);
    }
    gate_wait(&finish); /* the last job's 'done' ran, so all did */
    assert_int_equal(log.n, N);
    for (int i = 0; i < N; i++) assert_int_equal(log.order[i], i);
    assert_int_equal(log.done, N);
    assert_false(log.done_early);
    assert_false(pthread_equal(log.thread, pthread_self()));
    gwj_free(j);
    gate_destroy(&finish);
}

/* A heap job whose 'done' frees it (as a completed request frees its
 * GwRequest): the runner must not touch it afterwards (ASan checks). */
typedef struct HeapJob {
    GwJob job;
    int *runs;  /* counters on the test's stack */
    int *dones;
    bool ran;
} HeapJob;

static void heap_run(void *arg) {
    HeapJob *h = arg;
    h->ran = true;
    (*h->runs)++;
}

static void heap_done(void *arg) {
    HeapJob *h = arg;
    if (h->ran) (*h->dones)++;
    memset(h, 0xA5, sizeof(*h)); /* poison, in case ASan is off */
    free(h);
}

static void test_gwj_done_follows_run_and_may_free_the_job(void **state) {
    (void)state;
    GwJobs *j = NULL;
    assert_int_equal(gwj_start(&j), MQ_OK);
    int runs = 0;
    int dones = 0;
    for (int i = 0; i < 200; i++) {
        HeapJob *h = calloc(1, sizeof(*h));
        assert_non_null(h);
        h->runs = &runs;
        h->dones = &dones;
        h->job = (GwJob){.run = heap_run, .arg = h, .done = heap_done, .done_arg = h};
        assert_int_equal(gwj_submit(j, &h->job), MQ_OK);
    }
    gwj_stop(j); /* runs every queued job, then joins */
    assert_int_equal(runs, 200);
    assert_int_equal(dones, 200);
    assert_int_equal(gwj_pending(j), 0);
    gwj_free(j);
}

static void test_gwj_pending_counts_queued_and_running_jobs(void **state) {
    (void)state;
    GwJobs *j = NULL;
    assert_int_equal(gwj_start(&j), MQ_OK);
    assert_int_equal(gwj_pending(j), 0);
    static Log log;
    memset(&log, 0, sizeof(log));
    Gate started;
    Gate block;
    gate_init(&started);
    gate_init(&block);
    Probe ps[4];
    for (int i = 0; i < 4; i++) probe_init(&ps[i], &log, i);
    ps[0].started = &started;
    ps[0].block = &block;
    assert_int_equal(gwj_submit(j, &ps[0].job), MQ_OK);
    gate_wait(&started); /* job 0 is running */
    assert_int_equal(gwj_pending(j), 1);
    for (int i = 1; i < 4; i++) assert_int_equal(gwj_submit(j, &ps[i].job), MQ_OK);
    assert_int_equal(gwj_pending(j), 4); /* 1 running + 3 queued */
    assert_int_equal(log.n, 0);
    gate_open(&block);
    gwj_stop(j);
    assert_int_equal(gwj_pending(j), 0);
    assert_int_equal(log.n, 4);
    gwj_free(j);
    gate_destroy(&started);
    gate_destroy(&block);
}

typedef struct Stopper {
    GwJobs *j;
    pthread_t th;
} Stopper;

static void *stopper_main(void *arg) {
    Stopper *s = arg;
    gwj_stop(s->j);
    return NULL;
}

/* A job submitted while the stop begins: heap, freed by its 'done'. */
typedef struct Late {
    GwJob job;
    const Log *log; /* the queued jobs' log: all of them ran before */
    int seq;        /* submission index among the late jobs */
    int *seen;      /* late jobs run so far */
    bool *bad;      /* set when one ran out of order */
} Late;

static void late_run(void *arg) {
    Late *l = arg;
    if (*l->seen != l->seq || l->log->n == 0) *l->bad = true;
    (*l->seen)++;
}

static void test_gwj_stop_runs_queued_jobs_and_refuses_new_ones(void **state) {
    (void)state;
    GwJobs *j = NULL;
    assert_int_equal(gwj_start(&j), MQ_OK);
    static Log log;
    memset(&log, 0, sizeof(log));
    Gate started;
    Gate block;
    gate_init(&started);
    gate_init(&block);
    enum { QUEUED = 6 };
    Probe ps[QUEUED];
    for (int i = 0; i < QUEUED; i++) probe_init(&ps[i], &log, i);
    ps[0].started = &started;
    ps[0].block = &block;
    for (int i = 0; i < QUEUED; i++) assert_int_equal(gwj_submit(j, &ps[i].job), MQ_OK);
    gate_wait(&started);

    /* Stop from another thread while job 0 still blocks: gwj_stop waits
     * for the queue, so it cannot return yet.  Meanwhile submit until the
     * runner refuses: the jobs accepted before that still run (after the
     * queued ones, in order), none after. */
    Stopper s = {.j = j};
    assert_int_equal(pthread_create(&s.th, NULL, stopper_main, &s), 0);
    int accepted = 0;
    int seen = 0;
    bool bad = false;
    for (;;) {
        Late *l = calloc(1, sizeof(*l));
        assert_non_null(l);
        *l = (Late){.log = &log, .seq = accepted, .seen = &seen, .bad = &bad};
        l->job = (GwJob){.run = late_run, .arg = l, .done = free, .done_arg = l};
        int rc = gwj_submit(j, &l->job);
        if (rc == MQ_ERR_STATE) {
            free(l); /* refused: none of its callbacks will run */
            break;
        }
        assert_int_equal(rc, MQ_OK);
        accepted++;
        sched_yield();
    }
    assert_int_equal(gwj_pending(j), (size_t)(QUEUED + accepted)); /* job 0 still blocks */
    assert_int_equal(log.n, 0);
    gate_open(&block);
    pthread_join(s.th, NULL);
    assert_int_equal(log.n, QUEUED);
    for (int i = 0; i < QUEUED; i++) assert_int_equal(log.order[i], i);
    assert_int_equal(log.done, QUEUED);
    assert_false(log.done_early);
    assert_int_equal(seen, accepted);
    assert_false(bad);
    gwj_stop(j); /* a second stop does nothing */
    Probe after;
    probe_init(&after, &log, 99);
    assert_int_equal(gwj_submit(j, &after.job), MQ_ERR_STATE);
    assert_int_equal(gwj_pending(j), 0);
    gwj_free(j);
    assert_int_equal(log.n, QUEUED); /* the refused job never ran */
    gate_destroy(&started);
    gate_destroy(&block);
}

/* ---- many submitters -------------------------------------------------------*/

#define SUBMITTERS 8
#define PER_SUBMITTER 500

typedef struct Counted {
    GwJob job;
    int *seen;   /* this submitter's jobs run so far (runner's thread only) */
    int seq;     /* this job's index in its submitter's order */
    bool *bad;   /* set when a job ran out of its submitter's order */
} Counted;

static void counted_run(void *arg) {
    Counted *c = arg;
    if (*c->seen != c->seq) *c->bad = true;
    (*c->seen)++;
}

typedef struct Submitter {
    GwJobs *j;
    Counted jobs[PER_SUBMITTER];
    int seen;
    bool bad;
    int refused;
    pthread_t th;
} Submitter;

static void *submitter_main(void *arg) {
    Submitter *s = arg;
    for (int i = 0; i < PER_SUBMITTER; i++) {
        Counted *c = &s->jobs[i];
        *c = (Counted){.seen = &s->seen, .seq = i, .bad = &s->bad};
        c->job = (GwJob){.run = counted_run, .arg = c};
        if (gwj_submit(s->j, &c->job) != MQ_OK) s->refused++;
    }
    return NULL;
}

static void test_gwj_many_submitters_lose_no_job_and_keep_each_order(void **state) {
    (void)state;
    GwJobs *j = NULL;
    assert_int_equal(gwj_start(&j), MQ_OK);
    Submitter *ss = calloc(SUBMITTERS, sizeof(*ss));
    assert_non_null(ss);
    for (int i = 0; i < SUBMITTERS; i++) {
        ss[i].j = j;
        assert_int_equal(pthread_create(&ss[i].th, NULL, submitter_main, &ss[i]), 0);
    }
    for (int i = 0; i < SUBMITTERS; i++) pthread_join(ss[i].th, NULL);
    gwj_stop(j);
    for (int i = 0; i < SUBMITTERS; i++) {
        assert_int_equal(ss[i].refused, 0);
        assert_int_equal(ss[i].seen, PER_SUBMITTER);
        assert_false(ss[i].bad);
    }
    assert_int_equal(gwj_pending(j), 0);
    gwj_free(j);
    free(ss);
}

static void test_gwj_free_of_null_and_idle_runner(void **state) {
    (void)state;
    gwj_free(NULL);
    gwj_stop(NULL);
    GwJobs *j = NULL;
    assert_int_equal(gwj_start(&j), MQ_OK);
    gwj_free(j); /* never used: stops and joins an idle thread */
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gwj_runs_jobs_in_submission_order_on_its_own_thread),
        cmocka_unit_test(test_gwj_done_follows_run_and_may_free_the_job),
        cmocka_unit_test(test_gwj_pending_counts_queued_and_running_jobs),
        cmocka_unit_test(test_gwj_stop_runs_queued_jobs_and_refuses_new_ones),
        cmocka_unit_test(test_gwj_many_submitters_lose_no_job_and_keep_each_order),
        cmocka_unit_test(test_gwj_free_of_null_and_idle_runner),
    };
    return cmocka_run_group_tests_name("jobs", tests, NULL, NULL);
}
