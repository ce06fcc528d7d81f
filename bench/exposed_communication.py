#!/usr/bin/python3
"""Exposed communication per step, from a trace of `mirra train --trace FILE` (under
multi_worker_mirrored, a worker's: FILE.worker<r>).

Per step (the "steps" track), the time during which communication is in flight while none of the
devices runs a kernel on its compute stream (track "device X", category "kernel"): communication
the step waits for rather than overlaps with compute. Communication is a collective on a device's
communication stream (track "device X communication": all-reduces among the devices of the
process, NCCL between GPUs), or a cross-worker all-reduce's "waiting for workers" and "all-reduce
across workers" phases (track "across workers (MPI)"). Copies between memory spaces (tracks "device
X copies") are neither. Prints one JSON object: steps, mean step ms, mean exposed ms and its
fraction of the step, the first step (set-up) left out.

Usage: bench/exposed_communication.py TRACE
"""
import json
import sys


def merged(intervals):
    out = []
    for start, end in sorted(intervals):
        if out and start <= out[-1][1]:
            out[-1][1] = max(out[-1][1], end)
        else:
            out.append([start, end])
    return out


def length_outside(intervals, busy, lo, hi):
    """Length of the union of `intervals` within [lo, hi] not covered by `busy` (both merged)."""
    total = 0.0
    for start, end in intervals:
        start, end = max(start, lo), min(end, hi)
        cursor = start
        for b_start, b_end in busy:
            if b_end <= cursor or b_start >= end:
                continue
            if b_start > cursor:
                total += b_start - cursor
            cursor = max(cursor, b_end)
            if cursor >= end:
                break
        if cursor < end:
            total += end - cursor
    return total


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    trace = json.load(open(sys.argv[1]))["traceEvents"]
    names = {e["tid"]: e["args"]["name"] for e in trace if e.get("ph") == "M" and e.get("name") == "thread_name"}
    steps, kernels, communication = [], [], []
    for e in trace:
        if e.get("ph") != "X":
            continue
        span = (e["ts"], e["ts"] + e["dur"])
        track = names.get(e["tid"], "")
        if track == "steps":
            steps.append(span)
        elif track.endswith(" communication") or (track == "across workers (MPI)" and not e["name"].startswith("local reduce")):
            communication.append(span)
        elif track.startswith("device ") and not track.endswith(" copies") and e.get("cat") == "kernel":
            kernels.append(span)
    steps = sorted(steps)[1:]
    if not steps:
        sys.exit("exposed_communication: the trace holds fewer than two steps")
    busy, communication = merged(kernels), merged(communication)
    exposed = [length_outside(communication, busy, lo, hi) for lo, hi in steps]
    step_ms = sum(hi - lo for lo, hi in steps) / len(steps) / 1e3
    exposed_ms = sum(exposed) / len(exposed) / 1e3
    print(json.dumps({"steps": len(steps), "mean_step_ms": round(step_ms, 3), "mean_exposed_communication_ms": round(exposed_ms, 3),
                      "exposed_fraction": round(exposed_ms / step_ms, 3)}))


if __name__ == "__main__":
    main()
