"""Agent-quality and cost benchmark (issue 39): offline, deterministic; see ``run.py``."""
