"""Flink's ``org.apache.flink.core.fs.Path`` rules for the path strings of ``_metadata``.

Flink turns every path string it reads (file and segment handles, relative handles resolved
against the checkpoint directory, file-merging directories) into a ``Path``: the string is split
into scheme, authority and path (no query or fragment), the path is cleaned (backslashes to
slashes, repeated slashes collapsed, a trailing slash dropped), and the three are handed to
``java.net.URI(scheme, authority, path, null, null)`` and normalized (``.`` and ``..``
segments). The URI constructor quotes whatever is illegal in the path and the authority, so what
can still fail is the scheme (empty, a first character that is not a letter, a character outside
letters, digits, ``+ - .``: a control character, a space...), a relative path after a scheme, an
authority with stray brackets, and a scheme with nothing after it. Flink rejects those with
``IllegalArgumentException``; :func:`flink_path_string` raises :class:`InvalidPath` for the same
strings and otherwise returns ``Path.toString()``, the normalized form Flink works with.

Real checkpoints only hold plain absolute URIs, so a fast regular expression accepts those and the
full rules run only for anything unusual.
"""

from __future__ import annotations

import functools
import re
from itertools import repeat

_SEG = r"[\w\-][\w\-.]*"
# scheme of 2+ characters (a single letter would be a Windows drive), optional plain authority,
# then one or more segments that are neither empty nor dot segments: Path.toString() is the string.
_PLAIN = re.compile(rf"[A-Za-z][A-Za-z0-9+.\-]+:(?://[\w\-.]+)?(?:/{_SEG})+", re.ASCII).fullmatch
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*", re.ASCII).fullmatch
_HEX = "0123456789abcdefABCDEF"
_IPV6_AUTHORITY = re.compile(r"(?:[^@\[\]]*@)?\[[0-9A-Fa-f:.]+\](?::[0-9]*)?").fullmatch
# characters java.net.URI accepts unescaped (ASCII): path (pchar + ";/") and "uric"
_ALNUM = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
_UNRESERVED = _ALNUM + "-_.!~*'()"
_PATH_OK = frozenset(_UNRESERVED + ":@&=+$," + ";/")
_URIC_OK = frozenset(_UNRESERVED + ";/?:@&=+$,[]")


class InvalidPath(ValueError):
    """A string Flink's ``Path`` rejects (``IllegalArgumentException``, or an NPE on resolution)."""


@functools.lru_cache(maxsize=4096)
def _plain_dir(d: str) -> bool:
    return _PLAIN(d + "x") is not None


def is_plain(s: str) -> bool:
    """True for the common case: a string that is its own ``Path.toString()``.

    The directory (checked once per distinct directory) must be plain; the file name only must not
    be empty, a dot segment or hold a backslash (anything else in a path part is quoted by URI).
    """
    i = s.rfind("/")
    name = s[i + 1 :]
    return i > 0 and name not in ("", ".", "..") and "\\" not in name and _plain_dir(s[: i + 1])


def all_plain(paths: list[str]) -> bool:
    """``is_plain`` for every path of a list, with C-level passes instead of a check per path.

    The files of one incremental handle normally share their directory: then that directory is
    checked once, and the list passes if every path starts with it, the joined paths hold no more
    slashes than the directories (names without a slash) and no backslash, and every name is
    longer than two characters (neither empty nor a dot segment). Otherwise: path by path.
    """
    first = paths[0]
    d = first[: first.rfind("/") + 1]
    if d and _plain_dir(d):
        joined = "".join(paths)
        if (
            all(map(str.startswith, paths, repeat(d)))
            and joined.count("/") == len(paths) * d.count("/")
            and "\\" not in joined
            and min(map(len, paths)) > len(d) + 2
        ):
            return True
    return all(map(is_plain, paths))


def _windows_drive(s: str, slashed: bool) -> bool:
    start = 1 if slashed else 0
    return (
        len(s) >= start + 2
        and (not slashed or s[0] == "/")
        and s[start + 1] == ":"
        and ("A" <= s[start] <= "Z" or "a" <= s[start] <= "z")
    )


def _visible_non_ascii(c: str) -> bool:
    """``URI.Parser.scanEscape``'s allowance for unescaped non-ASCII: above U+0080, not a space or control."""
    return ord(c) > 0x80 and not (c.isspace() or _is_space_char(c) or _is_iso_control(c))


def _is_iso_control(c: str) -> bool:
    o = ord(c)
    return o <= 0x1F or 0x7F <= o <= 0x9F


def _is_space_char(c: str) -> bool:
    # Character.isSpaceChar: Unicode categories Zs, Zl, Zp
    import unicodedata

    return unicodedata.category(c) in ("Zs", "Zl", "Zp")


def _check_chars(s: str, allowed: frozenset, what: str) -> None:
    """``URI.Parser.checkChars`` over an unquoted part: allowed ASCII, %XX escapes, visible non-ASCII."""
    i, n = 0, len(s)
    while i < n:
        c = s[i]
        if c in allowed:
            i += 1
        elif c == "%":
            if i + 2 < n + 0 and s[i + 1] in _HEX and s[i + 2] in _HEX:
                i += 3
            else:
                raise InvalidPath(f"malformed escape in {what}")
        elif _visible_non_ascii(c):
            i += 1
        else:
            raise InvalidPath(f"illegal character {c!r} in {what}")


def _normalize(path: str) -> str:
    """``java.net.URI.normalize()`` of a path without repeated slashes: drop ``.``, fold ``x/..``."""
    if not path:
        return path
    absolute = path.startswith("/")
    segs = path[1:].split("/") if absolute else path.split("/")
    if absolute and segs == [""]:
        return path
    if "." not in segs and ".." not in segs:
        return path
    kept: list[int] = []  # indexes of kept segments
    for i, seg in enumerate(segs):
        if seg == ".":
            continue
        if seg == ".." and kept and segs[kept[-1]] != "..":
            kept.pop()
            continue
        kept.append(i)
    lead = "/" if absolute else ""
    if not kept:
        return lead
    parts = [segs[i] for i in kept]
    if not absolute and kept[0] != 0 and ":" in parts[0]:
        parts.insert(0, ".")
    trailing = "/" if kept[-1] != len(segs) - 1 else ""
    return lead + "/".join(parts) + trailing


def _clean(path: str) -> str:
    """``Path.normalizePath``: backslashes to slashes, collapse slashes, drop one trailing slash."""
    path = path.replace("\\", "/")
    if "//" in path:
        path = re.sub("/+", "/", path)
    if path.endswith("/") and path != "/" and not re.fullmatch(r"/[A-Za-z]+:/", path):
        path = path[:-1]
    return path


def _uri(scheme: str | None, authority: str | None, path: str) -> tuple[str | None, str | None, str | None]:
    """``new URI(scheme, authority, path, null, null).normalize()``: (scheme, authority, path) or raise."""
    if scheme is not None and path and path[0] != "/":
        raise InvalidPath("relative path in absolute URI")
    if scheme is not None and ("?" in scheme or "#" in scheme):
        # URI's parser does not see a scheme then: the whole string is a relative reference whose
        # path ends at the first '?' or '#'; the rest must be a valid query / fragment
        text = scheme  # the parts after the scheme are quoted and always valid
        cut = min(i for i in (text.find("?"), text.find("#")) if i >= 0)
        head, rest = text[:cut], text[cut:]
        _check_chars(head, _PATH_OK, "path")
        if rest.startswith("?"):
            q, _, frag = rest[1:].partition("#")
            _check_chars(q, _URIC_OK, "query")
            if "#" in rest[1:]:
                _check_chars(frag, _URIC_OK, "fragment")
        else:
            _check_chars(rest[1:], _URIC_OK, "fragment")
        return None, None, _normalize(head)
    if scheme is not None:
        if not scheme:
            raise InvalidPath("expected scheme name")
        if not _SCHEME(scheme):
            raise InvalidPath(f"illegal character in scheme name {scheme!r}")
        if authority is None and not path:
            raise InvalidPath("expected scheme-specific part")
    if authority and ("[" in authority or "]" in authority) and not _IPV6_AUTHORITY(authority):
        raise InvalidPath(f"illegal character in authority {authority!r}")
    return scheme, authority or None, _normalize(path)


def _components(s: str) -> tuple[str | None, str | None, str | None]:
    """``new Path(String)``'s URI as (scheme, authority, path)."""
    if not s:
        raise InvalidPath("empty path")
    if _windows_drive(s, False):
        s = "/" + s
    scheme = authority = None
    start = 0
    colon, slash = s.find(":"), s.find("/")
    if colon != -1 and (slash == -1 or colon < slash):
        scheme = s[:colon]
        start = colon + 1
    if s.startswith("//", start) and len(s) - start > 2:
        nxt = s.find("/", start + 2)
        end = nxt if nxt > 0 else len(s)
        authority = s[start + 2 : end]
        start = end
    return _uri(scheme, authority, _clean(s[start:]))


def _to_string(scheme: str | None, authority: str | None, path: str | None) -> str:
    out = []
    if scheme is not None:
        out.append(scheme + ":")
    if authority is not None:
        out.append("//" + authority)
    if path is not None:
        if path.startswith("/") and _windows_drive(path, True) and scheme is None and authority is None:
            path = path[1:]
        out.append(path)
    return "".join(out)


def flink_path_string(s: str) -> str:
    """``new Path(s).toString()``, or :class:`InvalidPath` where Flink throws."""
    if is_plain(s):
        return s
    return _to_string(*_components(s))


def check_path(s: str) -> None:
    """Raise :class:`InvalidPath` if ``new Path(s)`` throws."""
    if not is_plain(s):
        _components(s)


def check_relative(child: str) -> None:
    """Raise :class:`InvalidPath` if ``new Path(<checkpoint dir>, child)`` throws (relative handles)."""
    if _PLAIN("x:/" + child) and ":" not in child:
        return
    scheme, authority, path = _components(child)
    if path is not None and path.startswith("/"):
        # Path(parent, child) re-creates the child without its leading slash
        rest = path[1:]
        if not rest:
            raise InvalidPath("empty path")
        rest = _clean(rest)  # Path(scheme, authority, rest) cleans it again ("C:/" loses its slash)
        if scheme is None and authority is None:
            # URI then reads a colon before the first slash as a scheme ("C:/x" on Windows): an
            # invalid one throws, one without a path after it is opaque (Flink fails on its null path)
            colon, slash = rest.find(":"), rest.find("/")
            if colon != -1 and (slash == -1 or colon < slash):
                if not _SCHEME(rest[:colon]):
                    raise InvalidPath(f"illegal scheme name {rest[:colon]!r}")
                if rest[colon + 1 : colon + 2] != "/":
                    raise InvalidPath("opaque URI has no path")
            return
        _uri(scheme, authority, rest)
        if scheme is None and authority is not None:
            # URI(null, authority, rest) is "//" + authority + rest: the authority runs on up to the
            # first slash of rest, and Flink re-creates the resolved path with that authority
            _uri(None, authority + rest.split("/", 1)[0], "")
