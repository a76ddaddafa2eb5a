"""RPC plumbing shared by the service edges: the generated protobuf/gRPC code (in ``gen/``, the
only place it lives), its generator (``codegen``), conversions between wire messages and domain
types (``convert``) and Arrow tables as streamed chunks (``arrow_stream``). Only the edges import
from here: servers, per-role clients, discovery's embedded service and ``main.py`` wiring; never
``common`` (whose promise is no RPC) and never a role's pure ``core``."""
