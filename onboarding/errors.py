"""Exception types of the onboarding command; each message names what is wrong and where."""

from __future__ import annotations


class OnboardingError(RuntimeError):
    """The command cannot do what it was asked (exit code 1)."""


class OnboardingUsageError(OnboardingError):
    """The command line asks for something impossible (exit code 2)."""


class UnsafeNameError(OnboardingError):
    """A name read from the data (topic, table, column, key) is not one this project lets
    reach SQL or YAML."""
