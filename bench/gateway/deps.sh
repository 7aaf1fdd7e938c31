#!/usr/bin/env bash
# Installs the peers of the gateway benchmark (Debian packages) when missing:
# HAProxy, nginx (light), Caddy, and h2load. Package-started services are
# stopped: the benchmark starts its own instances on random loopback ports.
set -euo pipefail
need=()
declare -A pkgs=([haproxy]=haproxy [nginx]=nginx-light [caddy]=caddy [h2load]=nghttp2-client [taskset]=util-linux)
for cmd in "${!pkgs[@]}"; do
  command -v "$cmd" >/dev/null 2>&1 || need+=("${pkgs[$cmd]}")
done
[ ${#need[@]} -eq 0 ] && exit 0
if [ "$(id -u)" -ne 0 ]; then
  echo "bench-gateway: need ${need[*]}; run as root or: sudo apt-get install -y ${need[*]}" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
for s in nginx haproxy caddy; do service "$s" stop >/dev/null 2>&1 || true; done
