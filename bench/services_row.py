"""One row of bench/services.sh's table, from one run's store.

Usage: services_row.py STORE EXIT_CODE STDERR_FILE SERVICE RECIPE WORKERS

Harness acquire latency: each acquire invoke paired with the ok completion of the same
process (history.jsonl), waiting for other holders included. A run without
results.json, or without the figure, shows "-"; a non-zero exit code shows in the
verdict column with the last line the run wrote to stderr.
"""
import json
import os
import sys


def percentiles(durations):
    """p50 and p99 (nearest rank) in ms, or None."""
    if not durations:
        return None, None
    s = sorted(durations)
    rank = lambda p: s[max(1, min(len(s), -(-len(s) * p // 100))) - 1]
    return rank(50) / 1e6, rank(99) / 1e6


def acquire_latencies(path):
    """Every granted acquire's latency in ns, from a history file."""
    pending, out = {}, []
    with open(path) as f:
        for line in f:
            op = json.loads(line)
            if op.get("f") != "acquire":
                continue
            p = op.get("process")
            if op["type"] == "invoke":
                pending[p] = op["time"]
            elif p in pending:
                start = pending.pop(p)
                if op["type"] == "ok":
                    out.append(op["time"] - start)
    return out


def fmt(x, digits=1):
    return "-" if x is None else f"{x:.{digits}f}"


def main():
    store, rc, errfile, service, recipe, workers = sys.argv[1:7]
    run = os.path.join(store, "latest")
    res = {}
    try:
        with open(os.path.join(run, "results.json")) as f:
            res = json.load(f)
    except (OSError, ValueError):
        pass
    steady = res.get("steady_cycles_per_second")
    hp50 = hp99 = None
    try:
        hp50, hp99 = percentiles(acquire_latencies(os.path.join(run, "history.jsonl")))
    except (OSError, ValueError):
        pass
    b = res.get("baseline") or {}
    plain = b["cycles"] / (b["duration_ns"] / 1e9) if b.get("duration_ns") else None
    pp50 = b["acquire_p50_ns"] / 1e6 if "acquire_p50_ns" in b else None
    pp99 = b["acquire_p99_ns"] / 1e6 if "acquire_p99_ns" in b else None
    ratio = steady / plain if steady and plain else None
    verdict = res.get("verdict", "-")
    if b.get("errors"):
        verdict += f" (plain loop: {b['errors']} errors)"
    if rc != "0":
        last = ""
        try:
            with open(errfile) as f:
                lines = [l.strip() for l in f if l.strip()]
            last = lines[-1] if lines else ""
        except OSError:
            pass
        verdict += f"; exit {rc}: {last}".replace("|", "\\|")
    print(f"| {service} | {recipe} | {workers} | {fmt(steady)} | {fmt(hp50, 3)} | {fmt(hp99, 2)} | "
          f"{fmt(plain)} | {fmt(pp50, 3)} | {fmt(pp99, 2)} | {fmt(ratio, 2)} | {verdict} |")


main()
