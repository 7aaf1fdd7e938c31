#!/usr/bin/env bash
# Garbage collections of `veer gateway` (bare config, GOMAXPROCS=1, core 1) over N proxied requests
# (hey -c 64 on core 0, after a 2 000-request warm-up), for each GC heap floor given: the cycles,
# the collector's CPU summed from GODEBUG=gctrace=1 (per request), the RSS at the end and the last
# cycle's line. docs/gateway.md, "Defaults, and why" (GC heap floor).
#
#   scripts/gateway-gc.sh [VEER] [N] [FLOOR_MIB...]     # defaults: bin/veer 50000 0 16 32
#
# Needs hey and bin/gatewaybench (the backend). Ports 18390-18391 on 127.0.0.1.
set -u
veer=${1:-bin/veer} n=${2:-50000}
shift $(($# < 2 ? $# : 2))
floors=("$@")
[ ${#floors[@]} -gt 0 ] || floors=(0 16 32)
dir=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null; wait 2>/dev/null; rm -rf "$dir"' EXIT
cat >"$dir/v.yaml" <<YAML
listen: {addr: 'off', plain: '127.0.0.1:18391'}
data_dir: $dir
routes: [{name: r, clusters: [{name: c}]}]
clusters: [{name: c, max_idle_per_backend: 256, backends: [{address: '127.0.0.1:18390'}]}]
retry: {disabled: true}
YAML
taskset -c 0 bin/gatewaybench -role backend -listen 127.0.0.1:18390 >/dev/null 2>&1 &
for fl in "${floors[@]}"; do
  GODEBUG=gctrace=1 GOMAXPROCS=1 taskset -c 1 "$veer" gateway --config "$dir/v.yaml" \
    --gc-heap-floor-mib "$fl" >/dev/null 2>"$dir/err" &
  v=$!
  for _ in $(seq 100); do curl -s -o /dev/null http://127.0.0.1:18391/ && break; sleep 0.1; done
  taskset -c 0 hey -n 2000 -c 64 http://127.0.0.1:18391/ >/dev/null
  n0=$(grep -c '^gc ' "$dir/err")
  r=$(taskset -c 0 hey -n "$n" -c 64 http://127.0.0.1:18391/ | awk '/\[200\]/{print $2}')
  rss=$(awk '/VmRSS/{print $2}' /proc/$v/status)
  kill $v
  wait $v 2>/dev/null
  # a gctrace line: "... ms clock, A+B/C/D+E ms cpu, ...": the collector's CPU is the sum
  awk -v n0="$n0" -v fl="$fl" -v r="$r" -v rss="$rss" '
    /^gc /{k++; last=$0; if (k > n0) { split($0, a, "ms clock, "); split(a[2], b, " ms cpu")
      m = split(b[1], p, /[+\/]/); for (i = 1; i <= m; i++) s += p[i]; cnt++ } }
    END { printf "floor %s MiB: %d collections in %d requests, GC CPU %.1f ms (%.2f us/request), RSS %.0f MiB\n  last: %s\n",
      fl, cnt, r, s, s * 1000 / r, rss / 1024, last }' "$dir/err"
done
