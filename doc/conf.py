"""Sphinx configuration for skdpsparse.

Build (from the repository root; warnings are errors, every gallery example runs)::

    sphinx-build -W -b html doc doc/_build/html

``SKDPSPARSE_DOC_NO_GALLERY=1`` skips running the gallery scripts (a quick build of
the user guide and API reference; the gallery pages then show code without output).
"""

import os

import skdpsparse

project = "skdpsparse"
author = "skdpsparse developers"
copyright = "skdpsparse developers"
version = release = skdpsparse.__version__

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.mathjax",
    "numpydoc",
    "sphinx_gallery.gen_gallery",
]

templates_path = ["_templates"]
exclude_patterns = ["_build", "**.ipynb_checkpoints", "auto_examples/*.py",
                    "auto_examples/*.ipynb", "auto_examples/*.zip"]
root_doc = "index"
default_role = "obj"

# -- autodoc / autosummary / numpydoc -------------------------------------------
autosummary_generate = True
autosummary_imported_members = False
autodoc_default_options = {"members": False, "inherited-members": False}
autodoc_typehints = "none"
# The class template lists the methods itself (see _templates/autosummary/class.rst).
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
# numpydoc's own docstring validation is not run: the -W build fails on real warnings
# (unresolved references, malformed sections) only.
numpydoc_validation_checks = set()

# -- sphinx-gallery --------------------------------------------------------------
# Matplotlib must not try to open a window when the gallery runs.
os.environ.setdefault("MPLBACKEND", "Agg")
_run_gallery = os.environ.get("SKDPSPARSE_DOC_NO_GALLERY", "") in ("", "0")
sphinx_gallery_conf = {
    "examples_dirs": "../examples",
    "gallery_dirs": "auto_examples",
    # Execute every script whose name contains "plot_" (all of examples/plot_*.py).
    "filename_pattern": r"plot_",
    "plot_gallery": _run_gallery,
    # "Examples using X" at the end of each API page (the minigallery directive in
    # _templates/autosummary/).
    "doc_module": ("skdpsparse",),
    "backreferences_dir": "generated/backreferences",
    "reference_url": {"skdpsparse": None},
    "download_all_examples": False,
    "remove_config_comments": True,
    "within_subsection_order": "FileNameSortKey",
    # A failing example fails the build.
    "abort_on_example_error": False,
    "only_warn_on_example_error": False,
}

# -- HTML ------------------------------------------------------------------------
html_theme = "pydata_sphinx_theme"
html_title = f"skdpsparse {release}"
html_theme_options = {
    "navbar_align": "left",
    "show_toc_level": 2,
    "secondary_sidebar_items": ["page-toc"],
    "footer_start": ["copyright"],
    "footer_end": [],
}
html_show_sourcelink = False
html_static_path = []


# -- Docstrings: plain-text math --------------------------------------------------
# The package's docstrings write math in Unicode plain text, where "|x|" is an absolute
# value and "``sigma``²" a literal with an exponent. In reStructuredText "|x|" is a
# substitution reference and "``sigma``²" an unterminated literal, and both break the
# -W build. Rather than asking every docstring to escape them, this hook (run after
# numpydoc) escapes "|" outside literals, roles, math, literal blocks and doctests, and
# puts an escaped space ("\ ", which renders as nothing) between a closing "``" and a
# letter, digit or symbol that follows it, and escapes the "_" that ends a word such as
# n_iter_ (a hyperlink reference in reST). It only touches skdpsparse's own objects.
import re  # noqa: E402
import unicodedata  # noqa: E402

_INLINE = re.compile(r"(``.+?``|:[\w:+-]+:`[^`]*`|`[^`]*`_{0,2})")


def _needs_boundary(char):
    return unicodedata.category(char)[0] in "LNS" and char not in "<>"


def _escape_plain_math(line):
    parts = _INLINE.split(line)
    for i in range(0, len(parts), 2):  # text outside literals and roles
        parts[i] = re.sub(r"(?<!\\)\|", r"\\|", parts[i])
        # "n_iter_" in running text is a hyperlink reference in reST: escape the "_".
        parts[i] = re.sub(r"(?<=\w)_(?!\w)", r"\\_", parts[i])
    for i in range(1, len(parts), 2):  # a literal or role, then the text after it
        following = parts[i + 1] if i + 1 < len(parts) else ""
        if following and _needs_boundary(following[0]):
            parts[i + 1] = "\\ " + following
    return "".join(parts)


def _indent(line):
    return len(line) - len(line.lstrip())


def _escape_docstring(app, what, name, obj, options, lines):
    if not name.startswith("skdpsparse"):
        return
    block_indent = None  # inside a literal block / directive body deeper than this
    in_doctest = False
    previous = ""
    for k, line in enumerate(lines):
        stripped = line.strip()
        if block_indent is not None:
            if not stripped or _indent(line) > block_indent:
                previous = line if stripped else previous
                continue
            block_indent = None
        if in_doctest:
            if stripped:
                previous = line
                continue
            in_doctest = False
        if stripped.startswith(">>>"):
            in_doctest = True
            previous = line
            continue
        if previous.rstrip().endswith("::") and stripped and \
                _indent(line) > _indent(previous):
            # first line of a literal block or directive body that followed "::"
            block_indent = _indent(previous)
            previous = line
            continue
        if stripped.startswith((".. ", "| ", "+-", "+=")) or stripped == "|":
            # a directive line (its body is skipped above) or table / line-block syntax
            if stripped.rstrip().endswith("::") or stripped.startswith(".. math::"):
                block_indent = _indent(line)
            previous = line
            continue
        if stripped:
            lines[k] = _escape_plain_math(line)
            previous = line


# Methods inherited from scikit-learn (``score`` of ClassifierMixin / RegressorMixin)
# carry scikit-learn's docstrings, whose :ref: labels (accuracy_score, r2_score) live in
# scikit-learn's own documentation, unreachable here without intersphinx (no network at
# build time). Those references, and only those, are rendered as plain text (the
# summary line of ``score`` in a class page's method table has the generated page as
# its source, hence the explicit labels).
_SKLEARN_LABELS = {"accuracy_score", "r2_score"}


def _sklearn_ref_as_text(app, env, node, contnode):
    if node.get("refdomain") == "std" and node.get("reftype") == "ref" and (
            "sklearn" in (node.source or "") or node.get("reftarget") in _SKLEARN_LABELS):
        return contnode
    return None


def setup(app):
    app.connect("autodoc-process-docstring", _escape_docstring, priority=600)
    app.connect("missing-reference", _sklearn_ref_as_text)
