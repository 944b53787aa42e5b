"""SGLang general plugin: its tensor-parallel allreduce through symmar, with no edit to SGLang.
Installed with the wheel as the `sglang.srt.plugins` entry point `symmar`; SGLang's
`load_plugins()` runs it in every process (SGLANG_PLUGINS may name the plugins to load). Off unless
SYMMAR_SGLANG=1:

    pip install symmar && SYMMAR_SGLANG=1 python -m sglang.launch_server ... --tp 2

When on, it registers two AROUND hooks with SGLang's hook registry:
- `GroupCoordinator.__init__`: a tensor-parallel group (its unique name starts with "tp") gets a
  SymmarCommunicator over the group's CPU (gloo) group, for the group's device (the host backend
  for CPU inference, the GPU kernels for a CUDA device). Creation is agreed over the group, so all
  ranks of a group take symmar or none does; one line per group says which path serves it and why,
  through the `sglang.symmar` logger.
- `GroupCoordinator.all_reduce`: where the communicator's plan takes the tensor (a decision from
  values read at creation, the same on every rank), symmar reduces it in place through
  torch.ops.symmar.all_reduce_sum_ and the tensor is returned, as SGLang's in-place paths return it;
  everything else goes to SGLang's own path (its shared-memory kernel on CPUs, custom allreduce,
  symmetric memory or NCCL on GPUs).
"""
import logging

from ._plugin import group_communicator, switched_on

_log = logging.getLogger("sglang.symmar")
_ENV = "SYMMAR_SGLANG"
_COORDINATOR = "sglang.srt.distributed.parallel_state.GroupCoordinator"

# What the plugin did in this process, for tests and for users asking why: group unique name ->
# the line it logged; and the allreduce calls of hooked coordinators by who served them.
served = {}
calls = {"symmar": 0, "sglang": 0}


def enabled():
    """Whether SYMMAR_SGLANG asks for symmar (1, true, on, yes)."""
    return switched_on(_ENV)


def register():
    """The entry point SGLang's load_plugins() calls in every process, before it applies the hooks
    plugins registered."""
    if not enabled():
        return
    try:
        from sglang.srt.plugins.hook_registry import HookRegistry, HookType
    except ImportError as e:  # an SGLang without the hook registry: nothing to hook into
        _log.warning("symmar: SYMMAR_SGLANG=1 but SGLang's hook registry does not import (%s): "
                     "SGLang's own allreduce serves", e)
        return
    HookRegistry.register(_COORDINATOR + ".__init__", coordinator_init, HookType.AROUND)
    HookRegistry.register(_COORDINATOR + ".all_reduce", coordinator_all_reduce, HookType.AROUND)


def coordinator_init(original, self, *args, **kwargs):
    """GroupCoordinator.__init__, then a SymmarCommunicator for a tensor-parallel group."""
    original(self, *args, **kwargs)
    self._symmar = _communicator_for(self)
    self._symmar_take = None if self._symmar is None else self._symmar.try_all_reduce_


def coordinator_all_reduce(original, self, input_):
    """GroupCoordinator.all_reduce: symmar where its plan takes the tensor, else SGLang's path."""
    take = getattr(self, "_symmar_take", None)
    out = None if take is None else take(input_)
    if out is not None:
        calls["symmar"] += 1
        return out
    calls["sglang"] += 1
    return original(self, input_)


def _communicator_for(coordinator):
    """A SymmarCommunicator for a tensor-parallel coordinator, or None (another group, a world of
    one, or declined on some rank)."""
    name = str(getattr(coordinator, "unique_name", ""))
    if not name.startswith("tp") or getattr(coordinator, "world_size", 1) < 2:
        return None
    return group_communicator(coordinator.cpu_group, getattr(coordinator, "device", "cpu"), name, "SGLang", _log, served)
