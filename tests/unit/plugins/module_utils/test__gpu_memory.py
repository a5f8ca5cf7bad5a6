# Copyright (c) 2026, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

import pathlib

import pytest

from ansible_collections.llmops.vllm.plugins.module_utils._gpu_memory import (
    GpuQueryError,
    describe_holders,
    parse_gpus,
    parse_mib,
    parse_processes,
)

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
                       "memory_used_mib": 91254, "memory_total_mib": 97887}


def test_parse_gpus_tolerates_padding_units_and_placeholders():
    assert parse_gpus(recorded("query-gpu-padded.csv"))[0]["memory_used_mib"] == 3
    assert [gpu["memory_used_mib"] for gpu in parse_gpus(recorded("query-gpu-mib-units.csv"))] == [1021, 0]
    assert parse_gpus(recorded("query-gpu-not-supported.csv")) == [
        {"index": 0, "uuid": "GPU-a4c7e2b9-5d1f-4e83-8b6a-3c9f0d2e7a21", "name": "NVIDIA GB10",
         "memory_used_mib": None, "memory_total_mib": None}]


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
