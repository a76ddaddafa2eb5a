"""The ``strata`` command line: demo data, local runs of the engine, and (later) cluster control."""
