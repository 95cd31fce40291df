/*
 * test_topic.c - the topic registry (core/topic.c) over a real sqlite
 * metadata database: put/get/update/delete/list, persistence, validation,
 * auto-create on produce (also racing) and queue selection.
 *
 * Each case gets its own temporary directory with 'meta.db' in it, opened
 * in setup together with a registry of 8 default queues.
 */
#include "testutil.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "meta.h"
#include "mq.h"
#include "msg.h"
#include "topic.h"

#define RW (META_PERM_READ | META_PERM_WRITE)

typedef struct Fixture {
    char *dir;          /* per-case temporary directory */
    char *path;         /* dir/meta.db */
    Meta *meta;
    TopicRegistry *reg; /* default_queues 8 */
} Fixture;

static Meta *meta_ok(const char *path) {
    Meta *m = NULL;
    assert_int_equal(meta_open(path, 0, &m), MQ_OK);
    return m;
}

static TopicRegistry *reg_ok(Meta *m) {
    TopicRegistry *r = NULL;
    assert_int_equal(topic_registry_open(m, 8, &r), MQ_OK);
    assert_non_null(r);
    return r;
}

static int setup(void **state) {
    Fixture *f = calloc(1, sizeof(*f));
    if (!f) return -1;
    f->dir = tu_mkdtemp("topic");
    f->path = tu_path(f->dir, "meta.db");
    f->meta = meta_ok(f->path);
    f->reg = reg_ok(f->meta);
    *state = f;
    return 0;
}

static int teardown(void **state) {
    Fixture *f = *state;
    topic_registry_close(f->reg);
    meta_close(f->meta);
    tu_rmtree(f->dir);
    free(f->path);
    free(f->dir);
    free(f);
    return 0;
}

/* reopen closes the registry and the database and opens both again. */
static void reopen(Fixture *f) {
    topic_registry_close(f->reg);
    meta_close(f->meta);
    f->meta = meta_ok(f->path);
    f->reg = reg_ok(f->meta);
}

/* A list callback that records names and stops after 'stop_after'. */
typedef struct Names {
    char names[8][META_NAME_MAX + 1];
    int count;
    int stop_after;    /* 0 = never stop */
    TopicRegistry *r;  /* when set, each call also reads the registry */
} Names;

static int collect(void *arg, const MetaTopic *t) {
    Names *n = arg;
    if (n->count < 8) snprintf(n->names[n->count], sizeof(n->names[0]), "%s", t->name);
    n->count++;
    if (n->r) {
        MetaTopic again;
        assert_int_equal(topic_get(n->r, t->name, &again), MQ_OK);
    }
    return n->stop_after && n->count >= n->stop_after;
}

static int count_meta_topics(void *arg, const MetaTopic *t) {
    (void)t;
    (*(int *)arg)++;
    return 0;
}

/* assert_same_topic compares field by field (struct padding is not compared). */
static void assert_same_topic(const MetaTopic *a, const MetaTopic *b) {
    assert_string_equal(a->name, b->name);
    assert_int_equal(a->read_queues, b->read_queues);
    assert_int_equal(a->write_queues, b->write_queues);
    assert_int_equal(a->perm, b->perm);
    assert_int_equal(a->order, b->order);
    assert_true(a->created_ms == b->created_ms);
    assert_true(a->updated_ms == b->updated_ms);
}

/* ---- put / get / delete / list -------------------------------------------*/

static void test_topic_put_creates_then_updates(void **state) {
    Fixture *f = *state;
    bool created = false;
    assert_int_equal(topic_put(f->reg, "orders", 4, RW, false, &created), MQ_OK);
    assert_true(created);
    MetaTopic t;
    assert_int_equal(topic_get(f->reg, "orders", &t), MQ_OK);
    assert_string_equal(t.name, "orders");
    assert_int_equal(t.read_queues, 4);
    assert_int_equal(t.write_queues, 4);
    assert_int_equal(t.perm, RW);
    assert_false(t.order);
    assert_true(t.created_ms > 0);
    assert_true(t.updated_ms >= t.created_ms);
    int64_t created_ms = t.created_ms;

    assert_int_equal(topic_put(f->reg, "orders", 16, META_PERM_READ, true, &created), MQ_OK);
    assert_false(created);
    assert_int_equal(topic_get(f->reg, "orders", &t), MQ_OK);
    assert_int_equal(t.read_queues, 16);
    assert_int_equal(t.write_queues, 16);
    assert_int_equal(t.perm, META_PERM_READ);
    assert_true(t.order);
    assert_true(t.created_ms == created_ms);
    assert_int_equal(topic_count(f->reg), 1);

    /* the map holds what meta.db holds, timestamps included */
    MetaTopic db;
    assert_int_equal(meta_topic_get(f->meta, "orders", &db), MQ_OK);
    assert_same_topic(&db, &t);
    /* 'created' may be NULL */
    assert_int_equal(topic_put(f->reg, "payments", 1, META_PERM_WRITE, false, NULL), MQ_OK);
    assert_int_equal(topic_count(f->reg), 2);
}

static void test_topic_get_missing_or_bad_arguments(void **state) {
    Fixture *f = *state;
    MetaTopic t;
    assert_int_equal(topic_get(f->reg, "nope", &t), MQ_ERR_NOTFOUND);
    assert_int_equal(topic_get(f->reg, "", &t), MQ_ERR_NOTFOUND);
    assert_int_equal(topic_get(f->reg, NULL, &t), MQ_ERR_INVAL);
    assert_int_equal(topic_get(f->reg, "nope", NULL), MQ_ERR_INVAL);
    assert_int_equal(topic_get(NULL, "nope", &t), MQ_ERR_INVAL);
    char huge[400];
    memset(huge, 'a', sizeof(huge) - 1);
    huge[sizeof(huge) - 1] = '\0';
    assert_int_equal(topic_get(f->reg, huge, &t), MQ_ERR_NOTFOUND);
}

static void test_topic_put_validates_name_queues_and_perm(void **state) {
    Fixture *f = *state;
    char name[130];
    memset(name, 'n', sizeof(name));
    name[127] = '\0';
    assert_int_equal(topic_put(f->reg, name, 1, RW, false, NULL), MQ_OK); /* 127 bytes */
    name[127] = 'n';
    name[128] = '\0';
    assert_int_equal(topic_put(f->reg, name, 1, RW, false, NULL), MQ_ERR_INVAL);

    const char *bad[] = {"", "a.b", "50%", "a b", "t\xc3\xb3pico", "%RETRY%cg", "%DLQ%cg",
                         "RMQ_SYS_TRANS_HALF_TOPIC", "rmq_sys_x", "SCHEDULE_TOPIC_XXXX",
                         "TBW102"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        assert_int_equal(topic_put(f->reg, bad[i], 4, RW, false, NULL), MQ_ERR_INVAL);
    assert_int_equal(topic_put(f->reg, NULL, 4, RW, false, NULL), MQ_ERR_INVAL);
    assert_int_equal(topic_put(NULL, "t", 4, RW, false, NULL), MQ_ERR_INVAL);

    assert_int_equal(topic_put(f->reg, "q", 0, RW, false, NULL), MQ_ERR_INVAL);
    assert_int_equal(topic_put(f->reg, "q", 1025, RW, false, NULL), MQ_ERR_INVAL);
    assert_int_equal(topic_put(f->reg, "q", 1024, RW, false, NULL), MQ_OK);
    assert_int_equal(topic_put(f->reg, "q", 1, RW, false, NULL), MQ_OK);

    const uint32_t bad_perm[] = {0, 1, 3, 5, 7, 8, 14, 0xFFFFFFFFu};
    for (size_t i = 0; i < sizeof(bad_perm) / sizeof(bad_perm[0]); i++)
        assert_int_equal(topic_put(f->reg, "p", 1, bad_perm[i], false, NULL), MQ_ERR_INVAL);
    assert_int_equal(topic_put(f->reg, "p", 1, META_PERM_WRITE, false, NULL), MQ_OK);
    assert_int_equal(topic_put(f->reg, "p", 1, META_PERM_READ, false, NULL), MQ_OK);

    /* nothing invalid reached the map or meta.db */
    assert_int_equal(topic_count(f->reg), 3);
    int rows = 0;
    assert_int_equal(meta_topic_list(f->meta, count_meta_topics, &rows), MQ_OK);
    assert_int_equal(rows, 3);
}

static void test_topic_put_system_allows_reserved_names(void **state) {
    Fixture *f = *state;
    bool created = false;
    assert_int_equal(topic_put_system(f->reg, "%RETRY%cg", 1, RW, false, &created), MQ_OK);
    assert_true(created);
    assert_int_equal(topic_put_system(f->reg, "%DLQ%cg", 1, RW, false, NULL), MQ_OK);
    assert_int_equal(topic_put_system(f->reg, "RMQ_SYS_TRANS_HALF_TOPIC", 1, RW, false, NULL),
                     MQ_OK);
    assert_int_equal(topic_put_system(f->reg, "SCHEDULE_TOPIC_XXXX", 18, RW, false, NULL),
                     MQ_OK);
    char longest[256];
    memset(longest, 'r', 255);
    longest[255] = '\0';
    memcpy(longest, "%RETRY%", 7);
    assert_int_equal(topic_put_system(f->reg, longest, 1, RW, false, NULL), MQ_OK);

    assert_int_equal(topic_put_system(f->reg, "", 1, RW, false, NULL), MQ_ERR_INVAL);
    assert_int_equal(topic_put_system(f->reg, "a.b", 1, RW, false, NULL), MQ_ERR_INVAL);
    assert_int_equal(topic_put_system(f->reg, "%DLQ%x", 0, RW, false, NULL), MQ_ERR_INVAL);
    assert_int_equal(topic_put_system(f->reg, "%DLQ%x", 1, 1, false, NULL), MQ_ERR_INVAL);
    assert_int_equal(topic_count(f->reg), 5);

    MetaTopic t;
    assert_int_equal(topic_get(f->reg, "%RETRY%cg", &t), MQ_OK);
    assert_int_equal(t.write_queues, 1);
    /* topic_put still refuses them */
    assert_int_equal(topic_put(f->reg, "%RETRY%cg", 2, RW, false, NULL), MQ_ERR_INVAL);
}

static void test_topic_delete_removes_from_map_and_meta(void **state) {
    Fixture *f = *state;
    assert_int_equal(topic_put(f->reg, "orders", 4, RW, false, NULL), MQ_OK);
    assert_int_equal(topic_put(f->reg, "payments", 4, RW, false, NULL), MQ_OK);
    assert_int_equal(meta_offset_set(f->meta, "cg", "orders", 0, 5), MQ_OK);
    assert_int_equal(topic_delete(f->reg, "orders"), MQ_OK);
    MetaTopic t;
    assert_int_equal(topic_get(f->reg, "orders", &t), MQ_ERR_NOTFOUND);
    assert_int_equal(meta_topic_get(f->meta, "orders", &t), MQ_ERR_NOTFOUND);
    uint64_t off = 0;
    assert_int_equal(meta_offset_get(f->meta, "cg", "orders", 0, &off), MQ_ERR_NOTFOUND);
    assert_int_equal(topic_count(f->reg), 1);
    assert_int_equal(topic_delete(f->reg, "orders"), MQ_ERR_NOTFOUND);
    assert_int_equal(topic_delete(f->reg, ""), MQ_ERR_INVAL);
    assert_int_equal(topic_delete(f->reg, NULL), MQ_ERR_INVAL);
    assert_int_equal(topic_get(f->reg, "payments", &t), MQ_OK);

    /* a deleted name can come back with new settings */
    bool created = false;
    assert_int_equal(topic_put(f->reg, "orders", 2, RW, true, &created), MQ_OK);
    assert_true(created);
    assert_int_equal(topic_get(f->reg, "orders", &t), MQ_OK);
    assert_int_equal(t.write_queues, 2);
    assert_true(t.order);
}

static void test_topic_list_in_name_order_and_stops_early(void **state) {
    Fixture *f = *state;
    const char *names[] = {"zeta", "Alpha", "alpha", "_x", "beta-2", "beta"};
    for (size_t i = 0; i < 6; i++)
        assert_int_equal(topic_put(f->reg, names[i], 1, RW, false, NULL), MQ_OK);
    assert_int_equal(topic_put_system(f->reg, "%DLQ%cg", 1, RW, false, NULL), MQ_OK);

    /* the callback may call back into the registry (no lock is held) */
    Names n = {.r = f->reg};
    assert_int_equal(topic_list(f->reg, collect, &n), MQ_OK);
    assert_int_equal(n.count, 7);
    const char *want[] = {"%DLQ%cg", "Alpha", "_x", "alpha", "beta", "beta-2", "zeta"};
    for (int i = 0; i < 7; i++) assert_string_equal(n.names[i], want[i]);

    /* the same order as meta.db's own list */
    Names db = {0};
    assert_int_equal(meta_topic_list(f->meta, collect, &db), MQ_OK);
    assert_int_equal(db.count, 7);
    for (int i = 0; i < 7; i++) assert_string_equal(db.names[i], want[i]);

    Names early = {.stop_after = 2};
    assert_int_equal(topic_list(f->reg, collect, &early), MQ_OK);
    assert_int_equal(early.count, 2);

    assert_int_equal(topic_delete(f->reg, "zeta"), MQ_OK);
    Names after = {0};
    assert_int_equal(topic_list(f->reg, collect, &after), MQ_OK);
    assert_int_equal(after.count, 6);
    assert_int_equal(topic_list(f->reg, NULL, NULL), MQ_ERR_INVAL);
    assert_int_equal(topic_list(NULL, collect, &after), MQ_ERR_INVAL);
}

static void test_topic_list_of_an_empty_registry(void **state) {
    Fixture *f = *state;
    Names n = {0};
    assert_int_equal(topic_list(f->reg, collect, &n), MQ_OK);
    assert_int_equal(n.count, 0);
    assert_int_equal(topic_count(f->reg), 0);
}

/* ---- persistence ----------------------------------------------------------*/

static void test_topic_registry_survives_close_and_reopen(void **state) {
    Fixture *f = *state;
    /* enough topics to grow the map past its first bucket array */
    char name[32];
    for (int i = 0; i < 300; i++) {
        snprintf(name, sizeof(name), "topic-%03d", i);
        assert_int_equal(topic_put(f->reg, name, (uint32_t)(i % 16) + 1, RW, i % 2 == 0, NULL),
                         MQ_OK);
    }
    assert_int_equal(topic_put_system(f->reg, "%RETRY%cg", 1, RW, false, NULL), MQ_OK);
    assert_int_equal(topic_delete(f->reg, "topic-007"), MQ_OK);
    MetaTopic before;
    assert_int_equal(topic_get(f->reg, "topic-123", &before), MQ_OK);

    reopen(f);
    assert_int_equal(topic_count(f->reg), 300);
    MetaTopic t;
    assert_int_equal(topic_get(f->reg, "topic-123", &t), MQ_OK);
    assert_same_topic(&t, &before);
    assert_int_equal(t.write_queues, 123 % 16 + 1);
    assert_false(t.order);
    assert_int_equal(topic_get(f->reg, "topic-124", &t), MQ_OK);
    assert_true(t.order);
    assert_int_equal(topic_get(f->reg, "topic-007", &t), MQ_ERR_NOTFOUND);
    assert_int_equal(topic_get(f->reg, "%RETRY%cg", &t), MQ_OK);
    for (int i = 0; i < 300; i++) {
        if (i == 7) continue;
        snprintf(name, sizeof(name), "topic-%03d", i);
        assert_int_equal(topic_get(f->reg, name, &t), MQ_OK);
    }
}

static void test_topic_registry_loads_rows_written_before_open(void **state) {
    Fixture *f = *state;
    MetaTopic t;
    memset(&t, 0, sizeof(t));
    snprintf(t.name, sizeof(t.name), "legacy");
    t.read_queues = 3;
    t.write_queues = 2;
    t.perm = META_PERM_READ;
    assert_int_equal(meta_topic_put(f->meta, &t), MQ_OK);
    topic_registry_close(f->reg);
    f->reg = reg_ok(f->meta);
    MetaTopic got;
    assert_int_equal(topic_get(f->reg, "legacy", &got), MQ_OK);
    assert_int_equal(got.read_queues, 3);
    assert_int_equal(got.write_queues, 2);
    assert_int_equal(got.perm, META_PERM_READ);
    assert_int_equal(topic_count(f->reg), 1);
}

static void test_topic_registry_open_rejects_bad_arguments(void **state) {
    Fixture *f = *state;
    TopicRegistry *r = NULL;
    assert_int_equal(topic_registry_open(f->meta, 0, &r), MQ_ERR_INVAL);
    assert_int_equal(topic_registry_open(f->meta, 1025, &r), MQ_ERR_INVAL);
    assert_int_equal(topic_registry_open(NULL, 8, &r), MQ_ERR_INVAL);
    assert_int_equal(topic_registry_open(f->meta, 8, NULL), MQ_ERR_INVAL);
    assert_null(r);
    assert_int_equal(topic_default_queues(f->reg), 8);
    topic_registry_close(NULL);
}

/* ---- produce path ---------------------------------------------------------*/

static void test_topic_for_produce_finds_or_auto_creates(void **state) {
    Fixture *f = *state;
    int saved = mq_log_level;
    mq_log_level = MQ_LOG_WARN;
    MetaTopic t;
    assert_int_equal(topic_for_produce(f->reg, "new", false, 4, &t), MQ_ERR_NOTFOUND);
    assert_int_equal(topic_count(f->reg), 0);

    assert_int_equal(topic_for_produce(f->reg, "new", true, 4, &t), MQ_OK);
    assert_string_equal(t.name, "new");
    assert_int_equal(t.read_queues, 4);
    assert_int_equal(t.write_queues, 4);
    assert_int_equal(t.perm, RW);
    assert_false(t.order);
    MetaTopic db;
    assert_int_equal(meta_topic_get(f->meta, "new", &db), MQ_OK);
    assert_same_topic(&db, &t);

    /* an existing topic keeps its settings */
    assert_int_equal(topic_put(f->reg, "orders", 12, RW, true, NULL), MQ_OK);
    assert_int_equal(topic_for_produce(f->reg, "orders", true, 4, &t), MQ_OK);
    assert_int_equal(t.write_queues, 12);
    assert_true(t.order);
    assert_int_equal(topic_for_produce(f->reg, "orders", false, 4, &t), MQ_OK);

    /* 0 queues = the registry's default */
    assert_int_equal(topic_for_produce(f->reg, "dflt", true, 0, &t), MQ_OK);
    assert_int_equal(t.write_queues, 8);

    /* auto-create applies the user-name rules */
    assert_int_equal(topic_for_produce(f->reg, "a.b", true, 4, &t), MQ_ERR_INVAL);
    assert_int_equal(topic_for_produce(f->reg, "TBW102", true, 4, &t), MQ_ERR_INVAL);
    assert_int_equal(topic_for_produce(f->reg, "%DLQ%cg", true, 4, &t), MQ_ERR_INVAL);
    assert_int_equal(topic_for_produce(f->reg, "", true, 4, &t), MQ_ERR_INVAL);
    assert_int_equal(topic_for_produce(f->reg, "big", true, 1025, &t), MQ_ERR_INVAL);
    assert_int_equal(topic_for_produce(f->reg, NULL, true, 4, &t), MQ_ERR_INVAL);
    assert_int_equal(topic_for_produce(f->reg, "x", true, 4, NULL), MQ_ERR_INVAL);
    assert_int_equal(topic_count(f->reg), 3);

    /* a system topic that exists can be found (e.g. to produce a retry) */
    assert_int_equal(topic_put_system(f->reg, "%RETRY%cg", 1, RW, false, NULL), MQ_OK);
    assert_int_equal(topic_for_produce(f->reg, "%RETRY%cg", false, 0, &t), MQ_OK);
    mq_log_level = saved;
}

static void test_topic_for_produce_without_write_perm_is_state(void **state) {
    Fixture *f = *state;
    assert_int_equal(topic_put(f->reg, "readonly", 2, META_PERM_READ, false, NULL), MQ_OK);
    MetaTopic t;
    memset(&t, 0, sizeof(t));
    assert_int_equal(topic_for_produce(f->reg, "readonly", true, 4, &t), MQ_ERR_STATE);
    assert_string_equal(t.name, "readonly"); /* filled anyway */
    assert_int_equal(t.perm, META_PERM_READ);
    assert_int_equal(topic_put(f->reg, "writeonly", 2, META_PERM_WRITE, false, NULL), MQ_OK);
    assert_int_equal(topic_for_produce(f->reg, "writeonly", false, 0, &t), MQ_OK);
}

#define RACE_THREADS 4
#define RACE_NAMES 200
#define RACE_ROUNDS 5 /* calls per thread = RACE_NAMES * RACE_ROUNDS = 1000 */

typedef struct RaceArg {
    TopicRegistry *r;
    pthread_barrier_t *start;
    int failures;  /* calls that did not return MQ_OK */
    int wrong;     /* calls that returned another topic's or odd settings */
} RaceArg;

static void *race_produce(void *p) {
    RaceArg *a = p;
    char name[32];
    for (int round = 0; round < RACE_ROUNDS; round++) {
        pthread_barrier_wait(a->start); /* every thread walks the same names at once */
        for (int i = 0; i < RACE_NAMES; i++) {
            snprintf(name, sizeof(name), "race-%d-%03d", round, i);
            MetaTopic t;
            if (topic_for_produce(a->r, name, true, 3, &t) != MQ_OK) {
                a->failures++;
                continue;
            }
            if (strcmp(t.name, name) != 0 || t.write_queues != 3 || t.perm != RW) a->wrong++;
            uint32_t q = 99;
            if (topic_select_queue(a->r, &t, -1, mq_slice(NULL, 0), &q) != MQ_OK || q >= 3)
                a->wrong++;
        }
    }
    return NULL;
}

static void test_topic_auto_create_race_makes_each_topic_once(void **state) {
    Fixture *f = *state;
    int saved = mq_log_level;
    mq_log_level = MQ_LOG_WARN;
    pthread_barrier_t start;
    pthread_barrier_init(&start, NULL, RACE_THREADS);
    pthread_t th[RACE_THREADS];
    RaceArg args[RACE_THREADS];
    for (int i = 0; i < RACE_THREADS; i++) {
        args[i] = (RaceArg){.r = f->reg, .start = &start};
        assert_int_equal(pthread_create(&th[i], NULL, race_produce, &args[i]), 0);
    }
    for (int i = 0; i < RACE_THREADS; i++) pthread_join(th[i], NULL);
    pthread_barrier_destroy(&start);
    mq_log_level = saved;
    for (int i = 0; i < RACE_THREADS; i++) {
        assert_int_equal(args[i].failures, 0);
        assert_int_equal(args[i].wrong, 0);
    }
    int want = RACE_NAMES * RACE_ROUNDS;
    assert_int_equal(topic_count(f->reg), want);
    int rows = 0;
    assert_int_equal(meta_topic_list(f->meta, count_meta_topics, &rows), MQ_OK);
    assert_int_equal(rows, want);
    /* every row agrees with the map; and a second write of a row would
     * have moved its updated_ms past created_ms whenever the clock ticked */
    char name[32];
    for (int round = 0; round < RACE_ROUNDS; round++) {
        for (int i = 0; i < RACE_NAMES; i++) {
            snprintf(name, sizeof(name), "race-%d-%03d", round, i);
            MetaTopic a;
            MetaTopic b;
            assert_int_equal(topic_get(f->reg, name, &a), MQ_OK);
            assert_int_equal(meta_topic_get(f->meta, name, &b), MQ_OK);
            assert_same_topic(&a, &b);
            assert_true(a.created_ms == a.updated_ms); /* one write only */
        }
    }
}

/* Writers put and delete while readers produce: readers only ever see a
 * whole topic or none.  Mostly for the sanitizers. */
typedef struct ChurnArg {
    TopicRegistry *r;
    volatile int *stop;
    int bad;
} ChurnArg;

static void *churn_reader(void *p) {
    ChurnArg *a = p;
    while (!__atomic_load_n(a->stop, __ATOMIC_ACQUIRE)) {
        MetaTopic t;
        int rc = topic_get(a->r, "churn", &t);
        if (rc == MQ_OK && (t.read_queues != t.write_queues || t.write_queues == 0)) a->bad++;
        if (rc != MQ_OK && rc != MQ_ERR_NOTFOUND) a->bad++;
        Names n = {0};
        if (topic_list(a->r, collect, &n) != MQ_OK) a->bad++;
    }
    return NULL;
}

static void test_topic_readers_see_whole_topics_while_writers_churn(void **state) {
    Fixture *f = *state;
    volatile int stop = 0;
    pthread_t th[2];
    ChurnArg args[2];
    for (int i = 0; i < 2; i++) {
        args[i] = (ChurnArg){.r = f->reg, .stop = &stop};
        assert_int_equal(pthread_create(&th[i], NULL, churn_reader, &args[i]), 0);
    }
    for (uint32_t i = 0; i < 100; i++) {
        assert_int_equal(topic_put(f->reg, "churn", i % 7 + 1, RW, false, NULL), MQ_OK);
        if (i % 3 == 0) assert_int_equal(topic_delete(f->reg, "churn"), MQ_OK);
    }
    __atomic_store_n(&stop, 1, __ATOMIC_RELEASE);
    for (int i = 0; i < 2; i++) {
        pthread_join(th[i], NULL);
        assert_int_equal(args[i].bad, 0);
    }
}

/* ---- queue selection ------------------------------------------------------*/

static MetaTopic put_get(Fixture *f, const char *name, uint32_t queues) {
    assert_int_equal(topic_put(f->reg, name, queues, RW, false, NULL), MQ_OK);
    MetaTopic t;
    assert_int_equal(topic_get(f->reg, name, &t), MQ_OK);
    return t;
}

static void test_topic_select_queue_explicit_and_out_of_range(void **state) {
    Fixture *f = *state;
    MetaTopic t = put_get(f, "orders", 4);
    uint32_t q = 99;
    for (int64_t id = 0; id < 4; id++) {
        assert_int_equal(topic_select_queue(f->reg, &t, id, mq_slice("key", 3), &q), MQ_OK);
        assert_int_equal(q, (uint32_t)id); /* an explicit id wins over the key */
    }
    q = 99;
    assert_int_equal(topic_select_queue(f->reg, &t, 4, mq_slice(NULL, 0), &q), MQ_ERR_INVAL);
    assert_int_equal(topic_select_queue(f->reg, &t, INT64_MAX, mq_slice(NULL, 0), &q),
                     MQ_ERR_INVAL);
    assert_int_equal(q, 99);
    assert_int_equal(topic_select_queue(f->reg, &t, 0, mq_slice(NULL, 0), NULL), MQ_ERR_INVAL);
    assert_int_equal(topic_select_queue(f->reg, NULL, 0, mq_slice(NULL, 0), &q), MQ_ERR_INVAL);
    assert_int_equal(topic_select_queue(f->reg, &t, -1, mq_slice(NULL, 5), &q), MQ_ERR_INVAL);

    MetaTopic none = t;
    none.write_queues = 0;
    assert_int_equal(topic_select_queue(f->reg, &none, -1, mq_slice(NULL, 0), &q),
                     MQ_ERR_STATE);
}

static void test_topic_select_queue_sharding_key_is_stable_and_spread(void **state) {
    Fixture *f = *state;
    MetaTopic t = put_get(f, "orders", 8);
    uint32_t first[1000];
    uint32_t per_queue[8] = {0};
    char key[32];
    for (int i = 0; i < 1000; i++) {
        snprintf(key, sizeof(key), "order-%d", i);
        MqSlice k = mq_slice(key, strlen(key));
        assert_int_equal(topic_select_queue(f->reg, &t, -1, k, &first[i]), MQ_OK);
        assert_true(first[i] < 8);
        assert_int_equal(first[i], (uint32_t)(mq_hash64(key, strlen(key)) % 8));
        per_queue[first[i]]++;
        /* the same key again (round robin in between changes nothing) */
        uint32_t q;
        assert_int_equal(topic_select_queue(f->reg, &t, -1, mq_slice(NULL, 0), &q), MQ_OK);
        assert_int_equal(topic_select_queue(f->reg, &t, -1, k, &q), MQ_OK);
        assert_int_equal(q, first[i]);
    }
    for (int i = 0; i < 8; i++) assert_true(per_queue[i] > 60); /* ~125 each */

    /* same key, same queue after a restart */
    reopen(f);
    assert_int_equal(topic_get(f->reg, "orders", &t), MQ_OK);
    for (int i = 0; i < 1000; i++) {
        snprintf(key, sizeof(key), "order-%d", i);
        uint32_t q;
        assert_int_equal(topic_select_queue(f->reg, &t, -1, mq_slice(key, strlen(key)), &q),
                         MQ_OK);
        assert_int_equal(q, first[i]);
    }
}

static void test_topic_select_queue_round_robin_cycles_all_queues(void **state) {
    Fixture *f = *state;
    MetaTopic a = put_get(f, "a", 8);
    MetaTopic b = put_get(f, "b", 2);
    uint32_t seen_a[8] = {0};
    uint32_t seen_b[2] = {0};
    uint32_t prev = 0;
    /* two topics interleaved: each still walks all of its own queues */
    for (int i = 0; i < 32; i++) {
        uint32_t q;
        assert_int_equal(topic_select_queue(f->reg, &a, -1, mq_slice(NULL, 0), &q), MQ_OK);
        assert_true(q < 8);
        if (i > 0) assert_int_equal(q, (prev + 1) % 8);
        prev = q;
        seen_a[q]++;
        assert_int_equal(topic_select_queue(f->reg, &b, -1, mq_slice("", 0), &q), MQ_OK);
        assert_true(q < 2);
        seen_b[q]++;
    }
    for (int i = 0; i < 8; i++) assert_int_equal(seen_a[i], 4);
    assert_int_equal(seen_b[0], 16);
    assert_int_equal(seen_b[1], 16);

    /* a topic the registry no longer holds still gets every queue */
    assert_int_equal(topic_delete(f->reg, "a"), MQ_OK);
    uint32_t seen_gone[8] = {0};
    for (int i = 0; i < 8; i++) {
        uint32_t q;
        assert_int_equal(topic_select_queue(f->reg, &a, -1, mq_slice(NULL, 0), &q), MQ_OK);
        seen_gone[q]++;
    }
    for (int i = 0; i < 8; i++) assert_int_equal(seen_gone[i], 1);
}

typedef struct TrafficSeen {
    char names[4][META_NAME_MAX + 1];
    TopicTraffic tr[4];
    int n;
} TrafficSeen;

static int see_traffic(void *arg, const MetaTopic *t, const TopicTraffic *tr) {
    TrafficSeen *s = arg;
    assert_true(s->n < 4);
    snprintf(s->names[s->n], sizeof(s->names[0]), "%s", t->name);
    s->tr[s->n++] = *tr;
    return 0;
}

static void test_topic_traffic_counts_per_topic(void **state) {
    Fixture *f = *state;
    assert_int_equal(topic_put(f->reg, "A", 4, RW, false, NULL), MQ_OK);
    assert_int_equal(topic_put(f->reg, "B", 4, RW, false, NULL), MQ_OK);
    topic_count_traffic(f->reg, "A", false, 3, 300);
    topic_count_traffic(f->reg, "A", true, 2, 200);
    topic_count_traffic(f->reg, "A", false, 1, 10);
    topic_count_traffic(f->reg, "Gone", false, 5, 5); /* unknown: ignored */
    /* an update of the settings keeps the counters */
    assert_int_equal(topic_put(f->reg, "A", 8, RW, false, NULL), MQ_OK);
    TrafficSeen seen = {0};
    assert_int_equal(topic_traffic_list(f->reg, see_traffic, &seen), MQ_OK);
    assert_int_equal(seen.n, 2);
    assert_string_equal(seen.names[0], "A");
    assert_int_equal(seen.tr[0].in_msgs, 4);
    assert_int_equal(seen.tr[0].in_bytes, 310);
    assert_int_equal(seen.tr[0].out_msgs, 2);
    assert_int_equal(seen.tr[0].out_bytes, 200);
    assert_string_equal(seen.names[1], "B");
    assert_int_equal(seen.tr[1].in_msgs + seen.tr[1].out_msgs, 0);
    /* a deleted and re-created topic starts from zero */
    assert_int_equal(topic_delete(f->reg, "A"), MQ_OK);
    assert_int_equal(topic_put(f->reg, "A", 4, RW, false, NULL), MQ_OK);
    memset(&seen, 0, sizeof(seen));
    assert_int_equal(topic_traffic_list(f->reg, see_traffic, &seen), MQ_OK);
    assert_int_equal(seen.tr[0].in_msgs, 0);
}

#define CASE(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)

int main(void) {
    const struct CMUnitTest tests[] = {
        CASE(test_topic_put_creates_then_updates),
        CASE(test_topic_get_missing_or_bad_arguments),
        CASE(test_topic_put_validates_name_queues_and_perm),
        CASE(test_topic_put_system_allows_reserved_names),
        CASE(test_topic_delete_removes_from_map_and_meta),
        CASE(test_topic_list_in_name_order_and_stops_early),
        CASE(test_topic_list_of_an_empty_registry),
        CASE(test_topic_registry_survives_close_and_reopen),
        CASE(test_topic_registry_loads_rows_written_before_open),
        CASE(test_topic_registry_open_rejects_bad_arguments),
        CASE(test_topic_for_produce_finds_or_auto_creates),
        CASE(test_topic_for_produce_without_write_perm_is_state),
        CASE(test_topic_auto_create_race_makes_each_topic_once),
        CASE(test_topic_readers_see_whole_topics_while_writers_churn),
        CASE(test_topic_select_queue_explicit_and_out_of_range),
        CASE(test_topic_select_queue_sharding_key_is_stable_and_spread),
        CASE(test_topic_select_queue_round_robin_cycles_all_queues),
        CASE(test_topic_traffic_counts_per_topic),
    };
    return cmocka_run_group_tests_name("topic", tests, NULL, NULL);
}
