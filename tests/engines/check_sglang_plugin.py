"""SGLang's own GroupCoordinator with symmar's plugin, on CPU ranks: two processes over gloo, the
plugin loaded through SGLang's load_plugins() from its entry point (a dist-info the caller puts on
PYTHONPATH), SYMMAR_SGLANG on and off. For each setting every rank builds a "tp" coordinator and
allreduces float32, bfloat16 and float16 tensors of 1 to 1 Mi elements, checked against the sum
computed here in float64 (inputs are small integers, so every dtype's sum is exact); with the
plugin on, its record must show symmar serving every one of those calls and its group line. Exits
0 when all of that holds, 1 with the reason otherwise.

    python check_sglang_plugin.py WORKDIR
"""
import os
import sys
import traceback


def rank_main(rank, world, store, enable, result_file):
    os.environ["SYMMAR_SGLANG"] = "1" if enable else "0"
    os.environ.setdefault("SGLANG_PLUGINS", "symmar")
    import torch
    import torch.distributed as dist
    dist.init_process_group("gloo", init_method="file://" + store, rank=rank, world_size=world)
    torch.set_num_threads(1)
    from sglang.srt.plugins import load_plugins
    load_plugins()
    from sglang.srt.distributed import parallel_state as ps
    coordinator = ps.GroupCoordinator([list(range(world))], rank, "gloo", use_pynccl=False, use_mscclpp=False,
                                      use_custom_allreduce=False, use_torch_symm_mem_all_reduce=False,
                                      use_hpu_communicator=False, use_xpu_communicator=False, group_name="tp")
    import symmar.integrations.sglang as plugin
    problems = []
    calls = 0
    for dtype in (torch.float32, torch.bfloat16, torch.float16):
        for count in (1, 7, 4096, 65536, 1 << 20):
            ranks = [torch.arange(count, dtype=torch.float64).remainder(13 + r) - 6 for r in range(world)]
            want = sum(ranks)
            got = coordinator.all_reduce(ranks[rank].to(dtype))
            calls += 1
            if not torch.equal(got.to(torch.float64), want):
                problems.append("%s x %d: wrong sum" % (dtype, count))
    if enable:
        if plugin.calls["symmar"] != calls:
            problems.append("symmar served %d of %d allreduces" % (plugin.calls["symmar"], calls))
        if not any(line.startswith("group tp") and "symmar serves" in line for line in plugin.served.values()):
            problems.append("no group line says symmar serves: %s" % plugin.served)
    elif plugin.calls["symmar"] != 0 or plugin.served:
        problems.append("off, yet the plugin acted: %s %s" % (plugin.calls, plugin.served))
    with open(result_file, "w") as f:
        f.write("\n".join(problems) if problems else "ok")
    dist.barrier()
    dist.destroy_process_group()


def run(rank, world, store, enable, result_file):
    try:
        rank_main(rank, world, store, enable, result_file)
    except Exception:  # noqa: BLE001  the traceback is the result
        with open(result_file, "w") as f:
            f.write(traceback.format_exc())


def main():
    work = sys.argv[1]
    import torch.multiprocessing as mp
    failed = False
    for enable in (True, False):
        store = os.path.join(work, "store-%d" % enable)
        results = [os.path.join(work, "result-%d-%d" % (enable, r)) for r in range(2)]
        procs = [mp.get_context("spawn").Process(target=run, args=(r, 2, store, enable, results[r])) for r in range(2)]
        for p in procs:
            p.start()
        for p in procs:
            p.join(600)
        for r, path in enumerate(results):
            text = open(path).read() if os.path.exists(path) else "no result (exit code %s)" % procs[r].exitcode
            print("SYMMAR_SGLANG=%d rank %d: %s" % (enable, r, text))
            failed |= text != "ok"
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
