"""A post-grad graph pass for torch.compile's inductor backend: an allreduce through symmar followed
by a residual add and an RMSNorm, as a tensor-parallel decoder block ends in eager code (vLLM's
native rms_norm and fused_add_rms_norm), becomes one fused call (torch.ops.symmar.all_reduce_add_rms_norm_
in place where there is a residual, all_reduce_add_rms_norm where there is none):

    torch.compile(fn, options={"post_grad_custom_post_pass": AddRmsNormFusion()})

What it matches, on float32, float16 and bfloat16 tensors (a 16-bit input is taken to float32 for
the add and the statistics, and the normalised row back to its dtype before the weight, as the
engines' native code does):

    r = allreduce_sum(x) [+ residual]                # torch.ops.symmar.all_reduce_, all_reduce_sum_,
                                                     # all_reduce or all_reduce_sum
    y = (r * rsqrt(mean(r ** 2, -1, keepdim) + eps)) [to dtype] * weight

The fused call returns r rounded to the dtype (residual_out) and y. Every use of r in the dtype
(the next block's residual) takes residual_out; a chain whose float32 sum is used elsewhere is left
alone. In 16-bit dtypes the fused call takes the row statistics over r as rounded to the dtype
(symmarAllReduceAddRmsNorm's contract) where the native code takes them over the float32 sum: the
norm can differ by one rounding of the dtype.

Every rank compiles the same graph, so every rank rewrites the same allreduces: the fused call and
the plain one it replaces are collectives of the same comm at the same point of the program. The
pass matches torch's first form of functionalised in-place ops (inductor's
enable_auto_functionalized_v2 off, as vLLM sets it); graphs in the second form keep their plain
allreduces.
"""
import contextlib
import hashlib
import operator

import torch
from torch._inductor.custom_graph_pass import CustomGraphPass

from .. import ops as _ops  # noqa: F401  registers torch.ops.symmar

_aten = torch.ops.aten
_ALL_REDUCE_ = torch.ops.symmar.all_reduce_.default
_ALL_REDUCE_SUM_ = torch.ops.symmar.all_reduce_sum_.default
_ALL_REDUCE = torch.ops.symmar.all_reduce.default
_ALL_REDUCE_SUM = torch.ops.symmar.all_reduce_sum.default
_FUSED = torch.ops.symmar.all_reduce_add_rms_norm.default
_FUSED_IN_PLACE = torch.ops.symmar.all_reduce_add_rms_norm_.default
_CONVERT = torch.ops.prims.convert_element_type.default
_DTYPES = (torch.float32, torch.float16, torch.bfloat16)

# The chains this process's passes rewrote (for tests and for a plugin's record).
fused_calls = [0]


def _val(node):
    v = node.meta.get("val") if isinstance(node, torch.fx.Node) else None
    return v if isinstance(v, torch.Tensor) else None


def _is(node, target):
    return isinstance(node, torch.fx.Node) and node.op == "call_function" and node.target == target


def _op_arg(node, index, name, default):
    return node.kwargs.get(name, node.args[index] if len(node.args) > index else default)


def _reduced(node):
    """(x, comm, result): node is a sum allreduce through symmar of x whose value is result; or None."""
    if (_is(node, torch.ops.higher_order.auto_functionalized) and node.args and
            node.args[0] in (_ALL_REDUCE_, _ALL_REDUCE_SUM_)):
        x, comm, op = node.kwargs.get("x"), node.kwargs.get("comm"), node.kwargs.get("op", "sum")
        users = list(node.users)
        if len(users) != 1 or not _is(users[0], operator.getitem) or users[0].args[1] != 1:
            return None
        result = users[0]
    elif _is(node, _ALL_REDUCE) or _is(node, _ALL_REDUCE_SUM):
        x, comm, op, result = node.args[0], _op_arg(node, 1, "comm", None), _op_arg(node, 2, "op", "sum"), node
    else:
        return None
    if op != "sum" or not isinstance(comm, int) or isinstance(comm, bool) or not isinstance(x, torch.fx.Node):
        return None
    return x, comm, result


def _to_f32_users(node):
    """The nodes holding node's value in float32: node itself (float32), or its casts to float32."""
    if _val(node).dtype == torch.float32:
        return [node]
    return [u for u in node.users if _is(u, _CONVERT) and u.args[1] == torch.float32]


def _in_dtype(node, dtype):
    """node's source when node is a cast of a dtype tensor to float32 (or node itself in float32)."""
    if dtype == torch.float32:
        return node
    return node.args[0] if _is(node, _CONVERT) and _val(node.args[0]) is not None \
        and _val(node.args[0]).dtype == dtype else None


def _other(node, target, one):
    """The other operand of a binary call_function node `target` that has `one` as an operand."""
    if not _is(node, target) or len(node.args) != 2 or node.kwargs:
        return None
    a, b = node.args
    return b if a is one else a if b is one else None


def _sole_user(node):
    users = list(node.users)
    return users[0] if len(users) == 1 else None


def _norm_chain(s, dtype, hidden):
    """From s (the float32 sum of a row): (nodes, weight, eps, end) where the chain pow, mean, add
    eps, rsqrt, mul, [cast], mul weight, [cast] starts at s; nodes are the chain's own, in order."""
    pows = [u for u in s.users if _is(u, _aten.pow.Tensor_Scalar) and u.args[0] is s and u.args[1] == 2]
    if len(pows) != 1:
        return None
    p = pows[0]
    m = _sole_user(p)
    if not _is(m, _aten.mean.dim) or m.args[0] is not p or not _last_dim(m, len(_val(s).shape)):
        return None
    e = _sole_user(m)
    eps = _other(e, _aten.add.Tensor, m) if e is not None else None
    if isinstance(eps, bool) or not isinstance(eps, (int, float)) or not 0 <= eps < float("inf"):
        return None
    q = _sole_user(e)
    if not _is(q, _aten.rsqrt.default):
        return None
    y = _sole_user(q)
    if y is None or _other(y, _aten.mul.Tensor, q) is not s:
        return None
    nodes, last = [p, m, e, q, y], y
    if dtype != torch.float32:
        c = _sole_user(y)
        if not (_is(c, _CONVERT) and c.args[1] == dtype):
            return None
        nodes.append(c)
        last = c
    w_mul = _sole_user(last)
    weight = _other(w_mul, _aten.mul.Tensor, last) if w_mul is not None else None
    wv = _val(weight)
    if wv is None or wv.dtype != dtype or tuple(wv.shape) != (hidden,) or _val(w_mul).dtype != dtype:
        return None
    nodes.append(w_mul)
    end = w_mul
    tail = _sole_user(w_mul)
    if _is(tail, _CONVERT) and tail.args[1] == dtype:  # a cast to the dtype it already has
        nodes.append(tail)
        end = tail
    return nodes, weight, float(eps), end


def _last_dim(mean, ndim):
    dims = mean.args[1] if len(mean.args) > 1 else None
    keep = mean.args[2] if len(mean.args) > 2 else mean.kwargs.get("keepdim", False)
    return keep is True and isinstance(dims, (list, tuple)) and len(dims) == 1 and dims[0] in (-1, ndim - 1) \
        and not set(mean.kwargs) - {"keepdim"}


class _Match:
    """One chain to rewrite: the fused call's operands; the nodes whose value is residual_out; the
    chain's end (norm_out); the nodes that go with the chain, in graph order; and the residual's
    float32 cast, erased too where nothing else uses it."""

    def __init__(self, x, comm, residual, weight, eps, as_residual, end, removed, residual_cast=None):
        self.x, self.comm, self.residual, self.weight, self.eps = x, comm, residual, weight, eps
        self.as_residual, self.end, self.removed, self.residual_cast = as_residual, end, removed, residual_cast


def _match(node, order):
    found = _reduced(node)
    if found is None:
        return None
    x, comm, a = found
    av = _val(a)
    if av is None or av.dtype not in _DTYPES or av.dim() < 1 or not isinstance(av.shape[-1], int) \
            or av.shape[-1] < 1:
        return None
    dtype, hidden = av.dtype, av.shape[-1]
    head = [node] if a is node else [node, a]
    for s in _to_f32_users(a):
        cast = [s] if s is not a else []
        # With a residual: s + residual (the residual defined before the allreduce, in the same
        # dtype and shape), the sum's other uses its casts to the dtype.
        for u in list(s.users):
            other = _other(u, _aten.add.Tensor, s)
            residual = _in_dtype(other, dtype) if isinstance(other, torch.fx.Node) else None
            rv = _val(residual)
            if rv is None or rv.dtype != dtype or tuple(rv.shape) != tuple(av.shape) or order[residual] > order[node]:
                continue
            chain = _norm_chain(u, dtype, hidden)
            if chain is None:
                continue
            nodes, weight, eps, end = chain
            rest = [v for v in u.users if v not in nodes]
            if dtype == torch.float32:
                as_residual, rest = [u], []
            elif all(_is(v, _CONVERT) and v.args[1] == dtype for v in rest):
                as_residual = rest
            else:
                continue
            return _Match(x, comm, residual, weight, eps, as_residual, end, head + cast + [u] + nodes + rest,
                          other if other is not residual else None)
        # Without a residual: the allreduce's own sum is the row the norm takes.
        chain = _norm_chain(s, dtype, hidden)
        if chain is not None:
            nodes, weight, eps, end = chain
            return _Match(x, comm, None, weight, eps, [a], end, head + cast + nodes)
    return None


def _closed(match):
    """Whether every use of the nodes the rewrite removes is itself removed or redirected (the
    residual_out nodes and the chain's end): otherwise the plain allreduce would still be needed."""
    removed = set(match.removed)
    redirected = set(match.as_residual) | {match.end}
    return all(n in redirected or all(u in removed for u in n.users) for n in match.removed)


def _in_place(match):
    """Whether the chain takes the in-place op: a residual, and x and residual dense and apart."""
    if match.residual is None or match.residual is match.x:
        return False
    xv, rv = _val(match.x), _val(match.residual)
    return xv.is_contiguous() and rv.is_contiguous()


def _rewrite(graph, node, match):
    xv = _val(match.x)
    with getattr(xv, "fake_mode", None) or contextlib.nullcontext():
        dense = torch.empty_like(xv, memory_format=torch.contiguous_format)
        res_val, norm_val = dense, torch.empty_like(dense)
    with graph.inserting_before(node):
        if _in_place(match):
            # The in-place op, functionalised as the graph holds in-place ops: inductor's reinplacing
            # then runs it on x and residual themselves where nothing later reads their old values
            # (and on copies where something does), so no output is allocated.
            fused = graph.call_function(
                torch.ops.higher_order.auto_functionalized, (_FUSED_IN_PLACE,),
                {"x": match.x, "residual": match.residual, "gamma": match.weight, "comm": match.comm, "eps": match.eps})
            fused.meta["val"] = (None, norm_val, res_val)
            norm_out = graph.call_function(operator.getitem, (fused, 1))
            residual_out = graph.call_function(operator.getitem, (fused, 2))
        else:
            fused = graph.call_function(_FUSED, (match.x, match.weight, match.residual, match.comm, match.eps))
            fused.meta["val"] = (res_val, norm_val)
            residual_out = graph.call_function(operator.getitem, (fused, 0))
            norm_out = graph.call_function(operator.getitem, (fused, 1))
    residual_out.meta["val"], norm_out.meta["val"] = res_val, norm_val
    for n in match.as_residual:
        n.replace_all_uses_with(residual_out)
    match.end.replace_all_uses_with(norm_out)
    for n in reversed(match.removed):
        graph.erase_node(n)
    if match.residual_cast is not None and not match.residual_cast.users:
        graph.erase_node(match.residual_cast)


def fuse(graph):
    """Rewrites every matching chain of graph in place; returns how many."""
    fused = 0
    order = {n: i for i, n in enumerate(graph.nodes)}
    for node in list(graph.nodes):
        if node not in order:
            continue  # erased by an earlier rewrite
        match = _match(node, order)
        if match is None or _val(match.weight) is None or order[match.weight] > order[node] or not _closed(match):
            continue
        _rewrite(graph, node, match)
        fused += 1
        order = {n: i for i, n in enumerate(graph.nodes)}
    graph.lint()
    fused_calls[0] += fused
    return fused


class AddRmsNormFusion(CustomGraphPass):
    """The pass as inductor's post_grad_custom_post_pass. Its uuid (part of inductor's and vLLM's
    compile-cache keys) is the hash of this file, so a graph rewritten by one version of the pass
    is never reused by another."""

    def __call__(self, graph):
        fuse(graph)

    def uuid(self):
        with open(__file__, "rb") as f:
            return "symmar-add-rms-norm-" + hashlib.sha256(f.read()).hexdigest()[:16]
