"""The isolated bytecode reader's program: `python -m x64guard.io._bytecode_reader serve`,
started by x64guard.io.isolated_reader (never by hand). It reads each request with
`x64guard.io.modules.read_bytecode`, the very code the calling process runs next on the same
input, so that what crashes jaxlib's reader crashes here and not there."""

import sys

from x64guard.io import isolated_reader, modules

if __name__ == "__main__":
    if sys.argv[1:] != ["serve"]:
        print(isolated_reader.USAGE, file=sys.stderr)
        sys.exit(2)
    sys.exit(isolated_reader.serve(modules.read_bytecode, prepare=modules.make_context))
