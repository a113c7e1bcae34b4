/* SPDX-License-Identifier: MIT */
/*
 * Fuzzes the gRPC transport's reading of what etcd sends
 * (src/etcd/etcd_grpc_json.c): the frame, and the message as each reply
 * vigil asks for, into the gateway's JSON. The first byte picks the call;
 * the rest is the body. Whatever decodes must encode again as the same
 * message and decode to the same JSON (the mapping is its own inverse on
 * what it writes); nothing may crash, hang or read past the end.
 */
#include "fuzz.h"

#include "transport_internal.h"


#include <cjson/cJSON.h>
#include <protobuf-c/protobuf-c.h>

static const char *const paths[] = { "v3/kv/range", "v3/kv/put", "v3/kv/deleterange", "v3/kv/txn",
                                     "v3/lease/grant", "v3/lease/revoke", "v3/lease/keepalive",
                                     "v3/lease/timetolive", "v3/maintenance/status", "v3/auth/authenticate" };
#define NPATHS (sizeof(paths) / sizeof(paths[0]))

static const struct {
    unsigned    path;
    const char *json;
} seeds[] = {
    { 0, "{\"header\":{\"cluster_id\":\"14841639068965178418\",\"revision\":\"5\"},\"kvs\":[{\"key\":\"YQ==\","
         "\"create_revision\":\"2\",\"value\":\"Yg==\",\"lease\":\"7587899360832723719\"}],\"count\":\"1\"}" },
    { 3, "{\"header\":{\"revision\":\"4\"},\"succeeded\":true,\"responses\":[{\"response_put\":{\"header\":"
         "{\"revision\":\"4\"}}},{\"response_range\":{\"kvs\":[{\"key\":\"YQ==\"}]}}]}" },
    { 4, "{\"header\":{\"revision\":\"2\"},\"ID\":\"7587899360832723719\",\"TTL\":\"5\"}" },
    { 6, "{\"header\":{},\"ID\":\"1\",\"TTL\":\"3\"}" },
    { 7, "{\"ID\":\"1\",\"TTL\":\"-1\",\"grantedTTL\":\"10\",\"keys\":[\"YQ==\"]}" },
    { 8, "{\"version\":\"3.4.23\",\"dbSize\":\"20480\",\"leader\":\"1\",\"errors\":[\"x\"]}" },
    { 9, "{\"token\":\"abc.123\"}" },
};

size_t vigil_fuzz_seed(unsigned index, uint8_t *buf, size_t cap)
{
    if (index >= sizeof(seeds) / sizeof(seeds[0]))
        return 0;
    const struct vigil_etcd_grpc_method *m = vigil_etcd__grpc_method(paths[seeds[index].path]);
    unsigned char *pb;
    size_t n;
    if (!m || vigil_etcd__pb_encode(m->reply, seeds[index].json, 0, &pb, &n) < 0)
        abort();
    if (n + 1 > cap) {
        free(pb);
        return 0;
    }
    buf[0] = (uint8_t)seeds[index].path;
    memcpy(buf + 1, pb, n);
    free(pb);
    return n + 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    const unsigned char *msg;
    size_t mlen;
    (void)vigil_etcd__grpc_unframe(data + 1, size - 1, &msg, &mlen);
    const struct vigil_etcd_grpc_method *m = vigil_etcd__grpc_method(paths[data[0] % NPATHS]);
    char *json, *again;
    size_t len, len2;
    if (vigil_etcd__pb_decode(m->reply, data + 1, size - 1, &json, &len) < 0)
        return 0;
    unsigned char *pb;
    size_t n;
    if (vigil_etcd__pb_encode(m->reply, json, 0, &pb, &n) < 0 || vigil_etcd__pb_decode(m->reply, pb, n, &again, &len2) < 0)
        abort(); /* what it wrote, it must read */
    cJSON *a = cJSON_Parse(json), *b = cJSON_Parse(again);
    if (!a || !b || !cJSON_Compare(a, b, true))
        abort();
    cJSON_Delete(a);
    cJSON_Delete(b);
    free(pb);
    free(again);
    free(json);
    return 0;
}
