# Copyright (c) 2026, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

import pathlib
import re

import pytest

from ansible.module_utils import basic
from ansible_collections.llmops.vllm.plugins.module_utils import _deadline, _endpoint_probe, _start_phases, _systemd_unit
from ansible_collections.llmops.vllm.plugins.modules import wait_for_openai_endpoint

from wait_fakes import FakeClock, FakeSystemd, FakeVllmServer, run_module

UNIT = "vllm-tiny-ngram.service"

# What vLLM 0.32 writes to the journal when the KV cache does not fit (abridged, real wording).
CUDA_OOM_JOURNAL = [
    "INFO 11-29 14:02:11 [api_server.py:1885] vLLM API server version 0.32.0",
    "(EngineCore_DP0 pid=48201) INFO 11-29 14:02:31 [gpu_model_runner.py:2653] Model loading took 74.31 GiB and 212.33 seconds",
    "(EngineCore_DP0 pid=48201) ERROR 11-29 14:03:02 [core.py:708] EngineCore failed to start.",
    "(EngineCore_DP0 pid=48201) ERROR 11-29 14:03:02 [core.py:708] Traceback (most recent call last):",
    '(EngineCore_DP0 pid=48201) ERROR 11-29 14:03:02 [core.py:708]   '
    'File "/opt/vllm/lib/python3.12/site-packages/vllm/v1/engine/core.py", line 699, in run_engine_core',
    "(EngineCore_DP0 pid=48201) ERROR 11-29 14:03:02 [core.py:708] torch.OutOfMemoryError: CUDA out of memory. "
    "Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 95.59 GiB of which 1.12 GiB is free.",
    "RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}",
    "vllm-tiny-ngram.service: Main process exited, code=exited, status=1/FAILURE",
    "vllm-tiny-ngram.service: Failed with result 'exit-code'.",
]
OOM_LINE = CUDA_OOM_JOURNAL[5]
# Recorded on the mock host: a CPU worker killed by SIGILL on the first forward pass, then 1,500 lines
# of Triton's leak report (see test__systemd_unit.py).
SIGILL_JOURNAL = (pathlib.Path(__file__).resolve().parents[2] / "fixtures" / "journals"
                  / "worker_sigill_on_first_request.log").read_text(encoding="utf-8").splitlines()
SIGILL_SENTENCE = (
    "engine worker killed by SIGILL (illegal instruction) on its first request; this CPU lacks an instruction that "
    "the engine's kernels use for the model's dtype: set dtype: float32 in vllm_serve_args. Journal: ERROR 11-30 "
    "22:54:59 [multiproc_executor.py:315] Worker proc VllmWorker-0 died unexpectedly (exit code: -4), shutting down "
    "executor.")


@pytest.fixture
def clock(monkeypatch):
    fake = FakeClock()
    for module in (_deadline, _endpoint_probe, _systemd_unit):
        monkeypatch.setattr(module, "time", fake)
    return fake


@pytest.fixture
def server(monkeypatch):
    # The fake answers from a thread of this process. On a loaded two-core CI machine that thread can
    # miss the production 0.5-s probe timeout, which turns a one-attempt test into two; the timeout's
    # own test sets it back to a short value.
    monkeypatch.setattr(_endpoint_probe, "PROBE_TIMEOUT", 30.0)
    fake = FakeVllmServer(model="tiny")
    yield fake
    fake.close()


@pytest.fixture
def systemd(monkeypatch):
    fake = FakeSystemd(UNIT)
    monkeypatch.setattr(basic.AnsibleModule, "run_command", lambda self, argv, **kwargs: fake.run_command(argv))
    monkeypatch.setattr(basic.AnsibleModule, "get_bin_path",
                        lambda self, name, required=False, opt_dirs=None: "/usr/bin/" + name)
    return fake


def run(monkeypatch, check_mode=False, **args):
    return run_module(monkeypatch, wait_for_openai_endpoint, args, check_mode=check_mode)


def test_waits_through_refused_connections_until_the_model_is_listed(monkeypatch, clock, server):
    clock.at(3.0, server.start)

    failed, result = run(monkeypatch, base_url=server.url, model="tiny", timeout=60)

    assert not failed
    assert result["ready"] is True
    assert result["models"] == ["tiny"]
    assert result["version"] == "0.32.0"
    assert result["last_seen"] == "ready"
    assert 3.0 <= result["stages"]["health"] == result["stages"]["models"] <= 3.25
    assert set(result["stages"]) == {"health", "models"}
    assert result["elapsed"] == result["stages"]["models"]
    assert result["attempts"] == len(clock.sleeps) + 1
    # Capped backoff: starts short, never pauses longer than `sleep`.
    assert clock.sleeps[0] == pytest.approx(0.05)
    assert max(clock.sleeps) == pytest.approx(0.25)
    assert server.paths() == ["/health", "/v1/models", "/version"]
    assert "serves tiny (vLLM 0.32.0)" in result["msg"]


def test_accepts_an_openai_base_url_and_sends_the_api_key(monkeypatch, clock, server):
    server.start()

    failed, result = run(monkeypatch, base_url=server.url + "/v1/", model="tiny", api_key="sk-test")

    assert not failed and result["ready"]
    assert result["attempts"] == 1 and clock.sleeps == []
    assert {request["authorization"] for request in server.requests} == {"Bearer sk-test"}


def test_any_listed_model_will_do_without_model(monkeypatch, clock, server):
    server.start()

    failed, result = run(monkeypatch, base_url=server.url)

    assert not failed and result["ready"] and result["models"] == ["tiny"]


def test_smoke_test_asks_for_one_token_of_the_expected_model(monkeypatch, clock, server):
    server.start()

    failed, result = run(monkeypatch, base_url=server.url, model="tiny", smoke_test=True)

    assert not failed and result["ready"]
    assert set(result["stages"]) == {"health", "models", "smoke"}
    completion = [request for request in server.requests if request["path"] == "/v1/completions"]
    assert len(completion) == 1
    assert completion[0]["method"] == "POST"
    assert completion[0]["json"]["max_tokens"] == 1
    assert completion[0]["json"]["model"] == "tiny"


def test_other_model_listed_fails_at_once_with_its_own_message(monkeypatch, clock, server):
    server.routes["/v1/models"] = (200, {"object": "list", "data": [{"id": "qwen3-8b"}]})
    server.start()

    failed, result = run(monkeypatch, base_url=server.url, model="tiny", timeout=600)

    assert failed
    assert result["msg"] == "%s is healthy but serves 'qwen3-8b', not 'tiny' (after 0.0 s)" % server.url
    assert result["attempts"] == 1 and result["ready"] is False
    assert result["stages"] == {"health": 0.0}
    assert "elapsed" in result


@pytest.mark.parametrize("api_key, expected", [
    ("sk-wrong", "rejected the API key (HTTP 401 on /v1/models)"),
    (None, "requires an API key (HTTP 401 on /v1/models); set api_key"),
])
def test_unauthorized_is_reported_as_such(monkeypatch, clock, server, api_key, expected):
    server.routes["/v1/models"] = (401, {"error": "Unauthorized"})
    server.start()

    args = dict(base_url=server.url, model="tiny")
    if api_key:
        args["api_key"] = api_key
    failed, result = run(monkeypatch, **args)

    assert failed
    assert result["msg"].startswith("%s %s" % (server.url, expected))
    assert result["attempts"] == 1


def test_health_503_means_the_engine_died(monkeypatch, clock, server):
    server.routes["/health"] = (503, b"")
    server.start()

    failed, result = run(monkeypatch, base_url=server.url, model="tiny")

    assert failed
    assert result["msg"].startswith("%s/health answered 503: the engine is dead" % server.url)


def test_a_500_for_the_first_request_from_a_dead_engine_fails_naming_the_signal(monkeypatch, clock, server, systemd):
    # The API process outlives its engine: it answers 500, and the journal says what killed the worker.
    server.routes["/v1/completions"] = (500, {"error": {"message": "EngineCore encountered an issue."}})
    systemd.journal = list(SIGILL_JOURNAL)
    server.start()

    failed, result = run(monkeypatch, base_url=server.url, model="tiny", unit=UNIT, smoke_test=True, timeout=600)

    assert failed
    assert result["attempts"] == 1
    assert result["fatal_cause"]["name"] == "worker_signal"
    assert result["fatal_line"] == SIGILL_SENTENCE
    assert result["msg"] == "%s answers but its engine died after 0.0 s: %s" % (UNIT, SIGILL_SENTENCE)
    # The tail shown to a person is the shutdown, not the leak report.
    assert result["journal"][-1] == "(1502 lines of binding-leak noise such as 'nanobind: leaked ...' left out)"
    assert not any("leaked" in line for line in result["journal"][:-1])


def test_a_500_without_a_dead_engine_in_the_journal_is_waited_out(monkeypatch, clock, server, systemd):
    server.routes["/v1/completions"] = (500, {"error": {"message": "internal error"}})
    # An exception that the server survived is no reason to give up on it.
    systemd.journal = ["(APIServer pid=9) ERROR 11-30 22:54:59 [serving.py:1] ValueError: bad request in a plugin"]
    server.start()

    failed, result = run(monkeypatch, base_url=server.url, model="tiny", unit=UNIT, smoke_test=True, timeout=1)

    assert failed
    assert result["attempts"] > 1
    assert result["msg"].startswith("%s not ready after 1.0 s" % server.url)


def test_a_unit_that_ended_after_its_engine_died_names_the_signal(monkeypatch, clock, server, systemd):
    # Seen by the first poll only after the API process had shut down: the journal still names the cause.
    systemd.set(ActiveState="inactive", SubState="dead", Result="success", MainPID=0, ExecMainCode=1, ExecMainStatus=0)
    systemd.journal = list(SIGILL_JOURNAL)

    failed, result = run(monkeypatch, base_url=server.url, model="tiny", unit=UNIT, smoke_test=True)

    assert failed
    assert result["fatal_line"] == SIGILL_SENTENCE.replace(" on its first request", "")
    assert result["msg"].startswith("%s is inactive (dead) after 0.0 s: engine worker killed by SIGILL" % UNIT)


def test_health_503_with_a_unit_names_the_cause_from_its_journal(monkeypatch, clock, server, systemd):
    server.routes["/health"] = (503, b"")
    systemd.journal = list(SIGILL_JOURNAL)
    server.start()

    failed, result = run(monkeypatch, base_url=server.url, model="tiny", unit=UNIT)

    assert failed
    assert result["msg"].startswith("%s answers but its engine died after 0.0 s: engine worker killed by SIGILL" % UNIT)


def test_refused_until_the_deadline_times_out_saying_what_was_seen(monkeypatch, clock, server):
    failed, result = run(monkeypatch, base_url=server.url, model="tiny", timeout=10, sleep=1)

    assert failed
    assert result["elapsed"] == 10.0
    assert clock.elapsed() == 10.0
    assert result["attempts"] == len(clock.sleeps) + 1
    assert result["last_seen"] == "connection refused on /health"
    assert result["msg"] == ("%s not ready after 10.0 s (%d attempts); last seen: connection refused on /health"
                             % (server.url, result["attempts"]))


def test_a_model_list_that_stays_empty_times_out_naming_it(monkeypatch, clock, server):
    server.routes["/v1/models"] = (200, {"object": "list", "data": []})
    server.start()

    failed, result = run(monkeypatch, base_url=server.url, model="tiny", timeout=2)

    assert failed
    assert result["last_seen"] == "/v1/models lists no model yet"
    assert result["stages"] == {"health": 0.0}


def test_a_rejected_smoke_completion_fails_with_the_servers_reason(monkeypatch, clock, server):
    server.routes["/v1/completions"] = (400, {"error": {"message": "min_p is not supported with speculative decoding"}})
    server.start()

    failed, result = run(monkeypatch, base_url=server.url, model="tiny", smoke_test=True)

    assert failed
    assert "refused a 1-token completion (HTTP 400): min_p is not supported" in result["msg"]


def test_a_failing_smoke_completion_is_retried_until_the_deadline(monkeypatch, clock, server):
    server.routes["/v1/completions"] = (500, {"error": {"message": "internal error"}})
    server.start()

    failed, result = run(monkeypatch, base_url=server.url, model="tiny", smoke_test=True, timeout=1)

    assert failed
    assert result["last_seen"] == "/v1/completions answered HTTP 500: internal error"
    assert result["attempts"] > 1


def test_a_server_that_accepts_but_never_answers_is_not_ready(monkeypatch, clock, server):
    # Real time: the probe's socket timeout is what is under test.
    monkeypatch.setattr(_endpoint_probe, "PROBE_TIMEOUT", 0.05)
    server._server.server_activate()  # listening, but nobody accepts or answers

    failed, result = run(monkeypatch, base_url=server.url, model="tiny", timeout=0)

    assert failed
    assert result["last_seen"] == "no answer within the probe timeout on /health"


def test_unit_failure_is_reported_within_a_poll_with_the_fatal_line(monkeypatch, clock, server, systemd):
    systemd.journal = CUDA_OOM_JOURNAL[:2]

    def crash():
        # The main process ended 0.3 s before systemctl is next asked (monotonic microseconds).
        systemd.set(ActiveState="failed", SubState="failed", Result="exit-code", MainPID=0,
                    ExecMainCode=1, ExecMainStatus=1, ExecMainExitTimestampMonotonic=int((clock.now - 0.3) * 1e6))
        systemd.journal = list(CUDA_OOM_JOURNAL)

    clock.at(42.0, crash)

    failed, result = run(monkeypatch, base_url=server.url, model="tiny", unit=UNIT, timeout=2400)

    assert failed
    assert 42.0 <= result["elapsed"] <= 42.25
    assert result["fatal_line"] == OOM_LINE
    assert result["journal"] == CUDA_OOM_JOURNAL
    assert result["unit_state"]["active_state"] == "failed"
    assert result["unit_state"]["exec_main_status"] == 1
    assert result["crash_noticed_after"] == pytest.approx(0.3, abs=0.001)
    assert result["msg"] == ("%s failed (result exit-code, main process exited with status 1) after %.1f s: %s"
                             % (UNIT, result["elapsed"], OOM_LINE))
    journal_call = systemd.calls("journalctl")[-1]
    # The whole run is read for the cause, not a tail of it.
    assert journal_call[:9] == ["/usr/bin/journalctl", "-u", UNIT, "-n", "100000", "-o", "cat", "--no-pager",
                                "--since"]
    # The unit left "inactive" at monotonic 4990 s, 10 s before the wait began.
    assert journal_call[9] == "@%d" % (FakeClock.EPOCH + 4990 - 1)


def test_the_unit_is_checked_before_every_http_attempt(monkeypatch, clock, server, systemd):
    clock.at(1.0, server.start)

    failed, result = run(monkeypatch, base_url=server.url, model="tiny", unit=UNIT)

    assert not failed
    assert len(systemd.calls("systemctl")) == result["attempts"]
    assert result["unit_state"]["active_state"] == "active"
    assert "journal" not in result


def test_a_restart_fails_the_wait_even_when_the_unit_is_active_again(monkeypatch, clock, server, systemd):
    systemd.set(NRestarts=2)  # restarts from an earlier run do not count
    clock.at(5.0, lambda: systemd.set(NRestarts=3, MainPID=48377))

    failed, result = run(monkeypatch, base_url=server.url, model="tiny", unit=UNIT)

    assert failed
    assert result["msg"].startswith("%s restarted 1 time(s) since the wait began after 5." % UNIT)
    assert result["unit_state"]["n_restarts"] == 3


@pytest.mark.parametrize("properties, problem", [
    (dict(ActiveState="activating", SubState="auto-restart", Result="signal", ExecMainCode=2, ExecMainStatus=9),
     "is restarting after its main process ended (main process killed by signal 9)"),
    (dict(ActiveState="inactive", SubState="dead"), "is inactive (dead)"),
    (dict(ActiveState="deactivating", SubState="stop-sigterm"), "is deactivating (stop-sigterm)"),
    (dict(LoadState="not-found", ActiveState="inactive", SubState="dead"), "is not loaded (not-found)"),
])
def test_unit_states_that_cannot_become_ready_fail_fast(monkeypatch, clock, server, systemd, properties, problem):
    systemd.set(**properties)
    systemd.journal = ["INFO 11-29 14:02:11 [api_server.py:1885] vLLM API server version 0.32.0"]

    failed, result = run(monkeypatch, base_url=server.url, model="tiny", unit=UNIT)

    assert failed
    assert result["msg"].startswith("%s %s after 0.0 s: " % (UNIT, problem))
    assert result["attempts"] == 1
    assert result["last_seen"] == "unit " + problem


def test_a_unit_waiting_to_restart_quotes_and_times_the_crash_of_its_last_run(monkeypatch, clock, server, systemd):
    systemd.journal = CUDA_OOM_JOURNAL[:2]

    def crash():
        # Restart=on-failure: the unit leaves "failed" for "auto-restart" just after the main process
        # died, so it left "inactive" after the crash; its main process started at 4990 s.
        exited = clock.now - 0.2
        systemd.set(ActiveState="activating", SubState="auto-restart", Result="exit-code", MainPID=0,
                    ExecMainCode=1, ExecMainStatus=1, ExecMainExitTimestampMonotonic=int(exited * 1e6),
                    InactiveExitTimestampMonotonic=int((exited + 0.1) * 1e6))
        systemd.journal = list(CUDA_OOM_JOURNAL)

    clock.at(42.0, crash)

    failed, result = run(monkeypatch, base_url=server.url, model="tiny", unit=UNIT)

    assert failed
    assert result["fatal_line"] == OOM_LINE
    assert result["crash_noticed_after"] == pytest.approx(0.2, abs=0.001)
    assert systemd.calls("journalctl")[-1][9] == "@%d" % (FakeClock.EPOCH + 4990 - 1)


def test_an_exit_from_before_the_units_current_run_is_not_timed(monkeypatch, clock, server, systemd):
    # The unit's current run began at monotonic 4990 s; the recorded exit is from the run before.
    systemd.set(ActiveState="inactive", SubState="dead", ExecMainExitTimestampMonotonic=4000000000)

    failed, result = run(monkeypatch, base_url=server.url, model="tiny", unit=UNIT)

    assert failed
    assert "crash_noticed_after" not in result


def test_a_journal_that_lags_behind_the_crash_is_read_again(monkeypatch, clock, server, systemd):
    systemd.set(ActiveState="failed", SubState="failed", Result="exit-code", ExecMainCode=1, ExecMainStatus=1)
    systemd.journal = CUDA_OOM_JOURNAL[:2]
    clock.at(0.1, lambda: setattr(systemd, "journal", list(CUDA_OOM_JOURNAL)))

    failed, result = run(monkeypatch, base_url=server.url, model="tiny", unit=UNIT)

    assert failed
    assert len(systemd.calls("journalctl")) == 2
    assert result["fatal_line"] == OOM_LINE


def test_a_crash_without_a_known_pattern_quotes_the_last_line(monkeypatch, clock, server, systemd):
    systemd.set(ActiveState="failed", SubState="failed", Result="exit-code", ExecMainCode=1, ExecMainStatus=3)
    systemd.journal = ["INFO 11-29 14:02:11 [api_server.py:1885] vLLM API server version 0.32.0",
                       "vllm-tiny-ngram.service: Main process exited, code=exited, status=3/NOTIMPLEMENTED"]

    failed, result = run(monkeypatch, base_url=server.url, model="tiny", unit=UNIT)

    assert failed
    assert result["fatal_line"] is None
    assert result["fatal_cause"] is None
    assert result["msg"].endswith(": vllm-tiny-ngram.service: Main process exited, code=exited, status=3/NOTIMPLEMENTED")


def test_a_main_process_killed_by_a_signal_is_named_with_a_hint(monkeypatch, clock, server, systemd):
    systemd.set(ActiveState="failed", SubState="failed", Result="signal", ExecMainCode=2, ExecMainStatus=9)
    systemd.journal = ["vllm-tiny-ngram.service: Main process exited, code=killed, status=9/KILL"]

    failed, result = run(monkeypatch, base_url=server.url, model="tiny", unit=UNIT)

    assert failed
    assert result["fatal_cause"]["name"] == "process_signal"
    assert result["fatal_line"] == ("server process killed by SIGKILL (killed); most often the kernel's OOM killer: "
                                    "look for 'Out of memory' in 'journalctl -k'. Journal: " + systemd.journal[0])


def test_systemctl_errors_fail_clearly_with_elapsed_and_attempts(monkeypatch, clock, server, systemd):
    systemd.show_rc = 1

    failed, result = run(monkeypatch, base_url=server.url, unit=UNIT)

    assert failed
    assert result["msg"] == ("systemctl show %s failed (rc 1): Failed to connect to bus: No such file or directory"
                             % UNIT)
    assert result["attempts"] == 1 and result["elapsed"] == 0.0


def test_missing_systemctl_is_a_clear_error(monkeypatch, clock, server, systemd):
    monkeypatch.setattr(basic.AnsibleModule, "get_bin_path", lambda self, name, required=False, opt_dirs=None: None)

    failed, result = run(monkeypatch, base_url=server.url, unit=UNIT)

    assert failed
    assert result["msg"] == "unit is set but systemctl is not in PATH on this host"


@pytest.mark.parametrize("args", [dict(timeout=-1), dict(sleep=0), dict(progress_interval=-5), dict(stall_timeout=-1)])
def test_nonsense_numbers_are_refused(monkeypatch, clock, server, args):
    failed, result = run(monkeypatch, base_url=server.url, **args)

    assert failed
    assert result["msg"] == ("timeout, progress_interval and stall_timeout must not be negative, sleep must be "
                             "positive")


def test_progress_chunks_continue_one_wait_through_resume(monkeypatch, clock, server, systemd):
    systemd.journal = [
        "(EngineCore_DP0 pid=48201) INFO 11-29 14:00:40 [gpu_model_runner.py:2602] Starting to load model /srv/models/tiny...",
        "(EngineCore_DP0 pid=48201) INFO 11-29 14:01:10 [default_loader.py:267] Loading weights took 29.87 seconds",
        "(EngineCore_DP0 pid=48201) DEBUG 11-29 14:01:11 [utils.py:12] some unrelated detail",
    ]
    args = dict(base_url=server.url, model="tiny", unit=UNIT, timeout=100, progress_interval=30)

    failed, first = run(monkeypatch, **args)

    assert not failed
    assert first["ready"] is False
    assert first["elapsed"] == 30.0  # the last pause is cut to the progress boundary
    assert first["phase_line"] == systemd.journal[1]
    assert first["journal"] == systemd.journal
    assert re.match(r"^30s elapsed, not ready yet; last seen: connection refused on /health; unit active \(running\); "
                    r"log: \(EngineCore_DP0 pid=48201\) INFO .* Loading weights took 29.87 seconds$", first["msg"])
    assert first["resume"]["restarts_baseline"] == 0

    # The unit restarts between two calls: the second call must still see it as a restart.
    systemd.set(NRestarts=1)
    failed, second = run(monkeypatch, resume=first["resume"], **args)

    assert failed
    assert "restarted 1 time(s) since the wait began" in second["msg"]
    assert second["attempts"] == first["attempts"] + 1


WEIGHTS_LOADED = [
    "(EngineCore_DP0 pid=48201) INFO 11-29 14:00:40 [gpu_model_runner.py:2602] Starting to load model /srv/models/tiny...",
    "(EngineCore_DP0 pid=48201) INFO 11-29 14:01:10 [default_loader.py:267] Loading weights took 29.87 seconds",
]


def test_a_start_that_shows_no_progress_fails_at_the_stall_timeout(monkeypatch, clock, server, systemd):
    systemd.journal = list(WEIGHTS_LOADED)

    failed, result = run(monkeypatch, base_url=server.url, model="tiny", unit=UNIT, timeout=2400, sleep=2,
                         stall_timeout=60)

    assert failed
    assert result["stalled"] is True
    # Looked for progress every 5 s: failed at the first look 60 s or more after the last progress.
    assert 60.0 <= result["elapsed"] <= 66.0 and result["seconds_since_progress"] >= 60.0
    assert result["last_progress_line"] == WEIGHTS_LOADED[1]
    assert result["last_progress_phase"] == "weights load done"
    assert result["msg"].startswith("%s stalled: nothing changed in its journal, its endpoint and the GPUs' memory "
                                    "for 6" % UNIT)
    assert "in phase 'weights load done': (EngineCore_DP0 pid=48201) INFO" in result["msg"]


def test_new_journal_lines_or_growing_gpu_memory_are_progress(monkeypatch, clock, server, systemd):
    systemd.journal = list(WEIGHTS_LOADED)
    systemd.gpu_used_mib = 1000
    for second in range(10, 200, 10):
        # The weights reach the GPUs while the journal holds the progress bar: memory grows, no line comes.
        clock.at(second, lambda: setattr(systemd, "gpu_used_mib", systemd.gpu_used_mib + 2000))
    for second in range(200, 400, 30):
        clock.at(second, lambda second=second: systemd.journal.append("Compiling a graph ... step %d" % second))

    failed, result = run(monkeypatch, base_url=server.url, model="tiny", unit=UNIT, timeout=2400, sleep=2,
                         stall_timeout=60)

    assert failed and result["stalled"] is True
    # The last line came at 380 s; nothing moved after it.
    assert 440.0 <= result["elapsed"] <= 446.0
    assert result["last_progress_line"] == "Compiling a graph ... step 380"
    assert result["last_progress_phase"] == "torch.compile"


# The engine core's wait line, as published in start logs of real nodes (vLLM 0.1x-0.3x wording, unchanged in
# distributed/device_communicators/shm_broadcast.py): logged once a minute while the workers do not answer, through a
# slow phase and through a hang alike.
SHM_WAIT = ("(EngineCore_DP0 pid=48201) WARNING 11-29 14:%02d:10 [shm_broadcast.py:501] No available shared memory "
            "broadcast block found in 60 seconds. This typically happens when some processes are hanging or doing "
            "some time-consuming work (e.g. compilation, weight/kv cache quantization).")
# The API server's DEBUG poll of v1/engine/utils.py, every 10 s until the engine core's handshake.
CORE_WAIT = "(APIServer pid=48100) DEBUG 11-29 14:%02d:%02d [v1/engine/utils.py:950] Waiting for 1 local, 0 remote " \
            "core engine proc(s) to start."
KV_CACHE_SIZED = WEIGHTS_LOADED + [
    "(EngineCore_DP0 pid=48201) INFO 11-29 14:01:40 [monitor.py:53] torch.compile took 25.93 s in total",
    "(EngineCore_DP0 pid=48201) INFO 11-29 14:01:52 [kv_cache_utils.py:1087] GPU KV cache size: 1,032,960 tokens",
]


def test_a_hang_that_only_repeats_the_engines_wait_line_fails_at_the_stall_timeout(monkeypatch, clock, server, systemd):
    # An all-reduce deadlock after the weights load: GPU memory flat, the wait line once a minute, nothing else.
    systemd.journal = list(WEIGHTS_LOADED)
    systemd.gpu_used_mib = 69000
    for minute in range(1, 40):
        clock.at(60.0 * minute, lambda minute=minute: systemd.journal.append(SHM_WAIT % (minute % 60)))
        clock.at(60.0 * minute + 30, lambda minute=minute: systemd.journal.append(CORE_WAIT % (minute % 60, 30)))

    failed, result = run(monkeypatch, base_url=server.url, model="tiny", unit=UNIT, timeout=2400, sleep=2,
                         stall_timeout=600, phase_stall_timeouts={"cuda_graphs": 1800})

    assert failed and result["stalled"] is True
    # Within the phase's limit plus one look (5 s), although a new line came every 30 s.
    assert 600.0 <= result["elapsed"] <= 610.0
    assert result["stall_limit"] == 600 and result["stalled_phase"] == "torch_compile"
    assert result["last_progress_line"] == WEIGHTS_LOADED[1]
    assert result["last_progress_phase"] == "weights load done"
    assert "No available shared memory broadcast block" in result["repeated_line"] or \
        "core engine proc(s) to start" in result["repeated_line"]
    assert "since then the engine only repeats: " in result["msg"]


def test_a_silent_graph_capture_longer_than_the_stall_timeout_is_waited_through(monkeypatch, clock, server, systemd):
    # KV cache sized, then 15 minutes of carriage-return updates journald does not pass on, the wait line every minute.
    systemd.journal = list(KV_CACHE_SIZED)
    for minute in range(1, 15):
        clock.at(60.0 * minute, lambda minute=minute: systemd.journal.append(SHM_WAIT % minute))
    clock.at(900.0, lambda: systemd.journal.append(
        "(EngineCore_DP0 pid=48201) INFO 11-29 14:17:10 [gpu_model_runner.py:4587] Graph capturing finished in "
        "898 secs, took 1.92 GiB"))
    clock.at(905.0, server.start)

    failed, result = run(monkeypatch, base_url=server.url, model="tiny", unit=UNIT, timeout=2400, sleep=2,
                         stall_timeout=600, phase_stall_timeouts={"cuda_graphs": 1800})

    assert not failed and result["ready"] is True
    assert 905.0 <= result["elapsed"] <= 908.0


def test_without_a_phase_limit_the_same_silent_capture_fails_naming_its_phase(monkeypatch, clock, server, systemd):
    systemd.journal = list(KV_CACHE_SIZED)
    for minute in range(1, 15):
        clock.at(60.0 * minute, lambda minute=minute: systemd.journal.append(SHM_WAIT % minute))

    failed, result = run(monkeypatch, base_url=server.url, model="tiny", unit=UNIT, timeout=2400, sleep=2,
                         stall_timeout=600)

    assert failed and result["stalled"] is True
    assert 600.0 <= result["elapsed"] <= 606.0
    assert result["stalled_phase"] == "cuda_graphs" and result["last_progress_phase"] == "KV-cache profiling done"


def test_gpus_that_report_no_memory_are_named_once_and_the_stall_is_still_seen(monkeypatch, clock, server, systemd):
    systemd.journal = list(WEIGHTS_LOADED)
    systemd.gpu_used_mib = "[N/A]"
    warnings = []
    monkeypatch.setattr(basic.AnsibleModule, "warn", lambda self, warning: warnings.append(warning))

    failed, result = run(monkeypatch, base_url=server.url, model="tiny", unit=UNIT, timeout=2400, sleep=2,
                         stall_timeout=60)

    assert failed and result["stalled"] is True and 60.0 <= result["elapsed"] <= 66.0
    assert warnings == ["the GPUs' memory in use is not reported (NVML or nvidia-smi gives no figure): the "
                        "stall check watches the journal and the endpoint only"]


@pytest.mark.parametrize("limits, problem", [
    ({"cuda_graph": 1800}, "phase_stall_timeouts names no phase 'cuda_graph'; the phases are engine_init, "),
    ({"warmup": -1}, "phase_stall_timeouts.warmup must be a whole number of seconds, not negative; got -1"),
])
def test_a_phase_limit_that_names_no_phase_or_is_negative_is_refused(monkeypatch, clock, server, limits, problem):
    failed, result = run(monkeypatch, base_url=server.url, phase_stall_timeouts=limits)

    assert failed and result["msg"].startswith(problem)
    assert result["attempts"] == 0


@pytest.mark.parametrize("stall_timeout", [0, 600])
def test_a_stall_timeout_off_or_longer_than_the_wait_leaves_the_timeout_exact(
        monkeypatch, clock, server, systemd, stall_timeout):
    systemd.journal = list(WEIGHTS_LOADED)

    failed, result = run(monkeypatch, base_url=server.url, model="tiny", unit=UNIT, timeout=300, sleep=5,
                         stall_timeout=stall_timeout)

    assert failed and "stalled" not in result
    assert result["elapsed"] == 300.0


def test_the_stall_clock_runs_on_through_resumed_calls(monkeypatch, clock, server, systemd):
    systemd.journal = list(WEIGHTS_LOADED)
    args = dict(base_url=server.url, model="tiny", unit=UNIT, timeout=2400, sleep=2, stall_timeout=60,
                progress_interval=45)

    failed, first = run(monkeypatch, **args)
    assert not failed and first["ready"] is False
    failed, second = run(monkeypatch, resume=first["resume"], **args)

    assert failed and second["stalled"] is True
    assert 60.0 <= second["elapsed"] <= 66.0


def test_resumed_wait_keeps_deadline_attempts_and_stage_times(monkeypatch, clock, server):
    args = dict(base_url=server.url, model="tiny", timeout=100, progress_interval=30)
    failed, first = run(monkeypatch, **args)
    assert not failed and not first["ready"]

    clock.at(45.0, server.start)
    failed, second = run(monkeypatch, resume=first["resume"], **args)

    assert not failed and second["ready"]
    assert 45.0 <= second["elapsed"] <= 45.25
    assert second["stages"]["health"] == second["elapsed"]
    assert second["attempts"] > first["attempts"]


def test_a_resumed_wait_fails_at_the_original_deadline(monkeypatch, clock, server):
    args = dict(base_url=server.url, model="tiny", timeout=50, progress_interval=30)
    failed, first = run(monkeypatch, **args)
    assert not failed

    failed, second = run(monkeypatch, resume=first["resume"], **args)

    assert failed
    assert second["elapsed"] == 50.0
    assert "not ready after 50.0 s" in second["msg"]


@pytest.mark.parametrize("change, reason", [
    (dict(base_url="http://127.0.0.1:1"), "it was made for "),
    (dict(started="soon"), "the token has no valid 'started' time"),
    (dict(boot_id="another-boot"), "the token was made before the host last booted"),
    (dict(started=10 ** 9), "the token's start lies in the future of this host's clock"),
    (dict(attempts="many"), "it holds malformed counters"),
])
def test_a_resume_token_from_elsewhere_is_refused(monkeypatch, clock, server, change, reason):
    args = dict(base_url=server.url, model="tiny", timeout=100, progress_interval=1)
    failed, first = run(monkeypatch, **args)
    assert not failed

    failed, result = run(monkeypatch, resume=dict(first["resume"], **change), **args)

    assert failed
    assert result["msg"].startswith("resume does not continue a wait of this host: " + reason)


def test_check_mode_reports_once_without_waiting_or_failing(monkeypatch, clock, server, systemd):
    systemd.set(ActiveState="inactive", SubState="dead")

    failed, result = run(monkeypatch, check_mode=True, base_url=server.url, model="tiny", unit=UNIT)

    assert not failed
    assert result["ready"] is False and result["attempts"] == 1
    assert clock.sleeps == []
    assert result["msg"].startswith("%s is inactive (dead)" % UNIT)


def test_check_mode_reports_a_ready_server(monkeypatch, clock, server):
    server.start()

    failed, result = run(monkeypatch, check_mode=True, base_url=server.url, model="tiny")

    assert not failed and result["ready"] is True


def test_check_mode_reports_a_loading_server(monkeypatch, clock, server):
    failed, result = run(monkeypatch, check_mode=True, base_url=server.url, model="tiny", timeout=600)

    assert not failed and result["ready"] is False
    assert result["last_seen"] == "connection refused on /health"
    assert clock.sleeps == []


# A hand-written start of Kimi-K2.5 INT4 on eight GPUs (see test__start_phases.py); its main process started at
# monotonic 86400 s, and the smoke completion comes about 1687 s later.
KIMI_JOURNAL = (pathlib.Path(__file__).resolve().parents[2] / "fixtures" / "journals"
                / "kimi-k2.5-int4-tp8-start.json").read_text(encoding="utf-8")
KIMI_BOOT = "6f1c2d7e-8a9b-4c0d-9e1f-2a3b4c5d6e7f"
KIMI_STARTED = 86400.0


@pytest.fixture
def kimi_start(monkeypatch, clock, systemd):
    """The unit started at 86400 s and the wait begins 1686 s later, in the boot the journal was written in."""
    clock.start = clock.now = KIMI_STARTED + 1686.0
    systemd.set(ExecMainStartTimestampMonotonic=int(KIMI_STARTED * 1e6),
                InactiveExitTimestampMonotonic=int(KIMI_STARTED * 1e6) - 10000)
    systemd.journal_json = KIMI_JOURNAL
    monkeypatch.setattr(_endpoint_probe, "read_boot_id", lambda: KIMI_BOOT)
    warnings = []
    monkeypatch.setattr(basic.AnsibleModule, "warn", lambda self, warning: warnings.append(warning))
    return warnings


def expected_phases(ready_at, smoke_test=True):
    entries = _systemd_unit.parse_journal_json(KIMI_JOURNAL, KIMI_BOOT)
    return _start_phases.start_phases(entries, KIMI_STARTED, ready_at, smoke_test=smoke_test)


def test_a_wait_through_a_start_returns_the_start_by_phase(monkeypatch, clock, server, systemd, kimi_start):
    clock.at(0.9, server.start)

    failed, result = run(monkeypatch, base_url=server.url, model="tiny", unit=UNIT, smoke_test=True, timeout=60)

    assert not failed and result["ready"]
    ready_at = KIMI_STARTED + 1686.0 + result["elapsed"]
    assert result["start_phases"] == expected_phases(ready_at)
    assert [phase["name"] for phase in result["start_phases"]] == [
        "engine_init", "weights_loaded", "torch_compile", "kv_cache", "cuda_graphs", "warmup", "api_up",
        "first_completion"]
    assert result["start_phases"][-1]["ended_at_s"] == pytest.approx(1686.0 + result["elapsed"], abs=1e-3)
    assert result["start_summary"] == _start_phases.start_summary(result["start_phases"])
    assert result["kv_cache"] == {"tokens": 301056, "max_model_len": 262144, "max_concurrency": 1.15}
    assert result["start_summary"].startswith("first completion after 28m07s: interpreter and API start-up 38.5 s, "
                                              "weights load 25m23s, torch.compile 76.0 s, ")
    [journal_json] = [argv for argv in systemd.calls("journalctl") if "json" in argv]
    assert journal_json[journal_json.index("-u") + 1] == UNIT and "-b" in journal_json
    assert journal_json[journal_json.index("--since") + 1] == "@%d" % int(FakeClock.EPOCH + KIMI_STARTED - 1)
    assert kimi_start == []


def test_without_a_smoke_test_the_start_ends_at_readiness(monkeypatch, clock, server, systemd, kimi_start):
    clock.at(0.9, server.start)

    failed, result = run(monkeypatch, base_url=server.url, model="tiny", unit=UNIT, timeout=60)

    assert not failed and result["start_phases"][-1]["name"] == "ready"
    assert result["start_phases"] == expected_phases(KIMI_STARTED + 1686.0 + result["elapsed"], smoke_test=False)
    assert result["start_summary"].startswith("ready after ")


def test_a_server_that_already_serves_was_not_started_by_this_wait(monkeypatch, clock, server, systemd, kimi_start):
    server.start()

    failed, result = run(monkeypatch, base_url=server.url, model="tiny", unit=UNIT, smoke_test=True)

    assert not failed and result["ready"]
    assert "start_phases" not in result and "start_summary" not in result
    assert not [argv for argv in systemd.calls("journalctl") if "json" in argv]


def test_a_journal_that_cannot_be_read_costs_the_phases_not_the_wait(monkeypatch, clock, server, systemd, kimi_start):
    systemd.journal_json_rc = 1
    clock.at(0.9, server.start)

    failed, result = run(monkeypatch, base_url=server.url, model="tiny", unit=UNIT, smoke_test=True, timeout=60)

    assert not failed and result["ready"]
    assert "start_phases" not in result and "start_summary" not in result
    assert kimi_start == ["start phases not timed: journalctl -u %s failed (rc 1): Failed to open journal: "
                          "Permission denied" % UNIT]


def test_the_phases_belong_to_the_call_that_finds_the_server_ready(monkeypatch, clock, server, systemd, kimi_start):
    clock.at(40.0, server.start)
    args = dict(base_url=server.url, model="tiny", unit=UNIT, smoke_test=True, timeout=100, progress_interval=30)

    failed, first = run(monkeypatch, **args)

    assert not failed and not first["ready"]
    assert "start_phases" not in first and first["resume"]["saw_start"] is True

    failed, second = run(monkeypatch, resume=first["resume"], **args)

    assert not failed and second["ready"]
    assert second["start_phases"] == expected_phases(KIMI_STARTED + 1686.0 + second["elapsed"])
    assert second["start_summary"].startswith("first completion after 28m")
