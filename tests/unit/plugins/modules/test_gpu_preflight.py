# Copyright (c) 2026, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""gpu_preflight against the mock host's own nvidia-smi (molecule/mock_host/files), with its canned faults."""

from __future__ import annotations

import functools
import json
import os
import pathlib
import subprocess
import sys

import pytest

from ansible.module_utils import basic
from ansible_collections.llmops.vllm.plugins.module_utils import _gpu_health, _gpu_memory
from ansible_collections.llmops.vllm.plugins.modules import gpu_preflight

from wait_fakes import run_module

MOCK_NVIDIA_SMI = pathlib.Path(__file__).resolve().parents[4] / "molecule" / "mock_host" / "files" / "nvidia-smi"


@pytest.fixture
def node(monkeypatch, tmp_path):
    """A node of eight GPUs answered by the mock nvidia-smi; node(health) plants its faults."""
    def plant(health=None, count=8, cuda_version="13.0", name="NVIDIA RTX PRO 6000 Blackwell Server Edition"):
        config = {"count": count, "name": name, "memory_total_mib": 97887,
                  "idle_used_mib": 1, "uuid_prefix": "test", "driver_version": "580.95.05",
                  "cuda_version": cuda_version, "health": health or {}}
        (tmp_path / "gpus.json").write_text(json.dumps(config), encoding="utf-8")
        return tmp_path

    environment = dict(os.environ, MOCK_GPU_CONFIG=str(tmp_path / "gpus.json"),
                       MOCK_GPU_HOLDERS=str(tmp_path / "holders"), MOCK_GPU_RELEASING=str(tmp_path / "releasing.json"))
    calls = []
    # Canned answers by the command's first words, such as ("journalctl",) for the kernel log.
    answers = {("journalctl",): (0, "", "")}

    def run_command(self, argv, **kwargs):
        calls.append(list(argv))
        for words, answer in answers.items():
            if tuple(argv[:len(words)]) == words:
                return answer
        if argv[0] == "nvidia-smi":
            argv = [sys.executable, str(MOCK_NVIDIA_SMI)] + list(argv[1:])
        done = subprocess.run(argv, env=environment, capture_output=True, text=True, check=False)
        return done.returncode, done.stdout, done.stderr

    monkeypatch.setattr(_gpu_memory, "pynvml", None)
    monkeypatch.setattr(basic.AnsibleModule, "run_command", run_command)
    monkeypatch.setattr(basic.AnsibleModule, "get_bin_path", lambda self, name, required=False, opt_dirs=None: name)
    # The node's /dev, /usr/bin/nvidia-modprobe and /sys, empty as on the mock host until a test plants them.
    plant.dev, plant.sysfs = tmp_path / "dev", tmp_path / "sys"
    plant.nvidia_modprobe = tmp_path / "usr" / "bin" / "nvidia-modprobe"
    plant.dev.mkdir()
    monkeypatch.setattr(gpu_preflight, "nvidia_uvm_state", functools.partial(
        _gpu_health.nvidia_uvm_state, dev=str(plant.dev), nvidia_modprobe=str(plant.nvidia_modprobe)))
    monkeypatch.setattr(gpu_preflight, "pcie_acs", functools.partial(_gpu_health.pcie_acs, sysfs=str(plant.sysfs)))
    plant.calls = calls
    plant.answers = answers
    plant()
    return plant


def run(monkeypatch, **args):
    return run_module(monkeypatch, gpu_preflight, args)


def rules(result):
    return [(finding["rule"], finding["severity"], finding["gpu"]) for finding in result["findings"]]


def test_a_healthy_node_passes_with_every_reading_of_every_gpu(monkeypatch, node):
    failed, result = run(monkeypatch)

    assert not failed
    assert result["passed"] is True and result["findings"] == [] and result["errors"] == []
    assert result["source"] == "nvidia-smi"
    assert [gpu["index"] for gpu in result["gpus"]] == list(range(8))
    gpu = result["gpus"][7]
    assert gpu["persistence_mode"] is True and gpu["remap_pending"] is False and gpu["remap_failed"] is False
    assert gpu["retired_pages_pending"] is None  # Blackwell remaps rows instead
    assert (gpu["pcie_width"], gpu["pcie_width_max"], gpu["pcie_gen_max"]) == (16, 16, 5)
    assert gpu["bus_id"] == "0000:88:00.0"
    assert result["node"]["cuda_driver_version"] == "13.0"
    assert len(result["node"]["p2p"]) == 56 and set(result["node"]["p2p"].values()) == {"OK"}
    assert result["nccl_settings"] == {}


@pytest.mark.parametrize("health, expected", [
    ({"3": {"remapped_rows.pending": "Yes"}}, [("row_remap_pending", "error", 3)]),
    ({"5": {"pcie.link.width.current": 4}}, [("pcie_width_below_max", "error", 5)]),
    ({"0": {"persistence_mode": "Disabled"}}, [("persistence_off", "warning", 0)]),
    ({"p2p": "NS"}, [("p2p_unsupported", "warning", None)]),
    ({"2": {"ecc.errors.uncorrected.volatile.total": 3, "clocks_event_reasons.active": "0x0000000000000040",
            "pcie.link.gen.current": 5}},
     [("ecc_volatile_uncorrected", "error", 2), ("throttle_hardware", "error", 2)]),
    # A busy GPU's link at gen 3 of 5 is not judged from the preflight's own reading (see pcie_gen_under_load).
    ({"1": {"power.limit": "450.00", "clocks_event_reasons.active": "0x0000000000000004",
            "pcie.link.gen.current": 3}},
     [("throttle_software", "warning", 1), ("power_limit_below_default", "warning", 1)]),
    ({"3": {"temperature.gpu": "[GPU requires reset]", "pstate": "[GPU requires reset]"}},
     [("gpu_fault", "error", 3)]),
    ({"2": {"ecc.mode.current": "Disabled"}}, [("ecc_disabled", "warning", 2)]),
])
def test_each_canned_fault_gets_its_rule_and_severity(monkeypatch, node, health, expected):
    node(health)

    failed, result = run(monkeypatch)

    assert not failed
    assert sorted(rules(result)) == sorted(expected)
    assert result["passed"] is (not any(severity == "error" for _rule, severity, _gpu in expected))
    assert len(result["errors"]) == sum(1 for _rule, severity, _gpu in expected if severity == "error")


def test_an_error_names_the_gpu_the_reading_and_the_fix(monkeypatch, node):
    node({"3": {"remapped_rows.pending": "Yes"}, "6": {"pcie.link.width.current": 4}})

    _failed, result = run(monkeypatch)

    assert result["passed"] is False
    assert result["errors"][0].startswith("GPU 3: remapped_rows.pending is Yes (")
    assert "Fix: reset the GPU (nvidia-smi -r -i 3, with nothing running on it)" in result["errors"][0]
    assert result["errors"][1].startswith("GPU 6: PCIe link x4 of x16 (")


def test_only_the_selected_gpus_are_judged(monkeypatch, node):
    node({"3": {"remapped_rows.pending": "Yes"}, "p2p": "NS"})

    _failed, result = run(monkeypatch, gpus=[0])

    assert result["passed"] is True and result["findings"] == []
    assert [gpu["index"] for gpu in result["gpus"]] == [0]


def test_p2p_unsupported_is_not_reported_where_nccl_already_skips_it(monkeypatch, node):
    node({"p2p": "CNS"})

    _failed, unset = run(monkeypatch, gpus=[0, 1, 2, 3])
    _failed, disabled = run(monkeypatch, gpus=[0, 1, 2, 3], environment={"NCCL_P2P_DISABLE": "1"})

    assert rules(unset) == [("p2p_unsupported", "warning", None)]
    assert "P2P CNS between GPUs 0-1, 0-2, 0-3, 1-2, 1-3, 2-3" in unset["warnings_found"][0]
    assert unset["nccl_settings"] == {"NCCL_P2P_DISABLE": "1"}
    assert disabled["findings"] == [] and disabled["nccl_settings"] == {"NCCL_P2P_DISABLE": "1"}


def test_an_operator_downgrades_an_error_by_its_name(monkeypatch, node):
    node({"3": {"remapped_rows.pending": "Yes"}})

    _failed, result = run(monkeypatch, downgrade=["row_remap_pending"])

    assert result["passed"] is True
    assert rules(result) == [("row_remap_pending", "warning", 3)]
    assert result["findings"][0]["downgraded"] is True


def test_a_mistyped_rule_is_refused_before_anything_is_read(monkeypatch, node):
    failed, result = run(monkeypatch, downgrade=["row_remap_pendng"])

    assert failed
    assert result["msg"].startswith("downgrade: row_remap_pendng is no preflight rule")
    assert node.calls == []


def test_a_gpu_the_node_lacks_is_refused(monkeypatch, node):
    node(count=4)

    failed, result = run(monkeypatch, gpus=[0, 1, 2, 3, 4, 5, 6, 7])

    assert failed and result["msg"] == "no GPU with index 4, 5, 6, 7; this node has 0, 1, 2, 3"


@pytest.mark.parametrize("torch_cuda, passed, noted", [("12.9", True, True), ("13.0", False, False),
                                                       ("12.4", True, False), (None, True, False)])
def test_the_drivers_cuda_against_the_venvs_torch(monkeypatch, node, tmp_path, torch_cuda, passed, noted):
    node(cuda_version="12.8")
    python = tmp_path / "python"
    # The venv's python, as far as the check asks it: which CUDA its torch was built for.
    python.write_text("#!/bin/sh\necho '%s'\n" % json.dumps(torch_cuda), encoding="utf-8")
    python.chmod(0o755)

    _failed, result = run(monkeypatch, torch_python=str(python))

    assert result["passed"] is passed
    assert result["node"]["torch_cuda"] == torch_cuda
    assert (rules(result) == [("cuda_driver_too_old", "error", None)]) is not passed
    assert any("has no CUDA build" in note for note in result["notes"]) is (torch_cuda is None)
    # A 12.9 build on a 12.8 driver runs by CUDA's minor version compatibility, with its caveat as a note.
    assert any("minor version compatibility" in note for note in result["notes"]) is noted


@pytest.mark.parametrize("line, version", [
    ("cuda: Optional[str] = '13.0'", "13.0"),
    ("cuda = '12.1'", "12.1"),
    ("cuda: Optional[str] = None", None),
])
def test_torchs_cuda_is_read_from_its_version_file_without_importing_it(monkeypatch, node, tmp_path, line, version):
    node(cuda_version="12.4")
    package = tmp_path / "venv" / "lib" / "python3.12" / "site-packages" / "torch"
    package.mkdir(parents=True)
    (package / "version.py").write_text("from typing import Optional\n__version__ = '2.9.0'\n%s\n" % line,
                                        encoding="utf-8")

    _failed, result = run(monkeypatch, torch_python=str(tmp_path / "venv" / "bin" / "python"))

    assert result["node"]["torch_cuda"] == version
    assert result["passed"] is (version != "13.0")
    assert not any(call[0].endswith("python") for call in node.calls)


def test_too_little_disk_for_the_compile_cache(monkeypatch, node, tmp_path):
    # The disk is read through statvfs, as df does; a fixed answer, since the machine's free space moves while
    # other tests and scenarios write (two real reads once differed by 0.1 GiB).
    measured = []

    def statvfs(path):
        measured.append(path)
        return os.statvfs_result((4096, 4096, 0, 0, 62 * (1 << 30) // 4096 + 100, 0, 0, 0, 0, 255))

    monkeypatch.setattr(_gpu_health.os, "statvfs", statvfs)
    _failed, small = run(monkeypatch, cache_dir=str(tmp_path / "not-yet" / "there"), min_free_gib=10 ** 9)
    _failed, enough = run(monkeypatch, cache_dir=str(tmp_path), min_free_gib=0.001)

    assert rules(small) == [("compile_cache_disk_low", "error", None)]
    # A cache directory that does not exist yet is measured where it will be made: its nearest existing parent.
    assert measured == [str(tmp_path), str(tmp_path)]
    assert small["node"]["free_gib"] == enough["node"]["free_gib"] == 62.0
    assert enough["passed"] is True


def test_the_generation_read_now_is_a_note_and_one_seen_under_load_is_judged(monkeypatch, node):
    _failed, idle = run(monkeypatch)
    _failed, loaded = run(monkeypatch, pcie_gen_under_load={"0": 5, "1": 3})

    # The mock's idle GPUs read gen 1 of 5.
    assert idle["findings"] == []
    assert any(note.startswith("the PCIe link generation read now was not judged") and "GPU 7 at gen 1 of 5" in note
               for note in idle["notes"])
    assert rules(loaded) == [("pcie_gen_below_max", "warning", 1)]
    assert loaded["findings"][0]["reading"] == "PCIe generation 3 of 5 under load"


def test_a_generation_read_under_load_is_judged_kept_and_judged_again_once_the_gpu_idles(monkeypatch, node, tmp_path):
    # Only GPU 7 is asserted on: the mock counts a vLLM unit that runs on this machine (a mock node's, while the
    # scenarios run beside the unit tests) as holding GPU 0, which then reads P1 too.
    record = tmp_path / "gpu-pcie-links.json"
    # GPU 7 serves (P1) with its link at gen 4 of 5; the others idle at P8, gen 1 of 5.
    node({"7": {"pstate": "P1", "pcie.link.gen.current": 4}})
    _failed, serving = run(monkeypatch, pcie_record=str(record), update_pcie_record=False)
    unkept = record.exists()
    _failed, serving = run(monkeypatch, pcie_record=str(record))
    kept = json.loads(record.read_text(encoding="utf-8"))["gpus"]
    node()
    _failed, idle = run(monkeypatch, pcie_record=str(record))

    assert not unkept
    assert ("pcie_gen_below_max", "warning", 7) in rules(serving)
    assert rules(serving) == rules(idle)
    assert serving["pcie_gen_under_load"][7] == {"generation": 4, "generation_max": 5, "read": "read now, at P1"}
    assert kept["GPU-test-0007"]["generation"] == 4 and kept["GPU-test-0007"]["pstate"] == "P1"
    assert idle["pcie_gen_under_load"][7]["read"] == "read at P1 on %s" % kept["GPU-test-0007"]["seen_at"]
    assert json.loads(record.read_text(encoding="utf-8"))["gpus"]["GPU-test-0007"] == kept["GPU-test-0007"]
    assert any("GPU 6 at gen 1 of 5 (P8)" in note and "GPU 7" not in note for note in idle["notes"])


def test_a_bad_pcie_gen_under_load_is_refused(monkeypatch, node):
    failed, result = run(monkeypatch, pcie_gen_under_load={"GPU0": 5})

    assert failed and result["msg"].startswith("pcie_gen_under_load: 'GPU0': 5 is no GPU index and PCIe generation")


def test_fewer_gpus_than_the_variants_world_size(monkeypatch, node):
    node(count=4)

    _failed, short = run(monkeypatch, world_size=8)
    _failed, enough = run(monkeypatch, world_size=4)

    assert short["passed"] is False and rules(short) == [("gpu_count_below_world_size", "error", None)]
    assert enough["passed"] is True


@pytest.mark.parametrize("name, fix", [
    ("NVIDIA RTX PRO 6000 Blackwell Server Edition",
     "reset the GPU with nothing running on it (nvidia-smi -r -i 5) or reboot the node"),
    ("NVIDIA RTX PRO 6000 Blackwell Workstation Edition",
     "reboot the node: nvidia-smi -r is not supported on NVIDIA RTX PRO 6000 Blackwell Workstation Edition"),
])
def test_a_faulted_gpu_is_an_error_whose_fix_holds_for_its_board(monkeypatch, node, name, fix):
    node({"5": {"temperature.gpu": "[GPU requires reset]", "pstate": "[GPU requires reset]",
                "clocks.sm": "[GPU requires reset]"}}, name=name)

    _failed, result = run(monkeypatch)

    assert result["passed"] is False
    assert result["errors"] == [
        "GPU 5: the GPU reads [GPU requires reset] (the GPU is faulted: NVML answers with an error instead of its "
        "readings, and CUDA will fail on it). Fix: %s." % fix]
    assert result["gpus"][5]["fault"] == "GPU requires reset" and result["gpus"][5]["persistence_mode"] is None


ESCAPED_P2P = (pathlib.Path(__file__).resolve().parents[2] / "fixtures" / "nvidia-smi"
               / "topo-p2p-r-8x-pcie-escapes.txt").read_text(encoding="utf-8")


def test_a_real_drivers_escaped_p2p_matrix_is_judged(monkeypatch, node):
    # The fixture is reconstructed from published outputs; tests/unit/plugins/module_utils/test__gpu_health.py says how.
    node.answers[("nvidia-smi", "topo")] = (0, ESCAPED_P2P, "")

    _failed, result = run(monkeypatch)
    _failed, shared = run(monkeypatch, environment={"NCCL_P2P_DISABLE": "1"})

    assert rules(result) == [("p2p_unsupported", "warning", None)]
    assert result["nccl_settings"] == {"NCCL_P2P_DISABLE": "1"}
    assert result["node"]["p2p"]["0-4"] == "CNS" and result["node"]["p2p"]["7-0"] == "NS"
    assert "vllm_environment" in result["warnings_found"][0]
    assert shared["findings"] == [] and shared["nccl_settings"] == {"NCCL_P2P_DISABLE": "1"}


def test_a_matrix_that_reads_as_nothing_is_a_warning_not_a_pass(monkeypatch, node):
    node.answers[("nvidia-smi", "topo")] = (0, "\n", "")

    _failed, result = run(monkeypatch, gpus=[0, 1])

    assert rules(result) == [("p2p_unreadable", "warning", None)]
    assert result["warnings_found"][0].startswith("node: no P2P status read between GPUs 0-1 (")


def test_xid_events_in_the_kernel_log(monkeypatch, node):
    # The Xid 79 line published in NVIDIA/open-gpu-kernel-modules issue 1151 (bus 0000:2b:00 there) and the Xid 63
    # line published in stas00/ml-engineering (compute/accelerator/nvidia/debug.md; bus 0000:10:1c there), each moved
    # to the bus of a mock GPU (GPU 1 at 0000:28:00, GPU 0 at 0000:18:00).
    node.answers[("journalctl",)] = (0, "NVRM: Xid (PCI:0000:28:00): 79, GPU has fallen off the bus.\n"
                                        "NVRM: Xid (PCI:0000:18:00): 63, pid=1896, Row Remapper: New row marked for "
                                        "remapping, reset gpu to activate.\n", "")

    _failed, result = run(monkeypatch)
    _failed, unread = run(monkeypatch, kernel_log=False)

    assert rules(result) == [("xid_fallen_off_bus", "error", 1)]
    assert "1 Xid 63 event(s) since boot on GPU 0: pid=1896, Row Remapper: New row marked for remapping, reset gpu " \
           "to activate." in result["notes"]
    assert [event["xid"] for event in result["node"]["xid_events"]] == [79, 63]
    assert ["journalctl", "--dmesg", "--boot", "--output=cat", "--no-pager", "--quiet"] in node.calls
    assert unread["passed"] is True and unread["node"]["xid_events"] == []


def test_a_kernel_log_that_cannot_be_read_is_a_note(monkeypatch, node):
    node.answers[("journalctl",)] = (1, "", "Failed to get boot ID")

    _failed, result = run(monkeypatch)

    assert result["passed"] is True
    assert any(note.startswith("the kernel log could not be read, so Xid events were not judged") for note in
               result["notes"])


def test_nvidia_uvm_is_judged_only_on_a_node_with_the_drivers_device_nodes(monkeypatch, node):
    _failed, mock_host = run(monkeypatch)
    (node.dev / "nvidiactl").touch()
    _failed, missing = run(monkeypatch)
    _failed, downgraded = run(monkeypatch, downgrade=["nvidia_uvm_missing"])
    node.nvidia_modprobe.parent.mkdir(parents=True)
    node.nvidia_modprobe.write_text("#!/bin/sh\n", encoding="utf-8")
    node.nvidia_modprobe.chmod(0o755)
    _failed, created_by_the_unit = run(monkeypatch)

    assert mock_host["passed"] is True and mock_host["node"]["nvidia_uvm"]["nvidia_devices"] is False
    assert missing["passed"] is False and rules(missing) == [("nvidia_uvm_missing", "error", None)]
    assert missing["errors"][0].startswith("node: /dev/nvidia-uvm does not exist and /usr/bin/nvidia-modprobe is not "
                                           "executable (")
    assert downgraded["passed"] is True and rules(downgraded) == [("nvidia_uvm_missing", "warning", None)]
    assert created_by_the_unit["passed"] is True and created_by_the_unit["findings"] == []
    assert "/dev/nvidia-uvm does not exist yet; the vllm_service unit creates it before the server starts " \
           "(ExecStartPre=+/usr/bin/nvidia-modprobe -u -c=0)" in created_by_the_unit["notes"]


LSPCI = pathlib.Path(__file__).resolve().parents[2] / "fixtures" / "lspci"


def plant_gpu(sysfs, root_port, bus_id):
    """A GPU right below a root port in a sysfs tree, with the /sys/bus/pci/devices link to it."""
    place = sysfs / "devices" / ("pci" + root_port[:7]) / root_port / bus_id
    place.mkdir(parents=True)
    link = sysfs / "bus" / "pci" / "devices" / bus_id
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(place)


def test_acs_redirection_above_gpus_reported_p2p_ok_is_a_warning(monkeypatch, node):
    # The mock's GPU 0 and 1 (0000:18:00.0, 0000:28:00.0), each below its own root port. The root ports answer with
    # published lspci -vvv blocks of real root ports (tests/unit/plugins/module_utils/test__gpu_health.py says where
    # from): GPU 0's with ReqRedir+ CmpltRedir+, GPU 1's with ACS off.
    plant_gpu(node.sysfs, "0000:17:00.0", "0000:18:00.0")
    plant_gpu(node.sysfs, "0000:27:00.0", "0000:28:00.0")
    node.answers[("lspci", "-vvv", "-s", "0000:17:00.0")] = (
        0, (LSPCI / "vvv-skylake-e-root-port-acs-redirect.txt").read_text(encoding="utf-8"), "")
    node.answers[("lspci", "-vvv", "-s", "0000:27:00.0")] = (
        0, (LSPCI / "vvv-sunrise-point-lp-root-port-acs-off.txt").read_text(encoding="utf-8"), "")

    _failed, result = run(monkeypatch, gpus=[0, 1])
    _failed, shared = run(monkeypatch, gpus=[0, 1], environment={"NCCL_P2P_DISABLE": "1"})
    read = len(node.calls)
    _failed, single = run(monkeypatch, gpus=[0])

    assert result["passed"] is True and rules(result) == [("pcie_acs_redirect", "warning", None)]
    assert result["warnings_found"][0].startswith(
        "node: ACSCtl ReqRedir+ CmpltRedir+ on bridge 0000:17:00.0 above GPU 0, on the path between GPUs 0-1, "
        "reported P2P OK (")
    assert [(bridge["bus_id"], bridge["gpus"], bridge["redirect"]) for bridge in result["node"]["pcie_acs"]] == [
        ("0000:17:00.0", [0], True), ("0000:27:00.0", [1], False)]
    assert result["nccl_settings"] == {}
    assert shared["findings"] == [] and shared["node"]["pcie_acs"] == result["node"]["pcie_acs"]
    # One GPU has no P2P path: nothing is read.
    assert single["node"]["pcie_acs"] == [] and not any(call[0] == "lspci" for call in node.calls[read:])


def test_acs_that_cannot_be_read_is_a_note(monkeypatch, node):
    _failed, mock_host = run(monkeypatch, gpus=[0, 1])
    plant_gpu(node.sysfs, "0000:17:00.0", "0000:18:00.0")
    plant_gpu(node.sysfs, "0000:27:00.0", "0000:28:00.0")
    node.answers[("lspci",)] = (1, "", "lspci: Cannot open /sys/bus/pci/devices")
    _failed, failing = run(monkeypatch, gpus=[0, 1])

    assert mock_host["passed"] is True and mock_host["findings"] == []
    assert any(note.startswith("the PCIe ACS of the bridges above GPU 0 (0000:18:00.0), GPU 1 (0000:28:00.0) was not "
                               "read: ") for note in mock_host["notes"])
    assert failing["passed"] is True and failing["findings"] == []
    assert any(note.startswith("lspci -vvv could not read the PCIe ACS of bridge(s) 0000:17:00.0 (rc 1: ")
               for note in failing["notes"])
