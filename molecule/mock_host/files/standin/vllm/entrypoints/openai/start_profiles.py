"""Starts of real GPU nodes, for the stand-in engine to play at a smaller time scale.

A profile is a list of phases, in start order, each with its length on the real node (seconds) and what the node's
journal shows meanwhile:

- "lines": newline-ended lines at a steady pace (vLLM's weights load ends every shard's progress line with a newline,
  model_executor/model_loader/weight_utils.py's _BAR_FORMAT);
- "silent": a carriage-return bar only, which journald holds until its line ends, and the engine core's shared-memory
  wait line once a minute (distributed/device_communicators/shm_broadcast.py, VLLM_RINGBUFFER_WARNING_INTERVAL = 60 s)
  while its workers are busy: CUDA-graph capture, DeepGEMM warm-up, FlashInfer's JIT compiles and autotune.

Each phase ends with the line vLLM writes when it is done. The sources of each profile's figures are in
docs/waiting.md ("The mock node's start profiles"). A hang repeats the wait line for ever and nothing else, as
published all-reduce deadlocks show it.
"""

# The engine core's wait line, in vLLM's words.
SHM_WAIT = ("No available shared memory broadcast block found in 60 seconds. This typically happens when some processes "
            "are hanging or doing some time-consuming work (e.g. compilation, weight/kv cache quantization).")
SHM_WAIT_WHERE = "shm_broadcast.py:501"
SHM_WAIT_INTERVAL_S = 60.0

# name: [(phase, real seconds, kind, detail, (where, closing line)), ...]. kind "shards": detail newline-ended shard
# lines spread over the phase; "quiet": nothing until the closing line; "silent": a carriage-return bar labelled
# detail, and the wait line once a minute.
START_PROFILES = {
    # An eight-GPU PCIe start whose warm-up is long and silent. The phases up to the KV cache are those of a published
    # GLM-5.1 start with tensor-parallel 8 on eight RTX PRO 6000 Blackwell cards (engine at +17 s, weights 42.5 s,
    # torch.compile 40.6 s, KV cache sized at +148 s, the wait line during the compile); the warm-up and graph capture
    # after it last 20 minutes, between the published 3.5-minute silent FlashInfer JIT of a cold A800 start and a
    # 35-minute FlashInfer autotune on a DGX Spark. docs/waiting.md names the sources.
    "pcie_tp8_slow_warmup": [
        ("init", 15.0, "quiet", None, ("gpu_model_runner.py:3420", "Starting to load model /srv/models/model...")),
        ("weights", 42.5, "shards", 40, ("default_loader.py:267", "Loading weights took %(seconds).2f seconds")),
        ("compile", 40.6, "quiet", None, ("monitor.py:53", "torch.compile took %(seconds).2f s in total")),
        ("kv_cache", 29.0, "quiet", None, ("kv_cache_utils.py:1087", "GPU KV cache size: 341,504 tokens")),
        ("graphs", 1200.0, "silent", "Capturing CUDA graphs (mixed prefill-decode, PIECEWISE)",
         ("gpu_model_runner.py:4587", "Graph capturing finished in %(seconds)d secs, took 1.22 GiB")),
        ("warmup", 1.0, "quiet", None,
         ("core.py:210", "init engine (profile, create kv cache, warmup model) took %(since_weights).2f seconds")),
    ],
}

# Where a profile's weights phase ends: a hang after the weights stops there.
WEIGHTS_PHASE = "weights"


def scaled(seconds, time_scale):
    """Real seconds at the mock's scale: time_scale real seconds are one second on the mock."""
    return float(seconds) / float(time_scale)
