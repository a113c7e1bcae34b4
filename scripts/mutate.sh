#!/bin/sh
# make mutate: does every test (or model) that claims to see a bug see it?
#
# Applies one mutant at a time (scripts/mutants.txt: a small literal edit
# of src/, each naming the tests or model runs that must see it) to a
# scratch copy of the tree, rebuilds only what its tests need, runs them,
# and prints each mutant's fate and the kill ratio. Not in CI: it takes
# a few minutes per dozen mutants.
#
# Usage: scripts/mutate.sh [-q] [NAME...]
#   NAME...   only these mutants (default: every one in the list)
#   -q        quick: a mutant its named killers miss is called a survivor
#             without running the rest of the suite on it
# Environment: MUTANTS (the list, default scripts/mutants.txt),
#   MUTATE_TIMEOUT (seconds per test, default 120), MUTATE_KEEP=1 keeps
#   the scratch tree, JOBS (build parallelism).
#
# Fates:
#   killed      a named test failed (or a named model run found the bug);
#               the tests that failed are printed by name
#   killed*     killed only by a test's timeout: the test should bound its
#               wait and fail by name instead (a finding of its own)
#   caught      missed by its named killers, killed by another test: the
#               list should name that test
#   survived    every test passed with the mutant in
#   argued      survived, and the list says why no test can see it (the
#               same machine code on this processor; the argument stands
#               beside the code) - counted apart from the ratio
#   stale       its `from` text is not in the file exactly once (the code
#               moved: fix the entry)
#   stillborn   it does not compile (not a mutant: fix the entry)
#
# The ratio is (killed + killed* + caught) / (those + survived).
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
list=${MUTANTS:-$here/scripts/mutants.txt}
timeout=${MUTATE_TIMEOUT:-120}
jobs=${JOBS:-$(nproc 2>/dev/null || echo 2)}
quick=0
[ "${1:-}" = -q ] && { quick=1; shift; }

[ -f "$list" ] || { echo "mutate: no list at $list"; exit 2; }
command -v perl >/dev/null || { echo "mutate: needs perl"; exit 2; }

work=$(mktemp -d "${TMPDIR:-/tmp}/vigil-mutate.XXXXXX")
[ "${MUTATE_KEEP:-0}" = 1 ] || trap 'rm -rf "$work"' EXIT INT TERM
tree=$work/tree build=$work/build
mkdir -p "$tree"

# The scratch copy: every file git knows of, committed or not (the mutants
# of a change are tried before it is committed), never the build trees.
(cd "$here" && git ls-files -co --exclude-standard -z | xargs -0 tar cf - 2>/dev/null) | (cd "$tree" && tar xf -)

# One mutant a line: name, file, from, to, kill, model, argued, each
# field ended by \036; the text of from and to is taken literally, with
# \n for a newline and \t for a tab.
awk '
function flush() {
    if (name != "") {
        if (nfrom != nto || nfile < 1 || (nfile != 1 && nfile != nfrom)) {
            print "mutate: " name ": each from needs its to, and one file or one per from" > "/dev/stderr"; exit 2
        }
        printf "%s\036%s\036%s\036%s\036%s\036%s\036%s\036\n", name, file, from, to, kill, model, argued
    }
    name = file = from = to = kill = model = argued = ""
    nfile = nfrom = nto = 0
}
# A repeated file, from or to adds an edit: joined by \037, in order.
function add(acc, n, v) { return n == 0 ? v : acc "\037" v }
/^#/ { next }
/^[ \t]*$/ { flush(); next }
{
    k = $0; sub(/:.*/, "", k)
    v = $0; sub(/^[^:]*:[ \t]*/, "", v); sub(/[ \t]+$/, "", v)
    if (k == "name") name = v; else if (k == "file") file = add(file, nfile++, v)
    else if (k == "from") from = add(from, nfrom++, v); else if (k == "to") to = add(to, nto++, v)
    else if (k == "kill") kill = v; else if (k == "model") model = v
    else if (k == "argued") argued = v
    else if (k != "why" && k != "owner") { print "mutate: unknown key " k > "/dev/stderr"; exit 2 }
}
END { flush() }' "$list" > "$work/records" || exit 2

want() { # is mutant $1 among the names asked for?
    [ $# -eq 1 ] && return 0
    n=$1; shift
    for w in "$@"; do [ "$w" = "$n" ] && return 0; done
    return 1
}

# Literal edit of file $1: the one occurrence of $FROM becomes $TO.
# Prints how many occurrences there were; edits only when exactly one.
edit() {
    perl -0777 -e '
        my ($f) = @ARGV;
        my ($from, $to) = map { my $s = $_; $s =~ s/\\n/\n/g; $s =~ s/\\t/\t/g; $s } ($ENV{FROM}, $ENV{TO});
        open(my $h, "<", $f) or die "$f: $!";
        my $t = <$h>; close($h);
        my $n = () = $t =~ /\Q$from\E/g;
        print "$n\n";
        exit 0 unless $n == 1;
        $t =~ s/\Q$from\E/$to/;
        open($h, ">", $f) or die "$f: $!"; print $h $t; close($h);' "$1"
}

echo "mutate: configuring a scratch build in $work"
cmake -S "$tree" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DVIGIL_BENCH=OFF >"$work/cmake.log" 2>&1 ||
    { tail -20 "$work/cmake.log"; exit 2; }

# Runs the CTest tests named in $1 (space-separated) with the mutant in:
# builds just their targets; prints failed, timeout, passed or nobuild.
# A test that is a script (layers, say) has no target: nothing to build.
known_targets=" $(cmake --build "$build" --target help 2>/dev/null | sed -n 's/^\.\.\. \([^ ]*\).*/\1/p' | tr '\n' ' ') "
run_tests() {
    targets="" re=""
    for t in $1; do
        re="$re${re:+|}$t"
        case $known_targets in *" $t "*) targets="$targets $t" ;; esac
    done
    if [ -n "$targets" ] && ! cmake --build "$build" -j "$jobs" --target $targets >"$work/build.log" 2>&1; then
        echo nobuild; return
    fi
    (cd "$build" && ctest -R "^($re)\$" --timeout "$timeout" -j "$jobs" >"$work/ctest.log" 2>&1)
    if [ $? -eq 0 ]; then echo passed
    elif grep -q 'Timeout' "$work/ctest.log"; then echo timeout
    else echo failed
    fi
}

# Every test but chaos, the install check and those that need etcd: the
# sweep for a mutant its named killers missed.
run_all() {
    if ! cmake --build "$build" -j "$jobs" >"$work/build.log" 2>&1; then echo nobuild; return; fi
    (cd "$build" && ctest -LE 'chaos|etcd|install|python|rust' --timeout "$timeout" -j "$jobs" >"$work/ctest.log" 2>&1)
    if [ $? -eq 0 ]; then echo passed
    else grep -E '^\s*[0-9]+ - ' "$work/ctest.log" | sed 's/^[^-]*- \([^ ]*\).*/\1/' | tr '\n' ' '
    fi
}

# A named model run sees the mutant when Spin finds its counterexample:
# model/X.pml:RUN names a CHECK run of that model that stands for the
# mutant (an error run), or a clean run that the mutant's edit (of the
# model's own steps) turns into an error.
run_models() {
    for mr in $1; do
        m=${mr%%:*} r=${mr#*:}
        out=$(cd "$tree" && CHECK_RUNS="$r" sh model/check.sh "$m" 2>&1)
        case $out in *"counterexample found"*|*UNEXPECTED*) echo seen; return ;; esac
    done
    echo unseen
}

# Sanity: every killer passes on the tree as it is, or it kills nothing. A
# killer that fails twice unmutated is set aside (and said so): it cannot
# tell a mutant from the tree, and the mutants it was to kill are judged
# by the others and by the sweep.
failed_tests() { grep -E '^[[:space:]]+[0-9]+ - ' "$work/ctest.log" | awk '{ print $3 }' | tr '\n' ' '; }
all_killers=$(awk -F'\036' '{ print $5 }' "$work/records" | tr ' ' '\n' | sort -u | tr '\n' ' ')
echo "mutate: building and running the killers unmutated: $all_killers"
broken=""
base=passed
[ -z "$(echo $all_killers)" ] || base=$(run_tests "$all_killers") # a list of argued or model-only mutants has none
if [ "$base" = nobuild ]; then
    tail -20 "$work/build.log"; echo "mutate: the unmutated tree does not build"; exit 2
elif [ "$base" != passed ]; then
    again=$(failed_tests)
    [ "$(run_tests "$again")" = passed ] || broken=$(failed_tests)
    [ -z "$broken" ] || echo "mutate: set aside, failing unmutated: $broken"
fi
without_broken() {
    out=""
    for t in $1; do case " $broken " in *" $t "*) ;; *) out="$out${out:+ }$t" ;; esac; done
    echo "$out"
}

# A mutant's edits, in order (a mutant of several steps, such as a bug
# that only the old code's two steps together make, lists several): the
# k-th from becomes the k-th to, in the k-th file or the only one given.
# Each file is saved once, before its first edit, for restore. Prints the
# fate "stale" and fails when a from is not in its file exactly once.
apply() {
    US=$(printf '\037')
    saved=""
    k=0
    rest_file=$1 rest_from=$2 rest_to=$3
    while :; do
        f=${rest_file%%"$US"*} fr=${rest_from%%"$US"*} t=${rest_to%%"$US"*}
        k=$((k + 1))
        if [ ! -f "$tree/$f" ]; then
            printf '%-40s stale (no file %s)\n' "$name" "$f"; return 1
        fi
        case " $saved " in *" $f "*) ;; *)
            mkdir -p "$work/orig/$(dirname "$f")" && cp "$tree/$f" "$work/orig/$f"; saved="$saved $f" ;;
        esac
        n=$(FROM=$fr TO=$t edit "$tree/$f")
        if [ "$n" != 1 ]; then
            printf '%-40s stale (%s occurrences of edit %d in %s)\n' "$name" "$n" "$k" "$f"; return 1
        fi
        case $rest_from in *"$US"*) ;; *) return 0 ;; esac
        rest_from=${rest_from#*"$US"} rest_to=${rest_to#*"$US"}
        case $rest_file in *"$US"*) rest_file=${rest_file#*"$US"} ;; esac
    done
}
restore() {
    for f in $saved; do cp "$work/orig/$f" "$tree/$f"; done
    rm -rf "$work/orig"
    saved=""
}

killed=0 timeouts=0 caught=0 survived=0 n_argued=0 stale=0 stillborn=0 total=0
survivors=""
printf '\n%-40s %s\n' MUTANT FATE
while IFS="$(printf '\036')" read -r name file from to kill model argued rest; do
    [ -n "$name" ] || continue
    want "$name" "$@" || continue
    total=$((total + 1))
    if ! apply "$file" "$from" "$to"; then
        stale=$((stale + 1))
        restore
        continue
    fi
    fate="" by=""
    kill=$(without_broken "$kill")
    if [ -n "$kill" ]; then
        r=$(run_tests "$kill")
        case $r in
        nobuild) fate=stillborn ;;
        failed) fate=killed by=$(failed_tests) ;;
        timeout) fate="killed*" by="$(failed_tests)(timeout)" ;;
        esac
    fi
    if [ -z "$fate" ] && [ -n "$model" ] && [ "$(run_models "$model")" = seen ]; then
        fate=killed by=$model
    fi
    if [ -z "$fate" ] && [ $quick = 0 ]; then
        r=$(run_all)
        case $r in
        nobuild) fate=stillborn ;;
        passed) ;;
        *) fate=caught by="$r (not named)" ;;
        esac
    fi
    if [ -z "$fate" ]; then
        if [ -n "$argued" ]; then fate=argued by=$argued; else fate=survived; fi
    fi
    case $fate in
    killed) killed=$((killed + 1)) ;;
    "killed*") timeouts=$((timeouts + 1)) ;;
    caught) caught=$((caught + 1)) ;;
    survived) survived=$((survived + 1)); survivors="$survivors $name" ;;
    argued) n_argued=$((n_argued + 1)) ;;
    stillborn) stillborn=$((stillborn + 1)); tail -5 "$work/build.log" ;;
    esac
    printf '%-40s %s%s\n' "$name" "$fate" "${by:+: $by}"
    restore
done < "$work/records"

dead=$((killed + timeouts + caught))
judged=$((dead + survived))
echo
echo "mutate: $total mutants: $killed killed, $timeouts killed only by a timeout, $caught caught by an unnamed test," \
     "$survived survived, $n_argued argued, $stale stale, $stillborn stillborn"
[ -z "$survivors" ] || echo "mutate: survivors:$survivors"
if [ $judged -gt 0 ]; then
    echo "mutate: kill ratio $dead/$judged ($(awk -v a=$dead -v b=$judged 'BEGIN { printf "%.0f", 100 * a / b }')%)" \
         "(argued ones apart: $n_argued)"
fi
[ $stale -eq 0 ] && [ $stillborn -eq 0 ]
