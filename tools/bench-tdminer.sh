#!/usr/bin/env bash
# Times `synfire mine` against tdminer-cpp (Patnaik's C++ tdminer,
# https://github.com/patnaikd/tdminer-cpp) on the same `label,time` CSV, intervals, support
# (occurrences per second of the span) and thread count, alternating runs, and prints a table
# of medians with the number of frequent episodes each reports. tdminer-cpp is built from the
# checkout given in TDMINER_SRC inside a temporary directory; nothing of it enters this
# repository. It is a benchmark, never a test dependency. tdminer stores times as f32, so its
# counts may differ from synfire's exact ones; the episode totals are printed side by side.
#
# tdminer keeps at most 50 times per episode state unless told more (`-z`); past that it prints
# "Overflow in time stamp array" and stops after level 1, so TDMINER_EXTRA defaults to
# `-z 100000`. It stores event types in one byte: an input with more than 256 labels is
# refused here (tdminer would silently merge types 256 apart).
#
# Usage: TDMINER_SRC=DIR tools/bench-tdminer.sh INPUT.csv INTERVALS SUPPORT_PER_S MAX_LEVEL THREADS [RUNS]
#   e.g. TDMINER_SRC=/path/to/tdminer-cpp tools/bench-tdminer.sh /tmp/np.csv \
#        0.000-0.005,0.005-0.010 2.0 3 2 3
set -euo pipefail
input=$1 intervals=$2 support=$3 max_level=$4 threads=$5 runs=${6:-3}
: "${TDMINER_SRC:?set TDMINER_SRC to a checkout of tdminer-cpp}"
here=$(cd "$(dirname "$0")/.." && pwd)
synfire=${SYNFIRE:-$here/target/release/synfire}
extra=${TDMINER_EXTRA:--z 100000}
labels=$(tail -n +2 "$input" | cut -d, -f1 | sort -u | wc -l)
if [ "$labels" -gt 256 ]; then
    echo "$input has $labels labels: tdminer-cpp stores event types in one byte (at most 256)" >&2
    exit 2
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp -r "$TDMINER_SRC"/. "$work/td"
(cd "$work/td" && rm -f tdminer ./*.o && make -s >/dev/null 2>&1)
# tdminer's interval file: one "low high" pair per line.
tr ',' '\n' <<<"$intervals" | tr '-' ' ' >"$work/ivl.txt"
median() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
td_times=() sy_times=()
for _ in $(seq "$runs"); do
    t0=$(date +%s.%N)
    # shellcheck disable=SC2086
    "$work/td/tdminer" -t "$threads" $extra -i "$work/ivl.txt" -m "$max_level" -s "$input" "$work/td.out" "$support" >"$work/td.log" 2>&1 || true
    if grep -q Overflow "$work/td.log"; then
        echo "tdminer overflowed its timestamp lists; raise -z in TDMINER_EXTRA" >&2
        exit 3
    fi
    t1=$(date +%s.%N)
    "$synfire" mine "$input" --threads "$threads" --intervals "$intervals" --support "$support" \
        --support-per seconds --max-level "$max_level" --device cpu -q >"$work/sy.out" 2>/dev/null
    t2=$(date +%s.%N)
    td_times+=("$(echo "$t1 - $t0" | bc)") sy_times+=("$(echo "$t2 - $t1" | bc)")
done
td_eps=$(grep -c ':' "$work/td.out" || true)
sy_eps=$(grep -vc '^#' "$work/sy.out" || true)
echo "| tool | threads | median s ($runs runs) | frequent episodes |"
echo "|---|---:|---:|---:|"
echo "| tdminer-cpp | $threads | $(printf '%s\n' "${td_times[@]}" | median) | $td_eps |"
echo "| synfire (cpu) | $threads | $(printf '%s\n' "${sy_times[@]}" | median) | $sy_eps |"
