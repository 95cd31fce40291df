/*
 * test_group.c - the subscription-group registry (core/group.c) over a real
 * sqlite metadata database: put/get/update/delete/list, validation,
 * persistence across reopen, generations, auto-create on consume (also
 * racing) and the retry/DLQ topic names.
 *
 * Each case gets its own temporary directory with 'meta.db' in it, opened
 * in setup together with a registry.
 */
#include "testutil.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "group.h"
#include "meta.h"
#include "mq.h"
#include "msg.h"

typedef struct Fixture {
    char *dir;          /* per-case temporary directory */
    char *path;         /* dir/meta.db */
    Meta *meta;
    GroupRegistry *reg;
} Fixture;

static Meta *meta_ok(const char *path) {
    Meta *m = NULL;
    assert_int_equal(meta_open(path, 0, &m), MQ_OK);
    return m;
}

static GroupRegistry *reg_ok(Meta *m) {
    GroupRegistry *r = NULL;
    assert_int_equal(group_registry_open(m, &r), MQ_OK);
    assert_non_null(r);
    return r;
}

static int setup(void **state) {
    Fixture *f = calloc(1, sizeof(*f));
    if (!f) return -1;
    f->dir = tu_mkdtemp("group");
    f->path = tu_path(f->dir, "meta.db");
    f->meta = meta_ok(f->path);
    f->reg = reg_ok(f->meta);
    *state = f;
    return 0;
}

static int teardown(void **state) {
    Fixture *f = *state;
    group_registry_close(f->reg);
    meta_close(f->meta);
    tu_rmtree(f->dir);
    free(f->path);
    free(f->dir);
    free(f);
    return 0;
}

/* reopen closes the registry and the database and opens both again. */
static void reopen(Fixture *f) {
    group_registry_close(f->reg);
    meta_close(f->meta);
    f->meta = meta_ok(f->path);
    f->reg = reg_ok(f->meta);
}

/* group builds a MetaGroup with RocketMQ's defaults and 'name'. */
static MetaGroup group(const char *name) {
    MetaGroup g;
    meta_group_defaults(&g, name);
    return g;
}

/* A list callback that records names and stops after 'stop_after'. */
typedef struct Names {
    char names[8][META_NAME_MAX + 1];
    int count;
    int stop_after;      /* 0 = never stop */
    GroupRegistry *r;    /* when set, each call also reads the registry */
} Names;

static int collect(void *arg, const MetaGroup *g) {
    Names *n = arg;
    if (n->count < 8) snprintf(n->names[n->count], sizeof(n->names[0]), "%s", g->name);
    n->count++;
    if (n->r) {
        MetaGroup again;
        assert_int_equal(group_get(n->r, g->name, &again), MQ_OK);
    }
    return n->stop_after && n->count >= n->stop_after;
}

static int count_meta_groups(void *arg, const MetaGroup *g) {
    (void)g;
    (*(int *)arg)++;
    return 0;
}

/* assert_same_group compares field by field (struct padding is not compared). */
static void assert_same_group(const MetaGroup *a, const MetaGroup *b) {
    assert_string_equal(a->name, b->name);
    assert_int_equal(a->consume_enable, b->consume_enable);
    assert_int_equal(a->broadcast, b->broadcast);
    assert_int_equal(a->orderly, b->orderly);
    assert_int_equal(a->retry_max_times, b->retry_max_times);
    assert_int_equal(a->retry_queue_nums, b->retry_queue_nums);
    assert_true(a->created_ms == b->created_ms);
    assert_true(a->updated_ms == b->updated_ms);
}

/* ---- put / get / delete / list -------------------------------------------*/

static void test_group_put_creates_then_updates_keeping_created_ms(void **state) {
    Fixture *f = *state;
    bool created = false;
    MetaGroup in = group("cg");
    in.created_ms = 42; /* ignored: meta.db sets the timestamps */
    in.updated_ms = 43;
    assert_int_equal(group_put(f->reg, &in, &created), MQ_OK);
    assert_true(created);
    MetaGroup g;
    assert_int_equal(group_get(f->reg, "cg", &g), MQ_OK);
    assert_string_equal(g.name, "cg");
    assert_true(g.consume_enable);
    assert_false(g.broadcast);
    assert_false(g.orderly);
    assert_int_equal(g.retry_max_times, 16);
    assert_int_equal(g.retry_queue_nums, 1);
    assert_true(g.created_ms > 43);
    assert_true(g.updated_ms >= g.created_ms);
    int64_t created_ms = g.created_ms;

    in.consume_enable = false;
    in.broadcast = true;
    in.orderly = true;
    in.retry_max_times = 3;
    in.retry_queue_nums = 4;
    assert_int_equal(group_put(f->reg, &in, &created), MQ_OK);
    assert_false(created);
    assert_int_equal(group_get(f->reg, "cg", &g), MQ_OK);
    assert_false(g.consume_enable);
    assert_true(g.broadcast);
    assert_true(g.orderly);
    assert_int_equal(g.retry_max_times, 3);
    assert_int_equal(g.retry_queue_nums, 4);
    assert_true(g.created_ms == created_ms);
    assert_true(g.updated_ms >= created_ms);
    assert_int_equal(group_count(f->reg), 1);

    /* the map holds what meta.db holds, timestamps included */
    MetaGroup db;
    assert_int_equal(meta_group_get(f->meta, "cg", &db), MQ_OK);
    assert_same_group(&db, &g);
    /* 'created' may be NULL */
    in = group("other");
    assert_int_equal(group_put(f->reg, &in, NULL), MQ_OK);
    assert_int_equal(group_count(f->reg), 2);
}

static void test_group_get_missing_or_bad_arguments(void **state) {
    Fixture *f = *state;
    MetaGroup g;
    assert_int_equal(group_get(f->reg, "nope", &g), MQ_ERR_NOTFOUND);
    assert_int_equal(group_get(f->reg, "", &g), MQ_ERR_NOTFOUND);
    assert_int_equal(group_get(f->reg, NULL, &g), MQ_ERR_INVAL);
    assert_int_equal(group_get(f->reg, "nope", NULL), MQ_ERR_INVAL);
    assert_int_equal(group_get(NULL, "nope", &g), MQ_ERR_INVAL);
    char huge[400];
    memset(huge, 'a', sizeof(huge) - 1);
    huge[sizeof(huge) - 1] = '\0';
    assert_int_equal(group_get(f->reg, huge, &g), MQ_ERR_NOTFOUND);
    assert_int_equal(group_count(NULL), 0);
}

static void test_group_put_validates_name_and_retry_settings(void **state) {
    Fixture *f = *state;
    MetaGroup g = group("x");
    memset(g.name, 'n', 127);
    g.name[127] = '\0';
    assert_int_equal(group_put(f->reg, &g, NULL), MQ_OK); /* 127 bytes */
    g.name[127] = 'n';
    g.name[128] = '\0';
    assert_int_equal(group_put(f->reg, &g, NULL), MQ_ERR_INVAL);
    memset(g.name, 'n', sizeof(g.name)); /* not even NUL-terminated */
    assert_int_equal(group_put(f->reg, &g, NULL), MQ_ERR_INVAL);

    const char *bad[] = {"", "a.b", "50%", "a b", "gr\xc3\xbapo", "%RETRY%cg", "%DLQ%cg",
                         "RMQ_SYS_X", "rmq_sys_x", "SCHEDULE_TOPIC_XXXX", "TBW102"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        g = group(bad[i]);
        snprintf(g.name, sizeof(g.name), "%s", bad[i]);
        assert_int_equal(group_put(f->reg, &g, NULL), MQ_ERR_INVAL);
    }
    g = group("ok");
    assert_int_equal(group_put(NULL, &g, NULL), MQ_ERR_INVAL);
    assert_int_equal(group_put(f->reg, NULL, NULL), MQ_ERR_INVAL);

    g.retry_max_times = GROUP_RETRY_MAX_TIMES_MAX + 1;
    assert_int_equal(group_put(f->reg, &g, NULL), MQ_ERR_INVAL);
    g.retry_max_times = UINT32_MAX;
    assert_int_equal(group_put(f->reg, &g, NULL), MQ_ERR_INVAL);
    g.retry_max_times = 0;
    g.retry_queue_nums = 0;
    assert_int_equal(group_put(f->reg, &g, NULL), MQ_ERR_INVAL);
    g.retry_queue_nums = GROUP_RETRY_QUEUES_MAX + 1;
    assert_int_equal(group_put(f->reg, &g, NULL), MQ_ERR_INVAL);
    g.retry_queue_nums = GROUP_RETRY_QUEUES_MAX;
    assert_int_equal(group_put(f->reg, &g, NULL), MQ_OK); /* 0 retries is allowed */
    g.retry_max_times = GROUP_RETRY_MAX_TIMES_MAX;
    g.retry_queue_nums = 1;
    assert_int_equal(group_put(f->reg, &g, NULL), MQ_OK);
    MetaGroup got;
    assert_int_equal(group_get(f->reg, "ok", &got), MQ_OK);
    assert_int_equal(got.retry_max_times, GROUP_RETRY_MAX_TIMES_MAX);
    assert_int_equal(got.retry_queue_nums, 1);

    /* nothing invalid reached the map or meta.db */
    assert_int_equal(group_count(f->reg), 2);
    int rows = 0;
    assert_int_equal(meta_group_list(f->meta, count_meta_groups, &rows), MQ_OK);
    assert_int_equal(rows, 2);
}

static void test_group_delete_removes_from_map_meta_and_offsets(void **state) {
    Fixture *f = *state;
    MetaGroup g = group("cg");
    assert_int_equal(group_put(f->reg, &g, NULL), MQ_OK);
    g = group("keep");
    assert_int_equal(group_put(f->reg, &g, NULL), MQ_OK);
    assert_int_equal(meta_offset_set(f->meta, "cg", "orders", 0, 5), MQ_OK);
    assert_int_equal(meta_offset_set(f->meta, "keep", "orders", 0, 7), MQ_OK);
    assert_int_equal(group_delete(f->reg, "cg"), MQ_OK);
    assert_int_equal(group_get(f->reg, "cg", &g), MQ_ERR_NOTFOUND);
    assert_int_equal(meta_group_get(f->meta, "cg", &g), MQ_ERR_NOTFOUND);
    uint64_t off = 0;
    assert_int_equal(meta_offset_get(f->meta, "cg", "orders", 0, &off), MQ_ERR_NOTFOUND);
    assert_int_equal(meta_offset_get(f->meta, "keep", "orders", 0, &off), MQ_OK);
    assert_int_equal(off, 7);
    assert_int_equal(group_count(f->reg), 1);
    assert_int_equal(group_delete(f->reg, "cg"), MQ_ERR_NOTFOUND);
    assert_int_equal(group_delete(f->reg, ""), MQ_ERR_INVAL);
    assert_int_equal(group_delete(f->reg, NULL), MQ_ERR_INVAL);
    assert_int_equal(group_delete(NULL, "keep"), MQ_ERR_INVAL);
    assert_int_equal(group_get(f->reg, "keep", &g), MQ_OK);

    /* a deleted name can come back with new settings */
    bool created = false;
    g = group("cg");
    g.retry_max_times = 2;
    assert_int_equal(group_put(f->reg, &g, &created), MQ_OK);
    assert_true(created);
    assert_int_equal(group_get(f->reg, "cg", &g), MQ_OK);
    assert_int_equal(g.retry_max_times, 2);
}

static void test_group_list_in_name_order_and_stops_early(void **state) {
    Fixture *f = *state;
    const char *names[] = {"zeta", "Alpha", "beta", "a_1", "B-2"};
    for (size_t i = 0; i < 5; i++) {
        MetaGroup g = group(names[i]);
        assert_int_equal(group_put(f->reg, &g, NULL), MQ_OK);
    }
    Names n = {.r = f->reg}; /* the callback may call the registry */
    assert_int_equal(group_list(f->reg, collect, &n), MQ_OK);
    assert_int_equal(n.count, 5);
    /* byte-wise order, as meta_group_list */
    const char *want[] = {"Alpha", "B-2", "a_1", "beta", "zeta"};
    for (int i = 0; i < 5; i++) assert_string_equal(n.names[i], want[i]);

    Names early = {.stop_after = 2};
    assert_int_equal(group_list(f->reg, collect, &early), MQ_OK);
    assert_int_equal(early.count, 2);
    assert_string_equal(early.names[1], "B-2");

    assert_int_equal(group_list(NULL, collect, &n), MQ_ERR_INVAL);
    assert_int_equal(group_list(f->reg, NULL, &n), MQ_ERR_INVAL);
}

static void test_group_list_of_an_empty_registry(void **state) {
    Fixture *f = *state;
    Names n = {0};
    assert_int_equal(group_list(f->reg, collect, &n), MQ_OK);
    assert_int_equal(n.count, 0);
    assert_int_equal(group_count(f->reg), 0);
}

/* ---- persistence -----------------------------------------------------------*/

static void test_group_registry_survives_close_and_reopen(void **state) {
    Fixture *f = *state;
    char name[32];
    for (int i = 0; i < 150; i++) { /* more than the initial buckets */
        snprintf(name, sizeof(name), "cg-%03d", i);
        MetaGroup g = group(name);
        g.retry_max_times = (uint32_t)i;
        g.orderly = i % 2;
        assert_int_equal(group_put(f->reg, &g, NULL), MQ_OK);
    }
    assert_int_equal(group_delete(f->reg, "cg-007"), MQ_OK);
    MetaGroup before;
    assert_int_equal(group_get(f->reg, "cg-100", &before), MQ_OK);
    reopen(f);
    assert_int_equal(group_count(f->reg), 149);
    MetaGroup g;
    assert_int_equal(group_get(f->reg, "cg-007", &g), MQ_ERR_NOTFOUND);
    assert_int_equal(group_get(f->reg, "cg-100", &g), MQ_OK);
    assert_same_group(&g, &before);
    for (int i = 0; i < 150; i++) {
        if (i == 7) continue;
        snprintf(name, sizeof(name), "cg-%03d", i);
        assert_int_equal(group_get(f->reg, name, &g), MQ_OK);
        assert_int_equal(g.retry_max_times, (uint32_t)i);
        assert_int_equal(g.orderly, i % 2);
        assert_true(group_generation(f->reg, name) != 0);
    }
}

static void test_group_registry_loads_rows_written_before_open(void **state) {
    Fixture *f = *state;
    MetaGroup g = group("direct");
    g.broadcast = true;
    assert_int_equal(meta_group_put(f->meta, &g), MQ_OK);
    assert_int_equal(group_get(f->reg, "direct", &g), MQ_ERR_NOTFOUND); /* not reloaded live */
    group_registry_close(f->reg);
    f->reg = reg_ok(f->meta);
    assert_int_equal(group_get(f->reg, "direct", &g), MQ_OK);
    assert_true(g.broadcast);
}

static void test_group_registry_open_rejects_bad_arguments(void **state) {
    Fixture *f = *state;
    GroupRegistry *r = NULL;
    assert_int_equal(group_registry_open(NULL, &r), MQ_ERR_INVAL);
    assert_null(r);
    assert_int_equal(group_registry_open(f->meta, NULL), MQ_ERR_INVAL);
    group_registry_close(NULL);
}

/* ---- generations -----------------------------------------------------------*/

static void test_group_generation_changes_on_every_write(void **state) {
    Fixture *f = *state;
    int saved = mq_log_level;
    mq_log_level = MQ_LOG_WARN;
    assert_true(group_generation(f->reg, "cg") == 0);
    assert_true(group_generation(f->reg, NULL) == 0);
    assert_true(group_generation(NULL, "cg") == 0);
    MetaGroup g = group("cg");
    assert_int_equal(group_put(f->reg, &g, NULL), MQ_OK);
    uint64_t g1 = group_generation(f->reg, "cg");
    assert_true(g1 != 0);
    assert_true(group_generation(f->reg, "cg") == g1); /* reading changes nothing */

    /* an update, even to the same settings, moves it */
    assert_int_equal(group_put(f->reg, &g, NULL), MQ_OK);
    uint64_t g2 = group_generation(f->reg, "cg");
    assert_true(g2 != 0 && g2 != g1);

    /* other groups' writes do not change it */
    MetaGroup other = group("other");
    assert_int_equal(group_put(f->reg, &other, NULL), MQ_OK);
    assert_int_equal(group_delete(f->reg, "other"), MQ_OK);
    assert_true(group_generation(f->reg, "cg") == g2);

    /* delete: absent is 0; created again: a number not seen before */
    assert_int_equal(group_delete(f->reg, "cg"), MQ_OK);
    assert_true(group_generation(f->reg, "cg") == 0);
    MetaGroup out;
    assert_int_equal(group_for_consume(f->reg, "cg", true, &out), MQ_OK);
    uint64_t g3 = group_generation(f->reg, "cg");
    assert_true(g3 != 0 && g3 != g1 && g3 != g2);

    /* a consume that finds the group writes nothing */
    assert_int_equal(group_for_consume(f->reg, "cg", true, &out), MQ_OK);
    assert_true(group_generation(f->reg, "cg") == g3);

    /* failed writes change nothing */
    g.retry_queue_nums = 0;
    assert_int_equal(group_put(f->reg, &g, NULL), MQ_ERR_INVAL);
    assert_true(group_generation(f->reg, "cg") == g3);
    mq_log_level = saved;
}

/* ---- consume path ----------------------------------------------------------*/

static void test_group_for_consume_finds_or_auto_creates(void **state) {
    Fixture *f = *state;
    int saved = mq_log_level;
    mq_log_level = MQ_LOG_WARN;
    MetaGroup g;
    assert_int_equal(group_for_consume(f->reg, "new", false, &g), MQ_ERR_NOTFOUND);
    assert_int_equal(group_count(f->reg), 0);

    assert_int_equal(group_for_consume(f->reg, "new", true, &g), MQ_OK);
    assert_string_equal(g.name, "new");
    assert_true(g.consume_enable);
    assert_false(g.broadcast);
    assert_false(g.orderly);
    assert_int_equal(g.retry_max_times, 16);
    assert_int_equal(g.retry_queue_nums, 1);
    assert_true(g.created_ms > 0);
    MetaGroup db;
    assert_int_equal(meta_group_get(f->meta, "new", &db), MQ_OK);
    assert_same_group(&db, &g);
    assert_int_equal(group_for_consume(f->reg, "new", false, &g), MQ_OK);

    /* an existing group keeps its settings, disabled ones too */
    MetaGroup in = group("custom");
    in.retry_max_times = 5;
    in.consume_enable = false;
    assert_int_equal(group_put(f->reg, &in, NULL), MQ_OK);
    assert_int_equal(group_for_consume(f->reg, "custom", true, &g), MQ_OK);
    assert_int_equal(g.retry_max_times, 5);
    assert_false(g.consume_enable);

    /* bad names are INVAL with and without auto-create */
    const char *bad[] = {"", "a.b", "TBW102", "%DLQ%cg", "RMQ_SYS_cg"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        assert_int_equal(group_for_consume(f->reg, bad[i], true, &g), MQ_ERR_INVAL);
        assert_int_equal(group_for_consume(f->reg, bad[i], false, &g), MQ_ERR_INVAL);
    }
    char longest[129];
    memset(longest, 'l', 128);
    longest[128] = '\0';
    assert_int_equal(group_for_consume(f->reg, longest, true, &g), MQ_ERR_INVAL);
    longest[127] = '\0';
    assert_int_equal(group_for_consume(f->reg, longest, true, &g), MQ_OK);
    assert_int_equal(group_for_consume(f->reg, NULL, true, &g), MQ_ERR_INVAL);
    assert_int_equal(group_for_consume(f->reg, "x", true, NULL), MQ_ERR_INVAL);
    assert_int_equal(group_for_consume(NULL, "x", true, &g), MQ_ERR_INVAL);
    assert_int_equal(group_count(f->reg), 3);
    mq_log_level = saved;
}

#define RACE_THREADS 4
#define RACE_NAMES 100
#define RACE_ROUNDS 5

typedef struct RaceArg {
    GroupRegistry *r;
    pthread_barrier_t *start;
    int failures; /* calls that did not return MQ_OK */
    int wrong;    /* calls that returned another group's or odd settings */
} RaceArg;

static void *race_consume(void *p) {
    RaceArg *a = p;
    char name[32];
    for (int round = 0; round < RACE_ROUNDS; round++) {
        pthread_barrier_wait(a->start); /* every thread walks the same names at once */
        for (int i = 0; i < RACE_NAMES; i++) {
            snprintf(name, sizeof(name), "race-%d-%03d", round, i);
            MetaGroup g;
            if (group_for_consume(a->r, name, true, &g) != MQ_OK) {
                a->failures++;
                continue;
            }
            if (strcmp(g.name, name) != 0 || g.retry_max_times != 16 || !g.consume_enable)
                a->wrong++;
        }
    }
    return NULL;
}

static void test_group_auto_create_race_makes_each_group_once(void **state) {
    Fixture *f = *state;
    int saved = mq_log_level;
    mq_log_level = MQ_LOG_WARN;
    pthread_barrier_t start;
    pthread_barrier_init(&start, NULL, RACE_THREADS);
    pthread_t th[RACE_THREADS];
    RaceArg args[RACE_THREADS];
    for (int i = 0; i < RACE_THREADS; i++) {
        args[i] = (RaceArg){.r = f->reg, .start = &start};
        assert_int_equal(pthread_create(&th[i], NULL, race_consume, &args[i]), 0);
    }
    for (int i = 0; i < RACE_THREADS; i++) pthread_join(th[i], NULL);
    pthread_barrier_destroy(&start);
    mq_log_level = saved;
    for (int i = 0; i < RACE_THREADS; i++) {
        assert_int_equal(args[i].failures, 0);
        assert_int_equal(args[i].wrong, 0);
    }
    int want = RACE_NAMES * RACE_ROUNDS;
    assert_int_equal(group_count(f->reg), want);
    int rows = 0;
    assert_int_equal(meta_group_list(f->meta, count_meta_groups, &rows), MQ_OK);
    assert_int_equal(rows, want);
    char name[32];
    for (int round = 0; round < RACE_ROUNDS; round++) {
        for (int i = 0; i < RACE_NAMES; i++) {
            snprintf(name, sizeof(name), "race-%d-%03d", round, i);
            MetaGroup a;
            MetaGroup b;
            assert_int_equal(group_get(f->reg, name, &a), MQ_OK);
            assert_int_equal(meta_group_get(f->meta, name, &b), MQ_OK);
            assert_same_group(&a, &b);
            assert_true(a.created_ms == a.updated_ms); /* one write only */
        }
    }
}

/* Writers put and delete while readers consume: readers only ever see a
 * whole group or none.  Mostly for the sanitizers. */
typedef struct ChurnArg {
    GroupRegistry *r;
    volatile int *stop;
    int bad;
} ChurnArg;

static void *churn_reader(void *p) {
    ChurnArg *a = p;
    while (!__atomic_load_n(a->stop, __ATOMIC_ACQUIRE)) {
        MetaGroup g;
        int rc = group_for_consume(a->r, "churn", false, &g);
        /* puts keep retry_queue_nums == retry_max_times + 1 */
        if (rc == MQ_OK && g.retry_queue_nums != g.retry_max_times + 1) a->bad++;
        if (rc != MQ_OK && rc != MQ_ERR_NOTFOUND) a->bad++;
        Names n = {0};
        if (group_list(a->r, collect, &n) != MQ_OK) a->bad++;
    }
    return NULL;
}

static void test_group_readers_see_whole_groups_while_writers_churn(void **state) {
    Fixture *f = *state;
    volatile int stop = 0;
    pthread_t th[2];
    ChurnArg args[2];
    for (int i = 0; i < 2; i++) {
        args[i] = (ChurnArg){.r = f->reg, .stop = &stop};
        assert_int_equal(pthread_create(&th[i], NULL, churn_reader, &args[i]), 0);
    }
    uint64_t last = 0;
    for (uint32_t i = 0; i < 100; i++) {
        MetaGroup g = group("churn");
        g.retry_max_times = i % 7;
        g.retry_queue_nums = i % 7 + 1;
        assert_int_equal(group_put(f->reg, &g, NULL), MQ_OK);
        uint64_t gen = group_generation(f->reg, "churn");
        assert_true(gen != 0 && gen != last);
        last = gen;
        if (i % 3 == 0) assert_int_equal(group_delete(f->reg, "churn"), MQ_OK);
    }
    __atomic_store_n(&stop, 1, __ATOMIC_RELEASE);
    for (int i = 0; i < 2; i++) {
        pthread_join(th[i], NULL);
        assert_int_equal(args[i].bad, 0);
    }
}

/* ---- retry and DLQ topic names ---------------------------------------------*/

static void test_group_retry_and_dlq_topic_names(void **state) {
    (void)state;
    char buf[MSG_SYSTEM_NAME_MAX + 1];
    group_retry_topic("cg", buf, sizeof(buf));
    assert_string_equal(buf, "%RETRY%cg");
    assert_true(msg_system_name_valid(buf, strlen(buf)));
    assert_true(msg_name_reserved(buf, strlen(buf)));
    group_dlq_topic("cg", buf, sizeof(buf));
    assert_string_equal(buf, "%DLQ%cg");
    assert_true(msg_system_name_valid(buf, strlen(buf)));

    /* the longest user group fits */
    char longest[MSG_NAME_MAX + 1];
    memset(longest, 'g', MSG_NAME_MAX);
    longest[MSG_NAME_MAX] = '\0';
    group_retry_topic(longest, buf, sizeof(buf));
    assert_int_equal(strlen(buf), 7 + MSG_NAME_MAX);
    assert_memory_equal(buf, "%RETRY%", 7);
    assert_true(msg_system_name_valid(buf, strlen(buf)));

    /* small buffers truncate; NULL and 0 are harmless */
    char small[6];
    group_retry_topic("cg", small, sizeof(small));
    assert_string_equal(small, "%RETR");
    group_dlq_topic(NULL, small, sizeof(small));
    assert_string_equal(small, "%DLQ%");
    small[0] = 'x';
    group_dlq_topic("cg", small, 0);
    assert_int_equal(small[0], 'x');
    group_dlq_topic("cg", NULL, 10);
}

#define CASE(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)

int main(void) {
    const struct CMUnitTest tests[] = {
        CASE(test_group_put_creates_then_updates_keeping_created_ms),
        CASE(test_group_get_missing_or_bad_arguments),
        CASE(test_group_put_validates_name_and_retry_settings),
        CASE(test_group_delete_removes_from_map_meta_and_offsets),
        CASE(test_group_list_in_name_order_and_stops_early),
        CASE(test_group_list_of_an_empty_registry),
        CASE(test_group_registry_survives_close_and_reopen),
        CASE(test_group_registry_loads_rows_written_before_open),
        CASE(test_group_registry_open_rejects_bad_arguments),
        CASE(test_group_generation_changes_on_every_write),
        CASE(test_group_for_consume_finds_or_auto_creates),
        CASE(test_group_auto_create_race_makes_each_group_once),
        CASE(test_group_readers_see_whole_groups_while_writers_churn),
        CASE(test_group_retry_and_dlq_topic_names),
    };
    return cmocka_run_group_tests_name("group", tests, NULL, NULL);
}
