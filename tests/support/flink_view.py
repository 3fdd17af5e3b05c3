"""ckptctl's view of a fixture held against Flink's (fixtures/expected): every field Flink reports,
with the same value, paths mapped to where the fixture lives now."""

from __future__ import annotations

from tests.support.fixture_cases import Case

# Handle encodings without an id on the wire (codes 3, 5, 7): Flink draws a random one on every read.
RANDOM_ID_ON_READ = {"KeyGroupsSavepointStateHandle"}


def case_reads_into_a_map(case) -> bool:
    version = getattr(getattr(case, "case", case), "flink_version", "")
    major, minor = (int(x) for x in version.split(".")[:2])
    return (major, minor) < (1, 17)


def assert_matches(expected, actual, case: Case, where: str = "$") -> None:
    """Every field Flink reports must be present in ckptctl's view with the same value."""
    if isinstance(expected, dict):
        assert isinstance(actual, dict), f"{where}: expected an object, got {actual!r}"
        if expected.get("type") == "IncrementalRemoteKeyedStateHandle" and case_reads_into_a_map(case):
            # Flink 1.14-1.16 read an incremental handle's files into a HashMap: its reading lists
            # them in hash order, ckptctl in file order; compare them by local name
            expected, actual = dict(expected), dict(actual)
            for key in ("shared", "private"):
                if isinstance(expected.get(key), list) and isinstance(actual.get(key), list):
                    expected[key] = sorted(expected[key], key=lambda f: f["local_path"])
                    actual[key] = sorted(actual[key], key=lambda f: f["local_path"])
        for key, value in expected.items():
            if key == "state_handle_id" and expected.get("type") in RANDOM_ID_ON_READ:
                assert key not in actual or actual[key] is None  # nothing on the wire to report
                continue
            assert key in actual, f"{where}: ckptctl lacks field '{key}' (Flink: {value!r})"
            assert_matches(value, actual[key], case, f"{where}.{key}")
    elif isinstance(expected, list):
        assert isinstance(actual, list) and len(actual) == len(expected), (
            f"{where}: Flink has {len(expected)} items, ckptctl {len(actual) if isinstance(actual, list) else actual!r}"
        )
        for i, (e, a) in enumerate(zip(expected, actual, strict=True)):
            assert_matches(e, a, case, f"{where}[{i}]")
    elif isinstance(expected, str) and where.endswith(".path"):
        assert actual == case.to_current(expected), f"{where}: {actual!r} != {expected!r}"
    else:
        assert actual == expected, f"{where}: ckptctl {actual!r} != Flink {expected!r}"
