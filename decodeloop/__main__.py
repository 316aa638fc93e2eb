"""`python3 -m decodeloop`: the CLI without installing."""

import sys

from decodeloop.cli import main

sys.exit(main())
