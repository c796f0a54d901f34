#!/bin/bash
# Run every libFuzzer target of a -DHC_FUZZ=ON build for FUZZ_SECONDS each
# (default 60) under ASan+UBSan, starting from its committed seed corpus.
#   scripts/fuzz.sh BUILD_DIR [TARGET...]
# New inputs go to BUILD_DIR/fuzz-work/<target>/corpus (the committed seeds
# are never written); a crash leaves its input in
# BUILD_DIR/fuzz-work/<target>/crash-* and makes the script exit 1 after
# the other targets ran. Prints one summary line per target: executions,
# executions per second, corpus size.
set -uo pipefail
build=${1:?usage: fuzz.sh BUILD_DIR [TARGET...]}
shift
src=$(cd "$(dirname "$0")/.." && pwd)
secs=${FUZZ_SECONDS:-60}
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
export HICACHE_LOG=${HICACHE_LOG:-off}
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
	for f in "$src"/tests/fuzz/*_fuzz.c; do
		[ -e "$f" ] || continue
		t=$(basename "$f" _fuzz.c)
		targets+=("$t")
	done
fi
failed=()
for t in "${targets[@]}"; do
	bin="$build/tests/fuzz/fuzz_$t"
	if [ ! -x "$bin" ]; then
		echo "fuzz: $t: $bin not built (cmake -DHC_FUZZ=ON)" >&2
		failed+=("$t")
		continue
	fi
	work="$build/fuzz-work/$t"
	mkdir -p "$work/corpus"
	seeds="$src/tests/fuzz/corpus/$t"
	[ -d "$seeds" ] || seeds=""
	log="$work/log"
	"$bin" -max_total_time="$secs" -print_final_stats=1 -timeout=10 -rss_limit_mb=2048 \
		-artifact_prefix="$work/" "$work/corpus" $seeds >"$log" 2>&1
	rc=$?
	execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
	rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
	files=$(find "$work/corpus" -type f | wc -l)
	if [ $rc -ne 0 ]; then
		echo "fuzz: $t: FAILED (exit $rc) after ${execs:-?} executions; see $log" >&2
		grep -E "ERROR|SUMMARY|Test unit written" "$log" | head -5 >&2
		failed+=("$t")
	else
		echo "fuzz: $t: ${execs:-?} executions in ${secs} s (${rate:-?}/s), corpus $files files"
	fi
done
if [ ${#failed[@]} -ne 0 ]; then
	echo "fuzz: failed: ${failed[*]}" >&2
	exit 1
fi
