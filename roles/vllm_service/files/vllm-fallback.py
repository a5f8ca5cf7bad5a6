# Copyright (c) 2026, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Put a model's baseline back when a variant kept in service has failed for good.

systemd runs this (vllm-fallback@<model>.service, through the variants' OnFailure=) once a variant's unit
has given up restarting: its start limit was hit, so every further restart would be another full load.
It marks each failed variant "fell_back" in its trial record and in the node's history, so that the
switch role does not keep it again until something about it changes, starts the baseline, and then tells the
operator's notification hook, where the role wrote one for the node (a 0600 file: its headers may hold a token).
A switch in progress owns what runs: the unit's ConditionPathExists= skips this while the switch lock
exists. Standard library only; it runs on the node with the system's python3.

Records are written by the collection's own record code (module_utils/_trial_records.py), which the role
installs beside this script, so that this script and the switch role's trial_record module write alike.
"""

import datetime
import json
import os
import socket
import subprocess
import sys
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
try:
    from _trial_records import record_path, write_trial_record
except ImportError:  # run from the collection itself, as its tests do
    from ansible_collections.llmops.vllm.plugins.module_utils._trial_records import record_path, write_trial_record


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
        path = record_path(config["records_dir"], variant)
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


def notification(config, records, started):
    """What the notification hook is told: the switch role's notification fields, for the event "fallback"."""
    return {
        "event": "fallback", "phase": "fell back", "host": socket.getfqdn(), "model": config["model"],
        "baseline": config.get("baseline", "baseline"), "unit": config["baseline_unit"],
        "baseline_started": started == 0, "outcome": "fell_back",
        "variant": ", ".join(record["variant"] for dummy, record in records),
        "failed_units": [record["unit"] for dummy, record in records],
        "reason": "; ".join(record["reason"] for dummy, record in records),
        "estimate": None, "dark_minutes": None,
    }


def notify(hook, payload, opener=urllib.request.urlopen, run=subprocess.run):
    """Call the hook ({url, method, headers, body, status_code} or {argv}) with the payload; a message on failure.

    The baseline was started before this runs: a hook that is down must not keep the node dark.
    """
    body = json.dumps(hook.get("body", payload)).encode()
    try:
        if "url" in hook:
            request = urllib.request.Request(hook["url"], data=body, method=hook.get("method", "POST"),
                                             headers=dict(hook.get("headers") or {}, **{"Content-Type": "application/json"}))
            with opener(request, timeout=30) as response:
                status = response.status
            if status not in hook.get("status_code", [200, 201, 202, 204]):
                return "the notification hook answered HTTP %s" % status
        elif "argv" in hook:
            done = run(hook["argv"], input=body, capture_output=True, timeout=60, check=False)
            if done.returncode != 0:
                return "the notification hook's command exited %s" % done.returncode
    except (OSError, ValueError, subprocess.SubprocessError) as error:
        # The URL and headers may name a secret: only the kind of failure is said.
        return "the notification hook could not be called (%s)" % type(error).__name__
    return None


def read_hook(path):
    """The hook the role wrote for the node, or None where it wrote none."""
    if not path or not os.path.exists(path):
        return None
    with open(path, encoding="utf-8") as handle:
        return json.load(handle) or None


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
    records = fallback_records(config, failed, now, "systemd@" + socket.getfqdn())
    for dummy, record in records:
        write_trial_record(config["records_dir"], record)
        print(record["reason"])
    # Start, not restart: the variants' Conflicts= keeps only one unit of the model running.
    started = subprocess.run(["systemctl", "start", "--no-block", config["baseline_unit"]], check=False).returncode
    hook = read_hook(config.get("notify_file"))
    if hook:
        problem = notify(hook, notification(config, records, started))
        print(problem or "the notification hook was told", file=sys.stderr if problem else sys.stdout)
    return started


if __name__ == "__main__":
    sys.exit(main(sys.argv))
