"""Component tests: real servers in this process on 127.0.0.1 port 0."""
