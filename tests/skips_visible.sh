#!/bin/sh
# A test program whose point is an attack from another user reports itself
# skipped (exit 77, a SKIPPED line per case) when it cannot make one, even
# if its other cases passed: run as nobody, where no attack can be made,
# test_files_attack (whose one case that is no attack, an older vigil's
# sparse file, passes as anyone) must say so, never pass.
# Skipped itself (77) when not root, or when nobody cannot run the build.
prog=$1
if [ "$(id -u)" != 0 ] || ! command -v setpriv >/dev/null; then
    echo "skips_visible: needs root and setpriv"
    exit 77
fi
run() { setpriv --reuid=65534 --regid=65534 --clear-groups env TMPDIR=/tmp "$@"; }
if ! run test -x "$prog"; then
    echo "skips_visible: nobody cannot run $prog (a build tree closed to others)"
    exit 77
fi
out=$(run "$prog" 2>/dev/null)
rc=$?
if [ "$rc" != 77 ]; then
    echo "skips_visible: $prog as nobody exited $rc, not 77 (skipped):"
    echo "$out"
    exit 1
fi
if ! echo "$out" | grep -q '^SKIPPED: test_trust_rule$' || ! echo "$out" | grep -q '^1 passed, 0 failed'; then
    echo "skips_visible: not one case passed and a SKIPPED line for an attack:"
    echo "$out"
    exit 1
fi
echo "skips_visible: $prog as nobody: skipped, saying which case"
