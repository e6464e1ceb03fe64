"""Every `tfhelm` command, one module each (options.py: the options they share, defined once);
tfhelm/cli.py registers them."""
