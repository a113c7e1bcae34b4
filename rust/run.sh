#!/bin/sh
# The Rust crate's tests under CTest: cargo test, offline, against this
# build's libvigil (and libvigil-etcd with "etcd"), with cargo's target
# directory inside the build directory. Debian's cargo and rustc (1.63, the
# crate's MSRV) are preferred when installed; exit 77 (CTest's skip) when
# there is no cargo at all.
#
# Usage: run.sh BUILD_DIR SOURCE_DIR [etcd] [build|doc|valgrind] [-- CARGO_TEST_ARGS...]
#   build      compile the crate, its tests and examples (CTest's rust_build,
#              so that the test's own time limit is the tests')
#   (default)  the unit, multi-process and etcd tests; the examples built
#   doc        every example in the documentation (cargo test --doc), the
#              documentation with warnings as errors, and clippy with
#              warnings as errors where it is installed
#   valgrind   the unit and multi-process tests and the examples, each
#              process under valgrind's memcheck (the children it starts
#              too, but for Python and the compiler): any error fails it
#              but the std false reports rust/valgrind.supp names; exit 77
#              without valgrind
set -u
build=$1
src=$2
shift 2
features=
if [ "${1:-}" = etcd ]; then
    features="--features etcd"
    shift
fi
mode=check
case "${1:-}" in
build|doc|valgrind)
    mode=$1
    shift
    ;;
esac
[ "${1:-}" = -- ] && shift

if [ -x /usr/bin/cargo ]; then
    # Debian's cargo with Debian's rustc and rustdoc, not a rustup
    # toolchain earlier on PATH.
    cargo=/usr/bin/cargo
    PATH=/usr/bin:$PATH
    export PATH
elif command -v cargo >/dev/null 2>&1; then
    cargo=cargo
else
    echo "rust: no cargo (apt-get install cargo): skipped"
    exit 77
fi

CARGO_TARGET_DIR=$build/rust-target
VIGIL_LIB_DIR=$build
VIGIL_INCLUDE_DIR=$src/include
LD_LIBRARY_PATH=$build${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
VIGIL_LIBRARY=${VIGIL_LIBRARY:-$build/libvigil.so}
VIGIL_PYTHONPATH=$src/python
export CARGO_TARGET_DIR VIGIL_LIB_DIR VIGIL_INCLUDE_DIR LD_LIBRARY_PATH VIGIL_LIBRARY VIGIL_PYTHONPATH
"$cargo" --version
rustc --version
manifest=$src/rust/Cargo.toml
if [ $mode = build ]; then
    # shellcheck disable=SC2086
    "$cargo" test --offline --manifest-path "$manifest" $features --lib --tests --examples --no-run "$@" || exit
    # The examples as programs too, for rust_valgrind.
    # shellcheck disable=SC2086
    exec "$cargo" build --offline --manifest-path "$manifest" $features --examples
fi
if [ $mode = check ]; then
    # shellcheck disable=SC2086
    exec "$cargo" test --offline --manifest-path "$manifest" $features --lib --tests --examples "$@"
fi
if [ $mode = valgrind ]; then
    if ! command -v valgrind >/dev/null 2>&1; then
        echo "rust: no valgrind (apt-get install valgrind): skipped"
        exit 77
    fi
    valgrind --version
    set -e
    # cargo runs every test binary and example through the target's runner.
    host=$(rustc -vV | sed -n 's/^host: //p')
    runner_var=CARGO_TARGET_$(echo "$host" | tr 'a-z-' 'A-Z_')_RUNNER
    export "$runner_var=valgrind -q --error-exitcode=99 --suppressions=$src/rust/valgrind.supp --trace-children=yes --trace-children-skip=*python*,*/cc,*/gcc*,*/cc1,*/collect2,*/ld,*/as"
    # The tests that need no etcd (the etcd adapter is libcurl's and
    # OpenSSL's under memcheck), with the features of the build above.
    # shellcheck disable=SC2086
    "$cargo" test --offline --manifest-path "$manifest" $features --lib \
        --test api --test compat --test procs --test safety_comments "$@"
    for example in worker_pool phase_barrier leader_lease; do
        echo "rust: example $example under valgrind"
        # shellcheck disable=SC2086
        "$cargo" run --offline --manifest-path "$manifest" $features --example $example
    done
    exit 0
fi
set -e
# shellcheck disable=SC2086
"$cargo" test --offline --manifest-path "$manifest" $features --doc "$@"
# shellcheck disable=SC2086
RUSTDOCFLAGS="-D warnings" "$cargo" doc --offline --no-deps --manifest-path "$manifest" $features
# With Debian's cargo, only Debian's clippy (rust-clippy: the same rustc
# 1.63), never a rustup cargo-clippy found later on PATH, which would
# check with another toolchain.
clippy=no
if [ "$cargo" = /usr/bin/cargo ]; then
    [ -x /usr/bin/cargo-clippy ] && clippy=yes
elif "$cargo" clippy --version >/dev/null 2>&1; then
    clippy=yes
fi
if [ $clippy = yes ]; then
    "$cargo" clippy --version
    # shellcheck disable=SC2086
    "$cargo" clippy --offline --manifest-path "$manifest" $features --all-targets -- -D warnings
else
    echo "rust: no clippy for this cargo (apt-get install rust-clippy): clippy skipped"
fi
