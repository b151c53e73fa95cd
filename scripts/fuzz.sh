#!/usr/bin/env bash
# Fuzz jig's parsers with coverage guidance: AFL++ through afl.rs on the stable toolchain (`make fuzz`). Each
# target in fuzz/targets runs for FUZZ_SECONDS (60 by default), starting from its seeds in fuzz/corpus/TARGET
# or, on later runs, from the queue it left in .jig/fuzz/TARGET; crashes and hangs are kept there. Prints, per
# target, the inputs run this time and in all runs so far (.jig/fuzz/totals.csv), and what it found.
# Usage: [FUZZ_SECONDS=60] [TARGETS="manifest oip"] scripts/fuzz.sh
set -euo pipefail
cd "$(dirname "$0")/.."
tools=.jig/tools
export PATH="$PWD/$tools/bin:$PATH"
if ! command -v cargo-afl >/dev/null; then
    echo "fuzz: installing cargo-afl (afl.rs, which builds AFL++) into $tools"
    cargo install --locked --quiet cargo-afl@0.18.2 --root "$tools"
fi
(cd fuzz && cargo afl build --release --quiet)
seconds=${FUZZ_SECONDS:-60}
targets=${TARGETS:-manifest bundle envelope worker_protocol node_protocol oip}
# No core-dump handler or CPU governor to tune on a shared machine; no screen to draw on.
export AFL_SKIP_CPUFREQ=1 AFL_I_DONT_CARE_ABOUT_MISSING_CRASHES=1 AFL_NO_UI=1
mkdir -p .jig/fuzz
totals=.jig/fuzz/totals.csv
[ -f "$totals" ] || echo "date,target,seconds,inputs,crashes,hangs" > "$totals"
found=0
for target in $targets; do
    out=.jig/fuzz/$target
    input=fuzz/corpus/$target
    before=0
    if [ -d "$out/default/queue" ]; then
        input=-   # resume from the queue the last run left; afl-fuzz then counts on from its last total
        before=$(awk -F' *: *' '$1 == "execs_done" { print $2 }' "$out/default/fuzzer_stats" 2>/dev/null || echo 0)
    fi
    echo "fuzz: $target for $seconds s"
    cargo afl fuzz -i "$input" -o "$out" -V "$seconds" "fuzz/target/release/$target" > "$out.log" 2>&1 || {
        echo "fuzz: afl-fuzz failed on $target; its output is in $out.log" >&2
        exit 1
    }
    stat() { awk -F' *: *' -v k="$1" '$1 == k { print $2 }' "$out/default/fuzzer_stats"; }
    inputs=$(( $(stat execs_done) - ${before:-0} )) crashes=$(stat saved_crashes) hangs=$(stat saved_hangs)
    echo "$(date -u +%F),$target,$seconds,$inputs,$crashes,$hangs" >> "$totals"
    all=$(awk -F, -v t="$target" '$2 == t { n += $4 } END { print n }' "$totals")
    echo "fuzz: $target: $inputs inputs ($all in all runs), $crashes crashes, $hangs hangs"
    if [ "$crashes" != 0 ] || [ "$hangs" != 0 ]; then
        found=1
        echo "fuzz: $target: findings in $out/default/crashes and $out/default/hangs" >&2
    fi
done
exit $found
