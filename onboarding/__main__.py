"""`python -m onboarding ...`: scaffold silver models for Debezium topics."""

import sys

from onboarding.cli import main

sys.exit(main())
