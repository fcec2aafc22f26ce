"""The `x64guard` command line: a front end over `x64guard.check` / `x64guard.narrow`.

`app` parses arguments and maps outcomes to exit status; `inputs` finds and reads
modules; `results` runs the core's check per module; `formats` renders; `gate` runs a
command with JAX's IR dump on; `term` draws colours and progress on terminals only.
"""

from x64guard.cli.app import main

__all__ = ["main"]
