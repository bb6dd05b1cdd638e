"""The one compiled part of Samsa, optional: everything else is declared in pyproject.toml.

``broker/security/_tlsread.c`` runs the TLS read loop in C (its comment says why). It is built
where a C compiler and Python's headers are present (``gcc`` and ``python3-dev`` on Debian) and
skipped with a warning where they are not (``optional=True``): the broker then reads TLS records
with the same loop in Python, which is slower per record but otherwise the same.

An editable install (``pip install -e .``) puts the built module into the source tree. It is put
there by rename, never by rewriting the file in place: a broker that is running from the tree has
the old one mapped, and truncating a mapped shared object kills that process (SIGBUS).
"""

import os
import shutil

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext


class BuildExt(build_ext):
    def copy_file(self, infile, outfile, *args, **kwargs):  # type: ignore[no-untyped-def]
        tmp = f"{outfile}.{os.getpid()}.tmp"
        shutil.copy2(infile, tmp)
        os.replace(tmp, outfile)  # a new file under the old name: running processes keep theirs
        return outfile, True


setup(
    cmdclass={"build_ext": BuildExt},
    ext_modules=[Extension("broker.security._tlsread", ["broker/security/_tlsread.c"], optional=True)],
)
