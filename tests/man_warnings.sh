#!/bin/sh
# Every man page formats without a warning from man or troff, in the C
# locale (as on a machine with no LANG: CI's, a chroot's): a stray control
# character, a failed .so, an unknown request. scripts/deb-test.sh reads
# the installed pages the same way and fails on the same warnings.
# Usage: man_warnings.sh SOURCE_DIR
set -u
command -v man >/dev/null 2>&1 && command -v troff >/dev/null 2>&1 || { echo "SKIP: no man or troff"; exit 77; }
cd "$1/man" || exit 1
tmp=$(mktemp -d "${TMPDIR:-/tmp}/vigil-man.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
pages=0
for page in man*/*.[0-9]; do
    LC_ALL=C MANWIDTH=80 man --warnings -l "$page" 2>&1 >/dev/null | sed "s|^|$page: |" >>"$tmp/warnings"
    pages=$((pages + 1))
done
# The bytes themselves: a control character (other than tab and newline)
# says a backslash escape was lost on the way (\f written as a form feed).
LC_ALL=C grep -l '[[:cntrl:]]' man*/*.[0-9] 2>/dev/null | while read -r page; do
    LC_ALL=C tr -d '\t\n' <"$page" | LC_ALL=C grep -q '[[:cntrl:]]' && echo "$page: a control character"
done >>"$tmp/warnings"
if [ -s "$tmp/warnings" ]; then
    cat "$tmp/warnings"
    echo "0 passed, 1 failed"
    exit 1
fi
echo "$pages pages without a warning"
echo "1 passed, 0 failed"
