"""Generate Python protobuf/gRPC code from ``protos/`` into ``services/rpc/gen``.

    python -m services.rpc.codegen          # regenerate
    python -m services.rpc.codegen --check  # exit 1 if the checked-in code differs from the protos

Generated modules import each other by their proto path (``from strata.v1 import types_pb2``);
they are rewritten to absolute imports under ``services.rpc.gen`` so no sys.path tricks are needed.
"""

from __future__ import annotations

import argparse
import filecmp
import os
import re
import shutil
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PROTOS = os.path.join(ROOT, "protos")
OUT = os.path.join(ROOT, "services", "rpc", "gen")
PACKAGE = "services.rpc.gen"
_IMPORT = re.compile(r"^from ((?:strata|arrow)(?:\.\w+)*) import (\w+_pb2(?:_grpc)?)", re.MULTILINE)


def proto_files() -> list[str]:
    out = []
    for base, _, files in os.walk(PROTOS):
        out.extend(os.path.relpath(os.path.join(base, f), PROTOS) for f in files if f.endswith(".proto"))
    return sorted(out)


def generate(out_dir: str) -> None:
    from grpc_tools import protoc
    import grpc_tools

    include = os.path.join(os.path.dirname(grpc_tools.__file__), "_proto")
    files = proto_files()
    args = ["protoc", f"-I{PROTOS}", f"-I{include}", f"--python_out={out_dir}", f"--pyi_out={out_dir}",
            f"--grpc_python_out={out_dir}", *files]
    if protoc.main(args) != 0:
        raise SystemExit("protoc failed")
    for base, dirs, files_ in os.walk(out_dir):
        with open(os.path.join(base, "__init__.py"), "w") as f:
            f.write('"""Generated from protos/ by services.rpc.codegen; do not edit."""\n' if base == out_dir else "")
        for name in files_:
            if name.endswith((".py", ".pyi")) and name != "__init__.py":
                path = os.path.join(base, name)
                with open(path) as f:
                    text = f.read()
                text = _IMPORT.sub(lambda m: f"from {PACKAGE}.{m.group(1)} import {m.group(2)}", text)
                with open(path, "w") as f:
                    f.write(text)


def _same_tree(a: str, b: str) -> list[str]:
    diffs = []
    for base, _, files in os.walk(a):
        for name in files:
            if "__pycache__" in base:
                continue
            pa_ = os.path.join(base, name)
            pb = os.path.join(b, os.path.relpath(pa_, a))
            if not os.path.exists(pb) or not filecmp.cmp(pa_, pb, shallow=False):
                diffs.append(os.path.relpath(pa_, a))
    for base, _, files in os.walk(b):
        for name in files:
            if "__pycache__" in base:
                continue
            if not os.path.exists(os.path.join(a, os.path.relpath(os.path.join(base, name), b))):
                diffs.append(os.path.relpath(os.path.join(base, name), b) + " (stale)")
    return diffs


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check", action="store_true")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        generate(tmp)
        if args.check:
            diffs = _same_tree(tmp, OUT)
            if diffs:
                print("generated code is out of date; run `python -m services.rpc.codegen`:\n  " + "\n  ".join(diffs))
                return 1
            print("generated code matches protos/")
            return 0
        shutil.rmtree(OUT, ignore_errors=True)
        shutil.copytree(tmp, OUT)
    print(f"generated {len(proto_files())} proto files into {os.path.relpath(OUT, ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
