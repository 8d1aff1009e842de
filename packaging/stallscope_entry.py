"""Entry point of the packaged app (PyInstaller runs this file as __main__)."""

import multiprocessing
import sys

if __name__ == "__main__":
    multiprocessing.freeze_support()  # worker processes of a frozen app re-enter here
    from stallscope.gui.app import main

    sys.exit(main())
