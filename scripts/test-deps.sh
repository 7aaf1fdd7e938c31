#!/usr/bin/env bash
# Installs the real servers that integration tests start on loopback, when
# they are missing. Debian packages, installed non-interactively. Tests never
# skip because a server is missing: they fail and point here.
set -euo pipefail

need=()
# command -> Debian package
declare -A pkgs=(
  [redis-server]=redis-server
  [dig]=dnsutils
  [kdig]=knot-dnsutils
  [nsd]=nsd
  [knotd]=knot
  [dnsperf]=dnsperf
  [etcd]=etcd-server
  [hey]=hey
  [nginx]=nginx
  [haproxy]=haproxy
  [h2load]=nghttp2-client
  [curl]=curl
  [slowhttptest]=slowhttptest
  [systemd-analyze]=systemd
  [nft]=nftables
  [promtool]=prometheus
  [nats-server]=nats-server
  [chromium]=chromium
  [chromedriver]=chromium-driver
)
for cmd in "${!pkgs[@]}"; do
  command -v "$cmd" >/dev/null 2>&1 || need+=("${pkgs[$cmd]}")
done
# Debian's python3 module -> Debian package (interop clients and servers)
declare -A pymods=(
  [websockets]=python3-websockets
  [grpc]=python3-grpcio
)
for mod in "${!pymods[@]}"; do
  /usr/bin/python3 -c "import $mod" >/dev/null 2>&1 || need+=("${pymods[$mod]}")
done
if [ ${#need[@]} -eq 0 ]; then
  exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "test-deps: need ${need[*]}; run as root or: sudo apt-get install -y ${need[*]}" >&2
  exit 1
fi
echo "test-deps: installing ${need[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq -o DPkg::Lock::Timeout=300 --no-install-recommends "${need[@]}" >/dev/null
# Tests start their own instances on random loopback ports: stop the ones
# the packages started.
for s in nginx haproxy prometheus; do service "$s" stop >/dev/null 2>&1 || true; done
