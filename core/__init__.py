"""What every package of the project shares: how a process starts Spark (`spark`), the
lakehouse's lock (`lock`), the checks a name from data passes before it reaches SQL
(`identifiers`), the exit codes (`exit_codes`) and how a command runs (`cli`)."""
