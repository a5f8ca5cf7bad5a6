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


def text_field(value):
    value = value.strip()
    return None if not value or value.startswith("[") else value


def csv_rows(output, fixed_head, fixed_tail):
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
    for index, uuid, name, used, total in csv_rows(output, 2, 2):
        try:
            gpu_index = int(index)
        except ValueError:
            raise GpuQueryError("unexpected GPU index %r in nvidia-smi output" % index) from None
        gpus.append({"index": gpu_index, "uuid": text_field(uuid), "name": text_field(name),
                     "memory_used_mib": parse_mib(used), "memory_total_mib": parse_mib(total)})
    return gpus


def parse_processes(output, gpus):
    """Parse `--query-compute-apps=pid,process_name,gpu_uuid,used_memory` CSV."""
    index_of = dict((gpu["uuid"], gpu["index"]) for gpu in gpus)
    processes = []
    for pid, name, uuid, used in csv_rows(output, 1, 2):
        try:
            process_id = int(pid)
        except ValueError:
            raise GpuQueryError("unexpected PID %r in nvidia-smi output" % pid) from None
        processes.append({"pid": process_id, "name": text_field(name), "gpu_index": index_of.get(uuid),
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


def open_reader(run_command, nvidia_smi, nvml_reader=NvmlReader, smi_reader=NvidiaSmiReader, what="GPU memory"):
    """Prefer NVML (no process to spawn per poll); fall back to nvidia-smi. The readers are GPU memory's by default."""
    reasons = []
    if pynvml is None:
        reasons.append("the pynvml module (nvidia-ml-py) is not installed")
    else:
        try:
            return nvml_reader(pynvml)
        except pynvml.NVMLError as exc:
            reasons.append("NVML did not initialise: %s" % exc)
    if nvidia_smi:
        return smi_reader(run_command, nvidia_smi)
    reasons.append("nvidia-smi is not in PATH")
    raise GpuQueryError("cannot read %s: %s" % (what, "; ".join(reasons)))


def orphaned_holders(processes, orphan_units, killed_units=()):
    """The holders that run in one of orphan_units (units that should run no process by now), by unit.

    A unit already killed once is left out: a process that outlives SIGKILL is stuck in the driver, and
    the wait's timeout names it instead of killing again.
    """
    orphans = {}
    for process in processes:
        unit = process.get("unit")
        if unit and unit in orphan_units and unit not in killed_units:
            orphans.setdefault(unit, []).append(process)
    return orphans


class GpuMemoryWait:
    """Poll until the chosen GPUs use at most a given amount of memory (and host no process)."""

    def __init__(self, reader, gpus=None, max_used_mib=1024, require_no_processes=True, orphan_units=(),
                 kill_unit=None):
        self.reader = reader
        self.wanted = None if gpus is None else sorted(set(gpus))
        self.max_used_mib = max_used_mib
        self.require_no_processes = require_no_processes
        self.orphan_units = list(orphan_units)
        # kill_unit(unit) -> error text or None; None as a whole means orphans are only reported.
        self.kill_unit = kill_unit
        self.attempts = 0
        self.warnings = []
        self.unknown_reported = False
        self.orphans = []

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
        held = [dict(process, unit=_systemd_unit.unit_of_pid(process["pid"]),
                     command=_systemd_unit.command_of_pid(process["pid"]))
                for process in processes if process["gpu_index"] in chosen]
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

    def kill_orphans(self, processes, check_only):
        """Kill (or, in check mode, only report) the units of orphaned holders; one warning per unit."""
        acting = not check_only and self.kill_unit is not None
        killed_units = set(orphan["unit"] for orphan in self.orphans)
        for unit, holders in sorted(orphaned_holders(processes, self.orphan_units, killed_units).items()):
            error = self.kill_unit(unit) if acting else None
            self.orphans.extend(dict(holder, killed=acting and not error) for holder in holders)
            what = "; ".join(describe_holders(holders))
            if not acting:
                self.warnings.append("orphaned in %s, which should run no process: %s" % (unit, what))
            elif error:
                self.warnings.append("could not kill the orphans of %s (%s): %s" % (unit, error, what))
            else:
                self.warnings.append("killed the orphans of %s, which should run no process, with SIGKILL: %s"
                                     % (unit, what))

    def run(self, deadline, backoff, check_only=False):
        """Wait; return the result dict of the module, with failed=True when the GPUs stayed busy."""
        processes_gone_at = None
        while True:
            self.attempts += 1
            gpus, processes = self.observe()
            if self.orphan_units:
                self.kill_orphans(processes, check_only)
            reasons = self.blockers(gpus, processes)
            unknown = [gpu["index"] for gpu in gpus if gpu["memory_used_mib"] is None]
            elapsed = round(deadline.elapsed(), 3)
            if processes:
                processes_gone_at = None
            elif processes_gone_at is None:
                processes_gone_at = elapsed
            result = {"gpus": gpus, "processes": processes, "source": self.reader.source, "free": not reasons,
                      "attempts": self.attempts, "elapsed": elapsed, "failed": False,
                      "orphans": self.orphans,
                      "memory_release_seconds": round(elapsed - processes_gone_at, 3)
                      if processes_gone_at is not None and not reasons else None}
            if unknown and not self.unknown_reported:
                self.unknown_reported = True
                self.warnings.append("GPU %s does not report memory use; only its process list was checked"
                                     % _index_list(unknown))
            if not reasons:
                result["msg"] = "GPU %s free after %.1f s" % (_index_list([gpu["index"] for gpu in gpus]),
                                                              result["elapsed"])
                killed = [orphan for orphan in self.orphans if orphan["killed"]]
                if killed:
                    result["msg"] += ", once the orphans were killed: " + "; ".join(describe_holders(killed, "held"))
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


def describe_holders(processes, verb="holds"):
    """One phrase per PID: its command line (or name), its systemd unit and where it holds memory."""
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
        command = first.get("command") or first["name"] or "unknown process"
        phrases.append("PID %d (%s, %s) %s GPU %s%s" % (pid, command, unit, verb, gpus, amount))
    return phrases


def _index_list(indices):
    return ",".join(str(index) for index in indices)
