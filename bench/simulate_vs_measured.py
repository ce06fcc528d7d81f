#!/usr/bin/python3
"""`mirra simulate` against measured runs on this machine: the predicted step time of the Mirrored
2-replica run (one process, cpu:0 and cpu:1, two threads) and of the multi-worker run (two localhost
workers under mpirun, one device and one thread each), next to the step time measured in the same run
of this script.

For each model and each of the two set-ups:
  1. the all-reduce model: `mirra bench allreduce` at 1 to 16 MiB (in-process over 2 replicas, or
     across the 2 workers), fitted by least squares to t = a + n b; a ring over 2 devices costs
     2 alpha + n / B, so latency alpha = a / 2 and bandwidth B = 1 / b, written to a cluster file of
     this machine (1 node of 2 devices, or 2 nodes of 1);
  2. a profile run: `mirra train --trace`, whose kernels' median times (the first step left out) are
     the simulation's op costs;
  3. the prediction: `mirra simulate --costs TRACE --devices cpu:0,cpu:1 --cluster CLUSTER --algorithm
     ring` at 2 devices (the rewrite over the run's devices, so the host's nodes are on replica 0's);
  4. a measured run: `mirra train --metrics` without a trace, the step time being the window's seconds
     over its steps after the warm-up.
Steps 2 to 4 are repeated REPEATS times, interleaved; the medians are compared.
Prints one JSON object: per model and set-up, predicted and measured ms per step, the error
(predicted / measured - 1) and whether it is within 15%.

Needs: a built tree (build/release, or --build DIR) with MPI and mpirun.
Usage: bench/simulate_vs_measured.py [--build DIR] [--models mlp,cnn] [--repeats 3]
"""
import json
import os
import statistics
import tempfile

from peer_runs import cpu_model, example_models_driver, last_json, metrics_window, run

HERE = os.path.dirname(os.path.abspath(__file__))
STEPS = {"mlp": 300, "cnn": 40, "resnet20": 20}
WARMUP = {"mlp": 20, "cnn": 5, "resnet20": 3}
GLOBAL_BATCH = 128
SIZES_MIB = ["1", "2", "4", "8", "16"]
MPIRUN = ["mpirun", "--allow-run-as-root", "--oversubscribe", "-np", "2"]


DRIVER = "simulate_vs_measured"


def fitted_link(results):
    """(latency s, bandwidth B/s) of a 2-device ring from all-reduce times at several sizes: t = a + n b
    fitted by least squares on the relative error (each size counts alike, whatever its time)."""
    rows = [(r["mib"] * float(1 << 20), r["ms"] / 1e3) for r in results]
    # Minimise sum ((a + n b - t) / t)^2: the normal equations of the rows (1/t, n/t) against 1.
    s11 = sum(1 / t ** 2 for n, t in rows)
    s12 = sum(n / t ** 2 for n, t in rows)
    s22 = sum(n * n / t ** 2 for n, t in rows)
    r1 = sum(1 / t for n, t in rows)
    r2 = sum(n / t for n, t in rows)
    det = s11 * s22 - s12 * s12
    intercept, slope = (r1 * s22 - r2 * s12) / det, (s11 * r2 - s12 * r1) / det
    return max(intercept, 0.0) / 2, 1 / slope


def cluster_file(path, nodes, devices_per_node, latency, bandwidth, measured_by):
    link = {"bandwidth_gb_s": bandwidth / 1e9, "latency_us": latency * 1e6}
    cluster = {
        "name": f"this machine ({nodes} x {devices_per_node}, measured)",
        "nodes": nodes, "devices_per_node": devices_per_node,
        # Only kernels the trace did not time take the roofline; the script reports how many there are.
        "device": {"name": cpu_model(), "tflops": {"f32": 0.1}, "memory_bandwidth_gb_s": 10},
        "intra_node": link,
        "sources": {"intra_node": f"fitted to {measured_by} at {', '.join(SIZES_MIB)} MiB",
                    "device": "assumed: only for kernels the trace did not time"},
    }
    if nodes > 1:
        cluster["inter_node"] = dict(link, per="node")
        cluster["sources"]["inter_node"] = cluster["sources"]["intra_node"]
    with open(path, "w") as f:
        json.dump(cluster, f)


def measured_step_ms(command, metrics, warmup):
    run(command + ["--metrics", metrics], DRIVER)
    _, seconds, steps = metrics_window(metrics, warmup)
    return seconds / steps * 1e3


def main():
    args, mirra, examples = example_models_driver(DRIVER, os.path.join(HERE, "..", "build", "release"))

    report = {"benchmark": "mirra simulate's predicted step time against the measured one, this machine",
              "cpu": cpu_model(), "cores": os.cpu_count(), "global_batch": GLOBAL_BATCH, "tolerance": 0.15, "runs": {}}
    with tempfile.TemporaryDirectory() as work:
        links = {
            "mirrored": fitted_link(last_json(run([mirra, "bench", "allreduce", "--replicas", "2", "--threads", "2",
                                                   "--sizes-mib"] + SIZES_MIB, DRIVER))["results"]),
            "multi_worker_mirrored": fitted_link(last_json(run(MPIRUN + [mirra, "bench", "allreduce", "--across-workers",
                                                                         "--replicas", "1", "--threads", "1",
                                                                         "--sizes-mib"] + SIZES_MIB, DRIVER))["results"]),
        }
        clusters = {}
        for strategy, (latency, bandwidth) in links.items():
            clusters[strategy] = os.path.join(work, strategy + ".json")
            nodes, per_node = (1, 2) if strategy == "mirrored" else (2, 1)
            cluster_file(clusters[strategy], nodes, per_node, latency, bandwidth,
                         "mirra bench allreduce" + (" --across-workers" if nodes > 1 else ""))
        report["all_reduce_models"] = {s: {"latency_us": round(l * 1e6, 1), "bandwidth_GBps": round(b / 1e9, 2)}
                                       for s, (l, b) in links.items()}
        for model in args.models.split(","):
            model_file = os.path.join(work, model + ".mirra")
            run([examples, "write", model, model_file], DRIVER)
            train = [mirra, "train", model_file, "--steps", str(STEPS[model]), "--batch-size", str(GLOBAL_BATCH), "--json"]
            setups = {
                "mirrored": train + ["--strategy", "mirrored", "--devices", "cpu:0,cpu:1", "--threads", "2"],
                "multi_worker_mirrored": MPIRUN + train + ["--strategy", "multi_worker_mirrored", "--devices", "cpu:0",
                                                           "--threads", "1"],
            }
            for strategy, command in setups.items():
                # Profile run and prediction, then a measured run, REPEATS times interleaved: the medians.
                predictions, measured = [], []
                for _ in range(args.repeats):
                    trace = os.path.join(work, f"{model}.{strategy}.trace.json")
                    run(command + ["--trace", trace], DRIVER)
                    traced = trace + (".worker0" if strategy == "multi_worker_mirrored" else "")
                    predictions.append(last_json(run(
                        [mirra, "simulate", model_file, "--strategy", strategy, "--cluster", clusters[strategy], "--costs",
                         traced, "--devices", "cpu:0,cpu:1", "--batch-size", str(GLOBAL_BATCH // 2), "--algorithm", "ring",
                         "--json"], DRIVER)))
                    measured.append(measured_step_ms(command, os.path.join(work, "metrics.jsonl"), WARMUP[model]))
                points = [next(p for p in predicted["points"] if p["devices"] == 2) for predicted in predictions]
                predicted_ms = statistics.median(p["step_s"] * 1e3 for p in points)
                measured_ms = statistics.median(measured)
                error = predicted_ms / measured_ms - 1
                report["runs"][f"{model} {strategy}"] = {
                    "predicted_ms": round(predicted_ms, 3), "measured_ms": round(measured_ms, 3), "error": round(error, 3),
                    "within_tolerance": abs(error) <= 0.15,
                    "predicted_runs_ms": [round(p["step_s"] * 1e3, 3) for p in points],
                    "measured_runs_ms": [round(m, 3) for m in measured],
                    "traced_runs_ms": [round(p["costs"]["traced_step_s"] * 1e3, 3) for p in predictions],
                    "predicted_exposed_communication_ms": round(
                        statistics.median(p["exposed_communication_s"] * 1e3 for p in points), 3),
                    "kernels_at_once": predictions[-1]["costs"]["kernels_at_once"],
                    "kernels_timed": predictions[-1]["measured_kernels"],
                    "kernels_by_roofline": predictions[-1]["roofline_kernels"]}
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
