"""The generated protobuf/gRPC code in common/rpc/gen matches protos/ (regenerate with
`python -m common.rpc.codegen`)."""

from common.rpc import codegen


def test_generated_code_matches_protos(capsys):
    assert codegen.main(["--check"]) == 0, capsys.readouterr().out
