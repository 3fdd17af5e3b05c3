"""m9: a missing bucket reads the same for every command: ``ls`` said "no such directory (or it is
empty)" where ``verify``/``check``/``gc plan`` said "no such bucket" (moto on loopback)."""

from __future__ import annotations

import pytest

from tests.support.cli_runner import cli, one_line_error


@pytest.mark.parametrize("command", [["ls"], ["verify"], ["check"], ["gc", "plan"], ["refs"]])
def test_a_missing_bucket_is_no_such_bucket_everywhere(s3_server, command: list[str]) -> None:
    line = one_line_error(cli(*command, "s3://nosuchbucket/ck", "--s3-endpoint", s3_server.endpoint))
    assert "s3://nosuchbucket: no such bucket" in line, line
