"""Compiled parts of strata (everything else is in pyproject.toml).

``common.segment._nested_split`` is the field split of nested JSON columns in C, and
``services.ingestion._json_lines`` the text scan's reader of newline-delimited JSON. Both build
the JSON lexer that reads and prints JSON strings and numbers, common/json/_nested_split_text.c
(its declarations are in common/segment/_nested_split.h). An editable install (``pip install
-e .``, scripts/bootstrap.sh) builds them next to their sources, so Spark executors that import
strata from the source tree find them too. Both are optional: when one cannot be built, the pure
Python code is used (nested_native_split and json_lines_reader say so once in the log).
"""

from setuptools import Extension, setup

_FLAGS = ["-O2", "-fvisibility=hidden"]

setup(ext_modules=[
    Extension("common.segment._nested_split",
              ["common/segment/_nested_split.c", "common/json/_nested_split_text.c",
               "common/segment/_nested_split_sort.c"],
              include_dirs=["common/segment"], depends=["common/segment/_nested_split.h"],
              extra_compile_args=_FLAGS, optional=True),
    Extension("services.ingestion._json_lines",
              ["services/ingestion/_json_lines.c", "common/json/_nested_split_text.c"],
              include_dirs=["common/segment"], depends=["common/segment/_nested_split.h"],
              extra_compile_args=_FLAGS, optional=True),
])
