#!/usr/bin/env python3
"""Scenario 3 of shedbench, request by request: for every critical request
sent after the spike's first 500 ms, how many /bulk handlers ran between
the moment the generator wrote it and the moment its own handler started
(the isolation target allows one), and the p99s from the intended send and
from the write. docs/shed-runs.md, "sixth pass".

    SHEDBENCH_SAMPLES=/tmp/s3 taskset -c 1 bin/shedbench -rounds 1 -scenarios 3 -contenders veer
    scripts/shed-isolation-waits.py /tmp/s3/3-isolation-veer-0

reads BASE.csv (the generator's samples) and BASE-server.csv (the server's
entry, handler start and end of each request, unix ns), and prints e.g.

    waited for 0/1/2/3+ /bulk handlers: 39 160 1 0 (of 200); p99 14.3 ms, from the write 13.2 ms

Python 3 standard library only.
"""
import csv
import math
import sys


def p99(xs):
    xs = sorted(xs)
    return xs[max(0, math.ceil(0.99 * len(xs)) - 1)] if xs else float("nan")


def main(base):
    with open(base + ".csv") as f:
        rows = list(csv.DictReader(f))
    with open(base + "-server.csv") as f:
        srv = {r["id"]: r for r in csv.DictReader(f)}
    spike = [r for r in rows if r["phase"] == "1" and r["stream"] == "crit"]
    if not spike:
        sys.exit(base + ".csv: no critical request in the spike (not scenario 3?)")
    t0 = float(spike[0]["at_ms"])
    after = [r for r in spike if float(r["at_ms"]) - t0 >= 500 and r["status"] == "200"]
    bulk = sorted(
        (int(s["start_ns"]), int(s["end_ns"]))
        for i, s in srv.items()
        if i.startswith("bulk") and s["start_ns"] != "0"
    )
    waits = [0, 0, 0, 0]
    for r in after:
        s = srv.get(r["id"])
        if s is None or s["start_ns"] == "0":
            continue
        # the id carries the intended send time (unix ns); wrote_ms is the
        # write's delay after it
        wrote = int(r["id"].split("@")[1]) + int(float(r["wrote_ms"]) * 1e6)
        start = int(s["start_ns"])
        n = sum(1 for b in bulk if b[1] > wrote and b[0] < start)
        waits[min(n, 3)] += 1
    lat = [float(r["latency_ms"]) for r in after]
    from_write = [float(r["latency_ms"]) - float(r["wrote_ms"]) for r in after]
    print(
        "waited for 0/1/2/3+ /bulk handlers: %d %d %d %d (of %d); p99 %.1f ms, from the write %.1f ms"
        % (*waits, sum(waits), p99(lat), p99(from_write))
    )


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
