/*
 * test_meta.c - the sqlite metadata store (store/meta.c): topics, groups,
 * consumer offsets and their batched flush, schema versioning, settings.
 *
 * Each case gets its own temporary directory with 'meta.db' in it.  What is
 * on disk is checked through a second, independent sqlite connection.
 */
#include "testutil.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <time.h>

#include <sqlite3.h>

#include "meta.h"
#include "mq.h"

typedef struct Fixture {
    char *dir;  /* per-case temporary directory */
    char *path; /* dir/meta.db */
} Fixture;

static int setup(void **state) {
    Fixture *f = calloc(1, sizeof(*f));
    if (!f) return -1;
    f->dir = tu_mkdtemp("meta");
    f->path = tu_path(f->dir, "meta.db");
    *state = f;
    return 0;
}

static int teardown(void **state) {
    Fixture *f = *state;
    tu_rmtree(f->dir);
    free(f->path);
    free(f->dir);
    free(f);
    return 0;
}

/* ---- helpers: a second connection ----------------------------------------*/

static sqlite3 *probe_open(const char *path) {
    sqlite3 *db = NULL;
    int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE;
    assert_int_equal(sqlite3_open_v2(path, &db, flags, NULL), SQLITE_OK);
    sqlite3_busy_timeout(db, 2000);
    return db;
}

static void probe_exec(const char *path, const char *sql) {
    sqlite3 *db = probe_open(path);
    assert_int_equal(sqlite3_exec(db, sql, NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(db);
}

/* probe_int runs a one-value query; -1 when it returns no row. */
static int64_t probe_int(const char *path, const char *sql) {
    sqlite3 *db = probe_open(path);
    sqlite3_stmt *st = NULL;
    assert_int_equal(sqlite3_prepare_v2(db, sql, -1, &st, NULL), SQLITE_OK);
    int rc = sqlite3_step(st);
    assert_true(rc == SQLITE_ROW || rc == SQLITE_DONE);
    int64_t v = rc == SQLITE_ROW ? sqlite3_column_int64(st, 0) : -1;
    sqlite3_finalize(st);
    sqlite3_close(db);
    return v;
}

/* probe_offset reads consumer_offset on disk; -1 when the row is absent. */
static int64_t probe_offset(const char *path, const char *grp, const char *topic,
                            uint32_t qid) {
    char sql[512];
    snprintf(sql, sizeof(sql),
             "SELECT off FROM consumer_offset WHERE grp = '%s' AND topic = '%s' AND qid = %u",
             grp, topic, qid);
    return probe_int(path, sql);
}

static int64_t probe_offset_rows(const char *path) {
    return probe_int(path, "SELECT count(*) FROM consumer_offset");
}

static void sleep_ms(long ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static Meta *open_ok(const char *path, uint32_t flush_ms) {
    Meta *m = NULL;
    assert_int_equal(meta_open(path, flush_ms, &m), MQ_OK);
    assert_non_null(m);
    return m;
}

static MetaTopic topic_of(const char *name, uint32_t queues) {
    MetaTopic t;
    memset(&t, 0, sizeof(t));
    snprintf(t.name, sizeof(t.name), "%s", name);
    t.read_queues = queues;
    t.write_queues = queues;
    t.perm = META_PERM_READ | META_PERM_WRITE;
    return t;
}

/* A list callback that records names and stops after 'stop_after'. */
typedef struct Names {
    char names[8][META_NAME_MAX + 1];
    int count;
    int stop_after; /* 0 = never stop */
} Names;

static int add_name(Names *n, const char *name) {
    if (n->count < 8) snprintf(n->names[n->count], sizeof(n->names[0]), "%s", name);
    n->count++;
    return n->stop_after && n->count >= n->stop_after;
}

static int collect_topic(void *arg, const MetaTopic *t) {
    return add_name(arg, t->name);
}

static int collect_group(void *arg, const MetaGroup *g) {
    return add_name(arg, g->name);
}

/* ---- open and schema -----------------------------------------------------*/

static void test_meta_open_creates_versioned_wal_database(void **state) {
    Fixture *f = *state;
    Meta *m = open_ok(f->path, 0);
    meta_close(m);
    meta_close(NULL);
    assert_int_equal(probe_int(f->path, "SELECT CAST(value AS INTEGER) FROM meta_info"
                                        " WHERE key = 'schema_version'"),
                     META_SCHEMA_VERSION);
    assert_true(probe_int(f->path, "SELECT CAST(value AS INTEGER) FROM meta_info"
                                   " WHERE key = 'created_ms'") > 0);
    sqlite3 *db = probe_open(f->path);
    sqlite3_stmt *st = NULL;
    assert_int_equal(sqlite3_prepare_v2(db, "PRAGMA journal_mode", -1, &st, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_step(st), SQLITE_ROW);
    assert_string_equal((const char *)sqlite3_column_text(st, 0), "wal");
    sqlite3_finalize(st);
    sqlite3_close(db);
    /* reopening an existing database works and changes nothing */
    m = open_ok(f->path, 0);
    meta_close(m);
}

static void test_meta_newer_or_unknown_schema_version_is_corrupt(void **state) {
    Fixture *f = *state;
    meta_close(open_ok(f->path, 0));
    static const char *const bad[] = {"4", "abc", "", "-1", "0", "1x"};
    int saved = mq_log_level;
    mq_log_level = -1; /* the failures below are expected */
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char sql[128];
        snprintf(sql, sizeof(sql),
                 "UPDATE meta_info SET value = '%s' WHERE key = 'schema_version'", bad[i]);
        probe_exec(f->path, sql);
        Meta *m = NULL;
        assert_int_equal(meta_open(f->path, 0, &m), MQ_ERR_CORRUPT);
        assert_null(m);
    }
    probe_exec(f->path, "DELETE FROM meta_info WHERE key = 'schema_version'");
    Meta *m = NULL;
    assert_int_equal(meta_open(f->path, 0, &m), MQ_ERR_CORRUPT);
    mq_log_level = saved;
    probe_exec(f->path, "INSERT INTO meta_info VALUES('schema_version', '2')");
    meta_close(open_ok(f->path, 0));
}

static int collect_pop(void *arg, const MetaPopRow *r) {
    int *seen = arg;
    assert_string_equal(r->group, "g1");
    assert_string_equal(r->topic, "Orders");
    assert_true(r->retry);
    assert_int_equal(r->queue_id, 3);
    assert_int_equal(r->ack_off, 10);
    assert_int_equal(r->next_off, 14);
    assert_int_equal(r->journal_off, 99);
    assert_int_equal(r->entries_len, 3);
    assert_memory_equal(r->entries, "abc", 3);
    (*seen)++;
    return MQ_OK;
}

static void test_meta_version_1_database_gets_pop_state_and_keeps_rows(void **state) {
    Fixture *f = *state;
    Meta *m = open_ok(f->path, 0);
    MetaTopic t = {.read_queues = 1, .write_queues = 1, .perm = 6};
    strcpy(t.name, "Orders");
    assert_int_equal(meta_topic_put(m, &t), MQ_OK);
    meta_close(m);
    /* what a version-1 broker left behind */
    probe_exec(f->path, "DROP TABLE pop_state");
    probe_exec(f->path, "UPDATE meta_info SET value = '1' WHERE key = 'schema_version'");
    m = open_ok(f->path, 0);
    MetaTopic got;
    assert_int_equal(meta_topic_get(m, "Orders", &got), MQ_OK);
    int64_t replay = 0;
    int seen = 0;
    assert_int_equal(meta_pop_load(m, collect_pop, &seen, &replay), MQ_OK);
    assert_int_equal(seen, 0);
    assert_int_equal(replay, -1);
    MetaPopRow row = {.group = "g1", .topic = "Orders", .retry = true, .queue_id = 3,
                      .ack_off = 10, .next_off = 14, .journal_off = 99,
                      .entries = (const uint8_t *)"abc", .entries_len = 3};
    assert_int_equal(meta_pop_save(m, &row, 1, 1234), MQ_OK);
    meta_close(m);
    m = open_ok(f->path, 0);
    assert_int_equal(meta_pop_load(m, collect_pop, &seen, &replay), MQ_OK);
    assert_int_equal(seen, 1);
    assert_int_equal(replay, 1234);
    /* a drop row deletes; so does deleting the topic */
    row.drop = true;
    assert_int_equal(meta_pop_save(m, &row, 1, 1300), MQ_OK);
    seen = 0;
    assert_int_equal(meta_pop_load(m, collect_pop, &seen, &replay), MQ_OK);
    assert_int_equal(seen, 0);
    row.drop = false;
    assert_int_equal(meta_pop_save(m, &row, 1, 1400), MQ_OK);
    assert_int_equal(meta_topic_delete(m, "Orders"), MQ_OK);
    assert_int_equal(meta_pop_load(m, collect_pop, &seen, &replay), MQ_OK);
    assert_int_equal(seen, 0);
    assert_int_equal(replay, 1400);
    meta_close(m);
}

static int count_due(void *arg, const MetaTxn *t) {
    (void)t;
    (*(int *)arg)++;
    return MQ_OK;
}

/* A version-2 database gets the transaction tables; a row written,
 * updated, found due, counted, and purged once resolved. */
static void test_meta_version_2_database_gets_transaction_tables(void **state) {
    Fixture *f = *state;
    meta_close(open_ok(f->path, 0));
    probe_exec(f->path, "DROP TABLE txn");
    probe_exec(f->path, "DROP TABLE txn_op");
    probe_exec(f->path, "UPDATE meta_info SET value = '2' WHERE key = 'schema_version'");
    Meta *m = open_ok(f->path, 0);
    assert_int_equal(probe_int(f->path, "SELECT CAST(value AS INTEGER) FROM meta_info"
                                        " WHERE key = 'schema_version'"),
                     3);
    MetaTxn t = {.queue_id = 2, .half_off = 4096, .state = META_TXN_PREPARED,
                 .created_ms = 1000, .next_check_ms = 7000, .updated_ms = 1000,
                 .real_off = -1, .real_qoff = -1};
    strcpy(t.id, "ABC");
    strcpy(t.topic, "Orders");
    strcpy(t.msg_id, "M");
    assert_int_equal(meta_txn_begin(m), MQ_OK);
    assert_int_equal(meta_txn_put(m, &t), MQ_OK);
    int saved = mq_log_level;
    mq_log_level = -1;
    assert_int_equal(meta_txn_put(m, &t), MQ_ERR_EXISTS);
    mq_log_level = saved;
    assert_int_equal(meta_txn_set_scan_from(m, 77), MQ_OK);
    assert_int_equal(meta_txn_end(m, true), MQ_OK);
    meta_close(m);
    m = open_ok(f->path, 0);
    assert_int_equal(meta_txn_begin(m), MQ_OK);
    MetaTxn got;
    assert_int_equal(meta_txn_get(m, "ABC", &got), MQ_OK);
    assert_int_equal(got.half_off, 4096);
    assert_string_equal(got.check_url, "");
    int due = 0;
    assert_int_equal(meta_txn_due(m, 6999, 10, count_due, &due), MQ_OK);
    assert_int_equal(due, 0);
    assert_int_equal(meta_txn_due(m, 7000, 10, count_due, &due), MQ_OK);
    assert_int_equal(due, 1);
    uint64_t n = 0, scan = 0;
    assert_int_equal(meta_txn_pending(m, &n), MQ_OK);
    assert_int_equal(n, 1);
    assert_int_equal(meta_txn_get_scan_from(m, &scan), MQ_OK);
    assert_int_equal(scan, 77);
    got.state = META_TXN_COMMITTED;
    got.updated_ms = 2000;
    strcpy(got.resolved_by, "client");
    assert_int_equal(meta_txn_set(m, &got), MQ_OK);
    assert_int_equal(meta_txn_log(m, "ABC", "commit", "client", "", 2000), MQ_OK);
    assert_int_equal(meta_txn_pending(m, &n), MQ_OK);
    assert_int_equal(n, 0);
    assert_int_equal(meta_txn_purge(m, 1999), MQ_OK);
    assert_int_equal(meta_txn_get(m, "ABC", &got), MQ_OK);
    assert_int_equal(meta_txn_purge(m, 2001), MQ_OK);
    assert_int_equal(meta_txn_get(m, "ABC", &got), MQ_ERR_NOTFOUND);
    assert_int_equal(meta_txn_end(m, true), MQ_OK);
    meta_close(m);
    assert_int_equal(probe_int(f->path, "SELECT count(*) FROM txn_op"), 0);
}

/* Size of the file 'path'-wal, bytes (0 when absent). */
static long long wal_size(const char *path) {
    char wal[4096];
    snprintf(wal, sizeof(wal), "%s-wal", path);
    struct stat st;
    return stat(wal, &st) == 0 ? (long long)st.st_size : 0;
}

/* The checkpointer (its own thread and connection; the writer has
 * automatic checkpoints off) copies the WAL back and, once it passed 4096
 * frames, truncates it: written as fast as the writer can, 18 MiB of WAL
 * are gone within a checkpoint period or two. */
static void test_meta_checkpointer_truncates_a_long_wal(void **state) {
    Fixture *f = *state;
    Meta *m = open_ok(f->path, 0);
    MetaTxn t = {.state = META_TXN_PREPARED, .real_off = -1, .real_qoff = -1};
    strcpy(t.topic, "Orders");
    memset(t.check_url, 'u', 2000); /* rows of ~2 KB: a page each */
    long long peak = 0;
    int n = 0;
    while (peak < 18LL << 20 && n < 40000) {
        assert_int_equal(meta_txn_begin(m), MQ_OK);
        for (int i = 0; i < 50; i++, n++) {
            snprintf(t.id, sizeof(t.id), "T%08d", n);
            assert_int_equal(meta_txn_put(m, &t), MQ_OK);
        }
        assert_int_equal(meta_txn_end(m, true), MQ_OK);
        long long w = wal_size(f->path);
        if (w > peak) peak = w;
    }
    /* then at most a checkpoint period or two later: truncated */
    long long w = wal_size(f->path);
    for (int i = 0; i < 300 && w > (1LL << 20); i++) {
        struct timespec ts = {0, 10000000};
        nanosleep(&ts, NULL);
        w = wal_size(f->path);
    }
    print_message("WAL peak %.1f MiB after %d rows, then %.1f MiB\n", peak / 1048576.0, n,
                  w / 1048576.0);
    assert_true(w <= (1LL << 20));
    meta_close(m);
}

static void test_meta_foreign_or_garbage_file_is_corrupt(void **state) {
    Fixture *f = *state;
    int saved = mq_log_level;
    mq_log_level = -1;
    /* an sqlite database of some other program */
    probe_exec(f->path, "CREATE TABLE orders(id INTEGER PRIMARY KEY)");
    Meta *m = NULL;
    assert_int_equal(meta_open(f->path, 0, &m), MQ_ERR_CORRUPT);
    assert_null(m);
    /* not an sqlite file at all */
    char *junk = tu_path(f->dir, "junk.db");
    FILE *fp = fopen(junk, "wb");
    assert_non_null(fp);
    for (int i = 0; i < 8192; i++) fputc('x', fp);
    fclose(fp);
    assert_int_equal(meta_open(junk, 0, &m), MQ_ERR_CORRUPT);
    assert_null(m);
    mq_log_level = saved;
    free(junk);
}

/* ---- topics --------------------------------------------------------------*/

static void test_meta_topic_put_get_and_replace_keeps_created_ms(void **state) {
    Fixture *f = *state;
    Meta *m = open_ok(f->path, 0);
    MetaTopic t = topic_of("orders", 8);
    t.created_ms = 1; /* ignored: meta sets both times */
    t.updated_ms = 2;
    assert_int_equal(meta_topic_put(m, &t), MQ_OK);
    MetaTopic got;
    assert_int_equal(meta_topic_get(m, "orders", &got), MQ_OK);
    assert_string_equal(got.name, "orders");
    assert_int_equal(got.read_queues, 8);
    assert_int_equal(got.write_queues, 8);
    assert_int_equal(got.perm, 6);
    assert_false(got.order);
    assert_true(got.created_ms > 1000);
    assert_true(got.updated_ms == got.created_ms);
    int64_t created = got.created_ms;

    t = topic_of("orders", 4);
    t.write_queues = 2;
    t.perm = META_PERM_READ;
    t.order = true;
    assert_int_equal(meta_topic_put(m, &t), MQ_OK);
    assert_int_equal(meta_topic_get(m, "orders", &got), MQ_OK);
    assert_int_equal(got.read_queues, 4);
    assert_int_equal(got.write_queues, 2);
    assert_int_equal(got.perm, META_PERM_READ);
    assert_true(got.order);
    assert_true(got.created_ms == created);
    assert_true(got.updated_ms >= created);
    meta_close(m);

    m = open_ok(f->path, 0);
    assert_int_equal(meta_topic_get(m, "orders", &got), MQ_OK);
    assert_int_equal(got.read_queues, 4);
    assert_true(got.created_ms == created);
    meta_close(m);
}

static void test_meta_topic_list_in_name_order_and_stops_early(void **state) {
    Fixture *f = *state;
    Meta *m = open_ok(f->path, 0);
    const char *names[] = {"payments", "Audit", "orders", "audit"};
    for (int i = 0; i < 4; i++) {
        MetaTopic t = topic_of(names[i], 1);
        assert_int_equal(meta_topic_put(m, &t), MQ_OK);
    }
    Names n = {0};
    assert_int_equal(meta_topic_list(m, collect_topic, &n), MQ_OK);
    assert_int_equal(n.count, 4);
    assert_string_equal(n.names[0], "Audit"); /* byte order */
    assert_string_equal(n.names[1], "audit");
    assert_string_equal(n.names[2], "orders");
    assert_string_equal(n.names[3], "payments");
    Names two = {.stop_after = 2};
    assert_int_equal(meta_topic_list(m, collect_topic, &two), MQ_OK);
    assert_int_equal(two.count, 2);
    assert_string_equal(two.names[1], "audit");
    meta_close(m);
}

static void test_meta_topic_delete_and_missing_is_not_found(void **state) {
    Fixture *f = *state;
    Meta *m = open_ok(f->path, 0);
    MetaTopic t = topic_of("orders", 4);
    MetaTopic got;
    assert_int_equal(meta_topic_get(m, "orders", &got), MQ_ERR_NOTFOUND);
    assert_int_equal(meta_topic_delete(m, "orders"), MQ_ERR_NOTFOUND);
    assert_int_equal(meta_topic_put(m, &t), MQ_OK);
    assert_int_equal(meta_topic_delete(m, "orders"), MQ_OK);
    assert_int_equal(meta_topic_get(m, "orders", &got), MQ_ERR_NOTFOUND);
    assert_int_equal(meta_topic_delete(m, "orders"), MQ_ERR_NOTFOUND);
    Names n = {0};
    assert_int_equal(meta_topic_list(m, collect_topic, &n), MQ_OK);
    assert_int_equal(n.count, 0);
    meta_close(m);
}

/* ---- groups --------------------------------------------------------------*/

static void test_meta_group_defaults_are_rocketmq_values(void **state) {
    (void)state;
    MetaGroup g;
    memset(&g, 0x5a, sizeof(g));
    meta_group_defaults(&g, "cg-orders");
    assert_string_equal(g.name, "cg-orders");
    assert_true(g.consume_enable);
    assert_false(g.broadcast);
    assert_false(g.orderly);
    assert_int_equal(g.retry_max_times, 16);
    assert_int_equal(g.retry_queue_nums, 1);
    assert_true(g.created_ms == 0 && g.updated_ms == 0);
}

static void test_meta_group_put_get_replace_list_delete(void **state) {
    Fixture *f = *state;
    Meta *m = open_ok(f->path, 0);
    MetaGroup g;
    meta_group_defaults(&g, "cg-b");
    assert_int_equal(meta_group_put(m, &g), MQ_OK);
    meta_group_defaults(&g, "cg-a");
    g.broadcast = true;
    g.retry_max_times = 3;
    assert_int_equal(meta_group_put(m, &g), MQ_OK);

    MetaGroup got;
    assert_int_equal(meta_group_get(m, "cg-a", &got), MQ_OK);
    assert_string_equal(got.name, "cg-a");
    assert_true(got.consume_enable);
    assert_true(got.broadcast);
    assert_false(got.orderly);
    assert_int_equal(got.retry_max_times, 3);
    assert_int_equal(got.retry_queue_nums, 1);
    int64_t created = got.created_ms;
    assert_true(created > 0);

    g.consume_enable = false;
    g.orderly = true;
    g.retry_queue_nums = 2;
    assert_int_equal(meta_group_put(m, &g), MQ_OK);
    assert_int_equal(meta_group_get(m, "cg-a", &got), MQ_OK);
    assert_false(got.consume_enable);
    assert_true(got.orderly);
    assert_int_equal(got.retry_queue_nums, 2);
    assert_true(got.created_ms == created);
    assert_true(got.updated_ms >= created);

    Names n = {0};
    assert_int_equal(meta_group_list(m, collect_group, &n), MQ_OK);
    assert_int_equal(n.count, 2);
    assert_string_equal(n.names[0], "cg-a");
    assert_string_equal(n.names[1], "cg-b");
    Names one = {.stop_after = 1};
    assert_int_equal(meta_group_list(m, collect_group, &one), MQ_OK);
    assert_int_equal(one.count, 1);

    assert_int_equal(meta_group_delete(m, "cg-a"), MQ_OK);
    assert_int_equal(meta_group_get(m, "cg-a", &got), MQ_ERR_NOTFOUND);
    assert_int_equal(meta_group_delete(m, "cg-a"), MQ_ERR_NOTFOUND);
    assert_int_equal(meta_group_delete(m, "never"), MQ_ERR_NOTFOUND);
    meta_close(m);

    m = open_ok(f->path, 0);
    assert_int_equal(meta_group_get(m, "cg-b", &got), MQ_OK);
    assert_int_equal(got.retry_max_times, 16);
    assert_int_equal(meta_group_get(m, "cg-a", &got), MQ_ERR_NOTFOUND);
    meta_close(m);
}

/* ---- offsets -------------------------------------------------------------*/

static void test_meta_offset_set_stays_in_memory_until_flush(void **state) {
    Fixture *f = *state;
    Meta *m = open_ok(f->path, 0);
    uint64_t off = 0;
    assert_int_equal(meta_offset_get(m, "cg", "orders", 0, &off), MQ_ERR_NOTFOUND);
    assert_int_equal(meta_offset_set(m, "cg", "orders", 0, 42), MQ_OK);
    assert_int_equal(meta_offset_get(m, "cg", "orders", 0, &off), MQ_OK);
    assert_true(off == 42);
    assert_int_equal(meta_offset_get(m, "cg", "orders", 1, &off), MQ_ERR_NOTFOUND);
    assert_int_equal(meta_offset_get(m, "cg2", "orders", 0, &off), MQ_ERR_NOTFOUND);
    assert_int_equal(probe_offset_rows(f->path), 0);

    assert_int_equal(meta_offsets_flush(m), 1);
    assert_int_equal(probe_offset(f->path, "cg", "orders", 0), 42);
    meta_close(m);
}

static void test_meta_flush_writes_all_dirty_rows_once(void **state) {
    Fixture *f = *state;
    Meta *m = open_ok(f->path, 0);
    char topic[32];
    /* enough rows to make the table grow a few times */
    for (uint32_t i = 0; i < 500; i++) {
        snprintf(topic, sizeof(topic), "t%u", i % 7);
        assert_int_equal(meta_offset_set(m, "cg", topic, i, i * 10u), MQ_OK);
    }
    assert_int_equal(meta_offsets_flush(m), 500);
    assert_int_equal(meta_offsets_flush(m), 0);
    assert_int_equal(probe_offset_rows(f->path), 500);
    assert_int_equal(probe_offset(f->path, "cg", "t3", 3), 30);

    /* two sets of one row between flushes: one row written, the last value */
    assert_int_equal(meta_offset_set(m, "cg", "t3", 3, 31), MQ_OK);
    assert_int_equal(meta_offset_set(m, "cg", "t3", 3, 32), MQ_OK);
    assert_int_equal(meta_offsets_flush(m), 1);
    assert_int_equal(meta_offsets_flush(m), 0);
    assert_int_equal(probe_offset(f->path, "cg", "t3", 3), 32);
    meta_close(m);
}

static void test_meta_offsets_survive_close_and_reopen(void **state) {
    Fixture *f = *state;
    Meta *m = open_ok(f->path, 0);
    assert_int_equal(meta_offset_set(m, "cg", "orders", 0, 7), MQ_OK);
    assert_int_equal(meta_offsets_flush(m), 1);
    /* not flushed: meta_close flushes last */
    assert_int_equal(meta_offset_set(m, "cg", "orders", 1, 9), MQ_OK);
    assert_int_equal(meta_offset_set(m, "cg", "orders", 0, 8), MQ_OK);
    meta_close(m);
    assert_int_equal(probe_offset(f->path, "cg", "orders", 1), 9);

    m = open_ok(f->path, 0);
    uint64_t off = 0;
    assert_int_equal(meta_offset_get(m, "cg", "orders", 0, &off), MQ_OK);
    assert_true(off == 8);
    assert_int_equal(meta_offset_get(m, "cg", "orders", 1, &off), MQ_OK);
    assert_true(off == 9);
    /* loaded rows are clean */
    assert_int_equal(meta_offsets_flush(m), 0);
    meta_close(m);
}

static void test_meta_flusher_thread_persists_offsets(void **state) {
    Fixture *f = *state;
    Meta *m = open_ok(f->path, 50);
    assert_int_equal(meta_offset_set(m, "cg", "orders", 3, 1234), MQ_OK);
    int64_t deadline = mq_mono_ms() + 2000;
    int64_t seen = -1;
    while (seen != 1234 && mq_mono_ms() < deadline) {
        sleep_ms(10);
        seen = probe_offset(f->path, "cg", "orders", 3);
    }
    assert_int_equal(seen, 1234);
    meta_close(m);
}

static void test_meta_offset_moves_backwards_and_persists(void **state) {
    Fixture *f = *state;
    Meta *m = open_ok(f->path, 0);
    assert_int_equal(meta_offset_set(m, "cg", "orders", 0, 1000), MQ_OK);
    assert_int_equal(meta_offsets_flush(m), 1);
    assert_int_equal(meta_offset_set(m, "cg", "orders", 0, 5), MQ_OK); /* reset */
    uint64_t off = 0;
    assert_int_equal(meta_offset_get(m, "cg", "orders", 0, &off), MQ_OK);
    assert_true(off == 5);
    assert_int_equal(meta_offsets_flush(m), 1);
    assert_int_equal(probe_offset(f->path, "cg", "orders", 0), 5);
    meta_close(m);
    m = open_ok(f->path, 0);
    assert_int_equal(meta_offset_get(m, "cg", "orders", 0, &off), MQ_OK);
    assert_true(off == 5);
    meta_close(m);
}

typedef struct OffSeen {
    char topic[16][32];
    uint32_t qid[16];
    uint64_t off[16];
    int count;
    int stop_after; /* 0 = never stop */
} OffSeen;

static int collect_offset(void *arg, const char *topic, uint32_t qid, uint64_t off) {
    OffSeen *s = arg;
    if (s->count < 16) {
        snprintf(s->topic[s->count], sizeof(s->topic[0]), "%s", topic);
        s->qid[s->count] = qid;
        s->off[s->count] = off;
    }
    s->count++;
    return s->stop_after && s->count >= s->stop_after;
}

static void test_meta_offset_list_in_topic_and_queue_order(void **state) {
    Fixture *f = *state;
    Meta *m = open_ok(f->path, 0);
    assert_int_equal(meta_offset_set(m, "cg", "t2", 1, 21), MQ_OK);
    assert_int_equal(meta_offset_set(m, "cg", "t1", 10, 110), MQ_OK);
    assert_int_equal(meta_offset_set(m, "cg", "t1", 3, 13), MQ_OK);
    assert_int_equal(meta_offset_set(m, "cg", "t1", 0, 10), MQ_OK);
    assert_int_equal(meta_offset_set(m, "other", "t1", 5, 99), MQ_OK);

    OffSeen s = {0};
    assert_int_equal(meta_offset_list(m, "cg", NULL, collect_offset, &s), MQ_OK);
    assert_int_equal(s.count, 4);
    const char *topics[] = {"t1", "t1", "t1", "t2"};
    const uint32_t qids[] = {0, 3, 10, 1};
    const uint64_t offs[] = {10, 13, 110, 21};
    for (int i = 0; i < 4; i++) {
        assert_string_equal(s.topic[i], topics[i]);
        assert_int_equal(s.qid[i], qids[i]);
        assert_true(s.off[i] == offs[i]);
    }
    OffSeen t2 = {0};
    assert_int_equal(meta_offset_list(m, "cg", "t2", collect_offset, &t2), MQ_OK);
    assert_int_equal(t2.count, 1);
    assert_int_equal(t2.qid[0], 1);
    OffSeen none = {0};
    assert_int_equal(meta_offset_list(m, "nobody", NULL, collect_offset, &none), MQ_OK);
    assert_int_equal(none.count, 0);
    OffSeen early = {.stop_after = 2};
    assert_int_equal(meta_offset_list(m, "cg", NULL, collect_offset, &early), MQ_OK);
    assert_int_equal(early.count, 2);
    meta_close(m);
}

typedef struct PairSeen {
    char pair[8][48];
    int count;
    int stop_after; /* 0 = never stop */
} PairSeen;

static int collect_pair(void *arg, const char *group, const char *topic) {
    PairSeen *s = arg;
    if (s->count < 8) snprintf(s->pair[s->count], sizeof(s->pair[0]), "%s/%s", group, topic);
    s->count++;
    return s->stop_after && s->count >= s->stop_after;
}

static void test_meta_offset_pairs_once_each_in_group_topic_order(void **state) {
    Fixture *f = *state;
    Meta *m = open_ok(f->path, 0);
    PairSeen empty = {0};
    assert_int_equal(meta_offset_pairs(m, collect_pair, &empty), MQ_OK);
    assert_int_equal(empty.count, 0);
    assert_int_equal(meta_offset_set(m, "b", "t1", 0, 1), MQ_OK);
    assert_int_equal(meta_offset_set(m, "a", "t2", 4, 1), MQ_OK);
    assert_int_equal(meta_offset_set(m, "a", "t2", 0, 1), MQ_OK); /* another queue: one pair */
    assert_int_equal(meta_offset_set(m, "a", "t10", 1, 1), MQ_OK);
    assert_int_equal(meta_offset_set(m, "ab", "t1", 0, 1), MQ_OK);
    PairSeen s = {0};
    assert_int_equal(meta_offset_pairs(m, collect_pair, &s), MQ_OK);
    const char *want[] = {"a/t10", "a/t2", "ab/t1", "b/t1"};
    assert_int_equal(s.count, 4);
    for (int i = 0; i < 4; i++) assert_string_equal(s.pair[i], want[i]);
    PairSeen early = {.stop_after = 1};
    assert_int_equal(meta_offset_pairs(m, collect_pair, &early), MQ_OK);
    assert_int_equal(early.count, 1);
    assert_int_equal(meta_offset_pairs(m, NULL, NULL), MQ_ERR_INVAL);
    meta_close(m);
}

static void test_meta_group_delete_drops_its_offsets(void **state) {
    Fixture *f = *state;
    Meta *m = open_ok(f->path, 0);
    MetaGroup g;
    meta_group_defaults(&g, "cg1");
    assert_int_equal(meta_group_put(m, &g), MQ_OK);
    assert_int_equal(meta_offset_set(m, "cg1", "orders", 0, 10), MQ_OK);
    assert_int_equal(meta_offset_set(m, "cg1", "payments", 0, 20), MQ_OK);
    assert_int_equal(meta_offset_set(m, "cg2", "orders", 0, 30), MQ_OK);
    assert_int_equal(meta_offsets_flush(m), 3);
    assert_int_equal(meta_offset_set(m, "cg1", "orders", 1, 11), MQ_OK); /* dirty */

    assert_int_equal(meta_group_delete(m, "cg1"), MQ_OK);
    uint64_t off = 0;
    assert_int_equal(meta_offset_get(m, "cg1", "orders", 0, &off), MQ_ERR_NOTFOUND);
    assert_int_equal(meta_offset_get(m, "cg1", "orders", 1, &off), MQ_ERR_NOTFOUND);
    assert_int_equal(meta_offset_get(m, "cg1", "payments", 0, &off), MQ_ERR_NOTFOUND);
    assert_int_equal(meta_offset_get(m, "cg2", "orders", 0, &off), MQ_OK);
    assert_int_equal(probe_int(f->path, "SELECT count(*) FROM consumer_offset"
                                        " WHERE grp = 'cg1'"),
                     0);
    assert_int_equal(meta_offsets_flush(m), 0); /* the dirty row went too */
    meta_close(m);

    m = open_ok(f->path, 0);
    assert_int_equal(meta_offset_get(m, "cg1", "orders", 1, &off), MQ_ERR_NOTFOUND);
    assert_int_equal(meta_offset_get(m, "cg2", "orders", 0, &off), MQ_OK);
    assert_true(off == 30);
    meta_close(m);
}

static void test_meta_topic_delete_drops_its_offsets(void **state) {
    Fixture *f = *state;
    Meta *m = open_ok(f->path, 0);
    MetaTopic t = topic_of("orders", 2);
    assert_int_equal(meta_topic_put(m, &t), MQ_OK);
    assert_int_equal(meta_offset_set(m, "cg1", "orders", 0, 10), MQ_OK);
    assert_int_equal(meta_offset_set(m, "cg2", "orders", 1, 20), MQ_OK);
    assert_int_equal(meta_offset_set(m, "cg1", "payments", 0, 30), MQ_OK);
    assert_int_equal(meta_offsets_flush(m), 3);
    assert_int_equal(meta_offset_set(m, "cg2", "orders", 0, 40), MQ_OK); /* dirty */

    assert_int_equal(meta_topic_delete(m, "orders"), MQ_OK);
    uint64_t off = 0;
    assert_int_equal(meta_offset_get(m, "cg1", "orders", 0, &off), MQ_ERR_NOTFOUND);
    assert_int_equal(meta_offset_get(m, "cg2", "orders", 0, &off), MQ_ERR_NOTFOUND);
    assert_int_equal(meta_offset_get(m, "cg1", "payments", 0, &off), MQ_OK);
    assert_int_equal(probe_int(f->path, "SELECT count(*) FROM consumer_offset"
                                        " WHERE topic = 'orders'"),
                     0);
    /* a failed delete changes nothing */
    assert_int_equal(meta_topic_delete(m, "payments"), MQ_ERR_NOTFOUND);
    assert_int_equal(meta_offset_get(m, "cg1", "payments", 0, &off), MQ_OK);
    meta_close(m); /* the final flush must not bring the dirty row back */

    assert_int_equal(probe_int(f->path, "SELECT count(*) FROM consumer_offset"
                                        " WHERE topic = 'orders'"),
                     0);
    assert_int_equal(probe_offset(f->path, "cg1", "payments", 0), 30);
}

static void test_meta_failed_flush_keeps_rows_dirty(void **state) {
    Fixture *f = *state;
    Meta *m = open_ok(f->path, 0);
    assert_int_equal(meta_offset_set(m, "cg", "orders", 0, 1), MQ_OK);
    assert_int_equal(meta_offset_set(m, "cg", "orders", 1, 2), MQ_OK);
    /* another connection takes the table away: the upserts fail */
    probe_exec(f->path, "ALTER TABLE consumer_offset RENAME TO parked");
    int saved = mq_log_level;
    mq_log_level = -1;
    assert_int_equal(meta_offsets_flush(m), MQ_ERR_DB);
    mq_log_level = saved;
    probe_exec(f->path, "ALTER TABLE parked RENAME TO consumer_offset");
    assert_int_equal(probe_offset_rows(f->path), 0); /* rolled back */
    assert_int_equal(meta_offsets_flush(m), 2);
    assert_int_equal(probe_offset(f->path, "cg", "orders", 1), 2);
    meta_close(m);
}

/* A writer sets ever larger offsets while flushes run; once it is done and
 * one more flush ran, the disk must hold each queue's last value.  A lost
 * update shows only in some interleavings, so several rounds run. */
#define RACE_QUEUES 4u
#define RACE_SETS 20000u
#define RACE_ROUNDS 4u

typedef struct Race {
    Meta *m;
    uint64_t base; /* offsets of this round are base + 1 .. base + RACE_SETS */
    atomic_bool done;
} Race;

static void *race_writer(void *arg) {
    Race *r = arg;
    for (uint32_t i = 1; i <= RACE_SETS; i++) {
        if (meta_offset_set(r->m, "cg", "orders", i % RACE_QUEUES, r->base + i) != MQ_OK) break;
        if (i % 64 == 0) sched_yield(); /* spread the sets over many flushes */
    }
    atomic_store(&r->done, true);
    return NULL;
}

static void test_meta_set_racing_with_flush_is_not_lost(void **state) {
    Fixture *f = *state;
    /* the flusher thread (1 ms) and this thread flush concurrently */
    Race r = {.m = open_ok(f->path, 1)};
    for (uint32_t round = 0; round < RACE_ROUNDS; round++) {
        r.base = (uint64_t)round * RACE_SETS;
        atomic_init(&r.done, false);
        pthread_t th;
        assert_int_equal(pthread_create(&th, NULL, race_writer, &r), 0);
        int flushes = 0;
        while (!atomic_load(&r.done)) {
            assert_true(meta_offsets_flush(r.m) >= 0);
            flushes++;
        }
        pthread_join(th, NULL);
        assert_true(meta_offsets_flush(r.m) >= 0);
        assert_true(flushes > 0);
        for (uint32_t q = 0; q < RACE_QUEUES; q++) {
            uint64_t want = r.base + RACE_SETS - ((RACE_SETS - q) % RACE_QUEUES);
            uint64_t off = 0;
            assert_int_equal(meta_offset_get(r.m, "cg", "orders", q, &off), MQ_OK);
            assert_true(off == want);
            assert_int_equal(probe_offset(f->path, "cg", "orders", q), (int64_t)want);
        }
    }
    meta_close(r.m);
}

/* ---- settings and input checks -------------------------------------------*/

static void test_meta_kv_put_get_overwrite(void **state) {
    Fixture *f = *state;
    Meta *m = open_ok(f->path, 0);
    char buf[64];
    assert_int_equal(meta_kv_get(m, "host_id", buf, sizeof(buf)), MQ_ERR_NOTFOUND);
    assert_int_equal(meta_kv_put(m, "host_id", "a1b2c3"), MQ_OK);
    assert_int_equal(meta_kv_get(m, "host_id", buf, sizeof(buf)), MQ_OK);
    assert_string_equal(buf, "a1b2c3");
    assert_int_equal(meta_kv_put(m, "host_id", "zz"), MQ_OK);
    assert_int_equal(meta_kv_get(m, "host_id", buf, sizeof(buf)), MQ_OK);
    assert_string_equal(buf, "zz");
    assert_int_equal(meta_kv_put(m, "empty", ""), MQ_OK);
    assert_int_equal(meta_kv_get(m, "empty", buf, sizeof(buf)), MQ_OK);
    assert_string_equal(buf, "");
    /* a small buffer gets a NUL-terminated prefix */
    assert_int_equal(meta_kv_put(m, "long", "0123456789"), MQ_OK);
    assert_int_equal(meta_kv_get(m, "long", buf, 5), MQ_OK);
    assert_string_equal(buf, "0123");
    meta_close(m);
    m = open_ok(f->path, 0);
    assert_int_equal(meta_kv_get(m, "host_id", buf, sizeof(buf)), MQ_OK);
    assert_string_equal(buf, "zz");
    meta_close(m);
}

static void test_meta_invalid_names_are_rejected(void **state) {
    Fixture *f = *state;
    Meta *m = open_ok(f->path, 0);
    char longest[META_NAME_MAX + 1];
    memset(longest, 'a', META_NAME_MAX);
    longest[META_NAME_MAX] = '\0';
    char too_long[META_NAME_MAX + 2];
    memset(too_long, 'b', META_NAME_MAX + 1);
    too_long[META_NAME_MAX + 1] = '\0';

    MetaTopic t = topic_of("", 1);
    assert_int_equal(meta_topic_put(m, &t), MQ_ERR_INVAL);
    memset(t.name, 'c', sizeof(t.name)); /* no NUL in the whole field */
    assert_int_equal(meta_topic_put(m, &t), MQ_ERR_INVAL);
    t = topic_of(longest, 1);
    assert_int_equal(meta_topic_put(m, &t), MQ_OK);
    MetaTopic got;
    assert_int_equal(meta_topic_get(m, longest, &got), MQ_OK);
    assert_string_equal(got.name, longest);
    assert_int_equal(meta_topic_get(m, too_long, &got), MQ_ERR_INVAL);
    assert_int_equal(meta_topic_get(m, NULL, &got), MQ_ERR_INVAL);
    assert_int_equal(meta_topic_delete(m, ""), MQ_ERR_INVAL);

    MetaGroup g;
    meta_group_defaults(&g, too_long); /* left unnamed */
    assert_string_equal(g.name, "");
    assert_int_equal(meta_group_put(m, &g), MQ_ERR_INVAL);
    assert_int_equal(meta_group_get(m, "", &(MetaGroup){0}), MQ_ERR_INVAL);
    assert_int_equal(meta_group_delete(m, too_long), MQ_ERR_INVAL);

    uint64_t off = 0;
    assert_int_equal(meta_offset_set(m, "", "orders", 0, 1), MQ_ERR_INVAL);
    assert_int_equal(meta_offset_set(m, "cg", too_long, 0, 1), MQ_ERR_INVAL);
    assert_int_equal(meta_offset_set(m, "cg", NULL, 0, 1), MQ_ERR_INVAL);
    assert_int_equal(meta_offset_set(m, "cg", "orders", 0, (uint64_t)INT64_MAX + 1),
                     MQ_ERR_INVAL);
    assert_int_equal(meta_offset_set(m, longest, longest, UINT32_MAX, INT64_MAX), MQ_OK);
    assert_int_equal(meta_offset_get(m, "", "orders", 0, &off), MQ_ERR_INVAL);
    assert_int_equal(meta_offset_list(m, "cg", "", collect_offset, &(OffSeen){0}),
                     MQ_ERR_INVAL);
    assert_int_equal(meta_offsets_flush(m), 1);
    assert_int_equal(meta_kv_put(m, "", "v"), MQ_ERR_INVAL);
    assert_int_equal(meta_kv_put(m, too_long, "v"), MQ_ERR_INVAL);
    assert_int_equal(meta_kv_put(m, "k", NULL), MQ_ERR_INVAL);
    char buf[8];
    assert_int_equal(meta_kv_get(m, "k", buf, 0), MQ_ERR_INVAL);
    meta_close(m);

    /* the extreme row survives a reopen */
    m = open_ok(f->path, 0);
    assert_int_equal(meta_offset_get(m, longest, longest, UINT32_MAX, &off), MQ_OK);
    assert_true(off == (uint64_t)INT64_MAX);
    meta_close(m);
}

#define CASE(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)

int main(void) {
    const struct CMUnitTest tests[] = {
        CASE(test_meta_open_creates_versioned_wal_database),
        CASE(test_meta_newer_or_unknown_schema_version_is_corrupt),
        CASE(test_meta_version_2_database_gets_transaction_tables),
        CASE(test_meta_checkpointer_truncates_a_long_wal),
        CASE(test_meta_foreign_or_garbage_file_is_corrupt),
        CASE(test_meta_version_1_database_gets_pop_state_and_keeps_rows),
        CASE(test_meta_topic_put_get_and_replace_keeps_created_ms),
        CASE(test_meta_topic_list_in_name_order_and_stops_early),
        CASE(test_meta_topic_delete_and_missing_is_not_found),
        cmocka_unit_test(test_meta_group_defaults_are_rocketmq_values),
        CASE(test_meta_group_put_get_replace_list_delete),
        CASE(test_meta_offset_set_stays_in_memory_until_flush),
        CASE(test_meta_flush_writes_all_dirty_rows_once),
        CASE(test_meta_offsets_survive_close_and_reopen),
        CASE(test_meta_flusher_thread_persists_offsets),
        CASE(test_meta_offset_moves_backwards_and_persists),
        CASE(test_meta_offset_list_in_topic_and_queue_order),
        CASE(test_meta_offset_pairs_once_each_in_group_topic_order),
        CASE(test_meta_group_delete_drops_its_offsets),
        CASE(test_meta_topic_delete_drops_its_offsets),
        CASE(test_meta_failed_flush_keeps_rows_dirty),
        CASE(test_meta_set_racing_with_flush_is_not_lost),
        CASE(test_meta_kv_put_get_overwrite),
        CASE(test_meta_invalid_names_are_rejected),
    };
    return cmocka_run_group_tests_name("meta", tests, NULL, NULL);
}
