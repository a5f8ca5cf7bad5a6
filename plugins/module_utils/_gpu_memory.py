# This module_utils file is private to the llmops.vllm collection: its API may change without notice.
# Copyright (c) 2026, llmops.vllm maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""GPU memory and the processes holding it, read through NVML or nvidia-smi, and the wait for it to free."""

from __future__ import annotations

from ansible_collections.llmops.vllm.plugins.module_utils import _systemd_unit

try:
    import pynvml  # from the nvidia-ml-py distribution
except ImportError:
    pynvml = None

GPU_QUERY = "index,uuid,name,memory.used,memory.total"
APPS_QUERY = "pid,process_name,gpu_uuid,used_memory"
CSV_FORMAT = "csv,noheader,nounits"
MIB = 1024 * 1024


class GpuQueryError(Exception):
    """Neither NVML nor nvidia-smi could report GPU memory."""


def parse_mib(value):
    """Read a memory field; None for the bracketed placeholders ([N/A], [Not Supported], ...)."""
    value = value.strip()
    if not value or value.startswith("["):
        return None
    # Some drivers keep the unit in spite of "nounits".
    number = value.split()[0]
    try:
        return int(float(number))
    except ValueError:
        return None


def _text(value):
    value = value.strip()
    return None if not value or value.startswith("[") else value


def _csv_rows(output, fixed_head, fixed_tail):
    """Split CSV lines whose one free-text column (a name) may itself contain commas."""
    rows = []
    for line in output.splitlines():
        line = line.strip()
        # Some nvidia-smi versions print this sentence instead of an empty process list.
        if not line or line.lower().startswith("no running processes"):
            continue
        fields = line.split(",")
        if len(fields) < fixed_head + fixed_tail + 1:
            raise GpuQueryError("unexpected nvidia-smi output line: %r" % line)
        tail = len(fields) - fixed_tail
        middle = ",".join(fields[fixed_head:tail])
        rows.append([field.strip() for field in fields[:fixed_head] + [middle] + fields[tail:]])
    return rows


def parse_gpus(output):
    """Parse `--query-gpu=index,uuid,name,memory.used,memory.total` CSV."""
    gpus = []
    for index, uuid, name, used, total in _csv_rows(output, 2, 2):
        try:
            gpu_index = int(index)
        except ValueError:
            raise GpuQueryError("unexpected GPU index %r in nvidia-smi output" % index) from None
        gpus.append({"index": gpu_index, "uuid": _text(uuid), "name": _text(name),
                     "memory_used_mib": parse_mib(used), "memory_total_mib": parse_mib(total)})
    return gpus


def parse_processes(output, gpus):
    """Parse `--query-compute-apps=pid,process_name,gpu_uuid,used_memory` CSV."""
    index_of = dict((gpu["uuid"], gpu["index"]) for gpu in gpus)
    processes = []
    for pid, name, uuid, used in _csv_rows(output, 1, 2):
        try:
            process_id = int(pid)
        except ValueError:
            raise GpuQueryError("unexpected PID %r in nvidia-smi output" % pid) from None
        processes.append({"pid": process_id, "name": _text(name), "gpu_index": index_of.get(uuid),
                          "used_memory_mib": parse_mib(used)})
    return processes


class NvidiaSmiReader:
    source = "nvidia-smi"

    def __init__(self, run_command, nvidia_smi):
        self._run_command = run_command
        self._nvidia_smi = nvidia_smi

    def _query(self, flag, fields):
        argv = [self._nvidia_smi, "--%s=%s" % (flag, fields), "--format=" + CSV_FORMAT]
        rc, out, err = self._run_command(argv)
        if rc != 0:
            raise GpuQueryError("%s failed (rc %d): %s" % (" ".join(argv), rc, (err or out).strip()))
        return out

    def read(self):
        gpus = parse_gpus(self._query("query-gpu", GPU_QUERY))
        return gpus, parse_processes(self._query("query-compute-apps", APPS_QUERY), gpus)

    def close(self):
        pass


class NvmlReader:
    source = "nvml"

    def __init__(self, nvml):
        self._nvml = nvml
        nvml.nvmlInit()

    def _call(self, function, *args):
        """Call NVML, mapping "not supported on this device" to None like nvidia-smi's [N/A]."""
        try:
            return function(*args)
        except self._nvml.NVMLError_NotSupported:
            return None

    @staticmethod
    def _decode(value):
        return value.decode("utf-8", "replace") if isinstance(value, bytes) else value

    def _process_name(self, pid):
        try:
            return self._decode(self._nvml.nvmlSystemGetProcessName(pid))
        except self._nvml.NVMLError:
            return None

    def read(self):
        gpus, processes = [], []
        for index in range(self._nvml.nvmlDeviceGetCount()):
            handle = self._nvml.nvmlDeviceGetHandleByIndex(index)
            memory = self._call(self._nvml.nvmlDeviceGetMemoryInfo, handle)
            gpus.append({
                "index": index,
                "uuid": self._decode(self._nvml.nvmlDeviceGetUUID(handle)),
                "name": self._decode(self._nvml.nvmlDeviceGetName(handle)),
                "memory_used_mib": memory.used // MIB if memory is not None else None,
                "memory_total_mib": memory.total // MIB if memory is not None else None,
            })
            for process in self._call(self._nvml.nvmlDeviceGetComputeRunningProcesses, handle) or []:
                used = getattr(process, "usedGpuMemory", None)
                processes.append({"pid": process.pid, "name": self._process_name(process.pid), "gpu_index": index,
                                  "used_memory_mib": used // MIB if used is not None else None})
        return gpus, processes

    def close(self):
        self._nvml.nvmlShutdown()


def open_reader(run_command, nvidia_smi):
    """Prefer NVML (no process to spawn per poll); fall back to nvidia-smi."""
    reasons = []
    if pynvml is None:
        reasons.append("the pynvml module (nvidia-ml-py) is not installed")
    else:
        try:
            return NvmlReader(pynvml)
        except pynvml.NVMLError as exc:
            reasons.append("NVML did not initialise: %s" % exc)
    if nvidia_smi:
        return NvidiaSmiReader(run_command, nvidia_smi)
    reasons.append("nvidia-smi is not in PATH")
    raise GpuQueryError("cannot read GPU memory: %s" % "; ".join(reasons))


class GpuMemoryWait:
    """Poll until the chosen GPUs use at most a given amount of memory (and host no process)."""

    def __init__(self, reader, gpus=None, max_used_mib=1024, require_no_processes=True):
        self.reader = reader
        self.wanted = None if gpus is None else sorted(set(gpus))
        self.max_used_mib = max_used_mib
        self.require_no_processes = require_no_processes
        self.attempts = 0
        self.warnings = []

    def observe(self):
        """Read once; return (gpus, processes) limited to the chosen GPUs."""
        gpus, processes = self.reader.read()
        present = [gpu["index"] for gpu in gpus]
        if self.wanted is not None:
            missing = [index for index in self.wanted if index not in present]
            if missing:
                raise GpuQueryError("no GPU with index %s; this host has %s" % (
                    ", ".join(str(index) for index in missing), _index_list(present) or "none"))
            gpus = [gpu for gpu in gpus if gpu["index"] in self.wanted]
        chosen = set(gpu["index"] for gpu in gpus)
        held = [dict(process, unit=_systemd_unit.unit_of_pid(process["pid"])) for process in processes
                if process["gpu_index"] in chosen]
        return ([dict((key, gpu[key]) for key in ("index", "name", "memory_used_mib", "memory_total_mib"))
                 for gpu in gpus], held)

    def blockers(self, gpus, processes):
        """Describe what keeps the GPUs from counting as free; an empty list means free."""
        reasons = []
        for gpu in gpus:
            used = gpu["memory_used_mib"]
            if used is not None and used > self.max_used_mib:
                reasons.append("GPU %d uses %d MiB (limit %d MiB)" % (gpu["index"], used, self.max_used_mib))
        if self.require_no_processes:
            reasons.extend(describe_holders(processes))
        return reasons

    def run(self, deadline, backoff, check_only=False):
        """Wait; return the result dict of the module, with failed=True when the GPUs stayed busy."""
        while True:
            self.attempts += 1
            gpus, processes = self.observe()
            reasons = self.blockers(gpus, processes)
            unknown = [gpu["index"] for gpu in gpus if gpu["memory_used_mib"] is None]
            result = {"gpus": gpus, "processes": processes, "source": self.reader.source, "free": not reasons,
                      "attempts": self.attempts, "elapsed": round(deadline.elapsed(), 3), "failed": False}
            if unknown and not self.warnings:
                self.warnings.append("GPU %s does not report memory use; only its process list was checked"
                                     % _index_list(unknown))
            if not reasons:
                result["msg"] = "GPU %s free after %.1f s" % (_index_list([gpu["index"] for gpu in gpus]),
                                                              result["elapsed"])
                return result
            if check_only:
                result["msg"] = "GPU memory is in use: " + "; ".join(reasons)
                return result
            if deadline.expired():
                result["failed"] = True
                result["msg"] = "GPU memory still in use after %.1f s (%d checks): %s" % (
                    result["elapsed"], self.attempts, "; ".join(reasons))
                return result
            deadline.sleep(backoff.next())


def describe_holders(processes):
    """One phrase per PID: its name, its systemd unit and where it holds memory."""
    by_pid = {}
    for process in processes:
        by_pid.setdefault(process["pid"], []).append(process)
    phrases = []
    for pid in sorted(by_pid):
        entries = by_pid[pid]
        first = entries[0]
        unit = first["unit"] or "no systemd unit"
        gpus = _index_list(sorted(entry["gpu_index"] for entry in entries))
        known = [entry["used_memory_mib"] for entry in entries if entry["used_memory_mib"] is not None]
        amount = " (%d MiB)" % sum(known) if known else ""
        phrases.append("PID %d (%s, %s) holds GPU %s%s" % (pid, first["name"] or "unknown process", unit, gpus, amount))
    return phrases


def _index_list(indices):
    return ",".join(str(index) for index in indices)
