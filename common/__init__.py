"""strata's pure core: types, the segment format, expressions, the native query engine and (later)
SQL planning. Nothing here knows about servers, RPC or Spark; ``common`` never imports ``services``."""
