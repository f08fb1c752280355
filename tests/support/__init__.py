"""Helpers shared by the test modules (never a test module itself)."""

from pathlib import Path

SUPPORT = Path(__file__).resolve().parent
TESTS = SUPPORT.parent
REPO_ROOT = TESTS.parent
