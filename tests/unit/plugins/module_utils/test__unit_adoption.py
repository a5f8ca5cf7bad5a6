# Copyright (c) llmops.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The rules under unit adoption: systemd's quoting and merging, vLLM argv read back, and what equivalent means."""

from __future__ import annotations

import pytest

from ansible_collections.llmops.vllm.plugins.module_utils._unit_adoption import (
    AdoptionError,
    compare,
    decide,
    expand_exec_words,
    merge_settings,
    parse_environment_file,
    parse_process_environment,
    parse_systemctl_cat,
    read_unit,
    root_refusal,
    server_command,
    split_exec,
    stale_environment,
    unit_name_problem,
)

MODULE_FORM = ["/opt/vllm/0.32.0/bin/python", "-m", "vllm.entrypoints.openai.api_server", "--model", "/srv/m",
               "--served-model-name", "m", "--host", "0.0.0.0", "--port", "8000", "--max-model-len", "2048",
               "--enforce-eager", "--speculative-config", '{"method":"ngram","num_speculative_tokens":5}']


def unit_from(exec_start, environment=""):
    text = "# /etc/systemd/system/x.service\n[Service]\n%sExecStart=%s\n" % (environment, exec_start)
    return read_unit(text, lambda path: "")


def test_drop_ins_merge_as_systemd_merges_them():
    paths, entries = parse_systemctl_cat(
        "# /etc/systemd/system/x.service\n[Service]\nExecStart=/a\nEnvironment=A=1\nUser=root\n\n"
        "# /etc/systemd/system/x.service.d/one.conf\n[Service]\nExecStart=\nExecStart=/b \\\n  --flag\n"
        "Environment=B=2\nUser=vllm\n; a comment\n")
    assert paths == ["/etc/systemd/system/x.service", "/etc/systemd/system/x.service.d/one.conf"]
    merged = merge_settings(entries)
    assert [entry.value for entry in merged["ExecStart"]] == ["/b --flag"]
    assert merged["ExecStart"][0].where() == "/etc/systemd/system/x.service.d/one.conf line 3"
    assert [entry.value for entry in merged["Environment"]] == ["A=1", "B=2"]
    assert [entry.value for entry in merged["User"]] == ["vllm"]


def test_exec_words_are_unquoted_then_dollars_and_percents_resolved():
    prefixes, words = split_exec(r"""-/bin/x "a b" 'c "d"' e\ f \x41 $$HOME ${HOME}/x $LIST %%""")
    assert prefixes == "-"
    assert words == ["/bin/x", "a b", 'c "d"', "e f", "A", "$$HOME", "${HOME}/x", "$LIST", "%%"]
    assert expand_exec_words(words, {"HOME": "/h", "LIST": "p q"}) == [
        "/bin/x", "a b", 'c "d"', "e f", "A", "$HOME", "/h/x", "p", "q", "%"]
    with pytest.raises(AdoptionError, match="unbalanced"):
        split_exec('/bin/x "open')


def test_environment_files_are_read_with_shell_like_quoting_and_no_expansion():
    assert parse_environment_file('# c\n; c\nA=1\nB="two words \\" \\$X"\nC=\'$raw\'\nD= spaced  \nbad line\n'
                                  'E="multi\nline"\n') == {"A": "1", "B": 'two words " $X', "C": "$raw",
                                                           "D": "spaced", "E": "multi\nline"}


def test_both_server_forms_read_alike():
    serve = ["/opt/vllm/0.32.0/bin/vllm", "serve", "/srv/m", "--max-model-len=2048", "--enforce-eager",
             "--served-model-name", "m", "--speculative-config", '{"num_speculative_tokens": 5, "method": "ngram"}']
    assert server_command(serve) == server_command(MODULE_FORM[:3] + MODULE_FORM[3:5] + MODULE_FORM[11:]
                                                   + MODULE_FORM[5:7]) == (
        "/opt/vllm/0.32.0", "/srv/m", {"max_model_len": 2048, "enforce_eager": True, "served_model_name": "m",
                                       "speculative_config": {"method": "ngram", "num_speculative_tokens": 5}})


@pytest.mark.parametrize("argv, message", [
    (["/usr/bin/bash", "-c", "vllm serve /m"], "which is not a vLLM server"),
    (["vllm", "serve", "/m"], "needs the absolute path of a venv's bin/ program"),
    (["/opt/v/bin/vllm", "serve", "--port", "1"], "names no model"),
    (["/opt/v/bin/vllm", "serve", "/m", "stray"], "where a flag was expected"),
])
def test_what_is_not_a_vllm_server_is_refused(argv, message):
    with pytest.raises(AdoptionError, match=message):
        server_command(argv)


def test_equivalent_means_the_same_server_environment_and_account():
    unit = unit_from("/opt/vllm/0.32.0/bin/vllm serve /srv/m --served-model-name m --max-model-len 2048 "
                     "--enforce-eager --speculative-config '{\"method\": \"ngram\", \"num_speculative_tokens\": 5}'",
                     "Environment=A=1\nUser=vllm\n")
    # vLLM's defaults for a left-out host and port are the collection's 0.0.0.0 and 8000.
    assert compare(unit, MODULE_FORM, {"A": 1}, "vllm") == (True, [])
    equivalent, differences = compare(unit, MODULE_FORM + ["--trust-remote-code"], {"A": "1", "B": "2"}, "vllm",
                                      "vllm")
    assert not equivalent
    assert [d["setting"] for d in differences] == ["serve_args.trust_remote_code", "environment.B", "Group"]
    assert differences[2]["running"] == "root"


def test_a_credential_on_the_command_line_is_a_difference_and_never_shown():
    unit = unit_from("/opt/vllm/0.32.0/bin/vllm serve /srv/m --served-model-name m --api-key hunter2 "
                     "--max-model-len 2048 --enforce-eager --speculative-config "
                     "'{\"method\":\"ngram\",\"num_speculative_tokens\":5}'")
    equivalent, differences = compare(unit, MODULE_FORM, {})
    assert not equivalent and [d["setting"] for d in differences] == ["secret_flags"]
    assert "hunter2" not in repr(differences) and "hunter2" not in repr(unit["server"])


def test_an_unset_variable_in_exec_start_pre_is_an_error_and_a_set_one_is_not():
    unit = read_unit("# /u\n[Service]\nEnvironment=LIMIT=9\nExecStartPre=/bin/sh -c 'test \"$LIMIT\" -gt "
                     "\"${used}\"'\nExecStart=/v/bin/vllm serve /m\n", lambda path: "")
    assert [(p["variable"], p["severity"]) for p in unit["problems"]] == [("used", "error")]
    assert "systemd replaces ${used} with an empty string" in unit["problems"][0]["message"]
    assert unit["problems"][0]["fix"] == "write $${used} (systemd turns $$ into one literal $)"


def test_the_decision_follows_equivalence_and_the_restart_request():
    assert decide("u.service", True, [], False, True)[0] == "none"
    # The collection's own file with an inventory that changed since: its environment file may differ.
    assert decide("u.service", False, [{"message": "m"}], False, True)[0] == "refuse"
    assert decide("u.service", True, [], False, False)[0] == "take_over"
    assert decide("u.service", False, [{"message": "m"}], True, False)[0] == "restart"
    action, reason = decide("u.service", False, [{"message": "--port: differs"}], False, False)
    assert action == "refuse" and "--port: differs" in reason and "left untouched" in reason


@pytest.mark.parametrize("name, ok", [("vllm-kimi-k25-int4.service", True), ("a_b:c.service", True),
                                      ("vllm@x.service", False), ("x.socket", False), ("x y.service", False),
                                      ("-x.service", False), (None, False)])
def test_unit_names_are_plain(name, ok):
    assert (unit_name_problem(name) is None) is ok


def test_the_process_environment_is_compared_for_the_declared_names_only():
    process = parse_process_environment(b"PATH=/usr/bin\0A=1\0HF_TOKEN=tok-before\0B=x=y\0")
    assert process == {"PATH": "/usr/bin", "A": "1", "HF_TOKEN": "tok-before", "B": "x=y"}
    assert stale_environment({"A": "1", "B": "x=y"}, process) == []
    stale = stale_environment({"A": "2", "HF_TOKEN": "tok-after", "C": "3"}, process)
    assert [(d["setting"], d["running"]) for d in stale] == [
        ("environment.A", "1"), ("environment.C", None), ("environment.HF_TOKEN", "(secret)")]
    assert "tok-before" not in repr(stale) and "tok-after" not in repr(stale)


SERVER = "ExecStart=/opt/vllm/0.32.0/bin/vllm serve /srv/m\n"


@pytest.mark.parametrize("cat, why", [
    ("# /etc/systemd/system/x.service\n[Service]\n" + SERVER, "it sets no User=, so systemd starts it as root"),
    ("# /etc/systemd/system/x.service\n[Service]\nUser=root\n" + SERVER, "User=root"),
    ("# /etc/systemd/system/x.service\n[Service]\nUser=0\nGroup=vllm\n" + SERVER, "User=0"),
    # A drop-in has the last word: one that empties User= puts the unit back to root.
    ("# /etc/systemd/system/x.service\n[Service]\nUser=vllm\n" + SERVER
     + "\n# /etc/systemd/system/x.service.d/10-root.conf\n[Service]\nUser=\n",
     "it sets no User=, so systemd starts it as root"),
    # User= in another section is not the service's.
    ("# /etc/systemd/system/x.service\n[Unit]\nUser=vllm\n[Service]\n" + SERVER,
     "it sets no User=, so systemd starts it as root"),
])
def test_a_unit_that_runs_as_root_is_refused_naming_vllm_user(cat, why):
    message = root_refusal("x.service", read_unit(cat, lambda path: ""))
    assert message == (
        "vllm_user: x.service runs as root (%s). The collection runs vLLM only as a non-root vllm_user and never "
        "changes an existing account, so it neither takes this unit over nor restarts it as another account. Give "
        "the unit a non-root User= that can read the model, restart it, and adopt it then" % why)


@pytest.mark.parametrize("service", [
    "User=vllm\n", "User=alice\nGroup=alice\n", "DynamicUser=yes\n", "DynamicUser=on\nUser=vllm\n",
    "User=root\n# a drop-in below\n",
])
def test_a_unit_with_an_account_of_its_own_is_not_refused(service):
    cat = "# /etc/systemd/system/x.service\n[Service]\n%s%s" % (service, SERVER)
    if service.endswith("# a drop-in below\n"):
        cat += "\n# /etc/systemd/system/x.service.d/10-user.conf\n[Service]\nUser=vllm\n"
    assert root_refusal("x.service", read_unit(cat, lambda path: "")) is None


def test_dynamic_user_off_is_root_again():
    cat = "# /etc/systemd/system/x.service\n[Service]\nDynamicUser=no\n" + SERVER
    assert root_refusal("x.service", read_unit(cat, lambda path: "")).startswith("vllm_user: x.service runs as root")
