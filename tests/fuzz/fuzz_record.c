/*
 * fuzz_record.c - the commit-log record decoder and property lookup on
 * arbitrary bytes: cl_decode must classify any input without reading past
 * 'avail', and a record it accepts must re-encode to the same bytes.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "commitlog.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    /* Copy into an exact-size heap buffer so ASan sees any overread. */
    uint8_t *buf = malloc(size ? size : 1);
    if (!buf) return 0;
    memcpy(buf, data, size);
    ClRecord rec;
    for (int verify = 0; verify < 2; verify++) {
        if (cl_decode(buf, size, verify, &rec) != CL_REC_OK) continue;
        MqSlice v;
        cl_prop_find(rec.props, CL_PROP_TAGS, &v);
        cl_prop_find(rec.props, CL_PROP_KEYS, &v);
        if (!verify) continue;
        ClMessage m = {.topic = rec.topic, .queue_id = rec.queue_id, .flag = rec.flag,
                       .sysflag = rec.sysflag, .born_ts = rec.born_ts,
                       .reconsume_times = rec.reconsume_times,
                       .prepared_tx_off = rec.prepared_tx_off, .body = rec.body,
                       .props = rec.props};
        memcpy(m.born_host, rec.born_host, 8);
        size_t len = cl_record_size(&m);
        if (len != rec.total_size) abort();
        uint8_t *again = malloc(len);
        cl_encode(again, len, &m, rec.phys_off, rec.queue_off, rec.store_ts, rec.store_host);
        if (memcmp(again, buf, len) != 0) abort();
        free(again);
    }
    free(buf);
    return 0;
}
