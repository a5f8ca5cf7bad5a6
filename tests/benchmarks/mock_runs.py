# Copyright (c) 2026, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Playbook runs against the running mock node, for the measuring scripts beside this file."""

from __future__ import annotations

import glob
import json
import os
import subprocess
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def playbook(name, *extra_vars):
    """Run playbooks/NAME from the checkout, each extra_vars mapping given with -e as JSON."""
    arguments = ["ansible-playbook", os.path.join(ROOT, "playbooks", name)]
    for variables in extra_vars:
        arguments += ["-e", json.dumps(variables)]
    subprocess.run(arguments, cwd=ROOT, check=True, stdout=subprocess.DEVNULL)


def benchmark(label, overrides=None):
    """One run of benchmark.yml against what serves now, options laid over the workload; its stored levels."""
    directory = tempfile.mkdtemp(prefix="mock-benchmark-")
    arguments = ["ansible-playbook", os.path.join(ROOT, "playbooks", "benchmark.yml")]
    if overrides:
        arguments += ["-e", json.dumps({"vllm_benchmark": overrides})]
    env = dict(os.environ, LLMOPS_VLLM_BENCHMARKS_JSON_DIR=directory)
    subprocess.run(arguments, cwd=ROOT, env=env, check=True, stdout=subprocess.DEVNULL)
    levels = []
    for path in sorted(glob.glob(os.path.join(directory, "*.json"))):
        with open(path, encoding="utf-8") as handle:
            document = json.load(handle)
        if "output_throughput" in document:
            levels.append(document)
    if not levels:
        raise SystemExit("%s: benchmark.yml stored no result in %s" % (label, directory))
    return levels
