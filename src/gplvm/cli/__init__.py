"""Command line: ``gplvm fit DATA`` fits a model to a data file (CSV/TSV/TXT, .npy, .npz,
.h5ad) and writes an embedding, the saved model, a summary, imputed data and plots; ``gplvm
transform|impute|sample|info MODEL`` use a saved model; ``gplvm demo`` runs the README's demo
on scikit-learn's digits.  See docs/cli.md.

A bad data or model file, or settings a model refuses, end with one line on stderr and exit
status 2 (as argparse's own usage errors); nothing is left in the output folder.
"""

from __future__ import annotations

import argparse
import sys
import warnings


def _parser() -> argparse.ArgumentParser:
    from gplvm.cli import demo, fit, verbs
    from gplvm._version import __version__

    parser = argparse.ArgumentParser(prog="gplvm", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"gplvm {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    demo.add_parser(sub)
    fit.add_parser(sub)
    verbs.add_parsers(sub)
    return parser


def _one_line(err: BaseException) -> str:
    return " ".join(str(err).split()) or type(err).__name__


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    """``warning: Category: message`` on one line: what a command-line user can act on, without
    the library's source path and line that Python's default display starts with."""
    print(f"warning: {category.__name__}: {_one_line(message)}", file=file or sys.stderr,
          flush=True)


def main(argv=None) -> int:
    """Run the command ``argv`` (default ``sys.argv[1:]``); returns the exit status.  Warnings
    are shown by :func:`_show_warning` while it runs (the Python API's are left as they are)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    args = _parser().parse_args(argv)
    shown, warnings.showwarning = warnings.showwarning, _show_warning
    try:
        return _run(args, argv)
    finally:
        warnings.showwarning = shown


def _run(args, argv) -> int:
    try:
        if args.command == "demo":
            from gplvm.cli import demo

            return demo.run(args)
        if args.command == "fit":
            from gplvm.cli import fit

            return fit.run(args, argv)
        from gplvm.cli import verbs

        return verbs.run(args)
    except (ValueError, OSError) as err:
        print(f"gplvm {args.command}: error: {_one_line(err)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"gplvm {args.command}: interrupted", file=sys.stderr)
        return 130
