# The two commands of the README: `make run` and `make test`. Both install what is
# missing (Debian packages, as root), configure and build with CMake presets first.
# `make test` runs every CTest entry of the release build, then the libFuzzer targets
# for a bounded time each (fuzz preset, clang); `make test-sanitize` runs the unit and
# integration suites under ASan+UBSan (dev preset), the store, persist and
# concurrency tests under TSan (tsan preset) and clang's thread-safety analysis
# (thread-safety preset); `make test-conformance` runs Redis's own Tcl suite and
# redis-py's tests against pion-server (tests/conformance). CONTRIBUTING.md has
# the details.
PRESET ?= release
BUILD  := build/$(PRESET)
BIN    := $(BUILD)/bin
PORT   ?= 1974
DATA   ?= data
ARGS   ?=
SUITE  ?=

.PHONY: all deps configure build test test-unit test-fuzz test-sanitize test-asan test-tsan test-tsa \
        test-conformance run bench bench-quant format clean

all: build

deps:
	@bash scripts/deps.sh

configure: deps
	@test -f $(BUILD)/build.ninja || cmake --preset $(PRESET)

build: configure
	cmake --build --preset $(PRESET)

test: build
	ctest --preset $(PRESET)
	@$(MAKE) --no-print-directory test-fuzz

# libFuzzer targets, PION_FUZZ_SECONDS (30) each, seeds from tests/fuzz/corpus.
test-fuzz: deps
	@test -f build/fuzz/build.ninja || cmake --preset fuzz
	cmake --build --preset fuzz
	ctest --preset fuzz

test-sanitize: test-tsa test-asan test-tsan

# clang's thread-safety analysis over the annotated libraries (base, persist,
# store, kvproto, server): -fsyntax-only, so a front-end pass and nothing else; a lock misuse
# fails the build (base/thread_annotations.h).
test-tsa: deps
	@test -f build/thread-safety/build.ninja || cmake --preset thread-safety
	cmake --build --preset thread-safety

# Debug + AddressSanitizer + UBSan: unit and integration suites (the pytest files
# run against build/dev/bin/pion-server; a sanitizer report fails the test).
test-asan: deps
	@test -f build/dev/build.ninja || cmake --preset dev
	cmake --build --preset dev
	ctest --preset sanitize

# ThreadSanitizer: store, persist and connection unit tests and the pytest tests
# marked `concurrency`. setarch -R: TSan's fixed memory layout breaks under kernels with
# 30+ bits of mmap randomisation; without ASLR it always fits.
test-tsan: deps
	@test -f build/tsan/build.ninja || cmake --preset tsan
	cmake --build --preset tsan
	setarch $$(uname -m) -R ctest --preset tsan

# Redis 7.0.15's Tcl suite and redis-py's tests (from Debian's source packages, fetched
# once into build/conformance/src) against the release pion-server; fails when a test of
# tests/conformance/must_pass.txt does not pass, a file hangs or the server crashes.
# CONFORMANCE_ARGS: --update (rewrite the list), --baseline (also run redis-server),
# --files unit/expire,test_pipeline.py (a subset).
CONFORMANCE_ARGS ?=
test-conformance: configure
	@bash scripts/deps.sh --conformance
	cmake --build --preset $(PRESET) --target pion-server
	/usr/bin/python3 tests/conformance/run_conformance.py --bin $(BIN)/pion-server $(CONFORMANCE_ARGS)

test-unit: build
	ctest --preset $(PRESET) -L unit

# Builds only the server (not the tests and benchmarks `make test` builds).
run: configure
	cmake --build --preset $(PRESET) --target pion-server
	mkdir -p $(DATA)
	$(BIN)/pion-server --kvcache --port $(PORT) --dir $(DATA) $(ARGS)

bench-quant: build
	$(BIN)/bench_quant --benchmark_min_time=0.2

bench: build
	@bash scripts/deps.sh --bench
	/usr/bin/python3 bench/run.py --build $(BUILD) $(if $(SUITE),--suite $(SUITE),)

format:
	clang-format -i $$(git ls-files '*.h' '*.cc')

clean:
	rm -rf build
