#!/usr/bin/env bash
# Instructions per use (acquire + retire + re-arm, amortised) for the
# retiring and baseline trackers at 64, 1024 and 16384 uses in flight,
# counted by valgrind's callgrind: deterministic on noisy shared machines.
#
# Only `Steady::acquire_one` is counted (everything the tracker does for a
# use happens inside it: retirement and re-arming run when acquire needs
# them). Each configuration runs twice, with U and 2U measured uses, and the
# difference divided by U is the per-use figure: set-up and warm-up cancel.
#
# Exits 1 when a bar fails: at most 0.5 x the baseline, at most the
# ceiling below, and flat (within 20 %) from 64 to 16384 in flight.
#
# Usage: benches/instructions.sh [U]   (default U = 8192)
set -euo pipefail
cd "$(dirname "$0")/.."
uses=${1:-8192}
command -v valgrind >/dev/null || { echo "valgrind is needed (apt-get install valgrind)" >&2; exit 2; }
cargo build --release -q -p sigbench --bin instructions
bin=${CARGO_TARGET_DIR:-target}/release/instructions
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

count() { # kind in_flight uses -> instructions inside acquire_one
  valgrind --tool=callgrind --toggle-collect='sigretire_bench::workload::Steady::acquire_one' \
    --callgrind-out-file="$out/cg" "$bin" "$1" "$2" "$3" >/dev/null 2>&1
  awk '/^(summary|totals):/ { print $2; exit }' "$out/cg"
}

printf '%-9s %10s %14s\n' tracker in_flight instr/use
declare -A per_use
for in_flight in 64 1024 16384; do
  for kind in retiring baseline; do
    a=$(count "$kind" "$in_flight" "$uses")
    b=$(count "$kind" "$in_flight" $((2 * uses)))
    per_use[$kind,$in_flight]=$(awk -v a="$a" -v b="$b" -v u="$uses" 'BEGIN { printf "%.1f", (b - a) / u }')
    printf '%-9s %10s %14s\n' "$kind" "$in_flight" "${per_use[$kind,$in_flight]}"
  done
done

echo
status=0
for in_flight in 64 1024 16384; do
  ratio=$(awk -v r="${per_use[retiring,$in_flight]}" -v b="${per_use[baseline,$in_flight]}" 'BEGIN { printf "%.3f", r / b }')
  verdict=$(awk -v x="$ratio" 'BEGIN { print (x <= 0.5) ? "ok" : "FAIL" }')
  [ "$verdict" = ok ] || status=1
  printf 'in flight %-6s retiring / baseline = %s (bar <= 0.5: %s)\n' "$in_flight" "$ratio" "$verdict"
done
# The ceiling: no more per use than at the tracker's redesign, when these
# were first counted (tickets as keys had to keep that cost).
declare -A ceiling=([64]=200.5 [1024]=203.2 [16384]=206.0)
for in_flight in 64 1024 16384; do
  v=${per_use[retiring,$in_flight]}
  verdict=$(awk -v v="$v" -v c="${ceiling[$in_flight]}" 'BEGIN { print (v <= c) ? "ok" : "FAIL" }')
  [ "$verdict" = ok ] || status=1
  printf 'in flight %-6s retiring = %s (ceiling %s: %s)\n' "$in_flight" "$v" "${ceiling[$in_flight]}" "$verdict"
done
lo=${per_use[retiring,64]}; hi=$lo
for in_flight in 1024 16384; do
  v=${per_use[retiring,$in_flight]}
  lo=$(awk -v a="$lo" -v b="$v" 'BEGIN { print (b < a) ? b : a }')
  hi=$(awk -v a="$hi" -v b="$v" 'BEGIN { print (b > a) ? b : a }')
done
spread=$(awk -v lo="$lo" -v hi="$hi" 'BEGIN { printf "%.1f", 100 * (hi - lo) / lo }')
flat=$(awk -v s="$spread" 'BEGIN { print (s <= 20) ? "ok" : "FAIL" }')
[ "$flat" = ok ] || status=1
printf 'retiring spread 64..16384 in flight: %s%% (bar <= 20%%: %s)\n' "$spread" "$flat"
exit $status
