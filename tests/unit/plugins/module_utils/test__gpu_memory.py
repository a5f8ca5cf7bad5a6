# Copyright (c) 2026, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

import pathlib

import pytest

from ansible_collections.llmops.vllm.plugins.module_utils._gpu_memory import (
    GpuQueryError,
    describe_holders,
    fault_fix,
    fault_of,
    handle_failure,
    lost_gpu_lines,
    parse_gpus,
    parse_mib,
    parse_processes,
)

# The query-gpu-8x-*, query-gpu-stray/padded/mib-units/not-supported and query-apps-* fixtures are node states
# (idle, a TP-8 load, a stray holder) written here in nvidia-smi's CSV format, not captures; reset-required and
# lost-handle are reconstructed from published answers (see their tests). Published captures of real cards are
# used in test__gpu_health.py and test__pcie_links.py.
FIXTURES = pathlib.Path(__file__).resolve().parents[2] / "fixtures" / "nvidia-smi"


def recorded(name):
    return (FIXTURES / name).read_text(encoding="utf-8")


@pytest.mark.parametrize("text, mib", [
    ("91254", 91254),
    (" 91254 ", 91254),
    ("1021 MiB", 1021),
    ("0", 0),
    ("[N/A]", None),
    ("[Not Supported]", None),
    ("[Insufficient Permissions]", None),
    ("", None),
    ("N/A", None),
])
def test_parse_mib(text, mib):
    assert parse_mib(text) == mib


def test_parse_gpus_of_a_loaded_eight_gpu_node():
    gpus = parse_gpus(recorded("query-gpu-8x-loaded.csv"))

    assert [gpu["index"] for gpu in gpus] == list(range(8))
    assert gpus[0] == {"index": 0, "uuid": "GPU-3f1c6a52-9d0e-4b7a-8c21-5e4f0a9b1c01",
                       "name": "NVIDIA RTX PRO 6000 Blackwell Server Edition",
                       "memory_used_mib": 91254, "memory_total_mib": 97887, "fault": None}


def test_parse_gpus_tolerates_padding_units_and_placeholders():
    assert parse_gpus(recorded("query-gpu-padded.csv"))[0]["memory_used_mib"] == 3
    assert [gpu["memory_used_mib"] for gpu in parse_gpus(recorded("query-gpu-mib-units.csv"))] == [1021, 0]
    assert parse_gpus(recorded("query-gpu-not-supported.csv")) == [
        {"index": 0, "uuid": "GPU-a4c7e2b9-5d1f-4e83-8b6a-3c9f0d2e7a21", "name": "NVIDIA GB10",
         "memory_used_mib": None, "memory_total_mib": None, "fault": None}]


@pytest.mark.parametrize("fixture", ["query-apps-empty.csv", "query-apps-no-processes.txt"])
def test_no_processes_in_either_spelling(fixture):
    assert parse_processes(recorded(fixture), []) == []


def test_processes_map_to_gpu_indices_by_uuid():
    gpus = parse_gpus(recorded("query-gpu-8x-loaded.csv"))
    processes = parse_processes(recorded("query-apps-vllm-tp8.csv"), gpus)

    assert [process["gpu_index"] for process in processes] == list(range(8))
    assert processes[7] == {"pid": 48218, "name": "VLLM::Worker_TP7", "gpu_index": 7, "used_memory_mib": 91236}


def test_a_process_name_with_commas_stays_whole():
    gpus = parse_gpus(recorded("query-gpu-padded.csv"))

    assert parse_processes(recorded("query-apps-comma-name.csv"), gpus) == [
        {"pid": 60001, "name": "/srv/models, v2/venv/bin/python", "gpu_index": 0, "used_memory_mib": 2048}]


def test_unknown_gpu_uuid_has_no_index():
    processes = parse_processes(recorded("query-apps-stray-na.csv"), [])

    assert processes == [{"pid": 50102, "name": "VLLM::Worker_TP3", "gpu_index": None, "used_memory_mib": None}]


@pytest.mark.parametrize("text, message", [
    ("0, GPU-x, 3\n", "unexpected nvidia-smi output line: '0, GPU-x, 3'"),
    ("zero, GPU-x, name, 3, 4\n", "unexpected GPU index 'zero'"),
])
def test_malformed_gpu_output_is_an_error(text, message):
    with pytest.raises(GpuQueryError, match=message):
        parse_gpus(text)


def test_malformed_process_output_is_an_error():
    with pytest.raises(GpuQueryError, match="unexpected PID 'pid'"):
        parse_processes("pid, name, GPU-x, 3\n", [])


def test_describe_holders_groups_gpus_per_pid():
    processes = [
        {"pid": 7, "name": "python", "gpu_index": 1, "used_memory_mib": 100, "unit": None},
        {"pid": 7, "name": "python", "gpu_index": 0, "used_memory_mib": 50, "unit": None},
        {"pid": 3, "name": None, "gpu_index": 2, "used_memory_mib": None, "unit": "vllm-a.service"},
    ]

    assert describe_holders(processes) == [
        "PID 3 (unknown process, vllm-a.service) holds GPU 2",
        "PID 7 (python, no systemd unit) holds GPU 0,1 (150 MiB)",
    ]


@pytest.mark.parametrize("text, fault", [
    ("[GPU requires reset]", "GPU requires reset"),
    ("[GPU is lost]", "GPU is lost"),
    ("[Unknown Error]", "Unknown Error"),
    ("[N/A]", None),
    ("[Not Supported]", None),
    ("[Insufficient Permissions]", None),
    ("0", None),
    ("P8", None),
])
def test_brackets_that_mean_a_fault_and_brackets_that_mean_not_reported(text, fault):
    assert fault_of(text) == fault
    # Either way no number is read from it.
    assert parse_mib(text) == (0 if text == "0" else None)


def test_a_gpu_that_needs_a_reset_is_faulted_though_it_reads_0_mib():
    # Reconstructed for this query's columns from a published nvidia-smi answer of an H100 that needed a reset:
    # "0, [GPU requires reset], [GPU requires reset], 0 MiB" (index, temperature.gpu, utilization.gpu,
    # memory.used), quoted in a public repository's incident note (found with find_string "[GPU requires reset]").
    gpus = parse_gpus(recorded("query-gpu-h100-reset-required.csv"), probe=True)

    assert [(gpu["index"], gpu["fault"]) for gpu in gpus] == [(0, None), (1, "GPU requires reset")]
    assert gpus[0]["memory_used_mib"] == 1
    # The 0 MiB it reads is not taken as a reading.
    assert gpus[1] == {"index": 1, "uuid": "GPU-6b2d9f14-8c3e-4a75-9d1f-0e7c5a3b2d12", "name": "NVIDIA H100 80GB HBM3",
                       "memory_used_mib": None, "memory_total_mib": None, "fault": "GPU requires reset"}


LOST_STDERR = "Unable to determine the device handle for GPU0000:02:00.0: Unknown Error\n"


def test_a_gpu_nvidia_smi_cannot_open_is_faulted_at_its_position():
    # Reconstructed: the layout (the failure line, then a row of [Unknown Error] in place of the GPU's row) is as a
    # public Go parser test of the Chriszly/usage-control repository quotes nvidia-smi for a failing RTX 3090
    # ("What nvidia-smi prints, while exiting with an error, when one of its GPUs fails"), with this query's columns.
    gpus = parse_gpus(recorded("query-gpu-lost-handle.csv"), LOST_STDERR, probe=True)

    assert [(gpu["index"], gpu["fault"], gpu["name"]) for gpu in gpus] == [
        (0, None, "NVIDIA GeForce RTX 4090"), (1, "Unknown Error", None), (2, None, "NVIDIA GeForce RTX 4090")]


@pytest.mark.parametrize("capture, fault", [
    # `nvidia-smi` on a node whose only GPU fell off the bus, published in marian-nmt/marian issue 251 (2019-02-27),
    # the two spaces after "lost." as printed.
    ("handle-failure-gpu-lost-marian-nmt-251.txt", "GPU is lost"),
    # `nvidia-smi -a -i 0` on a failed GPU, published in NVIDIA/nvidia-docker issue 1553.
    ("handle-failure-unknown-error-nvidia-docker-1553.txt", "Unknown Error"),
    # `nvidia-smi` on a Tesla P4 that overheated, published in pdbear/syno_nvidia_gpu_driver issue 22 (2024-06-13):
    # no space between "GPU" and the bus id, as that driver prints it.
    ("handle-failure-unknown-error-tesla-p4-syno-22.txt", "Unknown Error"),
])
def test_published_output_of_a_node_whose_only_gpu_cannot_be_opened_is_that_gpu_faulted(capture, fault):
    # All that nvidia-smi printed is its failure line, so the GPU it names is the first and only one.
    gpus = parse_gpus(recorded(capture), probe=True)

    assert gpus == [{"index": 0, "uuid": None, "name": None, "memory_used_mib": None, "memory_total_mib": None,
                     "fault": fault}]
    assert lost_gpu_lines(recorded(capture))


def test_a_failure_line_on_stdout_numbers_the_gpu_itself():
    output = ("0, GPU-a, NVIDIA GeForce RTX 4090, 2, 24564\n"
              "Unable to determine the device handle for GPU1: 0000:34:00.0: GPU is lost.  Reboot the system to "
              "recover this GPU\n")

    gpus = parse_gpus(output)

    assert [(gpu["index"], gpu["fault"]) for gpu in gpus] == [(0, None), (1, "GPU is lost")]


def test_a_failure_line_that_names_no_gpu_nvidia_smi_printed_is_an_error():
    with pytest.raises(GpuQueryError, match="could not open a GPU it does not number: Unable to determine"):
        parse_gpus("0, GPU-a, NVIDIA H100 80GB HBM3, 2, 81559\n", LOST_STDERR)


@pytest.mark.parametrize("line, failure", [
    # Published forms: a Go parser test (as above), an agent transcript on driver 610.57.04 ("GPU1: 0000:34:00.0"),
    # and a Fedora setup guide ("GPU0: 0000:01:00.0").
    ("Unable to determine the device handle for GPU0000:02:00.0: Unknown Error",
     {"index": None, "bus_id": "0000:02:00.0", "fault": "Unknown Error"}),
    ("Unable to determine the device handle for GPU1: 0000:34:00.0: Unknown Error",
     {"index": 1, "bus_id": "0000:34:00.0", "fault": "Unknown Error"}),
    ("Unable to determine the device handle for GPU0: 0000:01:00.0: Unknown Error",
     {"index": 0, "bus_id": "0000:01:00.0", "fault": "Unknown Error"}),
    ("Unable to determine the device handle for GPU 0: GPU is lost",
     {"index": 0, "bus_id": None, "fault": "GPU is lost"}),
    ("0, GPU-a, NVIDIA H100, 2, 81559, 34, P0", None),
])
def test_handle_failure_lines(line, failure):
    assert handle_failure(line) == failure


@pytest.mark.parametrize("fault, name, fix", [
    ("GPU requires reset", "NVIDIA H100 80GB HBM3",
     "reset the GPU with nothing running on it (nvidia-smi -r -i 1) or reboot the node"),
    ("GPU requires reset", "NVIDIA RTX PRO 6000 Blackwell Workstation Edition",
     "reboot the node: nvidia-smi -r is not supported on NVIDIA RTX PRO 6000 Blackwell Workstation Edition"),
    ("Unknown Error", "NVIDIA GeForce RTX 4090",
     "reboot the node: nvidia-smi -r is not supported on NVIDIA GeForce RTX 4090"),
    ("Unknown Error", "NVIDIA A100-SXM4-80GB",
     "reset the GPU with nothing running on it (nvidia-smi -r -i 1) or reboot the node"),
    # A board not known either way, or not named.
    ("Unknown Error", "NVIDIA RTX A2000 12GB",
     "reset the GPU with nothing running on it (nvidia-smi -r -i 1) where the board supports a reset, else reboot "
     "the node"),
    ("Unknown Error", None,
     "reset the GPU with nothing running on it (nvidia-smi -r -i 1) where the board supports a reset, else reboot "
     "the node"),
])
def test_the_fix_of_a_fault_holds_for_the_board(fault, name, fix):
    assert fault_fix(fault, name, 1) == fix


def test_a_lost_gpu_needs_a_reboot_on_any_board():
    fix = fault_fix("GPU is lost", "NVIDIA H100 80GB HBM3", 1)

    assert fix.startswith("reboot the node: a GPU that fell off the bus")
