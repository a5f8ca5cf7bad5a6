# This file is private to the llmops.vllm collection; its interface may change without notice.
# Copyright (c) llmops.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Write values into systemd unit and EnvironmentFile syntax so that they mean exactly what they say.

Unit command lines (systemd.service(5) "COMMAND LINES", systemd.syntax(7) "QUOTING") go through three
rewrites before the process is spawned, and each needs its own escape:

1. the line is split into words, quotes are removed and C-style escapes are decoded;
2. "%" specifiers are expanded in each word, so a literal "%" must be written "%%";
3. at exec time "$VAR" and "${VAR}" are replaced from the unit's environment, so a literal "$" must be
   written "$$" (this happens inside quotes as well).

EnvironmentFile= values are parsed like POSIX shell double-quoted text, without any expansion.
"""

from __future__ import annotations

import re

# A word made only of these characters survives the unit parser unquoted and unchanged.
_BARE_WORD = re.compile(r"[A-Za-z0-9_@+=:,./-]+\Z")
# Names systemd accepts in an environment block (env_name_is_valid(): no leading digit).
ENVIRONMENT_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_C_ESCAPES = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\t": "\\t"}
# Characters a shell-style double-quoted EnvironmentFile value needs backslash-escaped.
_ENV_FILE_ESCAPES = frozenset('"\\`$')


def unit_setting_text(text):
    """Return free text for a one-line unit setting such as Description=, which expands specifiers only.

    Such settings are not unquoted, so nothing can escape a line break or a trailing backslash (which
    would continue the setting on the next line): those are refused rather than altered.
    """
    if any(ord(char) < 0x20 or ord(char) == 0x7F for char in text):
        raise ValueError("must be a single line without control characters")
    if text.endswith("\\"):
        raise ValueError("must not end with a backslash, which would continue the setting on the next line")
    return text.replace("%", "%%")


def _check_no_nul(value, what):
    if "\x00" in value:
        raise ValueError("%s contains a NUL character, which no process argument or variable can hold" % what)


def quote_exec_argument(argument):
    """Return one word of an Exec*= command line that systemd turns back into exactly argument."""
    _check_no_nul(argument, "a command line argument")
    escaped = argument.replace("%", "%%").replace("$", "$$")
    if _BARE_WORD.match(escaped) and escaped != ";":
        return escaped
    quoted = []
    for char in escaped:
        if char in _C_ESCAPES:
            quoted.append(_C_ESCAPES[char])
        elif ord(char) < 0x20 or ord(char) == 0x7F:
            quoted.append("\\x%02x" % ord(char))
        else:
            quoted.append(char)
    return '"%s"' % "".join(quoted)


def format_exec_command(argv):
    """Return the value of an Exec*= setting that runs argv, each element reaching the process verbatim."""
    if not argv:
        raise ValueError("a command line needs at least the program to run")
    if not argv[0].startswith("/"):
        # A leading "@", "-", ":", "+" or "!" would be read as an Exec prefix, and a relative name would be
        # searched in systemd's own PATH: only an absolute program path means one thing.
        raise ValueError("the program to run must be an absolute path, got %r" % argv[0])
    return " ".join(quote_exec_argument(argument) for argument in argv)


def quote_environment_value(value):
    """Return value double-quoted for an EnvironmentFile= line, read back by systemd unchanged."""
    _check_no_nul(value, "an environment value")
    return '"%s"' % "".join("\\" + char if char in _ENV_FILE_ESCAPES else char for char in value)


def format_environment_file(environment):
    """Return the KEY="value" lines of an EnvironmentFile= for a mapping of names to strings, sorted by name."""
    lines = []
    for name in sorted(environment):
        if not ENVIRONMENT_NAME.match(name):
            raise ValueError("%r is not a valid environment variable name (letters, digits, _; no leading digit)" % name)
        try:
            lines.append("%s=%s\n" % (name, quote_environment_value(environment[name])))
        except ValueError as exc:
            raise ValueError("%s: %s" % (name, exc)) from None
    return "".join(lines)
