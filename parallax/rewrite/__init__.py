"""Rewrite: apply a plan to a copy of the user's graph, as a short pipeline of named passes."""
from parallax.rewrite.pipeline import RewriteContext, RewrittenGraph, passes_for, rewrite  # noqa: F401
