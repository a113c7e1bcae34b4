#!/bin/sh
# CTest bench_peer_smoke: the Go side builds and one tiny batch of every op
# passes on both sides (bench_peer --quick), on the etcd test fixture
# (VIGIL_ETCD_STATE). Skipped (77) without etcd, Go or Debian's etcd
# sources, which it never installs.
# Usage: smoke.sh BENCH_PEER OUT_DIR
set -u
bench=$1
out=$2
state=${VIGIL_ETCD_STATE:?the state directory of the etcd fixture}
if [ -f "$state/skip" ]; then
    echo "skipped: $(cat "$state/skip")"
    exit 77
fi
sh "$(dirname "$0")/build.sh" "$out" || exit $?
VIGIL_ETCD_ENDPOINTS=$(cat "$state/endpoints") VIGIL_ETCD_PID=$(cat "$state/pid" 2>/dev/null) \
    exec "$bench" --quick "$out/peer-clientv3"
