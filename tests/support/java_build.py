"""The suite's small Java programs compiled once per machine, not once per run.

Some tests run a Java program of fixtures/ against a release's jars (the ForSt test's MetadataDump,
the Paimon sink job; the differential bench's MetadataVerdict). javac is a JVM of its own that
loads the compiler and reads the class path's jars: MetadataDump against Flink 2.2's took 3.2
CPU-s and 5.7 s (the 2-core machine at a load of 13), in every run. Its classes depend on the source, the jars it was
compiled against and the compiler only, so they are kept in the user's cache under a key of those,
and a changed source or jar set is compiled anew.
"""

from __future__ import annotations

import glob
import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from tests.support import jvm
from tests.support.class_archive import cache_dir, java_version
from tests.support.flink_harness import file_lock


def _jars(classpath: str) -> list[str]:
    """The class path's entries, each ``dir/*`` spelled out as its jars."""
    out = []
    for entry in classpath.split(os.pathsep):
        out += sorted(glob.glob(entry[:-1] + "*.jar")) if entry.endswith("*") else [entry]
    return out


def compiled(source: Path, classpath: str, main: str | None = None) -> Path:
    """The directory of ``source``'s classes compiled against ``classpath`` (``main``: the class
    that must be there, the source's name by default); compiled now, under a lock, unless this
    machine has them. A failed compile raises with javac's output."""
    javac = shutil.which("javac")
    if javac is None:
        raise FileNotFoundError("javac (a JDK) is not on PATH")
    main = main or source.stem
    key = hashlib.sha256(source.read_bytes())
    for part in [os.path.realpath(javac), java_version() or "", *_jars(classpath)]:
        key.update(b"\0" + part.encode())
        if os.path.isfile(part):
            st = os.stat(part)
            key.update(f" {st.st_size} {st.st_mtime_ns}".encode())
    out = cache_dir() / "classes" / f"{source.stem}-{key.hexdigest()[:16]}"
    with file_lock(out.parent / f".{source.stem}.lock"):
        if not (out / f"{main}.class").is_file():
            tmp = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{source.stem}-"))
            p = subprocess.run([javac, *jvm.javac_options(), "-nowarn", "-cp", classpath, "-d", str(tmp), str(source)],
                               capture_output=True, text=True, timeout=600)  # fmt: skip
            if p.returncode != 0 or not (tmp / f"{main}.class").is_file():
                shutil.rmtree(tmp, ignore_errors=True)
                raise RuntimeError(f"javac {source.name} exited {p.returncode}:\n{p.stdout}{p.stderr}")
            shutil.rmtree(out, ignore_errors=True)
            os.replace(tmp, out)
    return out
