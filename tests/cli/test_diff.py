"""``diff``: the files added, and warnings when A is newer than B or the two are of different jobs."""

from __future__ import annotations

from tests.support.cli_runner import cli, cli_json


def test_diff_warns_about_order_and_jobs_and_lists_files() -> None:
    from tests.support.fixture_cases import cases

    basic = sorted(
        (c for c in cases() if c.flink_version == "2.2.0" and c.scenario == "basic"),
        key=lambda c: int(c.checkpoint_dir.name.split("-")[1]),
    )
    old, new = str(basic[0].checkpoint_dir), str(basic[-1].checkpoint_dir)
    forward = cli("diff", old, new, env={"COLUMNS": "200"})
    assert forward.exit_code == 0 and "older" not in forward.stderr
    view = cli_json("diff", old, new)
    biggest = max(view["added"], key=lambda f: f["size"])
    rel = biggest["path"].removeprefix("file:" + str(basic[0].checkpoint_dir.parent) + "/")
    assert rel in forward.stdout and len(view["added"]) > 10 and "more" in forward.stdout
    backward = cli("diff", new, old)
    assert backward.exit_code == 0 and "is older than A" in backward.stderr
    other = next(c for c in cases() if c.flink_version == "1.20.3" and c.scenario == "basic")
    across = cli("diff", old, str(other.checkpoint_dir))
    assert across.exit_code == 0 and "different jobs" in across.stderr
