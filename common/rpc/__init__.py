"""RPC plumbing shared by the service edges: the generated protobuf/gRPC code (in ``gen/``, the
only place it lives), its generator, and conversions between wire messages and domain types.
Only ``services/*/server.py``, clients and ``main.py`` wiring import from here."""
