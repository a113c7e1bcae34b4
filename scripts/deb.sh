#!/bin/sh
# scripts/deb.sh: `make deb`. Builds the Debian binary packages of this
# tree into dist/ (debian/ says what goes where), then runs lintian on them,
# which must find no error (its warnings are printed).
#
# The build runs in a copy of the tree under build-deb/ (the files git
# tracks, and new ones it does not ignore, as they are in the work tree):
# dpkg-buildpackage writes beside the source and in debian/, and the
# checkout stays as it was. Test suite skipped (nocheck): CI runs it on the
# same tree. DEB_BUILD_OPTIONS adds to nocheck and parallel=2.
set -eu
top=$(cd "${0%/*}/.." && pwd)
cd "$top"
version=$(sh scripts/version.sh)
sh scripts/version.sh --check >/dev/null

stage=build-deb
src="$stage/vigil-$version"
rm -rf "$stage"
mkdir -p "$src"
# The tree as it is: tracked files (deleted ones left out) and untracked
# ones git does not ignore; outside a git checkout (a tarball), every file
# but the build directories.
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    git ls-files -z --cached --others --exclude-standard |
        xargs -0 sh -c 'for f; do [ -e "$f" ] || [ -L "$f" ] && printf "%s\0" "$f"; done' sh |
        tar --null -T - -cf - | tar -xf - -C "$src"
else
    tar --exclude=./build --exclude='./build-*' --exclude=./dist -cf - . | tar -xf - -C "$src"
fi

start=$(date +%s)
# Debian's own tools only (PATH): a python3 of pyenv's or a compiler in
# /usr/local would otherwise build the packages.
(cd "$src" && env PATH=/usr/sbin:/usr/bin:/sbin:/bin DEB_BUILD_OPTIONS="nocheck parallel=2 ${DEB_BUILD_OPTIONS:-}" \
    dpkg-buildpackage -b -us -uc >../dpkg-buildpackage.log 2>&1) || {
    tail -n 60 "$stage/dpkg-buildpackage.log" >&2
    echo "deb: dpkg-buildpackage failed (the whole log: $stage/dpkg-buildpackage.log)" >&2
    exit 1
}
# A public symbol the symbols files lack (or list wrongly) is a warning of
# dpkg-gensymbols in the log: shown here, with the lines to add.
if grep -q 'dpkg-gensymbols: warning' "$stage/dpkg-buildpackage.log"; then
    sed -n '/dpkg-gensymbols: warning/,/^ *dh_/p' "$stage/dpkg-buildpackage.log" | grep -v '^ *dh_' >&2
    echo "deb: debian/*.symbols differ from the libraries (above): bring them up to date" >&2
fi

# The packages in dist/, their debug symbols in dist/debug/ (so that
# `apt-get install ./dist/*.deb` takes the packages alone); the .changes and
# .buildinfo stay in build-deb/.
rm -rf dist/debug
rm -f dist/*.deb
mkdir -p dist/debug
mv "$stage"/*-dbgsym_*.*deb dist/debug/ 2>/dev/null || true
mv "$stage"/*.deb dist/
echo "deb: built in $(( $(date +%s) - start )) s:"
ls dist/*.deb | sed 's/^/  /'

if command -v lintian >/dev/null 2>&1; then
    # --fail-on error: a warning is printed, an error fails make deb.
    lintian --fail-on error --tag-display-limit 0 dist/*.deb || {
        echo "deb: lintian found errors" >&2
        exit 1
    }
    echo "deb: lintian: no error"
else
    echo "deb: lintian not installed (scripts/deps.sh deb installs it): packages not checked" >&2
fi
