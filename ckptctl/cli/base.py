"""What every command module shares: the app, its :class:`Group` and :class:`Command` classes,
the output flags (:data:`OUTPUT_OPTIONS`) and the shared options (``--s3-endpoint``, ``--rebase``,
``--engine``/``--master``, ``--savepoints``), the error wrapper :func:`command` and the helpers.

Command modules (``ckptctl/cli/<name>.py``) import from here and register their commands on
:data:`app`; :mod:`ckptctl.cli` imports them all and is the entry point (``main``). Nothing here
imports a command module, so no command module needs :mod:`ckptctl.cli` itself.
"""

from __future__ import annotations

import copy
import functools
import os
import sys
from collections.abc import Callable
from typing import Annotated, Any

import typer
from typer.core import TyperArgument, TyperCommand, TyperGroup

from ckptctl import __version__
from ckptctl.cli.params import MAPPING
from ckptctl.cli.session import Session, activate, current_session, current_terminal


def _set_json(value: bool) -> None:
    if value:
        current_session().json = True


def _more(value: int) -> None:
    current_session().verbosity += value or 0


def _less(value: int) -> None:
    current_session().verbosity -= value or 0


# The output flags, declared once: every command (and the app, before the command name) takes them.
# They are not passed to the command function (expose_value=False); they fill the Session.
JsonOpt = Annotated[
    bool,
    typer.Option(
        "--json", help="Print machine-readable JSON to stdout.", callback=_set_json, expose_value=False
    ),
]
VerboseOpt = Annotated[
    int,
    typer.Option(
        "--verbose", "-v", count=True, callback=_more, expose_value=False, show_default=False,
        help="Say more on stderr (what is done, each file and object read; tracebacks of internal errors). Repeatable.",
    ),
]  # fmt: skip
QuietOpt = Annotated[
    int,
    typer.Option(
        "--quiet", "-q", count=True, callback=_less, expose_value=False, show_default=False,
        help="Only errors on stderr: no warnings, no progress bars.",
    ),
]  # fmt: skip


def _output_flags(json: JsonOpt = False, verbose: VerboseOpt = 0, quiet: QuietOpt = 0) -> None:
    """The template the output flags are copied from (see :func:`output_options`)."""


OUTPUT_OPTIONS = ("json", "verbose", "quiet")


@functools.cache
def _output_template() -> tuple[Any, ...]:
    template = typer.Typer(add_completion=False)
    template.command()(_output_flags)
    return tuple(typer.main.get_command(template).params)


def output_options() -> list[Any]:
    """Fresh copies of the output flags' parameters, for one command or group."""
    return [copy.copy(p) for p in _output_template()]


class Group(TyperGroup):
    """A command group that also takes the output flags before the command name
    (``ckptctl --json ls ROOT`` is ``ckptctl ls ROOT --json``)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.params.extend(output_options())

    def make_context(self, info_name: str | None, args: list[str], parent: Any = None, **extra: Any) -> Any:
        if parent is None:  # a new invocation (the app, or a sub-app run on its own): a new session
            activate(Session())
        return super().make_context(info_name, args, parent=parent, **extra)


app = typer.Typer(
    name="ckptctl",
    cls=Group,
    help="Inspect and repair Apache Flink checkpoint directories, on local disk or S3.",
    no_args_is_help=True,
    add_completion=False,
    context_settings={"help_option_names": ["-h", "--help"]},
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)

EndpointOpt = Annotated[
    str | None,
    typer.Option(
        "--s3-endpoint", help="S3 endpoint URL (MinIO, Ceph); default: AWS_ENDPOINT_URL[_S3].", metavar="URL"
    ),
]
RebaseOpt = Annotated[
    list[Any] | None,
    typer.Option(
        "--rebase", metavar="OLD=NEW", parser=MAPPING,
        help="Map absolute paths written in _metadata from OLD to NEW (for moved or copied directories). Repeatable.",
    ),
]  # fmt: skip
MasterOpt = Annotated[
    str | None,
    typer.Option(
        "--master",
        help="Spark master URL (implies Spark; default for Spark: embedded local[*]).",
        metavar="URL",
    ),
]
EngineOpt = Annotated[
    str,
    typer.Option(
        "--engine",
        metavar="auto|local|spark",
        help="auto (default): in-process for small inputs, Spark for large ones or with --master; "
        "local: always in-process; spark: always Spark.",
    ),
]


def engine_choice(engine: str, master: str | None = None):
    """The one :class:`~ckptctl.engine.Engine` of a command, from ``--engine``/``--master``; a bad
    value is a usage error here, before anything is read, and the value handed down is final (what
    ``auto`` means is :meth:`~ckptctl.engine.Engine.resolve`'s, written once). Spark starts under
    this invocation's status line."""
    from ckptctl.engine import Engine

    return Engine.parse(engine, master, status=lambda label: get_output().term.status(label))


def writable_outputs(*paths: str | None) -> None:
    """Output files (``-o``, ``--junit``, ``--report``, ``--histogram``) are checked before the scan:
    a missing or read-only directory is one line, exit 2, not an internal error after minutes."""
    import os

    from ckptctl.errors import CkptError

    for path in paths:
        if not path or path == "-":
            continue
        directory = os.path.dirname(os.path.abspath(path))
        if not os.path.isdir(directory):
            raise CkptError(f"cannot write {path}: no such directory {directory}")
        if not os.access(directory, os.W_OK):
            raise CkptError(f"cannot write {path}: the directory {directory} is not writable")
        if os.path.isdir(path):
            raise CkptError(f"cannot write {path}: it is a directory")


SavepointsOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--savepoints", metavar="DIR",
        help="Savepoint directory to search for files of a CLAIM-restored NATIVE savepoint (FLINK-39964). Repeatable.",
    ),
]  # fmt: skip


class Command(TyperCommand):
    """A data command: the output flags of :func:`output_options`, and positional arguments that
    read as their metavar in the help (``ckptctl ls [OPTIONS] ROOT`` and ``ROOT  A checkpoint
    root …``, not ``{root}`` and ``root <str>``)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        for param in self.params:
            if isinstance(param, TyperArgument) and param.metavar:
                param.__class__ = _PlainArgument
                param.callback = _checked_path(param.callback)
        self.params.extend(output_options())


def _checked_path(then: Callable[..., Any] | None) -> Callable[..., Any]:
    """Every positional argument of a data command is a path (ROOT, CHECKPOINT, SRC, DST, PLAN.json):
    each one passes gc's rule for ROOT (:func:`ckptctl.storage.check_user_path`), so an unset
    ``$ROOT`` (``''``) is refused in one line, exit 2, by every command instead of meaning the
    current directory."""

    def check(ctx: Any, param: Any, value: Any) -> Any:
        from ckptctl.cli.params import OptionError
        from ckptctl.errors import CkptError
        from ckptctl.storage.uri import check_user_path

        for one in value if isinstance(value, list | tuple) else [value]:
            if isinstance(one, str):
                try:
                    check_user_path(param.metavar, one)
                except CkptError as e:
                    raise OptionError(str(e)) from None
        return then(ctx, param, value) if then else value

    return check


def get_output(json: bool | None = None):
    """This invocation's :class:`~ckptctl.cli.output.Output` (chosen once, from the output flags;
    ``json`` overrides them for commands whose format is chosen otherwise, like ``refs --format``)."""
    return current_session().output(json)


def as_json() -> bool:
    """Whether --json was given (before or after the command name)."""
    return current_session().json


class _PlainArgument(TyperArgument):
    def _usage_display_name(self) -> str:
        name = self.display_name_raw if self.required else f"[{self.display_name_raw}]"
        return name + ("..." if self.nargs != 1 else "")

    def display_type(self, ctx: Any) -> str:
        return ""  # the metavar already says what to type


def _version(value: bool) -> None:
    if value:
        typer.echo(f"ckptctl {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Show the version and exit.")
    ] = False,
) -> None:
    """ckptctl: what is live, what is garbage, what a restore will cost."""


def command(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Turn ckptctl's own errors into one line + exit code; unexpected ones too, unless debugging."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        from ckptctl.errors import CkptError

        try:
            return fn(*args, **kwargs)
        except KeyboardInterrupt:
            _fail("interrupted", 130)
        except CkptError as e:
            if _while_interrupted(e):
                _fail("interrupted", 130)
            _fail(_spark_failure(e) or str(e), e.exit_code)
        except BrokenPipeError:
            raise typer.Exit(closed_pipe()) from None
        except (typer.Exit, typer.Abort):
            raise
        except Exception as e:  # a bug in ckptctl: still one line, with a way to see more
            from ckptctl.storage import s3_problem

            if _while_interrupted(e):
                _fail("interrupted", 130)

            problem = s3_problem(e) or _spark_failure(e)  # the user's to fix (or the machine's)
            if problem:
                _fail(problem, 2)
            if os.environ.get("CKPTCTL_DEBUG") or current_terminal().verbose:
                raise
            _fail(f"internal error: {type(e).__name__}: {e} (set CKPTCTL_DEBUG=1 for a traceback)", 3)

    return wrapper


def _while_interrupted(e: BaseException) -> bool:
    """Whether ``e`` was raised while a Ctrl-C was being handled (clean-up that calls the Spark JVM
    on the way out finds the connection py4j closed on the interrupt: ``Answer from Java side is
    empty``, exit 3): the interrupt is what happened."""
    seen = set()
    while e is not None and id(e) not in seen:
        if isinstance(e, KeyboardInterrupt):
            return True
        seen.add(id(e))
        e = e.__context__ or e.__cause__
    return False


def _spark_failure(e: BaseException) -> str | None:
    """The line for a Spark JVM that died or ran out of memory under the command (whatever error
    that surfaced as: a dropped py4j connection, a failed job), if the command used Spark."""
    spark = sys.modules.get("ckptctl.engine.spark")  # loaded only by a command that used Spark
    return spark.spark_failure(e) if spark is not None else None


CLOSED_PIPE = 141  # 128 + SIGPIPE: what a shell reports for `cat`, `grep` or `ls` whose reader left


def closed_pipe() -> int:
    """The exit code of every command whose reader closed stdout early (``ckptctl ls | head -1``).

    Not 0: a gate (``check``, ``verify``, ``gc plan``) whose output was cut may have had a verdict
    of 1 or 2, and 0 would pass it under ``set -o pipefail``. Not 1 ("problems found") nor 2 (an
    error): 141 is the code the shell gives any Unix tool killed by SIGPIPE, so a script reads it as
    "the reader left", as for ``yes | head``. stdout is pointed at /dev/null so that the
    interpreter's last flush cannot print a second error."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass  # stdout is not a file descriptor (an in-process runner): nothing is flushed at exit
    return CLOSED_PIPE


def flush_stdout() -> None:
    """The last flush of what a command wrote through ``sys.stdout`` (JSON, CSV): a reader that
    left by then is a closed pipe too."""
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        sys.exit(closed_pipe())


def _fail(message: str, code: int) -> None:
    """One line: the message's lines joined (a name's own blanks, tabs and CRs kept, and shown)."""
    current_terminal().error(" ".join(part.strip(" ") for part in message.split("\n") if part.strip()))
    raise typer.Exit(code)


def storage_and_rebase(s3_endpoint: str | None, rebase: list[Any] | None):
    """The storage and the one :class:`~ckptctl.checkpoint.rebase.Rebase` of all ``--rebase`` options
    (each already parsed by the :data:`~ckptctl.cli.params.MAPPING` type)."""
    from ckptctl.checkpoint.rebase import Rebase
    from ckptctl.storage import Storage, StorageOptions

    storage = Storage(StorageOptions.from_env(s3_endpoint))
    term = current_terminal()
    storage.on_listed = term.listing_count()  # a running count while S3 is listed
    if term.verbose:  # -v: every command says what it reads, as it reads it
        storage.on_call = lambda what, uri: term.info(f"{what}: {uri}")
    return storage, Rebase.of(p for r in rebase or () for p in r.mappings)


def warn_moved(out, *checkpoints, inferred=()) -> None:
    """One warning per inferred mapping (not per checkpoint: a moved root has dozens), of the
    ``checkpoints`` and of mappings already taken from checkpoints no longer held (``inferred``)."""
    from ckptctl.checkpoint.rebase import moved_warnings

    for warning in moved_warnings([*inferred, *(ck.inferred_rebase for ck in checkpoints)]):
        out.warn(warning)
