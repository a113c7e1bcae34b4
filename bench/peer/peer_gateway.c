/* SPDX-License-Identifier: MIT */
/*
 * The floor under vigil's figures today: one bare request on etcd's JSON
 * gateway (HTTP/1.1, JSON, base64 keys), as the adapter sends its own,
 * with libcurl on a kept connection. Beside clientv3's bare Put and Get on
 * gRPC it is the transport's own cost, apart from how many requests an
 * operation makes. Not vigil's code: a yardstick for it.
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
static CURL *curl;
static struct curl_slist *json;
static struct buf reply;

static size_t on_data(char *data, size_t size, size_t n, void *arg)
{
    return buf_append(arg, data, size * n) == 0 ? size * n : 0;
}

void peer_gateway_init(const char *endpoint)
{
    snprintf(url_put, sizeof(url_put), "%s/v3/kv/put", endpoint);
    snprintf(url_range, sizeof(url_range), "%s/v3/kv/range", endpoint);
}

static int gw_prep(const char *op, int arg)
{
    (void)arg;
    if (strcmp(op, "put") != 0 && strcmp(op, "range") != 0)
        return -EINVAL;
    if (!(curl = curl_easy_init()) || !(json = curl_slist_append(NULL, "Content-Type: application/json")))
        return -ENOMEM;
    curl_easy_setopt(curl, CURLOPT_HTTPHEADER, json);
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(curl, CURLOPT_WRITEDATA, &reply);
    curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, 10000L);
    curl_easy_setopt(curl, CURLOPT_NOPROXY, "*");
    return 0;
}

static void gw_drop(const char *op)
{
    (void)op;
    curl_easy_cleanup(curl);
    curl_slist_free_all(json);
    curl = NULL;
    json = NULL;
}

static int gw_run(const char *op, int count, struct samples *out)
{
    /* "bench-peer/floor" and "v" in base64, as the gateway takes them */
    static const char put[] = "{\"key\":\"YmVuY2gtcGVlci9mbG9vcg==\",\"value\":\"dg==\"}";
    static const char range[] = "{\"key\":\"YmVuY2gtcGVlci9mbG9vcg==\"}";
    bool is_put = !strcmp(op, "put");
    curl_easy_setopt(curl, CURLOPT_URL, is_put ? url_put : url_range);
    curl_easy_setopt(curl, CURLOPT_POSTFIELDS, is_put ? put : range);
    for (int i = 0; i < count; i++) {
        long code = 0;
        reply.n = 0;
        int64_t t0 = now_ns();
        CURLcode rc = curl_easy_perform(curl);
        int64_t ns = now_ns() - t0;
        if (rc != CURLE_OK || curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &code) != CURLE_OK || code != 200) {
            fprintf(stderr, "bench_peer: gateway: %s: %s (HTTP %ld)\n", op, curl_easy_strerror(rc), code);
            return -1;
        }
        if (samples_add(out, ns) < 0)
            return -ENOMEM;
    }
    return 0;
}

static double gw_cpu(void)
{
    return peer_proc_cpu_s(getpid());
}

const struct side peer_gateway = {
    .name = "gateway",
    .prep = gw_prep,
    .run = gw_run,
    .drop = gw_drop,
    .cpu_s = gw_cpu,
};
