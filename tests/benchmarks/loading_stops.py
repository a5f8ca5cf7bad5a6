"""How long a vLLM unit takes to stop while it is still loading, stopped as the switch stops it.

Run on a node (the mock's, or a GPU node out of service), as root, with the model's units stopped but one:

    ansible vllm_nodes -b -m ansible.builtin.script -a '{"executable": "python3",
        "cmd": "tests/benchmarks/loading_stops.py --unit vllm-tiny-llama-baseline.service --stops 20"}'

Each round starts the unit, lets it load for a while (a different time each round, so that the stops land in
different phases of the load: interpreter start-up, weights, KV-cache profiling, warm-up), then stops it the way
llmops.vllm.vllm_unit stops a unit whose server does not answer (a queued stop, so that Restart= does not start it
again, then SIGKILL to every process of the unit, then reset-failed), and times it from the kill to the unit's
inactive state with no process left. The unit is started again at the end. Prints JSON: every stop's seconds and load time, their median and the worst.
"""

import argparse
import json
import statistics
import subprocess
import time


def show(unit, *properties):
    output = subprocess.run(["systemctl", "show", "--property=" + ",".join(properties), unit],
                            capture_output=True, text=True, check=True).stdout
    return dict(line.split("=", 1) for line in output.splitlines() if "=" in line)


def wait_for(unit, predicate, timeout):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        state = show(unit, "ActiveState", "MainPID", "ControlGroup")
        if predicate(state):
            return state
        time.sleep(0.05)
    raise SystemExit("%s: not done within %s s: %s" % (unit, timeout, state))


def stopped(state):
    return state["ActiveState"] in ("inactive", "failed") and state["MainPID"] in ("0", "")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--unit", required=True)
    parser.add_argument("--stops", type=int, default=20)
    parser.add_argument("--shortest-load", type=float, default=1.0, help="seconds of load before the first stop")
    parser.add_argument("--longest-load", type=float, default=10.0, help="seconds of load before the last stop")
    args = parser.parse_args()
    subprocess.run(["systemctl", "stop", args.unit], check=True)
    rounds = []
    for number in range(args.stops):
        load = args.shortest_load + (args.longest_load - args.shortest_load) * number / max(1, args.stops - 1)
        subprocess.run(["systemctl", "start", "--no-block", args.unit], check=True)
        wait_for(args.unit, lambda state: state["MainPID"] not in ("0", ""), 30)
        time.sleep(load)
        began = time.monotonic()
        subprocess.run(["systemctl", "stop", "--no-block", args.unit], check=True)
        subprocess.run(["systemctl", "kill", "--signal=SIGKILL", args.unit], check=False)
        wait_for(args.unit, stopped, 300)
        rounds.append({"loaded_s": round(load, 1), "stop_s": round(time.monotonic() - began, 2)})
        subprocess.run(["systemctl", "reset-failed", args.unit], check=False)
    subprocess.run(["systemctl", "start", args.unit], check=True)
    seconds = [entry["stop_s"] for entry in rounds]
    print(json.dumps({"unit": args.unit, "stops": rounds, "median_s": statistics.median(seconds),
                      "worst_s": max(seconds)}))


if __name__ == "__main__":
    main()
