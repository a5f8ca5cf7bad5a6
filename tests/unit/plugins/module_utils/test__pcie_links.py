# Copyright (c) 2026, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

import json
import pathlib

import pytest

from ansible_collections.llmops.vllm.plugins.module_utils import _gpu_findings, _gpu_health, _pcie_links

# 2026-12-07T21:40:05Z
NOW = 1796679605.0
# An idle RTX PRO 6000 Blackwell board as nvidia-smi reads it (FACTS.md, "An idle Blackwell card trains its PCIe link
# down (gen 1 of 5 at P8)"): the HEALTH_FIELDS row the preflight asks for, the idle clock-event reason left clear.
IDLE_ROW = ("0, GPU-5c3e1f0a, NVIDIA RTX PRO 6000 Blackwell Server Edition, 00000000:18:00.0, 580.95.05, Enabled, 0, "
            "0, [N/A], 180, 3090, 0x0000000000000000, 600.00, 600.00, 1, 5, 16, 16, Enabled, 31, P8\n")


def idle_gpu():
    return _gpu_health.parse_health(IDLE_ROW)[0]


def loaded_gpu(generation=5, pstate="P1", bus_id="0000:18:00.0"):
    return dict(idle_gpu(), pcie_gen=generation, pstate=pstate, bus_id=bus_id, throttle_reasons=[])


def judged(gpu, record=None, given=None, now=NOW):
    return _pcie_links.generations_to_judge([gpu], record, given, now=now)


def test_the_published_idle_reading_is_not_judged_and_says_why():
    gpu = idle_gpu()
    generations, sources, record = judged(gpu)

    assert (gpu["pstate"], gpu["pcie_gen"], gpu["pcie_gen_max"], gpu["throttle_reasons"]) == ("P8", 1, 5, [])
    assert generations == {} and sources == {} and record == {"version": 1, "gpus": {}}
    assert _pcie_links.not_judged_note([gpu], generations).startswith(
        "the PCIe link generation read now was not judged, since a GPU trains its link down while idle "
        "(GPU 0 at gen 1 of 5 (P8))")
    assert _gpu_findings.assess([gpu], {}, pcie_gen_under_load=generations)[0] == []


def test_a_reading_in_a_working_state_is_judged_and_kept_by_gpu_and_slot():
    generations, sources, record = judged(loaded_gpu())

    assert generations == {0: 5} and sources == {0: "read now, at P1"}
    assert record["gpus"] == {"GPU-5c3e1f0a": {"generation": 5, "generation_max": 5, "bus_id": "0000:18:00.0",
                                               "pstate": "P1", "seen_at": "2026-12-07T21:40:05Z"}}
    assert _pcie_links.not_judged_note([loaded_gpu()], generations) is None


def test_a_gpu_found_idle_later_is_judged_by_the_latest_reading_kept():
    _generations, _sources, kept = judged(loaded_gpu(generation=4, pstate="P0"))

    generations, sources, record = judged(idle_gpu(), kept, now=NOW + 3600)
    findings, _settings = _gpu_findings.assess([idle_gpu()], {}, pcie_gen_under_load=generations)

    assert generations == {0: 4} and sources == {0: "read at P0 on 2026-12-07T21:40:05Z"}
    assert record == kept
    assert [(finding["rule"], finding["severity"], finding["reading"]) for finding in findings] == [
        ("pcie_gen_below_max", "warning", "PCIe generation 4 of 5 under load")]


def test_the_latest_reading_under_load_counts_not_the_highest():
    # A riser that works loose after a reading at gen 5: the next reading under load, at gen 4, is what is judged.
    _generations, _sources, kept = judged(loaded_gpu(generation=5))
    generations, _sources, record = judged(loaded_gpu(generation=4, pstate="P2"), kept, now=NOW + 60)
    then_idle, _sources, _record = judged(idle_gpu(), record, now=NOW + 120)

    assert generations == then_idle == {0: 4}
    assert record["gpus"]["GPU-5c3e1f0a"]["generation"] == 4


def test_a_reading_kept_for_another_slot_or_of_another_release_is_not_judged(tmp_path):
    _generations, _sources, kept = judged(loaded_gpu(bus_id="0000:2b:00.0"))
    moved, _sources, _record = judged(idle_gpu(), kept)
    path = tmp_path / "gpu-pcie-links.json"
    path.write_text(json.dumps({"version": 0, "gpus": {}}), encoding="utf-8")
    old, old_note = _pcie_links.load_record(str(path))
    path.write_text("{not json", encoding="utf-8")
    torn, torn_note = _pcie_links.load_record(str(path))

    assert moved == {}
    assert old is None
    assert old_note == "%s holds no PCIe links read under load that this release reads; read anew" % path
    assert torn is None
    assert torn_note.startswith("the PCIe links read under load earlier could not be read from %s" % path)
    assert _pcie_links.load_record(str(tmp_path / "absent.json")) == (None, None)


def test_a_generation_the_operator_gives_is_judged_in_place_of_the_readings():
    _generations, _sources, kept = judged(loaded_gpu(generation=5))

    generations, sources, record = judged(loaded_gpu(generation=5), kept, given={"0": 3})

    assert generations == {0: 3} and sources == {0: "given in pcie_gen_under_load"}
    assert record == kept


def test_a_faulted_gpu_is_neither_judged_nor_kept():
    faulted = _gpu_health.empty_row(0, "GPU requires reset", uuid="GPU-5c3e1f0a", bus_id="0000:18:00.0")

    generations, _sources, record = judged(faulted)

    assert generations == {} and record["gpus"] == {}


def test_a_record_is_written_whole_and_read_back(tmp_path):
    path = str(tmp_path / "gpu-pcie-links.json")
    _generations, _sources, record = judged(loaded_gpu())

    _pcie_links.save_record(path, record)

    assert _pcie_links.load_record(path) == (record, None)
    assert oct((tmp_path / "gpu-pcie-links.json").stat().st_mode & 0o777) == "0o644"
    assert [entry.name for entry in tmp_path.iterdir()] == ["gpu-pcie-links.json"]


# Published captures of real cards, byte for byte (tests/unit/fixtures/nvidia-smi):
# - query-gpu-all-fields-*-{idle,load}.csv: `nvidia-smi --query-gpu=<every field> --format=csv` at idle and under a
#   synthetic load, from utkuozdemir/nvidia_gpu_exporter (MIT), internal/captures/
#   linux-x86_64__nvidia-h100-80gb-hbm3__590.48.01.txt (commit f6977bb7) and
#   linux-x86_64__nvidia-geforce-rtx-4080-super__595.71.05.txt (commit 0eee0d31); UUIDs masked there.
# - query-gpu-links-8x-quadro-rtx6000-idle.csv: `nvidia-smi --query-gpu=index,name,pci.bus_id,pcie.link.gen.current,
#   pcie.link.gen.max,pcie.link.width.current,pcie.link.width.max --format=csv` on eight idle Quadro RTX 6000, from
#   AndyUB/au25-cse599o-hw2 (MIT), bench/allreduce/tempura/links.csv (commit a6fe9eb1).
FIXTURES = pathlib.Path(__file__).resolve().parents[2] / "fixtures" / "nvidia-smi"
# The preflight asks for clocks.sm, which every-field queries name clocks.current.sm.
ALIASES = {"clocks.sm": "clocks.current.sm"}


def published_row(name):
    """The preflight's HEALTH_FIELDS row taken, column by column, from a published every-field capture."""
    header, values = (FIXTURES / name).read_text(encoding="utf-8").splitlines()
    fields = [field.split(" [")[0] for field in header.split(", ")]
    reading = dict(zip(fields, values.split(", ")))
    row = ", ".join(reading[ALIASES.get(field, field)] for field in _gpu_health.HEALTH_FIELDS)
    return _gpu_health.parse_health(row + "\n")[0]


@pytest.mark.parametrize("capture, reading, judged", [
    # A GeForce card idles at P8 with its link at gen 1 of 4, and runs a compute load at P2, at gen 4 of 4.
    ("rtx-4080-super-595.71.05-idle", ("P8", 1, 4), {}),
    ("rtx-4080-super-595.71.05-load", ("P2", 4, 4), {0: 4}),
    # An H100 stays in P0 with its link at gen 5 of 5, idle or not.
    ("h100-80gb-hbm3-590.48.01-idle", ("P0", 5, 5), {0: 5}),
    ("h100-80gb-hbm3-590.48.01-load", ("P0", 5, 5), {0: 5}),
])
def test_published_captures_are_judged_only_as_read_under_load(capture, reading, judged):
    gpu = published_row("query-gpu-all-fields-%s.csv" % capture)

    generations, _sources, _record = _pcie_links.generations_to_judge([gpu], None, now=NOW)
    findings, _settings = _gpu_findings.assess([gpu], {}, pcie_gen_under_load=generations)

    assert (gpu["pstate"], gpu["pcie_gen"], gpu["pcie_gen_max"]) == reading
    assert generations == judged
    assert [finding["rule"] for finding in findings if finding["rule"].startswith("pcie")] == []


def test_eight_published_idle_links_without_a_performance_state_are_only_noted():
    lines = (FIXTURES / "query-gpu-links-8x-quadro-rtx6000-idle.csv").read_text(encoding="utf-8").splitlines()
    fields = lines[0].split(", ")
    gpus = []
    for line in lines[1:]:
        reading = dict(zip(fields, line.split(", ")))
        gpus.append(dict(_gpu_health.empty_row(int(reading["index"]), uuid="GPU-%s" % reading["index"]),
                         pcie_gen=int(reading["pcie.link.gen.current"]), pcie_gen_max=int(reading["pcie.link.gen.max"]),
                         bus_id=reading["pci.bus_id"]))

    generations, _sources, record = _pcie_links.generations_to_judge(gpus, None, now=NOW)

    assert [(gpu["pcie_gen"], gpu["pcie_gen_max"]) for gpu in gpus] == [(1, 3)] * 8
    assert generations == {} and record["gpus"] == {}
    assert "GPU 7 at gen 1 of 3 (performance state unknown)" in _pcie_links.not_judged_note(gpus, generations)
