"""Tests of the historical role."""
