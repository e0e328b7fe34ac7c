"""``python -m loopwright``: the command line."""

from loopwright.cli import main

main()
