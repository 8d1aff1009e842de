"""python -m stallscope.gui.dialogs.lmdb_wizard [SRC]"""

import sys

from stallscope.gui.dialogs.lmdb_wizard.wizard import main

# guarded: the converter's spawned decoding processes import this module again (as
# __mp_main__) and must not open a wizard of their own
if __name__ == "__main__":
    sys.exit(main())
