"""PyInstaller's entry script for the broker bundle: one executable answering to flux, minicluster and python3."""

from miniclusters.frozen import main

main()
