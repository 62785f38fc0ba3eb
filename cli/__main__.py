"""``python -m elanus.cli`` runs the same command as the ``elanus`` script."""

from elanus.cli.main import main

main()
