"""The ``mobileperf`` command line: ``parser`` (its arguments and ``main``), ``commands`` (one function per
subcommand), ``shell`` (a command as the user can paste it)."""
