"""Which scope a file belongs to, and under which rules it is classified: the roots, ``--savepoints``
and ``--changelog-dir`` as one plan sees them (a type every step of a plan reads, below them all)."""

from __future__ import annotations

from ckptctl import storage as st
from ckptctl.gc.options import GcOptions


class Scopes:
    """The scanned roots, ``--savepoints`` and ``--changelog-dir`` directories.

    Listings are made of the outermost directories only (no file is listed twice); a file is
    classified by the most specific scope holding it: a changelog directory inside a root makes
    its files changelog files whether or not the root is scanned too.
    """

    def __init__(self, options: GcOptions) -> None:
        self.options = options
        everything = list(dict.fromkeys(options.scopes()))
        self.listed = [r for r in everything if not any(o != r and st.is_under(r, o) for o in everything)]
        self.prefixes = tuple(r.rstrip("/") + "/" for r in everything)
        # most specific first: longer paths first, changelog before savepoints before roots
        kinds = [(c, "changelog") for c in options.changelog_dirs]
        kinds += [(s, "savepoints") for s in options.savepoint_dirs] + [(r, "root") for r in options.roots]
        self.by_specificity = sorted(kinds, key=lambda kv: -len(kv[0]))

    def scope_of(self, uri: str) -> tuple[str, str] | tuple[None, None]:
        for scope, kind in self.by_specificity:
            if st.is_under(uri, scope):
                return scope, kind
        return None, None
