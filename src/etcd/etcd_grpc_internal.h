/* SPDX-License-Identifier: MIT */
/*
 * etcd's gRPC API, spoken under the adapter's JSON (etcd_grpc.c): the
 * mapping between the gateway's JSON and etcd's protobuf messages, the
 * gRPC frame, and the table of the calls vigil makes. Internal; exported
 * for the tests and the fuzz harness.
 */
#ifndef VIGIL_SRC_ETCD_GRPC_INTERNAL_H
#define VIGIL_SRC_ETCD_GRPC_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "etcd_internal.h"

struct ProtobufCMessageDescriptor;

/* One call: the gateway's path ("v3/kv/txn"), gRPC's ("/etcdserverpb.KV/Txn"),
 * and the messages it takes and gives. */
struct vigil_etcd_grpc_method {
    const char                              *gateway, *grpc;
    const struct ProtobufCMessageDescriptor *request, *reply;
    bool                                     stream; /* a stream's reply: under "result", as the gateway's */
};

/* The call behind a gateway path, or NULL (not one vigil speaks in gRPC). */
const struct vigil_etcd_grpc_method *vigil_etcd__grpc_method(const char *path);

/* JSON as grpc-gateway reads it (OrigName field names; 64-bit integers as
 * strings or numbers; bytes in base64; enums by name or number) encoded
 * as message d, into a fresh buffer (*out, *len; free() it) after `room`
 * bytes left for the caller's frame header: 0, -EINVAL (a field d lacks,
 * a value of the wrong kind), -ENOMEM. */
int vigil_etcd__pb_encode(const struct ProtobufCMessageDescriptor *d, const char *json, size_t room,
                          unsigned char **out, size_t *len);

/* Message d (n bytes of protobuf) as grpc-gateway writes it (OrigName;
 * 64-bit integers as strings; bytes base64; enums by name; zero values
 * left out, but a oneof's): *json, NUL-terminated, *len bytes (free()
 * it). Fields d does not know are skipped, as protobuf's readers do.
 * -EPROTO for what is not such a message (a length past the end, a wire
 * type the field cannot have, nesting past 32), -EMSGSIZE for JSON past
 * VIGIL_ETCD_BODY_MAX, -ENOMEM. */
int vigil_etcd__pb_decode(const struct ProtobufCMessageDescriptor *d, const unsigned char *p, size_t n,
                          char **json, size_t *len);

/* The one message of a unary reply's body (gRPC's length-prefixed frame:
 * flag 0, a 4-byte big-endian length, the message): 0 with *msg, *mlen;
 * -EPROTO for none, a compressed one, a short or a second frame;
 * -EMSGSIZE for one past VIGIL_ETCD_BODY_MAX. */
int vigil_etcd__grpc_unframe(const unsigned char *p, size_t n, const unsigned char **msg, size_t *mlen);

/* The HTTP status grpc-gateway answers a gRPC status code with. */
long vigil_etcd__grpc_http_status(int code);

/* grpc-message's percent-encoding undone, in place (n bytes; NUL-terminated
 * after): the length. */
size_t vigil_etcd__grpc_unpercent(char *s, size_t n);

/* ---- the transport (etcd_grpc.c) ---- */

/* VIGIL_ETCD_TRANSPORT's value (NULL or "" is auto): 0 with *mode
 * (VIGIL_ETCD_TRANSPORT_*), -EINVAL for another word. */
int vigil_etcd__transport_mode(const char *env, int *mode);
/* Whether a request to endpoint ep goes in gRPC (when its path has a call). */
bool vigil_etcd__grpc_on(const vigil_etcd *e, unsigned ep);

/* vigil_etcd__grpc_perform's answers beside 0 (answered: the reply, as
 * the gateway's, in e->reply and *http) and -errno. */
#define VIGIL_ETCD_NOT_GRPC     1 /* the server showed it does not speak gRPC (endpoint not yet known to) */
#define VIGIL_ETCD_CURL_FAILED  2 /* the transfer failed: *curl_code for the caller to read */

/* Request body (the gateway's JSON) to url (the endpoint and m->grpc) in
 * gRPC on e's gRPC connection, its timeouts already set (timeout_ms, the
 * attempt's: it bounds a first contact's probe too). -EPROTO for a
 * reply that is not gRPC from an endpoint that spoke it, or one that
 * does not decode; -EINVAL for a body that is not m's request. */
int vigil_etcd__grpc_perform(vigil_etcd *e, unsigned ep, const struct vigil_etcd_grpc_method *m, const char *url,
                             const char *body, long timeout_ms, long *http, int *curl_code);

/* e's gRPC connection made (at connect, after the options: it reads the
 * environment), its headers made again (a new token), closed. */
int  vigil_etcd__grpc_open(vigil_etcd *e);
int  vigil_etcd__grpc_headers_reset(vigil_etcd *e);
void vigil_etcd__grpc_close(vigil_etcd *e);
void *vigil_etcd__grpc_headers(vigil_etcd *e);

/* How many replies came in gRPC on e (the tests' proof of the transport). */
unsigned long vigil_etcd__grpc_answered(vigil_etcd *e);

#endif
