# Copyright (c) 2026, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""unit_adoption_info on canned `systemctl show` / `systemctl cat` outputs of hand-made units."""

from __future__ import annotations

import pytest

from ansible.module_utils import basic
from ansible_collections.llmops.vllm.plugins.doc_fragments.variant_settings import ModuleDocFragment
from ansible_collections.llmops.vllm.plugins.modules import unit_adoption_info
from ansible_collections.llmops.vllm.plugins.plugin_utils._documented_options import documented_argument_spec
from ansible_collections.llmops.vllm.plugins.plugin_utils._variants import complete_settings, resolve_variants

from wait_fakes import run_module

UNIT = "vllm-kimi-k25-int4.service"

# The seed's hand-made unit: `vllm serve`, an environment from lines and a file, and the unescaped $free.
SEED = r"""# /etc/systemd/system/vllm-kimi-k25-int4.service
[Unit]
Description=Kimi K2.5 INT4 (hand-made)
After=network-online.target

[Service]
User=vllm
Group=vllm
Environment=OMP_NUM_THREADS=8 "NCCL_P2P_LEVEL=SYS"
EnvironmentFile={envfile}
ExecStartPre=/bin/bash -c 'free=$(nvidia-smi --query-gpu=memory.free --format=csv,noheader,nounits | sort -n | head -1); [ "$free" -gt 90000 ]'
ExecStart=/opt/vllm/venv/bin/vllm serve /srv/models/kimi --served-model-name kimi \
    -tp 8 --max-model-len=262144 --gpu-memory-utilization 0.92 --trust-remote-code \
    --host 0.0.0.0 --port 8000
Restart=always

[Install]
WantedBy=multi-user.target
"""

ENV_FILE = 'HF_HUB_OFFLINE=1\n# the key is vaulted in the collection\nVLLM_API_KEY="s3cr3t-value"\n'

# What the collection resolves for the same server (the production inventory's shape).
SETTINGS = {"model": {"name": "kimi-k25-int4", "path": "/srv/models/kimi", "served_name": "kimi"},
            "serve_args": {"tensor_parallel_size": 8, "max_model_len": 262144, "gpu_memory_utilization": 0.92,
                           "trust_remote_code": True},
            "environment": {"OMP_NUM_THREADS": 8, "NCCL_P2P_LEVEL": "SYS", "HF_HUB_OFFLINE": "1"},
            "host": "0.0.0.0", "port": 8000, "gpu_count": 8, "venv": "/opt/vllm/venv", "version": "0.32.0",
            "baseline_unit_name": UNIT}


def baseline(**changes):
    settings = dict(SETTINGS, **changes)
    return resolve_variants({}, complete_settings(settings, documented_argument_spec(
        ModuleDocFragment.DOCUMENTATION)))["baseline"]


@pytest.fixture
def node(monkeypatch, tmp_path):
    """A node whose systemctl answers for one unit; node.cat, node.show and files under tmp_path are the test's."""
    envfile = tmp_path / "kimi.env"
    envfile.write_text(ENV_FILE, encoding="utf-8")

    class Node:
        show = {"Id": UNIT, "LoadState": "loaded", "ActiveState": "active", "SubState": "running",
                "MainPID": "48211", "FragmentPath": "/etc/systemd/system/" + UNIT}
        cat = SEED.replace("{envfile}", str(envfile))
        calls = []

    def run_command(self, argv, **kwargs):
        Node.calls.append(list(argv))
        if argv[1] == "show":
            return 0, "".join("%s=%s\n" % item for item in Node.show.items()), ""
        if argv[1] == "cat":
            return 0, Node.cat, ""
        raise AssertionError(argv)

    monkeypatch.setattr(basic.AnsibleModule, "run_command", run_command)
    # The main process's environment as /proc gives it; None: unreadable, and the files are trusted.
    Node.process = None
    monkeypatch.setattr(unit_adoption_info, "_process_environment", lambda pid: Node.process)
    monkeypatch.setattr(basic.AnsibleModule, "get_bin_path", lambda self, name, required=False, opt_dirs=None: name)
    Node.envfile = envfile
    return Node


def run(monkeypatch, **args):
    args.setdefault("unit", UNIT)
    return run_module(monkeypatch, unit_adoption_info, args)


def test_the_seed_unit_is_read_as_a_vllm_server_and_its_unescaped_free_is_named(monkeypatch, node):
    failed, result = run(monkeypatch)
    assert not failed and result["changed"] is False
    assert result["main_pid"] == 48211
    assert result["argv"][:3] == ["/opt/vllm/venv/bin/vllm", "serve", "/srv/models/kimi"]
    assert [(p["setting"], p["variable"], p["severity"], p["fix"]) for p in result["problems"]] == [
        ("ExecStartPre", "free", "error", "write $$free (systemd turns $$ into one literal $)")]
    assert result["problems"][0]["where"] == "/etc/systemd/system/%s line 10" % UNIT
    spec = result["spec"]
    assert spec["vllm_baseline_unit_name"] == UNIT
    assert spec["vllm_model"] == {"name": "kimi-k25-int4", "path": "/srv/models/kimi", "served_name": "kimi"}
    assert (spec["vllm_host"], spec["vllm_port"], spec["vllm_venv"]) == ("0.0.0.0", 8000, "/opt/vllm/venv")
    assert spec["vllm_serve_args"] == {"tensor_parallel_size": 8, "max_model_len": 262144,
                                       "gpu_memory_utilization": 0.92, "trust_remote_code": True}
    assert spec["vllm_environment"] == {"OMP_NUM_THREADS": "8", "NCCL_P2P_LEVEL": "SYS", "HF_HUB_OFFLINE": "1"}
    assert spec["vllm_secret_environment"] == {"VLLM_API_KEY": "{{ vault_vllm_api_key }}"}
    assert (spec["vllm_user"], spec["vllm_group"]) == ("vllm", "vllm")
    assert result["environment"]["VLLM_API_KEY"] == "(secret)"
    assert "s3cr3t-value" not in repr(result)
    assert result["action"] is None and result["equivalent"] is None


def test_an_equivalent_unit_is_taken_over_without_a_restart(monkeypatch, node):
    failed, result = run(monkeypatch, expected=baseline(), user="vllm", group="vllm",
                         secret_environment={"VLLM_API_KEY": "s3cr3t-value"}, rendered_unit="[Service]\n")
    assert not failed
    assert result["differences"] == []
    assert result["equivalent"] is True
    assert result["action"] == "take_over"
    assert result["already_adopted"] is False
    assert result["unit_diff"].startswith("--- %s (running, systemctl cat)" % UNIT)


def test_a_different_secret_makes_it_not_equivalent_without_showing_either_value(monkeypatch, node):
    failed, result = run(monkeypatch, expected=baseline(), user="vllm", group="vllm",
                         secret_environment={"VLLM_API_KEY": "another-one"})
    assert not failed and result["equivalent"] is False
    assert [(d["setting"], d["running"], d["collection"]) for d in result["differences"]] == [
        ("environment.VLLM_API_KEY", "(secret)", "(secret)")]
    assert "s3cr3t-value" not in repr(result) and "another-one" not in repr(result)


def test_a_different_unit_is_left_untouched_unless_a_restart_is_asked_for(monkeypatch, node):
    expected = baseline(serve_args=dict(SETTINGS["serve_args"], max_model_len=131072))
    failed, result = run(monkeypatch, expected=expected, user="vllm", group="vllm",
                         secret_environment={"VLLM_API_KEY": "s3cr3t-value"})
    assert not failed and result["equivalent"] is False
    assert [(d["setting"], d["running"], d["collection"]) for d in result["differences"]] == [
        ("serve_args.max_model_len", 262144, 131072)]
    assert result["action"] == "refuse"
    assert "left untouched" in result["reason"] and "vllm_adopt_restart=true" in result["reason"]

    failed, result = run(monkeypatch, expected=expected, user="vllm", group="vllm", restart=True,
                         secret_environment={"VLLM_API_KEY": "s3cr3t-value"})
    assert result["action"] == "restart"


def test_a_unit_already_written_by_the_collection_needs_nothing_while_it_says_what_the_inventory_says(
        monkeypatch, node, tmp_path):
    fragment = tmp_path / UNIT
    fragment.write_text(node.cat.split("\n", 1)[1], encoding="utf-8")
    node.cat = "# %s\n%s" % (fragment, fragment.read_text(encoding="utf-8"))
    args = dict(expected=baseline(), user="vllm", group="vllm", secret_environment={"VLLM_API_KEY": "s3cr3t-value"},
                rendered_unit=fragment.read_text(encoding="utf-8"))
    failed, result = run(monkeypatch, **args)
    assert not failed
    assert result["already_adopted"] is True and result["action"] == "none"
    assert result["unit_diff"] == ""
    # Its environment file lies outside the unit: an inventory that changed since is a difference all the same.
    args["expected"] = baseline(environment={"OMP_NUM_THREADS": 4})
    failed, result = run(monkeypatch, **args)
    assert result["already_adopted"] is True and result["action"] == "refuse"


def test_a_drop_in_that_replaces_exec_start_is_what_runs(monkeypatch, node):
    node.cat = SEED.replace("{envfile}", str(node.envfile)) + (
        "\n# /etc/systemd/system/%s.d/10-context.conf\n[Service]\nExecStart=\n"
        "ExecStart=/opt/vllm/venv/bin/vllm serve /srv/models/kimi --served-model-name kimi -tp 8 "
        "--max-model-len 131072\nEnvironment=OMP_NUM_THREADS=4\n" % UNIT)
    failed, result = run(monkeypatch, expected=baseline(), user="vllm", group="vllm",
                         secret_environment={"VLLM_API_KEY": "s3cr3t-value"})
    assert not failed
    assert result["drop_ins"] == ["/etc/systemd/system/%s.d/10-context.conf" % UNIT]
    assert result["spec"]["vllm_serve_args"] == {"tensor_parallel_size": 8, "max_model_len": 131072}
    assert result["spec"]["vllm_environment"]["OMP_NUM_THREADS"] == "4"
    assert result["equivalent"] is False
    assert {d["setting"] for d in result["differences"]} == {
        "serve_args.max_model_len", "serve_args.gpu_memory_utilization", "serve_args.trust_remote_code",
        "environment.OMP_NUM_THREADS"}


def test_the_module_form_with_environment_quoting_and_variables_in_exec_start(monkeypatch, node):
    node.cat = (
        "# /etc/systemd/system/%s\n[Service]\n"
        "Environment=\"NCCL_DEBUG=WARN\" 'MODEL=/srv/models/kimi' PCT=95%%%% EMPTY=\n"
        "Environment=\"TWO=a b\"\n"
        "ExecStart=/opt/vllm/venv/bin/python3 -m vllm.entrypoints.openai.api_server --model ${MODEL} "
        "--served-model-name \"kimi\" --port=8000 --chat-template-kwargs '{\"thinking\": true}' --note $$HOME "
        "--shown \"%%%%\"\n" % UNIT)
    failed, result = run(monkeypatch)
    assert not failed
    assert result["environment"] == {"NCCL_DEBUG": "WARN", "MODEL": "/srv/models/kimi", "PCT": "95%",
                                     "EMPTY": "", "TWO": "a b"}
    assert result["argv"][3:5] == ["--model", "/srv/models/kimi"]
    spec = result["spec"]
    assert spec["vllm_model"]["path"] == "/srv/models/kimi"
    assert spec["vllm_serve_args"] == {"chat_template_kwargs": {"thinking": True}, "note": "$HOME", "shown": "%"}
    assert result["problems"] == []


def test_percent_specifiers_in_an_exec_line_are_named(monkeypatch, node):
    node.cat = SEED.replace("{envfile}", str(node.envfile)).replace(
        "ExecStartPre=", "ExecStartPost=/bin/sh -c 'date +%s > /run/started'\nExecStartPre=")
    failed, result = run(monkeypatch)
    assert not failed
    specifier = [p for p in result["problems"] if p["setting"] == "ExecStartPost"]
    assert [(p["severity"], p["fix"]) for p in specifier] == [("warning", "write %%s where a literal %s is meant")]
    assert "the user's shell" in specifier[0]["message"]


@pytest.mark.parametrize("show, message", [
    ({"LoadState": "not-found", "ActiveState": "inactive"},
     "vllm_baseline_unit_name: %s is not a unit of this node (LoadState=not-found)" % UNIT),
    ({"ActiveState": "failed", "SubState": "failed"},
     "vllm_baseline_unit_name: %s is failed (failed), not running; adoption takes over a serving unit only" % UNIT),
    ({"Id": "vllm-other.service"}, "vllm_baseline_unit_name: %s is an alias of vllm-other.service" % UNIT),
])
def test_a_unit_that_cannot_be_adopted_fails_before_anything_else(monkeypatch, node, show, message):
    node.show = dict(node.show, **show)
    failed, result = run(monkeypatch)
    assert failed
    assert result["msg"].startswith(message)


def test_a_unit_that_runs_no_vllm_server_is_refused(monkeypatch, node):
    node.cat = "# /etc/systemd/system/%s\n[Service]\nExecStart=/usr/bin/python3 -m http.server 8000\n" % UNIT
    failed, result = run(monkeypatch)
    assert failed
    assert result["msg"].startswith("vllm_baseline_unit_name: %s cannot be adopted: ExecStart= runs /usr/bin/python3 "
                                    "-m http.server, which is not a vLLM server" % UNIT)


def test_a_bad_unit_name_fails_before_systemctl_is_asked(monkeypatch, node):
    node.calls.clear()
    failed, result = run(monkeypatch, unit="vllm kimi;rm.service")
    assert failed
    assert result["msg"].startswith("vllm_baseline_unit_name: 'vllm kimi;rm.service' must be a service unit name")
    assert node.calls == []


def test_a_file_edited_since_the_start_is_not_what_runs(monkeypatch, node):
    node.process = {"OMP_NUM_THREADS": "8", "NCCL_P2P_LEVEL": "SYS", "HF_HUB_OFFLINE": "0",
                    "VLLM_API_KEY": "s3cr3t-value", "PATH": "/usr/bin", "INVOCATION_ID": "abc"}
    failed, result = run(monkeypatch, expected=baseline(), user="vllm", group="vllm",
                         secret_environment={"VLLM_API_KEY": "s3cr3t-value"})
    assert not failed and result["equivalent"] is False and result["action"] == "refuse"
    assert [(d["setting"], d["running"]) for d in result["differences"]] == [("environment.HF_HUB_OFFLINE", "0")]
    assert "edited since it started" in result["differences"][0]["message"]
    node.process["HF_HUB_OFFLINE"] = "1"
    failed, result = run(monkeypatch, expected=baseline(), user="vllm", group="vllm",
                         secret_environment={"VLLM_API_KEY": "s3cr3t-value"})
    assert result["equivalent"] is True


@pytest.mark.parametrize("user_line, why", [("", "it sets no User="), ("User=root\n", "User=root")])
@pytest.mark.parametrize("restart", [False, True])
def test_a_unit_that_runs_as_root_is_refused_before_anything_changes(monkeypatch, node, user_line, why, restart):
    node.cat = SEED.replace("{envfile}", str(node.envfile)).replace("User=vllm\n", user_line)
    failed, result = run(monkeypatch, expected=baseline(), user="vllm", group="vllm", restart=restart,
                         secret_environment={"VLLM_API_KEY": "s3cr3t-value"})
    assert failed
    assert result["msg"].startswith("vllm_user: %s runs as root (%s" % (UNIT, why))
    assert "action" not in result and "s3cr3t-value" not in repr(result)


def test_a_root_unit_is_still_read_when_nothing_is_decided(monkeypatch, node):
    node.cat = SEED.replace("{envfile}", str(node.envfile)).replace("User=vllm\n", "")
    failed, result = run(monkeypatch)
    assert not failed and result["user"] is None and result["action"] is None
    assert "vllm_user" not in result["spec"]
