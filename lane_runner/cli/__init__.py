"""The command line: argument parsing, the command groups and what they print."""
