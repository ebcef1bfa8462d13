"""`python -m bot …` is `rubric-bot …`."""

from bot.cli.main import main

raise SystemExit(main())
