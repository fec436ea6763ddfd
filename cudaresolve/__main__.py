"""`python -m cudaresolve` runs the command line."""

import sys

from cudaresolve.cli import main

sys.exit(main())
