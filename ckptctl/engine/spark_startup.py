"""What is checked and chosen before the Spark JVM starts: a usable Java (17+), a master that
answers (in seconds, not Hadoop's twenty minutes of retries), the heap and garbage collector the
JVM is given, and the file it writes its output to.

Apart from :mod:`ckptctl.engine.spark` (the session and the JVM's life) because none of it holds
state: each answer is read from the environment and the machine when asked.
"""

from __future__ import annotations

import os
import socket


def spark_log_path() -> str:
    """Where the embedded JVM writes: CKPTCTL_SPARK_LOG, else a file of this process in the temp dir
    (removed at exit unless a line named it: :func:`ckptctl.engine.spark.log_named`). One file per
    user was truncated by each JVM start of any ckptctl process: two Spark commands at once (a cron
    gc beside an interactive verify; the suite's three workers) wrote over each other's output, and
    a JVM's end was read from the other's (an OutOfMemoryError it never had)."""
    import getpass
    import tempfile

    explicit = os.environ.get("CKPTCTL_SPARK_LOG")
    if explicit:
        return explicit
    try:
        user = getpass.getuser()
    except Exception:  # noqa: BLE001 - no user name (containers): any stable name will do
        user = str(os.getuid()) if hasattr(os, "getuid") else "user"
    return os.path.join(tempfile.gettempdir(), f"ckptctl-spark-{user}-{os.getpid()}.log")


# where a user's JVM options may choose a collector: two choices stop the JVM at its start
_JVM_OPTION_VARIABLES = ("SPARK_SUBMIT_OPTS", "JAVA_TOOL_OPTIONS", "JDK_JAVA_OPTIONS", "_JAVA_OPTIONS")


def jvm_collector(environ) -> list[str]:
    """The embedded JVM's garbage collector: the parallel one, unless the user's JVM options
    (the variables above, spark-defaults.conf) choose one. It runs the executors of ``local[*]``
    too, and on few cores G1's concurrent threads take CPU from the tasks: a 10^7-row gc plan,
    plans in turn on one bucket, took 78.2 / 63.2 s with it against 86.4 / 77.6 s with G1."""
    import re

    chooses = re.compile(r"-XX:[+-]Use\w*GC\b")
    texts = [environ.get(name, "") for name in _JVM_OPTION_VARIABLES]
    conf_dir = environ.get("SPARK_CONF_DIR")
    if not conf_dir:
        try:  # where spark-submit looks (the pyspark package itself when SPARK_HOME is unset)
            from pyspark.find_spark_home import _find_spark_home

            conf_dir = os.path.join(environ.get("SPARK_HOME") or _find_spark_home(), "conf")
        except (Exception, SystemExit):  # noqa: BLE001 - no Spark home: the launch says so itself
            conf_dir = None
    if conf_dir:
        try:
            with open(os.path.join(conf_dir, "spark-defaults.conf"), encoding="utf-8", errors="replace") as f:
                texts.append(f.read())
        except OSError:
            pass
    return [] if any(chooses.search(t) for t in texts) else ["-XX:+UseParallelGC"]


def driver_memory() -> str:
    """The JVM's heap: a quarter of the memory this machine has free (``MemAvailable``, or what
    this process's cgroup has left if that is less; the total if neither is known), 1 to 8 GiB.
    The driver JVM is also the executor of ``local[*]``, and spark-submit's default heap (1 GiB)
    ran out while a gc plan joined 10^7 inventory rows with 2M live paths (``OutOfMemoryError:
    Java heap space``, the plan failed; nothing deleted). A maximum, not a reservation: the heap
    grows only as used -- but it grows before it collects, and a quarter of the total (6 GB on 24
    GB) per JVM, on a machine whose memory other work held, was taken by the kernel's OOM killer."""
    from ckptctl.engine.machine import available_memory, machine_memory

    free = available_memory() or machine_memory()
    return f"{min(8 << 10, max(1 << 10, free // 4 >> 20))}m"


def java_problem() -> str | None:
    """Why the Java Spark would start is unusable (missing, broken, older than 17), or ``None``."""
    import re
    import shutil
    import subprocess

    home = os.environ.get("JAVA_HOME")
    if home:
        java = os.path.join(home, "bin", "java")
        if not (os.path.isfile(java) and os.access(java, os.X_OK)):
            return f"JAVA_HOME={home} has no bin/java"
    else:
        java = shutil.which("java")
        if java is None:
            return "no java on PATH and JAVA_HOME is not set"
    try:
        proc = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError) as e:
        return f"{java} does not run: {e}"
    m = re.search(r'version "(\d+)(?:\.(\d+))?', proc.stderr + proc.stdout)
    if proc.returncode != 0 or m is None:
        first = (proc.stderr or proc.stdout).strip().splitlines()[:1]
        return f"{java} -version failed" + (f": {first[0]}" if first else "")
    major = int(m.group(1))
    if major == 1 and m.group(2):  # 1.8 is Java 8
        major = int(m.group(2))
    if major < 17:
        return f"{java} is Java {major}"
    return None


def unreachable_master(master: str, timeout: float = 3.0) -> str | None:
    """An error line if the master cannot work, found in seconds before any JVM starts; else None.

    Every kind of master is checked, not only ``spark://``: a YARN master without the cluster's
    configuration makes Hadoop retry 0.0.0.0:8032 for twenty minutes. ``local[…]`` needs nothing;
    ``spark://h:p[,h:p]``, ``k8s://…`` and ``mesos://`` must accept a connection; ``yarn`` needs
    HADOOP_CONF_DIR or YARN_CONF_DIR and a resource manager that accepts one.
    """
    kind = master.split("://", 1)[0].lower() if "://" in master else master.split("[", 1)[0].lower()
    if kind == "local":
        return None
    if kind == "spark":
        targets = [h.strip() for h in master[len("spark://") :].split(",")]
    elif kind == "k8s":
        rest = master[len("k8s://") :]
        rest = rest if "://" in rest else "https://" + rest
        scheme, _, hostport = rest.partition("://")
        hostport = hostport.split("/", 1)[0]
        targets = [hostport if ":" in hostport else hostport + (":443" if scheme == "https" else ":80")]
    elif kind == "mesos":
        targets = [master[len("mesos://") :].split("/", 1)[0]]
    elif kind == "yarn":
        conf = os.environ.get("YARN_CONF_DIR") or os.environ.get("HADOOP_CONF_DIR")
        if not conf:
            return (
                "--master yarn needs the cluster's configuration: set HADOOP_CONF_DIR (or YARN_CONF_DIR) to the "
                "directory holding yarn-site.xml; or use --engine local"
            )
        targets = _yarn_resource_managers(conf)
        if not targets:
            return (
                f"--master yarn: no resource manager address in {conf}/yarn-site.xml; or use --engine local"
            )
    else:
        return f"unknown Spark master '{master}': use local[*], spark://HOST:PORT, yarn, k8s://… or mesos://…"
    errors = []
    for hostport in targets:
        host, _, port = hostport.rpartition(":")
        try:
            with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout):
                return None
        except (OSError, ValueError) as e:
            errors.append(f"{hostport}: {e.strerror or e}" if isinstance(e, OSError) else f"{hostport}: {e}")
    return (
        f"cannot reach the Spark master {master} ({'; '.join(errors)}); is it running? or use --engine local"
    )


def _yarn_resource_managers(conf_dir: str) -> list[str]:
    """host:port of the resource manager(s) yarn-site.xml names (HA ids included; port 8032 by default)."""
    import xml.etree.ElementTree as ET

    try:
        root = ET.parse(os.path.join(conf_dir, "yarn-site.xml")).getroot()
    except (OSError, ET.ParseError):
        return []
    props = {
        (p.findtext("name") or "").strip(): (p.findtext("value") or "").strip() for p in root.iter("property")
    }
    out = []
    ids = [i.strip() for i in props.get("yarn.resourcemanager.ha.rm-ids", "").split(",") if i.strip()]
    for suffix in [f".{i}" for i in ids] or [""]:
        address = props.get("yarn.resourcemanager.address" + suffix)
        host = props.get("yarn.resourcemanager.hostname" + suffix)
        if address and "${" not in address:
            out.append(address)
        elif host:
            out.append(f"{host}:8032")
    return out
