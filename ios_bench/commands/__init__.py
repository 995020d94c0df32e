"""One module per ``ios-bench`` subcommand; each defines ``command``."""
