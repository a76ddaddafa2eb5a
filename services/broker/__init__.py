"""The broker: the query entry point. It watches which historicals serve which segments, plans a
native query onto replicas, gathers partials over gRPC, merges and finalizes them."""
