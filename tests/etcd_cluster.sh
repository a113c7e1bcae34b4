#!/bin/sh
# A throwaway etcd cluster of N members on 127.0.0.1, for the tests that need
# a member to hang or die while the others serve (and, with ETCD_TLS, a
# server that speaks only TLS: mutual, or server-only).
#
#   etcd_cluster.sh start   STATE [N]   N members (default 3) on free ports,
#                                       fresh data; waits (bounded) until
#                                       every member serves. Writes
#                                       STATE/endpoints (all client URLs,
#                                       comma-separated), STATE/n, and per
#                                       member I (1..N) STATE/I/endpoint and
#                                       STATE/I/pid. Without etcd: STATE/skip
#                                       (the reason), exit 0.
#   etcd_cluster.sh stop    STATE       every member killed, data removed
#   etcd_cluster.sh kill    STATE I [SIG]  member I stopped with SIG (TERM;
#                                       KILL for a crash); ports, data kept
#   etcd_cluster.sh restart STATE I     member I again, same ports and data;
#                                       waits until it serves
#   etcd_cluster.sh freeze  STATE I     SIGSTOP, every thread stopped: accepts, never answers
#   etcd_cluster.sh thaw    STATE I     SIGCONT
#   etcd_cluster.sh leader  STATE       prints the leader's I (bounded)
#   etcd_cluster.sh proxy   STATE I CMD sends CMD to member I's fault proxy,
#                                       prints its answer
#   etcd_cluster.sh certs   DIR         with openssl: ca.pem, server.pem and
#                                       server-key.pem (127.0.0.1, localhost),
#                                       client.pem and client-key.pem (no
#                                       CommonName: etcd 3.4's gateway
#                                       refuses one with a CN while auth is
#                                       on), client-cn.pem and
#                                       client-cn-key.pem (CN vigil-client),
#                                       other-ca.pem (a CA nobody signed
#                                       with)
#
# With python3 (and without ETCD_TLS), start also puts a fault proxy
# (tests/etcd_proxy.py) in front of every member: STATE/I/proxy is its URL,
# STATE/proxies every proxy's, comma-separated; a test speaks to the
# members through them to hold, repeat, delay or cut its requests.
#
# ETCD_ARGS at start: more etcd flags for every member (words split at
# spaces), kept for restarts; e.g. --auth-token-ttl=2.
# ETCD_TLS=DIR at start: clients speak https only, with the server's
# certificate from DIR (made there first when missing, as by certs) and
# --client-cert-auth --trusted-ca-file DIR/ca.pem (peers stay on http).
# ETCD_TLS_SERVER_ONLY=1 with ETCD_TLS: server-only TLS, the clients asked
# for no certificate (no --client-cert-auth, no --trusted-ca-file).
# Tuned for tests: election timeout 500 ms (minimum lease TTL 1 s). Every
# wait is bounded. ETCD may name another etcd binary.
set -u

cmd=${1:-}
state=${2:-}
ETCD=${ETCD:-etcd}
READY_TIMEOUT=${READY_TIMEOUT:-30} # seconds, for a slow machine

die() {
    echo "etcd_cluster.sh: $*" >&2
    exit 1
}
[ -n "$cmd" ] && [ -n "$state" ] ||
    die "usage: etcd_cluster.sh start|stop|kill|restart|freeze|thaw|leader STATE [N|I] | proxy STATE I CMD | certs DIR"

. "$(dirname "$0")/etcd_lib.sh"

member_dir() {
    [ -f "$state/n" ] || die "no cluster was started in $state"
    case "${1:-}" in
    '' | *[!0-9]*) die "member: a number 1..$(cat "$state/n"), not '${1:-}'" ;;
    esac
    [ "$1" -ge 1 ] && [ "$1" -le "$(cat "$state/n")" ] || die "no member $1 in $state"
    echo "$state/$1"
}

# The client URL scheme, and curl's TLS arguments for /health.
scheme() { [ -f "$state/tls" ] && echo https || echo http; }
curl_tls() {
    [ -f "$state/tls" ] || return 0
    t=$(cat "$state/tls")
    if [ -f "$state/tls-server-only" ]; then
        echo "--cacert $t/ca.pem"
    else
        echo "--cacert $t/ca.pem --cert $t/client.pem --key $t/client-key.pem"
    fi
}

launch() { # member dir
    m=$1
    name=m$(basename "$m")
    url="$(scheme)://127.0.0.1:$(cat "$m/port")"
    set -- --name "$name" --data-dir "$m/data" \
        --listen-client-urls "$url" --advertise-client-urls "$url" \
        --listen-peer-urls "http://127.0.0.1:$(cat "$m/peer")" \
        --initial-advertise-peer-urls "http://127.0.0.1:$(cat "$m/peer")" \
        --initial-cluster "$(cat "$state/initial")" \
        --initial-cluster-token "$(cat "$state/token")" \
        --initial-cluster-state new \
        --election-timeout 500 --heartbeat-interval 50 \
        --logger zap --log-outputs stderr --log-level warn
    # shellcheck disable=SC2046 # the extra flags are words
    [ -s "$state/args" ] && set -- "$@" $(cat "$state/args")
    if [ -f "$state/tls" ]; then
        t=$(cat "$state/tls")
        set -- "$@" --cert-file "$t/server.pem" --key-file "$t/server-key.pem"
        [ -f "$state/tls-server-only" ] || set -- "$@" --client-cert-auth --trusted-ca-file "$t/ca.pem"
    fi
    "$ETCD" "$@" </dev/null >>"$m/etcd.log" 2>&1 &
    echo $! >"$m/pid"
}

# 0 when member dir m answers /health with true.
healthy() {
    url="$(cat "$1/endpoint")/health"
    # shellcheck disable=SC2046 # curl_tls is words
    curl -s -m 1 $(curl_tls) "$url" 2>/dev/null | grep -q '"health":"true"'
}

# Waits until every member given serves. 0, 1 one died, 2 one died of a
# taken port, 3 timed out.
wait_ready() {
    i=0
    while [ $i -lt $((READY_TIMEOUT * 10)) ]; do
        i=$((i + 1))
        all=0
        for m in "$@"; do
            if ! etcd_alive "$m/pid"; then
                grep -q "address already in use" "$m/etcd.log" 2>/dev/null && return 2
                return 1
            fi
            healthy "$m" || all=1
        done
        [ $all -eq 0 ] && return 0
        sleep 0.1
    done
    return 3
}

members() {
    k=1
    while [ $k -le "$(cat "$state/n")" ]; do
        echo "$state/$k"
        k=$((k + 1))
    done
}

stop_all() {
    [ -f "$state/n" ] || return 0
    for m in $(members); do
        etcd_halt "$m/pid" "${1:-TERM}" &
        proxy_halt "$m"
    done
    wait
}

# Member dir m's proxy stopped (the pid checked to be one: not a reused pid).
proxy_halt() {
    [ -f "$1/proxy.pid" ] || return 0
    _p=$(cat "$1/proxy.pid")
    if [ -n "$_p" ] && tr '\0' ' ' <"/proc/$_p/cmdline" 2>/dev/null | grep -q etcd_proxy; then
        kill -KILL "$_p" 2>/dev/null
    fi
    rm -f "$1/proxy.pid" "$1/proxy" "$1/proxy.port"
}

# A fault proxy in front of every member, each waited for (bounded: 10 s).
# 0, or 1 when one did not come up (then none is left).
start_proxies() {
    command -v python3 >/dev/null 2>&1 || return 0
    [ -f "$state/tls" ] && return 0
    here=$(cd "$(dirname "$0")" && pwd)
    proxies=""
    for m in $(members); do
        rm -f "$m/proxy.port"
        python3 "$here/etcd_proxy.py" "127.0.0.1:$(cat "$m/port")" "$m/proxy.port" </dev/null >>"$m/proxy.log" 2>&1 &
        echo $! >"$m/proxy.pid"
    done
    for m in $(members); do
        i=0
        while [ ! -s "$m/proxy.port" ] && [ $i -lt 100 ]; do
            i=$((i + 1))
            sleep 0.1
        done
        if [ ! -s "$m/proxy.port" ]; then
            for k in $(members); do proxy_halt "$k"; done
            rm -f "$state/proxies"
            return 1
        fi
        echo "http://127.0.0.1:$(cat "$m/proxy.port")" >"$m/proxy"
        proxies="$proxies${proxies:+,}$(cat "$m/proxy")"
    done
    echo "$proxies" >"$state/proxies"
}

case "$cmd" in
start)
    n=${3:-3}
    case "$n" in '' | *[!0-9]*) die "N: a number of members, not '$n'" ;; esac
    [ "$n" -ge 1 ] && [ "$n" -le 9 ] || die "N: 1..9 members, not $n"
    mkdir -p "$state" || die "cannot make $state"
    stop_all KILL # a cluster left by an aborted run
    rm -rf "$state"/[0-9] "$state/skip" "$state/endpoints" "$state/tls" "$state/tls-server-only" "$state/proxies"
    echo "${ETCD_ARGS:-}" >"$state/args"
    if ! command -v "$ETCD" >/dev/null 2>&1; then
        echo "etcd not installed (Debian: apt-get install etcd-server)" >"$state/skip"
        echo "etcd_cluster.sh: $(cat "$state/skip"); etcd tests will skip" >&2
        exit 0
    fi
    command -v curl >/dev/null 2>&1 || die "curl is needed to see the members ready"
    if [ -n "${ETCD_TLS:-}" ]; then
        for f in ca server client client-cn other-ca; do
            [ -f "$ETCD_TLS/$f.pem" ] || { sh "$0" certs "$ETCD_TLS" || exit 1; break; }
        done
        (cd "$ETCD_TLS" && pwd) >"$state/tls"
        [ "${ETCD_TLS_SERVER_ONLY:-}" = 1 ] && : >"$state/tls-server-only"
    fi
    echo "$n" >"$state/n"
    attempt=0
    while [ $attempt -lt 5 ]; do
        attempt=$((attempt + 1))
        used="" initial="" endpoints=""
        for m in $(members); do
            rm -rf "$m"
            mkdir -p "$m"
            port=$(free_port $used) || die "no free port"
            used="$used $port"
            peer=$(free_port $used) || die "no free port"
            used="$used $peer"
            echo "$port" >"$m/port"
            echo "$peer" >"$m/peer"
            echo "$(scheme)://127.0.0.1:$port" >"$m/endpoint"
            initial="$initial${initial:+,}m$(basename "$m")=http://127.0.0.1:$peer"
            endpoints="$endpoints${endpoints:+,}$(scheme)://127.0.0.1:$port"
        done
        echo "$initial" >"$state/initial"
        # A token of its own: a member of another cluster that once had one
        # of these ports never joins this one.
        echo "vigil-$$-$(od -An -N4 -tx4 /dev/urandom | tr -d ' ')" >"$state/token"
        for m in $(members); do
            launch "$m"
        done
        # shellcheck disable=SC2046 # members are words
        wait_ready $(members)
        rc=$?
        if [ $rc -eq 0 ]; then
            start_proxies || { stop_all KILL; die "the fault proxies did not start (see $state/*/proxy.log)"; }
            echo "$endpoints" >"$state/endpoints"
            exit 0
        fi
        stop_all KILL
        [ $rc -eq 2 ] || break # only a port race is worth other ports
    done
    for m in $(members); do
        tail -n 5 "$m/etcd.log" >&2 2>/dev/null
    done
    die "the cluster did not start (see $state/*/etcd.log)"
    ;;
stop)
    [ -d "$state" ] || exit 0
    stop_all KILL # its data goes too: nothing to shut down cleanly
    rm -rf "$state"/[0-9] "$state/endpoints" "$state/proxies"
    exit 0
    ;;
kill)
    m=$(member_dir "${3:-}") || exit 1
    etcd_alive "$m/pid" || die "member ${3} is not running"
    etcd_halt "$m/pid" "${4:-TERM}"
    ;;
restart)
    m=$(member_dir "${3:-}") || exit 1
    etcd_alive "$m/pid" && exit 0
    launch "$m"
    wait_ready "$m" || {
        tail -n 20 "$m/etcd.log" >&2 2>/dev/null
        die "member ${3} did not come back"
    }
    ;;
freeze | thaw)
    m=$(member_dir "${3:-}") || exit 1
    etcd_alive "$m/pid" || die "member ${3} is not running"
    if [ "$cmd" = freeze ]; then
        stop_and_wait "$(cat "$m/pid")" || die "member ${3} did not stop"
    else
        kill -CONT "$(cat "$m/pid")"
    fi
    ;;
leader)
    # Asks each live, answering member for its status: the one whose own
    # member ID is the leader's. Bounded: 10 s.
    i=0
    while [ $i -lt 50 ]; do
        i=$((i + 1))
        for m in $(members); do
            etcd_alive "$m/pid" || continue
            # shellcheck disable=SC2046 # curl_tls is words
            s=$(curl -s -m 1 $(curl_tls) -X POST -d '{}' "$(cat "$m/endpoint")/v3/maintenance/status" 2>/dev/null)
            me=$(echo "$s" | sed -n 's/.*"member_id":"\([0-9]*\)".*/\1/p')
            ld=$(echo "$s" | sed -n 's/.*"leader":"\([0-9]*\)".*/\1/p')
            if [ -n "$me" ] && [ "$me" = "$ld" ]; then
                basename "$m"
                exit 0
            fi
        done
        sleep 0.2
    done
    die "no leader found"
    ;;
proxy)
    m=$(member_dir "${3:-}") || exit 1
    i=$3
    [ -f "$m/proxy" ] || die "member $i has no proxy"
    shift 3
    curl -s -m 30 --data-binary "$*" "$(cat "$m/proxy")/_proxy" || die "member $i's proxy did not answer"
    ;;
certs)
    dir=$state
    mkdir -p "$dir" || die "cannot make $dir"
    command -v openssl >/dev/null 2>&1 || die "openssl not installed (Debian: apt-get install openssl)"
    (
        cd "$dir" || exit 1
        set -e
        q() { "$@" >/dev/null 2>&1 || { echo "etcd_cluster.sh: failed: $*" >&2; exit 1; }; }
        for ca in ca other-ca; do
            q openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 -subj "/CN=vigil test $ca" \
                -keyout "$ca-key.pem" -out "$ca.pem"
        done
        printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth,clientAuth\n' >server.ext
        printf 'extendedKeyUsage=clientAuth\n' >client.ext
        cp client.ext client-cn.ext
        for who in server client client-cn; do
            case $who in
            server) subj="/CN=vigil-server" ;;
            client) subj="/O=vigil test client" ;;
            client-cn) subj="/CN=vigil-client" ;;
            esac
            q openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -subj "$subj" \
                -keyout "$who-key.pem" -out "$who.csr"
            q openssl x509 -req -in "$who.csr" -CA ca.pem -CAkey ca-key.pem -CAcreateserial -days 2 \
                -extfile "$who.ext" -out "$who.pem"
        done
        chmod 600 ./*-key.pem
        rm -f ./*.csr ./*.ext ./*.srl
    ) || die "could not make certificates in $dir"
    ;;
*)
    die "unknown command $cmd"
    ;;
esac
