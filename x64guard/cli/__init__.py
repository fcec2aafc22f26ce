"""The `x64guard` command line: a front end over `x64guard.check` / `x64guard.narrow`.

`app` parses arguments and maps outcomes to exit status; `inputs` finds and reads
modules; `results` runs the core's check per module; `formats` renders text and JSON
(`schema/report.schema.json` defines every JSON field), `code_scanning` SARIF and GitHub
annotations; `gate` runs a command with JAX's IR dump on (`dump` sets it up, also for
`pytest --x64guard`, x64guard/pytest_plugin.py); `term` draws colours and progress on
terminals only.
"""

from x64guard.cli.app import main

__all__ = ["main"]
