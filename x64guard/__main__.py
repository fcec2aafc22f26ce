"""`python -m x64guard` and the `x64guard` console script."""

import sys


def main(argv=None) -> int:
    from x64guard.cli.app import main as run
    return run(argv)


if __name__ == "__main__":
    sys.exit(main())
