"""The generated protobuf/gRPC code in services/rpc/gen matches protos/ (regenerate with
`python -m services.rpc.codegen`)."""

from services.rpc import codegen


def test_generated_code_matches_protos(capsys):
    assert codegen.main(["--check"]) == 0, capsys.readouterr().out
