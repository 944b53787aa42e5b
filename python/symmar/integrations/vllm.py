"""vLLM general plugin: its tensor-parallel allreduce through symmar on CPU and CUDA workers, with
no edit to vLLM. Installed with the wheel as the `vllm.general_plugins` entry point `symmar`; vLLM loads it
in every process before it builds its process groups. Off unless SYMMAR_VLLM=1:

    pip install symmar && SYMMAR_VLLM=1 vllm serve ... --tensor-parallel-size 2

When on, each tensor-parallel group's CpuCommunicator (and, in a process that sees a GPU, its
CudaCommunicator) gets a SymmarCommunicator over the group's CPU (gloo) group for the group's
device; its all_reduce takes what symmar's plan takes (through torch.ops.symmar, so vLLM's
compiled graphs trace it: in place on CPUs, as vLLM's CPU allreduce is, into a new tensor on GPUs,
as vLLM's CUDA one is, ahead of vLLM's custom, FlashInfer and symmetric-memory allreduces); the CPU
communicator's all_gather, gather and reduce_scatter (along any dim: the logits' gather is along the
last) go through symmar where it takes them too (from gather_min_bytes a rank). Everything else,
and every other collective, stays on vLLM's own path. Creation is agreed over the group, so all
ranks of a group take symmar or none does. One line per group says which path serves it and why, through the
`vllm.symmar` logger, which vLLM's logging configuration shows.

vLLM's compile cache key hashes vLLM's own environment variables; the plugin adds SYMMAR_VLLM to
them, so a graph compiled with symmar is never reused without it, or the other way round. When on,
it also makes the default of vLLM's fuse_allreduce_rms pass off (FlashInfer's fused kernel would
otherwise take the allreduces followed by an RMSNorm on Hopper and Blackwell GPUs).

In vLLM's default compiled mode on CPUs (inductor, one trace), the plugin also gives inductor
symmar.integrations.fusion's pass (unless SYMMAR_VLLM_FUSE=0, or the compilation config names a
post-grad pass of its own): each allreduce symmar serves that is followed by the residual add and
RMSNorm of the next norm layer becomes one fused symmar call. The pass's uuid enters vLLM's and
inductor's compile-cache keys.
"""
import functools
import logging
import os

from . import SymmarCommunicator
from ._plugin import group_communicator, switched_on

_log = logging.getLogger("vllm.symmar")
_ENV = "SYMMAR_VLLM"
_FUSE_ENV = "SYMMAR_VLLM_FUSE"  # 0 keeps the allreduce and the norm apart in compiled graphs
# The communicators patched: module, class, and whether its all_reduce is in place (the CPU one
# reduces into its input and returns it; the CUDA one returns a new tensor and leaves its input).
_COMMUNICATORS = (("vllm.distributed.device_communicators.cpu_communicator", "CpuCommunicator", True),
                  ("vllm.distributed.device_communicators.cuda_communicator", "CudaCommunicator", False))

# What the plugin did in this process, for tests and for users asking why: group name -> the
# line it logged; and the allreduce calls of the patched communicators by who served them ("symmar",
# "vllm"), and their all_gather, gather and reduce_scatter calls ("symmar_gather", "vllm_gather"),
# as the methods count them when they run in Python (eager mode; what a compiled graph keeps of the
# count is torch.compile's business).
served = {}
calls = {"symmar": 0, "vllm": 0, "symmar_gather": 0, "vllm_gather": 0}
# The smallest gather or reduce-scatter (bytes of a rank's tensor) sent to symmar: every size.
# Through libsymmar_torch's compiled op, the logits' all_gather (along the last dim) took 0.52-0.74
# of vLLM's own shared-memory gather at 1-256 KiB a rank inside vLLM 0.32's CPU workers, 2 ranks,
# bf16 and float32 (docs/performance/engines-vllm.md, fourth run). A deployment that finds its own
# gather faster below some size can raise it; it must be the same on every rank (the decision reads
# the tensor's shape and dtype and this value).
gather_min_bytes = 0
# Whether the patched communicators take symmar's path (switch_path): on once SYMMAR_VLLM=1.
_taking = [True]


def enabled():
    """Whether SYMMAR_VLLM asks for symmar (1, true, on, yes)."""
    return switched_on(_ENV)


def register():
    """The entry point vLLM calls in every process. Always enters SYMMAR_VLLM into vLLM's compile
    cache key; patches the communicators only when enabled(): the CPU one, and the CUDA one where
    this process sees a GPU."""
    _enter_compile_key()
    if not enabled():
        return
    _default_allreduce_rms_fusion_off()
    _fusion_pass_in_cpu_compile()
    import importlib
    for module_name, cls_name, in_place in _COMMUNICATORS:
        if not in_place and not _cuda_available():
            continue
        try:
            module = importlib.import_module(module_name)
        except Exception as e:  # noqa: BLE001  a vLLM without that communicator: nothing to serve there
            _log.warning("symmar: SYMMAR_VLLM=1 but %s does not import (%s): vLLM's own allreduce serves",
                         module_name, e)
            continue
        _patch(getattr(module, cls_name), in_place)


def _cuda_available():
    try:
        import torch
        return torch.cuda.is_available()
    except Exception:  # noqa: BLE001  no torch, or a broken CUDA setup: no CUDA communicator to patch
        return False


def _enter_compile_key():
    try:
        import vllm.envs as envs
    except ImportError:
        return
    variables = getattr(envs, "environment_variables", None)
    if isinstance(variables, dict) and _ENV not in variables:
        variables[_ENV] = lambda: os.environ.get(_ENV, "0")


def _default_allreduce_rms_fusion_off():
    """vLLM's fuse_allreduce_rms compile pass (on by default for tensor parallelism on Hopper and
    Blackwell with FlashInfer) replaces an allreduce followed by an RMSNorm with FlashInfer's fused
    kernel, whatever communicator serves the plain allreduce: symmar would never see those calls.
    With the plugin on, that default becomes off; a user who sets fuse_allreduce_rms in the
    compilation config keeps their value (vLLM applies a default only to fields left unset). The
    default is the function vLLM's optimization-level tables name; it is replaced there, once."""
    try:
        import vllm.config.vllm as config
    except Exception:  # noqa: BLE001  a vLLM without these tables: nothing to turn off
        return
    original = getattr(config, "enable_allreduce_rms_fusion", None)
    if original is None or getattr(original, "_symmar_off", False):
        return

    @functools.wraps(original)
    def enable_allreduce_rms_fusion(cfg):
        if original(cfg):
            _log.info("symmar: vLLM's fuse_allreduce_rms pass is off by default with SYMMAR_VLLM=1, so that its "
                      "allreduces reach symmar (set it in the compilation config to keep it)")
        return False

    enable_allreduce_rms_fusion._symmar_off = True
    replaced = 0

    def replace(table):
        nonlocal replaced
        for key, value in table.items():
            if isinstance(value, dict):
                replace(value)
            elif value is original:
                table[key] = enable_allreduce_rms_fusion
                replaced += 1

    for name in dir(config):
        if name.startswith("OPTIMIZATION_LEVEL_") and isinstance(getattr(config, name), dict):
            replace(getattr(config, name))
    config.enable_allreduce_rms_fusion = enable_allreduce_rms_fusion
    if replaced == 0:
        _log.warning("symmar: vLLM's optimization-level tables do not name enable_allreduce_rms_fusion: its "
                     "fuse_allreduce_rms pass keeps vLLM's default (turn it off in the compilation config)")


def _fusion_pass_in_cpu_compile():
    """Gives vLLM's CPU compilation (inductor, one trace) symmar's allreduce + add + RMSNorm fusion
    pass: after vLLM's CpuPlatform has set its compilation config up, the pass is added as
    inductor's post-grad custom pass, where the config names none. Every worker receives the same
    config, so every rank compiles with the pass or none does."""
    if os.environ.get(_FUSE_ENV, "1").strip().lower() in ("0", "false", "off", "no"):
        return
    try:
        from vllm.platforms import cpu
        from .fusion import AddRmsNormFusion
    except Exception:  # noqa: BLE001  a vLLM without a CPU platform, or a torch without inductor
        return
    original = cpu.CpuPlatform.check_and_update_config
    if getattr(original, "_symmar_fusion", False):
        return

    def check_and_update_config(cls, vllm_config):
        original.__func__(cls, vllm_config)
        cc = vllm_config.compilation_config
        inductor = cc.inductor_compile_config
        key = "post_grad_custom_post_pass"
        if getattr(getattr(cc, "mode", None), "name", "") != "DYNAMO_TRACE_ONCE" or cc.backend != "inductor" \
                or isinstance(inductor.get(key), AddRmsNormFusion):
            return
        if key in inductor:
            _log.info("symmar: the compilation config names its own %s: allreduce + RMSNorm stay apart", key)
            return
        inductor[key] = AddRmsNormFusion()
        _log.info("symmar: compiled graphs fuse symmar's allreduce with the residual add and RMSNorm after it "
                  "(%s=0 keeps them apart)", _FUSE_ENV)

    check_and_update_config._symmar_fusion = True
    cpu.CpuPlatform.check_and_update_config = classmethod(check_and_update_config)


def _patch(cls, in_place):
    """Wraps cls.__init__ and cls.all_reduce once (plugins may load more than once a process)."""
    if getattr(cls, "_symmar_patched", False):
        return
    init, all_reduce = cls.__init__, cls.all_reduce

    @functools.wraps(init)
    def __init__(self, cpu_group, device=None, device_group=None, unique_name="", *args, **kwargs):
        init(self, cpu_group, device, device_group, unique_name, *args, **kwargs)
        # The CUDA communicator's base class resolved its device (this worker's GPU).
        self._symmar = _communicator_for(cpu_group, unique_name, "cpu" if in_place else self.device)
        comm = self._symmar
        self._symmar_take = None if comm is None else comm.try_all_reduce_ if in_place else comm.try_all_reduce

    @functools.wraps(all_reduce)
    def patched_all_reduce(self, input_):
        # One call where symmar takes the tensor: every lookup here is paid on each allreduce.
        take = getattr(self, "_symmar_take", None)
        if take is not None and _taking[0]:
            out = take(input_)
            if out is not None:
                calls["symmar"] += 1
                return out
        calls["vllm"] += 1
        return all_reduce(self, input_)

    cls.__init__ = __init__
    cls.all_reduce = patched_all_reduce
    if in_place:
        _patch_gathers(cls)
    cls._symmar_patched = True


def _patch_gathers(cls):
    """Wraps the CPU communicator's all_gather(input_, dim), gather(input_, dst, dim) and
    reduce_scatter(input_, dim): symmar where it takes the tensor (the same answer on every rank),
    vLLM's own path otherwise."""
    all_gather, gather, reduce_scatter = cls.all_gather, cls.gather, cls.reduce_scatter

    def taken(self, takes, input_, dim):
        comm = getattr(self, "_symmar", None)
        if (comm is not None and _taking[0] and takes(comm, input_, dim)
                and input_.numel() * input_.element_size() >= gather_min_bytes):
            _count("symmar_gather")
            return comm
        _count("vllm_gather")
        return None

    @functools.wraps(all_gather)
    def patched_all_gather(self, input_, dim=-1):
        comm = taken(self, SymmarCommunicator.takes_all_gather, input_, dim)
        return comm.all_gather(input_, dim=dim) if comm is not None else all_gather(self, input_, dim)

    @functools.wraps(gather)
    def patched_gather(self, input_, dst=0, dim=-1):
        comm = taken(self, SymmarCommunicator.takes_all_gather, input_, dim)
        return comm.gather(input_, dst, dim) if comm is not None else gather(self, input_, dst, dim)

    @functools.wraps(reduce_scatter)
    def patched_reduce_scatter(self, input_, dim=-1):
        comm = taken(self, SymmarCommunicator.takes_reduce_scatter, input_, dim)
        return comm.reduce_scatter(input_, dim=dim) if comm is not None else reduce_scatter(self, input_, dim)

    cls.all_gather = patched_all_gather
    cls.gather = patched_gather
    cls.reduce_scatter = patched_reduce_scatter


def switch_path(take_symmar):
    """Sends this process's patched allreduces to symmar (True) or to vLLM's own path (False), for
    an A/B comparison in one engine (benchmarks/engines/). Every rank of a group must switch
    together, with no request in flight: call it on every worker through vLLM's collective_rpc
    between generate() calls. Returns the previous setting."""
    previous = _taking[0]
    _taking[0] = bool(take_symmar)
    return previous


def _count(who):
    calls[who] += 1


def _communicator_for(cpu_group, unique_name, device):
    """A SymmarCommunicator for a tensor-parallel group, or None (another group, or declined)."""
    if not str(unique_name).startswith("tp"):
        return None
    return group_communicator(cpu_group, device, unique_name, "vLLM", _log, served)
