# The two commands: `make demo` and `make check`. Everything else is a
# convenience over CMake (build/ for checks, build-bench/ for timing).
BUILD       ?= build
MAKEFLAGS   += --no-print-directory
JOBS        ?= $(shell nproc 2>/dev/null || echo 2)
CMAKE_FLAGS ?=

.PHONY: all deps deps-build deps-deb build demo check test bench bench-peer sanitize sanitize-asan sanitize-tsan fuzz model stress chaos mutate rust-doc install deb deb-test clean

all: build

# Missing Debian packages, installed when root (scripts/deps.sh): deps-build
# what the build needs, deps that and what the tests use. Neither leaves a
# system service started.
deps-build:
	@sh scripts/deps.sh build

deps:
	@sh scripts/deps.sh check

build: deps-build
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo $(CMAKE_FLAGS) >/dev/null
	cmake --build $(BUILD) -j $(JOBS)

demo: build
	@if [ -x $(BUILD)/vigil ]; then $(BUILD)/vigil demo; else $(BUILD)/examples/demo; fi

# deps first, then the build (never both at once under -j: one apt-get).
check: deps
	@$(MAKE) build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS) --timeout 300

test: check

# Every multi-process and crash test (CTest label "procs": the tests that
# fork), STRESS times in a row each, stopping at the first failure. Run it
# before committing a change to one of them or to a protocol they cover.
STRESS ?= 30
# --stop-on-failure skips the fixtures' cleanup: the etcd servers are
# stopped by their _stop tests afterwards, whatever the outcome.
stress: build
	cd $(BUILD) && { ctest -L procs --repeat until-fail:$(STRESS) --stop-on-failure --output-on-failure \
	    -j $(JOBS) --timeout 600; rc=$$?; ctest -R '^etcd_.*_stop$$' >/dev/null; exit $$rc; }

bench: deps-build
	cmake -S . -B build-bench -DCMAKE_BUILD_TYPE=Release -DVIGIL_TESTS=OFF >/dev/null
	cmake --build build-bench -j $(JOBS)
	@set -e; for b in build-bench/bench/bench_*; do echo "== $$b"; $$b; echo; done

# vigil beside etcd's own Go client (clientv3/concurrency, contrib/recipes)
# on one etcd of its own, alternating: a few minutes. Go and Debian's etcd
# sources come from scripts/deps.sh bench-peer (make check never installs
# them); the Go side builds offline. OPS="lock wake" for some ops only.
bench-peer:
	@sh scripts/deps.sh bench-peer
	cmake -S . -B build-bench -DCMAKE_BUILD_TYPE=Release -DVIGIL_TESTS=OFF >/dev/null
	cmake --build build-bench -j $(JOBS) --target bench_peer
	sh bench/peer/build.sh build-bench/bench/peer
	build-bench/bench/peer/bench_peer build-bench/bench/peer/peer-clientv3 $(OPS)

sanitize: sanitize-asan sanitize-tsan

sanitize-asan: deps
	cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DVIGIL_SANITIZE=address,undefined -DVIGIL_BENCH=OFF -DVIGIL_CHAOS_SECONDS=20 >/dev/null
	cmake --build build-asan -j $(JOBS)
	cd build-asan && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
	    ctest --output-on-failure -j $(JOBS) --timeout 600

sanitize-tsan: deps
	cmake -S . -B build-tsan -DCMAKE_BUILD_TYPE=Debug -DVIGIL_SANITIZE=thread -DVIGIL_BENCH=OFF -DVIGIL_CHAOS_SECONDS=20 >/dev/null
	cmake --build build-tsan -j $(JOBS)
	cd build-tsan && TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 \
	    ctest --output-on-failure -j $(JOBS) --timeout 600

# Each libFuzzer binary starts from its harness's seeds (vigil_fuzz_seed,
# written by the replay build of the same harness) in build-fuzz/corpus/<x>,
# where it also keeps what it finds for the next run.
fuzz: deps
	cmake -S . -B build-fuzz -DCMAKE_C_COMPILER=clang -DVIGIL_FUZZ=ON -DVIGIL_BENCH=OFF >/dev/null
	cmake --build build-fuzz -j $(JOBS)
	@for f in build-fuzz/fuzz/fuzz_*; do case $$f in *_replay) continue;; esac; \
	    c=build-fuzz/corpus/$${f##*/}; mkdir -p $$c && $${f}_replay --write-seeds $$c || exit 1; \
	    echo "== $$f"; $$f $$c -max_total_time=$${FUZZ_SECONDS:-60} -rss_limit_mb=2048 || exit 1; done

# The whole system under random kills and stalls, SECONDS long (60 by
# default, as in make check).
SECONDS ?= 60
chaos: build
	CHAOS_SECONDS=$(SECONDS) $(BUILD)/tests/chaos

# The Rust crate's slower half (make check runs its unit and multi-process
# tests): every example in its documentation, the documentation with
# warnings as errors, and clippy where installed (Debian's rust-clippy).
rust-doc: deps
	@$(MAKE) build
	cd $(BUILD) && sh $(CURDIR)/rust/run.sh "$$PWD" $(CURDIR) $$([ -f libvigil-etcd.so ] && echo etcd) doc

# Every Promela model in model/, exhaustive unless a model says otherwise.
model:
	@sh model/check.sh

# One small break of src/ at a time (scripts/mutants.txt), rebuilt and
# tested in a scratch copy: each mutant's fate and the kill ratio. Not in
# CI; NAMES="a b" for some of them, QUICK=1 to skip the whole-suite sweep.
mutate:
	@sh scripts/mutate.sh $(if $(QUICK),-q) $(NAMES)

install: build
	cmake --install $(BUILD) --prefix $${PREFIX:-/usr/local}

# Debian packages of this tree in dist/ (debian/, scripts/deb.sh; lintian
# must find no error), and their test: installed, used, purged
# (scripts/deb-test.sh, as root; CI runs it).
deps-deb:
	@sh scripts/deps.sh deb

deb: deps-deb
	@sh scripts/deb.sh

# Not root: skipped, said, and not a failure (deb-test.sh exits 77).
deb-test: deb
	@sh scripts/deb-test.sh; rc=$$?; \
	if [ $$rc = 77 ]; then echo "make deb-test: SKIPPED (not root: the packages were built, not installed)"; exit 0; fi; \
	exit $$rc

clean:
	rm -rf build build-bench build-asan build-tsan build-fuzz build-deb dist
