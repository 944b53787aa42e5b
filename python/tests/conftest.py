"""Makes the in-tree package importable and points it at a built libsymmar.

The ctest `python_tests` sets SYMMAR_LIBRARY to the build's libsymmar; run by hand with
SYMMAR_LIBRARY=build/src/libsymmar.so python3 -m pytest -q python/tests
"""
import os
import sys

import pytest

_HERE = os.path.dirname(os.path.abspath(__file__))
_PYROOT = os.path.dirname(_HERE)
sys.path.insert(0, _PYROOT)

if not os.environ.get("SYMMAR_LIBRARY"):
    _guess = os.path.join(os.path.dirname(_PYROOT), "build", "src", "libsymmar.so")
    if os.path.exists(_guess):
        os.environ["SYMMAR_LIBRARY"] = _guess


def pytest_collection_modifyitems(config, items):
    if not os.environ.get("SYMMAR_LIBRARY"):
        skip = pytest.mark.skip(reason="set SYMMAR_LIBRARY to a built libsymmar.so")
        for item in items:
            item.add_marker(skip)


@pytest.fixture
def comm1():
    """A one-rank CPU comm (symmar.Comm.init_all), closed after the test."""
    import symmar
    comms = symmar.Comm.init_all(1, devices=["cpu"])
    yield comms[0]
    comms[0].close()
