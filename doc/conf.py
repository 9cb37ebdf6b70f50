"""Sphinx configuration for skdpsparse (build: sphinx-build -W -b html doc doc/_build)."""

project = "skdpsparse"
author = "skdpsparse developers"
extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.mathjax",
    "numpydoc",
]
autosummary_generate = True
numpydoc_show_class_members = False
html_theme = "pydata_sphinx_theme"
exclude_patterns = ["_build"]
