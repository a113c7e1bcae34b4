#!/bin/sh
# scripts/deb.sh: `make deb`. Builds the Debian source package and binary
# packages of this tree into dist/ (debian/ says what goes where), then
# checks them; any of these fails it:
#
#   an architecture debian/control names that vigil's code does not build
#           on (the 16-byte compare-and-swap of include/vigil/heartbeat.h),
#           or this machine's not among them
#   a symbol the libraries gain or lose that debian/*.symbols do not say
#           (debian/rules: DPKG_GENSYMBOLS_CHECK_LEVEL=4)
#   a library whose soname is not its package's name (libvigil.so.N in
#           libvigilN), or whose symbols file says another
#   a path of the build directory in a packaged file
#   a lintian error or warning on the source package or on a binary one
#
# The build runs in a copy of the tree under build-deb/ (the files git
# tracks, and new ones it does not ignore, as they are in the work tree):
# dpkg-buildpackage writes beside the source and in debian/, and the
# checkout stays as it was. Test suite skipped (nocheck): CI runs it on the
# same tree. DEB_BUILD_OPTIONS adds to nocheck and parallel=2.
set -eu
top=$(cd "${0%/*}/.." && pwd)
top_real=$(cd "$top" && pwd -P)
cd "$top"
version=$(sh scripts/version.sh)
sh scripts/version.sh --check >/dev/null

# The architectures of the packages that are not "all": those
# include/vigil/heartbeat.h has a lock-free 16-byte compare-and-swap for
# (cmpxchg16b on x86-64, ldaxp/stlxp on aarch64); it refuses a target
# without one, and unsigned __int128 needs a 64-bit one. A wildcard (any,
# linux-any) would promise the others.
cas16_arches="amd64 arm64"
bad_arch=$(sed -n 's/^Architecture: *//p' debian/control | tr ' ' '\n' | grep -v '^all$' | sort -u |
    while read -r arch; do
        case " $cas16_arches " in *" $arch "*) ;; *) echo "$arch" ;; esac
    done | paste -sd ' ' -)
if [ -n "$bad_arch" ]; then
    echo "deb: debian/control names the architectures $bad_arch; vigil builds on $cas16_arches only (include/vigil/heartbeat.h)" >&2
    exit 1
fi
if command -v dpkg-architecture >/dev/null 2>&1; then
    host_arch=$(dpkg-architecture -qDEB_HOST_ARCH)
    case " $cas16_arches " in
    *" $host_arch "*) ;;
    *) echo "deb: vigil builds on $cas16_arches, not on this machine's $host_arch" >&2; exit 1 ;;
    esac
fi

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
# Source and binary packages (no -b): debian/rules clean, then dpkg-source
# makes the .dsc that lintian checks below. Debian's own tools only
# (PATH): a python3 of pyenv's or a compiler in /usr/local would otherwise
# build the packages.
(cd "$src" && env PATH=/usr/sbin:/usr/bin:/sbin:/bin DEB_BUILD_OPTIONS="nocheck parallel=2 ${DEB_BUILD_OPTIONS:-}" \
    dpkg-buildpackage -us -uc >../dpkg-buildpackage.log 2>&1) || {
    if grep -q 'dpkg-gensymbols: error' "$stage/dpkg-buildpackage.log"; then
        # The symbols the libraries export and debian/*.symbols differ: the
        # lines to add (+) or take out (-).
        sed -n '/dpkg-gensymbols: warning/,/dpkg-gensymbols: error/p' "$stage/dpkg-buildpackage.log" >&2
        echo "deb: debian/*.symbols differ from the libraries (above: + a symbol they lack, - one they list that is gone; all of them for a new soname): a new public function goes in with the version that adds it" >&2
    else
        tail -n 60 "$stage/dpkg-buildpackage.log" >&2
    fi
    echo "deb: dpkg-buildpackage failed (the whole log: $stage/dpkg-buildpackage.log)" >&2
    exit 1
}

# The packages in dist/, their debug symbols in dist/debug/ (so that
# `apt-get install ./dist/*.deb` takes the packages alone), the source
# package in dist/source/; the .changes and .buildinfo stay in build-deb/.
rm -rf dist/debug dist/source
rm -f dist/*.deb
mkdir -p dist/debug dist/source
mv "$stage"/*-dbgsym_*.*deb dist/debug/ 2>/dev/null || true
mv "$stage"/*.deb dist/
mv "$stage/vigil_$version.dsc" "$stage/vigil_$version".tar.* dist/source/
echo "deb: built in $(( $(date +%s) - start )) s:"
ls dist/*.deb dist/source/*.dsc | sed 's/^/  /'

failed=0
# ---- each library in the package its soname names; no build directory -------
# (the debug symbols, in dist/debug/, name their sources' place on purpose)
if sh scripts/deb-check.sh "$top_real/$stage" dist/*.deb >"$stage/deb-check.log" &&
    { [ "$top" = "$top_real" ] || sh scripts/deb-check.sh "$top/$stage" dist/*.deb >>"$stage/deb-check.log"; }; then
    echo "deb: each library in the package of its soname; no build directory in any packaged file"
else
    sed 's/^/deb: /' "$stage/deb-check.log" >&2
    failed=1
fi

# ---- lintian ------------------------------------------------------------------
if command -v lintian >/dev/null 2>&1; then
    # --fail-on error,warning: the source package and every binary one;
    # an info tag is printed and passes.
    if lintian --fail-on error,warning --tag-display-limit 0 dist/source/*.dsc dist/*.deb; then
        echo "deb: lintian: no error, no warning"
    else
        echo "deb: lintian found errors or warnings (above)" >&2
        failed=1
    fi
elif [ "${CI:-}" = true ]; then
    echo "deb: lintian not installed (scripts/deps.sh deb installs it)" >&2
    failed=1
else
    echo "deb: lintian not installed (scripts/deps.sh deb installs it): packages not checked" >&2
fi
exit "$failed"
