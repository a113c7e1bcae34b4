#!/bin/sh
# Gives every page in man/ the same header: name, section, the date of the
# last change to the manual, "vigil VERSION", "vigil manual".
set -e
cd "$(dirname "$0")/.."
version=$(sed -n 's/^project(vigil VERSION \([0-9.]*\).*/\1/p' CMakeLists.txt)
date=${1:-$(date +%Y-%m-%d)}
for f in man/*.[1-8] man/man*/*.[1-8]; do
    [ -f "$f" ] || continue
    grep -q '^\.TH ' "$f" || continue # a .so stub
    sed -i "s/^\.TH \([^ ]*\) \([0-9]\) .*/.TH \1 \2 $date \"vigil $version\" \"vigil manual\"/" "$f"
done
