"""Sphinx configuration: the docs site built from docs/*.md by `make docs` (MyST Markdown,
the API reference from the public docstrings by autodoc + napoleon). The choice: docs/development.md."""

from __future__ import annotations

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))              # the checkout's x64guard, whatever is installed
os.environ.setdefault("PJRT_DEVICE", "CPU")  # autodoc imports x64guard.torch_xla: no accelerator needed
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

project = "x64guard"
author = "the x64guard authors"
copyright = "2026, the x64guard authors"
release = "0.1.0"

extensions = ["myst_parser", "sphinx.ext.autodoc", "sphinx.ext.napoleon"]
source_suffix = {".md": "markdown", ".rst": "restructuredtext"}
root_doc = "index"
exclude_patterns = ["_build"]

# MyST: headings get anchors (links like `jit.md#speed` are checked), `:::{directive}` fences
# keep directives out of ``` code fences (tests/docs/test_docs.py runs those).
myst_enable_extensions = ["colon_fence", "deflist"]
myst_heading_anchors = 4
suppress_warnings: list[str] = []

# The code blocks' info strings carry tests/docs/test_docs.py's flags (`text output`,
# `python no-run: REASON`); MyST takes the first word as the language. MLIR has no Pygments
# lexer: shown as plain text.
def setup(app):
    from pygments.lexers.special import TextLexer

    app.add_lexer("mlir", TextLexer)


# Autodoc: the public names, in source order; docstrings are prose with `code` in single
# backticks (rendered as code).
default_role = "literal"
autodoc_member_order = "bysource"
autodoc_typehints = "none"       # the signatures' string annotations do not resolve as references
autodoc_default_options = {"members": False}
napoleon_google_docstring = True
napoleon_numpy_docstring = False

html_theme = "furo"
html_title = "x64guard"
html_static_path: list[str] = []
