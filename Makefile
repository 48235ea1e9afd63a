# hinge — the two Quick start commands are `make run` and `make test`.
SHELL := /bin/bash
MODEL ?= ../shared/models/stories260K.gguf
PROMPT ?=
TOKENS ?= 256
THREADS ?= 2
JOBS ?= $(shell nproc)
BUILD := build/release
HINGE := $(BUILD)/hinge

.PHONY: all deps test-deps build build-tests run check test asan-test asan-test-all fuzz bench clean

all: build

# What building and running hinge needs (scripts/install-deps); the test targets also install
# what the tests, fuzzers and benchmarks need (scripts/install-deps --test).
deps:
	@scripts/install-deps

test-deps:
	@scripts/install-deps --test

$(BUILD)/build.ninja: | deps
	cmake --preset release >/dev/null

build: deps $(BUILD)/build.ninja
	cmake --build $(BUILD) -j$(JOBS)

# A story from the default model (any model: make run MODEL=path [PROMPT="Once"] [TOKENS=N]).
run: build
	$(HINGE) run -m $(MODEL) -p "$(PROMPT)" -n $(TOKENS) -t $(THREADS)

# Configures again with HINGE_BUILD_TESTS=ON: a build that `make run` configured before the test
# packages were installed gets its tests (and the benchmarks) too.
build-tests: test-deps
	cmake --preset release -DHINGE_BUILD_TESTS=ON >/dev/null
	cmake --build $(BUILD) -j$(JOBS)

# The fast tier, the inner loop: the in-process suite (ctest label "check": unit, kernel, kv/,
# sched/, engine and server tests), no server processes. docs/development.md has the tiers.
check: build-tests
	scripts/ctest-run $(BUILD) -L check --output-on-failure -j$(JOBS) --timeout 600

# Everything (what CI runs): the check tier plus the process-level serve / js / chat tests.
test: build-tests
	scripts/ctest-run $(BUILD) --output-on-failure -j$(JOBS) --timeout 600

# The check tier under ASan + UBSan (clang; the same build holds the fuzz targets: make fuzz).
asan-test: test-deps
	cmake --preset asan -DHINGE_BUILD_TESTS=ON >/dev/null
	cmake --build build/asan -j$(JOBS) --target hinge_tests hinge
	scripts/ctest-run build/asan -L check --output-on-failure -j$(JOBS) --timeout 900

# Every tier under the sanitizers, the serve / js / chat processes too (about 3 more minutes on
# 2 cores; not in CI).
asan-test-all: test-deps
	cmake --preset asan -DHINGE_BUILD_TESTS=ON >/dev/null
	cmake --build build/asan -j$(JOBS) --target hinge_tests hinge
	scripts/ctest-run build/asan --output-on-failure -j$(JOBS) --timeout 900

fuzz: test-deps
	scripts/fuzz-ci 60

bench: test-deps
	cmake --preset release >/dev/null
	cmake --build $(BUILD) -j$(JOBS) --target hinge_kernel_bench
	$(BUILD)/hinge_kernel_bench --benchmark_min_time=0.2

clean:
	rm -rf build
