"""`python -m bot …` is `rubric-bot …`."""

from bot.cli import main

raise SystemExit(main())
