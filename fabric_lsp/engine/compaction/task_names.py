"""The names of the preview tasks (tasks.py), in a module of their own: a caller that only
hands a task to a worker process (the language server) names it without importing the
engine that runs it."""

from __future__ import annotations

COMPACTION_PREVIEW = "compactionPreview"
BRANCH_SUMMARY_PREVIEW = "branchSummaryPreview"
