#!/usr/bin/env bash
# The multi-core scaling sweep (DEVELOPERS.md "Multi-core scaling"), made to
# run on a lent machine that has no DPDK and no package registry.
#
#   bench/multicore_device.sh bundle [BUNDLE]       here: release build of uroce, then
#       BUNDLE (default build-mc-bundle) = bin/uroce (stripped) and beside it
#       uroce's libibverbs/ and librdmacm/, perftest/ (Debian's ib_send_lat,
#       ib_write_lat, ib_write_bw), lib/ (every shared library those and the
#       PMDs load except glibc's and the verbs ones), pmds/ (the EAL plugins
#       the runs need: bus_vdev, mempool_ring, net_memif, loaded with EAL -d).
#   bench/multicore_device.sh run [BUNDLE]          there (or here): the sweep.
#       uroce bench-mc --workload rate at ENGINES (default "1 2 4 8", those that
#       fit: each side needs N engine CPUs) x REPS (3) runs each, QPS_PER_ENGINE
#       (8) RC QPs per engine, DEPTH (32) 64 B WRITEs in flight per QP, SECONDS (3)
#       measured after 1 s of warm-up; then one verified run at the largest N.
#       Prints every run, the median per N, the speed-up over N = 1 and the
#       target (8 engines >= 6x one engine); exit 1 if a run failed. Results
#       also go to $OUT/multicore.txt when OUT is set (the device tool's folder).
#       KINDS (default "engines pairs"): pairs is, for each N, the machine's own floor:
#       N independent one-engine pairs at once (2N processes, N memif links,
#       nothing shared, on the CPUs the N-engine run uses), their rates summed.
#       Its speed-up is what the CPUs themselves allow (all-core clock, shared
#       caches, the host under the VM); engines/pairs is the group's own cost.
#   bench/multicore_device.sh compare [BUNDLE]      there (or here): `uroce compare`
#       from the bundle, the stack against kernel TCP and the memif floor (see
#       run_compare below); the JSON also to $OUT/compare.json.
#   bench/multicore_device.sh cost [BUNDLE]         there (or here): bench/verbs_cost.sh
#       from the bundle, stock perftest under `uroce run` against `uroce perf`.
#   bench/multicore_device.sh all [BUNDLE]          run, compare and cost (twice, see run_all).
#
# With the lead's device tool (one H200 box, 16 cores, 15 minutes per session):
#   bench/multicore_device.sh bundle
#   run(command="bench/multicore_device.sh all", carry=["build-mc-bundle"], timeout_s=540)
# Each sweep run takes about 5 s (start-up, warm-up, 3 s measured): on the
# 16-core machine the default sweep (4 counts x 3 runs x 2 kinds) about 2.5
# minutes, compare and each cost about 1 minute, plus about 1.5 minutes to
# start the machine. ENGINES="1 2 4 8 12" REPS=5 widen the sweep.
set -euo pipefail
cd "$(dirname "$0")/.."
cmd=${1:-}
bundle=${2:-build-mc-bundle}
pmd_dir=/usr/lib/x86_64-linux-gnu/dpdk/pmds-23.0
pmds=(librte_bus_vdev librte_mempool_ring librte_net_memif)
perftest=(ib_send_lat ib_write_lat ib_write_bw)  # the tests bench/verbs_cost.sh runs

make_bundle() {
  local build=build-bench
  [[ -f $build/build.ninja ]] || meson setup "$build" --buildtype=release
  # uroce's libibverbs and librdmacm: the files meson names for the targets.
  local abi
  mapfile -t abi < <(meson introspect --targets "$build" | python3 -c '
import json, os, sys
for t in json.load(sys.stdin):
    if t["name"] in ("ibverbs", "rdmacm") and t["type"] == "shared library":
        print(os.path.relpath(t["filename"][0], sys.argv[1]))' "$build")
  ninja -C "$build" apps/uroce "${abi[@]}"
  rm -rf "$bundle"
  mkdir -p "$bundle/bin" "$bundle/lib" "$bundle/pmds" "$bundle/perftest"
  cp "$build/apps/uroce" "$bundle/bin/uroce"
  strip "$bundle/bin/uroce"
  local objs=("$build/apps/uroce")
  # Where `uroce run` looks for them: beside its own binary.
  for d in libibverbs librdmacm; do
    mkdir -p "$bundle/bin/$d"
    cp -L "$build/apps/$d/$d.so.1" "$bundle/bin/$d/"
    strip "$bundle/bin/$d/$d.so.1"
    objs+=("$build/apps/$d/$d.so.1")
  done
  for t in "${perftest[@]}"; do
    cp "$(command -v "$t")" "$bundle/perftest/"
    objs+=("$(command -v "$t")")
  done
  for p in "${pmds[@]}"; do
    cp -L "$pmd_dir/$p.so.23" "$bundle/pmds/$p.so"  # EAL -d DIR loads *.so and *.so.23.0 only
    objs+=("$pmd_dir/$p.so.23")
  done
  # Every library those load, but glibc's own (the target runs its glibc; a
  # bundled libc would need the bundled ld.so, and bench-mc re-executes itself)
  # and the verbs libraries (`uroce run` puts uroce's first).
  ldd "${objs[@]}" | awk '$2 == "=>" && $3 ~ /^\// {print $3}' | sort -u | while read -r lib; do
    case $(basename "$lib") in
      libc.so.*|libm.so.*|libpthread.so.*|libdl.so.*|librt.so.*|ld-linux*|libibverbs.so.*|librdmacm.so.*) ;;
      *) cp -L "$lib" "$bundle/lib/" ;;
    esac
  done
  git rev-parse --short HEAD > "$bundle/COMMIT"
  ldd --version | head -1 > "$bundle/GLIBC"
  du -sh "$bundle"
  echo "bundle: $bundle (commit $(cat "$bundle/COMMIT")); run it with: bench/multicore_device.sh all $bundle"
}

median() { sort -g | awk '{v[NR]=$1} END {if (NR == 0) print 0; else if (NR % 2) print v[(NR+1)/2]; else print (v[NR/2]+v[NR/2+1])/2}'; }

# A machine with DPDK installed (this one, when the script is tested here)
# would load its own plugins beside the bundle's (EAL panics on the
# duplicates) or instead of them: the command ($1) runs again in a private
# mount namespace with DPDK's plugin directory hidden under an empty one, as
# bare as on the lent box. Returns only where there is nothing to hide (or
# no way to hide it); else exits with the command's status.
rerun_with_dpdk_hidden() {
  [[ -d $pmd_dir && -z ${UROCE_BUNDLE_NS:-} ]] || return 0
  if [[ $(id -u) != 0 ]] || ! command -v unshare > /dev/null; then
    echo "# DPDK is installed here and its plugins cannot be hidden (needs root): the bundle's may clash" >&2
    return 0
  fi
  local empty rc=0
  empty=$(mktemp -d)
  echo "# DPDK is installed here: running with $pmd_dir hidden (private mount namespace)"
  UROCE_BUNDLE_NS=1 unshare -m bash -c 'mount --bind "$1" "$2" && exec "$3" "$4" "$5"' _ "$empty" "$pmd_dir" \
    "$0" "$1" "$bundle" || rc=$?
  rm -rf "$empty"
  exit $rc
}

# Runs a command whose processes take uroce's default EAL arguments
# (compare's children, the verbs library in a perftest): they find the PMDs
# in DPDK's own plugin directory only. Where it is missing (the lent box) the
# bundle's go there for the command and are removed after; where it is hidden
# (here) they go into the empty directory over it. Returns the command's status.
with_bundle_pmds() {
  local made="" rc=0
  if [[ ! -d $pmd_dir ]]; then
    made=$pmd_dir
    while [[ ! -d $(dirname "$made") ]]; do made=$(dirname "$made"); done
    mkdir -p "$pmd_dir"
  fi
  [[ -n $(ls -A "$pmd_dir") ]] || cp "$b"/pmds/*.so "$pmd_dir/"
  "$@" || rc=$?
  [[ -z $made ]] || rm -rf "$made"
  return $rc
}

cpu_model() { grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'; }

# The bundle's uroce, with its libraries on the path; sets b and uroce.
use_bundle() {
  [[ -x $bundle/bin/uroce ]] || { echo "no bundle at $bundle: run '$0 bundle' first" >&2; exit 2; }
  b=$(cd "$bundle" && pwd)
  [[ :${LD_LIBRARY_PATH:-}: == *":$b/lib:"* ]] || export LD_LIBRARY_PATH=$b/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  uroce=$b/bin/uroce
}

run_sweep() {
  rerun_with_dpdk_hidden run
  local b uroce
  use_bundle
  local cpus engines reps=${REPS:-3} qpe=${QPS_PER_ENGINE:-8} depth=${DEPTH:-32} secs=${SECONDS_PER_RUN:-3}
  cpus=$(nproc)
  local log=${OUT:-/tmp}/multicore.txt
  : > "$log"
  say() { echo "$*" | tee -a "$log"; }
  say "# multicore sweep: $(hostname), $cpus CPUs ($(cpu_model)), bundle commit $(cat "$b/COMMIT"), built with $(cat "$b/GLIBC")"
  say "# target machine: $(ldd --version | head -1); load: $(cut -d' ' -f1-3 /proc/loadavg)"
  # EAL: the PMD plugins from the bundle; bench-mc adds each side's lcore map.
  local eal=(--no-huge --no-pci --no-shconf -m 1024 -d "$b/pmds" --log-level=lib.*:error --log-level=pmd.net.memif:critical)
  engines=()
  for n in ${ENGINES:-1 2 4 8}; do
    if (( n <= cpus )); then
      engines+=("$n")
      (( 2 * n <= cpus )) || say "# $n engines: $cpus CPUs cannot give each side its own, the engine lcores float (the rate then measures the scheduler)"
    else
      say "# skipping $n engines: only $cpus CPUs"
    fi
  done
  local rate_args=(--depth "$depth" --seconds "$secs" --timeout 30)
  rate_of() { awk '/^#engines/ {getline; print $6}' <<<"$1"; }
  # One bench-mc run of n engines a side; prints its rate.
  engines_rate() {
    local out
    if out=$("$uroce" bench-mc "${eal[@]}" -- --engines "$1" --qps $((qpe * $1)) "${rate_args[@]}" --warmup 1 2>&1); then
      rate_of "$out"
    else
      tail -n 8 <<<"$out" >&2
      return 1
    fi
  }
  # n one-engine pairs at once, pair k on the CPUs of engine k+1 in an n-engine
  # run (server k, client n+k; each process's main lcore beside its engine);
  # a 2 s warm-up covers their staggered starts. As `uroce bench-mc` does, a
  # client starts once its server has made the memif socket (a memif client
  # does not retry). Prints the summed rate.
  pairs_rate() {
    local n=$1 k dirs=() pids=() sum=0 bad=0
    start_side() {  # side, pair, CPU
      "$uroce" bench-mc "${eal[@]}" --lcores="0@$3,1@$3" -- --role="$1" --dir="${dirs[$2]}" --engines 1 \
        --qps "$qpe" "${rate_args[@]}" --warmup 2 > "${dirs[$2]}/$1.out" 2>&1 &
      pids+=($!)
    }
    for ((k = 0; k < n; ++k)); do
      dirs+=("$(mktemp -d)")
      start_side server "$k" "$k"
    done
    for ((k = 0; k < n; ++k)); do
      local tries=0
      while [[ ! -S ${dirs[k]}/memif.sock ]] && (( tries++ < 300 )); do sleep 0.1; done
      start_side client "$k" $((n + k))
    done
    local p
    for p in "${pids[@]}"; do wait "$p" || bad=1; done
    for d in "${dirs[@]}"; do
      local r
      r=$(rate_of "$(cat "$d/client.out")")
      if [[ -z $r ]]; then bad=1; tail -n 8 "$d/client.out" "$d/server.out" >&2; fi
      sum=$(awk -v a="$sum" -v b="${r:-0}" 'BEGIN {print a + b}')
      rm -rf "$d"
    done
    (( bad == 0 )) && echo "$sum"
  }
  local failed=0 base=0 pbase=0 kinds
  read -r -a kinds <<<"${KINDS:-engines pairs}"
  declare -A med
  for n in "${engines[@]}"; do
    local kind
    for kind in "${kinds[@]}"; do
      if [[ $kind == pairs ]] && (( 2 * n > cpus )); then
        say "# pairs=$n: needs $((2 * n)) CPUs, this machine has $cpus"
        continue
      fi
      local rates=() rate
      for ((r = 1; r <= reps; ++r)); do
        if rate=$("${kind}_rate" "$n" 2> >(tee -a "$log" >&2)); then
          rates+=("$rate")
          say "$kind=$n run=$r Mmsg/s=$rate"
        else
          failed=1
          say "$kind=$n run=$r FAILED"
        fi
      done
      (( ${#rates[@]} )) || continue
      med[$kind$n]=$(printf '%s\n' "${rates[@]}" | median)
    done
  done
  base=${med[engines1]:-0}
  pbase=${med[pairs1]:-0}
  ratio() { awk -v a="${1:-}" -v b="${2:-}" 'BEGIN {print (a != "" && b > 0 ? sprintf("%.2f", a / b) : "-")}'; }
  say ""
  say "# median of $reps runs, $qpe QPs per engine, depth $depth, 64 B RDMA WRITE, $secs s each"
  say "$(printf '%-8s %-12s %-14s %-14s %-12s %s' engines Mmsg/s 'x one engine' 'pairs Mmsg/s' 'x one pair' 'engines/pairs')"
  for n in "${engines[@]}"; do
    local e=${med[engines$n]:-} p=${med[pairs$n]:-}
    say "$(printf '%-8s %-12s %-14s %-14s %-12s %s' "$n" "${e:--}" "$(ratio "$e" "$base")" "${p:--}" \
           "$(ratio "$p" "$pbase")" "$(ratio "$e" "$p")")"
  done
  if [[ -n ${med[engines8]:-} && $base != 0 ]]; then
    say "# target: 8 engines >= 6x one engine: $(awk -v a="${med[engines8]}" -v b="$base" 'BEGIN {printf "%.2fx: %s", a / b, (a / b >= 6 ? "met" : "missed")}')"
  elif (( cpus < 16 )); then
    say "# target (8 engines >= 6x one engine) not measured: needs 16 CPUs, this machine has $cpus"
  else
    say "# target (8 engines >= 6x one engine) not measured: needs 1 and 8 in ENGINES and engines in KINDS"
  fi
  local top=${engines[${#engines[@]}-1]}
  if "$uroce" bench-mc "${eal[@]}" -- --engines "$top" --qps $((qpe * top)) --workload verify --rounds 20 \
       --placement cross --timeout 30 > "${log%.txt}-verify.txt" 2>&1; then
    say "# verify, $top engines, cross placement: every op checked, PASS"
  else
    failed=1
    say "# verify, $top engines, cross placement: FAILED (see ${log%.txt}-verify.txt)"
  fi
  return $failed
}

# `uroce compare` from the bundle, which issue 20 asks for on the 16-core
# machine beside the sweep: the stack, kernel TCP (blocking and busy-polling,
# on 127.0.0.1) and the multi-frame memif floor, ROUNDS (3) interleaved
# rounds at SIZES (64,65536,1048576) on COMPARE_CPUS (2,3; 0,1 where
# fewer than 4), each measurement shorter than compare's defaults to fit the
# lease (COMPARE_ARGS replaces those limits). The table goes to stderr, the
# JSON to $OUT/compare.json. About 1 minute (one round at the three sizes:
# 20 s on AMD EPYC Zen 1).
run_compare() {
  rerun_with_dpdk_hidden compare
  local b uroce
  use_bundle
  local limits
  read -r -a limits <<<"${COMPARE_ARGS:---lat-iters 5000 --lat-bytes 268435456 --bw-msgs 100000 --bw-bytes 67108864 --floor-seconds 0.5}"
  local json=${OUT:-/tmp}/compare.json cpus=${COMPARE_CPUS:-2,3}
  (( $(nproc) >= 4 )) || cpus=${COMPARE_CPUS:-0,1}
  echo "# uroce compare: $(hostname), $(nproc) CPUs ($(cpu_model)), bundle commit $(cat "$b/COMMIT"); load: $(cut -d' ' -f1-3 /proc/loadavg)"
  with_bundle_pmds "$uroce" compare --rounds "${ROUNDS:-3}" --sizes "${SIZES:-64,65536,1048576}" \
    --kinds stack,tcp-block,tcp-busy,floor --cpus "$cpus" "${limits[@]}" --json > "$json"
}

# Issue 19's cost of the verbs ABI layer, bench/verbs_cost.sh, from the
# bundle: stock perftest (the bundle's copies of Debian's) under `uroce run`
# beside `uroce perf`, COST_ROUNDS (3) interleaved rounds; on the 16-core
# machine every thread has a CPU of its own, which the 2-CPU machines here
# never gave write_lat. The rows also go to $OUT/verbs_cost.txt, or with
# UROCE_PROGRESS set (the library's progress mode) verbs_cost-MODE.txt.
run_cost() {
  rerun_with_dpdk_hidden cost
  local b uroce
  use_bundle
  with_bundle_pmds env PATH="$b/perftest:$PATH" UROCE="$uroce" bench/verbs_cost.sh "" "${COST_ROUNDS:-3}" |
    tee "${OUT:-/tmp}/verbs_cost${UROCE_PROGRESS:+-$UROCE_PROGRESS}.txt"
}

# All of it in one call of the device tool: the sweep first (it loads the
# PMDs with -d; after compare has put them in DPDK's directory too, here,
# EAL would find each twice), then compare, then cost in the library's
# default progress mode and with an engine thread of its own
# (UROCE_PROGRESS=thread, which needs a CPU for each busy thread). Exit 1 if
# one failed.
run_all() {
  rerun_with_dpdk_hidden all
  local rc=0
  run_sweep || rc=1
  run_compare || rc=1
  run_cost || rc=1
  UROCE_PROGRESS=thread run_cost || rc=1
  return $rc
}

case $cmd in
  bundle) make_bundle ;;
  run) run_sweep ;;
  compare) run_compare ;;
  cost) run_cost ;;
  all) run_all ;;
  *) sed -n '2,37p' "$0"; exit 2 ;;
esac
