"""symmar.integrations.vllm, the vLLM general plugin, against a stand-in for vLLM's CPU
communicator (the class shape of vLLM 0.32's CpuCommunicator: __init__(cpu_group, device,
device_group, unique_name, ...) and an in-place all_reduce that returns its input) and its
environment registry, in modules made here: the test needs no vLLM. Two gloo ranks spawned as in
test_integrations.py; each collects its failures in a file.

What must hold: off unless SYMMAR_VLLM=1 (the class untouched), SYMMAR_VLLM always entered into the
compile cache key's variables, a tensor-parallel group served by symmar (the float64 reference's
sums, in place, and the plugin's record of it), other groups and tensors symmar declines left to
the engine's own all_reduce, the patched all_reduce traced by torch.compile(fullgraph=True), the
gathers and reduce-scatter along every dim served by symmar with vLLM's results, and loading twice
patching once. And, against a stand-in CpuPlatform, that the fusion pass joins vLLM's CPU
compilation (inductor, one trace) unless SYMMAR_VLLM_FUSE=0 or the config names its own pass.
"""
import os
import sys
import types

import pytest

torch = pytest.importorskip("torch", reason="PyTorch is not installed (CI installs it in its cached venv)")
dist = pytest.importorskip("torch.distributed", reason="this PyTorch has no torch.distributed")
if not dist.is_available():
    pytest.skip("this PyTorch was built without torch.distributed", allow_module_level=True)

from plugin_checks import check_served_group, init_gloo, run_ranks, write_failures  # noqa: E402


def _install_fake_vllm():
    """vllm.envs and vllm.distributed.device_communicators.cpu_communicator, as far as the plugin
    reaches into them. The fake all_reduce counts its calls and sums through gloo."""
    names = ["vllm", "vllm.envs", "vllm.distributed", "vllm.distributed.device_communicators",
             "vllm.distributed.device_communicators.cpu_communicator"]
    mods = {n: types.ModuleType(n) for n in names}
    mods["vllm.envs"].environment_variables = {"VLLM_PLUGINS": lambda: os.environ.get("VLLM_PLUGINS")}

    class CpuCommunicator:
        own_calls = 0

        def __init__(self, cpu_group, device=None, device_group=None, unique_name="", use_all2all=False):
            self.cpu_group, self.device_group, self.unique_name = cpu_group, device_group, unique_name

        def all_reduce(self, input_):
            type(self).own_calls += 1
            dist.all_reduce(input_, group=self.device_group)
            return input_

        # The gathers as vLLM's CPU communicator defines them (signatures and results), counted in
        # own_gathers; through gloo's all_gather.
        own_gathers = 0

        def _gathered(self, input_, dim):
            type(self).own_gathers += 1
            parts = [torch.empty_like(input_) for _ in range(dist.get_world_size(self.device_group))]
            dist.all_gather(parts, input_.contiguous(), group=self.device_group)
            return parts

        def all_gather(self, input_, dim=-1):
            return torch.cat(self._gathered(input_, dim), dim=dim)

        def gather(self, input_, dst=0, dim=-1):
            out = torch.cat(self._gathered(input_, dim), dim=dim)
            return out if dist.get_rank(self.device_group) == dst else None

        def reduce_scatter(self, input_, dim=-1):
            total = torch.stack(self._gathered(input_, dim)).sum(0)
            n = dist.get_world_size(self.device_group)
            return total.chunk(n, dim=dim)[dist.get_rank(self.device_group)].contiguous()

    mods["vllm.distributed.device_communicators.cpu_communicator"].CpuCommunicator = CpuCommunicator
    sys.modules.update(mods)
    sys.modules.update(_fake_vllm_config())
    return CpuCommunicator, mods["vllm.envs"]


def _fake_vllm_config():
    """vllm.config.vllm as far as the plugin reaches into it: vLLM 0.32's optimization-level tables,
    which name enable_allreduce_rms_fusion as fuse_allreduce_rms's default (here it says on, as on a
    Hopper GPU with FlashInfer)."""
    config, module = types.ModuleType("vllm.config"), types.ModuleType("vllm.config.vllm")

    def enable_allreduce_rms_fusion(cfg):
        return cfg.parallel_config.tensor_parallel_size > 1

    module.enable_allreduce_rms_fusion = enable_allreduce_rms_fusion
    module.OPTIMIZATION_LEVEL_00 = {"compilation_config": {"pass_config": {"fuse_allreduce_rms": False}}}
    module.OPTIMIZATION_LEVEL_02 = {"compilation_config": {"pass_config": {
        "fuse_norm_quant": lambda cfg: True, "fuse_allreduce_rms": enable_allreduce_rms_fusion}}}
    module.OPTIMIZATION_LEVEL_TO_CONFIG = {0: module.OPTIMIZATION_LEVEL_00, 2: module.OPTIMIZATION_LEVEL_02}
    config.vllm = module
    return {"vllm.config": config, "vllm.config.vllm": module}


def _check_fusion_default(on):
    """fuse_allreduce_rms's default: off with the plugin on (FlashInfer's fused kernel would take
    the allreduces symmar serves), vLLM's own otherwise; the tables' other defaults untouched."""
    config = sys.modules["vllm.config.vllm"]
    cfg = types.SimpleNamespace(parallel_config=types.SimpleNamespace(tensor_parallel_size=2))
    passes = config.OPTIMIZATION_LEVEL_TO_CONFIG[2]["compilation_config"]["pass_config"]
    failures = []
    if passes["fuse_allreduce_rms"](cfg) is not (not on):
        failures.append("fuse_allreduce_rms defaults to %s with the plugin %s"
                        % (passes["fuse_allreduce_rms"](cfg), "on" if on else "off"))
    if passes["fuse_norm_quant"](cfg) is not True or config.OPTIMIZATION_LEVEL_00["compilation_config"][
            "pass_config"]["fuse_allreduce_rms"] is not False:
        failures.append("another default of the optimization-level tables changed")
    return failures


def _check_out_of_place(plugin, rank, nranks):
    """The CUDA communicator's wiring (all_reduce into a new tensor, the input left as it was),
    with a stand-in whose device is the CPU, since no GPU is needed to check it."""
    class OutOfPlace:
        own_calls = 0

        def __init__(self, cpu_group, device=None, device_group=None, unique_name="", use_all2all=False):
            self.cpu_group, self.unique_name, self.device = cpu_group, unique_name, torch.device("cpu")

        def all_reduce(self, input_):
            type(self).own_calls += 1
            out = input_.clone()
            dist.all_reduce(out, group=self.cpu_group)
            return out

    plugin._patch(OutOfPlace, in_place=False)
    comm = OutOfPlace(dist.group.WORLD, None, None, "tp:1")
    failures = []
    x = torch.full((1000,), float(rank + 1), dtype=torch.bfloat16)
    y = comm.all_reduce(x)
    if y is x or not torch.equal(y, torch.full((1000,), float(nranks * (nranks + 1) // 2), dtype=torch.bfloat16)):
        failures.append("out of place: not the sum in a new tensor")
    if not torch.equal(x, torch.full((1000,), float(rank + 1), dtype=torch.bfloat16)):
        failures.append("out of place: the input changed")
    if OutOfPlace.own_calls != 0:
        failures.append("out of place: the engine's own path ran")
    comm._symmar.close()
    return failures


def _check_gathers(tp, cls, plugin, rank, nranks):
    """The patched all_gather, gather and reduce_scatter along every dim: symmar serves them (the
    stand-in's own gathers not run), with the results vLLM's definitions give, worked out here from
    the inputs every rank makes; a float64 tensor goes to the stand-in."""
    failures = []
    default_min = plugin.gather_min_bytes
    plugin.gather_min_bytes = 0  # these tensors are small: symmar takes them all

    def made(r, dtype):  # rank r's input: [4, 6, 2], distinct small integers
        return (torch.arange(48, dtype=torch.float64).reshape(4, 6, 2) * (r + 1) + 100 * r).to(dtype)
    for dtype in (torch.float32, torch.bfloat16):
        mine, every = made(rank, dtype), [made(r, torch.float64) for r in range(nranks)]
        for dim in (0, 1, 2, -1):
            before, served = cls.own_gathers, plugin.calls["symmar_gather"]
            want = torch.cat(every, dim=dim)
            got = tp.all_gather(mine, dim)
            if got is None or not torch.equal(got.double(), want):
                failures.append("all_gather %s dim %d: not the ranks' inputs in order" % (dtype, dim))
            got = tp.gather(mine, 1, dim)
            if (got is None) != (rank != 1) or (got is not None and not torch.equal(got.double(), want)):
                failures.append("gather %s dim %d to rank 1: wrong on rank %d" % (dtype, dim, rank))
            total = sum(every)
            if total.shape[dim] % nranks == 0:
                got = tp.reduce_scatter(mine, dim)
                if not torch.equal(got.double(), total.chunk(nranks, dim=dim)[rank]):
                    failures.append("reduce_scatter %s dim %d: not this rank's block of the sum" % (dtype, dim))
            if cls.own_gathers != before or plugin.calls["symmar_gather"] <= served:
                failures.append("%s dim %d: the stand-in served a gather symmar takes" % (dtype, dim))
    before = cls.own_gathers
    got = tp.all_gather(torch.ones(3, dtype=torch.float64), 0)
    if not torch.equal(got, torch.ones(3 * nranks, dtype=torch.float64)):
        failures.append("a float64 all_gather: wrong result")
    if cls.own_gathers != before + 1:
        failures.append("a float64 all_gather did not go to the engine's own path")
    plugin.gather_min_bytes = 1024  # a 1 KiB tensor is taken, one element less is not
    for count, own in ((256, 0), (255, 1)):
        before = cls.own_gathers
        got = tp.all_gather(torch.full((1, count), float(rank)), -1)
        if not torch.equal(got, torch.cat([torch.full((1, count), float(r)) for r in range(nranks)], -1)):
            failures.append("all_gather of %d float32 under gather_min_bytes 1024: wrong result" % count)
        if cls.own_gathers != before + own:
            failures.append("all_gather of %d float32: %s path under gather_min_bytes 1024"
                            % (count, "symmar's" if own else "the engine's"))
    plugin.gather_min_bytes = default_min
    return failures


def _rank(rank, nranks, store, out_dir, on):
    failures = []
    try:
        if on:
            os.environ["SYMMAR_VLLM"] = "1"
        else:
            os.environ.pop("SYMMAR_VLLM", None)
        init_gloo(rank, nranks, store)
        cls, envs = _install_fake_vllm()
        original = cls.all_reduce
        from symmar.integrations import vllm as plugin
        plugin.register()
        plugin.register()  # vLLM may load plugins more than once in a process
        if "SYMMAR_VLLM" not in envs.environment_variables:
            failures.append("SYMMAR_VLLM is not among the compile cache key's variables")
        failures += _check_fusion_default(on)
        if not on:
            if cls.all_reduce is not original or getattr(cls, "_symmar_patched", False):
                failures.append("patched without SYMMAR_VLLM=1")
        else:
            group = dist.group.WORLD
            tp = cls(group, torch.device("cpu"), group, "tp:0")
            other = cls(group, torch.device("cpu"), group, "world")
            if getattr(other, "_symmar", None) is not None:
                failures.append("a group other than tensor-parallel got symmar")
            if "tp:0" not in plugin.served or "symmar serves" not in plugin.served["tp:0"]:
                failures.append("no record that symmar serves tp:0: %r" % plugin.served)
            failures += ["tp:0 " + f for f in check_served_group(tp, cls, rank, nranks, (torch.float32, torch.bfloat16))]
            failures += _check_gathers(tp, cls, plugin, rank, nranks)
            failures += _check_out_of_place(plugin, rank, nranks)
            tp._symmar.close()
    except Exception as e:  # noqa: BLE001  recorded, so that the peers are not left waiting silently
        failures.append("rank %d raised %s: %s" % (rank, type(e).__name__, str(e).splitlines()[0][:300]))
    write_failures(out_dir, rank, failures)


@pytest.mark.parametrize("on", [False, True], ids=["off", "on"])
def test_vllm_plugin(on, tmp_path):
    failures = run_ranks(_rank, tmp_path, on)
    assert not failures, "\n".join(failures[:20])


def _fake_cpu_platform(monkeypatch, mode="DYNAMO_TRACE_ONCE", backend="inductor"):
    """vllm.platforms.cpu.CpuPlatform, as far as the plugin's fusion pass reaches into it: its
    check_and_update_config sets the compilation mode, backend and inductor options (vLLM 0.32 sets
    DYNAMO_TRACE_ONCE and inductor on CPUs)."""
    import enum

    class CompilationMode(enum.Enum):
        NONE = 0
        DYNAMO_TRACE_ONCE = 2
        VLLM_COMPILE = 3

    class CpuPlatform:
        @classmethod
        def check_and_update_config(cls, vllm_config):
            cc = vllm_config.compilation_config
            cc.mode, cc.backend = CompilationMode[mode], backend
            cc.inductor_compile_config.update({"dce": True})

    for name in ("vllm", "vllm.platforms", "vllm.platforms.cpu"):
        monkeypatch.setitem(sys.modules, name, types.ModuleType(name))
    sys.modules["vllm.platforms.cpu"].CpuPlatform = CpuPlatform
    return CpuPlatform


def _configured(platform, inductor=None):
    cc = types.SimpleNamespace(mode=None, backend=None, inductor_compile_config=dict(inductor or {}))
    platform.check_and_update_config(types.SimpleNamespace(compilation_config=cc))
    return cc.inductor_compile_config


@pytest.mark.parametrize("case", ["default", "twice", "own pass", "fuse off", "not inductor", "vllm compile"])
def test_fusion_pass_joins_vllm_cpu_compilation(case, monkeypatch):
    from symmar.integrations import vllm as plugin
    from symmar.integrations.fusion import AddRmsNormFusion
    monkeypatch.setenv("SYMMAR_VLLM_FUSE", "0" if case == "fuse off" else "1")
    mode = "VLLM_COMPILE" if case == "vllm compile" else "DYNAMO_TRACE_ONCE"
    platform = _fake_cpu_platform(monkeypatch, mode, "eager" if case == "not inductor" else "inductor")
    plugin._fusion_pass_in_cpu_compile()
    if case == "twice":
        wrapped = platform.check_and_update_config.__func__
        plugin._fusion_pass_in_cpu_compile()
        assert platform.check_and_update_config.__func__ is wrapped, "wrapped twice"
    own = object()
    got = _configured(platform, {"post_grad_custom_post_pass": own} if case == "own pass" else None)
    assert got["dce"] is True, "vLLM's own settings kept"
    fused = got.get("post_grad_custom_post_pass")
    if case in ("default", "twice"):
        assert isinstance(fused, AddRmsNormFusion)
    elif case == "own pass":
        assert fused is own, "the compilation config's own pass is kept"
    else:
        assert fused is None, "no pass where vLLM does not compile with inductor once, or the user said 0"
