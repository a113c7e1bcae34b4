#!/bin/sh
# The etcd adapter's layers stay layers: the transport (src/etcd/transport/)
# includes and calls nothing of the recipes (src/etcd/recipes/) or the
# groups (src/group/), the recipes nothing of the groups, and no internal
# header of theirs includes itself round a circle. A source or header of
# the adapter outside the three rooms fails too (it would sit in no layer,
# and CMake builds only the rooms' sources).
#   tests/layers.sh SRC_DIR         checks the tree
#   tests/layers.sh --self-test SRC_DIR  and that a circle, an upward
#                                   include and an upward call each fail
set -eu

self_test=
if [ "${1:-}" = --self-test ]; then self_test=1; shift; fi
src=${1:?usage: layers.sh [--self-test] SRC_DIR}
rooms="src/etcd/transport src/etcd/recipes src/group" # lowest first

# rank ROOT FILE: the layer a file of the adapter (named as #include names
# it, by its base name) belongs to, 0 upwards; nothing for another file.
rank() {
    n=0
    for layer in $rooms; do
        [ -e "$1/$layer/$2" ] && { echo $n; return; }
        n=$((n + 1))
    done
}

# The first identifier followed by "(" on each declaration line (column 0,
# not a comment or a directive) of a header: the names it offers.
declared() {
    grep -E '^[a-z_]' "$1" | grep -vE '^(struct|enum|union|typedef)[^(]*[{;]' |
        grep -oE '\b(vigil_[a-z0-9_]+|g[a-z0-9_]+)[ ]*\(' | sed 's/[ (]*$//' | sort -u
}

check() {
    root=$1 bad=0
    for f in "$root"/src/etcd/*.[ch] "$root"/src/etcd/*/*.[ch]; do
        [ -f "$f" ] || continue
        case ${f#"$root"/} in
        src/etcd/transport/* | src/etcd/recipes/*) ;;
        *) echo "layers: ${f#"$root"/} is in no layer (src/etcd/transport, src/etcd/recipes, src/group)"; bad=1 ;;
        esac
    done
    # Upward includes, and the include graph of the headers for circles.
    edges=$(mktemp)
    r=0
    for room in $rooms; do
        for f in "$root/$room"/*.[ch]; do
            [ -f "$f" ] || continue
            for inc in $(sed -n 's/^[ \t]*#[ \t]*include[ \t]*"\([^"]*\)".*/\1/p' "$f"); do
                inc=${inc##*/}
                to=$(rank "$root" "$inc")
                [ -n "$to" ] || continue
                if [ "$to" -gt $r ]; then
                    echo "layers: $room/${f##*/} includes $inc, of a layer above it"
                    bad=1
                fi
                case $f in *.h) echo "${f##*/} $inc" >>"$edges" ;; esac
            done
        done
        r=$((r + 1))
    done
    # Prune headers that include no header left; what cannot be pruned is a circle.
    left=$(cut -d' ' -f1 "$edges" | sort -u | tr '\n' ' ')
    while :; do
        keep=
        for h in $left; do
            for to in $(awk -v h="$h" '$1 == h { print $2 }' "$edges"); do
                case " $left " in *" $to "*) keep="$keep $h"; break ;; esac
            done
        done
        [ "$(echo $keep)" = "$(echo $left)" ] && break
        left=$keep
    done
    rm -f "$edges"
    if [ -n "$(echo $left)" ]; then
        echo "layers: the internal headers include each other round a circle:$left"
        bad=1
    fi
    # Upward calls: a name a higher layer's header declares, named (called
    # or declared again by hand) in a source of a lower layer.
    r=0
    for room in $rooms; do
        above=0
        for upper in $rooms; do
            if [ $above -gt $r ]; then
                for h in "$root/$upper"/*.h; do
                    [ -f "$h" ] || continue
                    for name in $(declared "$h"); do
                        hits=$(grep -lE "\b$name[ ]*\(" "$root/$room"/*.[ch] 2>/dev/null || true)
                        for hit in $hits; do
                            echo "layers: $room/${hit##*/} names $name, of $upper (a layer above it)"
                            bad=1
                        done
                    done
                done
            fi
            above=$((above + 1))
        done
        r=$((r + 1))
    done
    return $bad
}

check "$src" || exit 1
[ -n "$self_test" ] || exit 0

# The check must see each fault: on a copy of the rooms, one fault at a time.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fresh() {
    rm -rf "$tmp/t"
    for room in $rooms; do mkdir -p "$tmp/t/$room" && cp "$src/$room"/*.[ch] "$tmp/t/$room/"; done
}
expect_fail() {
    if check "$tmp/t" >"$tmp/out"; then
        echo "layers: self-test: $1 passed the check"
        exit 1
    fi
    grep -q "$2" "$tmp/out" || { echo "layers: self-test: $1 failed, but not for its reason:"; cat "$tmp/out"; exit 1; }
}
fresh
printf '#include "group_internal.h"\n' >>"$tmp/t/src/etcd/transport/etcd_watch.c"
expect_fail "an upward include" "includes group_internal.h, of a layer above"
fresh
printf 'static void f(void) { (void)vigil_etcd__queue_wait(0, 0, 0, 0, 0, 0); }\n' >>"$tmp/t/src/etcd/transport/etcd_json.c"
expect_fail "an upward call" "names vigil_etcd__queue_wait"
fresh
printf '#include "recipes_internal.h"\n' >"$tmp/t/src/etcd/recipes/queue_internal.h"
printf '#include "queue_internal.h"\n' >>"$tmp/t/src/etcd/recipes/recipes_internal.h"
expect_fail "a circle of headers" "round a circle"
fresh
printf 'int x;\n' >"$tmp/t/src/etcd/stray.c"
expect_fail "a file in no room" "in no layer"
echo "layers: ok (and the self-test saw each fault)"
