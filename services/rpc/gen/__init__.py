"""Generated from protos/ by services.rpc.codegen; do not edit."""
