# hicache — top-level entry points. The real build is CMake; this file only
# names the common jobs.
#   make            release build in build/
#   make test       install missing Debian packages, ASan+UBSan build, ctest
#                   (with a local S3 gateway for the S3 tests)
#   make tsan       ThreadSanitizer build of the concurrency tests
#   make install    install the release build (PREFIX=/usr/local)
#   make bench      foundation benchmarks, figures to stdout
#   make demo       replay the Mooncake synthetic trace through L1, L2 and a file L3
#   make s3-bench   hicache's S3 backend vs curl --parallel against a local gateway
#   make fuzz       every libFuzzer target for FUZZ_SECONDS (default 60) each
#   make clang-check  the unit suite built by clang under ASan+UBSan
#   make format-check  every C file formatted as .clang-format says

PREFIX ?= /usr/local
JOBS ?= $(shell nproc)
CMAKE ?= cmake

.PHONY: all release test tsan install bench clean deps demo s3-bench ci-release fuzz format-check clang-check

all: release

release:
	$(CMAKE) -S . -B build -DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX=$(PREFIX) -DHC_BUILD_TESTS=OFF
	$(CMAKE) --build build -j $(JOBS)

deps:
	bash scripts/deps.sh

# The S3 tests run against a real gateway (scripts/s3-server.sh: Ceph's
# radosgw on 127.0.0.1, installed on first use): ctest's s3_server fixture
# starts it before the first S3 test and stops it after the last, also when
# tests fail; the trap stops it as well if ctest itself is interrupted.
test: deps
	$(CMAKE) -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DHC_SANITIZE=ON
	$(CMAKE) --build build-asan -j $(JOBS)
	cd build-asan && trap 'bash ../scripts/s3-server.sh stop "$$PWD/s3-server" >/dev/null 2>&1' EXIT INT TERM && \
		ctest --output-on-failure -j $(JOBS)

tsan: deps
	$(CMAKE) -S . -B build-tsan -DCMAKE_BUILD_TYPE=Debug -DHC_TSAN=ON -DHC_BUILD_BENCH=OFF
	$(CMAKE) --build build-tsan -j $(JOBS)
	cd build-tsan && ctest --output-on-failure -L concurrency

# The tests in the optimised build: every build type compiles them warning-
# free; the quick unit layers run (the full suite runs under ASan in test).
ci-release:
	$(CMAKE) -S . -B build-rel-tests -DCMAKE_BUILD_TYPE=Release -DHC_BUILD_BENCH=OFF
	$(CMAKE) --build build-rel-tests -j $(JOBS)
	cd build-rel-tests && ctest --output-on-failure -j $(JOBS) -R '^(util|key|mem|pool|cache|io)\.'

# Every C file as the tree's .clang-format has it (scripts/check-format.sh
# lists those that are not, with the lines that would change).
format-check:
	HC_FORMAT=1 bash scripts/deps.sh
	bash scripts/check-format.sh

# clang's UBSan checks what gcc's does not (pointer arithmetic on NULL,
# among others): the unit suites, S3 aside, built by clang.
clang-check:
	HC_FUZZ=1 bash scripts/deps.sh
	$(CMAKE) -S . -B build-clang -DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=Debug -DHC_SANITIZE=ON \
		-DHC_BUILD_BENCH=OFF
	$(CMAKE) --build build-clang -j $(JOBS)
	cd build-clang && ctest --output-on-failure -j $(JOBS) -L unit -LE s3

# libFuzzer targets (tests/fuzz/*_fuzz.c) built with clang under ASan+UBSan,
# each run for FUZZ_SECONDS from its seed corpus; any crash fails.
FUZZ_SECONDS ?= 60
fuzz:
	HC_FUZZ=1 bash scripts/deps.sh
	$(CMAKE) -S . -B build-fuzz -DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=Debug -DHC_FUZZ=ON \
		-DHC_BUILD_TESTS=OFF -DHC_BUILD_BENCH=OFF -DCMAKE_C_FLAGS_DEBUG="-g -O1"
	$(CMAKE) --build build-fuzz -j $(JOBS) --target fuzz-targets
	FUZZ_SECONDS=$(FUZZ_SECONDS) bash scripts/fuzz.sh build-fuzz

install: release
	$(CMAKE) --install build

bench: release
	bash bench/run_foundation.sh

# The L3 dir is temporary and removed however the replay ends.
demo: deps release
	@d=$$(mktemp -d) && trap 'rm -rf "$$d"' EXIT && \
	build/hicache replay data/mooncake_synthetic_trace.jsonl --l3 file:$$d

s3-bench: release
	bash bench/s3_vs_curl.sh --bin build/hicache

clean:
	rm -rf build build-asan build-tsan build-rel-tests build-fuzz build-clang
