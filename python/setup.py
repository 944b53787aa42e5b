"""Ships a built libsymmar inside the package, so `pip install ./python` then `import symmar`
works without $SYMMAR_LIBRARY. The library copied is $SYMMAR_LIBRARY if set, else the newest
libsymmar.so* under the source tree's build*/src; without one the package is pure Python and finds
the library at run time (symmar/_lib.py). libsymmar_mpi beside it is shipped too."""
import glob
import os
import shutil

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))


def _built_library():
    env = os.environ.get("SYMMAR_LIBRARY")
    if env and os.path.exists(env):
        return os.path.realpath(env)
    found = glob.glob(os.path.join(os.path.dirname(HERE), "build*", "src", "libsymmar.so.*.*"))
    return max(found, key=os.path.getmtime) if found else None


class BuildPyWithLibrary(build_py):
    def run(self):
        super().run()
        lib = _built_library()
        if lib is None:
            print("symmar: no built libsymmar found; the package will look for one at run time")
            return
        dest = os.path.join(self.build_lib, "symmar")
        # The soname is what the loader and libsymmar_mpi ask for: ship the file under it.
        shutil.copyfile(lib, os.path.join(dest, "libsymmar.so.0"))
        mpi = sorted(glob.glob(os.path.join(os.path.dirname(lib), "libsymmar_mpi.so.*.*")))
        if mpi:
            shutil.copyfile(os.path.realpath(mpi[-1]), os.path.join(dest, "libsymmar_mpi.so.0"))
        print("symmar: shipping %s%s" % (lib, " and libsymmar_mpi" if mpi else ""))


setup(cmdclass={"build_py": BuildPyWithLibrary})
