"""Generated from protos/ by common.rpc.codegen; do not edit."""
