#!/bin/sh
# Runs every Promela model in model/ through Spin, exhaustively unless a
# model says otherwise, and checks each verdict against the one the model
# expects. A model names its runs in lines of its own:
#
#   CHECK name | spin flags | cc flags | pan flags | expect
#
# expect is "clean" (no error, and for a safety run no assertion reached
# unsatisfied) or "error" (Spin must find the counterexample: the model of
# a protocol as it stood before a fix). Usage: check.sh [model.pml ...];
# CHECK_RUNS="name ..." runs only the runs of those names (make mutate).
set -u
here=$(cd "$(dirname "$0")" && pwd)
command -v spin >/dev/null 2>&1 || { echo "model: spin not found (apt-get install spin)"; exit 77; }
cc=${CC:-cc}
work=$(mktemp -d "${TMPDIR:-/tmp}/vigil-model.XXXXXX")
trap 'rm -rf "$work"' EXIT INT TERM
[ $# -gt 0 ] || set -- "$here"/*.pml
fail=0 runs=0
for m in "$@"; do
    base=$(basename "$m" .pml)
    sed -n 's/^[ /*]*CHECK \(.*\)$/\1/p' "$m" | sed 's/ *\*\/ *$//' > "$work/$base.checks"
    [ -s "$work/$base.checks" ] || { echo "model $base: no CHECK line"; fail=1; continue; }
    while IFS='|' read -r name sflags cflags pflags expect; do
        name=$(echo $name); expect=$(echo $expect)
        case " ${CHECK_RUNS:-$name} " in *" $name "*) ;; *) continue ;; esac
        d="$work/$base.$name"; mkdir -p "$d"; cp "$m" "$d/"
        start=$(date +%s.%N)
        ( cd "$d" && spin -a $sflags "$base.pml" >spin.out 2>&1 &&
          $cc -O2 -w -o pan $cflags pan.c >cc.out 2>&1 &&
          ./pan $pflags >pan.out 2>&1 ) ; rc=$?
        secs=$(echo "$(date +%s.%N) $start" | awk '{printf "%.1f", $1 - $2}')
        out="$d/pan.out"
        errors=$(sed -n 's/.*errors: \([0-9]*\).*/\1/p' "$out" | tail -1)
        states=$(sed -n 's/^ *\([0-9.e+]*\) states, stored.*/\1/p' "$out" | tail -1)
        depth=$(sed -n 's/.*depth reached \([0-9]*\).*/\1/p' "$out" | tail -1)
        bitstate=""; grep -q 'Bit statespace search' "$out" && bitstate=" (bitstate)"
        runs=$((runs + 1))
        verdict="" detail=""
        if [ -z "$errors" ]; then
            verdict="FAILED to run"; cat "$d"/*.out | tail -20
        elif [ "$expect" = error ] && [ "$errors" -gt 0 ]; then
            verdict="counterexample found, as expected"
            ( cd "$d" && spin -t -p $sflags "$base.pml" > trail.txt 2>&1 )
            detail=$(grep -h -m1 -E 'assertion violated|acceptance cycle|invalid end state' "$d/trail.txt" "$out" | head -1)
        elif [ "$expect" = clean ] && [ "$errors" -eq 0 ] && ! grep -q 'max search depth too small' "$out"; then
            verdict="clean"
        else
            verdict="UNEXPECTED: errors $errors, expected $expect"
            grep -E 'assertion|error|too small' "$out" | head -5
            [ -f "$d/$base.pml.trail" ] && ( cd "$d" && spin -t -p $sflags "$base.pml" | tail -40 )
        fi
        case $verdict in clean|counterexample*) ;; *) fail=1 ;; esac
        printf 'model %-18s %-22s %s: %s states, depth %s, %ss%s\n' "$base" "$name" "$verdict" \
            "${states:-?}" "${depth:-?}" "$secs" "$bitstate"
        [ -z "$detail" ] || echo "    $detail"
    done < "$work/$base.checks"
done
echo "model: $runs runs, $( [ $fail = 0 ] && echo all as expected || echo FAILURES)"
exit $fail
