"""GcOptions.validate: the core refuses what the CLI's parsers already refuse, for callers of the API
(and plan files) that bypass the parsers. Each bad value is one CkptError naming the option."""

from __future__ import annotations

import math

import pytest

from ckptctl.errors import CkptError
from ckptctl.gc.options import GcOptions

ROOT = ("/data/checkpoints",)


@pytest.mark.parametrize(
    ("changes", "option"),
    [
        ({"roots": ()}, "ROOT"),
        ({"keep_last": 0}, "--keep-last"),
        ({"keep_last": True}, "--keep-last"),
        ({"older_than": -1.0}, "--older-than"),
        ({"margin": -0.001}, "--margin"),
        ({"older_than": math.nan}, "--older-than"),
        ({"margin": math.inf}, "--margin"),
        ({"max_delete_fraction": 0.0}, "--max-delete-fraction"),
        ({"max_delete_fraction": 1.5}, "--max-delete-fraction"),
        ({"max_delete_fraction": math.nan}, "--max-delete-fraction"),
        ({"clock": "ntp"}, "--clock"),
    ],
)
def test_bad_options_are_refused(changes: dict, option: str) -> None:
    options = GcOptions(**{"roots": ROOT, **changes})
    with pytest.raises(CkptError) as e:
        options.validate()
    assert option in str(e.value) and "\n" not in str(e.value)


def test_the_defaults_and_the_edges_are_accepted() -> None:
    GcOptions(ROOT).validate()
    GcOptions(
        ROOT, keep_last=1, older_than=0.0, margin=0.0, max_delete_fraction=1.0, clock="local"
    ).validate()
