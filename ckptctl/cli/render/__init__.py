"""Console renderers of typed results, one module per command: ``render(console, result)``.

A command hands its result to :meth:`ckptctl.cli.output.Output.result` with the renderer; with
``--json`` the result's ``to_json()`` is printed instead, so the JSON contract lives with the
result in the core and only the drawing lives here.
"""
