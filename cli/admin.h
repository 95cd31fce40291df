/*
 * admin.h - `petrel admin`: RocketMQ mqadmin-style commands (updateTopic,
 * topicList, consumerProgress, sendMessage, ...) run against a broker's
 * REST API with libcurl.  Output is an aligned table or key: value lines,
 * or with --json the broker's JSON answer unchanged.  docs/admin.md
 * describes the commands.
 */
#ifndef PETREL_ADMIN_H
#define PETREL_ADMIN_H

/* admin_main runs `petrel admin`: 'argv'[0] is "admin", then optional
 * global flags (-b HOST:PORT, -n HOST:PORT, --json), the command name and
 * its flags.  The request goes to -b, else -n (-n first for the
 * name-server commands topicList, topicRoute, clusterList; standalone
 * serves both on one address), else $PETREL_ADDR, else 127.0.0.1:8080.
 * Prints the result on stdout, errors on stderr.  Returns the exit status:
 * 0 success, 1 the broker refused the request or could not be reached,
 * 2 unknown command or bad flags (usage printed).  Main thread; one
 * request per run (consumeMessage: two, receive then ack). */
int admin_main(int argc, char **argv);

#endif
