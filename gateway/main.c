/*
 * main.c - the one main() of Petrel: picks the subcommand.  `standalone`
 * and `broker` run the server: parse the configuration, bind, open the
 * broker, start the HTTP daemon, then wait for SIGINT/SIGTERM in sigwait()
 * and shut down in reverse order.  Exit status: 0 ok, 1 runtime failure,
 * 2 usage or configuration error.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "admin.h"
#include "check.h"
#include "broker.h"
#include "config.h"
#include "http.h"
#include "mq.h"
#include "version.h"

#define BODY_SLACK (64u * 1024) /* request bytes allowed beyond maxMessageSize */

typedef struct Command {
    const char *name;
    const char *args;    /* after the name, in usage lines */
    const char *summary; /* one line */
} Command;

static const Command commands[] = {
    {"standalone", "[options]", "name server and broker in one process (what `make run` starts)"},
    {"broker", "[options]", "a broker: store, core and REST gateway"},
    {"namesrv", "[options]", "a name server: route tables only"},
    {"admin", "<command> [options]", "mqadmin-style commands over HTTP"},
    {"bench", "[options]", "load generator and result table"},
    {"check", "DIR", "verify a data directory offline"},
    {"dump", "DIR", "print the records of a data directory"},
    {"version", "", "print the version"},
    {"help", "[command]", "this text, or the options of a command"},
};

#define N_COMMANDS (sizeof(commands) / sizeof(commands[0]))

static void usage(FILE *out) {
    fprintf(out, "usage: petrel <command> [options]\n\ncommands:\n");
    for (size_t i = 0; i < N_COMMANDS; i++) {
        fprintf(out, "  %-11s %s\n", commands[i].name, commands[i].summary);
    }
    fprintf(out, "\n'petrel <command> --help' lists the options and configuration keys of a"
                 " command.\n");
}

static const Command *find_command(const char *name) {
    for (size_t i = 0; i < N_COMMANDS; i++) {
        if (strcmp(commands[i].name, name) == 0) return &commands[i];
    }
    return NULL;
}

static bool is_server(const char *name) {
    return strcmp(name, "standalone") == 0 || strcmp(name, "broker") == 0;
}

static void command_usage(FILE *out, const Command *cmd) {
    fprintf(out, "usage: petrel %s %s\n%s\n", cmd->name, cmd->args, cmd->summary);
    if (!is_server(cmd->name)) return;
    fprintf(out,
            "\noptions:\n"
            "  -c FILE                read key=value lines from FILE first; flags win\n"
            "  --listen HOST:PORT     same as --listen=HOST:PORT (port 0: any free port)\n"
            "  --data DIR             same as --data=DIR\n"
            "  --port-file PATH       write the bound port to PATH once listening\n"
            "  --help                 this text\n"
            "\nconfiguration keys (--key=value, or key=value in the file), with defaults:\n");
    conf_print_keys(out, strcmp(cmd->name, "broker") == 0 ? CONF_MODE_BROKER
                                                          : CONF_MODE_STANDALONE);
}

static bool wants_help(int argc, char **argv) {
    for (int i = 0; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) return true;
    }
    return false;
}

/* Writes the port atomically (tmp + rename): a reader sees all or nothing. */
static int write_port_file(const char *path, unsigned port) {
    char tmp[CONF_PATH_MAX + 8];
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (!f) {
        MQ_ERROR("cannot write port file '%s': %s", tmp, strerror(errno));
        return MQ_ERR_IO;
    }
    int bad = fprintf(f, "%u\n", port) < 0;
    bad |= fclose(f) != 0;
    if (bad || rename(tmp, path) != 0) {
        MQ_ERROR("cannot write port file '%s': %s", path, strerror(errno));
        unlink(tmp);
        return MQ_ERR_IO;
    }
    return MQ_OK;
}

static int run_server(const Command *cmd, int argc, char **argv) {
    /* Before any thread exists: every thread inherits the mask, so only
     * main's sigwait() ever sees SIGINT/SIGTERM. */
    sigset_t stop_set;
    sigemptyset(&stop_set);
    sigaddset(&stop_set, SIGINT);
    sigaddset(&stop_set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &stop_set, NULL);
    signal(SIGPIPE, SIG_IGN);

    Config conf;
    conf_defaults(&conf, strcmp(cmd->name, "broker") == 0 ? CONF_MODE_BROKER
                                                          : CONF_MODE_STANDALONE);
    char err[1024];
    if (conf_parse_args(&conf, argc, argv, err, sizeof(err)) != MQ_OK) {
        fprintf(stderr, "petrel: %s\ntry 'petrel %s --help'\n", err, cmd->name);
        return 2;
    }
    mq_log_level = conf.log_level;
    json_object_seed(0);

    int fd = -1;
    uint16_t port = 0;
    if (gw_listen(conf.listen_ip, conf.listen_port, &fd, &port) != MQ_OK) return 1;
    conf.listen_port = port;

    Broker *broker = NULL;
    if (broker_open(&conf, &broker) != MQ_OK) {
        close(fd);
        return 1;
    }
    GwConfig gc;
    gw_config_defaults(&gc);
    gc.listen_fd = fd;
    gc.web_root = conf.web_root;
    gc.max_body = (size_t)conf.max_message_size + BODY_SLACK;
    gc.threads = (unsigned)conf.http_threads;
    gc.conn_limit = (unsigned)conf.http_max_connections;
    gc.conn_timeout_s = (unsigned)conf.http_connection_timeout_s;
    gc.max_headers = (unsigned)conf.http_max_headers;
    gc.conn_memory = (size_t)conf.http_connection_memory;
    Gw *gw = NULL;
    if (gw_start(&gc, broker, &gw) != MQ_OK) {
        broker_close(broker);
        return 1;
    }
    if (conf.port_file[0] && write_port_file(conf.port_file, port) != MQ_OK) {
        lp_wake_all(broker_longpoll(broker));
        gw_stop(gw);
        broker_close(broker);
        return 1;
    }
    const uint8_t *ip = conf.listen_ip;
    MQ_INFO("petrel %s %s listening on http://%u.%u.%u.%u:%u, data '%s', role %s", cmd->name,
            PETREL_VERSION, ip[0], ip[1], ip[2], ip[3], port, conf.data,
            conf_broker_role_name(conf.broker_role));

    int sig = 0;
    while (sigwait(&stop_set, &sig) != 0) {
    }
    MQ_INFO("received %s, stopping", sig == SIGINT ? "SIGINT" : "SIGTERM");
    /* Long polls first: they answer NO_NEW_MSG now and no new one waits,
     * so gw_stop's wait for suspended requests covers only sync flushes
     * (bounded by syncFlushTimeout) and requests whose job is queued: the
     * daemon's job runner (jobs.h) runs those, then stops, before MHD
     * does.  The broker closes last: jobs and handlers use it. */
    lp_wake_all(broker_longpoll(broker));
    gw_stop(gw);
    broker_close(broker);
    if (conf.port_file[0]) unlink(conf.port_file);
    MQ_INFO("stopped");
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    const char *name = argv[1];
    if (strcmp(name, "--help") == 0 || strcmp(name, "-h") == 0) {
        usage(stdout);
        return 0;
    }
    if (strcmp(name, "--version") == 0) name = "version";
    const Command *cmd = find_command(name);
    if (!cmd) {
        fprintf(stderr, "petrel: unknown command '%s'\n", name);
        usage(stderr);
        return 2;
    }
    if (strcmp(name, "help") == 0) {
        const Command *about = argc > 2 ? find_command(argv[2]) : NULL;
        if (argc > 2 && !about) {
            fprintf(stderr, "petrel: unknown command '%s'\n", argv[2]);
            return 2;
        }
        if (about) {
            command_usage(stdout, about);
        } else {
            usage(stdout);
        }
        return 0;
    }
    if (strcmp(name, "version") == 0) {
        printf("petrel %s\n", PETREL_VERSION);
        return 0;
    }
    if (strcmp(name, "check") == 0 || strcmp(name, "dump") == 0)
        return check_main(argc - 1, argv + 1); /* its own --help */
    if (strcmp(name, "admin") == 0) return admin_main(argc - 1, argv + 1); /* its own help */
    if (wants_help(argc - 2, argv + 2)) {
        command_usage(stdout, cmd);
        return 0;
    }
    if (is_server(name)) return run_server(cmd, argc - 2, argv + 2);
    fprintf(stderr, "petrel: '%s' is not implemented yet\n", name);
    return 2;
}
