/*
 * test_txn.c - the transaction engine (core/txn.h) on a real store and
 * meta.db, driven without its thread (txn_run_once) on a fake clock:
 * prepare/commit/rollback state rules, the half record and its commit,
 * the crash window between a commit's append and its row (recovered from
 * the log at open, exactly once), check scheduling (first after the
 * timeout, counted, the maximum then rollback) without a check URL, and
 * the purge of resolved rows.
 */
#include "testutil.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "meta.h"
#include "msg.h"
#include "store.h"
#include "topic.h"
#include "txn.h"

#define T0 1767225600000LL

typedef struct Fixture {
    char *dir;
    Store *st;
    Meta *meta;
    TopicRegistry *topics;
    TxnEngine *e;
    _Atomic int64_t clock_ms;
} Fixture;

static int64_t fake_clock(void *arg) {
    Fixture *f = arg;
    return atomic_load(&f->clock_ms);
}

static void engine_open(Fixture *f) {
    static const uint8_t host[8] = {127, 0, 0, 1, 0x90, 0x1f, 0, 0};
    TxnConfig c = {.store = f->st,
                   .store_host = host,
                   .meta = f->meta,
                   .topics = f->topics,
                   .timeout_ms = 6000,
                   .check_interval_ms = 60000,
                   .check_max = 3,
                   .keep_resolved_ms = 3600000,
                   .check_connect_timeout_ms = 1000,
                   .check_request_timeout_ms = 1000,
                   .check_allowed_hosts = "",
                   .thread = false,
                   .clock = fake_clock,
                   .clock_arg = f};
    assert_int_equal(txn_open(&c, &f->e), MQ_OK);
}

static void open_all(Fixture *f) {
    StoreConfig sc;
    store_config_defaults(&sc, f->dir);
    sc.segment_size = 1024 * 1024;
    sc.cq_file_entries = 4096;
    sc.index_slots = 1024;
    sc.index_entries = 65536;
    assert_int_equal(store_open(&sc, &f->st), MQ_OK);
    char *mpath = tu_path(f->dir, "meta.db");
    assert_int_equal(meta_open(mpath, 0, &f->meta), MQ_OK);
    free(mpath);
    assert_int_equal(topic_registry_open(f->meta, 4, &f->topics), MQ_OK);
    engine_open(f);
}

static void close_all(Fixture *f) {
    txn_close(f->e);
    topic_registry_close(f->topics);
    meta_close(f->meta);
    store_close(f->st);
}

static int setup(void **state) {
    Fixture *f = calloc(1, sizeof(*f));
    if (!f) return -1;
    atomic_init(&f->clock_ms, T0);
    f->dir = tu_mkdtemp("txn");
    open_all(f);
    assert_int_equal(topic_put(f->topics, "T", 2, META_PERM_READ | META_PERM_WRITE, false, NULL),
                     MQ_OK);
    *state = f;
    return 0;
}

static int teardown(void **state) {
    Fixture *f = *state;
    close_all(f);
    tu_rmtree(f->dir);
    free(f->dir);
    free(f);
    return 0;
}

static void op_done(TxnOp *op) {
    (*(int *)op->done_arg)++;
}

/* Runs one op through the engine and returns its rc ('op' keeps the row). */
static int run_op(Fixture *f, TxnOp *op) {
    int calls = 0;
    op->done = op_done;
    op->done_arg = &calls;
    assert_int_equal(txn_submit(f->e, op), MQ_OK);
    txn_run_once(f->e, -1);
    assert_int_equal(calls, 1);
    return op->rc;
}

static int end_op(Fixture *f, const char *id, TxnOpKind kind, MetaTxn *row) {
    TxnOp op = {.kind = kind};
    snprintf(op.id, sizeof(op.id), "%s", id);
    int rc = run_op(f, &op);
    if (row) *row = op.row;
    return rc;
}

/* Prepares transaction 'id' of body 'body' (half record + row). */
static void prepare(Fixture *f, const char *id, const char *body, uint32_t queue) {
    ClMessage real = {.topic = mq_slice("T", 1),
                      .queue_id = queue,
                      .born_ts = T0,
                      .body = mq_slice(body, strlen(body))};
    uint8_t buf[TXN_WRAP_EXTRA];
    ClMessage half;
    assert_int_equal(txn_wrap_half(&real, id, "", buf, sizeof(buf), &half), MQ_OK);
    assert_int_equal((int)half.queue_id, 0);
    TxnOp *op = calloc(1, sizeof(*op));
    assert_non_null(op);
    op->kind = TXN_OP_PREPARE;
    snprintf(op->id, sizeof(op->id), "%s", id);
    snprintf(op->prep.topic, sizeof(op->prep.topic), "T");
    op->prep.queue_id = queue;
    ClAppendResult res;
    assert_int_equal(txn_prepare(f->e, &half, op, &res), MQ_OK);
    txn_run_once(f->e, -1);
    MetaTxn row;
    assert_int_equal(end_op(f, id, TXN_OP_GET, &row), MQ_OK);
    assert_int_equal(row.state, META_TXN_PREPARED);
    assert_int_equal(row.half_off, res.phys_off);
    assert_int_equal(row.next_check_ms, atomic_load(&f->clock_ms) + 6000);
}

/* Messages on queue 'q' of T. */
static uint64_t on_topic(Fixture *f, uint32_t q) {
    assert_int_equal(store_wait_dispatched(f->st, 5000), MQ_OK);
    uint64_t lo = 0, hi = 0;
    store_queue_range(f->st, mq_slice("T", 1), q, &lo, &hi);
    return hi - lo;
}

static void test_txn_commit_rollback_rules(void **state) {
    Fixture *f = *state;
    prepare(f, "A1", "alpha", 1);
    prepare(f, "B1", "beta", 0);
    assert_int_equal(on_topic(f, 0) + on_topic(f, 1), 0);
    MetaTxn row;
    assert_int_equal(end_op(f, "A1", TXN_OP_COMMIT, &row), MQ_OK);
    assert_int_equal(row.state, META_TXN_COMMITTED);
    assert_string_equal(row.resolved_by, "client");
    assert_int_equal(row.real_qoff, 0);
    assert_int_equal(on_topic(f, 1), 1);
    /* the committed record: the body, on its real topic/queue, marked */
    ClRecord rec;
    MappedFile *ref = NULL;
    assert_int_equal(store_read_msg(f->st, (uint64_t)row.real_off, &rec, &ref), MQ_OK);
    assert_int_equal(rec.queue_id, 1);
    assert_memory_equal(rec.body.ptr, "alpha", 5);
    MqSlice v;
    assert_true(msg_prop_get(rec.props, TXN_PROP_ID, &v));
    assert_int_equal(v.len, 2);
    assert_false(msg_prop_get(rec.props, MSG_PROP_REAL_TOPIC, &v));
    mf_unref(&ref);
    /* again: same row, nothing appended */
    assert_int_equal(end_op(f, "A1", TXN_OP_COMMIT, NULL), MQ_OK);
    assert_int_equal(on_topic(f, 1), 1);
    assert_int_equal(end_op(f, "A1", TXN_OP_ROLLBACK, NULL), MQ_ERR_STATE);
    assert_int_equal(end_op(f, "B1", TXN_OP_ROLLBACK, &row), MQ_OK);
    assert_int_equal(row.state, META_TXN_ROLLED_BACK);
    assert_int_equal(end_op(f, "B1", TXN_OP_ROLLBACK, NULL), MQ_OK);
    assert_int_equal(end_op(f, "B1", TXN_OP_COMMIT, NULL), MQ_ERR_STATE);
    assert_int_equal(end_op(f, "nope", TXN_OP_COMMIT, NULL), MQ_ERR_NOTFOUND);
    assert_int_equal(end_op(f, "nope", TXN_OP_GET, NULL), MQ_ERR_NOTFOUND);
    assert_int_equal(on_topic(f, 0), 0);
    TxnStats s;
    txn_stats(f->e, &s);
    assert_int_equal(s.pending, 0);
    assert_int_equal(s.committed, 1);
    assert_int_equal(s.rolled_back, 1);
}

/* The crash window: the commit's record is on the topic but its row still
 * says PREPARED (as if the process died between the two).  At open the
 * log scan marks it COMMITTED; a commit then appends nothing more. */
static void test_txn_recovery_finds_a_commit_appended_before_a_crash(void **state) {
    Fixture *f = *state;
    prepare(f, "C1", "gamma", 0);
    prepare(f, "C2", "delta", 0);
    txn_run_once(f->e, -1); /* a batch saves the scan start */
    /* what do_commit appends, without the row update */
    const char *props_src[] = {MSG_PROP_TRAN_MSG, "true", TXN_PROP_ID, "C1"};
    MsgProp p[2] = {{mq_slice(props_src[0], strlen(props_src[0])), mq_slice("true", 4)},
                    {mq_slice(props_src[2], strlen(props_src[2])), mq_slice("C1", 2)}};
    uint8_t pb[128];
    size_t plen = 0;
    assert_int_equal(msg_props_encode(p, 2, pb, sizeof(pb), &plen), MQ_OK);
    ClMessage m = {.topic = mq_slice("T", 1), .queue_id = 0, .born_ts = T0,
                   .body = mq_slice("gamma", 5), .props = mq_slice(pb, plen)};
    ClAppendResult res;
    assert_int_equal(store_put(f->st, &m, 1, &res), MQ_OK);
    close_all(f);
    open_all(f);
    MetaTxn row;
    assert_int_equal(end_op(f, "C1", TXN_OP_GET, &row), MQ_OK);
    assert_int_equal(row.state, META_TXN_COMMITTED);
    assert_string_equal(row.resolved_by, "recovery");
    assert_int_equal(row.real_off, (int64_t)res.phys_off);
    assert_int_equal(end_op(f, "C1", TXN_OP_COMMIT, NULL), MQ_OK);
    assert_int_equal(end_op(f, "C2", TXN_OP_GET, &row), MQ_OK);
    assert_int_equal(row.state, META_TXN_PREPARED);
    assert_int_equal(on_topic(f, 0), 1);
    TxnStats s;
    txn_stats(f->e, &s);
    assert_int_equal(s.pending, 1);
}

/* Half records whose rows never made it to sqlite (the process died
 * right after answering the produce) and a rollback whose row did not:
 * both come back from the log at open. */
static void test_txn_replay_makes_rows_of_answered_prepares_and_rollbacks(void **state) {
    Fixture *f = *state;
    prepare(f, "R1", "rho", 0);
    /* R2: appended and answered, its row still queued at the "crash" */
    ClMessage real = {.topic = mq_slice("T", 1), .queue_id = 1, .born_ts = T0,
                      .body = mq_slice("sigma", 5)};
    uint8_t buf[TXN_WRAP_EXTRA];
    ClMessage half;
    assert_int_equal(txn_wrap_half(&real, "R2", "http://127.0.0.1:9/c", buf, sizeof(buf), &half),
                     MQ_OK);
    TxnOp *op = calloc(1, sizeof(*op));
    op->kind = TXN_OP_PREPARE;
    snprintf(op->id, sizeof(op->id), "R2");
    snprintf(op->prep.topic, sizeof(op->prep.topic), "T");
    op->prep.queue_id = 1;
    ClAppendResult res;
    assert_int_equal(txn_prepare(f->e, &half, op, &res), MQ_OK);
    /* R1's rollback record appended, its row not updated */
    MsgProp p[2] = {{mq_slice(MSG_PROP_TAGS, strlen(MSG_PROP_TAGS)), mq_slice("d", 1)},
                    {mq_slice(TXN_PROP_ID, strlen(TXN_PROP_ID)), mq_slice("R1", 2)}};
    uint8_t pb[64];
    size_t plen = 0;
    assert_int_equal(msg_props_encode(p, 2, pb, sizeof(pb), &plen), MQ_OK);
    ClMessage opm = {.topic = mq_slice(TXN_OP_TOPIC, strlen(TXN_OP_TOPIC)), .born_ts = T0,
                     .body = mq_slice("R1", 2), .props = mq_slice(pb, plen)};
    assert_int_equal(store_put(f->st, &opm, 1, &res), MQ_OK);
    close_all(f); /* drops the queued op */
    open_all(f);
    MetaTxn row;
    assert_int_equal(end_op(f, "R2", TXN_OP_GET, &row), MQ_OK);
    assert_int_equal(row.state, META_TXN_PREPARED);
    assert_string_equal(row.check_url, "http://127.0.0.1:9/c");
    assert_int_equal(row.queue_id, 1);
    assert_string_equal(row.topic, "T");
    assert_int_equal(end_op(f, "R1", TXN_OP_GET, &row), MQ_OK);
    assert_int_equal(row.state, META_TXN_ROLLED_BACK);
    assert_string_equal(row.resolved_by, "recovery");
    assert_int_equal(end_op(f, "R2", TXN_OP_COMMIT, &row), MQ_OK);
    assert_int_equal(on_topic(f, 1), 1);
    TxnStats s;
    txn_stats(f->e, &s);
    assert_int_equal(s.pending, 0);
    /* a second open replays nothing again */
    close_all(f);
    open_all(f);
    txn_stats(f->e, &s);
    assert_int_equal(s.pending, 0);
    assert_int_equal(on_topic(f, 1), 1);
}

/* Without a check URL every check counts as UNKNOWN: the first one
 * transactionTimeOut after prepare, then every interval, and after
 * check_max of them the transaction is rolled back. */
static void test_txn_checks_counted_then_rolled_back_at_the_maximum(void **state) {
    Fixture *f = *state;
    prepare(f, "D1", "eps", 1);
    MetaTxn row;
    atomic_fetch_add(&f->clock_ms, 5999);
    txn_run_once(f->e, -1);
    assert_int_equal(end_op(f, "D1", TXN_OP_GET, &row), MQ_OK);
    assert_int_equal(row.check_times, 0); /* not due yet */
    for (uint32_t n = 1; n <= 3; n++) {
        atomic_fetch_add(&f->clock_ms, n == 1 ? 1 : 60000);
        txn_run_once(f->e, -1);
        assert_int_equal(end_op(f, "D1", TXN_OP_GET, &row), MQ_OK);
        assert_int_equal(row.check_times, n);
        assert_int_equal(row.state, n < 3 ? META_TXN_PREPARED : META_TXN_ROLLED_BACK);
    }
    assert_string_equal(row.resolved_by, "max_checks");
    assert_int_equal(on_topic(f, 1), 0);
    TxnStats s;
    txn_stats(f->e, &s);
    assert_int_equal(s.checks, 3);
    /* purged once older than keep_resolved_ms (the purge runs each minute) */
    atomic_fetch_add(&f->clock_ms, 3600000 + 60001);
    txn_run_once(f->e, -1);
    assert_int_equal(end_op(f, "D1", TXN_OP_GET, NULL), MQ_ERR_NOTFOUND);
}

static void test_txn_wrap_half_and_url_policy(void **state) {
    Fixture *f = *state;
    ClMessage real = {.topic = mq_slice("T", 1), .queue_id = 7, .body = mq_slice("x", 1)};
    uint8_t small[8];
    ClMessage half;
    MqSlice v0;
    assert_int_equal(txn_wrap_half(&real, "ID", "", small, sizeof(small), &half), MQ_ERR_FULL);
    assert_int_equal(txn_wrap_half(&real, "", "", small, sizeof(small), &half), MQ_ERR_INVAL);
    uint8_t buf[TXN_WRAP_EXTRA];
    assert_int_equal(txn_wrap_half(&real, "ID", "http://h/c", buf, sizeof(buf), &half), MQ_OK);
    assert_true(msg_prop_get(half.props, MSG_PROP_TXN_CHECK_URL, &v0));
    assert_memory_equal(v0.ptr, "http://h/c", 10);
    MqSlice v;
    assert_true(msg_prop_get(half.props, MSG_PROP_REAL_QID, &v));
    assert_memory_equal(v.ptr, "7", 1);
    assert_true(msg_prop_get(half.props, MSG_PROP_TRAN_MSG, &v));
    assert_int_equal(half.topic.len, strlen(TXN_HALF_TOPIC));
    char why[128];
    assert_true(txn_check_url_ok(f->e, "http://127.0.0.1:9/x", why, sizeof(why)));
    assert_false(txn_check_url_ok(f->e, "gopher://h/", why, sizeof(why)));
    /* a user may not forge the transaction id property */
    assert_true(msg_prop_name_reserved(mq_slice(TXN_PROP_ID, strlen(TXN_PROP_ID))));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_txn_commit_rollback_rules, setup, teardown),
        cmocka_unit_test_setup_teardown(test_txn_recovery_finds_a_commit_appended_before_a_crash,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(
            test_txn_replay_makes_rows_of_answered_prepares_and_rollbacks, setup, teardown),
        cmocka_unit_test_setup_teardown(test_txn_checks_counted_then_rolled_back_at_the_maximum,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_txn_wrap_half_and_url_policy, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
