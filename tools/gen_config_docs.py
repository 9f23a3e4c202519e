"""Write docs/config.md from hierarchy.config.loader.DEFAULTS and hierarchy/config/reference.py.

    python tools/gen_config_docs.py            # rewrite docs/config.md
    python tools/gen_config_docs.py --check    # exit 1 if docs/config.md is out of date

A config key without a help entry (or a help entry without a key) is an error (exit 1),
so a new key cannot reach the docs undocumented.
"""
import argparse
import pathlib
import sys

from hierarchy.config.reference import render_config_reference

TARGET = pathlib.Path(__file__).resolve().parent.parent / "docs" / "config.md"


def main(argv=None):
    """Write (or, with ``--check``, compare) the config reference.

    Parameters
    ----------
    argv : list of str, optional
        Command-line arguments; default ``sys.argv[1:]``.

    Returns
    -------
    int
        0 when the file is (now) up to date, 1 when ``--check`` finds it differs or the help
        table does not match the config keys.
    """
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only compare; exit 1 if the file differs")
    parser.add_argument("--out", type=pathlib.Path, default=TARGET, help=f"file to write (default {TARGET})")
    args = parser.parse_args(argv)
    try:
        text = render_config_reference()
    except ValueError as error:
        print(f"gen_config_docs: {error}", file=sys.stderr)
        return 1
    if args.check:
        current = args.out.read_text(encoding="utf-8") if args.out.is_file() else None
        if current != text:
            print(f"gen_config_docs: {args.out} is out of date; run `python tools/gen_config_docs.py`",
                  file=sys.stderr)
            return 1
        print(f"{args.out} is up to date")
        return 0
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text, encoding="utf-8")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
