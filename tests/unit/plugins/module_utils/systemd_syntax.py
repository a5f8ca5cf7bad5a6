# Copyright (c) llmops.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""How systemd reads what the collection writes, for tests: models of its parsers and runs of the real one.

The models follow systemd 252 (src/basic/extract-word.c, escape.c, env-file.c, env-util.c, and
config_parse_exec() in src/core/load-fragment.c). They are strict: anything systemd would read
differently from plain text, or would warn about, raises SyntaxError instead of being guessed at.
The real systemd answers through `systemd --test`, which loads units and dumps every parsed command
line, and through the environment.d generator, which shares the EnvironmentFile= tokenizer.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile

WHITESPACE = " \t\n\r"
_SIMPLE_ESCAPES = {"a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v",
                   "\\": "\\", '"': '"', "'": "'", "s": " "}
SYSTEMD = "/lib/systemd/systemd"
ENVIRONMENT_D_GENERATOR = "/usr/lib/systemd/user-environment-generators/30-systemd-environment-d-generator"


def _cunescape_one(text, index):
    """Decode the C escape whose letter is at text[index]; return (character, index after it)."""
    if index >= len(text):
        raise SyntaxError("trailing backslash")
    letter = text[index]
    if letter in _SIMPLE_ESCAPES:
        return _SIMPLE_ESCAPES[letter], index + 1
    for prefix, digits in (("x", 2), ("u", 4), ("U", 8)):
        if letter == prefix:
            code = text[index + 1:index + 1 + digits]
            if len(code) != digits or not re.fullmatch(r"[0-9a-fA-F]+", code) or int(code, 16) == 0:
                raise SyntaxError("bad \\%s escape %r" % (prefix, code))
            return chr(int(code, 16)), index + 1 + digits
    if re.fullmatch(r"[0-7]{3}", text[index:index + 3]) and int(text[index:index + 3], 8):
        return chr(int(text[index:index + 3], 8)), index + 3
    raise SyntaxError("unknown escape \\%s" % letter)


def _unit_words(line):
    """extract_first_word(EXTRACT_UNQUOTE|EXTRACT_CUNESCAPE) applied until the line is used up."""
    words, index = [], 0
    while True:
        while index < len(line) and line[index] in WHITESPACE:
            index += 1
        if index == len(line):
            return words
        if line[index] == ";" and (index + 1 == len(line) or line[index + 1] in WHITESPACE):
            raise SyntaxError("an unquoted lone ';' separates commands")
        word, quote = [], None
        while index < len(line):
            char = line[index]
            if char == "\\":
                decoded, index = _cunescape_one(line, index + 1)
                word.append(decoded)
            elif quote:
                if char == quote:
                    quote = None
                else:
                    word.append(char)
                index += 1
            elif char in "'\"":
                quote = char
                index += 1
            elif char in WHITESPACE:
                break
            else:
                word.append(char)
                index += 1
        if quote:
            raise SyntaxError("unterminated quote")
        words.append("".join(word))


def expand_specifiers(word):
    """Specifier expansion as applied to each word: only %% is plain text."""
    def replace(match):
        if match.group(1) != "%":
            raise SyntaxError("specifier %%%s would be expanded" % match.group(1))
        return "%"
    return re.sub(r"%(.?)", replace, word, flags=re.DOTALL)


def expand_environment(word):
    """replace_env() at exec time: $$ is a dollar, anything else after $ would be substituted."""
    def replace(match):
        if match.group(1) != "$":
            raise SyntaxError("$%s would be substituted from the environment" % match.group(1))
        return "$"
    return re.sub(r"\$(.?)", replace, word, flags=re.DOTALL)


def parse_exec_command(value):
    """The argv systemd executes for an Exec*= value."""
    if "\n" in value:
        raise SyntaxError("a raw line break ends the setting")
    words = _unit_words(value)
    if not words:
        raise SyntaxError("empty command")
    return [expand_environment(expand_specifiers(word)) for word in words]


def parse_environment_file(text):
    """The variables systemd's EnvironmentFile= reader (parse_env_file_internal) returns, in file order."""
    result, state, key, value, index = {}, "pre_key", [], [], 0
    while index <= len(text):
        char = text[index] if index < len(text) else "\n"
        index += 1
        if state == "pre_key":
            if char in "#;":
                state = "comment"
            elif char not in WHITESPACE:
                state, key = "key", [char]
        elif state == "key":
            if char == "\n":
                raise SyntaxError("line without '=' is ignored: %r" % "".join(key))
            if char == "=":
                state, value = "pre_value", []
            else:
                key.append(char)
        elif state in ("pre_value", "value"):
            if char == "\n":
                result["".join(key).strip()] = "".join(value).rstrip(WHITESPACE) if state == "value" else "".join(value)
                state = "pre_key"
            elif char == "'" and state == "pre_value":
                state = "single"
            elif char == '"' and state == "pre_value":
                state = "double"
            elif char == "\\":
                raise SyntaxError("unquoted backslash escapes are not written by the collection")
            elif state == "value" or char not in WHITESPACE:
                state = "value"
                value.append(char)
        elif state == "single":
            if char == "'":
                state = "pre_value"
            else:
                value.append(char)
        elif state == "double":
            if char == '"':
                state = "pre_value"
            elif char == "\\":
                state = "double_escape"
            else:
                value.append(char)
        elif state == "double_escape":
            state = "double"
            if char in '"\\`$':
                value.append(char)
            elif char != "\n":
                value.extend(("\\", char))
        elif state == "comment" and char == "\n":
            state = "pre_key"
    if state not in ("pre_key", "comment"):
        raise SyntaxError("unterminated value")
    return result


def parse_shell_quoted(line):
    """Split text that systemd printed with quote_command_line()/shell_maybe_quote()."""
    words, index = [], 0
    while index < len(line):
        if line[index] == " ":
            index += 1
            continue
        word = []
        if line[index] == '"':
            index += 1
            while line[index] != '"':
                if line[index] == "\\" and line[index + 1] in '"\\`$':
                    word.append(line[index + 1])
                    index += 2
                elif line[index] == "\\":
                    decoded, index = _cunescape_one(line, index + 1)
                    word.append(decoded)
                else:
                    word.append(line[index])
                    index += 1
            index += 1
        else:
            while index < len(line) and line[index] != " ":
                word.append(line[index])
                index += 1
        words.append("".join(word))
    return words


def _as_unprivileged(argv):
    """systemd --test refuses to run as root; drop to nobody when this test runs as root."""
    if os.geteuid() != 0:
        return argv
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        return None
    return [setpriv, "--reuid=65534", "--regid=65534", "--clear-groups"] + argv


def systemd_loaded_commands(unit_text, unit_name="llmops-vllm-test.service"):
    """Load unit_text with the real systemd and return each ExecStart= argv as it stored it.

    Returns None when this machine cannot run `systemd --test`. The argv is the one systemd keeps
    before exec-time environment substitution, which expand_environment() then models.
    """
    command = _as_unprivileged([SYSTEMD, "--test", "--system", "--no-pager", "--unit=" + unit_name])
    if command is None or not os.access(SYSTEMD, os.X_OK):
        return None
    unit_dir = tempfile.mkdtemp()
    try:
        with open(os.path.join(unit_dir, unit_name), "w", encoding="utf-8") as unit_file:
            unit_file.write(unit_text)
        os.chmod(unit_dir, 0o755)
        os.chmod(os.path.join(unit_dir, unit_name), 0o644)
        completed = subprocess.run(command, env={"SYSTEMD_UNIT_PATH": unit_dir + ":", "PATH": os.defpath},
                                   capture_output=True, text=True, timeout=60, check=False)
    finally:
        shutil.rmtree(unit_dir)
    if "-> Unit %s:" % unit_name not in completed.stdout:
        return None
    dump = completed.stdout.split("-> Unit %s:" % unit_name, 1)[1].split("\n\t-> Unit ", 1)[0]
    if "Unit Load State: loaded" not in dump:
        raise SyntaxError("systemd did not load the unit:\n" + completed.stderr)
    return [parse_shell_quoted(line.split("Command Line: ", 1)[1])
            for line in dump.split("\n") if "Command Line: " in line]


def systemd_environment_file_values(text):
    """Read an environment file with systemd's own tokenizer (through the environment.d generator).

    Returns None when the generator is missing. That generator expands $VAR after parsing, so only
    values without "$" mean the same as under EnvironmentFile=.
    """
    if not os.access(ENVIRONMENT_D_GENERATOR, os.X_OK):
        return None
    config_home = tempfile.mkdtemp()
    try:
        os.mkdir(os.path.join(config_home, "environment.d"))
        with open(os.path.join(config_home, "environment.d", "50-llmops.conf"), "w", encoding="utf-8") as conf:
            conf.write(text)
        completed = subprocess.run([ENVIRONMENT_D_GENERATOR], env={"XDG_CONFIG_HOME": config_home},
                                   capture_output=True, text=True, timeout=60, check=True)
    finally:
        shutil.rmtree(config_home)
    values = {}
    for line in completed.stdout.split("\n"):
        if "=" in line:
            name, printed = line.split("=", 1)
            values[name] = parse_shell_quoted(printed)[0] if printed else ""
    return values
