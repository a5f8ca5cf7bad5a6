# Copyright (c) llmops.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Every value must come back out of systemd exactly as it went in."""

from __future__ import annotations

import pytest

from ansible_collections.llmops.vllm.plugins.plugin_utils._systemd_escape import (
    format_environment_file,
    format_exec_command,
    quote_exec_argument,
    unit_setting_text,
)

from ansible_collections.llmops.vllm.tests.unit.plugins.module_utils.systemd_syntax import (
    expand_environment,
    parse_environment_file,
    parse_exec_command,
    systemd_environment_file_values,
    systemd_loaded_commands,
)

PROGRAM = "/opt/vllm/venv/bin/python"

# Each of these is read differently by at least one of systemd's three rewrites when written plainly.
HARD_ARGUMENTS = [
    "plain",
    "",
    " ",
    "two words",
    "$free",
    "$HOME",
    "${HOME}",
    "$$",
    "$",
    "cost: $5",
    "100%",
    "%n",
    "%%",
    "%",
    '"',
    "'",
    "\\",
    "\\\\",
    "trailing\\",
    "\\;",
    ";",
    "a;b",
    "#not-a-comment",
    "it's",
    '"double" and \'single\'',
    "back\\slash \\n not a newline",
    "tab\tinside",
    "line\nbreak",
    "carriage\rreturn",
    "bell\x07",
    "del\x7f",
    "ünïcødé ✓ 模型",
    "`id`",
    "*?[glob]",
    "~root",
    "--flag=value with space",
    "-",
    "@",
    '{"method":"ngram","num_speculative_tokens":5,"prompt_lookup_max":4}',
    '{"note":"say \\"hi\\" for $5 at 100% \\\\o/"}',
]

HARD_ENVIRONMENT = {
    "PLAIN": "x",
    "EMPTY": "",
    "SPACES": "  leading and trailing  ",
    "QUOTES": "it's \"quoted\"",
    "BACKSLASHES": "a\\b\\\\c\\",
    "DOLLARS": "$HOME ${HOME} $$ $",
    "BACKTICKS": "`id`",
    "COMMENT_CHARS": "#x ;y",
    "EQUALS": "a=b=c",
    "NEWLINE": "first\nsecond",
    "TAB": "\tx\t",
    "UNICODE": "ünïcødé ✓",
    "JSON": '{"a": [1, "two"]}',
}


def test_plain_words_stay_bare():
    assert format_exec_command([PROGRAM, "-m", "vllm.entrypoints.openai.api_server", "--port", "8000"]) == (
        PROGRAM + " -m vllm.entrypoints.openai.api_server --port 8000")


@pytest.mark.parametrize("argument, written", [
    ("$free", '"$$free"'),
    ("100%", '"100%%"'),
    ("two words", '"two words"'),
    ("", '""'),
    (";", '";"'),
    ('say "hi"', '"say \\"hi\\""'),
    ("a\\b", '"a\\\\b"'),
    ("line\nbreak", '"line\\nbreak"'),
    ("bell\x07", '"bell\\x07"'),
])
def test_each_rewrite_is_escaped(argument, written):
    assert quote_exec_argument(argument) == written


@pytest.mark.parametrize("argument", HARD_ARGUMENTS)
def test_exec_argument_round_trips_through_the_parser_model(argument):
    assert parse_exec_command(format_exec_command([PROGRAM, argument])) == [PROGRAM, argument]


def test_all_arguments_in_one_command_line_keep_their_boundaries():
    argv = [PROGRAM] + HARD_ARGUMENTS
    assert parse_exec_command(format_exec_command(argv)) == argv


def test_real_systemd_loads_each_argument_as_written():
    lines = "\n".join("ExecStart=" + format_exec_command([PROGRAM, argument]) for argument in HARD_ARGUMENTS)
    loaded = systemd_loaded_commands("[Service]\nType=oneshot\n" + lines + "\n")
    if loaded is None:
        pytest.skip("this machine cannot run `systemd --test`")
    # systemd keeps "$$" until exec time; expand_environment models that last substitution.
    executed = [[expand_environment(word) for word in argv] for argv in loaded]
    assert executed == [[PROGRAM, argument] for argument in HARD_ARGUMENTS]


@pytest.mark.parametrize("argv, message", [
    ([], "at least the program"),
    (["python", "-V"], "absolute path"),
    (["-/bin/true"], "absolute path"),
    ([PROGRAM, "nul\x00byte"], "NUL"),
])
def test_commands_systemd_cannot_run_as_written_are_refused(argv, message):
    with pytest.raises(ValueError, match=message):
        format_exec_command(argv)


def test_environment_file_round_trips_through_the_parser_model():
    assert parse_environment_file(format_environment_file(HARD_ENVIRONMENT)) == HARD_ENVIRONMENT


def test_real_systemd_reads_the_environment_file_as_written():
    # The generator used as the oracle expands $VAR, drops empty variables and prints one per line.
    comparable = dict((name, value) for name, value in HARD_ENVIRONMENT.items()
                      if value and "$" not in value and "\n" not in value)
    values = systemd_environment_file_values(format_environment_file(comparable))
    if values is None:
        pytest.skip("systemd's environment.d generator is not installed")
    assert dict((name, values.get(name)) for name in comparable) == comparable


def test_environment_file_is_sorted_and_one_line_per_plain_variable():
    assert format_environment_file({"B": "2", "A": "1"}) == 'A="1"\nB="2"\n'


@pytest.mark.parametrize("environment, message", [
    ({"1ST": "x"}, "'1ST' is not a valid environment variable name"),
    ({"WITH-DASH": "x"}, "not a valid environment variable name"),
    ({"": "x"}, "not a valid environment variable name"),
    ({"NUL": "a\x00b"}, "NUL: an environment value contains a NUL character"),
])
def test_environment_files_systemd_would_misread_are_refused(environment, message):
    with pytest.raises(ValueError, match=message):
        format_environment_file(environment)


def test_unit_setting_text_doubles_percent_only():
    assert unit_setting_text('50% "faster" $maybe \\o/') == '50%% "faster" $maybe \\o/'


@pytest.mark.parametrize("text, message", [
    ("two\nlines", "single line"),
    ("bell\x07", "control characters"),
    ("ends in\\", "must not end with a backslash"),
])
def test_unit_setting_text_refuses_what_cannot_be_escaped(text, message):
    with pytest.raises(ValueError, match=message):
        unit_setting_text(text)
