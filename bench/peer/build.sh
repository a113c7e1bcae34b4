#!/bin/sh
# Builds bench_peer's Go side (bench/peer/clientv3) offline, against
# Debian's golang-etcd-server-dev in /usr/share/gocode (GOPATH mode, no
# module proxy): bench/peer/build.sh OUT_DIR makes OUT_DIR/peer-clientv3.
# Exits 77 when Go or the etcd sources are missing (scripts/deps.sh
# bench-peer installs them; make check never does).
set -u
[ $# -eq 1 ] || { echo "usage: bench/peer/build.sh OUT_DIR" >&2; exit 2; }
src=$(cd "$(dirname "$0")/clientv3" && pwd) || exit 1
gopath=/usr/share/gocode
if ! command -v go >/dev/null 2>&1; then
    echo "bench-peer: go is not installed (Debian: golang-go; scripts/deps.sh bench-peer)" >&2
    exit 77
fi
for pkg in clientv3/concurrency contrib/recipes; do
    if [ ! -d "$gopath/src/go.etcd.io/etcd/$pkg" ]; then
        echo "bench-peer: $gopath/src/go.etcd.io/etcd/$pkg is missing (Debian: golang-etcd-server-dev)" >&2
        exit 77
    fi
done
mkdir -p "$1" && out=$(cd "$1" && pwd) || exit 1
# The build cache stays in OUT_DIR: the first build takes a while (clientv3,
# gRPC), the next ones a second.
cd "$src" && env GOPATH="$gopath" GO111MODULE=off GOFLAGS= GOPROXY=off GOENV=off \
    GOCACHE="$out/go-cache" go build -o "$out/peer-clientv3" .
