"""How many Hypothesis examples a property runs: all of them under the ``ci`` profile, a
tenth under ``dev`` (the fast loop's default).

Profiles are registered and chosen in ``tests/conftest.py``: ``ci`` when the whole suite runs
(``scripts/test``, ``.ci/run``: ``FABRIC_ALL_TESTS=1``), ``dev`` otherwise; pytest's
``--hypothesis-profile=ci`` (or ``FABRIC_HYPOTHESIS_PROFILE=ci``) asks for the full counts in
any run. A test states its CI count once::

    @settings(max_examples=profile_examples(200), deadline=None)
"""

from __future__ import annotations

from hypothesis import settings

CI = "ci"
DEV = "dev"
# the dev profile runs this share of a test's own count, but never fewer than DEV_FLOOR
# (nor more than the test asks for)
DEV_SHARE = 10
DEV_FLOOR = 5
# examples for a property that states no count (Hypothesis's own default is 100)
DEV_DEFAULT = 10


def profile_examples(n: int) -> int:
    """`n` under the ci profile (and any profile other than dev); n/10, at least 5, under dev.

    Read when the decorator runs, i.e. when pytest imports the test module, after
    tests/conftest.py has loaded the profile."""
    if n < 1:
        raise ValueError(f"profile_examples(n): n must be a positive count of examples, got {n!r}")
    if settings.get_current_profile_name() != DEV:
        return n
    return min(n, max(DEV_FLOOR, n // DEV_SHARE))
