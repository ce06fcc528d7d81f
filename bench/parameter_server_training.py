#!/usr/bin/python3
"""The parameter-server strategy next to MultiWorkerMirrored with the same worker processes, in one run.

For each model (MLP, CNN), interleaved and repeated:
  - mirra parameter_server: 1 server and 2 workers, each a `mirra train --strategy parameter_server`
    process with one thread (MIRRA_CLUSTER on localhost ports), synchronous;
  - the same, asynchronous (each worker's examples/s summed: they do not wait for each other);
  - the same, synchronous with staleness 1 (each step reads the variables of the step before, so the
    servers' update and the next variables' transfer overlap the workers' computing; summed alike);
  - the same on 2 servers, every variable whole, and with min_shard_bytes 64 KiB (the large kernels
    cut into a part on each server);
  - mirra multi_worker_mirrored: `mpirun -np 2 mirra train` with one logical CPU device and one thread
    per worker.
Both train on Fashion-MNIST with global batch 128. Throughput is worker 0's --metrics lines over the
steps after the first 20; bytes are the tensor bytes worker 0 sent and received (its JSON summary),
per step. Prints one JSON object: medians of examples/s, parameter_server over multi_worker_mirrored,
and bytes per step.

Needs: a built tree (build/release, or --build DIR) with MPI and mpirun.
Usage: bench/parameter_server_training.py [--build DIR] [--models mlp,cnn] [--repeats 3]
"""
import json
import os
import socket
import statistics
import subprocess
import tempfile

from peer_runs import cpu_model, example_models_driver, last_json, run, window_rate

HERE = os.path.dirname(os.path.abspath(__file__))
STEPS = {"mlp": 400, "cnn": 40}
WARMUP = 20
DRIVER = "parameter_server_training"
CUT_BYTES = 64 << 10


def free_addresses(n):
    """n localhost addresses whose ports were free a moment ago."""
    sockets = [socket.socket() for _ in range(n)]
    for s in sockets:
        s.bind(("127.0.0.1", 0))
    addresses = [f"127.0.0.1:{s.getsockname()[1]}" for s in sockets]
    for s in sockets:
        s.close()
    return addresses


def parameter_server(train, metrics, servers=1, workers=2, warmup=WARMUP):
    """Runs `servers` servers and `workers` workers of `train`; returns worker 0's summary and the
    cluster's examples/s: synchronous, worker 0's (each counts the global batch); asynchronous or with
    staleness, the workers' summed (each counts its own batches)."""
    addresses = free_addresses(servers + workers)
    cluster = {"ps": addresses[:servers], "worker": addresses[servers:]}
    tasks = [("ps", s) for s in range(servers)] + [("worker", w) for w in range(workers)]
    processes = []
    for kind, index in tasks:
        env = dict(os.environ, MIRRA_CLUSTER=json.dumps({"cluster": cluster, "task": {"type": kind, "index": index}}))
        extra = ["--metrics", f"{metrics}.{index}"] if kind == "worker" else []
        processes.append(subprocess.Popen(train + extra, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    outputs = [p.communicate() for p in processes]
    for (kind, index), p, (out, err) in zip(tasks, processes, outputs):
        if p.returncode != 0:
            raise SystemExit(f"{DRIVER}: {kind} {index} failed ({p.returncode}): {err.strip()}")
    summary = last_json(outputs[servers][0])
    if summary["update_mode"] == "sync" and summary["staleness"] == 0:
        return summary, window_rate(f"{metrics}.0", warmup)
    return summary, sum(window_rate(f"{metrics}.{w}", warmup) for w in range(workers))


def multi_worker(train, metrics, workers=2):
    run(["mpirun", "--allow-run-as-root", "--oversubscribe", "-np", str(workers)] + train + ["--metrics", metrics], DRIVER)
    return window_rate(metrics, WARMUP)


def main():
    args, mirra, examples = example_models_driver(DRIVER, os.path.join(HERE, "..", "build", "release"))
    report = {"benchmark": "parameter-server training (sync and async) over 2 worker processes, Fashion-MNIST, global batch 128, one thread each",
              "cpu": cpu_model(),
              "window": f"examples/s after {WARMUP} warm-up steps; medians over repeats", "models": {}}
    with tempfile.TemporaryDirectory() as work:
        metrics = os.path.join(work, "metrics.jsonl")
        cut_config = os.path.join(work, "cut.json")
        with open(cut_config, "w") as f:
            json.dump({"strategy": "parameter_server", "update_mode": "sync", "min_shard_bytes": CUT_BYTES}, f)
        for model in args.models.split(","):
            model_file = os.path.join(work, model + ".mirra")
            run([examples, "write", model, model_file], DRIVER)
            train = [mirra, "train", model_file, "--steps", str(STEPS[model]), "--batch-size", "128", "--threads", "1", "--json"]
            sync = ["--strategy", "parameter_server", "--update-mode", "sync"]
            ps_runs, async_runs, stale_runs, two_runs, cut_runs, mw_runs, summaries = [], [], [], [], [], [], []
            for _ in range(args.repeats):
                summary, rate = parameter_server(train + sync, metrics)
                summaries.append(summary)
                ps_runs.append(rate)
                async_runs.append(parameter_server(train + ["--strategy", "parameter_server", "--update-mode", "async"], metrics)[1])
                stale_runs.append(parameter_server(train + sync + ["--staleness", "1"], metrics)[1])
                two_runs.append(parameter_server(train + sync, metrics, servers=2)[1])
                cut_runs.append(parameter_server(train + ["--config", cut_config], metrics, servers=2)[1])
                mw_runs.append(multi_worker(train + ["--strategy", "multi_worker_mirrored", "--devices", "cpu:0"], metrics))
            ps, mw, asynchronous = statistics.median(ps_runs), statistics.median(mw_runs), statistics.median(async_runs)
            stale = statistics.median(stale_runs)
            two, cut = statistics.median(two_runs), statistics.median(cut_runs)
            steps = summaries[-1]["steps"]
            report["models"][model] = {
                "parameter_server": {"examples_per_s": round(ps, 1), "runs": [round(x, 1) for x in ps_runs]},
                "parameter_server_async": {"examples_per_s": round(asynchronous, 1), "runs": [round(x, 1) for x in async_runs]},
                "ratio_async_over_sync": round(asynchronous / ps, 3),
                "parameter_server_staleness_1": {"examples_per_s": round(stale, 1), "runs": [round(x, 1) for x in stale_runs]},
                "ratio_staleness_1_over_sync": round(stale / ps, 3),
                "parameter_server_2_servers": {"examples_per_s": round(two, 1), "runs": [round(x, 1) for x in two_runs]},
                "parameter_server_2_servers_cut": {"examples_per_s": round(cut, 1), "runs": [round(x, 1) for x in cut_runs],
                                                   "min_shard_bytes": CUT_BYTES},
                "multi_worker_mirrored": {"examples_per_s": round(mw, 1), "runs": [round(x, 1) for x in mw_runs]},
                "ratio_parameter_server_over_multi_worker_mirrored": round(ps / mw, 3),
                "ratio_2_servers_cut_over_whole": round(cut / two, 3),
                "worker_0_bytes_received_per_step": summaries[-1]["bytes_received"] // steps,
                "worker_0_bytes_sent_per_step": summaries[-1]["bytes_sent"] // steps,
            }
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
