"""Test harnesses shared by component and integration tests."""
