from txrl.cli import main

raise SystemExit(main())
