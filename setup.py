"""Compiled parts of strata (everything else is in pyproject.toml).

``common.segment._nested_split`` is the field split of nested JSON columns in C. An editable
install (``pip install -e .``, scripts/bootstrap.sh) builds it next to its source, so Spark
executors that import strata from the source tree find it too. It is optional: when it cannot be
built, the pure Python split is used (nested_native_split says so once in the log).
"""

from setuptools import Extension, setup

setup(ext_modules=[Extension("common.segment._nested_split",
                             ["common/segment/_nested_split.c", "common/segment/_nested_split_text.c"],
                             depends=["common/segment/_nested_split.h"],
                             extra_compile_args=["-O2", "-fvisibility=hidden"], optional=True)])
