"""symmar.integrations.sglang, the SGLang general plugin, against stand-ins for SGLang's hook
registry (register(target, hook, HookType.AROUND), applied as SGLang's apply_hooks applies an
AROUND hook: the method replaced by a function calling hook(original, *args)) and for its
GroupCoordinator (unique_name, world_size, device, cpu_group, an in-place all_reduce that returns
its input), in modules made here: the test needs no SGLang (tests/engines/ runs SGLang's own
classes where it is installed). Two gloo ranks spawned as in test_vllm_plugin.py.

What must hold: off unless SYMMAR_SGLANG=1 (no hook registered), on: a tensor-parallel group
served by symmar (in place, the float64 reference's sums, the plugin's record), other groups and
declined tensors left to SGLang's own all_reduce, and the hooked all_reduce traced by
torch.compile(fullgraph=True).
"""
import functools
import os
import sys
import types

import pytest

torch = pytest.importorskip("torch", reason="PyTorch is not installed (CI installs it in its cached venv)")
dist = pytest.importorskip("torch.distributed", reason="this PyTorch has no torch.distributed")
if not dist.is_available():
    pytest.skip("this PyTorch was built without torch.distributed", allow_module_level=True)

from plugin_checks import check_served_group, init_gloo, run_ranks, write_failures  # noqa: E402

_TARGET = "sglang.srt.distributed.parallel_state.GroupCoordinator"


def _install_fake_sglang():
    """The hook registry and a GroupCoordinator; returns (registry, apply_hooks, the class)."""
    names = ["sglang", "sglang.srt", "sglang.srt.plugins", "sglang.srt.plugins.hook_registry",
             "sglang.srt.distributed", "sglang.srt.distributed.parallel_state"]
    mods = {n: types.ModuleType(n) for n in names}

    class HookType:
        AROUND = "around"

    class HookRegistry:
        hooks = []

        @classmethod
        def register(cls, target, hook, hook_type):
            cls.hooks.append((target, hook, hook_type))

    class GroupCoordinator:
        own_calls = 0

        def __init__(self, cpu_group, world_size, unique_name):
            self.cpu_group, self.world_size, self.unique_name = cpu_group, world_size, unique_name
            self.device = torch.device("cpu")

        def all_reduce(self, input_):
            type(self).own_calls += 1
            dist.all_reduce(input_, group=self.cpu_group)
            return input_

    def apply_hooks():
        for target, hook, hook_type in HookRegistry.hooks:
            assert hook_type == HookType.AROUND and target.startswith(_TARGET + ".")
            name = target.rsplit(".", 1)[1]
            original = getattr(GroupCoordinator, name)
            wrapper = functools.wraps(original)(lambda *a, _o=original, _h=hook, **k: _h(_o, *a, **k))
            setattr(GroupCoordinator, name, wrapper)

    mods["sglang.srt.plugins.hook_registry"].HookRegistry = HookRegistry
    mods["sglang.srt.plugins.hook_registry"].HookType = HookType
    mods["sglang.srt.distributed.parallel_state"].GroupCoordinator = GroupCoordinator
    sys.modules.update(mods)
    return HookRegistry, apply_hooks, GroupCoordinator


def _rank(rank, nranks, store, out_dir, on):
    failures = []
    try:
        os.environ["SYMMAR_SGLANG"] = "1" if on else "0"
        init_gloo(rank, nranks, store)
        registry, apply_hooks, cls = _install_fake_sglang()
        from symmar.integrations import sglang as plugin
        plugin.register()
        if not on:
            if registry.hooks:
                failures.append("hooks registered without SYMMAR_SGLANG=1: %r" % registry.hooks)
        else:
            if sorted(t for t, _, _ in registry.hooks) != [_TARGET + ".__init__", _TARGET + ".all_reduce"]:
                failures.append("unexpected hooks: %r" % registry.hooks)
            apply_hooks()
            group = dist.group.WORLD
            tp = cls(group, nranks, "tp:0")
            other = cls(group, nranks, "world:0")
            if getattr(other, "_symmar", None) is not None:
                failures.append("a group other than tensor-parallel got symmar")
            if "symmar serves" not in plugin.served.get("tp:0", ""):
                failures.append("no record that symmar serves tp:0: %r" % plugin.served)
            failures += ["tp:0 " + f for f in check_served_group(tp, cls, rank, nranks, (torch.float32, torch.bfloat16, torch.float16))]
            tp._symmar.close()
    except Exception as e:  # noqa: BLE001  recorded, so that the peers are not left waiting silently
        failures.append("rank %d raised %s: %s" % (rank, type(e).__name__, str(e).splitlines()[0][:300]))
    write_failures(out_dir, rank, failures)


@pytest.mark.parametrize("on", [False, True], ids=["off", "on"])
def test_sglang_plugin(on, tmp_path):
    failures = run_ranks(_rank, tmp_path, on)
    assert not failures, "\n".join(failures[:20])
