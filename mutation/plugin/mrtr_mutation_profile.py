"""pytest plugin loaded only under `make mutate`: a deterministic, deadline-free Hypothesis.

A derandomized profile makes a mutant's verdict repeatable (the baseline can be re-measured),
and no deadline means a mutant is never "killed" because the shared machine was busy.
"""

from __future__ import annotations

from hypothesis import HealthCheck, settings

settings.register_profile(
    "mrtr-mutation",
    derandomize=True,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile("mrtr-mutation")
