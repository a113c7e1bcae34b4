/* SPDX-License-Identifier: MIT */
/*
 * The floor under vigil's figures on gRPC: one bare Put or Range as
 * vigil's gRPC transport sends it (a framed protobuf message, HTTP/2 with
 * libcurl on a kept connection, h2c with prior knowledge), beside
 * clientv3's on the same etcd: the cost of libcurl's HTTP/2 against
 * grpc-go's, apart from how many requests an operation makes. Not vigil's
 * code: a yardstick for it.
 */
#define _GNU_SOURCE
#include "peer.h"

#include <curl/curl.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static char url_put[1100], url_range[1100];
static CURL *h2;
static struct curl_slist *grpc_headers;
static struct buf answer;
static bool connected;

static size_t on_answer(char *data, size_t size, size_t n, void *arg)
{
    return buf_append(arg, data, size * n) == 0 ? size * n : 0;
}

void peer_grpc_init(const char *endpoint)
{
    snprintf(url_put, sizeof(url_put), "%s/etcdserverpb.KV/Put", endpoint);
    snprintf(url_range, sizeof(url_range), "%s/etcdserverpb.KV/Range", endpoint);
}

static int grpc_prep(const char *op, int arg)
{
    (void)arg;
    if (strcmp(op, "put") != 0 && strcmp(op, "range") != 0)
        return -EINVAL;
    struct curl_slist *h = curl_slist_append(NULL, "content-type: application/grpc");
    if (!h || !(grpc_headers = curl_slist_append(h, "te: trailers")) || !(h2 = curl_easy_init())) {
        curl_slist_free_all(h);
        return -ENOMEM;
    }
    curl_easy_setopt(h2, CURLOPT_HTTPHEADER, grpc_headers);
    curl_easy_setopt(h2, CURLOPT_WRITEFUNCTION, on_answer);
    curl_easy_setopt(h2, CURLOPT_WRITEDATA, &answer);
    curl_easy_setopt(h2, CURLOPT_TIMEOUT_MS, 10000L);
    curl_easy_setopt(h2, CURLOPT_NOPROXY, "*");
    connected = false;
    return 0;
}

static void grpc_drop(const char *op)
{
    (void)op;
    curl_easy_cleanup(h2);
    curl_slist_free_all(grpc_headers);
    h2 = NULL;
    grpc_headers = NULL;
}

static int grpc_run(const char *op, int count, struct samples *out)
{
    /* The frame (flag 0, length) and PutRequest{key "bench-peer/floor",
     * value "v"} / RangeRequest{key}, as protobuf writes them. */
    static const char put[] = "\0\0\0\0\025\n\020bench-peer/floor\022\001v";
    static const char range[] = "\0\0\0\0\022\n\020bench-peer/floor";
    bool is_put = !strcmp(op, "put");
    curl_easy_setopt(h2, CURLOPT_URL, is_put ? url_put : url_range);
    curl_easy_setopt(h2, CURLOPT_POSTFIELDS, is_put ? put : range);
    curl_easy_setopt(h2, CURLOPT_POSTFIELDSIZE, (long)(is_put ? sizeof(put) - 1 : sizeof(range) - 1));
    for (int i = 0; i < count; i++) {
        long version = 0;
        answer.n = 0;
        /* Prior knowledge for the first connection only, as vigil's
         * transport asks (libcurl 7.88 fails a reuse so asked for). */
        curl_easy_setopt(h2, CURLOPT_HTTP_VERSION,
                         (long)(connected ? CURL_HTTP_VERSION_2_0 : CURL_HTTP_VERSION_2_PRIOR_KNOWLEDGE));
        int64_t t0 = now_ns();
        CURLcode rc = curl_easy_perform(h2);
        int64_t ns = now_ns() - t0;
        if (rc != CURLE_OK || curl_easy_getinfo(h2, CURLINFO_HTTP_VERSION, &version) != CURLE_OK ||
            version != CURL_HTTP_VERSION_2_0 || answer.n < 5) {
            fprintf(stderr, "bench_peer: grpc: %s: %s (HTTP version %ld, %zu bytes)\n", op, curl_easy_strerror(rc),
                    version, answer.n);
            return -1;
        }
        connected = true;
        if (samples_add(out, ns) < 0)
            return -ENOMEM;
    }
    return 0;
}

static double grpc_cpu(void)
{
    return peer_proc_cpu_s(getpid());
}

const struct side peer_grpc = {
    .name = "grpc",
    .prep = grpc_prep,
    .run = grpc_run,
    .drop = grpc_drop,
    .cpu_s = grpc_cpu,
};
