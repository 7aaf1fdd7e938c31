#!/usr/bin/env bash
# User-space instructions per proxied request of `veer gateway` with the bare config (one
# route, retries off), counted by valgrind's callgrind: repeatable to about 1 % on a busy
# machine, where the CPU time of scripts/gateway-cpu-ab.sh is not. The kernel's share (the
# system calls, about half of the proxy's CPU) is not counted. docs/gateway.md, "Issue 32:
# the bare path's user-space work".
#
#   scripts/gateway-instr.sh VEER [N [FLAG...]]   # prints: VEER requests N instructions I per-request I/N
#
# FLAGs go to `veer gateway` (e.g. --gc-heap-floor-mib 0). VEER `reverseproxy` counts the tuned
# httputil.ReverseProxy of bin/gatewaybench in veer's place, the same way.
#
# A warm-up of 1000 requests, then N (default 5000) by hey -c 8, the count taken between two
# callgrind dumps. Needs valgrind, hey and bin/gatewaybench (the backend). Ports 18290-18291.
set -uo pipefail
veer=$1 n=${2:-5000}
shift $(($# < 2 ? $# : 2))
dir=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null; wait 2>/dev/null; rm -rf "$dir"' EXIT
bin/gatewaybench -role backend -listen 127.0.0.1:18290 >"$dir/be.log" 2>&1 &
cat >"$dir/v.yaml" <<YAML
listen: {addr: 'off', plain: '127.0.0.1:18291'}
data_dir: $dir
routes: [{name: r, clusters: [{name: c}]}]
clusters: [{name: c, max_idle_per_backend: 256, backends: [{address: '127.0.0.1:18290'}]}]
retry: {disabled: true}
YAML
# no asynchronous preemption: callgrind aborts on Go's preemption signals
if [ "$veer" = reverseproxy ]; then
  cmd=(bin/gatewaybench -role reverseproxy -listen 127.0.0.1:18291 -backend 127.0.0.1:18290)
else
  cmd=("$veer" gateway --config "$dir/v.yaml" --log-format text "$@")
fi
GODEBUG=asyncpreemptoff=1 GOMAXPROCS=1 valgrind --tool=callgrind --callgrind-out-file="$dir/cg.out" \
  "${cmd[@]}" >"$dir/v.log" 2>&1 &
vg=$!
for _ in $(seq 600); do curl -s -o /dev/null http://127.0.0.1:18291/ && break; sleep 0.2; done
hey -n 1000 -c 8 http://127.0.0.1:18291/ >/dev/null
callgrind_control -d warm $vg >/dev/null
hey -n "$n" -c 8 http://127.0.0.1:18291/ >"$dir/hey.txt"
callgrind_control -d run $vg >/dev/null
ok=$(awk '/\[200\]/{print $2}' "$dir/hey.txt")
ir=$(grep -E '^(summary|totals):' "$(ls -t "$dir"/cg.out* | head -1)" | head -1 | awk '{print $2}')
echo "$veer requests $ok instructions $ir per-request $((ir / ok))"
