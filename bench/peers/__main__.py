"""`python -m bench.peers` (the same as `python -m bench peers`)."""

from bench.peers import main

raise SystemExit(main())
