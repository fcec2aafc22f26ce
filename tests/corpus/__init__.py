# programs.py appends the cases of random_programs.py (which imports programs.Case), so
# programs is imported first whichever module of the corpus a test imports.
from . import programs  # noqa: F401
