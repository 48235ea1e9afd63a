# hinge — the two Quick start commands are `make run` and `make test`.
SHELL := /bin/bash
MODEL ?= ../shared/models/stories260K.gguf
PROMPT ?=
TOKENS ?= 256
THREADS ?= 2
JOBS ?= $(shell nproc)
BUILD := build/release
HINGE := $(BUILD)/hinge

.PHONY: all deps test-deps build run test asan-test fuzz bench clean

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
test: test-deps
	cmake --preset release -DHINGE_BUILD_TESTS=ON >/dev/null
	cmake --build $(BUILD) -j$(JOBS)
	cd $(BUILD) && ctest --output-on-failure -j$(JOBS) --timeout 600

# ASan + UBSan over the test suite (it is fast enough to run whole: under a minute).
asan-test: test-deps
	cmake --preset asan -DHINGE_BUILD_TESTS=ON >/dev/null
	cmake --build build/asan -j$(JOBS) --target hinge_tests hinge
	cd build/asan && ctest --output-on-failure -j$(JOBS) --timeout 900

fuzz: test-deps
	scripts/fuzz-ci 60

bench: test-deps
	cmake --preset release >/dev/null
	cmake --build $(BUILD) -j$(JOBS) --target hinge_kernel_bench
	$(BUILD)/hinge_kernel_bench --benchmark_min_time=0.2

clean:
	rm -rf build
