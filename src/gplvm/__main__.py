from gplvm.cli import main

raise SystemExit(main())
