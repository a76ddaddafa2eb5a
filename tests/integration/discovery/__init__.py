"""The Discovery contract run against every implementation, with real gRPC servers and etcd."""
