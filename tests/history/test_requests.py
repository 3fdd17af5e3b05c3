"""The ledger update's cost on S3, counted at the server: one listing of the root plus one ``GET``
per ``_metadata`` the ledger does not hold yet, checkpoints and savepoints alike; a run with nothing
new reads no ``_metadata`` at all (what lets a cron run ``history --ledger`` every few minutes)."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import unquote, urlsplit

from tests.support.cli_runner import DATA, cli_json
from tests.support.faulty_proxy import FaultyProxy, Rule, is_list

ROOT = DATA / "2.2.0" / "savepoints"  # a job's chk-9..11 and two savepoints, as Flink wrote them
BUCKET = "history-requests"


def _upload(s3_server, skip: str | None = None) -> None:
    s3_server.put_many(
        {
            f"{BUCKET}/root/{p.relative_to(ROOT).as_posix()}": p.read_bytes()
            for p in ROOT.rglob("*")
            if p.is_file() and (skip is None or skip not in p.relative_to(ROOT).parts)
        }
    )


def _history(endpoint: str, ledger: Path) -> dict:
    return cli_json("history", f"s3://{BUCKET}/root", "--ledger", str(ledger), "--s3-endpoint", endpoint)


def test_a_ledger_update_is_one_listing_and_one_get_per_new_metadata(s3_server, tmp_path: Path) -> None:
    s3_server.create_bucket(BUCKET)
    _upload(s3_server, skip="chk-11")  # chk-11 comes later, as a running job writes it
    ledger = tmp_path / "ledger"
    seen: list[tuple[str, str]] = []
    record = Rule(match=lambda method, path: seen.append((method, path)) or False)

    def run() -> tuple[dict, list[str], list[tuple[str, str]]]:
        seen.clear()
        report = _history(proxy.endpoint, ledger)
        gets = sorted(
            unquote(urlsplit(p).path).removeprefix(f"/{BUCKET}/root/")
            for m, p in seen
            if m == "GET" and not is_list(p)
        )
        return report, gets, [(m, p) for m, p in seen if is_list(p)]

    with FaultyProxy(s3_server.endpoint, fault_rate=0, rules=[record]) as proxy:
        first, gets, lists = run()
        assert first["ledger_added"] == 4
        assert gets == sorted(
            [
                "checkpoints/2cadc2300117395befe1845673697c68/chk-10/_metadata",
                "checkpoints/2cadc2300117395befe1845673697c68/chk-9/_metadata",
                "savepoints/savepoint-2cadc2-053498faf5d0/_metadata",
                "savepoints/savepoint-2cadc2-3ac213755ad4/_metadata",
            ]
        )
        assert len(lists) == 1 and len(seen) == 5, seen

        _upload(s3_server)  # chk-11 completes: one new _metadata
        second, gets, lists = run()
        assert second["ledger_added"] == 1
        assert gets == ["checkpoints/2cadc2300117395befe1845673697c68/chk-11/_metadata"]
        assert len(lists) == 1 and len(seen) == 2, seen

        third, gets, lists = run()  # nothing new: not one _metadata read
        assert third["ledger_added"] == 0
        assert gets == [] and len(lists) == 1 and len(seen) == 1, seen
    assert [c["checkpoint_id"] for j in third["jobs"] for c in j["checkpoints"]] == [9, 10, 11, 5, 6]
