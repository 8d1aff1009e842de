"""Entry point of the packaged app (PyInstaller runs this file as __main__)."""

import sys

from stallscope.gui.app import main

if __name__ == "__main__":
    sys.exit(main())
