"""The vLLM plugin in the engine: vllm_tp2.py in vLLM's default compiled mode (float32, where a
random model's near-ties in bfloat16 can tip a greedy choice on the compiled graph's own fusions)
with SYMMAR_VLLM=0 and =1, each from a fresh compile cache; and in eager mode (bfloat16) with the
plugin on, the prompts run on vLLM's own path and then on symmar's in one engine (--ab: one engine
start fewer). The greedy ids must be equal on both paths, the plugin must have served the
tensor-parallel group on both workers, and in eager mode symmar must have run every allreduce the
workers made after the switch (vLLM's own path none), and vLLM's path every one before it; in both
modes symmar must have served the all_gathers (the logits', along the last dim; every one in eager
mode). In compiled mode, symmar's fusion pass must have rewritten every allreduce of the model into
the fused allreduce + residual add + RMSNorm on both workers (the embedding's, and two a layer:
each is followed by a norm layer), and in eager mode none. And, against vLLM's own optimization-level
tables, that the plugin turns the default of vLLM's fuse_allreduce_rms pass off.

    python check_vllm_plugin.py WORK_DIR
"""
import json
import os
import signal
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def run(work, mode, plugin):
    env = dict(os.environ, SYMMAR_VLLM=plugin, VLLM_CACHE_ROOT=os.path.join(work, "cache-" + mode + plugin))
    cmd = [sys.executable, os.path.join(HERE, "vllm_tp2.py"), os.path.join(work, "model")]
    cmd += ["--eager", "--dtype", "bfloat16", "--ab"] if mode == "eager" else ["--dtype", "float32"]
    # Into a file, not a pipe: vLLM's worker processes inherit the output and may outlive the
    # script's own exit by a moment, and a pipe would be waited on until they let go of it.
    log = os.path.join(work, "%s-%s.log" % (mode, plugin))
    # In a session of its own: the script ends with os._exit, and vLLM's worker processes it leaves
    # behind (about 1.7 GB each) are killed with the session's process group.
    with open(log, "w") as out:
        proc = subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            code = proc.wait(timeout=900)
        finally:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    with open(log) as f:
        text = f.read()
    lines = [line for line in text.splitlines() if line.startswith('{"tokens"')]
    if code != 0 or not lines:
        print(text[-6000:])
        raise SystemExit("%s, SYMMAR_VLLM=%s: vLLM failed (exit %d)" % (mode, plugin, code))
    return json.loads(lines[-1])


def fusion_default_check():
    """In a process of its own, with vLLM's real optimization-level tables: with the plugin on,
    every default of fuse_allreduce_rms that was vLLM's function is the plugin's, which says off."""
    code = (
        "import types, vllm.config.vllm as c\n"
        "from symmar.integrations import vllm as p\n"
        "before = c.enable_allreduce_rms_fusion\n"
        "p.register()\n"
        "cfg = types.SimpleNamespace(parallel_config=types.SimpleNamespace(tensor_parallel_size=2))\n"
        "found = [t['compilation_config']['pass_config']['fuse_allreduce_rms'] for t in "
        "c.OPTIMIZATION_LEVEL_TO_CONFIG.values()]\n"
        "named = [f for f in found if callable(f)]\n"
        "assert named and all(getattr(f, '_symmar_off', False) and f(cfg) is False for f in named), found\n"
        "assert before not in found\n"
        "print('fuse_allreduce_rms defaults with the plugin on:', [f if not callable(f) else 'off' for f in found])\n")
    env = dict(os.environ, SYMMAR_VLLM="1")
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    print(done.stdout.strip())
    if done.returncode != 0:
        return ["fuse_allreduce_rms default with the plugin on: %s" % done.stderr.strip()[-2000:]]
    return []


def main():
    work = sys.argv[1]
    failures = fusion_default_check()
    for mode in ("eager", "compiled"):
        if mode == "eager":
            on = run(work, mode, "1")
            off = {"tokens": on["tokens_off"]}
        else:
            off, on = run(work, mode, "0"), run(work, mode, "1")
        print("%s: off %s\n%s: on  %s" % (mode, off["tokens"], mode, on["tokens"]))
        if off["tokens"] != on["tokens"]:
            failures.append("%s: greedy ids differ with the plugin on" % mode)
        records = on.get("plugin", [])
        print("%s: plugin %s" % (mode, json.dumps(records)))
        if len(records) != 2 or any("symmar serves" not in r["served"].get("tp:0", "") for r in records):
            failures.append("%s: the plugin did not serve tp:0 on both workers" % mode)
        if mode == "eager" and any(r["calls"]["symmar"] == 0 or r["calls"]["vllm"] != 0 for r in records):
            failures.append("eager: symmar did not serve every allreduce: %s" % [r["calls"] for r in records])
        if mode == "eager" and any(c["vllm"] == 0 or c["symmar"] != 0 or c["symmar_gather"] != 0
                                   for c in on["calls_off"]):
            failures.append("eager: vLLM's own path did not serve the first run: %s" % on["calls_off"])
        # The model's allreduces: the embedding's, then the attention's and the MLP's of each layer.
        want_fused = 1 + 2 * 4 if mode == "compiled" else 0
        if any(r.get("fused") != want_fused for r in records):
            failures.append("%s: the fusion pass rewrote %s allreduce + RMSNorm chains, not %d on each worker"
                            % (mode, [r.get("fused") for r in records], want_fused))
        # The logits' all_gather (along the last dim) runs in Python in both modes; with every size
        # taken after the engine's start (vllm_tp2.py's gather_everything), every one of the
        # eager run's, and the compiled run's after its warm-up.
        if any(r["calls"]["symmar_gather"] == 0 or (mode == "eager" and r["calls"]["vllm_gather"] != 0)
               for r in records):
            failures.append("%s: symmar did not serve the gathers: %s" % (mode, [r["calls"] for r in records]))
    if failures:
        raise SystemExit("\n".join(failures))
    print("vLLM plugin: greedy ids equal with and without symmar, eager and compiled")


if __name__ == "__main__":
    main()
