"""What the engine plugins (vllm.py, sglang.py) share: the switch each reads from its environment
variable, and one tensor-parallel group's communicator, made, logged once and recorded."""
import os


def switched_on(variable):
    """Whether the environment variable asks for symmar (1, true, on, yes)."""
    return os.environ.get(variable, "0").strip().lower() in ("1", "true", "on", "yes")


def group_communicator(cpu_group, device, name, engine, log, served):
    """A SymmarCommunicator for the engine's group `name` over its CPU group, or None where symmar
    declined (on some rank: creation is agreed over the group). One line per group through `log`
    says which path serves it and why; served[name] keeps it."""
    from . import SymmarCommunicator
    comm = SymmarCommunicator(cpu_group, device)
    if comm.disabled:
        line = "group %s: %s's own allreduce serves (symmar declined: %s)" % (name, engine, comm.disabled_reason)
        comm = None
    else:
        line = "group %s: symmar serves the allreduce where its plan takes the size (%s)" % (
            name, comm.comm.describe().split(";")[0])
    if name not in served:
        log.info("symmar: %s", line)
    served[name] = line
    return comm
