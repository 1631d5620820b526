"""``python -m labelgate`` runs the command line."""

from labelgate.cli import main

main()
