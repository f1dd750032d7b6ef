"""Where a sweep's code came from: the tags its parent run gets (checked end to end on a recorded
sweep in tests/test_sample_complexity.py) and what a job's upload is told, having no .git."""

import subprocess

from services.store import provenance


def test_the_description_is_the_specs_opening_comment_without_its_marks():
    text = "# fig: what it reproduces\n#   Expect: N* = 5\n#\nname: x\n# a comment further down\n"
    assert provenance.description(text) == "fig: what it reproduces\n  Expect: N* = 5\n"
    assert provenance.description("name: x\n") == ""


def test_a_shipped_copy_reports_its_senders_commit_and_state(monkeypatch):
    provenance.git_commit.cache_clear()
    head = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, cwd=provenance.PROJECT_ROOT)
    sent = provenance.shipped()
    assert sent[provenance.GIT_COMMIT_ENV] == head.stdout.strip()  # this checkout's, read here
    assert sent[provenance.GIT_DIRTY_ENV] in ("true", "false")
    monkeypatch.setenv(provenance.GIT_COMMIT_ENV, "0123abc")  # on the cluster: no .git, the sender's word
    monkeypatch.setenv(provenance.GIT_DIRTY_ENV, "true")
    provenance.git_commit.cache_clear()
    try:
        tags = provenance.run_tags("# x: a sweep\nname: x\n")
    finally:
        provenance.git_commit.cache_clear()
    assert tags[provenance.COMMIT_TAG] == "0123abc" and tags[provenance.DIRTY_TAG] == "true"
    assert tags[provenance.NOTE_TAG] == "x: a sweep" and len(tags[provenance.SCIENCE_TAG]) == 16
