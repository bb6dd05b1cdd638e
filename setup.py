"""The one compiled part of Samsa, optional: everything else is declared in pyproject.toml.

``broker/security/_tlsread.c`` runs the TLS read loop in C (its comment says why). It is built
where a C compiler and Python's headers are present (``gcc`` and ``python3-dev`` on Debian) and
skipped with a warning where they are not (``optional=True``): the broker then reads TLS records
with the same loop in Python, which is slower per record but otherwise the same.
"""

from setuptools import Extension, setup

setup(ext_modules=[Extension("broker.security._tlsread", ["broker/security/_tlsread.c"], optional=True)])
