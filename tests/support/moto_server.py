"""moto's own server (``moto.server.main``) for the suite's S3 endpoint, without three costs it pays
at every request and that the suite's tests, which make many small requests, paid in full: ~25 %,
~15 % and ~8 % of the server's samples (py-spy over the suite; moto's server burned ~235 CPU-s of a
run).

- Its dispatcher asks whether the request's host names a moto service by listing moto's package
  directory and testing each of its ~170 entries with ``isdir`` (``moto.backends.
  list_of_moto_modules``), per request. The installed package does not change while the server
  runs: the list is read once.
- A listing serializes each object's time by parsing the text moto keeps it as, with dateutil
  (``botocore.utils.parse_timestamp``), each time the object is listed: the same few texts parse
  to the same (immutable) datetimes, which are remembered.
- werkzeug logs every request at INFO through a stream handler, formatted and written to a stderr
  the suite discards. Requests are no longer logged; warnings and errors still are.

Every request is answered by moto's code as before. Run as a script (``S3_SERVER + [-H, host, -p,
port]``): it needs no import path of the suite's.
"""

from __future__ import annotations

import sys
from pathlib import Path

S3_SERVER = [sys.executable, str(Path(__file__).resolve())]


def main(argv: list[str]) -> None:
    import functools
    import logging

    import botocore.utils
    import moto.backends
    from moto.server import main as moto_main

    modules = tuple(moto.backends.list_of_moto_modules())
    moto.backends.list_of_moto_modules = lambda: modules
    botocore.utils.parse_timestamp = functools.lru_cache(maxsize=65536)(botocore.utils.parse_timestamp)
    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    moto_main(argv)


if __name__ == "__main__":
    main(sys.argv[1:])
