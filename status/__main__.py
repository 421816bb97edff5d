import sys

from status.cli import main

sys.exit(main())
