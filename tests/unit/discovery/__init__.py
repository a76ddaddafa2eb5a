"""Unit tests of discovery without sockets: MemoryStore, LocalDiscovery, Announcer, LeaderElection;
plus the event recorder and partition wrapper the integration contract tests reuse."""
