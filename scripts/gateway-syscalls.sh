#!/usr/bin/env bash
# System calls per proxied request of `veer gateway` (bare config, GOMAXPROCS=1) and of the tuned
# ReverseProxy, counted by `strace -c -f` over `hey -n N -c 64` after a 2 000-request warm-up.
# Divide each count by the requests hey reports. docs/gateway.md, "The upstream read that found
# nothing, saved".
#
#   scripts/gateway-syscalls.sh [VEER] [N]     # defaults: bin/veer 20000
#
# Needs strace, hey and bin/gatewaybench. Ports 18390-18392 on 127.0.0.1.
set -u
veer=${1:-bin/veer} n=${2:-20000}
dir=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null; wait 2>/dev/null; rm -rf "$dir"' EXIT
taskset -c 0 bin/gatewaybench -role backend -listen 127.0.0.1:18390 >/dev/null 2>&1 &
cat >"$dir/v.yaml" <<YAML
listen: {addr: 'off', plain: '127.0.0.1:18391'}
data_dir: $dir
routes: [{name: r, clusters: [{name: c}]}]
clusters: [{name: c, max_idle_per_backend: 256, backends: [{address: '127.0.0.1:18390'}]}]
retry: {disabled: true}
YAML
GOMAXPROCS=1 taskset -c 1 "$veer" gateway --config "$dir/v.yaml" >/dev/null 2>&1 &
v=$!
GOMAXPROCS=1 taskset -c 1 bin/gatewaybench -role reverseproxy -listen 127.0.0.1:18392 -backend 127.0.0.1:18390 >/dev/null 2>&1 &
r=$!
for _ in $(seq 100); do curl -s -o /dev/null http://127.0.0.1:18391/ && curl -s -o /dev/null http://127.0.0.1:18392/ && break; sleep 0.1; done
for p in "veer $v 18391" "reverseproxy $r 18392"; do
  set -- $p
  taskset -c 0 hey -n 2000 -c 64 "http://127.0.0.1:$3/" >/dev/null
  strace -c -f -p "$2" -o "$dir/$1.st" 2>/dev/null &
  s=$!
  sleep 0.5 # strace attaches to every thread
  echo "== $1: $(taskset -c 0 hey -n "$n" -c 64 "http://127.0.0.1:$3/" | awk '/\[200\]/{print $2}') requests"
  kill -INT $s
  wait $s
  head -12 "$dir/$1.st"
done
