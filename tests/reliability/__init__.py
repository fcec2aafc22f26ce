"""Reliability tests (issue 7): differential fuzzing, hostile input, large modules,
concurrency, and no mutation of the caller's module."""
