#!/usr/bin/env bash
# Run the whole test suite as CI meets it: in a fresh clone of this checkout's HEAD, with an
# empty compilation cache, while busy processes share the CPUs (same nice level), once per
# XLA CPU instruction-set setting; print pass/fail and wall time for each.
#
#   bash scripts/test_under_load.sh                      # 2 busy processes; ISA default, AVX2
#   bash scripts/test_under_load.sh --busy 0 --isa AVX2  # quiet, AVX2 only
#   bash scripts/test_under_load.sh -- -m "not slow"     # the fast loop under load
#
# --isa takes XLA's names for --xla_cpu_max_isa (SSE4_2, AVX, AVX2, AVX512, ...; "default"
# sets nothing): code generated for a narrower vector width rounds differently (other fused
# multiply-adds, other summation orders), as another CPU would.  The busy processes are Python
# loops, killed when the script ends.  Real datasets come from ../shared/data beside this
# checkout (or $GPLVM_DATA_DIR), as in CI.
set -uo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
busy=2
isas="default AVX2"
while [ $# -gt 0 ]; do
  case "$1" in
    --busy) busy=$2; shift 2 ;;
    --isa) isas=$2; shift 2 ;;
    --) shift; break ;;
    -h|--help) sed -n '2,14p' "$0"; exit 0 ;;
    *) echo "unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
if ! [[ "$busy" =~ ^[0-9]+$ ]]; then
  echo "--busy takes a number of busy processes, e.g. --busy 2" >&2; exit 2
fi
export GPLVM_DATA_DIR=${GPLVM_DATA_DIR:-$(cd "$repo/.." && pwd)/shared/data}
work=$(mktemp -d)
pids=()
suite=""
kill_tree() {  # kill_tree PID: the process and everything it started
  local child
  for child in $(pgrep -P "$1" 2>/dev/null); do kill_tree "$child"; done
  kill "$1" 2>/dev/null
}
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null; done
  [ -n "$suite" ] && kill_tree "$suite"
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
git clone -q "$repo" "$work/clone" || exit 1
echo "[load] fresh clone of $(git -C "$repo" rev-parse --short HEAD) in $work/clone"
echo "[load] $(nproc) CPUs, $busy busy processes, ISA settings: $isas; data: $GPLVM_DATA_DIR"
echo "[load] $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')," \
     "AVX-512: $(grep -q avx512f /proc/cpuinfo && echo yes || echo no)"
for ((i = 0; i < busy; i++)); do
  python3 -c "while True: pass" &
  pids+=($!)
done
results=()
status=0
for isa in $isas; do
  flags=""
  [ "$isa" != default ] && flags="--xla_cpu_max_isa=$isa"
  log="$work/suite-$isa.log"
  start=$(date +%s)
  (cd "$work/clone" && JAX_PLATFORMS=cpu XLA_FLAGS="$flags" XDG_CACHE_HOME="$work/cache-$isa" \
     bash scripts/test.sh "$@") > "$log" 2>&1 &
  suite=$!
  wait "$suite"
  rc=$?
  suite=""
  took=$(( $(date +%s) - start ))
  summary=$(grep -E "^=+ .*(passed|failed|error).* in " "$log" |
            grep -oE "[0-9]+ (passed|failed|errors?|deselected)" |
            awk '{n[$2] += $1} END {for (k in n) printf "%s %s, ", n[k], k}')
  verdict=$([ $rc -eq 0 ] && echo PASS || echo FAIL)
  results+=("$(printf '%-8s %s in %4d s (%d min %02d s): %s' "$isa" "$verdict" "$took" \
               $((took / 60)) $((took % 60)) "${summary%, }")")
  echo "[load] ISA $isa: $verdict in $took s; log below"
  grep -E "^(FAILED|ERROR) |^\[gplvm\]" "$log"
  [ $rc -ne 0 ] && status=1 && cp "$log" "/tmp/test_under_load-$isa.log" &&
    echo "[load] full log kept: /tmp/test_under_load-$isa.log"
done
echo "[load] summary ($busy busy processes beside the suite, fresh clone, empty cache):"
for line in "${results[@]}"; do echo "[load]   $line"; done
exit $status
