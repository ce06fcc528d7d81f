"""Running mirra's benchmark programs and their peers, each in a process of its own under
/usr/bin/time -v: a run's result is the JSON object its last stdout line prints plus its peak RSS;
repeated runs are summarised by their medians; TensorFlow runs from a virtual environment made on
first use; a `mirra train --metrics` run's throughput is read from its lines after the warm-up. The
drivers (training_vs_pytorch.py, training_vs_tensorflow.py, mixed_precision_vs_peers.py,
multi_worker_training.py, simulate_vs_measured.py, all_reduce_vs_mpi.py, gpt_vs_peers.py,
parameter_server_training.py) share this."""
import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys


TENSORFLOW = "tensorflow-cpu==2.21.*"


def tensorflow_python(venv, driver):
    """The virtual environment's python, with TensorFlow installed into it when it is not there yet."""
    python = os.path.join(venv, "bin", "python")
    if os.path.exists(python) and subprocess.run([python, "-c", "import tensorflow"], capture_output=True).returncode == 0:
        return python
    print(f"{driver}: installing {TENSORFLOW} into {venv}", file=sys.stderr)
    for command in ([sys.executable, "-m", "venv", venv], [python, "-m", "pip", "install", "-q", TENSORFLOW, "numpy"]):
        done = subprocess.run(command, capture_output=True, text=True)
        if done.returncode != 0:
            sys.exit(f"{driver}: {' '.join(command)} failed:\n{done.stderr[-2000:]}")
    return python


def cpu_model():
    """The CPU's model name, as the figures name the machine they were measured on."""
    with open("/proc/cpuinfo") as f:
        return next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), "unknown")


def run(command, driver):
    """Runs command; its stdout, or the driver's exit naming the command with the tail of its stderr."""
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"{driver}: {' '.join(command)} failed:\n{done.stderr[-2000:]}")
    return done.stdout


def last_json(text):
    """The JSON object a benchmark program prints on its last line."""
    return json.loads(text.strip().splitlines()[-1])


def built_programs(build, driver, programs, hint="build first"):
    """The paths of `programs` (relative to the build tree), or the driver's exit naming the missing one."""
    paths = [os.path.join(build, program) for program in programs]
    for path in paths:
        if not os.access(path, os.X_OK):
            sys.exit(f"{driver}: {path} is missing; {hint}")
    return paths


def metrics_window(metrics, warmup):
    """Of a `mirra train --metrics` file: the examples, the seconds and the steps after step `warmup`."""
    lines = [json.loads(line) for line in open(metrics)]
    start = next(line["seconds"] for line in lines if line["step"] == warmup)
    window = [line for line in lines if line["step"] > warmup]
    return sum(line["examples"] for line in window), window[-1]["seconds"] - start, len(window)


def window_rate(metrics, warmup):
    """Examples/s of a `mirra train --metrics` file over the steps after step `warmup`."""
    examples, seconds, _ = metrics_window(metrics, warmup)
    return examples / seconds


def example_models_driver(driver, build):
    """The command line of a driver that trains the example models (--build, default `build`; --models;
    --repeats), and the paths of mirra and mirra-examples in its build tree."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--build", default=build)
    parser.add_argument("--models", default="mlp,cnn")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    mirra, examples = built_programs(args.build, driver, ["tools/mirra/mirra", "examples/mirra-examples"])
    return args, mirra, examples


def best_of(section, names):
    """The name among `names` with the highest median examples/s in `section`."""
    return max(names, key=lambda name: section[name]["examples_per_s"])


def require_time(driver):
    if not shutil.which("/usr/bin/time"):
        sys.exit(f"{driver}: /usr/bin/time is missing (apt-get install time)")


def measure(command, driver):
    """Runs command under /usr/bin/time -v; returns its JSON line and the peak RSS in MiB."""
    done = subprocess.run(["/usr/bin/time", "-v"] + command, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"{driver}: {' '.join(command)} failed:\n{done.stderr[-2000:]}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    rss = re.search(r"Maximum resident set size \(kbytes\): (\d+)", done.stderr)
    result["peak_rss_mib"] = int(rss.group(1)) / 1024.0
    return result


def summarise(runs):
    """Median examples/s and peak RSS of repeated runs, with every run's examples/s."""
    return {"examples_per_s": statistics.median(r["examples_per_s"] for r in runs),
            "examples_per_s_runs": [round(r["examples_per_s"], 1) for r in runs],
            "peak_rss_mib": statistics.median(r["peak_rss_mib"] for r in runs)}
