#!/usr/bin/env bash
# Proxy CPU per request, two veer binaries and the tuned ReverseProxy alternating (A B R, N times),
# the measurement of make bench-gateway reduced to its core: the proxy alone on core 1 with
# GOMAXPROCS=1, hey -c 64 and a Go backend on core 0, CPU from /proc/PID/stat (utime+stime)
# over a 3 s run after a 1 s warm-up. docs/gateway.md, "Where the CPU goes".
#
#   scripts/gateway-cpu-ab.sh OLD_VEER NEW_VEER bare|guards [N]
#
# Needs hey and bin/gatewaybench (make bench-gateway builds it; it serves the backend and the
# ReverseProxy). Ports 18090-18093 on 127.0.0.1.
set -euo pipefail
old=$1 new=$2 kind=$3 n=${4:-6}
dir=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$dir"' EXIT
gb=bin/gatewaybench
taskset -c 0 $gb -role backend -listen 127.0.0.1:18090 >"$dir/be.log" 2>&1 &
cfg=$dir/veer.yaml
cat >"$cfg" <<YAML
listen: {addr: 'off', plain: '127.0.0.1:18091'}
data_dir: $dir
routes: [{name: r, clusters: [{name: c}]}]
clusters: [{name: c, max_idle_per_backend: 256, backends: [{address: '127.0.0.1:18090'}]}]
YAML
if [ "$kind" = guards ]; then
  cat "${GUARDS:-bench/gateway/guards.yaml}" >>"$cfg" # GUARDS: another guards file
else
  echo "retry: {disabled: true}" >>"$cfg"
fi
measure() { # name port cmd...
  local name=$1 port=$2; shift 2
  GOMAXPROCS=1 taskset -c 1 "$@" >"$dir/$name.log" 2>&1 &
  local pid=$!
  for _ in $(seq 100); do curl -s -o /dev/null "http://127.0.0.1:$port/" && break; sleep 0.1; done
  taskset -c 0 hey -z 1s -c 64 "http://127.0.0.1:$port/" >/dev/null
  local t0 t1 reqs
  t0=$(awk '{print $14+$15}' /proc/$pid/stat)
  reqs=$(taskset -c 0 hey -z 3s -c 64 "http://127.0.0.1:$port/" | awk '/\[200\]/{print $2}')
  t1=$(awk '{print $14+$15}' /proc/$pid/stat)
  kill $pid; wait $pid 2>/dev/null || true
  awk -v n="$name" -v r="$reqs" -v c="$((t1 - t0))" -v hz="$(getconf CLK_TCK)" \
    'BEGIN{printf "%s\t%d requests\t%.1f us/request\n", n, r, c*1e6/hz/r}'
}
for i in $(seq "$n"); do
  echo "# alternation $i, load $(cut -d' ' -f1-3 /proc/loadavg)"
  measure old 18091 "$old" gateway --config "$cfg" --log-format text
  measure new 18091 "$new" gateway --config "$cfg" --log-format text
  measure reverseproxy 18093 $gb -role reverseproxy -listen 127.0.0.1:18093 -backend 127.0.0.1:18090
done
