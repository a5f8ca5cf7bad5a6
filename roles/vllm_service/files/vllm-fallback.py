# Copyright (c) 2026, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Put a model's baseline back when a variant kept in service has failed for good.

systemd runs this (vllm-fallback@<model>.service, through the variants' OnFailure=) once a variant's unit
has given up restarting: its start limit was hit, so every further restart would be another full load.
It marks each failed variant "fell_back" in its trial record and in the node's history, so that the
switch role does not keep it again until something about it changes, and starts the baseline.
A switch in progress owns what runs: the unit's ConditionPathExists= skips this while the switch lock
exists. Standard library only; it runs on the node with the system's python3.
"""

import datetime
import json
import os
import socket
import subprocess
import sys


def show(unit):
    """systemd's view of a unit: ActiveState, Result and when it last became inactive."""
    output = subprocess.run(
        ["systemctl", "show", "--property=ActiveState,Result,InactiveEnterTimestamp,NRestarts", unit],
        capture_output=True, text=True, check=False).stdout
    return dict(line.split("=", 1) for line in output.splitlines() if "=" in line)


def failed_variants(config, show_unit):
    """The variants of the model whose units are failed, with what systemd says of them."""
    failed = []
    for unit, variant in sorted(config["units"].items()):
        if unit == config["baseline_unit"]:
            continue
        state = show_unit(unit)
        if state.get("ActiveState") == "failed":
            failed.append((variant, unit, state))
    return failed


def fallback_records(config, failed, now, who):
    """(record path, record) for each failed variant: its trial record, marked as fallen back."""
    records = []
    for variant, unit, state in failed:
        path = os.path.join(config["records_dir"], variant + ".json")
        try:
            with open(path, encoding="utf-8") as handle:
                record = json.load(handle)
        except (OSError, ValueError):
            record = {"variant": variant, "unit": unit}
        record = dict(record, variant=variant, model=config["model"], unit=unit, outcome="fell_back",
                      reason="%s failed in service (%s, %s restarts) and systemd put %s back at %s" % (
                          unit, state.get("Result") or "unknown result", state.get("NRestarts") or "?",
                          config["baseline_unit"], now),
                      started_by=who, finished_at=now, recorded_at=now, run_id=None, playbook=None)
        records.append((path, record))
    return records


def write_record(path, record, history):
    """Replace the variant's record atomically and append it to the history, as the switch role does."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    temporary = path + ".fallback"
    with open(temporary, "w", encoding="utf-8") as handle:
        handle.write(json.dumps(record, indent=2, sort_keys=True) + "\n")
        handle.flush()
        os.fsync(handle.fileno())
    os.chmod(temporary, 0o644)
    os.replace(temporary, path)
    descriptor = os.open(history, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(descriptor, (json.dumps(record, sort_keys=True) + "\n").encode("utf-8"))
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def main(argv):
    if len(argv) != 2:
        print("usage: vllm-fallback CONFIG.json", file=sys.stderr)
        return 2
    with open(argv[1], encoding="utf-8") as handle:
        config = json.load(handle)
    failed = failed_variants(config, show)
    if not failed:
        print("no variant of %s is failed; nothing to do" % config["model"])
        return 0
    now = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    for path, record in fallback_records(config, failed, now, "systemd@" + socket.getfqdn()):
        write_record(path, record, os.path.join(config["records_dir"], "history.jsonl"))
        print(record["reason"])
    # Start, not restart: the variants' Conflicts= keeps only one unit of the model running.
    return subprocess.run(["systemctl", "start", "--no-block", config["baseline_unit"]], check=False).returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv))
