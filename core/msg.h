/*
 * msg.h - the message model shared by every core module and the gateway:
 * topic/group name rules, the property codec of commit-log records, the
 * offset message id, the client-style unique id and tag filter parsing.
 * REFERENCE A1 (ids), A2 (names), A5 (tags); the property bytes are the
 * "props" field of a commit-log record (store/FORMAT.md "Commit log").
 *
 * Pure functions over caller buffers: nothing here allocates, and only
 * msg_uniq_id keeps state (a process-wide atomic).  All are thread-safe.
 */
#ifndef PETREL_MSG_H
#define PETREL_MSG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "commitlog.h"
#include "mq.h"

/* ---- names ---------------------------------------------------------------*/

#define MSG_NAME_MAX 127        /* longest user topic or group name, bytes */
#define MSG_SYSTEM_NAME_MAX 255 /* longest system topic name (%RETRY%<group>...) */

/* Reserved prefixes and names (RocketMQ MixAll / TopicValidator). */
#define MSG_RETRY_PREFIX "%RETRY%"
#define MSG_DLQ_PREFIX "%DLQ%"
#define MSG_SYS_PREFIX "RMQ_SYS_" /* matched case-insensitively */
#define MSG_SCHEDULE_TOPIC "SCHEDULE_TOPIC_XXXX"
#define MSG_AUTO_CREATE_TOPIC "TBW102"
#define MSG_TRANS_CHECK_MAX_TOPIC "TRANS_CHECK_MAX_TIME_TOPIC"

/* msg_name_valid is true when the 'len' bytes at 'name' match
 * ^[a-zA-Z0-9_-]{1,127}$: the syntax of a user topic or group name.  It
 * does not check reservation (see msg_name_reserved).  'name' need not be
 * NUL-terminated; NULL is invalid.  Any thread. */
bool msg_name_valid(const char *name, size_t len);

/* msg_name_reserved is true when the 'len' bytes at 'name' belong to the
 * broker: they start with "%RETRY%" or "%DLQ%", start with "RMQ_SYS_" in any
 * letter case, or equal "SCHEDULE_TOPIC_XXXX", "TBW102" or
 * "TRANS_CHECK_MAX_TIME_TOPIC".  NULL is not reserved.  Any thread. */
bool msg_name_reserved(const char *name, size_t len);

/* msg_name_problem says why the 'len' bytes at 'name' cannot be a user
 * topic or group name: a short static lowercase sentence fragment for a
 * 400 body ("name is empty", "name is reserved for the broker", ...), or
 * NULL when the name is valid and not reserved.  Any thread. */
const char *msg_name_problem(const char *name, size_t len);

/* msg_system_name_valid is true when the 'len' bytes at 'name' match
 * ^[%|a-zA-Z0-9_-]{1,255}$ (RocketMQ's topic charset at the retry/DLQ
 * length limit): the check for names the broker makes itself, such as
 * "%RETRY%<group>".  Any thread. */
bool msg_system_name_valid(const char *name, size_t len);

/* ---- properties ----------------------------------------------------------
 * Encoded as RocketMQ does: for each pair, name, 0x01, value, 0x02.
 *
 *   +------+----+-------+----+------+----+-------+----+
 *   | name | 01 | value | 02 | name | 01 | value | 02 | ...
 *   +------+----+-------+----+------+----+-------+----+
 *
 * Names are non-empty; neither names nor values contain 0x01 or 0x02. */

#define MSG_PROP_NAME_SEP 0x01 /* between a name and its value */
#define MSG_PROP_PAIR_SEP 0x02 /* after each value */

/* System property names (RocketMQ MessageConst). */
#define MSG_PROP_TAGS CL_PROP_TAGS         /* the tag, one string */
#define MSG_PROP_KEYS CL_PROP_KEYS         /* space-separated keys */
#define MSG_PROP_UNIQ_KEY CL_PROP_UNIQ_KEY /* msg_uniq_id() of the message */
#define MSG_PROP_SHARDING_KEY "__SHARDINGKEY"
#define MSG_PROP_DELAY "DELAY"                       /* delay level 1..18 */
#define MSG_PROP_TIMER_DELIVER_MS "TIMER_DELIVER_MS" /* epoch ms */
#define MSG_PROP_REAL_TOPIC "REAL_TOPIC"             /* topic before a rewrite */
#define MSG_PROP_REAL_QID "REAL_QID"                 /* queue id before a rewrite */
#define MSG_PROP_RETRY_TOPIC "RETRY_TOPIC"
#define MSG_PROP_ORIGIN_MSG_ID "ORIGIN_MESSAGE_ID"
#define MSG_PROP_RECONSUME_TIME "RECONSUME_TIME"
#define MSG_PROP_MAX_RECONSUME "MAX_RECONSUME_TIMES"
#define MSG_PROP_TRAN_MSG "TRAN_MSG"   /* "true" on a half message */
#define MSG_PROP_PGROUP "PGROUP"       /* producer group of a half message */
#define MSG_PROP_TRAN_CHECK_TIMES "TRANSACTION_CHECK_TIMES"
#define MSG_PROP_CHECK_IMMUNITY "CHECK_IMMUNITY_TIME_IN_SECONDS"
#define MSG_PROP_DELAY_SRC "__DELAY_SRC" /* "<level>:<schedule queue offset>" of a re-put */
#define MSG_PROP_TRANSACTION_ID "__transactionId__" /* on a half message and its commit */
#define MSG_PROP_TXN_CHECK_URL "__TXN_CHECK_URL" /* a half message's check-back URL */

/* One property.  Both slices are borrowed. */
typedef struct MsgProp {
    MqSlice name;  /* 1.. bytes, no 0x01/0x02 */
    MqSlice value; /* 0.. bytes, no 0x01/0x02 */
} MsgProp;

/* msg_props_encode writes the 'n' pairs of 'props' in order into 'buf'
 * ('cap' bytes) and sets '*len' to the bytes written.  With 'buf' NULL it
 * only sets '*len' to the size the pairs need.  Duplicate names are
 * written as given (lookups see the first).  Returns MQ_OK, MQ_ERR_INVAL
 * (an empty name, 0x01/0x02 in a name or value, or NULL 'len'),
 * MQ_ERR_FULL (more than 'cap' bytes, with 'buf' set, or more than
 * CL_PROPS_MAX bytes); '*len' is set only on MQ_OK.  Any thread. */
int msg_props_encode(const MsgProp *props, size_t n, uint8_t *buf, size_t cap, size_t *len);

/* msg_props_decode splits encoded 'props' into at most 'cap' pairs in
 * 'out' (slices into 'props': valid as long as its bytes are) and sets
 * '*n' to their count.  The last pair's 0x02 may be missing (RocketMQ and
 * cl_prop_find accept that too).  With 'out' NULL it only counts.
 * Returns MQ_OK, MQ_ERR_CORRUPT (a pair without 0x01, an empty name, or
 * 0x01 inside a value), MQ_ERR_FULL (more than 'cap' pairs) or
 * MQ_ERR_INVAL (NULL 'n').  Any thread. */
int msg_props_decode(MqSlice props, MsgProp *out, size_t cap, size_t *n);

/* msg_prop_get looks 'name' (NUL-terminated) up in encoded 'props': true
 * with '*value' pointing into 'props' when found.  Any thread. */
bool msg_prop_get(MqSlice props, const char *name, MqSlice *value);

/* msg_prop_name_reserved is true when 'name' is one of the MSG_PROP_*
 * system names above (exact, case-sensitive): a user property may not use
 * it.  Any thread. */
bool msg_prop_name_reserved(MqSlice name);

/* ---- offset message id ---------------------------------------------------
 * RocketMQ's offsetMsgId: 16 bytes as 32 upper-case hex digits.
 *
 *   +---------------+---------------+-------------------------------+
 *   | IPv4 (4)      | port (4, BE)  | commit-log offset (8, BE)     |
 *   +---------------+---------------+-------------------------------+
 *
 * 'store_host' is the 8-byte field of a commit-log record: IPv4 in network
 * order, then the port as a u32 LITTLE-endian; the id carries the port
 * big-endian, as RocketMQ does. */

#define MSG_ID_LEN 32 /* hex digits of an offset id or unique id */

/* msg_id_encode writes the id of the record at 'phys_off' stored by
 * 'store_host' into 'out' (32 hex digits + NUL).  Any thread. */
void msg_id_encode(const uint8_t store_host[8], uint64_t phys_off, char out[33]);

/* msg_id_decode parses the 'len' characters at 'id' (hex digits in either
 * case) back into 'store_host' (record layout) and '*phys_off'.  Returns
 * MQ_OK or MQ_ERR_INVAL (length not 32, a non-hex character, a NULL
 * argument); the outputs are written only on MQ_OK.  Any thread. */
int msg_id_decode(const char *id, size_t len, uint8_t store_host[8], uint64_t *phys_off);

/* ---- unique id -----------------------------------------------------------
 * RocketMQ's createUniqID layout, 16 bytes as 32 upper-case hex digits:
 *
 *   +----------+---------+-------------+---------------------+-------------+
 *   | IPv4 (4) | pid (2) | random (4)  | ms since month (4)  | counter (2) |
 *   +----------+---------+-------------+---------------------+-------------+
 *
 * All big-endian.  'random' is drawn once per process.  The month starts
 * at 00:00 UTC on its first day (RocketMQ uses the local zone).  Time and
 * counter advance together as one atomic 48-bit clock: when more than
 * 65536 ids are made in one millisecond the time field runs ahead rather
 * than repeating, so ids never repeat within a process. */

/* msg_uniq_id writes a new unique id for a message produced through the
 * broker at 'ip' (IPv4, network order; NULL = 0.0.0.0) into 'out' (32
 * hex digits + NUL).  Thread-safe, lock-free. */
void msg_uniq_id(const uint8_t ip[4], char out[33]);

/* ---- tags ----------------------------------------------------------------*/

/* msg_tag_hash is the consume-queue hash of 'tag' (store_tag_hash: 0 for
 * an empty tag).  Any thread. */
uint64_t msg_tag_hash(MqSlice tag);

/* msg_tag_expr_parse parses the 'len' bytes at 'expr', a RocketMQ TAG
 * subscription: "*" (or empty/blank) = every message, else tags joined by
 * "||" with optional blanks around each ("A", "A || B", "A||B").  Sets
 * '*all' and, when not all, up to 'cap' distinct tags in 'tags' (slices
 * into 'expr', trimmed, first occurrence kept) and '*n'; '*n' is 0 when
 * all.  Returns MQ_OK, MQ_ERR_INVAL (an empty part as in "A || || B" or
 * "A ||", a "*" mixed with tags, a single '|' inside a tag, or a NULL
 * argument) or MQ_ERR_FULL (more than 'cap' distinct tags).  Any thread. */
int msg_tag_expr_parse(const char *expr, size_t len, MqSlice *tags, size_t cap, size_t *n,
                       bool *all);

/* msg_tag_expr_match is true when 'tag' passes the parsed expression
 * ('all', or equal to one of the 'n' 'tags').  Any thread. */
bool msg_tag_expr_match(const MqSlice *tags, size_t n, bool all, MqSlice tag);

#endif
