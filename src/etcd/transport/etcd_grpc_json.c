/* SPDX-License-Identifier: MIT */
/*
 * The gateway's JSON <-> etcd's protobuf, through protobuf-c's descriptors
 * of etcd's own .proto files (src/etcd/transport/proto/): the request bodies and the
 * reply readers of the adapter stay those of the JSON gateway, and the
 * gRPC transport (etcd_grpc.c) converts under them, as grpc-gateway does
 * in front of etcd (jsonpb with OrigName, defaults left out).
 *
 * The wire format is walked directly (a tag, a value; lengths bounded by
 * what is left), never through a generated struct: a hostile reply is at
 * worst -EPROTO. Unknown fields are skipped, as every protobuf reader
 * does (a newer etcd adds fields); a known field with the wrong wire
 * type is -EPROTO.
 */
#include "transport_internal.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <inttypes.h>
#include <protobuf-c/protobuf-c.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rpc.pb-c.h"

#define DEPTH_MAX 32

/* ---- the calls ----------------------------------------------------------- */

static const struct vigil_etcd_grpc_method methods[] = {
    { "v3/kv/range", "/etcdserverpb.KV/Range", &etcdserverpb__range_request__descriptor,
      &etcdserverpb__range_response__descriptor, false },
    { "v3/kv/put", "/etcdserverpb.KV/Put", &etcdserverpb__put_request__descriptor,
      &etcdserverpb__put_response__descriptor, false },
    { "v3/kv/deleterange", "/etcdserverpb.KV/DeleteRange", &etcdserverpb__delete_range_request__descriptor,
      &etcdserverpb__delete_range_response__descriptor, false },
    { "v3/kv/txn", "/etcdserverpb.KV/Txn", &etcdserverpb__txn_request__descriptor,
      &etcdserverpb__txn_response__descriptor, false },
    { "v3/kv/compaction", "/etcdserverpb.KV/Compact", &etcdserverpb__compaction_request__descriptor,
      &etcdserverpb__compaction_response__descriptor, false },
    { "v3/lease/grant", "/etcdserverpb.Lease/LeaseGrant", &etcdserverpb__lease_grant_request__descriptor,
      &etcdserverpb__lease_grant_response__descriptor, false },
    { "v3/lease/revoke", "/etcdserverpb.Lease/LeaseRevoke", &etcdserverpb__lease_revoke_request__descriptor,
      &etcdserverpb__lease_revoke_response__descriptor, false },
    /* A bidi stream: one request, the body ended, and etcd answers once
     * and ends the stream (its receive loop returns at the end), as the
     * gateway's one renewal per request. */
    { "v3/lease/keepalive", "/etcdserverpb.Lease/LeaseKeepAlive", &etcdserverpb__lease_keep_alive_request__descriptor,
      &etcdserverpb__lease_keep_alive_response__descriptor, true },
    /* The watch stream (etcd_grpc_stream.c): a create request, and
     * messages for as long as it lasts, each under "result". */
    { "v3/watch", "/etcdserverpb.Watch/Watch", &etcdserverpb__watch_request__descriptor,
      &etcdserverpb__watch_response__descriptor, true },
    { "v3/lease/timetolive", "/etcdserverpb.Lease/LeaseTimeToLive",
      &etcdserverpb__lease_time_to_live_request__descriptor, &etcdserverpb__lease_time_to_live_response__descriptor, false },
    { "v3/maintenance/status", "/etcdserverpb.Maintenance/Status", &etcdserverpb__status_request__descriptor,
      &etcdserverpb__status_response__descriptor, false },
    { "v3/auth/authenticate", "/etcdserverpb.Auth/Authenticate", &etcdserverpb__authenticate_request__descriptor,
      &etcdserverpb__authenticate_response__descriptor, false },
};

const struct vigil_etcd_grpc_method *vigil_etcd__grpc_method(const char *path)
{
    for (size_t i = 0; i < sizeof(methods) / sizeof(methods[0]); i++)
        if (strcmp(path, methods[i].gateway) == 0)
            return &methods[i];
    return NULL;
}

/* ---- a growing buffer ---------------------------------------------------- */

struct pbuf {
    unsigned char *p;
    size_t         len, cap;
};

static int put(struct pbuf *b, const void *src, size_t n)
{
    if (n > b->cap - b->len) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap - b->len < n) {
            if (cap > SIZE_MAX / 2)
                return -ENOMEM;
            cap *= 2;
        }
        unsigned char *p = realloc(b->p, cap);
        if (!p)
            return -ENOMEM;
        b->p = p;
        b->cap = cap;
    }
    if (n)
        memcpy(b->p + b->len, src, n);
    b->len += n;
    return 0;
}

static int put_varint(struct pbuf *b, uint64_t v)
{
    unsigned char tmp[10];
    size_t n = 0;
    do {
        tmp[n++] = (unsigned char)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
        v >>= 7;
    } while (v);
    return put(b, tmp, n);
}

static int put_fixed(struct pbuf *b, uint64_t v, size_t n)
{
    unsigned char tmp[8];
    for (size_t i = 0; i < n; i++)
        tmp[i] = (unsigned char)(v >> (8 * i)); /* little-endian, as protobuf's fixed types */
    return put(b, tmp, n);
}

/* ---- JSON -> protobuf ---------------------------------------------------- */

enum { WT_VARINT = 0, WT_I64 = 1, WT_LEN = 2, WT_I32 = 5 };

static int wire_type(ProtobufCType t)
{
    switch (t) {
    case PROTOBUF_C_TYPE_FIXED64:
    case PROTOBUF_C_TYPE_SFIXED64:
    case PROTOBUF_C_TYPE_DOUBLE:   return WT_I64;
    case PROTOBUF_C_TYPE_FIXED32:
    case PROTOBUF_C_TYPE_SFIXED32:
    case PROTOBUF_C_TYPE_FLOAT:    return WT_I32;
    case PROTOBUF_C_TYPE_STRING:
    case PROTOBUF_C_TYPE_BYTES:
    case PROTOBUF_C_TYPE_MESSAGE:  return WT_LEN;
    default:                       return WT_VARINT;
    }
}

static bool is_signed(ProtobufCType t)
{
    return t == PROTOBUF_C_TYPE_INT32 || t == PROTOBUF_C_TYPE_SINT32 || t == PROTOBUF_C_TYPE_SFIXED32 ||
           t == PROTOBUF_C_TYPE_INT64 || t == PROTOBUF_C_TYPE_SINT64 || t == PROTOBUF_C_TYPE_SFIXED64;
}

static bool is_32(ProtobufCType t)
{
    return t == PROTOBUF_C_TYPE_INT32 || t == PROTOBUF_C_TYPE_SINT32 || t == PROTOBUF_C_TYPE_SFIXED32 ||
           t == PROTOBUF_C_TYPE_UINT32 || t == PROTOBUF_C_TYPE_FIXED32;
}

/* An integer as jsonpb reads one: a string of digits or an integral
 * number (exact up to 2^53: a larger one must come as a string). */
static int json_integer(const cJSON *v, ProtobufCType t, uint64_t *out)
{
    bool sign = is_signed(t);
    int64_t s = 0;
    uint64_t u = 0;
    if (cJSON_IsString(v)) {
        const char *str = v->valuestring;
        char *end;
        if (!*str || vigil_etcd__is_space(*str) || (!sign && *str == '-'))
            return -EINVAL;
        errno = 0;
        if (sign)
            s = strtoll(str, &end, 10);
        else
            u = strtoull(str, &end, 10);
        if (errno || *end)
            return -EINVAL;
    } else if (cJSON_IsNumber(v)) {
        double d = v->valuedouble;
        if (d != d || d > 9007199254740992.0 || d < -9007199254740992.0 || d != (double)(int64_t)d ||
            (!sign && d < 0))
            return -EINVAL;
        s = (int64_t)d;
        u = (uint64_t)s;
    } else {
        return -EINVAL;
    }
    if (sign) {
        if (is_32(t) && (s < INT32_MIN || s > INT32_MAX))
            return -EINVAL;
        *out = (uint64_t)s;
    } else {
        if (is_32(t) && u > UINT32_MAX)
            return -EINVAL;
        *out = u;
    }
    return 0;
}

static int encode_message(const ProtobufCMessageDescriptor *d, const cJSON *obj, struct pbuf *b, int depth);

static int put_len(struct pbuf *b, const void *p, size_t n)
{
    int rc = put_varint(b, n);
    return rc ? rc : put(b, p, n);
}

/* One value of field f (its tag written by the caller). */
static int encode_value(const ProtobufCFieldDescriptor *f, const cJSON *v, struct pbuf *b, int depth)
{
    uint64_t u;
    int rc;
    switch (f->type) {
    case PROTOBUF_C_TYPE_BOOL:
        if (!cJSON_IsBool(v))
            return -EINVAL;
        return put_varint(b, cJSON_IsTrue(v) ? 1 : 0);
    case PROTOBUF_C_TYPE_ENUM: {
        const ProtobufCEnumDescriptor *ed = f->descriptor;
        if (cJSON_IsString(v)) {
            const ProtobufCEnumValue *ev = protobuf_c_enum_descriptor_get_value_by_name(ed, v->valuestring);
            if (!ev)
                return -EINVAL;
            return put_varint(b, (uint64_t)(int64_t)ev->value);
        }
        if ((rc = json_integer(v, PROTOBUF_C_TYPE_INT32, &u)) < 0)
            return rc;
        return put_varint(b, u);
    }
    case PROTOBUF_C_TYPE_STRING:
        if (!cJSON_IsString(v))
            return -EINVAL;
        return put_len(b, v->valuestring, strlen(v->valuestring));
    case PROTOBUF_C_TYPE_BYTES: {
        if (!cJSON_IsString(v))
            return -EINVAL;
        size_t n = strlen(v->valuestring);
        unsigned char *raw = malloc(n / 4 * 3 + 3);
        if (!raw)
            return -ENOMEM;
        int k = vigil_etcd__unb64(v->valuestring, n, raw, n / 4 * 3 + 3);
        rc = k < 0 ? -EINVAL : put_len(b, raw, (size_t)k);
        free(raw);
        return rc;
    }
    case PROTOBUF_C_TYPE_MESSAGE: {
        if (!cJSON_IsObject(v))
            return -EINVAL;
        struct pbuf sub = { 0 };
        rc = encode_message(f->descriptor, v, &sub, depth + 1);
        if (rc == 0)
            rc = put_len(b, sub.p, sub.len);
        free(sub.p);
        return rc;
    }
    case PROTOBUF_C_TYPE_FLOAT:
    case PROTOBUF_C_TYPE_DOUBLE:
        return -EINVAL; /* etcd's calls have none */
    default:
        if ((rc = json_integer(v, f->type, &u)) < 0)
            return rc;
        if (f->type == PROTOBUF_C_TYPE_SINT32 || f->type == PROTOBUF_C_TYPE_SINT64) /* zigzag */
            u = (u << 1) ^ (uint64_t)((int64_t)u >> 63);
        if (wire_type(f->type) == WT_I64)
            return put_fixed(b, u, 8);
        if (wire_type(f->type) == WT_I32)
            return put_fixed(b, u, 4);
        return put_varint(b, u);
    }
}

static int encode_message(const ProtobufCMessageDescriptor *d, const cJSON *obj, struct pbuf *b, int depth)
{
    if (depth > DEPTH_MAX)
        return -EINVAL;
    for (const cJSON *it = obj->child; it; it = it->next) {
        const ProtobufCFieldDescriptor *f = it->string ? protobuf_c_message_descriptor_get_field_by_name(d, it->string)
                                                       : NULL;
        if (!f)
            return -EINVAL; /* as jsonpb: a field the message lacks */
        if (cJSON_IsNull(it))
            continue;
        uint64_t tag = (uint64_t)f->id << 3 | (uint64_t)wire_type(f->type);
        int rc = 0;
        if (f->label == PROTOBUF_C_LABEL_REPEATED) {
            if (!cJSON_IsArray(it))
                return -EINVAL;
            for (const cJSON *e = it->child; e && rc == 0; e = e->next)
                if ((rc = put_varint(b, tag)) == 0)
                    rc = encode_value(f, e, b, depth);
        } else if ((rc = put_varint(b, tag)) == 0) {
            rc = encode_value(f, it, b, depth);
        }
        if (rc < 0)
            return rc;
    }
    return 0;
}

int vigil_etcd__pb_encode(const ProtobufCMessageDescriptor *d, const char *json, size_t room, unsigned char **out,
                          size_t *len)
{
    cJSON *obj = cJSON_Parse(json ? json : "{}");
    if (!obj)
        return -EINVAL;
    struct pbuf b = { 0 };
    int rc = cJSON_IsObject(obj) && room <= 8 ? 0 : -EINVAL;
    if (rc == 0 && !(b.p = malloc(b.cap = 256)))
        rc = -ENOMEM;
    if (rc == 0)
        rc = put(&b, "\0\0\0\0\0\0\0\0", room);
    if (rc == 0)
        rc = encode_message(d, obj, &b, 0);
    cJSON_Delete(obj);
    if (rc < 0) {
        free(b.p);
        return rc;
    }
    *out = b.p;
    *len = b.len;
    return 0;
}

/* ---- protobuf -> JSON ---------------------------------------------------- */

struct reader {
    const unsigned char *p, *end;
};

static int get_varint(struct reader *r, uint64_t *v)
{
    uint64_t x = 0;
    for (unsigned shift = 0; shift < 70; shift += 7) {
        if (r->p >= r->end)
            return -EPROTO;
        unsigned char c = *r->p++;
        if (shift == 63 && c > 1)
            return -EPROTO; /* past 64 bits */
        x |= (uint64_t)(c & 0x7f) << shift;
        if (!(c & 0x80)) {
            *v = x;
            return 0;
        }
    }
    return -EPROTO;
}

static int get_fixed(struct reader *r, size_t n, uint64_t *v)
{
    if ((size_t)(r->end - r->p) < n)
        return -EPROTO;
    uint64_t x = 0;
    for (size_t i = 0; i < n; i++)
        x |= (uint64_t)r->p[i] << (8 * i);
    r->p += n;
    *v = x;
    return 0;
}

static int get_len(struct reader *r, const unsigned char **p, size_t *n)
{
    uint64_t len;
    int rc = get_varint(r, &len);
    if (rc < 0)
        return rc;
    if (len > (uint64_t)(r->end - r->p))
        return -EPROTO;
    *p = r->p;
    *n = (size_t)len;
    r->p += len;
    return 0;
}

static cJSON *decimal(uint64_t v, bool sign)
{
    char buf[24];
    if (sign)
        snprintf(buf, sizeof(buf), "%" PRId64, (int64_t)v);
    else
        snprintf(buf, sizeof(buf), "%" PRIu64, v);
    return cJSON_CreateString(buf);
}

static int decode_message(const ProtobufCMessageDescriptor *d, struct reader *r, cJSON *obj, int depth);

/* A scalar (u, read by its wire type) of field f as jsonpb writes it;
 * *zero when it is the type's zero value. */
static cJSON *scalar_json(const ProtobufCFieldDescriptor *f, uint64_t u, bool *zero)
{
    *zero = u == 0;
    switch (f->type) {
    case PROTOBUF_C_TYPE_BOOL:
        return cJSON_CreateBool(u != 0);
    case PROTOBUF_C_TYPE_ENUM: {
        const ProtobufCEnumValue *ev = protobuf_c_enum_descriptor_get_value(f->descriptor, (int)(int32_t)u);
        return ev ? cJSON_CreateString(ev->name) : cJSON_CreateNumber((double)(int32_t)u);
    }
    case PROTOBUF_C_TYPE_INT32:
    case PROTOBUF_C_TYPE_SFIXED32:
        *zero = (int32_t)u == 0;
        return cJSON_CreateNumber((double)(int32_t)u);
    case PROTOBUF_C_TYPE_SINT32:
        u = (u >> 1) ^ (uint64_t)-(int64_t)(u & 1);
        *zero = (int32_t)u == 0;
        return cJSON_CreateNumber((double)(int32_t)u);
    case PROTOBUF_C_TYPE_UINT32:
    case PROTOBUF_C_TYPE_FIXED32:
        *zero = (uint32_t)u == 0;
        return cJSON_CreateNumber((double)(uint32_t)u);
    case PROTOBUF_C_TYPE_SINT64:
        u = (u >> 1) ^ (uint64_t)-(int64_t)(u & 1);
        return decimal(u, true);
    case PROTOBUF_C_TYPE_INT64:
    case PROTOBUF_C_TYPE_SFIXED64:
        return decimal(u, true);
    case PROTOBUF_C_TYPE_FLOAT: {
        uint32_t w = (uint32_t)u;
        float fl;
        memcpy(&fl, &w, sizeof(fl));
        return cJSON_CreateNumber(fl);
    }
    case PROTOBUF_C_TYPE_DOUBLE: {
        double db;
        memcpy(&db, &u, sizeof(db));
        return cJSON_CreateNumber(db);
    }
    default: /* UINT64, FIXED64 */
        return decimal(u, false);
    }
}

/* A length-delimited value of f: a string, bytes (base64) or a message. */
static cJSON *len_json(const ProtobufCFieldDescriptor *f, const unsigned char *p, size_t n, int depth, int *err,
                       bool *zero)
{
    *zero = n == 0;
    if (f->type == PROTOBUF_C_TYPE_MESSAGE) {
        *zero = false; /* a message that is there is written, even empty */
        cJSON *o = cJSON_CreateObject();
        struct reader sub = { p, p + n };
        if (o && (*err = decode_message(f->descriptor, &sub, o, depth + 1)) < 0) {
            cJSON_Delete(o);
            return NULL;
        }
        return o;
    }
    if (f->type == PROTOBUF_C_TYPE_STRING) {
        if (memchr(p, '\0', n)) {
            *err = -EPROTO; /* no NUL in a C string, nor in etcd's */
            return NULL;
        }
        char *s = malloc(n + 1);
        if (!s)
            return NULL;
        memcpy(s, p, n);
        s[n] = '\0';
        cJSON *v = cJSON_CreateString(s);
        free(s);
        return v;
    }
    size_t cap = (n + 2) / 3 * 4 + 1;
    char *s = malloc(cap);
    if (!s)
        return NULL;
    cJSON *v = vigil_etcd__b64(p, n, s, cap) >= 0 ? cJSON_CreateString(s) : NULL;
    free(s);
    return v;
}

/* v under f's name in obj: appended to its array when f is repeated,
 * else in place of an earlier one (the last wins, as in protobuf). */
static int add_value(cJSON *obj, const ProtobufCFieldDescriptor *f, cJSON *v)
{
    if (!v)
        return -ENOMEM;
    if (f->label == PROTOBUF_C_LABEL_REPEATED) {
        cJSON *arr = cJSON_GetObjectItemCaseSensitive(obj, f->name);
        if (!arr) {
            if (!(arr = cJSON_AddArrayToObject(obj, f->name))) {
                cJSON_Delete(v);
                return -ENOMEM;
            }
        }
        cJSON_AddItemToArray(arr, v);
        return 0;
    }
    cJSON_DeleteItemFromObjectCaseSensitive(obj, f->name);
    if (!cJSON_AddItemToObject(obj, f->name, v)) {
        cJSON_Delete(v);
        return -ENOMEM;
    }
    return 0;
}

static int read_scalar(struct reader *r, int wt, uint64_t *u)
{
    return wt == WT_VARINT ? get_varint(r, u) : get_fixed(r, wt == WT_I64 ? 8 : 4, u);
}

/* A oneof keeps only its member seen last (protobuf's rule, and so the
 * gateway's JSON): its fellow members (one quantifier_offset) leave obj. */
static void oneof_clear(const ProtobufCMessageDescriptor *d, const ProtobufCFieldDescriptor *f, cJSON *obj)
{
    for (unsigned i = 0; i < d->n_fields; i++) {
        const ProtobufCFieldDescriptor *g = &d->fields[i];
        if (g != f && (g->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) && g->quantifier_offset == f->quantifier_offset)
            cJSON_DeleteItemFromObjectCaseSensitive(obj, g->name);
    }
}

static int decode_field(const ProtobufCFieldDescriptor *f, int wt, struct reader *r, cJSON *obj, int depth)
{
    int want = wire_type(f->type), rc = 0;
    /* jsonpb leaves a proto3 scalar at its zero value out; a oneof's
     * member is written whatever its value (it says which one is set). */
    bool keep_zero = f->label == PROTOBUF_C_LABEL_REPEATED || (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) ||
                     f->label == PROTOBUF_C_LABEL_REQUIRED;
    bool zero;
    if (wt == WT_LEN && want != WT_LEN && f->label == PROTOBUF_C_LABEL_REPEATED) {
        const unsigned char *p; /* packed: the values one after another */
        size_t n;
        if ((rc = get_len(r, &p, &n)) < 0)
            return rc;
        struct reader sub = { p, p + n };
        if (!cJSON_GetObjectItemCaseSensitive(obj, f->name) && !cJSON_AddArrayToObject(obj, f->name))
            return -ENOMEM;
        while (sub.p < sub.end) {
            uint64_t u;
            if ((rc = read_scalar(&sub, want, &u)) < 0 || (rc = add_value(obj, f, scalar_json(f, u, &zero))) < 0)
                return rc;
        }
        return 0;
    }
    if (wt != want)
        return -EPROTO;
    cJSON *v;
    if (wt == WT_LEN) {
        const unsigned char *p;
        size_t n;
        if ((rc = get_len(r, &p, &n)) < 0)
            return rc;
        int err = -ENOMEM;
        if (!(v = len_json(f, p, n, depth, &err, &zero)))
            return err;
    } else {
        uint64_t u;
        if ((rc = read_scalar(r, wt, &u)) < 0)
            return rc;
        if (!(v = scalar_json(f, u, &zero)))
            return -ENOMEM;
    }
    if (zero && !keep_zero) {
        cJSON_Delete(v);
        cJSON_DeleteItemFromObjectCaseSensitive(obj, f->name); /* the last wins: zero, left out */
        return 0;
    }
    return add_value(obj, f, v);
}

static int skip_field(struct reader *r, int wt)
{
    uint64_t u;
    const unsigned char *p;
    size_t n;
    switch (wt) {
    case WT_VARINT: return get_varint(r, &u);
    case WT_I64:    return get_fixed(r, 8, &u);
    case WT_I32:    return get_fixed(r, 4, &u);
    case WT_LEN:    return get_len(r, &p, &n);
    default:        return -EPROTO; /* groups (3, 4) and 6, 7: none in etcd's messages */
    }
}

static int decode_message(const ProtobufCMessageDescriptor *d, struct reader *r, cJSON *obj, int depth)
{
    if (depth > DEPTH_MAX)
        return -EPROTO;
    while (r->p < r->end) {
        uint64_t key;
        int rc = get_varint(r, &key);
        if (rc < 0)
            return rc;
        uint64_t id = key >> 3;
        int wt = (int)(key & 7);
        if (id == 0 || id > 536870911u)
            return -EPROTO;
        const ProtobufCFieldDescriptor *f = protobuf_c_message_descriptor_get_field(d, (unsigned)id);
        if (f && (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF))
            oneof_clear(d, f, obj);
        rc = f ? decode_field(f, wt, r, obj, depth) : skip_field(r, wt);
        if (rc < 0)
            return rc;
    }
    return 0;
}

int vigil_etcd__pb_decode(const ProtobufCMessageDescriptor *d, const unsigned char *p, size_t n, char **json,
                          size_t *len)
{
    if (n > VIGIL_ETCD_BODY_MAX)
        return -EMSGSIZE;
    cJSON *obj = cJSON_CreateObject();
    if (!obj)
        return -ENOMEM;
    struct reader r = { p, p + n };
    int rc = decode_message(d, &r, obj, 0);
    char *s = rc == 0 ? cJSON_PrintUnformatted(obj) : NULL;
    cJSON_Delete(obj);
    if (rc < 0)
        return rc;
    if (!s)
        return -ENOMEM;
    size_t l = strlen(s);
    if (l > VIGIL_ETCD_BODY_MAX) {
        free(s);
        return -EMSGSIZE;
    }
    *json = s;
    *len = l;
    return 0;
}

/* ---- the frame, the status ----------------------------------------------- */

int vigil_etcd__grpc_unframe(const unsigned char *p, size_t n, const unsigned char **msg, size_t *mlen)
{
    if (n < 5 || p[0] != 0)
        return -EPROTO; /* no message, or a compressed one: we asked for none */
    uint32_t len = (uint32_t)p[1] << 24 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 8 | p[4];
    if (len > VIGIL_ETCD_BODY_MAX)
        return -EMSGSIZE;
    if ((size_t)len != n - 5)
        return -EPROTO; /* cut short, or a second message after the one a unary call gives */
    *msg = p + 5;
    *mlen = len;
    return 0;
}

long vigil_etcd__grpc_http_status(int code)
{
    /* grpc-gateway's HTTPStatusFromCode (runtime/errors.go, v1), which
     * etcd 3.4's gateway answers with: the classifier reads these. */
    static const long http[] = { 200, 408, 500, 400, 504, 404, 409, 403, 429, 412, 409, 400, 501, 500, 503, 500, 401 };
    return code >= 0 && (size_t)code < sizeof(http) / sizeof(http[0]) ? http[code] : 500;
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

size_t vigil_etcd__grpc_unpercent(char *s, size_t n)
{
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        int hi, lo;
        if (s[i] == '%' && i + 2 < n && (hi = hexval(s[i + 1])) >= 0 && (lo = hexval(s[i + 2])) >= 0) {
            s[o++] = (char)(hi << 4 | lo);
            i += 2;
        } else {
            s[o++] = s[i];
        }
    }
    s[o] = '\0';
    return o;
}
