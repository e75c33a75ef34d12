# The two commands of the README: `make run` and `make test`. Both install what is
# missing (Debian packages, as root), configure and build with CMake presets first.
PRESET ?= release
BUILD  := build/$(PRESET)
BIN    := $(BUILD)/bin
PORT   ?= 1974
DATA   ?= data
ARGS   ?=
SUITE  ?=

.PHONY: all deps configure build test test-unit run bench bench-quant format clean

all: build

deps:
	@bash scripts/deps.sh

configure: deps
	@test -f $(BUILD)/build.ninja || cmake --preset $(PRESET)

build: configure
	cmake --build --preset $(PRESET)

test: build
	ctest --preset $(PRESET)

test-unit: build
	ctest --preset $(PRESET) -L unit

run: build
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
