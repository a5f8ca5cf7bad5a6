# This module_utils file is private to the llmops.vllm collection: its API may change without notice.
# Copyright (c) 2026, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Reading a model's weights into the page cache before the unit that loads them starts.

A cold load of a large checkpoint is bound by the disk; once the files sit in the kernel's page cache the
same load reads memory. Reading them while the running server still serves moves that wait out of the
window in which the GPUs are idle. The read runs at idle I/O priority and the lowest CPU priority, so the
server's own I/O and CPU come first, and only when the weights fit in the memory the kernel can give back
(MemAvailable) with a reserve to spare: reading more than that would only evict the first files again, and
push the server's own memory toward swap.
"""

from __future__ import annotations

import ctypes
import os
import platform
import re
import time

MEMINFO = "/proc/meminfo"
CHUNK_BYTES = 16 * 1024 * 1024
MIB = 1024 * 1024

# ioprio_set(2): who = IOPRIO_WHO_PROCESS, which = 0 (the calling process), class in the top bits.
IOPRIO_WHO_PROCESS = 1
IOPRIO_CLASS_IDLE = 3
IOPRIO_CLASS_SHIFT = 13
# glibc has no wrapper for ioprio_set; its number differs by architecture.
SYS_IOPRIO_SET = {"x86_64": 251, "aarch64": 30, "ppc64le": 273, "ppc64": 273, "s390x": 282, "riscv64": 30}

# vLLM loads safetensors when a directory has them and falls back to PyTorch files only when it has none:
# those are not read when safetensors are there.
PYTORCH_SUFFIXES = (".bin", ".pt", ".pth")
MEM_AVAILABLE = re.compile(r"^MemAvailable:\s+(\d+)\s*kB\s*$", re.MULTILINE)


class PageCacheError(Exception):
    """The weights or the memory figures cannot be read; the message says which and where."""


def weight_files(paths):
    """[(real path, size)] of the files directly in each path, each file once, in a stable order.

    A hub snapshot's entries are symbolic links into the repository's blobs: each is resolved, and a blob
    that two entries (or two paths) point at is read and counted once. Subdirectories are left out: vLLM
    loads the files at the top of a model directory (a checkpoint's "original/" copy is not read).
    """
    seen = set()
    files = []
    for path in paths:
        if os.path.isfile(path):
            candidates = [path]
        elif os.path.isdir(path):
            names = sorted(os.listdir(path))
            has_safetensors = any(name.endswith(".safetensors") for name in names)
            candidates = [os.path.join(path, name) for name in names
                          if not (has_safetensors and name.endswith(PYTORCH_SUFFIXES))]
        else:
            raise PageCacheError("%s does not exist on the node" % path)
        for candidate in candidates:
            real = os.path.realpath(candidate)
            try:
                status = os.stat(real)
            except OSError as exc:
                # A dangling link is a blob that is not there: the weights check names such gaps.
                raise PageCacheError("%s cannot be read: %s" % (candidate, exc.strerror or exc))
            if not os.path.isfile(real):
                continue
            key = (status.st_dev, status.st_ino)
            if key in seen:
                continue
            seen.add(key)
            files.append((real, status.st_size))
    return files


def mem_available(meminfo_text):
    """MemAvailable in bytes: memory the kernel can hand out without swapping, page cache it may drop included."""
    match = MEM_AVAILABLE.search(meminfo_text or "")
    if not match:
        raise PageCacheError("%s has no MemAvailable line (a kernel older than 3.14?)" % MEMINFO)
    return int(match.group(1)) * 1024


def read_meminfo(path=None):
    path = path or MEMINFO
    try:
        with open(path, encoding="ascii") as handle:
            return handle.read()
    except OSError as exc:
        raise PageCacheError("%s cannot be read: %s" % (path, exc.strerror or exc))


def lower_priority(nice=os.nice, machine=platform.machine):
    """Idle I/O class and nice 19 for this process; what could not be set is left as it was, quietly.

    Returns the words that describe what was set, for the message.
    """
    done = []
    number = SYS_IOPRIO_SET.get(machine())
    if number is not None:
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            if libc.syscall(number, IOPRIO_WHO_PROCESS, 0, IOPRIO_CLASS_IDLE << IOPRIO_CLASS_SHIFT) == 0:
                done.append("idle I/O priority")
        except (OSError, AttributeError):
            pass
    try:
        nice(19)
        done.append("nice 19")
    except OSError:
        pass
    return done


def read_into_cache(files, timeout, clock=time.monotonic, chunk_bytes=CHUNK_BYTES):
    """Read every file once, front to back; stop when timeout seconds are spent.

    posix_fadvise(WILLNEED) asks the kernel to start reading ahead, but it is only advice and the kernel
    may read less; reading the bytes is what makes sure each page is cached. One buffer is reused, so the
    process itself holds no more than one chunk. Returns (bytes read, files read whole, finished).
    """
    deadline = clock() + timeout
    buffer = bytearray(chunk_bytes)
    view = memoryview(buffer)
    total = 0
    whole = 0
    for path, _size in files:
        if clock() >= deadline:
            return total, whole, False
        descriptor = os.open(path, os.O_RDONLY)
        try:
            if hasattr(os, "posix_fadvise"):
                os.posix_fadvise(descriptor, 0, 0, os.POSIX_FADV_WILLNEED)
            while True:
                count = os.readv(descriptor, [view])
                if count == 0:
                    break
                total += count
                if clock() >= deadline:
                    return total, whole, False
        finally:
            os.close(descriptor)
        whole += 1
    return total, whole, True


def size_text(size):
    if size >= 1e9:
        return "%.1f GB" % (size / 1e9)
    return "%.1f MB" % (size / 1e6)


def warm(paths, reserve_mib, timeout, check_mode=False, meminfo_text=None, clock=time.monotonic,
         chunk_bytes=CHUNK_BYTES, priority=None):
    """Read the weights under paths into the page cache when they fit; the module's whole answer.

    The weights fit when their total size is at most MemAvailable less reserve_mib. When they do not, or in
    check mode, nothing is read. A timeout ends the read early; neither is a failure, since the page cache is
    only an optimisation of the next load.
    """
    files = weight_files(paths)
    total = sum(size for _path, size in files)
    available = mem_available(read_meminfo() if meminfo_text is None else meminfo_text)
    room = available - reserve_mib * MIB
    result = dict(bytes=total, files=len(files), bytes_read=0, seconds=0.0, fits=True,
                  mem_available=available)
    counted = "%d file%s, %s" % (len(files), "" if len(files) == 1 else "s", size_text(total))
    if total > room:
        result["fits"] = False
        result["msg"] = ("not read into the page cache: the weights (%s) do not fit in the memory available "
                         "(MemAvailable %s less the reserve of %d MiB leaves %s)"
                         % (counted, size_text(available), reserve_mib, size_text(max(room, 0))))
        return result
    if check_mode:
        result["msg"] = "would read %s into the page cache (%s of %s left after the reserve)" % (
            counted, size_text(total), size_text(room))
        return result
    # Looked up when called, not bound when defined, so that a caller (or a test) that replaces lower_priority is heard.
    how = (priority or lower_priority)()
    started = clock()
    done, whole, finished = read_into_cache(files, timeout, clock=clock, chunk_bytes=chunk_bytes)
    result["seconds"] = round(clock() - started, 3)
    result["bytes_read"] = done
    at = " at %s" % " and ".join(how) if how else ""
    if finished:
        result["msg"] = "read %s into the page cache in %.1f s%s" % (counted, result["seconds"], at)
    else:
        result["msg"] = ("stopped after the timeout of %d s: read %s of %s (%d of %d files whole) into the page "
                         "cache%s" % (timeout, size_text(done), size_text(total), whole, len(files), at))
    return result
