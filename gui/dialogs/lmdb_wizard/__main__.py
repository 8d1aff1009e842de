"""python -m stallscope.gui.dialogs.lmdb_wizard [SRC]"""

import sys

from stallscope.gui.dialogs.lmdb_wizard.wizard import main

sys.exit(main())
