"""The one path model and the one directory grammar gc, layout and refs share.

Expectations follow Flink's ``org.apache.flink.core.fs.Path``: backslashes become slashes, runs
of slashes collapse, ``URI.normalize()`` drops ``.`` and resolves ``..`` (keeping a ``..`` that
climbs above the root), and ``new Path(parent, child)`` strips the child's leading slash and
treats a child with a scheme as absolute.
"""

from __future__ import annotations

import pytest

from ckptctl import storage as st
from ckptctl.checkpoint.layout import place_of

J = "0123456789abcdef0123456789abcdef"


@pytest.mark.parametrize(
    ("written", "canonical"),
    [
        ("s3://b/ck//j/shared/o2", "s3://b/ck/j/shared/o2"),
        ("s3://b/j/./shared/o3", "s3://b/j/shared/o3"),
        ("s3://b/j/shared/sub/../o1", "s3://b/j/shared/o1"),
        ("s3a://b/j/shared//x/", "s3://b/j/shared/x"),
        ("s3://b/j\\shared\\x", "s3://b/j/shared/x"),
        ("s3://b/../x", "s3://b/../x"),
        ("file:///tmp/r/j/../k/x", "file:/tmp/r/k/x"),
        ("file://localhost/tmp/x", "file:/tmp/x"),
        ("file:/tmp/a/./b//c", "file:/tmp/a/b/c"),
    ],
)
def test_paths_are_normalised_like_flink_path(written: str, canonical: str) -> None:
    assert st.normalize_uri(written) == canonical
    assert st.is_normal(canonical) or st.escapes(canonical)
    assert st.escapes(canonical) == ("/../" in canonical)


@pytest.mark.parametrize(
    ("relative", "resolved"),
    [
        ("x", f"s3://b/r/{J}/chk-9/x"),
        ("../shared/x", f"s3://b/r/{J}/shared/x"),
        (f"../../{J[::-1]}/shared/x", f"s3://b/r/{J[::-1]}/shared/x"),
        ("/x", f"s3://b/r/{J}/chk-9/x"),
        ("s3://other/x", "s3://other/x"),
        ("../../../../../x", "s3://b/../../x"),
    ],
)
def test_relative_handles_resolve_like_new_path_parent_child(relative: str, resolved: str) -> None:
    assert st.resolve_relative(f"s3://b/r/{J}/chk-9", relative) == resolved


@pytest.mark.parametrize(
    ("directory", "area", "job"),
    [
        (f"/r/{J}/shared", "shared", f"/r/{J}"),
        (f"/r/{J}/shared/job_{J}_op_x_0_2", "shared", f"/r/{J}"),
        (f"/r/{J}/taskowned", "taskowned", f"/r/{J}"),
        (f"/r/{J}/chk-12", "chk", f"/r/{J}"),
        (f"/r/{J}/chk-12/sub", "chk", f"/r/{J}"),
        (f"/r/a/b/{J}/shared", "shared", f"/r/a/b/{J}"),
        ("/r/team/shared", "other", None),
        ("/r/docs/chk-1", "other", None),
        (f"/r/{J.upper()}/shared", "other", None),
        (f"/r/{J}/notes/shared", "other", None),
        (f"/r/{J}", "other", None),
        ("/r/savepoint-abc123-0123456789ab", "savepoint", None),
        (f"/r/savepoint-abc123-0123456789ab/{J}/shared", "savepoint", None),
    ],
)
def test_directory_grammar(directory: str, area: str, job: str | None) -> None:
    place = place_of("file:/r", "file:" + directory)
    assert place.area == area
    assert place.job == (None if job is None else "file:" + job)


def test_the_root_itself_can_be_a_job_or_a_savepoint() -> None:
    assert place_of(f"file:/r/{J}", f"file:/r/{J}/shared").job == f"file:/r/{J}"
    assert place_of("file:/r/job-a", "file:/r/job-a/shared").area == "other"
    assert place_of(
        "file:/r/savepoint-abc123-0123456789ab", "file:/r/savepoint-abc123-0123456789ab/x"
    ).area == ("savepoint")


def test_forst_working_directories_are_named() -> None:
    op = "op_AsyncKeyedProcessOperator_20ba6b65f97481d5570070de90e4e791__1_2__attempt_0"
    place = place_of("file:/r", f"file:/r/{J}/shared/{op}/db")
    assert place.area == "shared" and place.forst == f"file:/r/{J}/shared/{op}"
    assert place_of("file:/r", f"file:/r/{J}/shared/_dummy_dir_1234").forst is not None
    assert place_of("file:/r", f"file:/r/{J}/shared").forst is None
