/* SPDX-License-Identifier: MIT */
/*
 * The transport of the etcd adapter (src/etcd/transport/): what it offers
 * the layers above it, the recipes (src/etcd/recipes/) and the groups
 * (src/group/). The handle, its endpoints, TLS, auth and namespace
 * (etcd_handle.c), the connection, the request loop with its retries and
 * the setup of a stream's connection (etcd_http.c), whether etcd answers
 * (etcd_health.c), the request bodies and the reading of replies
 * (etcd_json.c). The base64 encoder, the endpoint list parser and the
 * reply interpreters (pure functions from an HTTP status and a body to a
 * vigil result, so a hostile server's replies can be tested without one)
 * are exported for the tests and the benchmark. The transport includes
 * and calls nothing of the layers above (tests/layers.sh checks). Not part
 * of the public API; the names may change.
 */
#ifndef VIGIL_SRC_ETCD_TRANSPORT_INTERNAL_H
#define VIGIL_SRC_ETCD_TRANSPORT_INTERNAL_H

#include <vigil/etcd.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define VIGIL_ETCD_MAX_ENDPOINTS 16
#define VIGIL_ETCD_URL_MAX       256
#define VIGIL_ETCD_BODY_MAX      (1u << 20) /* a reply longer than 1 MiB is refused: -EMSGSIZE */
#define VIGIL_ETCD_MAX_TTL_S     9000000000LL /* etcd's MaxLeaseTTL */
#define VIGIL_ETCD_NS_MAX        256          /* a namespace, with its NUL */
#define VIGIL_ETCD_KEY_MAX       (VIGIL_ETCD_NS_MAX + 128) /* namespace and key, with the NUL */
#define VIGIL_ETCD_TOKEN_MAX     2048         /* an auth token (simple or JWT), with its NUL */
#define VIGIL_ETCD_REQ_MAX       8192         /* a request body */
/* Base64 of an own key (namespace, key, "/", 16 hex digits), with its NUL. */
#define VIGIL_ETCD_KEY_B64       ((VIGIL_ETCD_KEY_MAX + 17 + 2) / 3 * 4 + 1)

/* Standard base64 (RFC 4648, with padding) of n bytes into out (cap bytes,
 * NUL-terminated). Returns the length written, VIGIL_ERANGE if cap is short. */
int vigil_etcd__b64(const void *in, size_t n, char *out, size_t cap);

/* "http://a:2379, b:2379 ,https://c:2379/" -> base URLs without a trailing
 * slash; a bare host:port gets http://. Empty entries are skipped. -EINVAL
 * for no endpoint, a scheme other than http/https, a missing host, or a
 * space or control character inside one; VIGIL_ERANGE for more than max
 * endpoints or a URL past VIGIL_ETCD_URL_MAX - 1 bytes. */
int vigil_etcd__parse_endpoints(const char *spec, char (*urls)[VIGIL_ETCD_URL_MAX],
                                unsigned max, unsigned *n);
/* The same, a bare host:port getting https:// when tls. */
int vigil_etcd__parse_endpoints_as(const char *spec, bool tls, char (*urls)[VIGIL_ETCD_URL_MAX],
                                   unsigned max, unsigned *n);

/* The gRPC status code of an error reply, mapped to a vigil result:
 * 5 NotFound on a lease is VIGIL_ELOST (the caller decides, lease says so),
 * 11 OutOfRange VIGIL_ERANGE, the rest -errno (14 Unavailable -EAGAIN,
 * 4 DeadlineExceeded -ETIMEDOUT, 3 InvalidArgument -EINVAL, ...). */
int vigil_etcd__grpc_error(int code, bool lease_op);

/*
 * Reply interpreters. Each takes the HTTP status and the body (not
 * necessarily NUL-terminated) and returns 0 with its outputs written, or a
 * vigil result: an error reply mapped by vigil_etcd__grpc_error, -EPROTO
 * for a body that is not JSON or lacks a field the reply must have.
 */
/* lease/grant: ID (non-zero) and TTL (> 0, seconds). */
int vigil_etcd__parse_grant(long http, const char *body, size_t len, int64_t *id, int64_t *ttl);
/* lease/keepalive: 0 with the new TTL (seconds) when TTL > 0; VIGIL_ELOST
 * when TTL is 0 or missing (etcd's answer for an expired or revoked lease)
 * or the error is "lease not found". */
int vigil_etcd__parse_keepalive(long http, const char *body, size_t len, int64_t lease_id, int64_t *ttl);
/* What a reply's header says of the store that answered: its revision
 * and its cluster's ID, each 0 when the header has none. */
struct vigil_etcd_hdr {
    int64_t  rev;
    uint64_t cluster;
};
/* A reply's header object read: 0, or -EPROTO. */
struct cJSON;
int vigil_etcd__header_of(const struct cJSON *header, struct vigil_etcd_hdr *out);
/* kv/txn: whether the comparisons held; _at also the header. */
int vigil_etcd__parse_txn(long http, const char *body, size_t len, bool *succeeded);
int vigil_etcd__parse_txn_at(long http, const char *body, size_t len, bool *succeeded, struct vigil_etcd_hdr *at);
/* The handle's cluster: the ID the first reply that names one carries
 * (a reply's body; any reply, called on every answer). */
void vigil_etcd__note_cluster(vigil_etcd *e, const char *body, size_t len);
/* The store is not the one the token came from: a linearizable reply (a
 * txn, a write; never a keepalive or a watch, which a lagging member
 * answers from its own older revision) from another cluster than the
 * handle's, or at a header revision below a token the caller holds (the
 * store went backwards). VIGIL_ELOST with vigil_etcd_errmsg saying which,
 * else 0. On the parsed header, whatever the transport. */
int vigil_etcd__store_behind(vigil_etcd *e, const struct vigil_etcd_hdr *at, uint64_t token);
/* lease/revoke: 0, or VIGIL_ELOST when the lease was already gone. */
int vigil_etcd__parse_revoke(long http, const char *body, size_t len);

/* Standard base64 decoding (padding optional, no white space) of in into
 * out (cap bytes; not NUL-terminated): the length, or -EPROTO for bytes
 * that are not base64, VIGIL_ERANGE when cap is short. */
int vigil_etcd__unb64(const char *in, size_t n, void *out, size_t cap);

/* Our own key under KEY/, as etcd's concurrency package names a session's:
 * KEY "/" the lease ID in lowercase hex. 0, or VIGIL_ERANGE. */
int vigil_etcd__own_key(const char *key, int64_t lease_id, char *out, size_t cap);


/* One request through e's connection and endpoint list: POST of body (GET
 * when body is NULL) to base URL + path, where a path starting with "v3/"
 * gets the gateway prefix the server answers to. On 0, *http is the status
 * and *reply (NUL-terminated, *len bytes, a copy in the calling thread's
 * buffer) stays valid until this thread's next request. Takes e's lock. */
int vigil_etcd__request(vigil_etcd *e, const char *path, const char *body,
                        long *http, const char **reply, size_t *len);

/* The endpoint the next request goes to first (the last one that answered). */
const char *vigil_etcd__current_endpoint(vigil_etcd *e);

/* ==== What the transport's files share beyond the above, and lend the
 * layers above: etcd_http.c, the endpoints, the connection and the request
 * loop; etcd_json.c, the request bodies and the reading of replies. */
static inline bool vigil_etcd__is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

/* ---- the connection (etcd_http.c) ---------------------------------------- */

struct curl_slist;
struct vigil_etcd_reply;

struct vigil_etcd_reply_buf {
    char  *p;
    size_t len, cap;
    int    err; /* why the write callback refused: -EMSGSIZE or -ENOMEM */
};

/* libcurl's write callback into a reply buffer (arg), up to VIGIL_ETCD_BODY_MAX. */
size_t vigil_etcd__on_write(char *data, size_t size, size_t nmemb, void *arg);

/* What the reply of a gRPC call said in its headers and trailers. */
struct vigil_etcd_grpc_state {
    int  status;      /* grpc-status; -1 none yet */
    bool have_status;
    bool is_grpc;     /* content-type application/grpc */
    char message[512]; /* grpc-message, percent-decoded */
    int  alpn;        /* VIGIL_ETCD_ALPN_*: what a TLS handshake settled on */
};
enum { VIGIL_ETCD_ALPN_UNSAID = 0, VIGIL_ETCD_ALPN_H2 = 1, VIGIL_ETCD_ALPN_OTHER = 2 };

enum { VIGIL_ETCD_TRANSPORT_AUTO = 0, VIGIL_ETCD_TRANSPORT_GRPC = 1, VIGIL_ETCD_TRANSPORT_GATEWAY = 2 };
enum { VIGIL_ETCD_SPEAKS_UNKNOWN = 0, VIGIL_ETCD_SPEAKS_GRPC = 1, VIGIL_ETCD_SPEAKS_GATEWAY = 2 };

/* The handle: etcd_handle.c makes it (options, auth, namespace),
 * etcd_http.c sends its requests. Other files use the functions below. */
struct vigil_etcd {
    pthread_mutex_t             lock; /* held for the whole of each call: one request at a time */
    void                       *curl; /* CURL * */
    struct curl_slist          *headers; /* JSON, require-leader, and the auth token once there is one */
    struct vigil_etcd_reply_buf reply;
    unsigned                    n, cur; /* endpoints, and the one to try first */
    long                        connect_ms, total_ms; /* per attempt on one endpoint */
    /* The bounds of the lock's holder (vigil_etcd__lock_until): no
     * request past deadline_ns, no attempt longer than attempt_ms. */
    uint64_t                    deadline_ns;
    long                        attempt_ms;
    unsigned                    prefix[VIGIL_ETCD_MAX_ENDPOINTS];
    char                        urls[VIGIL_ETCD_MAX_ENDPOINTS][VIGIL_ETCD_URL_MAX];
    /* The connection options, copied: the TLS files for every connection
     * (the watch streams' too), the user and password, the namespace. */
    char                       *cacert, *cert, *key, *user, *password;
    size_t                      nslen;
    char                        ns[VIGIL_ETCD_NS_MAX];
    char                        token[VIGIL_ETCD_TOKEN_MAX]; /* etcd's auth token; "" none yet */
    bool                        auth_off; /* the server said auth is not enabled */
    /* An attempt of the last call failed after it may have reached a
     * server (timed out, reset): its effect may have been applied. */
    bool                        maybe_applied;
    int64_t                     revoke_unsure; /* a lease whose revoke failed that way, or 0 */
    _Atomic uint64_t            cluster; /* the cluster's ID, from the first reply naming one; 0 none yet */
    char                        curl_err[256]; /* libcurl's own words for the last failure */
    struct vigil_etcd_health_state *health; /* etcd_health.c: whether etcd answers */
    /* The gRPC transport (etcd_grpc.c): VIGIL_ETCD_TRANSPORT_* from the
     * environment at connect, what each endpoint showed it speaks
     * (VIGIL_ETCD_SPEAKS_*), and the connection gRPC calls take. */
    int                         mode;
    unsigned char               speaks[VIGIL_ETCD_MAX_ENDPOINTS];
    void                       *gcurl; /* CURL *, NULL when mode is the gateway */
    struct curl_slist          *gheaders; /* application/grpc, te, hasleader, token */
    struct vigil_etcd_reply_buf greply; /* the framed reply, before it is JSON in reply */
    struct vigil_etcd_grpc_state grpc;
    unsigned long               grpc_answers; /* replies that came in gRPC (for the tests) */
    unsigned                    gconn; /* 1 + the endpoint gcurl's last call left an HTTP/2 connection to; 0 none */
    /* The attempt failed before any of its request was sent (a first
     * contact's probe): it cannot have applied. The OS's errno of it. */
    bool                        unsent;
    long                        unsent_os;
};

/* The handle's curl connection, made and closed (etcd_http.c). */
int  vigil_etcd__curl_open(vigil_etcd *e);
void vigil_etcd__curl_close(vigil_etcd *e);
/* A fresh list of e's request headers (a struct curl_slist *, the
 * caller's), or NULL; and the handle's own list rebuilt (after a change
 * of token): 0 or -ENOMEM. */
void *vigil_etcd__headers_make(vigil_etcd *e);
/* The list of fixed[0..n) and, once e has a token, "token_name: token". */
void *vigil_etcd__headers_of(vigil_etcd *e, const char *const *fixed, size_t n, const char *token_name);
int   vigil_etcd__headers_reset(vigil_etcd *e);

/* A libcurl failure (a CURLcode, the OS errno it saw, the write
 * callback's refusal, libcurl's error text) as a vigil result: a
 * transport failure is a transient -errno; the server's certificate
 * failing verification VIGIL_ETLS; our client certificate refused
 * -EACCES; a TLS file that cannot be used -EINVAL; another TLS failure
 * -EPROTO. The reason goes to vigil_etcd_errmsg. */
int vigil_etcd__curl_error(int code, long os, int write_err, const char *detail);

/* Sets this thread's vigil_etcd_errmsg; and keeps it (256 bytes) across
 * the cleanup requests after a failure, which would overwrite it. */
void vigil_etcd__why(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void vigil_etcd__why_save(char *saved, size_t cap);
void vigil_etcd__why_restore(const char *saved);

/* e's lock, with bounds on every request made while it is held: none
 * sent past deadline_ns (CLOCK_MONOTONIC; the call then fails with
 * VIGIL_ETIMEDOUT, as does one the deadline cut short), and no attempt on
 * one endpoint longer than attempt_ms (0: the handle's own limit).
 * vigil_etcd__unlock lifts them. */
void vigil_etcd__lock_until(vigil_etcd *e, uint64_t deadline_ns, uint32_t attempt_ms);
/* The same bounds changed while the lock is held. */
void vigil_etcd__bound(vigil_etcd *e, uint64_t deadline_ns, uint32_t attempt_ms);

/* vigil_etcd__call without authentication (the authenticate itself). */
int vigil_etcd__call_raw(vigil_etcd *e, const char *path, const char *body, struct vigil_etcd_reply *r);

/* A watch stream's curl handle (a CURL *, of a multi handle of its own)
 * set up for path ("v3/watch") on endpoint ep (-1: the current one) with
 * e's options and headers, its request body (the gateway's JSON) and its
 * reply read by write, as libcurl's write callback, in the gateway's
 * lines whichever transport carries it (etcd_grpc_stream.c): 0, *out
 * (to free after the transfer) and *used (the endpoint's index), or an
 * error. */
typedef size_t vigil_etcd_stream_write_fn(char *data, size_t size, size_t nmemb, void *arg);
struct vigil_etcd_stream;
struct vigil_etcd_grpc_method;
int  vigil_etcd__stream_setup(vigil_etcd *e, int ep, const char *path, const char *body, void *curl,
                              vigil_etcd_stream_write_fn *write, void *arg, struct vigil_etcd_stream **out,
                              unsigned *used);
void vigil_etcd__stream_free(struct vigil_etcd_stream *s);
/* Why the stream's converter ended the transfer (a malformed frame,
 * -EPROTO or -EMSGSIZE; -ENOMEM), or 0. */
int  vigil_etcd__stream_error(const struct vigil_etcd_stream *s);
/* Whether the stream speaks gRPC (else the gateway). */
bool vigil_etcd__stream_grpc(const struct vigil_etcd_stream *s);
/* The converter alone (the tests'), m NULL for the gateway: m's framed
 * replies fed by vigil_etcd__stream_feed (the write callback) to write
 * as the gateway's lines, the reply's headers and trailers by
 * vigil_etcd__stream_header (the header callback): a body is taken only
 * after a content type of application/grpc. */
struct vigil_etcd_stream *vigil_etcd__stream_new(const struct vigil_etcd_grpc_method *m,
                                                 vigil_etcd_stream_write_fn *write, void *arg);
size_t vigil_etcd__stream_feed(char *data, size_t size, size_t nmemb, void *arg);
size_t vigil_etcd__stream_header(char *line, size_t size, size_t nmemb, void *arg);
/* At the transfer's end, once all trailers are in: a non-zero grpc-status
 * written as the gateway's error line (its grpc-message with it), or
 * -EPROTO for a stream cut inside a message; what it failed with, or 0. */
int    vigil_etcd__stream_end(struct vigil_etcd_stream *s);
/* The gateway's URL of path on endpoint ep, with e's lock held: snprintf's count. */
int vigil_etcd__gateway_url(const vigil_etcd *e, unsigned ep, const char *path, char *url, size_t cap);

/* How many endpoints e has, and (cur) the one the next request goes to first. */
unsigned vigil_etcd__endpoints(vigil_etcd *e, unsigned *cur);

/* ---- auth and namespace (etcd_handle.c) ----------------------------------- */

/* With e's lock held: authenticate (again) and set the token. 0 (also
 * when etcd has no auth enabled), -EACCES for a wrong name or password,
 * or a transport error. */
int  vigil_etcd__authenticate(vigil_etcd *e);
/* With e's lock held: authenticate first if e has a user and no token. */
int  vigil_etcd__auth_ready(vigil_etcd *e);
/* Does reply r refuse e's token (to be authenticated again)? */
bool vigil_etcd__auth_refused(vigil_etcd *e, const struct vigil_etcd_reply *r);
/* namespace + key into out (cap bytes): 0, or VIGIL_ERANGE. */
int  vigil_etcd__full_key(const vigil_etcd *e, const char *key, char *out, size_t cap);
/* The namespace (NUL-terminated) and its length. */
size_t vigil_etcd__ns(const vigil_etcd *e, const char **ns);

/* A reply: the HTTP status and the body, valid until the next request on
 * the handle. */
struct vigil_etcd_reply {
    long        http;
    const char *body;
    size_t      len;
};

/* e's mutex, held for the whole of a lease operation: one request at a
 * time on the connection. */
void vigil_etcd__lock(vigil_etcd *e);
void vigil_etcd__unlock(vigil_etcd *e);

/* vigil_etcd__request with e's lock already held. */
int vigil_etcd__call(vigil_etcd *e, const char *path, const char *body, struct vigil_etcd_reply *r);

/* ---- the JSON (etcd_json.c) ---------------------------------------------- */

/* Whether a reply is this endpoint's answer (VIGIL_ETCD_ANSWERED), says
 * there is no gateway under this prefix (VIGIL_ETCD_NO_GATEWAY), or says
 * the endpoint cannot serve now (< 0: try the next one). */
enum { VIGIL_ETCD_ANSWERED = 0, VIGIL_ETCD_NO_GATEWAY = 1 };
int vigil_etcd__classify(long http, const char *body, size_t len);

/* Request bodies, into buf (cap bytes): 0, or VIGIL_ERANGE when it does
 * not fit. Keys and owners are given as C strings and sent in base64. */
int vigil_etcd__body_ttl(char *buf, size_t cap, uint64_t ttl_s);
int vigil_etcd__body_id(char *buf, size_t cap, int64_t id);
int vigil_etcd__body_held(char *buf, size_t cap, const vigil_lease *l);
/* The txn "our key KEY/<id hex> still has create revision token and lease
 * id", then (when it holds) nothing, our key's deletion, or a put of
 * value on it under our lease. key is the full key (namespace included). */
enum { VIGIL_ETCD_IF_HELD_NOTHING = 0, VIGIL_ETCD_IF_HELD_DELETE = 1, VIGIL_ETCD_IF_HELD_PUT = 2 };
int vigil_etcd__body_if_held(char *buf, size_t cap, const char *key, uint64_t token, int64_t id, int then,
                             const char *value);

/* The gRPC code of an error reply (>= 0, its message into msg, cap
 * bytes), or -1 when body is not one. */
int vigil_etcd__error_of(const char *body, size_t len, char *msg, size_t cap);
/* Does an error (code, message) say etcd no longer takes the token? */
bool vigil_etcd__token_error(int code, const char *msg);
/* auth/authenticate: the body for user and password (malloc'd, or NULL),
 * and the reply: 0 and the token, -EACCES refused, VIGIL_EVACANT auth
 * not enabled, or another error. */
char *vigil_etcd__body_auth(const char *user, const char *password);
int   vigil_etcd__parse_auth(long http, const char *body, size_t len, char *token, size_t cap);

/* Reading replies: etcd_json.c's, lent to the layers above (cJSON stays out of the header). */
struct cJSON;
const struct cJSON *vigil_etcd__field(const struct cJSON *obj, const char *name);
/* 1 found, 0 absent (proto3 omits zero), -EPROTO malformed. */
int vigil_etcd__json_i64(const struct cJSON *obj, const char *name, int64_t *out);
/* 0 and *root for a 2xx reply that is not an error, else its result. */
int vigil_etcd__reply_open(long http, const char *body, size_t len, bool lease_op, struct cJSON **root);
int vigil_etcd__txn_succeeded(const struct cJSON *r, bool *out);
/* The body as one JSON value and nothing after it but white space. */
struct cJSON *vigil_etcd__parse_whole(const char *body, size_t len);

/* ---- a stream's connection, for the streams above (etcd_http.c) ------ */

/* The options every curl handle of the adapter has (a CURL *): no signals,
 * no proxy, no redirects, http(s) only, sockets close-on-exec. */
void vigil_etcd__curl_setup(void *curl, long connect_ms);

/* The TLS files of e's options (CA bundle, client certificate and key) on
 * a curl handle. */
void vigil_etcd__curl_tls(vigil_etcd *e, void *curl);


/* ---- whether etcd answers (etcd_health.c) ------------------------------- */

/* Made with the handle and freed with it: 0 or -ENOMEM. */
int  vigil_etcd__health_open(vigil_etcd *e);
void vigil_etcd__health_close(vigil_etcd *e);
/* A request of e's was answered by an endpoint; or no endpoint answered
 * it (rc, the last endpoint tried, and this thread's errmsg saying why). */
void vigil_etcd__health_answered(vigil_etcd *e);
/* A request no endpoint answered, sent (CLOCK_REALTIME) at sent_ns. */
void vigil_etcd__health_failed(vigil_etcd *e, int rc, const char *url, int64_t sent_ns);
/* url without its userinfo (scheme://user:password@host: a secret): url
 * itself when it has none, else buf. */
const char *vigil_etcd__redact(const char *url, char *buf, size_t cap);
/* The errmsg of a wait that ends (VIGIL_ETIMEDOUT) after meeting
 * failures: the last one met since start (CLOCK_REALTIME ns), if any. */
void vigil_etcd__why_wait(vigil_etcd *e, int64_t start);
/* CLOCK_REALTIME in ns, as the record keeps time. */
int64_t vigil_etcd__wall_ns(void);

/* ==== etcd's gRPC API under the adapter's JSON (etcd_grpc.c,
 * etcd_grpc_json.c): the mapping between the gateway's JSON and etcd's
 * protobuf messages, the gRPC frame, the calls vigil makes, the transport. */
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
#define VIGIL_ETCD_NOT_GRPC     1 /* before the send, the server showed it speaks no HTTP/2 (preface, ALPN) */
#define VIGIL_ETCD_CURL_FAILED  2 /* the transfer failed: *curl_code for the caller to read */

/* Request body (the gateway's JSON) to url (the endpoint and m->grpc) in
 * gRPC on e's gRPC connection, within timeout_ms (the attempt's: a first
 * contact's probe and the request together). -EPROTO for a reply that is
 * not gRPC, or one that does not decode; -EINVAL for a body that is not
 * m's request, -EMSGSIZE for one too large (e->unsent: never sent). */
int vigil_etcd__grpc_perform(vigil_etcd *e, unsigned ep, const struct vigil_etcd_grpc_method *m, const char *url,
                             const char *body, long timeout_ms, long *http, int *curl_code);

/* A reply's header or trailer line (libcurl's header callback, arg a
 * struct vigil_etcd_grpc_state *): content type, grpc-status, grpc-message. */
size_t vigil_etcd__grpc_on_header(char *line, size_t size, size_t nmemb, void *arg);
/* The 5-byte frame header in front of a message of mlen bytes. */
void vigil_etcd__grpc_frame_header(unsigned char *frame, size_t mlen);

/* e's gRPC connection made (at connect, after the options: it reads the
 * environment), its headers made again (a new token), closed. */
int  vigil_etcd__grpc_open(vigil_etcd *e);
int  vigil_etcd__grpc_headers_reset(vigil_etcd *e);
void vigil_etcd__grpc_close(vigil_etcd *e);
void *vigil_etcd__grpc_headers(vigil_etcd *e);

/* How many replies came in gRPC on e (the tests' proof of the transport). */
unsigned long vigil_etcd__grpc_answered(vigil_etcd *e);

#endif
