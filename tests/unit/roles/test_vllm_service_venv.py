# Copyright (c) 2026, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The venv of a release, as the vllm_service role installs it, run for real on this machine.

The role installs each venv with llmops.vllm.vllm_venv; here the module runs through ansible-playbook with the
role's arguments for a release and a variant's pinned packages. The packages are tiny wheels built here and
installed from a local folder with --no-index, standing in for vLLM and arctic-inference, so the run is offline
and takes seconds while pip, the venv and the checks are real.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[3]
ANSIBLE_PLAYBOOK = Path(sys.executable).parent / "ansible-playbook"

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the role writes root-owned files into the venv")


def build_wheel(folder, name, version):
    """A pure-Python wheel holding one module, as pip expects it (PEP 427), without setuptools."""
    module = name.replace("-", "_")
    dist_info = "%s-%s.dist-info" % (module, version)
    files = {
        "%s.py" % module: "VERSION = %r\n" % version,
        "%s/METADATA" % dist_info: "Metadata-Version: 2.1\nName: %s\nVersion: %s\n" % (name, version),
        "%s/WHEEL" % dist_info: "Wheel-Version: 1.0\nGenerator: llmops-test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = []
    for path, text in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
        record.append("%s,sha256=%s,%d" % (path, digest, len(text.encode())))
    record.append("%s/RECORD,," % dist_info)
    files["%s/RECORD" % dist_info] = "\n".join(record) + "\n"
    with zipfile.ZipFile(folder / ("%s-%s-py3-none-any.whl" % (module, version)), "w") as wheel:
        for path, text in files.items():
            wheel.writestr(path, text)


@pytest.fixture(scope="module")
def wheels(tmp_path_factory):
    folder = tmp_path_factory.mktemp("wheels")
    for name, version in (("fake-engine", "1.0.0"), ("fake-plugin", "0.2.0"), ("fake-plugin", "0.3.0")):
        build_wheel(folder, name, version)
    return folder


def install(tmp_path, wheels, venv, pins, install=True, release="1.0.0"):
    """Install one venv with the module, as the role calls it; return its result and its failure, if any."""
    if not ANSIBLE_PLAYBOOK.exists():
        pytest.skip("ansible-playbook is not installed beside this Python")
    outcome = tmp_path / "outcome.json"
    play = [{
        "name": "Install one release and its pins",
        "hosts": "localhost",
        "gather_facts": False,
        "tasks": [
            {"name": "Install the venv as the role does",
             "block": [{"llmops.vllm.vllm_venv": {
                 "path": str(venv), "package": "fake-engine", "release": release, "pip_packages": pins,
                 "extra_args": "--no-index --find-links %s" % wheels, "install": install,
                 "variable": "vllm_variants.suffix.pip_packages"},
                 "register": "installed"}],
             "rescue": [{"ansible.builtin.set_fact": {"failure": "{{ ansible_failed_result }}"}}]},
            {"name": "Keep the outcome",
             "ansible.builtin.copy": {"dest": str(outcome), "mode": "0600", "content": (
                 "{{ {'install': installed | default(None), 'failure': failure | default(None)} | to_json }}")}},
        ],
    }]
    playbook = tmp_path / "venv.yml"
    playbook.write_text(yaml.safe_dump(play, sort_keys=False), encoding="utf-8")
    env = {key: value for key, value in os.environ.items() if not key.startswith(("ANSIBLE_", "LLMOPS_VLLM_"))}
    env.update(ANSIBLE_COLLECTIONS_PATH=str(REPO / ".cache" / "collections"), ANSIBLE_LOCAL_TEMP=str(tmp_path / "tmp"),
               ANSIBLE_NOCOLOR="1")
    outcome.unlink(missing_ok=True)
    inventory = tmp_path / "hosts.ini"
    inventory.write_text("localhost ansible_connection=local ansible_python_interpreter=%s\n" % sys.executable,
                         encoding="utf-8")
    process = subprocess.run([str(ANSIBLE_PLAYBOOK), "-i", str(inventory), str(playbook)], cwd=tmp_path,
                             env=env, capture_output=True, text=True, timeout=300, check=False)
    assert process.returncode == 0, process.stdout[-3000:] + process.stderr[-3000:]
    result = json.loads(outcome.read_text())
    return result["install"], result["failure"]


def held(venv):
    program = "import importlib.metadata as m, json; print(json.dumps({d.metadata['Name']: d.version for d in m.distributions()}))"
    return json.loads(subprocess.run([str(venv / "bin" / "python"), "-c", program], capture_output=True, text=True,
                                     check=True).stdout)


def test_the_release_and_the_pins_are_installed_together_then_left_alone(tmp_path, wheels):
    venv = tmp_path / "1.0.0+fake-plugin-0.3.0"
    installed, failure = install(tmp_path, wheels, venv, ["fake-plugin==0.3.0"])
    assert failure is None
    packages = held(venv)
    assert (packages["fake-engine"], packages["fake-plugin"]) == ("1.0.0", "0.3.0")
    assert installed["changed"] is True and installed["installed"] is True
    assert installed["version"] == "1.0.0" and installed["missing_pins"] == []
    assert "fake-plugin==0.3.0" in (venv / "llmops-installed.txt").read_text().splitlines()

    # A venv that holds its release and pins is never touched again.
    record = (venv / "llmops-installed.txt").stat().st_mtime_ns
    installed, failure = install(tmp_path, wheels, venv, ["fake-plugin==0.3.0"])
    assert failure is None
    assert installed["changed"] is False and installed["installed"] is False
    assert (venv / "llmops-installed.txt").stat().st_mtime_ns == record


# One venv for both cases (each venv pip creates takes tens of seconds on a busy machine): held at another pin, it
# fails when the role may not install and is left alone, then gets the pin when it may.
def test_a_venv_holding_the_release_but_another_pin_fails_when_the_role_may_not_install_and_gets_it_when_it_may(
        tmp_path, wheels):
    venv = tmp_path / "venv"
    assert install(tmp_path, wheels, venv, ["fake-plugin==0.2.0"])[1] is None
    failure = install(tmp_path, wheels, venv, ["fake-plugin==0.3.0"], install=False)[1]
    assert failure["failed"] is True
    assert failure["msg"] == ("vllm_variants.suffix.pip_packages: %s lacks fake-plugin==0.3.0 (set vllm_install: true "
                              "or install them)" % venv)
    assert held(venv)["fake-plugin"] == "0.2.0"

    installed, failure = install(tmp_path, wheels, venv, ["fake-plugin==0.3.0"])
    assert failure is None
    assert installed["changed"] is True
    assert held(venv)["fake-plugin"] == "0.3.0"


def test_a_release_pip_cannot_find_fails_naming_the_variable_and_leaves_no_venv(tmp_path, wheels):
    venv = tmp_path / "9.9.9"
    installed, failure = install(tmp_path, wheels, venv, ["fake-plugin==0.3.0"], release="9.9.9")
    assert failure["failed"] is True
    assert failure["msg"].startswith("vllm_variants.suffix.pip_packages: could not install fake-engine==9.9.9 into "
                                     "%s: ERROR: No matching distribution found for fake-engine==9.9.9" % venv)
    assert failure["msg"].endswith(". Nothing was stopped; the units run as before.")
    assert not venv.exists()
