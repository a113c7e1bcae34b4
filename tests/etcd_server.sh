#!/bin/sh
# A throwaway etcd for the etcd tests and the benchmark, on 127.0.0.1.
#
#   etcd_server.sh start  STATE   free port pair, fresh data dir in STATE, wait
#                                 until it serves; writes STATE/endpoints
#                                 (client URL) and STATE/pid. Without etcd it
#                                 writes STATE/skip (the reason) and exits 0,
#                                 and the tests report a skip.
#   etcd_server.sh stop   STATE   kill it, remove its data dir
#   etcd_server.sh pause  STATE [TERM|KILL]   stop it, keep port and data
#   etcd_server.sh resume STATE   start it again on the same port and data
#   etcd_server.sh freeze STATE   SIGSTOP, every thread stopped: it accepts but never answers
#   etcd_server.sh wipe   STATE   kill it, remove its data, start it again with the
#                                 same name, URLs and cluster token (so the same
#                                 cluster ID): a store whose revisions restart
#   etcd_server.sh thaw   STATE   SIGCONT
#
# The server is tuned for tests: election timeout 500 ms, so its minimum
# lease TTL is 1 s (2 s with etcd's defaults). Every wait is bounded.
# ETCD may name another etcd binary.
set -u

cmd=${1:-}
state=${2:-}
ETCD=${ETCD:-etcd}
READY_TIMEOUT=${READY_TIMEOUT:-30} # seconds, for a slow machine

die() {
    echo "etcd_server.sh: $*" >&2
    exit 1
}
[ -n "$cmd" ] && [ -n "$state" ] ||
    die "usage: etcd_server.sh start|stop|pause|resume|freeze|thaw|wipe STATE_DIR"

. "$(dirname "$0")/etcd_lib.sh"

running() { etcd_alive "$state/pid"; }

launch() {
    port=$(cat "$state/port")
    peer=$(cat "$state/peer")
    url="http://127.0.0.1:$port"
    "$ETCD" --name vigil-test --data-dir "$state/data" \
        --listen-client-urls "$url" --advertise-client-urls "$url" \
        --listen-peer-urls "http://127.0.0.1:$peer" \
        --initial-advertise-peer-urls "http://127.0.0.1:$peer" \
        --initial-cluster "vigil-test=http://127.0.0.1:$peer" \
        --initial-cluster-state new \
        --election-timeout 500 --heartbeat-interval 50 \
        --logger zap --log-outputs stderr --log-level warn \
        </dev/null >>"$state/etcd.log" 2>&1 &
    echo $! >"$state/pid"
}

# Waits (bounded) until the server answers /health with true. 0 ready,
# 1 it died (2 if of a port already taken), 3 timed out.
wait_ready() {
    url="http://127.0.0.1:$(cat "$state/port")"
    pid=$(cat "$state/pid")
    i=0
    while [ $i -lt $((READY_TIMEOUT * 10)) ]; do
        i=$((i + 1))
        if ! kill -0 "$pid" 2>/dev/null; then
            grep -q "address already in use" "$state/etcd.log" 2>/dev/null && return 2
            return 1
        fi
        if command -v curl >/dev/null 2>&1; then
            curl -s -m 1 "$url/health" 2>/dev/null | grep -q '"health":"true"' && return 0
        else
            etcdctl --endpoints="$url" --command-timeout=1s endpoint health >/dev/null 2>&1 && return 0
        fi
        sleep 0.1
    done
    return 3
}

# Stops the server with a signal, bounded: TERM gets 10 s, then KILL.
halt() { etcd_halt "$state/pid" "${1:-TERM}"; }

case "$cmd" in
start)
    mkdir -p "$state" || die "cannot make $state"
    halt KILL # a server left by an aborted run
    rm -rf "$state/data" "$state/skip" "$state/endpoints" "$state/etcd.log"
    if ! command -v "$ETCD" >/dev/null 2>&1; then
        echo "etcd not installed (Debian: apt-get install etcd-server)" >"$state/skip"
        echo "etcd_server.sh: $(cat "$state/skip"); etcd tests will skip" >&2
        exit 0
    fi
    attempt=0
    while [ $attempt -lt 5 ]; do
        attempt=$((attempt + 1))
        port=$(free_port) || die "no free port"
        peer=$(free_port "$port") || die "no free port"
        echo "$port" >"$state/port"
        echo "$peer" >"$state/peer"
        rm -rf "$state/data"
        launch
        wait_ready
        rc=$?
        if [ $rc -eq 0 ]; then
            echo "http://127.0.0.1:$port" >"$state/endpoints"
            exit 0
        fi
        halt KILL
        [ $rc -eq 2 ] || break # only a port race is worth another pair
    done
    tail -n 20 "$state/etcd.log" >&2 2>/dev/null
    die "etcd did not start (see $state/etcd.log)"
    ;;
stop)
    [ -d "$state" ] || exit 0
    halt TERM
    rm -rf "$state/data" "$state/endpoints" "$state/port" "$state/peer"
    exit 0
    ;;
pause)
    running || die "no server running in $state"
    halt "${3:-TERM}"
    exit 0
    ;;
resume)
    [ -f "$state/port" ] || die "no server was started in $state"
    running && exit 0
    launch
    wait_ready || {
        tail -n 20 "$state/etcd.log" >&2 2>/dev/null
        die "etcd did not come back on port $(cat "$state/port")"
    }
    exit 0
    ;;
wipe)
    running || die "no server running in $state"
    halt KILL
    rm -rf "$state/data"
    # The same ports: a moment's wait when they are still taken.
    attempt=0
    while [ $attempt -lt 20 ]; do
        attempt=$((attempt + 1))
        launch
        wait_ready
        rc=$?
        [ $rc -eq 0 ] && exit 0
        halt KILL
        rm -rf "$state/data"
        [ $rc -eq 2 ] || break
        sleep 0.25
    done
    tail -n 20 "$state/etcd.log" >&2 2>/dev/null
    die "etcd did not come back wiped on port $(cat "$state/port")"
    ;;
freeze)
    running || die "no server running in $state"
    stop_and_wait "$(cat "$state/pid")" || die "etcd did not stop"
    ;;
thaw)
    running || die "no server running in $state"
    kill -CONT "$(cat "$state/pid")"
    ;;
*)
    die "unknown command $cmd"
    ;;
esac
