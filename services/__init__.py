"""strata's services and command line: each role's pure ``core/``, its gRPC edge and its wiring."""
