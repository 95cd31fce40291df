/*
 * test_config.c - the configuration table: defaults, key=value files,
 * --key=value flags and their precedence, errors naming the key, and the
 * StoreConfig derived from a Config.
 */
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "mq.h"

static char err[1024];

static int parse(Config *c, int argc, const char *const *argv) {
    err[0] = '\0';
    return conf_parse_args(c, argc, (char **)argv, err, sizeof(err));
}

static char *write_file(const char *dir, const char *text) {
    char *path = tu_path(dir, "broker.conf");
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
    return path;
}

static void test_conf_defaults_follow_rocketmq(void **state) {
    (void)state;
    Config c;
    conf_defaults(&c, CONF_MODE_STANDALONE);
    assert_int_equal(parse(&c, 0, NULL), MQ_OK);
    assert_string_equal(c.listen, "127.0.0.1:8080");
    assert_int_equal(c.listen_port, 8080);
    assert_memory_equal(c.listen_ip, ((uint8_t[]){127, 0, 0, 1}), 4);
    assert_string_equal(c.data, "./data");
    assert_string_equal(c.broker_cluster_name, "DefaultCluster");
    assert_string_equal(c.broker_name, "broker-a");
    assert_int_equal(c.broker_id, 0);
    assert_int_equal(c.broker_role, CONF_ASYNC_MASTER);
    assert_string_equal(c.namesrv_addr, "");
    assert_int_equal(c.flush_disk_type, CONF_ASYNC_FLUSH);
    assert_true(c.segment_size == 1073741824ULL);
    assert_true(c.cq_file_size == 6000000ULL);
    assert_int_equal(c.max_hash_slot_num, 5000000);
    assert_int_equal(c.max_index_num, 20000000);
    assert_int_equal(c.flush_interval_ms, 500);
    assert_int_equal(c.flush_cq_interval_ms, 1000);
    assert_int_equal(c.sync_flush_timeout_ms, 5000);
    assert_int_equal(c.file_reserved_hours, 72);
    assert_string_equal(c.delete_when, "04");
    assert_int_equal(c.disk_max_used_ratio, 75);
    assert_int_equal(c.disk_force_clean_ratio, 85);
    assert_int_equal(c.disk_warning_ratio, 90);
    assert_int_equal(c.clean_interval_ms, 10000);
    assert_true(c.max_message_size == 4194304ULL);
    assert_true(c.auto_create_topic);
    assert_int_equal(c.default_topic_queue_nums, 8);
    assert_int_equal(c.offset_flush_interval_ms, 5000);
    assert_int_equal(c.log_level, MQ_LOG_INFO);
    assert_string_equal(c.port_file, "");
    assert_true(strlen(c.web_root) > 0);

    conf_defaults(&c, CONF_MODE_BROKER);
    assert_string_equal(c.listen, "127.0.0.1:10911");
}

static void test_conf_every_key_formats_back_to_a_valid_value(void **state) {
    (void)state;
    Config c;
    conf_defaults(&c, CONF_MODE_STANDALONE);
    size_t n = 0;
    const ConfKey *keys = conf_keys(&n);
    assert_true(n >= 27);
    char buf[CONF_PATH_MAX];
    for (size_t i = 0; i < n; i++) {
        Config d = c;
        conf_format(&c, &keys[i], buf, sizeof(buf));
        assert_int_equal(conf_set(&d, keys[i].name, buf, err, sizeof(err)), MQ_OK);
        assert_memory_equal(&d, &c, sizeof(c));
        assert_true(strlen(keys[i].help) > 0);
        assert_ptr_equal(conf_key_find(keys[i].name), &keys[i]);
    }
}

static void test_conf_flags_win_over_the_file(void **state) {
    (void)state;
    char *dir = tu_mkdtemp("conf");
    char *path = write_file(dir, "# broker a\n"
                                 "\n"
                                 "   brokerName =  from-file  \n"
                                 "brokerId=3\n"
                                 "\tflushDiskType=SYNC_FLUSH\n"
                                 "listen=0.0.0.0:9000\n"
                                 "autoCreateTopicEnable=false\n");
    Config c;
    conf_defaults(&c, CONF_MODE_BROKER);
    const char *argv[] = {"--brokerId=5", "-c", path, "--listen", "127.0.0.2:0",
                          "--data=/tmp/x", "--port-file", "/tmp/p", "--brokerId=6"};
    assert_int_equal(parse(&c, 9, argv), MQ_OK);
    assert_string_equal(c.broker_name, "from-file");
    assert_int_equal(c.broker_id, 6);
    assert_int_equal(c.flush_disk_type, CONF_SYNC_FLUSH);
    assert_false(c.auto_create_topic);
    assert_string_equal(c.listen, "127.0.0.2:0");
    assert_memory_equal(c.listen_ip, ((uint8_t[]){127, 0, 0, 2}), 4);
    assert_int_equal(c.listen_port, 0);
    assert_string_equal(c.data, "/tmp/x");
    assert_string_equal(c.port_file, "/tmp/p");

    const char *argv2[] = {"--listen=localhost:81", "--data", "d2", "--port-file=pf"};
    assert_int_equal(parse(&c, 4, argv2), MQ_OK);
    assert_memory_equal(c.listen_ip, ((uint8_t[]){127, 0, 0, 1}), 4);
    assert_int_equal(c.listen_port, 81);
    assert_string_equal(c.data, "d2");
    assert_string_equal(c.port_file, "pf");
    free(path);
    tu_rmtree(dir);
    free(dir);
}

static void test_conf_sizes_accept_suffixes(void **state) {
    (void)state;
    Config c;
    conf_defaults(&c, CONF_MODE_STANDALONE);
    const char *argv[] = {"--mappedFileSizeCommitLog=64k", "--maxMessageSize=1M",
                          "--mappedFileSizeConsumeQueue=6000"};
    assert_int_equal(parse(&c, 3, argv), MQ_OK);
    assert_true(c.segment_size == 65536);
    assert_true(c.max_message_size == 1048576);
    const char *g[] = {"--mappedFileSizeCommitLog=1g"};
    assert_int_equal(parse(&c, 1, g), MQ_OK);
    assert_true(c.segment_size == 1073741824ULL);
}

static void test_conf_errors_name_the_key(void **state) {
    (void)state;
    static const struct {
        const char *arg;
        int rc;
        const char *needle;
    } cases[] = {
        {"--noSuchKey=1", MQ_ERR_NOTFOUND, "noSuchKey"},
        {"--brokerId=abc", MQ_ERR_INVAL, "brokerId"},
        {"--brokerId=", MQ_ERR_INVAL, "brokerId"},
        {"--brokerId=-1", MQ_ERR_INVAL, "brokerId"},
        {"--brokerId=7x", MQ_ERR_INVAL, "brokerId"},
        {"--brokerRole=MASTER", MQ_ERR_INVAL, "ASYNC_MASTER|SYNC_MASTER|SLAVE"},
        {"--autoCreateTopicEnable=yes", MQ_ERR_INVAL, "autoCreateTopicEnable"},
        {"--mappedFileSizeCommitLog=12q", MQ_ERR_INVAL, "mappedFileSizeCommitLog"},
        {"--mappedFileSizeCommitLog=99999999999999999999", MQ_ERR_INVAL, "mappedFileSize"},
        {"--mappedFileSizeConsumeQueue=1001", MQ_ERR_INVAL, "multiple of 20"},
        {"--diskSpaceWarningLevelRatio=101", MQ_ERR_INVAL, "diskSpaceWarningLevelRatio"},
        {"--deleteWhen=25", MQ_ERR_INVAL, "deleteWhen"},
        {"--deleteWhen=04;", MQ_ERR_INVAL, "deleteWhen"},
        {"--listen=127.0.0.1", MQ_ERR_INVAL, "listen"},
        {"--listen=300.0.0.1:80", MQ_ERR_INVAL, "listen"},
        {"--listen=127.0.0.1:65536", MQ_ERR_INVAL, "listen"},
        {"--listen=example.com:80", MQ_ERR_INVAL, "listen"},
        {"--data=", MQ_ERR_INVAL, "data"},
        {"stray", MQ_ERR_INVAL, "stray"},
        {"--logLevel=loud", MQ_ERR_INVAL, "logLevel"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        Config c;
        conf_defaults(&c, CONF_MODE_STANDALONE);
        const char *argv[] = {cases[i].arg};
        int rc = parse(&c, 1, argv);
        if (rc != cases[i].rc || !strstr(err, cases[i].needle)) {
            fprintf(stderr, "%s -> %d '%s'\n", cases[i].arg, rc, err);
        }
        assert_int_equal(rc, cases[i].rc);
        assert_non_null(strstr(err, cases[i].needle));
    }
    Config c;
    conf_defaults(&c, CONF_MODE_STANDALONE);
    const char *missing[] = {"--listen"};
    assert_int_equal(parse(&c, 1, missing), MQ_ERR_INVAL);
    assert_non_null(strstr(err, "--listen"));
    const char *no_file[] = {"-c", "/nonexistent/broker.conf"};
    assert_int_equal(parse(&c, 2, no_file), MQ_ERR_IO);
    assert_non_null(strstr(err, "/nonexistent/broker.conf"));
}

static void test_conf_file_errors_name_file_line_and_key(void **state) {
    (void)state;
    char *dir = tu_mkdtemp("conf");
    char *path = write_file(dir, "brokerName=a\n# comment\nbrokerIdd=1\n");
    Config c;
    conf_defaults(&c, CONF_MODE_STANDALONE);
    assert_int_equal(conf_load_file(&c, path, err, sizeof(err)), MQ_ERR_NOTFOUND);
    assert_non_null(strstr(err, ":3:"));
    assert_non_null(strstr(err, "brokerIdd"));
    free(path);

    path = write_file(dir, "brokerName\n");
    assert_int_equal(conf_load_file(&c, path, err, sizeof(err)), MQ_ERR_INVAL);
    assert_non_null(strstr(err, ":1:"));
    free(path);
    tu_rmtree(dir);
    free(dir);
}

static void test_conf_store_config_carries_every_store_key(void **state) {
    (void)state;
    Config c;
    conf_defaults(&c, CONF_MODE_STANDALONE);
    const char *argv[] = {"--data=/tmp/d", "--listen=10.1.2.3:0",
                          "--mappedFileSizeCommitLog=1m", "--mappedFileSizeConsumeQueue=2000",
                          "--maxHashSlotNum=11", "--maxIndexNum=22",
                          "--flushIntervalCommitLog=33", "--flushIntervalConsumeQueue=44",
                          "--syncFlushTimeout=55", "--fileReservedTime=66",
                          "--deleteWhen=01;13", "--diskMaxUsedSpaceRatio=50",
                          "--diskSpaceCleanForciblyRatio=60",
                          "--diskSpaceWarningLevelRatio=70", "--cleanResourceInterval=77"};
    assert_int_equal(parse(&c, (int)(sizeof(argv) / sizeof(argv[0])), argv), MQ_OK);
    c.listen_port = 4321; /* the bound port */
    StoreConfig sc;
    conf_store_config(&c, &sc);
    assert_string_equal(sc.data_dir, "/tmp/d");
    assert_int_equal(sc.segment_size, 1048576);
    assert_int_equal(sc.cq_file_entries, 100);
    assert_int_equal(sc.index_slots, 11);
    assert_int_equal(sc.index_entries, 22);
    assert_int_equal(sc.flush_interval_ms, 33);
    assert_int_equal(sc.flush_cq_interval_ms, 44);
    assert_int_equal(sc.sync_flush_timeout_ms, 55);
    assert_int_equal(sc.file_reserved_hours, 66);
    assert_string_equal(sc.delete_when, "01;13");
    assert_int_equal(sc.disk_max_used_ratio, 50);
    assert_int_equal(sc.disk_force_clean_ratio, 60);
    assert_int_equal(sc.disk_refuse_ratio, 70);
    assert_int_equal(sc.clean_interval_ms, 77);
    assert_memory_equal(sc.store_host, ((uint8_t[]){10, 1, 2, 3}), 4);
    assert_int_equal(mq_get_u32(sc.store_host + 4), 4321);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_conf_defaults_follow_rocketmq),
        cmocka_unit_test(test_conf_every_key_formats_back_to_a_valid_value),
        cmocka_unit_test(test_conf_flags_win_over_the_file),
        cmocka_unit_test(test_conf_sizes_accept_suffixes),
        cmocka_unit_test(test_conf_errors_name_the_key),
        cmocka_unit_test(test_conf_file_errors_name_file_line_and_key),
        cmocka_unit_test(test_conf_store_config_carries_every_store_key),
    };
    return cmocka_run_group_tests_name("config", tests, NULL, NULL);
}
