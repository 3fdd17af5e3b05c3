"""The suite's class archives (tests/support/class_archive.py): never a half-written one, never a missing one.

A JVM that maps a half-written archive crashes, and a JVM told of an archive that is not there runs
without the JDK's own class sharing too: these are the two ways an archive could cost a run more
than it saves. No JVM is started here: the writer's JVM is stood in for by a function that writes
the file the option names, or not."""

from __future__ import annotations

from pathlib import Path

from tests.support import class_archive, flink_archive, flink_harness


def _file_of(option: str) -> Path:
    assert option.startswith("-XX:ArchiveClassesAtExit=")
    return Path(option.split("=", 1)[1])


def test_an_archive_is_renamed_into_place_only_after_its_jvm_exited_0(tmp_path: Path) -> None:
    path = tmp_path / "kind-0123.jsa"
    big = b"\0" * (2 << 20)

    def crashed(option: str) -> int:
        _file_of(option).write_bytes(big)  # all of it written, and still: the JVM did not exit 0
        return 134

    assert class_archive.write(path, crashed) == 134
    assert not path.exists() and not list(tmp_path.glob("*.partial"))

    def tiny(option: str) -> int:
        _file_of(option).write_bytes(b"x")  # exit 0, but no archive of a framework's classes
        return 0

    assert class_archive.write(path, tiny) == 0
    assert not path.exists() and not list(tmp_path.glob("*.partial"))

    (tmp_path / "kind-0123.999.partial").write_bytes(big)  # of a writer killed mid-dump

    def exited(option: str) -> int:
        _file_of(option).write_bytes(big)
        return 0

    assert class_archive.write(path, exited) == 0
    assert path.read_bytes() == big and not list(tmp_path.glob("*.partial"))


def test_a_gateway_is_told_of_its_archive_only_once_it_is_there(tmp_path: Path, monkeypatch) -> None:
    python = tmp_path / "venv" / "bin" / "python"
    pyflink = tmp_path / "venv" / "lib" / "python3.11" / "site-packages" / "pyflink"
    (pyflink / "lib").mkdir(parents=True)
    (pyflink / "lib" / "flink-dist-9.9.9.jar").write_bytes(b"jar")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv("FLINK_ENV_JAVA_OPTS", "-XX:TieredStopAtLevel=1")
    archive = flink_archive.archive_path(python)
    assert archive is not None and archive.parent == tmp_path / "cache" / "ckptctl-tests"

    assert flink_harness.flink_env(python)["FLINK_ENV_JAVA_OPTS"] == "-XX:TieredStopAtLevel=1"
    archive.parent.mkdir(parents=True)
    archive.write_bytes(b"archive")
    opts = flink_harness.flink_env(python)["FLINK_ENV_JAVA_OPTS"].split()
    assert opts[0] == "-XX:TieredStopAtLevel=1" and f"-XX:SharedArchiveFile={archive}" in opts

    (pyflink / "lib" / "flink-dist-9.9.9.jar").write_bytes(b"another jar")  # the venv installed anew
    assert flink_archive.archive_path(python) != archive


def test_each_kind_keeps_its_three_newest_archives(tmp_path: Path) -> None:
    """A fresh clone (a new place, a new venv) keys a new archive of ~170 MB: the old ones of the
    kind go when a new one is in place, another kind's stay."""
    import os

    for i in range(4):
        for kind in ("spark", "flink"):
            old = tmp_path / f"{kind}-old{i}.jsa"
            old.write_bytes(b"old")
            os.utime(old, (1_000_000 + i, 1_000_000 + i))

    def exited(option: str) -> int:
        _file_of(option).write_bytes(b"\0" * (2 << 20))
        return 0

    assert class_archive.write(tmp_path / "spark-new.jsa", exited) == 0
    assert {p.name for p in tmp_path.glob("spark-*.jsa")} == {
        "spark-new.jsa",
        "spark-old3.jsa",
        "spark-old2.jsa",
    }
    assert len(list(tmp_path.glob("flink-*.jsa"))) == 4
