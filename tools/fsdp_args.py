"""Argument parsing for the tools written in Python: argparse, except that an
unknown option is refused by its name first (argparse would report a
missing positional argument instead, without naming it)."""
import sys


def parse(ap, argv=None):
    argv = sys.argv[1:] if argv is None else argv
    known = set(ap._option_string_actions)
    for a in argv:
        if a == "--":
            break
        if a.startswith("-") and len(a) > 1 and not a[1].isdigit() and a.split("=")[0] not in known:
            ap.error("unknown argument %s" % a)
    return ap.parse_args(argv)
