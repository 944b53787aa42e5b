"""The binding spells the C enums out (_args, _errors) so it can import without loading the library.
These tests hold those tables to the library and to include/symmar/symmar.h: a value added to an
enum, a renamed algorithm or a changed element size fails here until the tables follow."""
import os
import re

import pytest

from symmar import _api, _args, _errors
from symmar import _lib as L

_HEADER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "include", "symmar", "symmar.h")


def _header_enum(type_name):
    """{enumerator: value} of `typedef enum {...} type_name;` in symmar.h, in declaration order,
    without its count sentinel (symmarNum*), and that sentinel's value (None if it has none)."""
    if not os.path.exists(_HEADER):
        pytest.skip("include/symmar/symmar.h is not next to this package (run from a checkout)")
    with open(_HEADER) as f:
        text = f.read()
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    text = re.sub(r"//[^\n]*", "", text)
    match = re.search(r"typedef\s+enum\s*\{([^}]*)\}\s*" + type_name + r"\s*;", text)
    assert match, "no enum %s in %s" % (type_name, _HEADER)
    values, sentinel, next_value = {}, None, 0
    for item in match.group(1).split(","):
        item = item.strip()
        if not item:
            continue
        name, _, value = (part.strip() for part in item.partition("="))
        next_value = int(value, 0) if value else next_value
        if name.startswith("symmarNum"):
            sentinel = next_value
        else:
            values[name] = next_value
        next_value += 1
    return values, sentinel


def _short(enumerator, prefix):
    """symmarAlgoOneShot -> "oneshot": the C name without its prefix, in lower case."""
    assert enumerator.startswith(prefix), enumerator
    return enumerator[len(prefix):].lower()


def _lib():
    if not os.environ.get("SYMMAR_LIBRARY"):
        pytest.skip("set SYMMAR_LIBRARY to a built libsymmar.so")
    return L.lib()


def test_algos_match_the_library_and_the_header():
    values, count = _header_enum("symmarAlgo_t")
    assert {_short(n, "symmarAlgo"): v for n, v in values.items()} == _args.ALGOS
    assert count == len(_args.ALGOS)
    _lib()
    for name, value in _args.ALGOS.items():
        assert _api._algo_name(value) == name, "symmarAlgoName(%d)" % value
    # Nothing past the table: the first value beyond it is outside the library's enum.
    assert _api._algo_name(len(_args.ALGOS)) == "unknown"
    assert _api._algo_name(-1) == "unknown"


def test_dtypes_match_the_library_and_the_header():
    values, count = _header_enum("symmarDataType_t")
    assert {_short(n, "symmar"): v for n, v in values.items()} == _args.DTYPES
    assert count == len(_args.DTYPES)
    assert sorted(_args.ITEMSIZE) == sorted(_args.DTYPES.values())
    assert _args.DTYPE_NAMES == {v: k for k, v in _args.DTYPES.items()}
    lib = _lib()
    for name, code in _args.DTYPES.items():
        assert lib.symmarTypeSize(code) == _args.ITEMSIZE[code], "symmarTypeSize(%s)" % name
    assert lib.symmarTypeSize(len(_args.DTYPES)) == 0
    assert lib.symmarTypeSize(-1) == 0


def test_ops_match_the_header():
    values, count = _header_enum("symmarRedOp_t")
    library_ops = {name: v for name, v in _args.OPS.items() if v != _args.AVG}
    assert {_short(n, "symmar"): v for n, v in values.items()} == library_ops
    assert count == len(library_ops)
    assert _args.AVG not in values.values(), "avg is the binding's own op, not a library value"


def test_links_match_the_header():
    # The library has no exported link-name call: the header's enum is the reference. Its names
    # are longer than the texts (symmarLinkHostMemory is "host"), so a text must begin the C name.
    values, count = _header_enum("symmarLink_t")
    assert sorted(values.values()) == sorted(_args.LINKS.values()), "LINKS lacks or invents a link"
    assert count == len(_args.LINKS)
    for enumerator, value in values.items():
        text = _args.LINK_NAMES[value]
        assert _short(enumerator, "symmarLink").startswith(text.replace("-", "")), (enumerator, text)


def test_result_codes_match_the_library_and_the_header():
    values, count = _header_enum("symmarResult_t")
    assert list(values) == list(_errors.RESULT_NAMES)
    assert list(values.values()) == list(range(len(_errors.RESULT_NAMES)))
    assert count == len(_errors.RESULT_NAMES)
    assert (_errors.INVALID_ARGUMENT, _errors.INVALID_USAGE, _errors.TIMEOUT) == (
        values["symmarInvalidArgument"], values["symmarInvalidUsage"], values["symmarTimeout"])
    lib = _lib()
    for code, name in enumerate(_errors.RESULT_NAMES):
        assert lib.symmarGetErrorString(code).decode() == name
    assert lib.symmarGetErrorString(len(_errors.RESULT_NAMES)).decode() == "unknown result"
