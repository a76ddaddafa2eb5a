"""Tests of deep storage (local directory and S3) against one contract."""
