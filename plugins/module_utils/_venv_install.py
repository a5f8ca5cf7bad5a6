# This module_utils file is private to the llmops.vllm collection: its API may change without notice.
# Copyright (c) 2026, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""One vLLM release in a venv of its own: created, installed with its pinned packages, checked and recorded.

The venv of a release that a unit runs from must never be touched again: pip runs only when the release or
one of the pins is missing, so a venv that holds them is left exactly as it is. What the venv holds is read
by the venv's own Python (importlib.metadata), and every command is an argument vector.

A failed install leaves the node as it was: a venv created for it is removed, and the message names the
variable that declared the release, because nothing was stopped yet and the units run as before.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import stat
import tempfile

CONSTRAINTS_FILE = "llmops-constraints.txt"
# What the venv holds (pip freeze --all): the pins to copy into vllm_pip_constraints, and the mark of a venv
# this collection installed, which alone the role's retention may remove.
RECORD_FILE = "llmops-installed.txt"

# Run by the venv's Python with the package name: prints the version it holds, or fails.
VERSION_PROGRAM = "import importlib.metadata, sys; print(importlib.metadata.version(sys.argv[1]))"
# Run by the venv's Python with NAME==VERSION pins as arguments: prints, as JSON, the pins it does not hold exactly.
MISSING_PINS_PROGRAM = """\
import importlib.metadata, json, sys
def held(pin):
    name, version = pin.split("==")
    try:
        return importlib.metadata.version(name) == version
    except importlib.metadata.PackageNotFoundError:
        return False
print(json.dumps([pin for pin in sys.argv[1:] if not held(pin)]))
"""
UNTOUCHED = "Nothing was stopped; the units run as before."


class VenvError(Exception):
    """The venv does not hold, or could not be given, what it was told to; the message names the variable."""

    def __init__(self, msg, **result):
        super().__init__(msg)
        self.result = result


def last_line(out, err):
    """The last line pip wrote to stderr, or to stdout when stderr is empty: where pip says why it failed."""
    lines = (err.strip() or out.strip()).splitlines()
    return lines[-1].strip() if lines else ""


def release_of(version):
    """The release part of an installed version: 0.32.0+cpu is release 0.32.0."""
    return version.split("+")[0]


def write_file(path, text, check_mode, diffs=None):
    """Make path a root-owned 0644 file holding exactly text; return whether it changed (or would).

    A change of the text is added to diffs, as --diff shows it.
    """
    data = text.encode("utf-8")
    try:
        with open(path, "rb") as current:
            before = current.read()
        status = os.stat(path)
        same = before == data and stat.S_IMODE(status.st_mode) == 0o644 and (
            os.geteuid() != 0 or (status.st_uid, status.st_gid) == (0, 0))
    except FileNotFoundError:
        before, same = b"", False
    if diffs is not None and before != data:
        diffs.append({"before_header": path, "after_header": path, "before": before.decode("utf-8", "replace"),
                      "after": text})
    if same or check_mode:
        return not same
    descriptor, temporary = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".llmops-")
    try:
        with os.fdopen(descriptor, "wb") as new:
            new.write(data)
            os.fchmod(new.fileno(), 0o644)
            if os.geteuid() == 0:
                os.fchown(new.fileno(), 0, 0)
        os.replace(temporary, path)
    except BaseException:
        if os.path.exists(temporary):
            os.unlink(temporary)
        raise
    return True


class Venv:
    """A venv directory, read and changed through its own Python by run_command (AnsibleModule.run_command)."""

    def __init__(self, path, run_command):
        self.path = path.rstrip("/") or "/"
        self.python = os.path.join(self.path, "bin", "python")
        self.run = run_command

    def exists(self):
        return os.path.exists(self.python)

    def version(self, package):
        """The version of package the venv holds, or None when it holds none (or cannot say)."""
        if not self.exists():
            return None
        rc, out, _err = self.run([self.python, "-c", VERSION_PROGRAM, package])
        return out.strip() if rc == 0 else None

    def missing_pins(self, pins):
        """(the NAME==VERSION pins the venv does not hold exactly, None), or (None, why) when it cannot say."""
        if not pins:
            return [], None
        if not self.exists():
            return None, "%s does not exist" % self.python
        rc, out, err = self.run([self.python, "-c", MISSING_PINS_PROGRAM] + list(pins))
        if rc != 0:
            return None, last_line(out, err) or "rc %d" % rc
        try:
            return json.loads(out), None
        except ValueError:
            return None, "unreadable answer %r" % out.strip()

    def pip(self, arguments, environment):
        return self.run([self.python, "-m", "pip"] + arguments, environ_update=environment,
                        path_prefix=os.path.join(self.path, "bin"))


def install_release(run_command, python3, params, check_mode=False):
    """Give the venv at params["path"] its release and pins, check that it holds them and record what it holds.

    params holds the module's options (path, package, release, pip_packages, constraints, extra_args, environment,
    remove_packages, install, variable). Returns the module's result; raises VenvError with the message to fail
    with. With install false nothing is changed, only checked. In check mode nothing is changed, a venv that
    does not exist yet is let pass as the role always did, and a venv that a real run would create or install
    into is reported as that change, without the checks that only the install could satisfy.
    """
    venv = Venv(params["path"], run_command)
    package, release, variable = params["package"], params["release"], params["variable"]
    pins = list(params["pip_packages"] or [])
    install = params["install"]
    wanted = "%s==%s" % (package, release) + "".join(" and " + pin for pin in pins)
    done = []
    diffs = []
    created = pip_ran = installed = False

    if install and not venv.exists():
        if check_mode:
            return _result(venv, True, None, pins, True, "would create the venv and install %s" % wanted)
        _create(venv, python3, package, release, variable)
        created = True
        done.append("created the venv")

    if install:
        version, pins_held = venv.version(package), venv.missing_pins(pins)
        try:
            if params["constraints"] is not None:
                text = "".join(pin + "\n" for pin in params["constraints"]) or "\n"
                if write_file(os.path.join(venv.path, CONSTRAINTS_FILE), text, check_mode, diffs):
                    done.append("%s the constraints of %s" % ("would write" if check_mode else "wrote", release))
            if version is None or release_of(version) != release or pins_held[0]:
                if check_mode:
                    done.append("would install %s" % wanted)
                    return _result(venv, True, version, pins_held[0] or [], True, "; ".join(done), diffs)
                pip_ran = True
                installed = _pip_install(venv, params)
        except (VenvError, OSError) as exc:
            if created:
                shutil.rmtree(venv.path, ignore_errors=True)
            if isinstance(exc, VenvError):
                raise
            raise VenvError("%s: could not install %s==%s into %s: %s. %s"
                            % (variable, package, release, venv.path, exc, UNTOUCHED)) from None
        if installed:
            done.append("installed %s" % wanted)
            if params["remove_packages"] and _pip_uninstall(venv, params):
                done.append("removed %s" % ", ".join(params["remove_packages"]))

    # What the venv holds afterwards: read again once pip has run, or for the first time when only checking.
    if pip_ran or not install:
        version, pins_held = venv.version(package), venv.missing_pins(pins)
    _check_version(venv, params, version, check_mode)
    missing = _check_pins(venv, params, pins, pins_held, check_mode)

    if install and (installed or not os.path.exists(os.path.join(venv.path, RECORD_FILE))):
        if _record(venv, params, check_mode, diffs):
            done.append("would record what it holds" if check_mode else "recorded what it holds")

    if done:
        return _result(venv, True, version, missing, installed, "; ".join(done), diffs)
    if version is None:
        return _result(venv, False, None, missing, False, "holds no %s yet" % package)
    return _result(venv, False, version, missing, False, "holds %s %s%s, as declared" % (
        package, version, " and " + ", ".join(pins) if pins else ""))


def _result(venv, changed, version, missing, installed, msg, diffs=()):
    return {"changed": changed, "path": venv.path, "version": version, "missing_pins": missing,
            "installed": installed, "msg": "%s: %s" % (venv.path, msg), "diff": list(diffs)}


def _create(venv, python3, package, release, variable):
    """python3 -m venv; a venv left half made is removed, so that the next run creates it again."""
    if not python3:
        raise VenvError("%s: cannot create %s for %s==%s: python3 is not on the PATH. %s"
                        % (variable, venv.path, package, release, UNTOUCHED))
    rc, out, err = venv.run([python3, "-m", "venv", venv.path])
    if rc != 0:
        shutil.rmtree(venv.path, ignore_errors=True)
        raise VenvError("%s: could not create the venv %s for %s==%s: %s. %s"
                        % (variable, venv.path, package, release, last_line(out, err), UNTOUCHED), rc=rc)


def _pip_install(venv, params):
    """Install the release and the pins in one resolution, so that pip cannot move vLLM's own pins.

    Returns whether pip installed anything, as pip says it.
    """
    arguments = ["install"] + shlex.split(params["extra_args"] or "")
    if params["constraints"] is not None:
        arguments += ["--constraint", os.path.join(venv.path, CONSTRAINTS_FILE)]
    arguments += ["%s==%s" % (params["package"], params["release"])] + list(params["pip_packages"] or [])
    rc, out, err = venv.pip(arguments, params["environment"])
    if rc != 0:
        raise VenvError("%s: could not install %s==%s into %s: %s. %s"
                        % (params["variable"], params["package"], params["release"], venv.path, last_line(out, err),
                           UNTOUCHED), rc=rc, stdout=out, stderr=err)
    return "Successfully installed" in out


def _pip_uninstall(venv, params):
    """Remove the packages that break imports beside the installed torch; return whether any was removed.

    pip re-resolves the dependencies at each install and brings them back, so this follows every install.
    """
    rc, out, err = venv.pip(["uninstall", "-y"] + list(params["remove_packages"]), params["environment"])
    # Older pips exit 1 for a package that is not installed.
    if rc != 0 and not (rc == 1 and ("not installed" in out or "not installed" in err)):
        raise VenvError("%s: installed %s==%s into %s, but could not remove %s: %s"
                        % (params["variable"], params["package"], params["release"], venv.path,
                           ", ".join(params["remove_packages"]), last_line(out, err)), rc=rc, stdout=out, stderr=err)
    return "Successfully uninstalled" in out


def _check_version(venv, params, version, check_mode):
    """The venv must hold the declared release; in check mode a venv that holds nothing yet is let pass."""
    if version is not None and release_of(version) == params["release"]:
        return
    if version is None and check_mode:
        return
    raise VenvError("%s: declares %s %s, but %s holds %s (%s)" % (
        params["variable"], params["package"], params["release"], venv.path, version or "no such package",
        "the install did not take" if params["install"] else "set vllm_install: true or install it"),
        version=version)


def _check_pins(venv, params, pins, answer, check_mode):
    """The venv must hold each pin exactly; returns the missing pins (none), or the pins when it cannot say."""
    missing, error = answer
    if missing is None:
        if check_mode:
            return list(pins)
        raise VenvError("%s: could not read which of %s %s holds: %s"
                        % (params["variable"], ", ".join(pins), venv.path, error))
    if missing:
        raise VenvError("%s: %s lacks %s (%s)" % (
            params["variable"], venv.path, ", ".join(missing),
            "the install did not take" if params["install"] else "set vllm_install: true or install them"),
            missing_pins=missing)
    return missing


def _record(venv, params, check_mode, diffs):
    """Keep pip freeze --all in the venv's record; return whether the record changed (or would)."""
    path = os.path.join(venv.path, RECORD_FILE)
    if check_mode:
        return True
    rc, out, err = venv.run([venv.python, "-m", "pip", "freeze", "--all"])
    if rc != 0:
        raise VenvError("%s: could not list what %s holds: %s" % (params["variable"], venv.path, last_line(out, err)))
    return write_file(path, out.rstrip("\r\n") + "\n", check_mode, diffs)
